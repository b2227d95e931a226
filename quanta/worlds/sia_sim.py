"""`sia-sim`: the world of Sia's simulator (siasosp23/artifacts, sia-simulator @ aaf7a0d).

Everything here is read from that code; paths are relative to sia-simulator/.
- Restarts: every change of a job's placement, its first start included, stops it for its
  application's checkpoint-restore time: cifar10 50 s, deepspeech2 25 s, bert 120 s, yolov3 80 s,
  imagenet 250 s, ncf 15 s, others 30 s (applications.py:58-71; job.py `reallocate` and
  `migrate` set `rescale_time` whenever the placement changes, the first time too).
- Throughput source: the measured placement profiles of Sia's artifact, interpolated as its
  simulator does (applications.py:247-292; `MeasuredPerf`), not Quanta's fitted model (which
  misses e.g. imagenet's 2-node sync cost at large batches by ~25%); a job's batch is split
  within the largest atomic batch profiled for its placement (applications.py:310-324,
  job.py:317-385; `MeasuredPerf.split`).
- Clock: rounds at multiples of the interval from the workload's own time 0, a job seen from
  the first round at or after its submission (cluster.py:340-354; `keep_clock`).
- The Gavel baseline's mechanism (gavel.py; sia.md section 16): ECOS's X rounded to 5 decimals,
  priorities X / (the job's time on the type / every job's time on it), ties type by type
  (`gavel-throughput` parameters pinned below), and its predicted iterations per second
  (gavel.py:515-546; `MeasuredPerf.iteration_rate`).
- The Gavel baseline's workers (gavel.py:332-428): per type, largest jobs first, a job keeping
  its GPUs unless a larger one took one, the others served server by server from a forward-only
  pointer, so a job may span more servers than it needs (`gavel-throughput:workers=gavel`).
- Throughput on the real placement (applications.py:247-292): a job whose GPUs are not whole
  nodes first is rated on its GPUs per node (`MeasuredPerf.rate_at_shape`, asked by the engine:
  sim/shapes.py); Sia's and Pollux's job agents rate by GPU and node counts.
- A move to other GPUs of the same type with the same GPUs per node is free (job.py:524-542
  reallocate compares only the per-node counts: `RestartCost.same_shape_free`).
- What Sia's policy knows (`sia` policy parameters pinned below; sia.md section 9): its goodput
  estimates tune the batch only up to the job's requested batch (job.py:249 `max_batch_size =
  target_batch_size`: batch_cap); a job still restoring a checkpoint keeps its allocation
  (cluster.py:424-425 with simulator_config.py:27 preserve_ckpt_allocs: pin_restoring); the
  restart penalty is per application (sia.py:21-35: penalty_by_app) and counts restarts after
  the first start (job.py:537-542: first_start_counted, as the world charges the first start);
  each cost term is rounded to 2 decimals (sia.py:908-913: decimals); each job's throughput
  model is Pollux's fit of the points it has trained on, per GPU type, projected to other types
  by the ratio of 1-GPU throughputs (job.py:397-412 update_params, goodput.py:149-208,
  sia.py:423-507 with --project_throughputs; type order aws, dgx-ext, rtx from
  simulator_config.py:11: learn, project_order), each type's taken from its own measured
  placement rows (cluster.py:227-276; `MeasuredPerf.atomic_throughput`); where optimal
  allocations tie, a MILP solver stopping within a 1e-4 relative gap picks, as the reference's
  CBC call does (sia.py:1034-1036, simulator_config.py:62 sia_solver_thresh): HiGHS' MILP, not
  Quanta's exact search, which may pick another (ties=milp; the same for Pollux's programme,
  reachable as `pollux:search=ilp`).
- Throughput: every job runs slower than its profile by its application's calibration slowdown
  ("fitted to real-world data"): cifar10 1.8, imagenet 1.2, yolov3 1.2, bert 1.2,
  deepspeech2 1.2, ncf 1.5 (simulator_config.py SLOWDOWNS; job.py `calibration_factor` =
  1 / slowdown multiplies the goodput in `step`, and Gavel's throughputs in `get_throughputs`).
- Goodput, epochs and completion: the gradient statistics of the current epoch at the batch in
  use, progress counted in M0 steps, a job done at the end of its last epoch (job.py `step`,
  applications.py `get_grad_stats`, `get_progress`). Quanta's goodput model does the same in
  every world (GoodputPerf).
- The batch a Sia or Pollux job runs at: its own agent's choice, from Pollux's fit of the points
  it has trained on (job.py:317-412; `sia_agents.LearningJobs`, built per run by `run_perf`),
  not the best batch of the world's model; the learning policies read the same profiles.
- NCF under Sia: global batch 32,768 and rigid at 1 GPU (cluster.py:71-73 sets the batch,
  `get_sia_multi_job_info` caps its replicas at 1 and marks it rigid).
- Rounds and policies as in the paper's runs (run_experiment.sh): Sia every 60 s with p = -0.5,
  lambda_n = 1.1 and the 2x cap shared across types (--share_max_replicas); Gavel
  (max_sum_throughput_perf, simulator_config.py `gavel_default_policy`) every 360 s; Pollux
  heterogeneity-unaware every 60 s with p = -1. Quanta's defaults for these policies already
  are these values; they are pinned here so that a change of default does not move the replay.
- What Pollux's policy knows (`pollux` parameters pinned below; sia.md section 13): each job
  only through Pollux's fit of the points it trained on, one model for every GPU type
  (job.py:388-412 with h_unaware: learn); speedups relative to the job's fair share with
  Pollux's 1e-3 floor (pollux_unaware.py:247-260, 319-341: fair_share); at most 16 GPUs, the
  smallest type's (multi_simulator_unaware.py:36-41: type_cap); restarts counted after the
  first start (job.py:537-542: first_start_counted); its search is the reference's, the genetic
  algorithm over virtual nodes (pollux_unaware.py:117-424: search=ga, population and
  generations as the reference's, drawing from the run's seed), each round's search seeded
  from the previous front paired with the jobs by position, as the reference does although it
  re-sorts its jobs every round (pollux_unaware.py:65-85, 140-143: carry=position; sia.md
  section 25). Quanta's exact programme stays
  reachable as `pollux:search=ilp` (sia.md section 18: with the jobs' own batch it runs the
  short jobs 10-15% faster than the reference; the search reproduces them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from quanta.model.job import JobSpec
from quanta.perf.goodput_data import CLUSTER_OF_TYPE, GPUS_PER_NODE, SIA_POLLUX_DIR
from quanta.sim.engine import RestartCost
from quanta.worlds import World, world

RESCALE_S = {"cifar10": 50.0, "deepspeech2": 25.0, "bert": 120.0, "yolov3": 80.0,
             "imagenet": 250.0, "ncf": 15.0}
DEFAULT_RESCALE_S = 30.0
SLOWDOWNS = {"cifar10": 1.8, "imagenet": 1.2, "yolov3": 1.2, "bert": 1.2, "deepspeech2": 1.2,
             "ncf": 1.5}
NCF_BATCH = 32768


class SlowedPerf:
    """A performance model whose rates are the base model's divided by each job type's slowdown
    (1 for types not listed); everything else is the base model's."""

    def __init__(self, base, slowdowns: dict[str, float]):
        self.base = base
        self.slowdowns = dict(slowdowns)

    def _f(self, job: JobSpec) -> float:
        return 1.0 / self.slowdowns.get(job.job_type.lower(), 1.0)

    def rate(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None):
        return self._f(job) * self.base.rate(job, gpu_type, num_gpus, num_nodes, consolidated)

    def rate_with(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None, plan=None,
                  cpus=0.0, mem_gb=0.0, net_gbps=0.0):
        from quanta.perf.base import rate_with
        return self._f(job) * rate_with(self.base, job, gpu_type, num_gpus, num_nodes,
                                        consolidated, plan, cpus, mem_gb, net_gbps)

    @property
    def per_node_rates(self) -> bool:
        return getattr(self.base, "per_node_rates", False)

    def rate_matrix(self, jobs, types, per_node=None):
        import numpy as np

        from quanta.perf.base import rates_on
        f = np.array([self._f(j) for j in jobs])
        return rates_on(self.base, jobs, types, per_node) * f[:, None]

    def shared_rate(self, job, other, gpu_type, num_gpus, num_nodes=1, consolidated=None,
                    mode="pack", **kw):
        return self._f(job) * self.base.shared_rate(job, other, gpu_type, num_gpus, num_nodes,
                                                    consolidated, mode, **kw)

    def rate_at_shape(self, job, gpu_type, shape, plan=None):
        got = getattr(self.base, "rate_at_shape", None)
        r = None if got is None else got(job, gpu_type, shape, plan)
        return None if r is None else self._f(job) * r

    def iteration_rate(self, job, gpu_type, num_gpus):
        got = getattr(self.base, "iteration_rate", None)
        r = None if got is None else got(job, gpu_type, num_gpus)
        return None if r is None else self._f(job) * r

    def __getattr__(self, name):          # provenance, phase_fractions, work_steps, ...
        return getattr(self.base, name)


class MeasuredPerf:
    """The throughput of Sia's simulator: the measured profiles themselves, not a fitted model
    (applications.py:247-292 `get_throughput`). For a Pollux/Sia application on an allocation of
    K GPUs over N nodes (whole nodes first, as Sia's configurations are), the placement is
    normalised to its lexicographically smallest rotation; if that placement was profiled, the
    step and sync times are interpolated linearly in the atomic batch (repeated measurements of
    one batch averaged; outside the profiled batches there is no answer); otherwise linearly
    over (nodes <= 16, replicas, atomic batch) through the placement rows averaged by those keys
    and the scalability rows. Iteration time = step + (step - sync) x accumulation steps
    (job.py:467-479). Which atomic batch and accumulation the job runs at is the base model's
    choice (its agent's; with the plan ADAPTIVE_BATCH re-tuned, else the job's own batch split
    over its GPUs); statistical efficiency is the base model's (the validation runs). Where the
    profiles give no answer, the base model's rate stands. Other jobs: the base model."""

    def __init__(self, base):
        self.base = base
        self._cache: dict[tuple, float] = {}
        self._tables: dict[tuple[str, str], tuple] = {}

    def __getattr__(self, name):
        return getattr(self.base, name)

    # -- the measured tables ----------------------------------------------------------------
    def _table(self, app: str, gpu_type: str):
        key = (app, gpu_type)
        hit = self._tables.get(key)
        if hit is None:
            hit = self._tables[key] = _load_measured(app, gpu_type)
        return hit

    def step_sync(self, app: str, gpu_type: str, placement: tuple[int, ...], local_bsz: float
                  ) -> tuple[float, float] | None:
        tab = self._table(app, gpu_type)
        if tab is None:
            return None
        exact, nd = tab.exact, tab.nd
        pid = _placement_id(placement)
        if pid in exact:
            xs, st, sy = exact[pid]
            if not xs[0] <= local_bsz <= xs[-1]:
                return None
            return float(np.interp(local_bsz, xs, st)), float(np.interp(local_bsz, xs, sy))
        pl = [x for x in placement if x]
        v = nd([min(len(pl), 16), sum(pl), local_bsz])[0]
        if not np.all(np.isfinite(v)):
            return None
        return float(v[0]), float(v[1])

    def split(self, app: str, gpu_type: str, placement: tuple[int, ...], batch: int,
              predicted: bool = False) -> tuple[int, int] | None:
        """(atomic batch, accumulation steps) of a job that keeps its own global batch on this
        placement, as Sia's simulator splits it: the per-GPU batch over at most the largest
        atomic batch profiled for the placement (applications.py:310-324 get_max_local_bsz:
        that placement's rows, else the scalability rows with at least as many nodes and
        replicas), one accumulation step at least on 1 GPU beyond the initial batch, the atomic
        batch then capped by the largest one profiled at that many replicas (memory) and by the
        application's largest batch (job.py:366-385 update_local_bsz). `predicted`: the split
        the Gavel baseline's throughput estimate assumes instead (gavel.py:527-535: at least one
        accumulation step on 1 GPU whatever the batch, no memory cap)."""
        tab = self._table(app, gpu_type)
        if tab is None:
            return None
        from quanta.perf.goodput import split_batch
        p = self.base.goodput.catalog[app].profile(gpu_type)
        k = sum(placement)
        most = tab.max_local(placement)
        if most is None:
            return None
        return split_batch(batch, k, most, p.init_batch, p.max_batch, always_step=predicted,
                           atomic_cap=None if predicted else tab.max_by_replicas.get(k))

    def atomic_throughput(self, job: JobSpec, gpu_type: str) -> float | None:
        """Samples/s on one GPU of the type that Sia's policy projects a job's learned
        throughput between types with (--project_throughputs: the ratio of two types' values,
        sia.py:484-486): from the type's own measured 1-GPU placement rows, the largest batch
        over the largest step time (cluster.py:227-276 compute_throughput_ratios). Quanta's own
        world bootstraps from the artifact's seed profiles instead (`traces/seed/`, whose A100
        rows are the smaller `dgx` profiles: yolov3 A100/T4 2.91 there against 2.03 here)."""
        from quanta.perf.goodput import canonical_type
        app = self._goodput_app(job)
        tab = None if app is None else self._table(app, canonical_type(gpu_type))
        if tab is None or tab.atomic <= 0:
            return self.base.atomic_throughput(job, gpu_type)
        return tab.atomic

    def iteration_rate(self, job: JobSpec, gpu_type: str, num_gpus: int) -> float | None:
        """Iterations per second that Sia's simulator's Gavel baseline predicts for the job on
        `num_gpus` GPUs of the type, whole nodes first, at its own batch (gavel.py:515-546;
        calibration slowdowns are SlowedPerf's). None where the profiles give no answer."""
        app = self._goodput_app(job)
        if app is None or num_gpus <= 0:
            return None
        from quanta.perf.goodput import canonical_type
        got = self._config(job, app, canonical_type(gpu_type), num_gpus, 2, False, predicted=True)
        if got is None:
            return None
        _, _m, s, (step, sync) = got
        return 1.0 / (step + (step - sync) * s)

    # -- PerfModel ----------------------------------------------------------------------------
    def _goodput_app(self, job: JobSpec):
        gp = self.base.goodput
        return gp._app(job) if self.base.model_for(job) is gp else None

    def knows(self, app: str, t: str) -> bool:
        """Whether the measured profiles cover the application on GPU type t."""
        return CLUSTER_OF_TYPE.get(t) is not None and self.base.goodput._profiled(app, t) \
            and self._table(app, t) is not None

    def _config(self, job, app: str, t: str, num_gpus: int, num_nodes: int, adaptive: bool,
                predicted: bool = False
                ) -> tuple[tuple[int, ...], int, int, tuple[float, float]] | None:
        """`config_at` the placement Sia's simulator gives `num_gpus` GPUs of type t over
        `num_nodes` nodes (whole nodes first, `_shape`), the best batch tuned for one node or
        several."""
        if not self.knows(app, t):
            return None
        shape = _shape(num_gpus, num_nodes, GPUS_PER_NODE.get(t, 8))
        return self.config_at(job, app, t, shape, 2 if num_nodes > 1 and num_gpus > 1 else 1,
                              adaptive, predicted)

    def config_at(self, job, app: str, t: str, shape: tuple[int, ...], nodes: int,
                  adaptive: bool, predicted: bool = False, batch: int | None = None
                  ) -> tuple[tuple[int, ...], int, int, tuple[float, float]] | None:
        """(placement, atomic batch, accumulation steps, (step, sync) times) of the job on the
        placement `shape` (GPUs per node) of type t, as Sia's simulator runs it (job.py:317-385
        update_local_bsz): a global batch split over its GPUs (`split`: `batch`, default the
        job's own), or with `adaptive` the goodput-best batch for `nodes` nodes within the
        placement's atomic batches, then capped (`cap_atomic`); `predicted`: the split the Gavel
        baseline's estimate assumes. None where the profiles give no answer."""
        model = self.base.goodput.catalog[app]
        tab = self._table(app, t)
        k = sum(shape)
        if adaptive:
            m, s = model.best_config(t, nodes, k, epoch=_epoch(model, job),
                                     max_local=tab.max_local(shape))[:2]
            m = self.cap_atomic(app, t, k, m, s)
        else:
            got = self.split(app, t, shape, batch or job.batch_size or model.init_batch,
                             predicted)
            if got is None:
                return None
            m, s = got
        ss = self.step_sync(app, t, shape, m)
        return None if ss is None else (shape, m, s, ss)

    def cap_atomic(self, app: str, t: str, k: int, m: int, s: int) -> int:
        """A tuned atomic batch on k GPUs with s accumulation steps, capped by the largest one
        profiled at k replicas (memory) and by the application's largest batch (job.py:375-385)."""
        return min(m, self._table(app, t).max_by_replicas.get(k, m),
                   int(self.base.goodput.catalog[app].profile(t).max_batch / (k * (s + 1))))

    def progress_rate(self, job, app: str, shape: tuple[int, ...], m: int, s: int,
                      step: float, sync: float) -> tuple[float, tuple[float, float]]:
        """(progress per second, (sqr, var)) of the job at atomic batch m with s accumulation
        steps on the placement, from its measured step and sync times (iteration = step +
        (step - sync) x s, job.py:467-479), before the calibration slowdown."""
        gain, stats = self.gain(job, app, sum(shape) * m * (s + 1))
        return gain / (step + (step - sync) * s), stats

    def gain(self, job, app: str, batch: int) -> tuple[float, tuple[float, float]]:
        """(progress per iteration, (sqr, var)) of the job at global batch `batch`: the gradient
        statistics of its current epoch at that batch and their gain (job.py:453-456)."""
        from quanta.perf.goodput import efficiency
        model = self.base.goodput.catalog[app]
        sqr, var = model.noise.at_epoch(_epoch(model, job), batch)
        gain = float(efficiency(sqr, var, model.init_batch, batch)) * batch / model.init_batch
        return gain, (float(sqr), float(var))

    def _measured_app(self, job, plan):
        """The job's application where the measured profiles rate it at this plan, else None (a
        scheduler's capped estimate, plan "<= B", is the base model's)."""
        app = self._goodput_app(job)
        return None if app is None or (plan is not None and "<=" in str(plan)) else app

    def _progress_on(self, job, app: str, t: str, shape: tuple[int, ...], nodes: int, plan
                     ) -> float | None:
        """Progress per second of the job on the placement `shape` of type t (the batch tuned
        for `nodes` nodes with an adaptive plan), or None where the profiles give no answer."""
        from quanta.perf.base import is_adaptive
        if not self.knows(app, t):
            return None
        got = self.config_at(job, app, t, shape, nodes, is_adaptive(plan))
        if got is None:
            return None
        shape, m, s, (step, sync) = got
        return self.progress_rate(job, app, shape, m, s, step, sync)[0]

    def _cached(self, key: tuple, compute) -> float | None:
        hit = self._cache.get(key, -1.0)
        if hit == -1.0:
            hit = self._cache[key] = compute()
        return hit

    def rate_with(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None, plan=None,
                  cpus=0.0, mem_gb=0.0, net_gbps=0.0):
        from quanta.perf.base import rate_with
        from quanta.perf.goodput import canonical_type
        app = self._measured_app(job, plan)
        if app is not None:
            if num_gpus <= 0:
                return 0.0
            t = canonical_type(gpu_type)
            shape = _shape(num_gpus, num_nodes, GPUS_PER_NODE.get(t, 8))
            nodes = 2 if num_nodes > 1 and num_gpus > 1 else 1
            hit = self._cached((app, gpu_type, num_gpus, max(1, num_nodes), job.phase, str(plan),
                                job.batch_size),
                               lambda: self._progress_on(job, app, t, shape, nodes, plan))
            if hit is not None:
                return hit
        return rate_with(self.base, job, gpu_type, num_gpus, num_nodes, consolidated, plan, cpus,
                         mem_gb, net_gbps)

    def rate(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None):
        return self.rate_with(job, gpu_type, num_gpus, num_nodes, consolidated)

    def rate_at_shape(self, job, gpu_type, shape: tuple[int, ...], plan=None) -> float | None:
        """Progress per second on the real placement `shape` (GPUs per node), as Sia's
        simulator rates every job (applications.py:247-292 on the job's placement): e.g. the Gavel
        baseline's 4 T4s as 2 + 2 when its worker assignment spreads them. None where the profiles
        give no answer (the engine then rates the job by its GPU and node counts)."""
        from quanta.perf.goodput import canonical_type
        app = self._measured_app(job, plan)
        if app is None:
            return None
        t = canonical_type(gpu_type)
        return self._cached(("shape", app, t, shape, job.phase, str(plan), job.batch_size),
                            lambda: self._progress_on(job, app, t, shape,
                                                      2 if len(shape) > 1 else 1, plan))

    per_node_rates = True

    def rate_matrix(self, jobs, types, per_node=None):
        from quanta.perf.base import rates_on
        out = np.array(rates_on(self.base, jobs, types, per_node), dtype=float)
        for i, job in enumerate(jobs):
            if self._goodput_app(job) is None:
                continue
            for k, t in enumerate(types):
                if out[i, k] > 0:
                    pn = per_node[k] if per_node is not None else GPUS_PER_NODE.get(t, 8)
                    n = job.num_gpus
                    out[i, k] = self.rate(job, t, n, max(1, -(-n // pn)), True)
        return out

    def observe(self, job, gpu_type, num_gpus, num_nodes=1):
        """What the job measures there (its agent re-tunes the batch): the batch it runs at and
        the measured times (`_config`), its gradient statistics at that batch."""
        from quanta.perf.goodput import Observation, canonical_type
        o = self.base.observe(job, gpu_type, num_gpus, num_nodes)
        app = self._goodput_app(job)
        if o is None or app is None:
            return o
        got = self._config(job, app, canonical_type(gpu_type), num_gpus, num_nodes, True)
        if got is None:
            return o
        _, m, s, (step, sync) = got
        return Observation(m, s, step, sync, *self.gain(job, app, num_gpus * m * (s + 1))[1])


def _shape(num_gpus: int, num_nodes: int, per_node: int) -> tuple[int, ...]:
    """GPUs per node: whole nodes first, the rest on one more node (Sia's configurations). A
    placement spread over more nodes than that (Pollux's virtual nodes) is rated as if it were
    not: the engine gives the perf model GPU and node counts only (the reference rates the real
    per-node placement, cluster_unaware.py:184-209; measured effect in bench/anchors/sia.md
    section 13)."""
    if num_nodes <= 1 or num_gpus <= per_node:
        return (num_gpus,)
    full, rest = divmod(num_gpus, per_node)
    return (per_node,) * full + ((rest,) if rest else ())


def _epoch(model, job: JobSpec) -> int:
    """The job's epoch in the application's profiled gradient statistics (the last one past them)."""
    return min(job.phase, model.noise.epochs - 1)


def _placement_id(placement: tuple[int, ...]) -> int:
    """Sia's key of a placement: GPUs per node, rotated to the lexicographically smallest."""
    pl = tuple(x for x in placement if x)
    pl = min(pl[i:] + pl[:i] for i in range(len(pl)))
    return int("".join(map(str, pl)))


@dataclass
class _Tables:
    """One application's measured profiles on one GPU type."""
    exact: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]  # placement id -> batches, times
    nd: object                                 # interpolator over (nodes, replicas, atomic batch)
    max_by_placement: dict[int, int]           # largest atomic batch profiled per placement
    max_by_replicas: dict[int, int]            # ... per replica count (placement rows)
    scalability: np.ndarray                    # (nodes, replicas, atomic batch) rows
    atomic: float                              # 1-GPU samples/s Sia projects types with

    def max_local(self, placement: tuple[int, ...]) -> int | None:
        """Sia's get_max_local_bsz (applications.py:310-324)."""
        got = self.max_by_placement.get(_placement_id(placement))
        if got is not None:
            return got
        sc = self.scalability
        if not len(sc):
            return None
        rows = sc[(sc[:, 0] >= len([x for x in placement if x])) & (sc[:, 1] >= sum(placement))]
        return int(rows[:, 2].max()) if len(rows) else None


def _load_measured(app: str, gpu_type: str) -> _Tables | None:
    """The bundled profiles of Sia's artifact for the application on the type, or None."""
    import csv

    from scipy.interpolate import LinearNDInterpolator
    cluster = CLUSTER_OF_TYPE.get(gpu_type)
    folder = SIA_POLLUX_DIR / app
    pl, sc = folder / f"placements-{cluster}.csv", folder / f"scalability-{cluster}.csv"
    if cluster is None or not pl.exists():
        return None
    groups: dict[int, dict[float, list[tuple[float, float]]]] = {}
    keyed: dict[tuple[float, float, float], list[tuple[float, float]]] = {}
    by_replicas: dict[int, int] = {}
    one_gpu: list[tuple[float, float]] = []     # (atomic batch, step time) of 1-GPU rows
    with open(pl, newline="") as f:
        for r in csv.DictReader(f):
            pid = int(float(r["placement"]))
            digits = str(pid)
            b, st, sy = float(r["local_bsz"]), float(r["step_time"]), float(r["sync_time"])
            groups.setdefault(pid, {}).setdefault(b, []).append((st, sy))
            keyed.setdefault((len(digits), sum(map(int, digits)), b), []).append((st, sy))
            k = sum(map(int, digits))             # applications.py:40-43
            by_replicas[k] = max(by_replicas.get(k, 0), int(b))
            if k == 1:
                one_gpu.append((b, st))
    exact = {}
    for pid, by_b in groups.items():
        xs = np.array(sorted(by_b))
        vals = np.array([np.mean(by_b[b], axis=0) for b in xs])
        exact[pid] = (xs, vals[:, 0], vals[:, 1])
    pts = [k for k in keyed]
    ys = [np.mean(keyed[k], axis=0) for k in pts]
    scal = []
    if sc.exists():
        with open(sc, newline="") as f:
            for r in csv.DictReader(f):
                row = (float(r["num_nodes"]), float(r["num_replicas"]), float(r["local_bsz"]))
                pts.append(row)
                scal.append(row)
                ys.append(np.array([float(r["step_time"]), float(r["sync_time"])]))
    nd = LinearNDInterpolator(np.array(pts), np.array(ys))
    # cluster.py:227-276 compute_throughput_ratios: the largest 1-GPU batch over the largest
    # 1-GPU step time, each over all the type's 1-GPU placement rows
    atomic = (max(b for b, _ in one_gpu) / max(st for _, st in one_gpu)) if one_gpu else 0.0
    return _Tables(exact, nd, {pid: int(xs[-1]) for pid, (xs, _s, _y) in exact.items()}, by_replicas,
                   np.array(scal).reshape(-1, 3), atomic)


def _prepare(policy: str, specs: Sequence[JobSpec]) -> list[JobSpec]:
    if policy != "sia":
        return list(specs)
    return [s.with_(batch_size=NCF_BATCH, num_gpus=1, min_gpus=1, max_gpus=1)
            if s.job_type.lower() == "ncf" else s for s in specs]


def _learning_jobs(perf, policy: str):
    """The run's jobs learning their own batch (sia_agents.py, imported only by a sia-sim run)."""
    from quanta.worlds.sia_agents import LearningJobs
    return LearningJobs(perf, merged=policy == "pollux")


def _policy_params(seed: int) -> dict[str, str]:
    """The reference's settings for each policy. Pollux's genetic algorithm (`search=ga`)
    draws from the run's seed (the reference's recorded runs were seeded with 0,
    bench/anchors/sia.md section 1)."""
    return {"sia": ("interval=60,p=-0.5,lambda_n=1.1,share_max=true,batch_cap=true,"
                    "pin_restoring=true,penalty_by_app=true,learn=true,project_order=t4/a100/rtx,"
                    "first_start_counted=true,decimals=2,ties=milp"),
            "pollux": ("interval=60,p=-1,aware=false,learn=true,fair_share=true,type_cap=true,"
                       "first_start_counted=true,search=ga,population=100,generations=100,"
                       f"carry=position,seed={seed},ties=milp"),
            "gavel-throughput": ("interval=360,rate_units=iterations,solution=ecos,"
                                 "priority=cluster,decimals=5,tie_types=t4/a100/rtx,workers=gavel")}


@world("sia-sim")
def sia_sim() -> World:
    return World(
        "sia-sim", "Sia's simulator: per-application restart delays (first start too) and "
                   "calibration slowdowns, NCF rigid at batch 32768 under Sia, the paper's rounds",
        # a job restarts only when its GPUs per node change (job.py:524-542 reallocate)
        restart=lambda _delay: RestartCost(DEFAULT_RESCALE_S, RESCALE_S, first_start_as_restart=True,
                                           same_shape_free=True),
        perf=lambda base: SlowedPerf(MeasuredPerf(base), SLOWDOWNS),
        policy_params=_policy_params,
        prepare=_prepare,
        restart_fixed=True,
        keep_clock=True,
        round_at_zero=False,
        # the simulator's default cluster (simulator_config.py:9,11): 6 x 4 T4 (aws), 3 x 8 RTX
        # 2080Ti (rtx), 2 x 8 A100 (dgx-ext); what `quanta reproduce sia` replays on
        cluster="t4:6x4,rtx:3x8,a100:2x8",
        # Sia's and Pollux's jobs tune their own batch from what they learned (sia_agents.py):
        # one profile for every GPU type under Pollux (h_unaware), one per type otherwise
        run_perf=_learning_jobs,
        notes=("world sia-sim: restart delay per application (cifar10 50 s, deepspeech2 25 s, "
               "bert 120 s, yolov3 80 s, imagenet 250 s, ncf 15 s), charged at the first start "
               "too; throughput divided by Sia's calibration slowdowns (1.2-1.8); rounds on the "
               "workload's own clock; batches split per placement as Sia's simulator does",))
