"""Sia (SOSP'23): per round, one configuration (GPU type, GPU count) per job from an ILP over
normalised goodputs, heterogeneity- and restart-aware.

- configurations per type: single-node powers of two up to the node size, then whole nodes;
- a job may use up to twice the largest GPU count it has run with on any type ("scale up by at
  most 2x"; a job that never ran gets 1 GPU: Sia knows no throughput of it before its first run,
  sia.py offers only the scale-unit configuration then), at most `max_gpus`; the largest count
  is shared across GPU types as in the paper's runs (`--share_max_replicas`, run_experiment.sh;
  `share_max=false` keeps one per type, the simulator's default flag); a rigid job (with
  `adaptive=false`, or a spec with min_gpus = max_gpus) only its requested count;
- goodput of each (job, configuration) from the performance model at the job's current training
  phase (for Pollux/Sia applications: throughput x statistical efficiency at the best batch
  size; jobs run with the plan ADAPTIVE_BATCH, i.e. Sia re-tunes their batch size, unless rigid);
  normalised by the job's smallest non-zero goodput, floored at 1e-4, raised to p (default
  -0.5), capped at 3000;
- restart penalty: every configuration other than the current one is scaled by
  r = max(age - restarts * delta, 0) / (age + delta), none while age < delta;
- ILP (HiGHS through scipy.optimize.milp): binary x_jc, one configuration per job, GPUs per type
  within capacity; for p < 0 minimise sum A x + lambda_n * (unallocated jobs), lambda_n = 1.1.
Placement, lease extension (unchanged jobs keep their GPUs) and restart costs are the core's.
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


def config_counts(node_size: int, capacity: int) -> list[int]:
    """Sia's configuration set for one GPU type: 1, 2, 4, ... up to a node, then whole nodes."""
    out, n = [], 1
    while n < node_size and n <= capacity:
        out.append(n)
        n *= 2
    m = node_size
    while m <= capacity:
        out.append(m)
        m += node_size
    return out


@register("sia", "Sia: per-round ILP over (GPU type, count) configurations of normalised goodput, "
                 "restart penalty, scale-up at most 2x")
@dataclass
class Sia(Policy):
    interval: float = 60.0
    p: float = -0.5
    lambda_n: float = 1.1
    restart_delay: float = 30.0   # delta of the restart penalty
    max_gpus: int = 64
    adaptive: bool = True         # jobs may be given any GPU count (Sia's adaptive jobs)
    share_max: bool = True        # the 2x cap from the largest count on any type (else per type)
    time_limit: float = 10.0

    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        n = len(j)
        st = snap.state if snap.state else {"seen": {}}
        seen: dict[tuple[int, int], int] = st["seen"]
        for i in np.flatnonzero(j.running).tolist():
            key = (int(j.rows[i]), -1 if self.share_max else int(j.gtype[i]))
            seen[key] = max(seen.get(key, 0), int(j.gpus[i]))
        c = self._candidates(snap, seen)
        # normalise per job, restart penalty, power
        low = np.full(n, np.inf)
        np.minimum.at(low, c.job, c.rate)
        g = np.maximum(c.rate / low[c.job], 1e-4)
        r = restart_factor(snap, self.restart_delay, grace=True)
        g = np.where(c.current(snap), g, np.maximum(g * r[c.job], 1e-4))
        A = np.minimum(g ** self.p, 3000.0)
        sign = 1.0 if self.p < 0 else -1.0     # p < 0: minimise sum of A; p > 0: maximise it
        plans = {i: ADAPTIVE_BATCH for i in range(n) if not self._rigid(j.specs[i])}
        return decide_configs(snap, c, sign * A - self.lambda_n * sign, st, self.time_limit, plans)

    def _rigid(self, spec) -> bool:
        return not self.adaptive or bool(spec.min_gpus and spec.min_gpus == spec.max_gpus)

    def _candidates(self, snap: Snapshot, seen: dict) -> Candidates:
        j = snap.jobs
        cl = snap.cluster
        counts = [config_counts(int(cl.type_node_max[k]), int(snap.capacity[k]))
                  for k in range(len(cl.types))]
        rows: list[tuple[int, int, int, float]] = []
        for i, spec in enumerate(j.specs):
            rigid = self._rigid(spec)
            plan = None if rigid else ADAPTIVE_BATCH
            for k in np.flatnonzero(j.allowed[i]).tolist():
                most = seen.get((int(j.rows[i]), -1 if self.share_max else k), 0)
                cap = min(max(2 * most, 1), self.max_gpus)
                for cnt in counts[k]:
                    if rigid and cnt != j.req[i] or not rigid and cnt > cap:
                        continue
                    rate = rate_with(snap.perf, spec, cl.types[k], cnt, cl.min_nodes(k, cnt), True,
                                     plan)
                    if rate > 0:
                        rows.append((i, k, cnt, rate))
        return Candidates.of(rows)
