"""Table model: measured steps/s per (job type, GPU type, GPU count, consolidated or not).

Lookup order for `rate(job, gpu_type, n, nodes, consolidated)`:
1. measured: Gavel's table has (job type, n, gpu_type) -> MEASURED;
2. bootstrapped: the job type is measured on the reference GPU type (or another measured type):
   carry it over by the ratio of generic GPU speeds -> BOOTSTRAPPED;
3. estimated: unknown job type: the job's own reference rate (steps per reference-second)
   times the generic speed ratio -> ESTIMATED.
Counts other than the measured scale factors scale from the nearest measured count with a
sub-linear exponent (SCALING_EXPONENT). A job that is not consolidated (spread over more nodes than it needs) runs at the
measured unconsolidated/consolidated ratio where Gavel measured it, else UNCONSOLIDATED_FACTOR.
Never a silent zero: a measured 0 (infeasible, e.g. out of memory) is kept and reported as such.

Gradient accumulation (for sharing a GPU when a pair does not fit in memory): a job of type
"M (batch size B)" may run its global batch B as k micro-batches of B/k wherever Gavel measured the
same model at batch B/k. Its memory is that of "M (batch size B/k)" (activations scale with the
micro-batch; weights, gradients and optimizer state are the same), so the pair fits iff the measured
pair with the smaller type fits. Its speed in global steps/s is the measured steps/s at B/k divided
by k. That counts one optimizer step per micro-batch where accumulation has one per k, so it slightly
under-states the speed [U: conservative; the optimizer step of these models is a small part of an
iteration]. Packed beside another job, both sides take the measured pair slowdown of the smaller
type with the other job. The drivers charge it through the job's ExecutionPlan (ga_steps = k): `rate_with`
and `shared_rate(..., plan, other_plan)` take the micro-batch type that k gives (k = 1 or a k the
catalog did not measure: the job's own type).

Model sizes (`model_bytes`, for HadarE's model averaging): fp32 parameters of each Gavel family,
MODEL_PARAMS_M below.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from quanta.model.gpu import gpu_type as lookup_gpu
from quanta.model.job import JobSpec
from quanta.perf.base import Provenance
from quanta.perf.gavel_table import GavelTable, gavel_table

PACK_FACTOR = 0.56         # a packed job's speed vs alone when its pair is not measured: the median
                           # over Gavel's 2,028 measured pairs (10th-90th percentile 0.28-0.83)
SLICE_OVERHEAD = 0.1 / 60  # time-slicing: ~100 ms suspend/resume per 60 s quantum (Gandiva)
SCALING_EXPONENT = 0.75       # rate(n) = rate(n0) * (n/n0)**0.75 between measured counts: the
                              # least-squares exponent over Gavel's measured scale factors 2/4/8
UNCONSOLIDATED_FACTOR = 0.85  # spread penalty when not measured (estimate; Gavel's median is ~0.8)


# millions of parameters per Gavel model family (fp32 weights are averaged between HadarE copies).
# ResNet-18/50 (torchvision), CycleGAN (2 ResNet generators + 2 PatchGAN discriminators): the
# published counts; the others are [U] estimates of Gavel's configurations (Transformer base on
# Multi30k, 2-layer LSTM LM on WikiText-2, the ML-20M autoencoder, A3C on Atari Pong).
MODEL_PARAMS_M = {"ResNet-18": 11.7, "ResNet-50": 25.6, "CycleGAN": 28.3, "Transformer": 65.0,
                  "LM": 30.0, "Recommendation": 20.0, "A3C": 1.0}
DEFAULT_PARAMS_M = 25.0   # a job of unknown model [U]


def micro_type(table: "TableModel", job: JobSpec, plan) -> tuple[int, str]:
    """(k, job type of the micro-batch) that `plan` asks of `job`: (1, own type) unless the plan
    accumulates over a k whose micro-batch the catalog measured."""
    k = int(getattr(plan, "ga_steps", 1) or 1) if plan is not None else 1
    if k > 1:
        steps = dict(table.accumulation_steps(job.job_type))
        if k in steps:
            return k, steps[k]
    return 1, job.job_type


class TableModel:
    def __init__(self, table: GavelTable | None = None):
        self.table = table if table is not None else gavel_table()
        self._known_types = {k[0] for k in self.table.alone}
        self._measured_gpus = {k[2] for k in self.table.alone}
        self._cache: dict[tuple, tuple[float, Provenance]] = {}
        self._pack_cache: dict[tuple[str, str, str], float] = {}
        self._accum_cache: dict[str, list[tuple[int, str]]] = {}

    # -- public contract ---------------------------------------------------------------------
    def rate(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
             consolidated: bool | None = None) -> float:
        spread = (num_nodes > 1) if consolidated is None else not consolidated
        return self._lookup(job, gpu_type, num_gpus, spread)[0]

    def provenance(self, job: JobSpec, gpu_type: str) -> Provenance:
        return self._lookup(job, gpu_type, job.num_gpus, False)[1]

    def rate_matrix(self, jobs: Sequence[JobSpec], types: Sequence[str]) -> np.ndarray:
        # one row per kind of job (what _lookup's key holds of the job), looked up once
        rows: dict[tuple[str, int, str], list[float]] = {}
        out = []
        for job in jobs:
            kind = (job.job_type, job.num_gpus, job.reference_gpu)
            row = rows.get(kind)
            if row is None:
                row = rows[kind] = [self._lookup(job, t, job.num_gpus, False)[0] for t in types]
            out.append(row)
        return np.array(out, dtype=float).reshape(len(jobs), len(types))

    def rate_with(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
                  consolidated: bool | None = None, plan=None, cpus: float = 0.0,
                  mem_gb: float = 0.0, net_gbps: float = 0.0) -> float:
        """Steps/s at a plan: its gradient accumulation (ga_steps) is charged; CPUs, host
        memory and network bandwidth are not modelled here."""
        k, micro = micro_type(self, job, plan)
        return self.accumulated_rate(job, k, micro, gpu_type, num_gpus, num_nodes, consolidated)

    def shared_rate(self, job: JobSpec, other: JobSpec, gpu_type: str, num_gpus: int,
                    num_nodes: int = 1, consolidated: bool | None = None, mode: str = "pack",
                    plan=None, other_plan=None) -> float:
        """Steps/s of `job` while `other` shares its GPUs: time-sliced (each gets half the time,
        less the switching overhead) or packed (both run at once: the measured co-location
        slowdown of the pair at one GPU where Gavel measured it, else PACK_FACTOR). Each job at
        its plan: an accumulating one runs (and takes the memory and slowdown of) its micro-batch."""
        k, mine = micro_type(self, job, plan)
        alone = self.accumulated_rate(job, k, mine, gpu_type, num_gpus, num_nodes, consolidated)
        if mode == "slice":
            return alone * 0.5 * (1.0 - SLICE_OVERHEAD)
        theirs = micro_type(self, other, other_plan)[1]
        return alone * self.pack_slowdown(mine, theirs, gpu_type)

    def model_bytes(self, job: JobSpec) -> float:
        """Bytes of the job's fp32 parameters (MODEL_PARAMS_M by model family)."""
        from quanta.workloads.catalog import _family_batch   # (lazy: workloads imports perf)
        family = _family_batch(job.job_type)[0]
        return 4e6 * MODEL_PARAMS_M.get(family, DEFAULT_PARAMS_M)

    def pack_slowdown(self, a: str, b: str, gpu_type: str) -> float:
        """Speed of job type `a` packed with `b`, relative to `a` alone (measured on 1 GPU);
        0 when the two do not fit in the GPU's memory together (see fits_together)."""
        key = (a, b, gpu_type)
        hit = self._pack_cache.get(key)
        if hit is None:
            gpu = gpu_type if gpu_type in self._measured_gpus else "v100"
            pair = self.table.pairs.get((a, b, gpu))
            alone = self.table.alone.get((a, 1, gpu), 0.0)
            if not self.fits_together(a, b, gpu_type):
                hit = 0.0
            elif pair and alone > 0 and pair[0] > 0:
                hit = pair[0] / alone
            else:
                hit = PACK_FACTOR
            self._pack_cache[key] = hit
        return hit

    def fits_together(self, a: str, b: str, gpu_type: str) -> bool:
        """Do job types a and b fit in one GPU's memory together?

        Gavel measured every pair of its single-GPU types on V100 (16 GB), P100 (16 GB) and K80
        (12 GB); a measured 0 means they did not fit. On a measured type that answer is used as
        is. On another type: a pair that fits on a measured GPU with no more memory fits; a pair
        that did not fit is assumed to fit only with at least twice the memory (a pair uses at
        most two single-job footprints, each of which fit alone). Unmeasured pairs: assumed to fit
        (the table has no footprint for them; the runtime's measurements will tell)."""
        mem = lookup_gpu(gpu_type).memory_gb
        known = [(lookup_gpu(g).memory_gb, pair) for g in sorted(self._measured_gpus)
                 if (pair := self.table.pairs.get((a, b, g))) is not None]
        if not known:
            return True
        if gpu_type in self._measured_gpus:
            pair = self.table.pairs.get((a, b, gpu_type))
            if pair is not None:
                return pair[0] > 0 and pair[1] > 0
        if any(m <= mem and p[0] > 0 and p[1] > 0 for m, p in known):
            return True
        return mem >= 2 * max(m for m, _ in known)

    # -- gradient accumulation ---------------------------------------------------------------
    def accumulation_steps(self, job_type: str) -> list[tuple[int, str]]:
        """Ways to run `job_type` with its global batch unchanged: (k, job type of the micro-batch
        B/k) for k = 1 (the job itself) and every k > 1 whose micro-batch Gavel measured."""
        hit = self._accum_cache.get(job_type)
        if hit is None:
            from quanta.workloads.catalog import _family_batch   # (lazy: workloads imports perf)
            family, batch = _family_batch(job_type)
            hit = [(1, job_type)]
            if batch and job_type in self._known_types:
                subs = []
                for other in self._known_types:
                    fam, b = _family_batch(other)
                    if fam == family and 0 < b < batch and batch % b == 0:
                        subs.append((batch // b, other))
                hit += sorted(subs)
            self._accum_cache[job_type] = hit
        return hit

    def accumulated_rate(self, job: JobSpec, k: int, micro_type: str, gpu_type: str, num_gpus: int,
                         num_nodes: int = 1, consolidated: bool | None = None) -> float:
        """Global-batch steps/s of `job` run alone as k micro-batches of `micro_type`."""
        if k == 1:
            return self.rate(job, gpu_type, num_gpus, num_nodes, consolidated)
        return self.rate(job.with_(job_type=micro_type), gpu_type, num_gpus, num_nodes,
                         consolidated) / k

    # -- internals ---------------------------------------------------------------------------
    def _lookup(self, job: JobSpec, gpu: str, n: int, spread: bool) -> tuple[float, Provenance]:
        key = (job.job_type, job.num_gpus, job.reference_gpu, gpu, n, spread)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._compute(job, gpu, n, spread)
            self._cache[key] = hit
        return hit

    def _compute(self, job: JobSpec, gpu: str, n: int, spread: bool) -> tuple[float, Provenance]:
        if n <= 0:
            return 0.0, Provenance.MEASURED
        gpu = lookup_gpu(gpu).name
        if job.job_type in self._known_types:
            base_gpu, prov = gpu, Provenance.MEASURED
            if gpu not in self._measured_gpus:
                base_gpu, prov = job.reference_gpu if job.reference_gpu in self._measured_gpus \
                    else "v100", Provenance.BOOTSTRAPPED
            rate = self._measured(job.job_type, base_gpu, n, spread)
            if base_gpu != gpu:
                rate *= lookup_gpu(gpu).speed / lookup_gpu(base_gpu).speed
            return rate, prov
        # Unknown job type: one step = one second of the job on its reference allocation.
        ratio = lookup_gpu(gpu).speed / lookup_gpu(job.reference_gpu).speed
        scale = (n / job.num_gpus) ** SCALING_EXPONENT if job.num_gpus else 1.0
        penalty = UNCONSOLIDATED_FACTOR if spread else 1.0
        return ratio * scale * penalty, Provenance.ESTIMATED

    def _measured(self, job_type: str, gpu: str, n: int, spread: bool) -> float:
        sfs = self.table.scale_factors(job_type)
        sf = max([s for s in sfs if s <= n] or [min(sfs)])
        rate = self.table.alone.get((job_type, sf, gpu), 0.0)
        if sf != n:
            rate *= (n / sf) ** SCALING_EXPONENT
        if spread:
            cons = self.table.alone.get((job_type, sf, gpu), 0.0)
            unc = self.table.unconsolidated.get((job_type, sf, gpu))
            # A spread job never beats a consolidated one (a few measured entries say so: noise).
            rate *= min(unc / cons, 1.0) if (unc and cons) else UNCONSOLIDATED_FACTOR
        return rate


def table_for(perf, *jobs: JobSpec) -> TableModel | None:
    """The TableModel that answers for every one of `jobs` under `perf` (a TableModel itself, or a
    model that routes jobs with `model_for`, such as the CatalogModel); None if there is none."""
    if isinstance(perf, TableModel):
        return perf
    route = getattr(perf, "model_for", None)
    if route is None:
        return None
    models = {id(route(j)): route(j) for j in jobs}
    only = next(iter(models.values())) if len(models) == 1 else None
    return only if isinstance(only, TableModel) else None
