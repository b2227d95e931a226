"""Hadar's prices and its dual subroutine (quanta/policies/hadar.py is the policy): the price of a
GPU-round as a function of the GPUs planned on its node (`exponential_price`), the price table
kept up to date commit by commit (`Prices`), and the search for a job's best schedule against it
(`best_schedule`). Formulas and their provenance: hadar.py's docstring."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np


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
    kept: bool = False   # a running job kept where it is (not searched this round)
    parts: np.ndarray | None = None   # GPUs per type, where `nodes` is not known (kept jobs)
    at: np.ndarray | None = None      # the nodes `nodes` puts GPUs on, ascending (None: not said)

    def counts(self, node_type: np.ndarray, types: int) -> np.ndarray:
        """GPUs per type index."""
        if self.parts is not None:
            return self.parts.copy()
        at = slice(None) if self.at is None else self.at
        return np.bincount(node_type[at], weights=self.nodes[at], minlength=types).astype(np.int64)

    @property
    def payoff(self) -> float:
        return self.utility - self.cost


class Prices:
    """Planned GPUs per (node, round of the window) and the price function over them. The price
    table and its running sums over rounds are kept up to date row by row: a commit recomputes
    only the nodes it touches."""

    def __init__(self, used: np.ndarray, cap: np.ndarray, low: float, high: float, eta: float,
                 fn: Callable = exponential_price):
        self.used = used                      # (nodes, horizon) GPUs planned
        self.cap = cap                        # (nodes,) GPUs per node (0 if down)
        self.low, self.high, self.eta, self.fn = low, high, eta, fn
        self.P = np.asarray(fn(used, cap[:, None], low, high, eta), dtype=float)
        self.cum = np.zeros((used.shape[0], used.shape[1] + 1))
        np.cumsum(self.P, axis=1, out=self.cum[:, 1:])
        self.peak = np.zeros((used.shape[0], used.shape[1] + 1), dtype=used.dtype)
        np.maximum.accumulate(used, axis=1, out=self.peak[:, 1:])   # most planned in [0, e)
        self.idle = float(fn(np.zeros(1), np.ones(1), low, high, eta)[0])
        self.floor = min(self.idle, float(self.P.min())) if self.P.size else self.idle
        self._groups: dict = {}

    def nodes_of(self, node_type: np.ndarray, types: tuple[int, ...]) -> np.ndarray | slice:
        """Node indices of the given types, ascending (memoised for the round); a slice where
        they are contiguous, so that reading their rows copies nothing."""
        got = self._groups.get(types)
        if got is None:
            idx = np.flatnonzero(np.isin(node_type, types))
            if idx.size and idx[-1] - idx[0] + 1 == idx.size:
                got = slice(int(idx[0]), int(idx[-1]) + 1)
            else:
                got = idx
            self._groups[types] = got
        return got

    def table(self) -> np.ndarray:
        return self.P

    @property
    def free(self) -> np.ndarray:
        return self.cap[:, None] - self.used

    def free_by_type(self, node_type: np.ndarray, types: int, rounds: int) -> list[list[float]]:
        """room[k][t]: the GPUs of type k free in round t of the first `rounds` (Python lists:
        the round's searches read and update a few numbers at a time)."""
        free = self.cap[:, None] - self.used[:, :rounds]
        return np.stack([np.bincount(node_type, weights=free[:, t], minlength=types)
                         for t in range(rounds)], axis=1).tolist()

    def add(self, nodes: np.ndarray, t0: int, end: int, sign: int = 1,
            rows: np.ndarray | None = None) -> None:
        """Plan (sign 1) or release (-1) `nodes` GPUs per node over rounds [t0, end) (`rows`:
        the nodes it puts GPUs on, ascending, if known)."""
        end = min(end, self.used.shape[1])
        if rows is None:
            rows = np.flatnonzero(nodes)
        if end <= t0 or rows.size == 0:
            return
        if rows.size == 1:                  # one node (most schedules): views, not copies
            rows = slice(int(rows[0]), int(rows[0]) + 1)
        self.used[rows, t0:end] += sign * nodes[rows, None]
        self.peak[rows, 1:] = np.maximum.accumulate(self.used[rows], axis=1)
        P = np.asarray(self.fn(self.used[rows], self.cap[rows, None], self.low, self.high,
                               self.eta), dtype=float)
        self.P[rows] = P
        self.cum[rows, 1:] = P.cumsum(axis=1)
        self.floor = min(self.floor, float(P.min()))

    def planned(self, nodes: np.ndarray | slice, t0: int, end: int) -> np.ndarray:
        """The most GPUs planned on each of `nodes` over rounds [t0, end)."""
        if t0 == 0:
            return self.peak[nodes, end]
        if end == t0 + 1:
            return self.used[nodes, t0]
        return self.used[nodes, t0:end].max(axis=1)

    def commit(self, s: Schedule) -> None:
        self.add(s.nodes, s.start, s.start + s.rounds, rows=s.at)

    def at_floor(self) -> Prices:
        """The same plan (shared: commits through either show in both) with every GPU-round at
        the idle price: idle capacity offered at the floor."""
        view = Prices.__new__(Prices)
        view.used, view.cap, view.peak = self.used, self.cap, self.peak
        view.low, view.high, view.eta, view.fn, view.idle = self.low, self.high, self.eta, \
            self.fn, self.idle
        N, H = self.used.shape
        view.P = np.full((N, H), self.idle)
        view.floor = self.idle
        view.cum = np.repeat(np.arange(H + 1, dtype=float)[None, :] * self.idle, N, axis=0)
        view._groups = self._groups
        return view


def best_schedule(j: int, z: int, remaining: float, rates: np.ndarray, weight: float, age: float,
                  ideal: float, current: np.ndarray, restart_s: float, round_s: float, starts: int,
                  prices: Prices, node_type: np.ndarray,
                  mix_rate: Callable[[np.ndarray], float] | None = None,
                  size: float | None = None,
                  rate_at: Callable[[int, int], float] | None = None,
                  prune: bool = True, room: list[list[float]] | None = None
                  ) -> Schedule | None:
    """The dual subroutine: the schedule of job j with the highest payoff (None: none fits).

    Utility of finishing `jct` seconds after submission: weight x z x size x (age + ideal) / jct
    (size: the whole job's seconds at its best type; None: `ideal`, the remaining ones).
    `restart_s`: seconds a schedule on a type the job does not hold costs it (0 for a first
    start). `rate_at(k, nodes)` = its steps/s on z GPUs of type k over that many nodes (None:
    the consolidated rate everywhere): a schedule whose type has room only spread over more nodes
    than the gang needs runs at that rate. `prune`: a type is not searched when its payoff cannot
    beat the best found (an upper bound: its utility less its GPU-rounds at the floor price). `current` = GPUs per type the job holds now; `mix_rate(GPUs per node)` = its steps/s on a
    gang over several types (None: single-type schedules only). Task-level heterogeneity [U: the
    search is ours]: in a start round where the job's fastest types have too few GPUs, the
    m fastest types together (m = 2, 3, ...; the first m whose types each lack room but together
    have it) give a mixed schedule, its GPUs taken cheapest window first over their nodes.
    `room[k][t]`: GPUs free of type k in start round t, if the caller keeps them (None:
    counted here from the plan)."""
    cum, used, cap, P = prices.cum, prices.used, prices.cap, prices.P
    H = used.shape[1]
    worth = weight * z * (ideal if size is None else size) * (age + ideal)

    def value(jct: float) -> float:
        return worth / max(jct, 1e-9)

    best: Schedule | None = None
    K = len(rates)
    speed = rates.tolist()
    # fastest first (ties: lower type; a sort in reverse keeps equal keys in order)
    by_speed = [k for k in sorted(range(K), key=speed.__getitem__, reverse=True) if speed[k] > 0]
    last = P[:, H - 1]

    def candidate(k: int, nodes: np.ndarray, rate: float, t0: int, same: bool,
                  mixed: bool) -> Schedule | None:
        secs = remaining / rate + (0.0 if same else restart_s)
        d = max(math.ceil(secs / round_s - 1e-9), 1)
        end = min(t0 + d, H)
        room = cap[nodes] - prices.planned(nodes, t0, end)
        one = np.maximum.reduce(room) >= z          # a node holds the whole gang
        if not one and np.add.reduce(room) < z:
            return None
        if rate_at is not None and not mixed and not same:
            # the fewest nodes whose room holds the gang: more than it needs -> spread, slower
            m = 1 if one else int(np.searchsorted(np.cumsum(np.sort(room)[::-1]), z)) + 1
            slow = rate_at(k, m)
            if slow < rate:
                rate = slow
                secs = remaining / rate + restart_s
                d = max(math.ceil(secs / round_s - 1e-9), 1)
                end = min(t0 + d, H)
                room = cap[nodes] - prices.planned(nodes, t0, end)
                one = np.maximum.reduce(room) >= z
                if not one and np.add.reduce(room) < z:
                    return None
        # GPU-rounds charged: whole rounds, the last one in part (what the job uses of it);
        # rounds past the window at the window's last price (the plan's best guess of them)
        part = secs / round_s - (d - 1)
        win = cum[nodes, end] - cum[nodes, t0] if t0 else cum[nodes, end]   # (cum[:, 0] = 0)
        if end == t0 + d:
            win = win - (1.0 - part) * P[nodes, end - 1]
        else:
            win = win + ((t0 + d - end) - (1.0 - part)) * last[nodes]
        # cheapest first (ties: lower node index; `nodes` ascend, so a stable sort keeps them),
        # among the nodes with room
        alloc = np.zeros(len(node_type), dtype=np.int64)
        first = int(np.where(room > 0, win, np.inf).argmin()) if one else 0  # (lowest of ties)
        if one and room[first] >= z:  # the cheapest node holds the whole gang (most searches)
            cost = float(z * win[first])
            at = np.array([first + nodes.start if isinstance(nodes, slice) else nodes[first]])
            alloc[at] = z
        else:
            # at most the z cheapest nodes with room (and their ties) are needed
            pos = np.flatnonzero(room > 0)
            if len(pos) > z:
                w = win[pos]
                pos = pos[w <= np.partition(w, z - 1)[z - 1]]
            sel = pos[np.argsort(win[pos], kind="stable")]
            got = room[sel]
            take = np.zeros(len(win), dtype=np.int64)
            take[sel] = np.clip(z - (np.cumsum(got) - got), 0, got)   # less what cheaper gave
            cost = float(take @ win)
            alloc[nodes] = take
            at = np.flatnonzero(alloc)
        utility = value(age + t0 * round_s + secs)
        return Schedule(j, k, t0, d, alloc, utility, cost, mixed, at=at)

    def bound(rate: float, t0: int, same: bool) -> float:
        """An upper bound on the payoff of a schedule at `rate` (or slower) from round t0: its
        utility less the cost of its GPU-rounds at the lowest price of the table."""
        secs = remaining / rate + (0.0 if same else restart_s)
        least = z * prices.floor * secs / round_s     # every GPU-round costs at least the floor
        return value(age + t0 * round_s + secs) - least + 1e-9 * abs(least)   # (rounding slack)

    def better(s: Schedule | None) -> None:
        nonlocal best
        if s is not None and (best is None or s.payoff > best.payoff + 1e-12):
            best = s

    now = set()             # types (and -1: a mixed gang) with room now: never deferred
    held = current.tolist()
    if room is None:
        room = prices.free_by_type(node_type, K, min(starts, H))
    for t0 in range(min(starts, H)):
        free = [room[k][t0] for k in range(K)]
        fits = []
        for k in by_speed:
            fits.append(free[k] >= z)
            if not fits[-1] or k in now:
                continue
            same = held[k] == z
            if prune and best is not None and bound(speed[k], t0, same) <= best.payoff + 1e-12:
                continue           # cannot beat the best: not searched (nor later, it only drops)
            s = candidate(k, prices.nodes_of(node_type, (k,)), speed[k], t0, same, False)
            if s is not None and t0 == 0:
                now.add(k)
            better(s)
        if mix_rate is None or all(fits[:1]) or -1 in now:
            continue
        for m in range(2, len(by_speed) + 1):             # the m fastest types together
            types = by_speed[:m]
            if any(fits[:m]):
                break                                      # one of them alone has room
            if sum(free[k] for k in types) < z:
                continue
            nodes = prices.nodes_of(node_type, tuple(sorted(types)))
            probe = candidate(types[-1], nodes, speed[types[-1]], t0, False, True)
            if probe is None:
                continue
            rate = mix_rate(probe.nodes)
            counts = np.bincount(node_type, weights=probe.nodes, minlength=K)
            if rate <= 0 or np.count_nonzero(counts) < 2:
                continue
            s = candidate(types[-1], nodes, rate, t0, np.array_equal(counts, current), True)
            if s is not None and t0 == 0:
                now.add(-1)
            better(s)
            break
    return best
