"""Rubick's jobs at their measured throughput where the artifact measured it.

Rubick's simulator (AlibabaPAI/reconfigurable-dl-scheduler @ 80e8524) runs every job at the
measured iteration time of its placement and plan (simulator/job.py:165-171 ->
sched/applications.py:101-130, the rows of simulator/traces/<model>/placements.csv, bundled here
as quanta/data/profiles/rubick/placements/<model>.csv), while its policy decides on the fitted
model. `MeasuredPlanPerf` does the first half: wrapped around Quanta's catalog model, a plan-model
job whose (plan, placement) has a measured row runs at 1 / that row's iteration time; everything
else is the base model's answer (the fitted model for other plans and placements; Gavel's table
and the goodput model for other jobs). Deciding on the fitted model is
quanta.policies.decide_on.DecideOn's half.

Matching is the artifact's exact step only: the placement (GPUs per node, as the plan model lays
the allocation out: whole nodes first, or spread over the nodes given) normalised to its
lexicographically smallest rotation (applications.py:104-106), and the plan's label (ga, gc,
zero-dp, zero-offload, or PP/TP/DP digits); the first matching row, as the artifact takes
`df[ys].values[0]`. The artifact's further fallbacks (that placement's `ga` row for another plan,
then an interpolation over nodes and GPUs across plans) are not used: there the fitted model
answers. CPU threads, host memory and network reservations do not change a measured rate (the
artifact's get_throughput ignores them); a plan the base model says cannot run there (0) stays 0.
Measured rows are A800 runs: other GPU types get the base model's rate.

`hits` / `misses` count the rate queries answered from a measured row or not, and `ratios`
keeps measured / fitted for each hit (bench/repro_rubick.py reports them).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from quanta.model.job import JobSpec
from quanta.perf.base import ADAPTIVE_BATCH, rate_with, rates_on
from quanta.perf.plan import ExecutionPlan
from quanta.perf.plan_perf import REFERENCE_TYPE, PlanPerf
from quanta.perf.plan_evidence import plan_perf_of


def canonical(nodes) -> tuple[int, ...]:
    """The artifact's placement key: GPUs per node without empty nodes, smallest rotation."""
    pl = tuple(int(x) for x in nodes if x)
    return min(pl[i:] + pl[:i] for i in range(len(pl))) if pl else ()


@cache
def measured_ms(family: str) -> dict[tuple[str, tuple[int, ...]], float]:
    """(plan label, canonical placement) -> measured iteration time (ms), first row wins."""
    from quanta.perf.plan_fit import placement_samples
    out: dict[tuple[str, tuple[int, ...]], float] = {}
    try:
        rows = placement_samples(family)
    except FileNotFoundError:
        return out
    for s in rows:
        out.setdefault((s.plan.label(), canonical(s.nodes)), float(s.iter_ms))
    return out


class MeasuredPlanPerf:
    def __init__(self, base):
        self.base = base
        self.hits = 0
        self.misses = 0
        self.ratios: list[float] = []

    def __getattr__(self, name):          # best_plan_rate, host_memory_gb, provenance, ...
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def reset_counts(self) -> None:
        self.hits, self.misses, self.ratios = 0, 0, []

    def measured_rate(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
                      consolidated: bool | None = None, plan=None) -> float | None:
        """Steps/s from the artifact's measured row for this allocation and plan (None: the job
        type, plan or placement has none). `plan` None: the plan the plan model would run (the
        job's own where it fits, else the best)."""
        if num_gpus <= 0 or gpu_type.lower() not in (REFERENCE_TYPE, "a800-80gb"):
            return None
        if isinstance(plan, str) and plan.startswith(ADAPTIVE_BATCH):
            plan = None             # what the catalog model does for plan-model jobs
        pp = plan_perf_of(self.base, job)
        if pp is None:
            return None
        fam = pp.family(job.job_type)
        res = PlanPerf._resources(job, num_gpus, num_nodes, consolidated, 0.0, 0.0)
        p = _resolve(pp, fam, job, res, plan)
        if p is None:
            return None
        ms = measured_ms(fam).get((p.label(), canonical(res.nodes())))
        return None if ms is None or ms <= 0 else 1000.0 / ms

    def rate_with(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None, plan=None,
                  cpus=0.0, mem_gb=0.0, net_gbps=0.0):
        fitted = rate_with(self.base, job, gpu_type, num_gpus, num_nodes, consolidated, plan, cpus,
                           mem_gb, net_gbps)
        if fitted <= 0:
            return fitted
        m = self.measured_rate(job, gpu_type, num_gpus, num_nodes, consolidated, plan)
        if m is None:
            self.misses += 1
            return fitted
        self.hits += 1
        self.ratios.append(m / fitted)
        return m

    def rate(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None):
        return self.rate_with(job, gpu_type, num_gpus, num_nodes, consolidated)

    @property
    def per_node_rates(self) -> bool:
        return getattr(self.base, "per_node_rates", False)

    def rate_matrix(self, jobs, types, per_node=None):
        """(Its measurements are of Rubick's 8-GPU servers, as PlanPerf's plans: `per_node` goes
        to the base model only.)"""
        out = np.array(rates_on(self.base, jobs, types, per_node), dtype=float)
        for i, job in enumerate(jobs):
            for k, t in enumerate(types):
                if out[i, k] > 0:
                    n = int(job.num_gpus)
                    m = self.measured_rate(job, t, n, -(-n // 8), True)
                    if m is not None:
                        out[i, k] = m
        return out


def _resolve(pp: PlanPerf, fam: str, job: JobSpec, res, plan) -> ExecutionPlan | None:
    """The plan PlanPerf runs on `res` (None where it runs none or `plan` is malformed)."""
    try:
        return PlanPerf.plan_for(pp.models[fam], job, res, plan)
    except ValueError:
        return None
