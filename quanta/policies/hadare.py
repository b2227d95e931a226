"""HadarE (arXiv 2503.10918): Hadar plus job forking.

Each round, Hadar plans every job (quanta.policies.hadar). Then HadarE forks [U: mechanics not
public; this reconstruction]:
1. Scarcity. A GPU type is scarce when a waiting job (delayed by Hadar, or deferred to a later
   round) may use it. Forks take only GPUs of types that are not scarce and that Hadar's plan leaves
   idle this round. When a type becomes scarce, every copy on it is withdrawn: the job is
   consolidated back to its one Hadar copy (its GPUs go to the waiting jobs).
2. Forking. A running single-type job (longest remaining time first; jobs already forked first, so
   that a fork that still fits is kept without a restart) gets one extra copy on each other
   non-scarce type with idle GPUs, fastest type first: the job's own gang (its requested GPUs, fewer
   if fewer are idle) training the same model. A copy is added only if it pays: the forked job's
   time to finish, plus a restart (adding a copy restarts the job from its checkpoint), is below
   the time of the copies it has. One copy per GPU type (the core's allocation over types).
3. Work split (`work_split`): the remaining steps are split among the copies in proportion to
   their throughput (the performance model's steps/s, what the runtime measures), so all copies
   reach the end of every round together.
4. Aggregation: at every round end (`period` = the round) the copies average their models: a ring
   all-reduce of the parameters over the slowest link (quanta.perf.base.aggregation_seconds,
   model size from the performance model, link from the nodes' `inter_bw_gbps`, 10 GbE if not
   given). The job then progresses at sum of copy rates x (1 - aggregation / period)
   (quanta.perf.base.mixed_rate with `fork`); it completes when the summed work is done.
A forked job is a Decision.mixed allocation with Decision.fork[row] = period: the same core path
as Hadar's task-level heterogeneity, except that its parts synchronise every round, not every step.
Cluster resource utilisation (CRU) is the summary's `gpu_util` (busy GPU-seconds / (GPUs x
makespan)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.perf.base import Part, aggregation_seconds, link_gbps, mixed_rate
from quanta.policies.hadar import Hadar
from quanta.policies.registry import register


def work_split(remaining: float, rates: np.ndarray) -> np.ndarray:
    """Steps each copy trains: the remaining steps in proportion to the copies' throughput (all
    copies then finish together, at remaining / sum(rates))."""
    rates = np.asarray(rates, dtype=float)
    return remaining * rates / rates.sum()


@register("hadare", "HadarE: Hadar plus forking jobs into copies on idle GPU types, work split by "
                    "throughput, model averaging every round; consolidated when GPUs are scarce")
@dataclass
class HadarE(Hadar):
    max_copies: int = 0            # copies per job (0: one per GPU type)

    def decide(self, snap: Snapshot) -> Decision:
        schedules, delayed, _ = self.plan(snap)
        j, cl = snap.jobs, snap.cluster
        K = len(cl.types)
        dec = Decision.empty(snap)
        free = snap.capacity.astype(np.int64).copy()
        single: list = []
        for s in schedules:
            if s.start != 0:
                continue
            counts = s.counts(cl.node_type, K)
            dec.gpus[s.job], dec.gpu_type[s.job] = int(counts.sum()), s.gtype
            free -= counts
            if s.mixed:
                dec.mixed[s.job] = counts
            else:
                single.append(s)
        waiting = delayed + [s.job for s in schedules if s.start > 0]
        scarce = j.allowed[waiting].any(axis=0) if waiting else np.zeros(K, dtype=bool)
        idle = np.where(scarce, 0, np.maximum(free, 0))
        if not idle.any() or not single:
            return dec
        remaining = j.remaining
        held = j.parts
        forked = j.fork_s > 0
        single.sort(key=lambda s: (not forked[s.job], -remaining[s.job], int(j.rows[s.job])))
        bw = link_gbps(cl, np.arange(len(cl.nodes)))
        for s in single:
            counts = self._fork(snap, s.job, s.gtype, idle, held[s.job], forked[s.job], bw)
            if counts is not None:
                dec.mixed[s.job] = counts
                dec.gpus[s.job] = int(counts.sum())
                dec.fork[s.job] = self.interval
                idle -= counts
                idle[s.gtype] += counts[s.gtype]     # the first copy was planned by Hadar
        return dec

    def _fork(self, snap: Snapshot, r: int, k: int, idle: np.ndarray, held: np.ndarray,
              was_forked: bool, bw: float) -> np.ndarray | None:
        """GPUs per type of job r's copies (its Hadar copy on type k plus copies on idle types),
        or None if one copy is best."""
        j, cl, perf = snap.jobs, snap.cluster, snap.perf
        spec, z = j.specs[r], int(j.req[r])
        rates = j.rates[r]
        if was_forked and held[k] == z:            # keep a fork that still fits: no restart
            extra = held.copy()
            extra[k] = 0
            if (extra <= idle).all() and (extra[~j.allowed[r]] == 0).all():
                return held.copy()
        counts = np.zeros(len(idle), dtype=np.int64)
        counts[k] = z
        limit = self.max_copies or len(idle)
        others = [u for u in np.argsort(-rates, kind="stable").tolist()
                  if u != k and rates[u] > 0 and idle[u] > 0]
        best_t = float(j.remaining[r]) / max(perf.rate(spec, cl.types[k], z), 1e-12)
        for u in others[:limit - 1]:
            trial = counts.copy()
            trial[u] = min(z, int(idle[u]))
            parts = [Part(cl.types[t], int(c), cl.min_nodes(t, int(c)), True)
                     for t, c in enumerate(trial.tolist()) if c]
            agg = aggregation_seconds(perf, spec, len(parts), bw)
            rate = mixed_rate(perf, spec, parts, (self.interval, agg))
            t_fork = float(j.remaining[r]) / max(rate, 1e-12) + self.restart_s
            if t_fork < best_t:
                counts, best_t = trial, t_fork - self.restart_s
        return counts if np.count_nonzero(counts) > 1 else None
