"""Hadar (IPDPS'24): online primal-dual scheduling over GPU types and rounds.

Each round (`interval` s) every active job is (re)planned, running jobs first, then waiting ones,
each group in arrival order (the order an online primal-dual algorithm commits jobs in):
1. Prices. Every (node h, future round t) has a price per GPU that rises exponentially with the
   GPUs already planned there, g[h,t] out of c_h (`price`, replaceable; OASiS form [U]):
       p = L/(4 eta) * (4 eta U / L) ** (g / c)
   U and L are the largest and smallest utility per GPU-round among this round's jobs (each job at
   its best type, starting now, on an empty cluster); utility is in GPU-seconds (below).
2. Dual subroutine (`schedule`, replaceable): a job's schedules are (GPU type k, start round t0 <
   `starts`), running to completion on z_j GPUs of k: d = ceil(remaining / (T[j,k] * round))
   rounds (plus the restart delay if the job is not already on k). Its GPUs go to the nodes of k
   whose summed price over the window is lowest (and that stay free over it). Cost = sum of price
   x GPUs over the window (rounds past the `horizon` at the idle price L/(4 eta)).
   Utility of finishing at c [U: the paper's utility is a decreasing function of completion time;
   this one]: u = w z ideal * (age + ideal) / (c - submit), ideal = remaining time at the best
   type: z*ideal GPU-seconds of work, scaled by how close the JCT is to the job's best.
   Payoff = u - cost; the best schedule wins.
3. Admission: payoff > 0 -> the schedule is committed (its GPUs raise the prices of later jobs);
   it runs now when t0 = 0, else it only reserves. payoff <= 0 -> the job is delayed this round.
Task-level heterogeneity (`mix`, on by default): a job whose fastest types lack room in a round may
get a schedule over several types (best_schedule), run as one synchronous gang whose rate is the
performance model's mixed rule (quanta.perf.base.mixed_rate: the slowest worker's per-GPU rate x
workers); it goes out as Decision.mixed (GPUs per type). Single-type schedules go out as
Decision.gpus / gpu_type. The mechanism picks the GPUs (consolidated within each type), so the
nodes priced are those the plan fills, not necessarily those the job gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ClassVar, NamedTuple

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.perf.base import Part, mixed_rate
from quanta.policies.base import Policy
from quanta.policies.registry import register


def exponential_price(g: np.ndarray, c: np.ndarray, low: float, high: float, eta: float) -> np.ndarray:
    """OASiS-style price per GPU of a resource with g of c GPUs taken: low/(4 eta) when idle,
    rising exponentially to `high` when full."""
    lo = low / (4.0 * eta)
    return lo * (high / lo) ** (g / np.maximum(c, 1))


class Schedule(NamedTuple):
    job: int            # snapshot row
    gtype: int          # type index
    start: int          # first round (0 = now)
    rounds: int         # rounds to completion
    nodes: np.ndarray   # GPUs per node (cluster node index order)
    utility: float
    cost: float
    mixed: bool = False  # over several GPU types (gtype: its slowest); per type: counts()

    def counts(self, node_type: np.ndarray, types: int) -> np.ndarray:
        """GPUs per type index."""
        return np.bincount(node_type, weights=self.nodes, minlength=types).astype(np.int64)

    @property
    def payoff(self) -> float:
        return self.utility - self.cost


@dataclass
class Prices:
    """Planned GPUs per (node, future round) and the price function over them."""
    used: np.ndarray        # (nodes, horizon) GPUs planned
    cap: np.ndarray         # (nodes,) GPUs per node (0 if down)
    low: float
    high: float
    eta: float
    fn: Callable = exponential_price

    def table(self) -> np.ndarray:
        return self.fn(self.used, self.cap[:, None], self.low, self.high, self.eta)

    @property
    def idle(self) -> float:
        return float(self.fn(np.zeros(1), np.ones(1), self.low, self.high, self.eta)[0])

    def commit(self, s: Schedule) -> None:
        end = min(s.start + s.rounds, self.used.shape[1])
        self.used[:, s.start:end] += s.nodes[:, None]


def best_schedule(j: int, z: int, remaining: float, rates: np.ndarray, weight: float, age: float,
                  ideal: float, current: np.ndarray, restart_s: float, round_s: float, starts: int,
                  prices: Prices, node_type: np.ndarray,
                  mix_rate: Callable[[np.ndarray], float] | None = None) -> Schedule | None:
    """The dual subroutine: the schedule of job j with the highest payoff (None: none fits).

    `current` = GPUs per type the job holds now; `mix_rate(GPUs per node)` = its steps/s on a
    gang over several types (None: single-type schedules only). Task-level heterogeneity [U: the
    search is ours]: in a start round where the job's fastest types have too few GPUs, the
    m fastest types together (m = 2, 3, ...; the first m whose types each lack room but together
    have it) give a mixed schedule, its GPUs taken cheapest window first over their nodes."""
    P = prices.table()
    free = prices.cap[:, None] - prices.used
    H = P.shape[1]
    cum = np.concatenate([np.zeros((len(P), 1)), np.cumsum(P, axis=1)], axis=1)
    best: Schedule | None = None
    allowed = np.flatnonzero(rates > 0)
    by_speed = allowed[np.argsort(-rates[allowed], kind="stable")]
    K = len(rates)

    def candidate(k: int, nodes: np.ndarray, rate: float, t0: int, same: bool,
                  mixed: bool) -> Schedule | None:
        extra = 0.0 if same else restart_s
        d = max(int(np.ceil((remaining / rate + extra) / round_s - 1e-9)), 1)
        end = min(t0 + d, H)
        room = free[nodes, t0:end].min(axis=1)
        if room.sum() < z:
            return None
        win = cum[nodes, end] - cum[nodes, t0]
        take = np.zeros(len(nodes), dtype=np.int64)
        left = z
        for i in np.lexsort((nodes, win)).tolist():      # cheapest window first
            if left == 0:
                break
            x = int(min(room[i], left))
            take[i], left = x, left - x
        cost = float(take @ win) + z * (t0 + d - end) * prices.idle
        finish = age + (t0 * round_s) + remaining / rate + extra
        utility = weight * z * ideal * (age + ideal) / max(finish, 1e-9)
        alloc = np.zeros(len(node_type), dtype=np.int64)
        alloc[nodes] = take
        return Schedule(j, k, t0, d, alloc, utility, cost, mixed)

    for t0 in range(min(starts, H)):
        fits = []
        for k in by_speed.tolist():
            nodes = np.flatnonzero(node_type == k)
            fits.append(free[nodes, t0].sum() >= z)
            s = candidate(k, nodes, rates[k], t0, current[k] == z, False)
            if s is not None and (best is None or s.payoff > best.payoff + 1e-12):
                best = s
        if mix_rate is None or all(fits[:1]):
            continue
        for m in range(2, len(by_speed) + 1):             # the m fastest types together
            types = by_speed[:m]
            if any(fits[:m]):
                break                                      # one of them alone has room
            nodes = np.flatnonzero(np.isin(node_type, types))
            if free[nodes, t0].sum() < z:
                continue
            probe = candidate(int(types[-1]), nodes, rates[types[-1]], t0, False, True)
            if probe is None:
                continue
            rate = mix_rate(probe.nodes)
            counts = np.bincount(node_type, weights=probe.nodes, minlength=K)
            if rate <= 0 or np.count_nonzero(counts) < 2:
                continue
            s = candidate(int(types[-1]), nodes, rate, t0, np.array_equal(counts, current), True)
            if s is not None and (best is None or s.payoff > best.payoff + 1e-12):
                best = s
            break
    return best


@register("hadar", "Hadar: online primal-dual over GPU types and rounds; per-(node, round) "
                   "exponential prices, a job admitted on its best-payoff schedule only if the "
                   "payoff is positive")
@dataclass
class Hadar(Policy):
    interval: float = 360.0        # round length (s), as Gavel
    eta: float = 1.0               # price scaling [U]
    starts: int = 8                # start rounds a schedule may be deferred to
    horizon: int = 48              # rounds priced ahead (past: idle price)
    restart_s: float = 30.0        # charged in a schedule that moves a job to another type
    mix: bool = True               # task-level heterogeneity: a gang over several GPU types
    price: Callable = field(default=exponential_price, repr=False)
    schedule: Callable = field(default=best_schedule, repr=False)
    mixes_types: ClassVar[bool] = True

    def mix_rate(self, snap: Snapshot, r: int) -> Callable[[np.ndarray], float] | None:
        """Steps/s of job r on a gang over several types given as GPUs per node (the
        performance model's rule for mixed allocations, quanta.perf.base.mixed_rate)."""
        if not self.mix:
            return None
        cl, spec = snap.cluster, snap.jobs.specs[r]

        def rate(per_node: np.ndarray) -> float:
            parts = []
            for k in np.unique(cl.node_type[per_node > 0]).tolist():
                on_k = per_node[cl.node_type == k]
                c, nd = int(on_k.sum()), int(np.count_nonzero(on_k))
                parts.append(Part(cl.types[k], c, nd, nd <= cl.min_nodes(k, c)))
            return mixed_rate(snap.perf, spec, parts)
        return rate

    def plan(self, snap: Snapshot) -> tuple[list[Schedule], list[int], Prices]:
        """(committed schedules, delayed rows, the prices after the round's commitments)."""
        j = snap.jobs
        n = len(j)
        cl = snap.cluster
        R = self.interval
        rates = np.where(j.allowed, j.rates, 0.0)
        best = rates.max(axis=1) if n else np.zeros(0)
        remaining = j.remaining
        ideal = remaining / np.maximum(best, 1e-12)
        age = snap.now - j.submit
        # utility per GPU-round of each job's best schedule on an empty cluster
        rounds_best = np.maximum(np.ceil(ideal / R - 1e-9), 1)
        density = j.weight * ideal / (rounds_best * R)
        ok = best > 0
        high = R * float(density[ok].max()) if ok.any() else R     # per GPU-round
        low = R * float(density[ok].min()) if ok.any() else R
        cap = np.where(snap.node_up, cl.node_gpus, 0).astype(np.int64)
        prices = Prices(np.zeros((len(cl.nodes), self.horizon), dtype=np.int64), cap, low, high,
                        self.eta, self.price)
        order = np.lexsort((j.rows, j.submit, ~j.running))
        held = j.parts
        done: list[Schedule] = []
        delayed: list[int] = []
        for r in order.tolist():
            if not ok[r]:
                delayed.append(r)
                continue
            s = self.schedule(r, int(j.req[r]), float(remaining[r]), rates[r], float(j.weight[r]),
                              float(age[r]), float(ideal[r]), held[r], self.restart_s, R,
                              self.starts, prices, cl.node_type, self.mix_rate(snap, r))
            if s is None or s.payoff <= 0:
                delayed.append(r)
                continue
            prices.commit(s)
            done.append(s)
        return done, delayed, prices

    def decide(self, snap: Snapshot) -> Decision:
        dec = Decision.empty(snap)
        schedules, _, _ = self.plan(snap)
        K = len(snap.cluster.types)
        for s in schedules:
            if s.start == 0:
                dec.gpus[s.job], dec.gpu_type[s.job] = int(s.nodes.sum()), s.gtype
                if s.mixed:
                    dec.mixed[s.job] = s.counts(snap.cluster.node_type, K)
        return dec
