"""Columnar job state shared by both drivers.

Every job of a run has one row. Dynamic quantities are kept lazily as (value at a mark, rate since
the mark), so nothing is stepped: progress(now) = prog0 + rate * max(0, now - t0), where t0 may lie
in the future while a job restarts from a checkpoint.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from quanta.model.cluster import Cluster
from quanta.model.job import JobSpec
from quanta.perf.base import PerfModel

FUTURE, PENDING, RUNNING, DONE, UNSCHEDULABLE = 0, 1, 2, 3, 4
STATE_NAMES = {FUTURE: "future", PENDING: "pending", RUNNING: "running", DONE: "finished",
               UNSCHEDULABLE: "unschedulable"}


class JobTable:
    def __init__(self, specs: Sequence[JobSpec], cluster: Cluster, perf: PerfModel):
        n, k = len(specs), len(cluster.types)
        self.specs = list(specs)
        self.cluster = cluster
        self.perf = perf
        self.index = {s.job_id: i for i, s in enumerate(self.specs)}
        if len(self.index) != n:
            seen: set[str] = set()
            dup = next(s.job_id for s in self.specs if s.job_id in seen or seen.add(s.job_id))
            raise ValueError(f"duplicate job id '{dup}'")
        self.submit = np.array([s.submit_time for s in specs], dtype=float)
        self.req = np.array([s.num_gpus for s in specs], dtype=np.int64)
        self.total = np.array([s.total_steps for s in specs], dtype=float)
        self.weight = np.array([s.weight for s in specs], dtype=float)
        self.allowed = np.ones((n, k), dtype=bool)
        for i, s in enumerate(specs):
            if s.gpu_types:
                self.allowed[i] = [t in s.gpu_types for t in cluster.types]
        # steps/s at the requested count, consolidated, per GPU type (0 where not allowed);
        # a type where the job cannot run (measured 0: out of memory) is not allowed
        self.rates = perf.rate_matrix(self.specs, cluster.types) * self.allowed
        self.allowed &= self.rates > 0
        self.state = np.zeros(n, dtype=np.int8)
        self.prog0 = np.zeros(n)
        self.t0 = np.zeros(n)
        self.rate = np.zeros(n)
        self.att0 = np.zeros(n)       # GPU-seconds held (attained service) at ta
        self.run0 = np.zeros(n)       # wall seconds held at ta
        self.ta = np.zeros(n)
        self.gpus = np.zeros(n, dtype=np.int64)       # GPUs held now
        self.gtype = np.full(n, -1, dtype=np.int64)   # type index held now
        self.types_used = np.zeros(n, dtype=np.int64)  # bitmask of type indexes ever held
        self.waiting_since = self.submit.copy()        # last time the job lost (or never had) GPUs
        self.first_start = np.full(n, np.nan)
        self.end = np.full(n, np.nan)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.migrations = np.zeros(n, dtype=np.int64)
        self.reconfigs = np.zeros(n, dtype=np.int64)
        self.restarts = np.zeros(n, dtype=np.int64)
        self.placement: dict[int, np.ndarray] = {}   # job row -> global GPU ids held

    def __len__(self) -> int:
        return len(self.specs)

    def never_fits(self) -> np.ndarray:
        """Jobs no allowed GPU type of the whole cluster could ever hold."""
        cap = self.cluster.capacity
        fits = self.allowed & (cap[None, :] >= self.req[:, None]) & (self.req[:, None] > 0)
        return ~fits.any(axis=1)

    # -- lazy quantities -------------------------------------------------------------------------
    def progress(self, rows: np.ndarray, now: float) -> np.ndarray:
        return self.prog0[rows] + self.rate[rows] * np.maximum(0.0, now - self.t0[rows])

    def attained(self, rows: np.ndarray, now: float) -> np.ndarray:
        return self.att0[rows] + self.gpus[rows] * (now - self.ta[rows])

    def executed(self, rows: np.ndarray, now: float) -> np.ndarray:
        return self.run0[rows] + (self.gpus[rows] > 0) * (now - self.ta[rows])

    def finish_time(self, row: int) -> float:
        """When the job completes at its current rate (inf if it is not progressing)."""
        r = self.rate[row]
        if r <= 0.0:
            return np.inf
        return self.t0[row] + (self.total[row] - self.prog0[row]) / r

    # -- state changes (called by the drivers) ----------------------------------------------------
    def mark(self, row: int, now: float) -> None:
        """Fold the lazy accumulators into their base values at `now`."""
        if now > self.t0[row]:
            self.prog0[row] += self.rate[row] * (now - self.t0[row])
            self.t0[row] = now
        self.att0[row] += self.gpus[row] * (now - self.ta[row])
        self.run0[row] += (self.gpus[row] > 0) * (now - self.ta[row])
        self.ta[row] = now

    def set_rate(self, row: int, now: float, rate: float, delay: float = 0.0) -> None:
        """From now on the job progresses at `rate`, after `delay` seconds of restart."""
        self.mark(row, now)
        self.t0[row] = now + delay
        self.rate[row] = rate

    # -- views and transitions --------------------------------------------------------------------
    def view(self, rows: np.ndarray, now: float) -> "JobsView":
        from quanta.core.snapshot import JobsView
        return JobsView(
            rows=rows, all_specs=self.specs, submit=self.submit[rows],
            req=self.req[rows], weight=self.weight[rows], allowed=self.allowed[rows],
            rates=self.rates[rows], total=self.total[rows], progress=self.progress(rows, now),
            attained=self.attained(rows, now), executed=self.executed(rows, now),
            waiting_since=self.waiting_since[rows], running=self.gpus[rows] > 0,
            gpus=self.gpus[rows], gtype=self.gtype[rows], restarts=self.restarts[rows])

    def hold(self, row: int, now: float, kind: str, gtype: int, gpus: np.ndarray,
             rate: float, delay: float) -> None:
        """Bookkeeping of one transition (kind: start/preempt/migrate/resize)."""
        n = len(gpus)
        if kind == "preempt":
            self.preemptions[row] += 1
            self.waiting_since[row] = now
        elif kind == "migrate":
            self.migrations[row] += 1
        elif kind == "resize":
            self.reconfigs[row] += 1
        if n:
            if kind == "start" and self.first_start[row] != self.first_start[row]:   # NaN
                self.first_start[row] = now
            if delay > 0:
                self.restarts[row] += 1
            self.types_used[row] |= 1 << gtype
            self.placement[row] = gpus
            self.state[row] = RUNNING
        else:
            self.placement.pop(row, None)
            self.state[row] = PENDING
            rate = delay = 0.0
        self.set_rate(row, now, rate, delay)   # folds the accumulators at `now` first
        self.gpus[row] = n
        self.gtype[row] = gtype if n else -1

    def finish(self, row: int, now: float) -> None:
        self.mark(row, now)
        self.prog0[row] = self.total[row]
        self.rate[row] = 0.0
        self.gpus[row] = 0
        self.gtype[row] = -1
        self.placement.pop(row, None)
        self.state[row] = DONE
        self.end[row] = now
