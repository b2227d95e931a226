"""Pollux (OSDI'21): co-adaptive cluster scheduling for goodput.

Every round (60 s) each job gets a GPU count (and type) maximising the cluster fitness
FITNESS_p = (mean_j SPEEDUP_j^p)^(1/p), p = -1 by default (fairness; p = 1 is plain efficiency):
- SPEEDUP_j(A) = goodput(A) / goodput(1 GPU of the job's best type), goodput from the
  performance model, which picks the best batch size and accumulation steps for the allocation
  (Pollux's per-job agent: quanta/perf/goodput.py);
- re-allocation penalty: an allocation other than the current one has its speedup multiplied by
  REALLOC = max(age - restarts * delta, 0) / (age + delta), delta = 30 s (Pollux's simulator);
- a job may use up to twice the largest GPU count it has run with (1 GPU before it ran: nothing
  is profiled yet), as Pollux's simulator caps replicas at max(2 x the largest profiled so far,
  1), and at most `max_gpus`;
- batch size and accumulation re-tuned for every allocation (jobs run with the plan
  ADAPTIVE_BATCH); goodputs at each job's current training phase.
Search: exact, by the integer programme shared with Sia (quanta/policies/config_ilp.py) over
every GPU count within those limits, instead of the paper's genetic algorithm (NSGA-II); with
p < 0 a job without GPUs makes the fitness 0, so admission (lambda = 100 per job) comes first.
On a heterogeneous cluster Pollux (like Sia's `pollux_unaware` baseline) does not tell GPU
types apart: it models every type as the cluster's most common one (`aware=true` lifts that).
Left out: Pollux's "at most one distributed job per node" constraint and its exact node-level
replica matrix (placement is the core's consolidating placement).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.perf.base import ADAPTIVE_BATCH, rate_with
from quanta.policies.base import Policy
from quanta.policies.config_ilp import Candidates, decide_configs, restart_factor
from quanta.policies.registry import register

ADMIT = 100.0


@register("pollux", "Pollux: goodput-aware GPU counts and batch sizes each round, fitness = power "
                    "mean of speedups (p = -1), re-allocation penalty; exact ILP search")
@dataclass
class Pollux(Policy):
    interval: float = 60.0
    p: float = -1.0
    restart_delay: float = 30.0
    max_gpus: int = 64
    aware: bool = False      # Pollux is heterogeneity-unaware: every type looks like the main one
    time_limit: float = 10.0

    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        n = len(j)
        cl = snap.cluster
        st = snap.state if snap.state else {"seen": {}}
        seen: dict[int, int] = st["seen"]
        for i in np.flatnonzero(j.running).tolist():
            r = int(j.rows[i])
            seen[r] = max(seen.get(r, 0), int(j.gpus[i]))
        main = int(np.argmax(cl.capacity))           # the type an unaware Pollux models
        rows: list[tuple[int, int, int, float]] = []
        for i, spec in enumerate(j.specs):
            cap = min(max(2 * seen.get(int(j.rows[i]), 0), 1), self.max_gpus)
            for k in np.flatnonzero(j.allowed[i]).tolist():
                seen_as = k if self.aware else main
                for cnt in range(1, min(cap, int(snap.capacity[k])) + 1):
                    rate = rate_with(snap.perf, spec, cl.types[seen_as], cnt,
                                     cl.min_nodes(seen_as, cnt), True, ADAPTIVE_BATCH)
                    if rate > 0:
                        rows.append((i, k, cnt, rate))
        c = Candidates.of(rows)
        base = np.zeros(n)
        np.maximum.at(base, c.job, np.where(c.count == 1, c.rate, 0.0))   # best 1-GPU goodput
        speedup = c.rate / np.maximum(base[c.job], 1e-12)
        realloc = restart_factor(snap, self.restart_delay, grace=False)
        speedup = np.maximum(np.where(c.current(snap), speedup, speedup * realloc[c.job]), 1e-4)
        term = speedup ** self.p
        return decide_configs(snap, c, (term if self.p < 0 else -term) - ADMIT, st, self.time_limit,
                              dict.fromkeys(range(n), ADAPTIVE_BATCH))
