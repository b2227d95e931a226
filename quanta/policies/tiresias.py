"""Tiresias (NSDI'19): 2D attained service, discretised into a multi-level feedback queue.

Defaults follow the authors' simulator (SymbioticLab/Tiresias @ 959f9b08, simulator/; see
bench/anchors/tiresias.md for every line cited here):

- attained service a = GPUs x wall time held since the job last entered the top queue (GPU-seconds;
  run_sim.py:1037-1045);
- 3 queues, thresholds 3,250 and 7,200 GPU-s (jobs.py:102-104: num_queue = 3; only the first
  num_queue - 1 limits are ever read, run_sim.py:1049-1050, so the 18,000 in queue_limit is unused);
  a running job that crosses its queue's threshold is appended at the end of the next queue;
  strict priority between queues;
- inside a queue the authors keep one list, not a sort: new jobs are appended at its end, and after
  every scheduling pass the jobs that did not get GPUs are moved behind those that did, keeping
  their relative order (run_sim.py:1132-1143). So a running job stays ahead of every waiting job of
  its queue and is never preempted by one (`keep_running`; off = the earlier Quanta order by
  arrival, where an earlier waiting job preempts a later running one);
- 2D-Gittins (`dlas-gpu-gittins`, run_sim.py:2050-2052): the same queues, each sorted by descending
  Gittins index, then earlier submission, then list order (run_sim.py:1104-1105). The index is
  G(a) = P(S - a <= D | S > a) / E[min(S - a, D) | S > a] over the job GPU-time distribution S, with
  a fixed quantum D = `gittins_delta` = 3,250 GPU-s (jobs.py:116) and S Tiresias' bundled YARN
  sample (run_sim.py:1984-1990). `delta_to_threshold` instead sets D to the service left before the
  job's queue threshold (a secondary reading of the paper [S] has D = the threshold itself, not
  offered: the authors' code uses neither); `learn_distribution` uses the GPU-time of the jobs finished so far in the
  run once `min_history` have finished (both earlier Quanta variants);
- PROMOTE (off by default: the authors' `dlas-gpu` and `dlas-gpu-gittins` pass no knob,
  run_sim.py:2049,2052; `dlas-gpu-N` set N, run_sim.py:2077-2092): a waiting job in a lower queue
  whose pending time since it last entered the top queue, counted from when it first ran there
  (jobs.py:442; run_sim.py:1064-1065), reaches promote_knob x its executed wall time since then goes
  back to the end of the top queue with both reset (run_sim.py:1067-1074);
- the policy asks to be woken at the exact moment a running job crosses its queue's threshold or a
  waiting job becomes eligible for promotion (the authors' next_job_jump, run_sim.py:1219-1238,
  which is late for multi-GPU jobs: see `authors_timing`);
- placement (Quanta's, the paper's profile-based scheme; the authors' simulator only counts GPUs):
  a multi-GPU job whose model loses more than 1 - pack_limit of its speed when spread (the
  performance model's consolidated vs. spread rates: Tiresias' skew) waits for a consolidated
  placement; others take any free GPUs.
Gang allocation, preemption (checkpoint) and backfill (a job that does not fit is skipped, as the
authors' pass does, run_sim.py:1106-1118) come from the shared greedy walk.

Two reference quirks, off by default, reproduce the authors' simulator exactly when replaying it:
- `authors_timing`: demotion is checked at the authors' jump times,
  t + floor((threshold - executed wall seconds) / GPUs) (run_sim.py:1226, which subtracts wall
  seconds from a GPU-second threshold), and a job moves down at most one queue per pass
  (run_sim.py:1049-1053);
- `authors_index` (2D-Gittins): the authors' rank table instead of the Gittins index
  (`authors_rank_table`; it uses the YARN sample and `gittins_delta`, whatever
  `learn_distribution` and `delta_to_threshold` say).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.errors import QuantaError
from quanta.paths import TRACES_DIR
from quanta.policies.base import INF, MAX_S, Policy, require
from quanta.policies.greedy import greedy_fill
from quanta.policies.registry import register

EPS = 1e-6
_ARRAYS = {"off_att": 0.0, "off_exec": 0.0, "pend": 0.0, "exec_prev": 0.0, "pos": 0.0,
           "q": 0, "seen": False}


@lru_cache(maxsize=1)
def yarn_gpu_times() -> np.ndarray:
    """Tiresias' sample of 1,001 production job GPU-times (seconds), sorted."""
    return np.sort(np.loadtxt(TRACES_DIR / "tiresias_yarn_gput1000.csv", skiprows=1))


@lru_cache(maxsize=1)
def _yarn_cumsum() -> np.ndarray:
    return np.concatenate(([0.0], np.cumsum(yarn_gpu_times())))


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


@lru_cache(maxsize=8)
def authors_rank_table(delta: float) -> tuple[np.ndarray, np.ndarray]:
    """The Gittins rank as Tiresias' simulator computes it (run_sim.py:1950-2009): for each sorted
    YARN sample v, cal_r_gittins_index at a = v - 1, with the same arithmetic: P counts the samples
    in (a, a + delta] except that the largest sample never counts once a + delta passes it
    (idx_delta = num - 1, run_sim.py:1965-1966); E sums the samples themselves, not S - a, plus
    delta for the others, floor-divided by the survivors (Python 2 `/` on ints, run_sim.py:1973-1974);
    rank = round(P x 10^6 / E, 4). Returns (samples, rank per sample); a job at attained service a
    gets the rank of the first sample above a, 0 past the largest (get_gittins_index,
    run_sim.py:1244-1249). Python 2's round-half-away-from-zero is used for P, E and the rank."""
    data = yarn_gpu_times().astype(np.int64)
    num = len(data)
    d = int(delta)

    def r2(x: float, nd: int) -> float:   # Python 2 round(): half away from zero
        m = 10.0 ** nd
        return float(np.sign(x) * np.floor(abs(x) * m + 0.5) / m)

    ranks = np.zeros(num)
    for k, v in enumerate(data.tolist()):
        a = v - 1
        idx = int(np.searchsorted(data, a, side="right"))
        nxt = a + d
        idx_d = num - 1 if nxt > data[-1] - 1 else int(np.searchsorted(data, nxt, side="right"))
        p = r2((idx_d - idx) * 1.0 / (num - idx), 5)
        e_sum = int(data[idx:idx_d].sum()) + d * (num - idx_d)
        e = r2(float(e_sum // (num - idx)), 5)
        ranks[k] = r2(p * 1000000 / e, 4)
    return data.astype(float), ranks


def authors_rank(attained: np.ndarray, delta: float) -> np.ndarray:
    """get_gittins_index (run_sim.py:1244-1249) of jobs at `attained` GPU-seconds."""
    data, ranks = authors_rank_table(float(delta))
    idx = np.searchsorted(data, np.floor(attained + EPS), side="right")
    return np.where(idx < len(data), ranks[np.minimum(idx, len(data) - 1)], 0.0)


def _grow(st: dict, size: int) -> None:
    """Per-job arrays are indexed by driver row; extend them to cover `size` rows."""
    have = len(st["seen"])
    if size > have:
        extra = max(size, 2 * have) - have
        for k, fill in _ARRAYS.items():
            st[k] = np.concatenate([st[k], np.full(extra, fill, dtype=np.asarray(fill).dtype)])


def _new_state() -> dict:
    st: dict = {k: np.zeros(0, dtype=np.asarray(v).dtype) for k, v in _ARRAYS.items()}
    st.update(counter=0.0, t_prev=None, history=[], last=None)
    return st


@register("tiresias-las", "Tiresias 2D-LAS: discretised attained-service MLFQ (authors' 3 queues), "
          "running jobs kept ahead in a queue, optional PROMOTE knob, skew-aware placement")
@register("tiresias-gittins", "Tiresias 2D-Gittins: the same queues, each ordered by the Gittins index "
          "of the YARN GPU-time sample (quantum 3,250 GPU-s)", gittins=True)
@dataclass
class Tiresias(Policy):
    thresholds: tuple[float, ...] = (3250.0, 7200.0)   # GPU-seconds (jobs.py:102-104)
    promote_knob: float = float("inf")                 # off, as in the authors' default runs
    keep_running: bool = True
    gittins: bool = False
    gittins_delta: float = 3250.0                      # jobs.py:116
    delta_to_threshold: bool = False
    learn_distribution: bool = False
    min_history: int = 20
    authors_index: bool = False
    authors_timing: bool = False
    pack_limit: float = 0.9
    backfill: bool = True

    def __post_init__(self) -> None:
        if any(not 0 < t < INF for t in self.thresholds):
            raise QuantaError(f"tiresias thresholds must be positive GPU-seconds, got "
                              f"{'/'.join(f'{t:g}' for t in self.thresholds)}", field="--policy")
        # in order, as the queues take them: 7200/3250 is 3250/7200, one policy (it ran twice)
        self.thresholds = tuple(sorted(self.thresholds))
        require(self.promote_knob >= 0, "tiresias", "promote_knob", self.promote_knob,
                "0 or more (inf: off)")
        require(0 < self.gittins_delta <= MAX_S, "tiresias", "gittins_delta", self.gittins_delta,
                "a positive number of GPU-seconds, at most 1e15")
        require(self.min_history >= 0, "tiresias", "min_history", self.min_history, "0 or more")
        require(0 <= self.pack_limit <= 1, "tiresias", "pack_limit", self.pack_limit,
                "a share in [0, 1] (0: never wait to consolidate)")

    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        now = snap.now
        st = snap.state if snap.state else _new_state()
        rows = j.rows
        th = np.asarray(self.thresholds, dtype=float)
        _grow(st, int(rows.max()) + 1 if len(rows) else 0)
        seen = st["seen"][rows]
        executed = j.executed
        running = j.running
        # pending time since the job last entered the top queue, counted once it has run there
        # (jobs.py:442; run_sim.py:1064-1065): the part of the interval since the last decision in
        # which it held no GPUs, for jobs that had executed > 0 since entering
        if st["t_prev"] is not None and seen.any():
            r = rows[seen]
            held = executed[seen] - st["exec_prev"][r]
            gap = np.maximum((now - st["t_prev"]) - held, 0.0)
            counts = st["exec_prev"][r] - st["off_exec"][r] > EPS
            st["pend"][r[counts]] += gap[counts]
        att = j.attained - st["off_att"][rows]
        execd = executed - st["off_exec"][rows]
        q = np.searchsorted(th, att + EPS, side="right")
        if self.authors_timing:   # one queue down per pass (run_sim.py:1049-1053)
            q = np.where(seen, np.minimum(q, st["q"][rows] + 1), q)
        if self.gittins and self.learn_distribution:
            self._record_finished(st, snap, rows)
        # queue entries, appended at the end of their queue in this order (run_sim.py:1025-1074):
        # new jobs (running ones first: only a snapshot built by hand has them), then demoted and
        # promoted jobs, each in arrival order
        demoted = seen & (q > st["q"][rows])
        promote = np.zeros(len(rows), dtype=bool)
        if np.isfinite(self.promote_knob):
            promote = seen & ~running & (q > 0) & (execd > EPS) & \
                (st["pend"][rows] >= self.promote_knob * execd - EPS)
            if promote.any():
                pr = rows[promote]
                st["off_att"][pr] = j.attained[promote]
                st["off_exec"][pr] = executed[promote]
                st["pend"][pr] = 0.0
                att[promote], execd[promote], q[promote] = 0.0, 0.0, 0
        for mask, first in ((~seen, running), (demoted, None), (promote, None)):
            idx = np.flatnonzero(mask)
            if not len(idx):
                continue
            keys = (rows[idx], j.submit[idx]) + ((~first[idx],) if first is not None else ())
            idx = idx[np.lexsort(keys)]
            st["pos"][rows[idx]] = st["counter"] + np.arange(len(idx))
            st["counter"] += len(idx)
        pos = st["pos"][rows]
        within = (rows, pos) if self.keep_running else (rows, j.submit)
        if self.gittins:
            g = self._index(st, att, q, th)
            order = np.lexsort(within + (j.submit, -g, q) if self.keep_running else within + (-g, q))
        else:
            order = np.lexsort(within + (q,))
        dec = greedy_fill(snap, order, self.backfill, migrate=True)
        dec.consolidate = self._skewed(snap, dec)
        dec.wake_at = self._next_event(snap, dec, q, th, att, execd, st["pend"][rows])
        # after the pass, jobs without GPUs move behind those with GPUs (run_sim.py:1132-1143)
        keep = np.lexsort((pos, dec.gpus == 0, q))
        st["pos"][rows[keep]] = st["counter"] + np.arange(len(rows))
        st["counter"] += len(rows)
        st["q"][rows] = q
        st["seen"][rows] = True
        st["exec_prev"][rows] = executed
        st["t_prev"] = now
        if self.gittins and self.learn_distribution:
            st["last"] = (rows.copy(), j.attained.copy(), np.where(dec.gpus > 0, dec.gpus, 0), now)
        dec.state = st
        return dec

    # -- pieces -----------------------------------------------------------------------------------
    def _index(self, st: dict, att: np.ndarray, q: np.ndarray, th: np.ndarray) -> np.ndarray:
        if self.authors_index:
            return authors_rank(att, self.gittins_delta)
        if self.delta_to_threshold:
            delta = np.where(q < len(th), th[np.minimum(q, len(th) - 1)] - att, self.gittins_delta)
        else:
            delta = np.full(len(att), float(self.gittins_delta))
        if self.learn_distribution:
            dist, cums = self._distribution(st)
        else:
            dist, cums = yarn_gpu_times(), _yarn_cumsum()
        return gittins_index(dist, att, np.maximum(delta, EPS), cums)

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
            return yarn_gpu_times(), _yarn_cumsum()
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
                    att: np.ndarray, execd: np.ndarray, pend: np.ndarray) -> float | None:
        """The next moment a running job crosses its threshold or a waiting job can be promoted."""
        now = snap.now
        cand = [np.inf]
        run = (dec.gpus > 0) & (q < len(th))
        if run.any():
            exact = (th[q[run]] - att[run]) / dec.gpus[run]
            if self.authors_timing:
                # next_job_jump (run_sim.py:1224-1226): Python 2 floor division of the threshold
                # (GPU-s) minus the executed wall seconds by the GPUs (the exact time where that
                # is under a second, which whole-second times never give: no endless wake-ups)
                late = np.floor((th[q[run]] - execd[run]) / dec.gpus[run] + EPS)
                exact = np.where(late >= 1.0, late, exact)
            cand.append(float(np.min(exact)))
        if np.isfinite(self.promote_knob):
            wait = (dec.gpus == 0) & (q > 0) & (execd > EPS)
            if wait.any():
                due = self.promote_knob * execd[wait] - pend[wait]
                cand.append(float(np.min(due)))
        step = min(cand)
        return now + max(step, EPS) if np.isfinite(step) else None
