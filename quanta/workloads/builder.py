"""Turn a Trace into simulation-ready job specs: cut, rescale load, give every job a model and work.

- A job without a model gets one drawn (seeded) from the catalog; its GPU count and its run time on
  the reference allocation are kept (so it runs exactly that long alone on the reference GPUs).
- Work: steps from the trace if it has them, else duration x reference rate.
- A job with neither steps nor duration (the Pollux/Sia workloads give only the model) gets its
  model's work from the catalog when the performance model knows it (Pollux/Sia applications:
  steps of the initial batch to the target metric), else a run time drawn from Gavel's
  Philly-derived duration distribution; the output says which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from quanta.errors import QuantaError
from quanta.model.job import JobSpec, Trace
from quanta.perf.base import PerfModel
from quanta.workloads.catalog import drawable_types
from quanta.workloads.readers._base import MAX_NUMBER
from quanta.workloads.synthetic import gavel_duration


@dataclass
class Workload:
    specs: list[JobSpec]
    notes: list[str] = field(default_factory=list)


def _same(a: float, b: float) -> bool:
    """a and b are the same float (0.0 and -0.0 are not)."""
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _beyond(trace: Trace, j: JobSpec, submit: float, load_scale: float) -> QuantaError:
    """The error for a job whose arrival (after `load_scale`), duration or steps pass
    MAX_NUMBER, as every reader's own values may not (a rate of 1e-320 jobs an hour, a
    --load-scale of 1e-308, a Gavel trace's 1e300 steps ran, with times of inf or 300 digits)."""
    from quanta.workloads.formats import column_of
    for name, value in (("duration_s", j.duration_s), ("total_steps", j.total_steps)):
        if not value <= MAX_NUMBER:
            col = column_of(trace.format, name)
            return QuantaError(f"job {j.job_id}: {col} {value:g} is above the maximum "
                               f"{MAX_NUMBER:g}", source=trace.source or None,
                               line=j.source_line or None, field=col if trace.source else "--trace")
    scaled = load_scale != 1.0
    return QuantaError(f"job {j.job_id} would arrive at {submit:g} s"
                       + (f" (its arrival time divided by --load-scale {load_scale:g})" if scaled else "")
                       + f", past the {MAX_NUMBER:g} s a run may last",
                       source=None if scaled else trace.source or None,
                       line=None if scaled else j.source_line or None,
                       field="--load-scale" if scaled else
                       column_of(trace.format, "submit_time") if trace.source else "--trace")


def build_workload(trace: Trace, perf: PerfModel, *, seed: int = 0, max_jobs: int | None = None,
                   load_scale: float = 1.0, keep_clock: bool = False) -> Workload:
    """The trace's jobs ready to simulate. Time 0 is the first arrival, unless `keep_clock`
    (a replay profile whose reference counts rounds from the trace file's own time 0: the
    reader's re-basing, `trace.origin`, is undone)."""
    if load_scale <= 0:
        raise QuantaError(f"--load-scale must be positive, got {load_scale}", field="--load-scale")
    jobs = trace.jobs[:max_jobs] if max_jobs else list(trace.jobs)
    notes = list(trace.notes)
    if len(jobs) < len(trace.jobs):   # (the trace's own notes, e.g. its applications, count all)
        notes.append(f"kept the first {len(jobs)} of the trace's {len(trace.jobs)} jobs by submit "
                     f"time (max jobs)" + (f"; the notes above count all {len(trace.jobs)}"
                                           if trace.notes else ""))
    rng = None                  # made at the first draw (most traces draw nothing: no numpy.random)

    def draws() -> np.random.Generator:
        nonlocal rng
        if rng is None:
            rng = np.random.default_rng([seed, 0xC47A])
        return rng
    types = drawable_types()
    t0 = (jobs[0].submit_time if jobs else 0.0) if not keep_clock else -trace.origin
    drawn = durations_drawn = from_catalog = 0
    catalog_work = getattr(perf, "work_steps", None)
    out = []
    for j in jobs:
        submit = (j.submit_time - t0) / load_scale
        if not (submit <= MAX_NUMBER and j.duration_s <= MAX_NUMBER and j.total_steps <= MAX_NUMBER):
            raise _beyond(trace, j, submit, load_scale)      # (inf and NaN too)
        # (a job nothing changes is kept as it is: JobSpecs are frozen)
        changes: dict = {} if _same(submit, j.submit_time) else {"submit_time": submit}
        if not j.job_type:
            changes["job_type"] = types[int(draws().integers(len(types)))]
            changes["type_drawn"] = True
            drawn += 1
        work = catalog_work(j.with_(**changes) if changes else j) \
            if catalog_work and j.total_steps <= 0 and j.duration_s <= 0 else None
        if work:
            changes["total_steps"] = work
            from_catalog += 1
        elif j.total_steps <= 0:
            dur = j.duration_s
            if dur <= 0:
                dur = gavel_duration(draws())
                changes["duration_s"] = dur
                durations_drawn += 1
            spec = j.with_(**changes) if changes else j
            rate = perf.rate(spec, spec.reference_gpu, spec.num_gpus, 1, True)
            if rate <= 0:
                raise QuantaError(f"job type '{spec.job_type}' cannot run on its reference "
                                  f"{spec.reference_gpu} at {spec.num_gpus} GPUs",
                                  source=trace.source, line=j.source_line or None, field="job_type")
            changes["total_steps"] = dur * rate
        out.append(j.with_(**changes) if changes else j)
    if drawn:
        notes.append(f"{drawn} of {len(out)} jobs had no model: job type drawn from the catalog "
                     f"(seed {seed}), keeping the trace's GPU count and run time on "
                     f"{out[0].reference_gpu if out else 'v100'}")
    if from_catalog:
        notes.append(f"{from_catalog} jobs got their model's work to the target metric from the "
                     f"catalog (Pollux/Sia validation profiles)")
    if durations_drawn:
        notes.append(f"{durations_drawn} jobs had no duration or steps: run time drawn from Gavel's "
                     f"Philly-derived distribution (seed {seed})")
    if load_scale != 1.0:
        notes.append(f"arrival times divided by {load_scale} (load x{load_scale})")
    return Workload(out, notes)
