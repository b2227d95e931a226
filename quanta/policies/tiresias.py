"""Tiresias (NSDI'19): 2D attained service, discretised into a multi-level feedback queue.

- attained service a = GPUs x time held (GPU-seconds), reset when a job is promoted;
- queue index = how many thresholds (GPU-s) a has crossed; strict priority between queues;
- inside a queue: 2D-LAS orders by arrival (FIFO); 2D-Gittins by descending Gittins index
  G(a) = P(S - a <= D | S > a) / E[min(S - a, D) | S > a] over the job GPU-time distribution S,
  with D = the service left before the job's queue threshold (a fixed `gittins_delta` in the last
  queue). S is the GPU-time of the jobs that finished in this run so far, and Tiresias' bundled
  YARN sample until `min_history` jobs have finished;
- PROMOTE: a waiting job in a lower queue with waiting time >= promote_knob x executed time goes
  back to the first queue with its attained and executed time reset (knob = inf turns it off);
- the policy asks to be woken at the exact moment a running job crosses its queue's threshold or a
  waiting job becomes eligible for promotion;
- placement: a multi-GPU job whose model loses more than 1 - pack_limit of its speed when spread
  (the performance model's consolidated vs. spread rates: Tiresias' skew) waits for a
  consolidated placement; others take any free GPUs.
Gang allocation, preemption (checkpoint) and backfill come from the shared greedy walk.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.paths import TRACES_DIR
from quanta.policies.base import Policy
from quanta.policies.greedy import greedy_fill
from quanta.policies.registry import register

EPS = 1e-6


@lru_cache(maxsize=1)
def yarn_gpu_times() -> np.ndarray:
    """Tiresias' sample of 1,000 production job GPU-times (seconds), sorted."""
    return np.sort(np.loadtxt(TRACES_DIR / "tiresias_yarn_gput1000.csv", skiprows=1))


def gittins_index(samples: np.ndarray, attained: np.ndarray, delta: np.ndarray,
                  cumsum: np.ndarray | None = None) -> np.ndarray:
    """Vectorised Gittins index of jobs with `attained` service, quantum `delta`, over sorted
    samples (`cumsum`: their prefix sums with a leading 0, if already known)."""
    s = samples
    n = len(s)
    cs = np.concatenate(([0.0], np.cumsum(s))) if cumsum is None else cumsum
    lo = np.searchsorted(s, attained, side="right")          # samples <= a
    hi = np.searchsorted(s, attained + delta, side="right")  # samples <= a + delta
    alive = n - lo
    done = hi - lo
    between = cs[hi] - cs[lo] - attained * done               # sum of (S - a) for a < S <= a + delta
    with np.errstate(divide="ignore", invalid="ignore"):
        prob = done / alive
        expect = (between + delta * (n - hi)) / alive
        g = np.where(alive > 0, prob / np.maximum(expect, 1e-12), 0.0)
    return g


def _grow(st: dict, size: int) -> None:
    """Per-job offsets are arrays indexed by driver row; extend them to cover `size` rows."""
    have = len(st["off_att"])
    if size > have:
        extra = max(size, 2 * have) - have
        st["off_att"] = np.concatenate([st["off_att"], np.zeros(extra)])
        st["off_exec"] = np.concatenate([st["off_exec"], np.zeros(extra)])
        st["promoted"] = np.concatenate([st["promoted"], np.full(extra, -np.inf)])


@register("tiresias-las", "Tiresias 2D-LAS: discretised attained-service MLFQ, PROMOTE knob, skew-aware placement")
@register("tiresias-gittins", "Tiresias 2D-Gittins: MLFQ ordered by Gittins index of the GPU-time distribution",
          gittins=True)
@dataclass
class Tiresias(Policy):
    thresholds: tuple[float, ...] = (3250.0, 7200.0, 18000.0)   # GPU-seconds (authors' simulator)
    promote_knob: float = 8.0
    gittins: bool = False
    gittins_delta: float = 3250.0
    min_history: int = 20
    pack_limit: float = 0.9
    backfill: bool = True

    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        now = snap.now
        st = snap.state if snap.state else {"off_att": np.zeros(0), "off_exec": np.zeros(0),
                                            "promoted": np.zeros(0), "history": [], "last": None}
        rows = j.rows
        th = np.asarray(sorted(self.thresholds), dtype=float)
        _grow(st, int(rows.max()) + 1 if len(rows) else 0)
        # service and waiting counted from the last promotion (offsets are 0 for the others)
        att = j.attained - st["off_att"][rows]
        execd = j.executed - st["off_exec"][rows]
        since = np.maximum(j.waiting_since, st["promoted"][rows])
        if self.gittins:
            self._record_finished(st, snap, rows)
        q = np.searchsorted(th, att + EPS, side="right")
        # PROMOTE: waiting long relative to the time it ran
        if np.isfinite(self.promote_knob):
            waiting = now - since
            promote = (~j.running) & (q > 0) & (waiting >= self.promote_knob * execd - EPS)
            if promote.any():
                pr = rows[promote]
                st["off_att"][pr] = j.attained[promote]
                st["off_exec"][pr] = j.executed[promote]
                st["promoted"][pr] = now
                att[promote], execd[promote], since[promote], q[promote] = 0.0, 0.0, now, 0
        keys: tuple[np.ndarray, ...] = (rows, j.submit)
        if self.gittins:
            hi = np.where(q < len(th), th[np.minimum(q, len(th) - 1)] - att, self.gittins_delta)
            dist, cums = self._distribution(st)
            g = gittins_index(dist, att, np.maximum(hi, EPS), cums)
            keys = keys + (-g,)
        order = np.lexsort(keys + (q,))
        dec = greedy_fill(snap, order, self.backfill, migrate=True)
        dec.consolidate = self._skewed(snap, dec)
        dec.wake_at = self._next_event(snap, dec, q, th, att, execd, since)
        st["last"] = (rows.copy(), j.attained.copy(), np.where(dec.gpus > 0, dec.gpus, 0), now)
        dec.state = st
        return dec

    # -- pieces -----------------------------------------------------------------------------------
    def _record_finished(self, st: dict, snap: Snapshot, rows: np.ndarray) -> None:
        """GPU-time of the jobs that left since the last decision (they finished)."""
        last = st["last"]
        if last is None:
            return
        prev_rows, prev_att, prev_gpus, t_prev = last
        gone = ~np.isin(prev_rows, rows)
        if gone.any():
            total = prev_att[gone] + prev_gpus[gone] * (snap.now - t_prev)
            st["history"].extend(total.tolist())

    def _distribution(self, st: dict) -> tuple[np.ndarray, np.ndarray]:
        """The sorted GPU-time samples and their prefix sums: the bundled YARN sample until
        `min_history` jobs have finished, then the run's own history, re-sorted whenever it has
        grown by 1% (the distribution moves slowly; re-sorting 80k samples per event does not)."""
        hist = st["history"]
        if len(hist) < self.min_history:
            s = yarn_gpu_times()
            return s, np.concatenate(([0.0], np.cumsum(s)))
        if "dist" not in st or len(hist) >= 1.01 * len(st["dist"]):
            s = np.sort(np.asarray(hist, dtype=float))
            st["dist"], st["cums"] = s, np.concatenate(([0.0], np.cumsum(s)))
        return st["dist"], st["cums"]

    def _skewed(self, snap: Snapshot, dec: Decision) -> set[int]:
        """Multi-GPU jobs starting now whose model loses too much when spread."""
        j = snap.jobs
        starting = np.flatnonzero((dec.gpus > 1) & ~j.running)
        out = set()
        for i in starting.tolist():
            t = int(dec.gpu_type[i])
            spec = j.specs[i]
            cons = j.rates[i, t]
            spread = snap.perf.rate(spec, snap.cluster.types[t], int(dec.gpus[i]), 2, False)
            if cons > 0 and spread / cons < self.pack_limit:
                out.add(i)
        return out

    def _next_event(self, snap: Snapshot, dec: Decision, q: np.ndarray, th: np.ndarray,
                    att: np.ndarray, execd: np.ndarray, since: np.ndarray) -> float | None:
        """The next moment a running job crosses its threshold or a waiting job can be promoted."""
        now = snap.now
        cand = [np.inf]
        run = (dec.gpus > 0) & (q < len(th))
        if run.any():
            left = th[q[run]] - att[run]
            cand.append(float(np.min(left / dec.gpus[run])))
        if np.isfinite(self.promote_knob):
            wait = (dec.gpus == 0) & (q > 0)
            if wait.any():
                due = self.promote_knob * execd[wait] - (now - since[wait])
                cand.append(float(np.min(due)))
        step = min(cand)
        return now + max(step, EPS) if np.isfinite(step) else None
