"""The jobs of Sia's simulator tune their own batch (`sia-sim`, Sia and Pollux runs).

In sia-simulator each Sia or Pollux job is its own Pollux agent (job.py:317-412): it keeps a
profile of the points it has trained on, keyed by (nodes, replicas, atomic batch), the first
point at a key kept (`update_params`); fits Pollux's throughput model to them (goodput.py:149-208)
whenever a point is new; and runs at the (atomic batch, accumulation steps) that this fitted
model, with the gradient statistics of its latest step, finds best for its placement
(`update_local_bsz`: `GoodputFunction.optimize` over 50 batches up to the application's largest,
atomic batches up to the placement's largest profiled one, then capped by the largest profiled
at that many replicas and by the largest batch). A job without a model yet runs at
max(M0, K x min_local) split over its GPUs. The batch is re-tuned at every placement change,
every epoch boundary and after every round's training (job.py:521, 533, 562). The scheduler
reads the same profiles (its `learn` parameter). Under Pollux (heterogeneity-unaware) one
profile serves every GPU type (a point measured on one type stands for all); under Sia there is
one per GPU type, so a job's first run on a type uses the default batch.

What the job then really achieves is the measured profiles' step time at that batch and the
gradient statistics' gain (`MeasuredPerf`), divided by the calibration slowdown (`SlowedPerf`).
Quanta's own world has no agents: there a job runs at its true best batch.

`LearningJobs` is one run's performance model: the world's, plus each job's agent. The engine
asks it for a running job's rate (`running_rate`) and tells it when a job's segment of training
on one batch ends (`segment_end`); if the job trained in it, the segment's point joins the job's
profile. Every other question (a policy's estimates) goes to the world's model unchanged.
"""

from __future__ import annotations

from quanta.model.job import JobSpec
from quanta.perf.pollux_online import MERGED, fit_points, pollux_batch


class LearningJobs:
    def __init__(self, perf, merged: bool):
        self.perf = perf                  # SlowedPerf(MeasuredPerf(catalog)): the world's model
        self.measured = perf.base
        self.merged = merged              # one profile for every GPU type (Pollux's simulator)
        # job id -> {type key: {(nodes, GPUs, atomic batch): (step, sync)}}; type key: the GPU
        # type's name, or MERGED
        self.points: dict[str, dict[object, dict[tuple, tuple[float, float]]]] = {}
        self.fits: dict[tuple[str, object], object] = {}
        self.grad: dict[str, tuple[float, float]] = {}
        # job id -> what its current segment measures: (type key, point key, point, statistics)
        self.pending: dict[str, tuple] = {}

    def __getattr__(self, name):
        return getattr(self.perf, name)

    def running_rate(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int
                     ) -> float | None:
        """Steps/s of a job running on the allocation at the batch its agent picks, or None
        where the world's model has no measured answer (then the world's own rate stands)."""
        from quanta.perf.goodput import canonical_type
        from quanta.worlds.sia_sim import GPUS_PER_NODE, _shape
        ms = self.measured
        app = ms._goodput_app(job)
        t = canonical_type(gpu_type)
        if app is None or num_gpus <= 0 or not ms.knows(app, t):
            return None
        shape = _shape(num_gpus, num_nodes, GPUS_PER_NODE.get(t, 8))
        p = ms.base.goodput.catalog[app].profile(t)
        tkey = MERGED if self.merged else gpu_type
        fit = self.fits.get((job.job_id, tkey))
        grad = self.grad.get(job.job_id)
        if fit is None or grad is None:       # no model yet: job.py:355-358
            got = ms.config_at(job, app, t, shape, len(shape), False,
                               batch=max(p.init_batch, p.min_local * num_gpus))
        else:
            most = ms._table(app, t).max_local(shape)
            if most is None:
                return None
            m, s = pollux_batch(fit, p.init_batch, len(shape), num_gpus, p.max_batch,
                                p.min_local, most, grad)
            m = ms.cap_atomic(app, t, num_gpus, m, s)
            ss = ms.step_sync(app, t, shape, m)
            got = None if ss is None else (shape, m, s, ss)
        if got is None:
            return None
        _, m, s, (step, sync) = got
        rate, stats = ms.progress_rate(job, app, shape, m, s, step, sync)
        self.pending[job.job_id] = (tkey, (len(shape), num_gpus, m), (step, sync), stats)
        return self.perf._f(job) * rate

    def segment_end(self, job: JobSpec, trained: bool) -> None:
        """The job's segment of training on its current batch ends; if it trained in it (past
        its restore), what it measured joins its profile (a new point refits its model) and its
        gradient statistics are the latest."""
        got = self.pending.pop(job.job_id, None)
        if got is None or not trained:
            return
        tkey, key, point, stats = got
        self.grad[job.job_id] = stats
        mine = self.points.setdefault(job.job_id, {}).setdefault(tkey, {})
        if key not in mine:
            mine[key] = point
            self.fits[(job.job_id, tkey)] = fit_points(mine)

    def learned(self, job: JobSpec):
        """(the job's profiles by type key, its latest gradient statistics), or None before it
        has trained: what a learning scheduler knows of it."""
        grad = self.grad.get(job.job_id)
        return None if grad is None else (self.points[job.job_id], grad)
