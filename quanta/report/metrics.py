"""Per-job results and per-policy summaries of a simulation.

Definitions (also in docs/metrics.md):
- jct = end - submit; queue = jct - time holding GPUs (all waiting, before and between runs).
- ideal = run time alone at the requested size on the fastest allowed GPU type.
- finish-time fairness (Themis): rho = jct / (ideal * max(1, gpus * N / G)), N = average number
  of active jobs during the job's life, G = cluster GPUs: the finish time on a 1/N share.
- jain = Jain's index of 1/rho over finished jobs; gpu_util = busy GPU-seconds (physical GPUs with
  at least one job, from the timeline) / (G * makespan). Jobs' GPU-seconds count a shared GPU once
  per job, so they add up to busy + shared GPU-seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from quanta.core.jobtable import DONE, RUNNING, STATE_NAMES
from quanta.perf.base import consolidated_rates
from quanta.report.window import Window
from quanta.sim.engine import SimResult

SUMMARY_COLUMNS = ["policy", "jobs", "finished", "avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s",
                   "avg_queue_s", "makespan_s", "gpu_util", "ftf_rho_max", "ftf_unfair_frac", "jain",
                   "preemptions", "gpu_hours"]
RHO_TOL = 1e-9       # ftf_unfair_frac counts rho > 1 + RHO_TOL (relative float rounding)
JOB_COLUMNS = ["job_id", "job_type", "submit_s", "start_s", "end_s", "jct_s", "queue_s", "gpus",
               "gpu_types", "preemptions", "migrations", "reconfigurations", "gpu_seconds",
               "ideal_s", "ftf_rho", "state"]


@dataclass(frozen=True)
class JobMetrics:
    jct: np.ndarray
    queue: np.ndarray
    ideal: np.ndarray
    rho: np.ndarray
    gpu_seconds: np.ndarray
    finished: np.ndarray   # bool


def job_metrics(res: SimResult) -> JobMetrics:
    t = res.table
    n = len(t)
    rows = np.arange(n)
    end_time = np.where(np.isnan(t.end), np.nan, t.end)
    jct = end_time - t.submit
    # unfinished jobs count to the end of the run: its --until-h where it was cut short (to the
    # last completion, a job started after it counted negative GPU-seconds), else the last
    # completion
    last = cut_at(res)
    if last is None:
        last = np.nanmax(t.end) if np.any(t.state == DONE) else 0.0
    gpu_s = t.attained(rows, last) if n else np.zeros(0)
    gpu_s = np.where(t.state == DONE, t.att0, gpu_s)
    held = np.where(t.state == DONE, t.run0, t.executed(rows, last))
    queue = jct - held
    # (a job preempted a dozen times sums its runs' lengths a few ulps past its JCT: -1e-10 s)
    queue = np.where(queue < 0.0, 0.0, queue)
    best = t.rates.max(axis=1) if n else np.zeros(0)
    ideal = np.where(best > 0, t.total / np.maximum(best, 1e-12), np.nan)
    for r, ends in t.phase_ends.items():    # rates change by training phase: sum the phases
        spec = t.specs[r]
        rates = consolidated_rates(t.perf, [spec.with_(phase=k) for k in range(len(ends))],
                                   t.cluster) * t.allowed[r]
        top = rates.max(axis=1)
        ideal[r] = float(np.sum(np.diff(ends, prepend=0.0) / top)) if np.all(top > 0) else np.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        n_avg = (res.active_integral_end - res.active_integral_submit) / jct
        share = np.maximum(1.0, t.req * n_avg / res.cluster.num_gpus)
        rho = jct / (ideal * share)
    return JobMetrics(jct, queue, ideal, rho, gpu_s, t.state == DONE)


def unfinished(state: np.ndarray) -> np.ndarray:
    """Jobs still to arrive, waiting or running (unschedulable and dropped ones are over)."""
    return state <= RUNNING          # (FUTURE, PENDING, RUNNING)


def cut_at(res: SimResult, sel: np.ndarray | None = None) -> float | None:
    """Where the run was cut short (--until-h) with jobs (of `sel`, a mask: a window's) still to
    arrive, waiting or running, else None. Unschedulable and dropped jobs are over: a run where
    only they are unfinished ended before its cut."""
    if res.horizon is None:
        return None
    state = res.table.state if sel is None else res.table.state[sel]
    if not bool(np.any(unfinished(state))):
        return None
    return float(res.horizon)


def timeline_integral(res: SimResult, values: np.ndarray) -> float:
    """Integral over time of a per-batch timeline series (each value holds until the next batch)."""
    return float(np.sum(values[:-1] * np.diff(res.times)))


def timeline_integral_between(res: SimResult, values: np.ndarray, a: float, b: float) -> float:
    """The integral of a timeline series over [a, b] only."""
    t = res.times
    overlap = np.clip(np.minimum(t[1:], b) - np.maximum(t[:-1], a), 0.0, None)
    return float(np.sum(values[:-1] * overlap))


def summary(res: SimResult, window: Window | None = None,
            source: str = "") -> dict[str, float | int | str]:
    """Per-policy metrics; with a window, over the window's jobs only (makespan and utilisation
    from the window's first arrival to its last completion, or to the cut where the run was cut
    with some of them unfinished)."""
    t = res.table
    m = job_metrics(res)
    sel = None if window is None else window.mask(t.submit, source)
    fin = m.finished if sel is None else m.finished & sel
    jct = m.jct[fin]
    cap = res.cluster.num_gpus
    start = 0.0 if not len(t) else float(np.min(t.submit if sel is None else t.submit[sel]))
    if fin.any():
        makespan = float(np.max(t.end[fin]) - start)
    else:
        makespan = 0.0
    gpu_seconds = float(np.sum(m.gpu_seconds if sel is None else m.gpu_seconds[sel]))
    # a run cut with jobs (of the window) unfinished: utilisation over the span to the cut (the
    # window's was to its last completion, 0 where none had finished)
    cut = cut_at(res, sel)
    span = makespan if cut is None else cut - start
    if not len(res.times):
        busy_seconds = 0.0
    else:
        busy = res.busy.sum(axis=1)
        busy_seconds = timeline_integral(res, busy) if sel is None else \
            timeline_integral_between(res, busy, start, start + span)
        if cut is not None:
            # GPUs held from the last batch to the cut too (the last batch's over the span to
            # the last finish gave utilisations above 1)
            busy_seconds += float(busy[-1]) * max(0.0, cut - max(res.times[-1], start))
    rho = m.rho[fin]
    inv = 1.0 / rho[rho > 0] if rho.size else np.zeros(0)

    ordered = np.sort(jct).tolist()

    def pct(q: float) -> float:
        return percentile(ordered, q) if ordered else float("nan")

    return {
        "policy": res.policy, "jobs": int(len(t) if sel is None else sel.sum()),
        "finished": int(fin.sum()),
        "avg_jct_s": float(jct.mean()) if jct.size else float("nan"),
        "p50_jct_s": pct(50), "p95_jct_s": pct(95), "p99_jct_s": pct(99),
        "avg_queue_s": float(m.queue[fin].mean()) if jct.size else float("nan"),
        "makespan_s": makespan,
        "gpu_util": busy_seconds / (cap * span) if span > 0 else 0.0,
        "ftf_rho_max": float(rho.max()) if rho.size else float("nan"),
        # (beyond float rounding: a job that ran alone at full speed has JCT = ideal, but end -
        # submit and total / rate round apart, rho 1.0000000000000002)
        "ftf_unfair_frac": float(np.mean(rho > 1.0 + RHO_TOL)) if rho.size else float("nan"),
        "jain": jain_index(inv),
        "preemptions": int(t.preemptions.sum() if sel is None else t.preemptions[sel].sum()),
        "gpu_hours": gpu_seconds / 3600.0,
    }


def jain_index(x: np.ndarray) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2); NaN for none. Scale-free, so computed again
    on x / max(x) where the squares leave the floats' range (a job of 1e-300 s gave 0 / 0 and a
    numpy warning)."""
    if not x.size:
        return float("nan")
    with np.errstate(all="ignore"):
        j = float(x.sum() ** 2 / (x.size * np.sum(x ** 2)))
        if not np.isfinite(j):
            y = x / x.max()
            j = float(y.sum() ** 2 / (y.size * np.sum(y ** 2)))
    return j


def percentile(ordered: list[float], q: float) -> float:
    """`numpy.percentile(values, q)` (its default, linear method) of finite values given sorted:
    the same float, bit for bit, computed the way numpy computes it (the virtual index
    (n - 1) * (q / 100), then interpolated from the nearer of its two neighbours), without
    numpy's quantile machinery, whose `np.unique` imports numpy.ma (~6 ms of a short run)."""
    n = len(ordered)
    v = (n - 1) * (q / 100)
    if v >= n - 1:
        return float(ordered[-1])
    i = math.floor(v)
    a, b = ordered[i], ordered[i + 1]
    t = v - i
    d = b - a
    return float(b - d * (1 - t) if t >= 0.5 else a + d * t)


def job_columns(res: SimResult) -> list[list]:
    """jobs.csv's columns (JOB_COLUMNS), each a list over the trace's jobs (Python values)."""
    t = res.table
    m = job_metrics(res)
    types = res.cluster.types
    used = {}
    for bits in set(t.types_used.tolist()):
        used[bits] = "+".join(types[k] for k in range(len(types)) if bits >> k & 1)
    return [[s.job_id for s in t.specs], [s.job_type for s in t.specs], t.submit.tolist(),
            t.first_start.tolist(), t.end.tolist(), m.jct.tolist(), m.queue.tolist(),
            t.req.tolist(), [used[b] for b in t.types_used.tolist()], t.preemptions.tolist(),
            t.migrations.tolist(), t.reconfigs.tolist(), m.gpu_seconds.tolist(),
            m.ideal.tolist(), m.rho.tolist(), [STATE_NAMES[s] for s in t.state.tolist()]]


# the columns of JOB_COLUMNS that hold floats
JOB_FLOAT_COLUMNS = ("submit_s", "start_s", "end_s", "jct_s", "queue_s", "gpu_seconds", "ideal_s",
                     "ftf_rho")


def job_rows(res: SimResult) -> list[list]:
    return [list(row) for row in zip(*job_columns(res))]
