"""A Synergy-like multi-resource baseline (Synergy, OSDI'22; ALGORITHMS.md section 8): GPUs by a
base policy, CPU threads and host memory by each job's sensitivity instead of in proportion to its
GPUs. Execution plans and GPU counts stay as the jobs ask.

Per round (60 s, as Rubick's comparison runs it [U]):
1. GPUs: FIFO, non-preemptive, with backfill (`greedy_fill`), each job at its requested count.
2. Proportional (Synergy's default): every job gets its GPUs' share of the cluster's CPU threads
   and host memory (cluster total / GPUs, per GPU).
3. TUNE-like redistribution (`tune`, on by default) [U: a simplification of Synergy's TUNE, which
   works server by server]: each job's demand is the cheapest (CPUs, memory) per GPU on Synergy's
   profiling grid (quanta.perf.synergy's CPUS x MEM_GB, capped by a node's share) whose speed is
   within 1% of the best on that grid - its "optimistic profile", from the performance model's
   `rate_with`. Jobs whose demand is below the proportional share release the rest; jobs wanting
   more get their demand from the released pool, largest gain per unit of extra resource first,
   if it fits; otherwise they keep the proportional share.
4. The decision is tried through the real placement (`mechanism.dry_run`); a job that would not
   fit its nodes with its tuned resources falls back to the proportional share, then waits.
On clusters whose nodes do not give CPUs / memory, nothing is asked (plain FIFO).
A round reads the jobs, what they hold and the cluster, never the clock: a round with the last
round's inputs gives the last answer (quanta/policies/reuse.py), and a job's profile is kept per
(spec, type, GPUs, share) for the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.perf.base import rate_with
from quanta.perf.synergy import CPUS, MEM_GB
from quanta.policies.base import Policy
from quanta.policies.greedy import greedy_fill, priority_order
from quanta.policies.registry import register
from quanta.policies.reuse import LAST_ROUND, keep_decision, last_decision, round_inputs


@register("synergy", "Synergy-like: FIFO GPUs at the requested count and plan; CPU threads and host "
                     "memory GPU-proportional, then moved to the jobs sensitive to them (TUNE-like)")
@dataclass
class Synergy(Policy):
    interval: float = 60.0
    tune: bool = True
    backfill: bool = True
    _memo: dict = field(default_factory=dict, repr=False, compare=False)   # see _profile

    def decide(self, snap: Snapshot) -> Decision:
        # a round reads the jobs, what they hold and the cluster, never the clock: the same
        # inputs as the last round's, the same answer (policies/reuse.py)
        inputs = round_inputs(snap)
        dec = last_decision(self._memo, inputs)
        if dec is None:
            dec = self._decide(snap)
            keep_decision(self._memo, inputs, dec)
        return dec

    def _decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        dec = greedy_fill(snap, priority_order((j.rows, j.submit), j.running), self.backfill)
        cap_c, cap_m = snap.resources
        if not (np.isfinite(cap_c) and np.isfinite(cap_m)) or not (dec.gpus > 0).any():
            return dec
        G = snap.cluster.num_gpus
        share = np.array([cap_c / G, cap_m / G])
        on = np.flatnonzero(dec.gpus > 0)
        prop = np.outer(dec.gpus, share)                        # (n, 2) proportional
        alloc = prop.copy()
        if self.tune:
            alloc = self._tune(snap, dec, on, prop, share, np.array([cap_c, cap_m]))
        from quanta.core.mechanism import dry_run
        for fallback in (False, True):
            dec.cpus, dec.mem_gb = alloc[:, 0].copy(), alloc[:, 1].copy()
            placed = dry_run(snap, dec)
            miss = (dec.gpus > 0) & ~placed
            if not miss.any():
                return dec
            if fallback:
                break
            alloc[miss] = prop[miss]
        dec.gpus[miss], dec.gpu_type[miss] = 0, -1
        dec.cpus[miss], dec.mem_gb[miss] = 0.0, 0.0
        return dec

    def _tune(self, snap: Snapshot, dec: Decision, on: np.ndarray, prop: np.ndarray,
              share: np.ndarray, cap: np.ndarray) -> np.ndarray:
        j = snap.jobs
        alloc = prop.copy()
        want: list[tuple[float, int, np.ndarray]] = []
        for i in on.tolist():
            g, k = int(dec.gpus[i]), int(dec.gpu_type[i])
            demand, top_speed, base = self._profile(snap, j.specs[i], k, g, share)
            alloc[i] = np.minimum(demand, prop[i])              # release what it does not need
            extra = np.maximum(demand - prop[i], 0.0)
            if extra.any() and base > 0:
                gain = (top_speed - base) / base / max(float((extra / (share * g)).max()), 1e-9)
                want.append((-gain, i, demand))
        pool = cap - alloc.sum(axis=0)
        for _, i, demand in sorted(want, key=lambda x: (x[0], x[1])):
            extra = demand - alloc[i]
            if np.all(extra <= pool + 1e-9):
                pool -= extra
                alloc[i] = demand
        return alloc

    def _profile(self, snap: Snapshot, spec, k: int, g: int, share: np.ndarray
                 ) -> tuple[np.ndarray, float, float]:
        """A job's optimistic profile on `g` GPUs of type k: its demand (CPU threads, GB), its
        best speed on the grid and its speed at the proportional share. Kept per (spec, type,
        GPUs, share) for the run's performance model and cluster: a job running for months in
        60 s rounds asked the model for the same ~50 rates every round (a 10-job openb run
        took minutes)."""
        memo = self._memo
        of = memo.get("of")
        if of is None or of[0] is not snap.perf or of[1] is not snap.cluster:
            for key in [key for key in memo if key != LAST_ROUND]:
                del memo[key]
            memo["of"] = (snap.perf, snap.cluster)
        key = (spec, k, g, float(share[0]), float(share[1]))
        got = memo.get(key)
        if got is None:
            cl = snap.cluster
            node_g = int(cl.type_node_max[k])
            top = share * node_g / min(g, node_g)              # a node's share for its GPUs there
            grid = [(c, m) for c in CPUS for m in MEM_GB if c <= top[0] and m <= top[1]]
            grid += [tuple(share)]
            rate = lambda c, m: rate_with(snap.perf, spec, cl.types[k], g,  # noqa: E731
                                          cl.min_nodes(k, g), True, None, c * g, m * g)
            speeds = np.array([rate(c, m) for c, m in grid])
            base = rate(*share)
            ok = speeds >= 0.99 * speeds.max()
            cost = np.array([max(c / share[0], m / share[1]) for c, m in grid])
            best = grid[int(np.argmin(np.where(ok, cost, np.inf)))]
            got = memo[key] = (np.array(best) * g, float(speeds.max()), base)
        return got
