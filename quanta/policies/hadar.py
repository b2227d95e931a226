"""Hadar (IPDPS'24): online primal-dual scheduling over GPU types and rounds.

The paper's structure [P] with our formulas [U] (ALGORITHMS.md section 6; no public code). Every
round (`interval` s):
1. Prices. Every (node h, round t of a look-ahead window of `horizon` rounds) has a price per GPU
   that rises exponentially with the GPUs planned there, g[h,t] out of c_h (`price`, replaceable;
   OASiS form):  p = L/(4 eta) * (4 eta U / L) ** (g / c).
   U and L (`bounds`): the highest and lowest utility per GPU-round of a job at its best type,
   i.e. its weight times a round (utility is in weighted GPU-seconds, below): U = R max w,
   L = R min w over the active jobs' weights. Fixed by the job mix, not by remaining work (the
   competitive analysis assumes fixed bounds): with equal weights (every trace here) U = L = R and
   a price is a fixed function of occupancy, R/(4 eta) on an idle node up to R on a full one; a
   nearly finished job, or one with no work left, changes nothing. (`bounds=round`: the previous
   reconstruction, U and L the largest and smallest utility per GPU-round among this round's
   jobs, remaining work and round rounding included: one nearly finished job rescaled every price.)
2. Dual subroutine (`schedule`, replaceable): a job's schedules are (GPU type k, start round
   t0 < `starts`) running to completion on z_j GPUs of k: secs = remaining / T[j,k] (+ the restart
   delay if the job ran before and is not on k now), d = ceil(secs / round) rounds. It needs room
   through the window's rounds it covers, on the nodes of k cheapest over them. Cost = price x
   GPUs over those rounds (the last one in part: what the job uses of it), the rounds past the
   window at the window's last price. Utility of finishing at c:
       u = w z size (age + ideal) / (c - submit),
   size = the whole job's seconds at its best type, ideal = the remaining ones: the job's value
   (z size weighted GPU-seconds) scaled by how close its JCT is to the best it can still get.
   Payoff = u - cost; the best schedule wins. A job defers (t0 > 0) only on a type that has no
   room for it now: never to save price on GPUs that are idle now.
3. Admission: payoff > 0 -> the schedule is committed (its GPUs raise the prices later jobs see);
   it runs now when t0 = 0, else it reserves its start rounds. payoff <= 0 -> the job waits.
4. Idle capacity offered now (`backfill`): GPUs still idle now after 1-3 are offered, at the idle
   price L/(4 eta) for every round, to the jobs left waiting, in arrival order (room through the
   window: reservations stand). A job then waits only where no GPU it may use is idle, or where
   even the idle price is too high (a fresh job at under about half its best speed).
Order: running jobs that may move first, then waiting jobs in arrival order (the order an online
primal-dual algorithm commits jobs in; on one GPU type JCT is then FIFO-like).
Task-level heterogeneity (`mix`, on by default): a job whose fastest types lack room in a round may
get a schedule over several types, run as one synchronous gang whose rate is the performance
model's mixed rule (quanta.perf.base.mixed_rate: the slowest worker's per-GPU rate x workers); it
goes out as Decision.mixed (GPUs per type). The mechanism picks the GPUs (consolidated within each
type), so the nodes priced are those the plan fills, not necessarily those the job gets.

Where this reconstruction deliberately differs from the paper's algorithm (each a parameter whose
other value is the paper's, or the previous reconstruction's; measured in docs/results.md, Hadar):
- `horizon` (default 2): a schedule reserves only the rounds of the look-ahead window; every
  round is re-planned anyway. `horizon=full` (with `starts=8`): a job's whole remaining run is
  reserved, the paper's time-expanded schedule, so far-future reservations block jobs that could
  use idle GPUs now. A reservation inside the window holds GPUs idle for at most a round or two
  (EASY-backfill-like: the job first in line keeps GPUs that free up next round).
- `replan` (default "changed"): a running job keeps its allocation (an admitted schedule is
  honoured: no preemption); it is searched again only when GPUs of a type it would run faster on
  are free (a move pays its restart in the payoff). Waiting jobs are planned every round.
  `replan=all`: every job re-planned every round from empty prices (the previous reconstruction;
  it moved and preempted running jobs whenever prices shifted).
- `backfill` (default true; false: the paper's single pass).
Speed (O(J log N)-ish per round; `prune=false` searches every job, for checking): prices are kept
per node and updated only on the nodes a commit touches; within a round prices only rise and room
only shrinks, so a job that has no room, or whose payoff bound (its utility against the cheapest
free GPU-round of each type) is <= 0, at the start of a pass is never searched, and a pass stops
when no job left can fit; a round where no waiting job fits the free GPUs and no job can move
keeps every allocation without building a plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.policies.base import INF, MAX_S, Policy, require
from quanta.policies.hadar_dual import (
    Prices,
    Schedule,
    best_schedule,
    exponential_price,
)
from quanta.policies.hadar_rates import AllocationRates
from quanta.policies.registry import register

FULL_CAP = 4096          # rounds a `horizon=full` plan looks ahead at most (past it: idle price)


class _Round(NamedTuple):
    """What one round's plan reads about the jobs (snapshot rows)."""
    rates: np.ndarray       # (n, K) steps/s at the requested count, 0 where not allowed
    best: np.ndarray        # best rate the job can get (0: it can never run)
    remaining: np.ndarray
    ideal: np.ndarray       # remaining seconds at the best rate
    size: np.ndarray        # the whole job's seconds at the best rate
    restart: np.ndarray     # seconds a move costs it (0 before its first start)
    age: np.ndarray
    weight: np.ndarray      # utility weight (> 0)
    req: np.ndarray
    held: np.ndarray        # (n, K) GPUs per type held now (for HadarE: the job's own copy)
    running: np.ndarray     # holds GPUs now


@register("hadar", "Hadar: online primal-dual over GPU types and rounds; per-(node, round) "
                   "exponential prices, a job admitted on its best-payoff schedule only if the "
                   "payoff is positive")
@dataclass
class Hadar(AllocationRates, Policy):
    interval: float = 360.0        # round length (s), as Gavel
    eta: float = 1.0               # price scaling [U]
    horizon: str = "2"             # rounds reserved and priced ahead; "full": a job's whole run
    starts: int = 2                # start rounds a schedule may be deferred to (< horizon)
    replan: str = "changed"        # "changed": running jobs kept unless they can move; "all"
    bounds: str = "weights"        # U, L from the jobs' weights; "round": from this round's jobs
    restart_s: float = 30.0        # charged in a schedule that moves a job to another type
    mix: bool = True               # task-level heterogeneity: a gang over several GPU types
    backfill: bool = True          # GPUs still idle after the primal-dual pass: offered at the idle price
    prune: bool = True             # skip searches that provably find nothing (false: search all)
    price: Callable = field(default=exponential_price, repr=False)
    schedule: Callable = field(default=best_schedule, repr=False)
    mixes_types: ClassVar[bool] = True

    def __post_init__(self) -> None:
        h = str(self.horizon).strip().lower()
        if h != "full" and (not h.isdigit() or not 1 <= int(h) <= FULL_CAP):
            raise ValueError(f"hadar: horizon must be a number of rounds from 1 to {FULL_CAP} or "
                             f"'full', got {h[:40]!r}")
        self.horizon = h
        if self.replan not in ("changed", "all"):
            raise ValueError(f"hadar: replan must be 'changed' or 'all', got {self.replan!r}")
        if self.bounds not in ("weights", "round"):
            raise ValueError(f"hadar: bounds must be 'weights' or 'round', got {self.bounds!r}")
        require(0 < self.interval < INF, "hadar", "interval", self.interval,
                "a positive number of seconds (the length of its rounds)")
        require(self.starts >= 1, "hadar", "starts", self.starts, "1 or more")
        require(0 < self.eta < INF, "hadar", "eta", self.eta, "a positive number")
        require(0 <= self.restart_s <= MAX_S, "hadar", "restart_s", self.restart_s,
                "a number of seconds from 0 to 1e15")

    def idle_round(self, snap: Snapshot) -> bool:
        """True when the round can change nothing (replan=changed): no waiting job fits the GPUs
        free now on a type it may use (or their sum, for a mixed gang), and no running job could
        run faster on them. Cheap: no prices, no plan."""
        if self.replan != "changed" or not self.prune:
            return False
        cl, j = snap.cluster, snap.jobs
        extra = self.copy_gpus(snap)
        free = snap.node_free if extra is None else snap.node_free + extra
        if not free.any():
            return True
        K = len(cl.types)
        room = np.bincount(cl.node_type, weights=free, minlength=K)
        allowed = j.allowed
        wait = j.gpus == 0
        req = j.req
        if wait.any():
            a, z = allowed[wait], req[wait]
            if (a & (room[None, :] >= z[:, None])).any():
                return False
            if self.mix and K > 1 and (a @ room >= z).any():
                return False
        if K == 1:
            return True                 # no other type to move to
        run = np.flatnonzero(~wait)
        if run.size:
            could = (allowed[run] & (room[None, :] >= req[run, None])).any(axis=1)
            run = run[could]
        if run.size:
            now = self.held_rates(snap, self.own_copy(snap), run)
            faster = allowed[run] & (j.rates[run] > now[:, None] * (1 + 1e-9)) & \
                (room[None, :] >= req[run, None])
            if faster.any():
                return False
        return True

    def keep_all(self, snap: Snapshot) -> Decision:
        """Every running job on what it holds; the rest wait."""
        j = snap.jobs
        dec = Decision.empty(snap)
        run = j.gpus > 0
        dec.gpus[run] = j.gpus[run]
        dec.gpu_type[run] = j.gtype[run]
        if j.any_mixed:
            parts = j.parts
            for r in np.flatnonzero(j.mixed).tolist():
                dec.mixed[r] = parts[r].copy()
                if j.fork_s[r] > 0:
                    dec.fork[r] = float(j.fork_s[r])
            copies = getattr(j, "copies", None)      # a core that places copies per node
            if copies:
                dec.copies.update({r: c.copy() for r, c in copies.items()})
        self.consolidate_kept(snap, dec, np.flatnonzero(run))
        return dec

    def consolidate_kept(self, snap: Snapshot, dec: Decision, rows: np.ndarray) -> None:
        """Kept jobs placed over more nodes than they need go in Decision.defrag (the mechanism
        moves one if the free GPUs now allow fewer nodes) when the time that saves pays for the
        restart."""
        j = snap.jobs
        if rows.size == 0 or snap.node_free.max() == 0:
            return
        rows = rows[j.gpus[rows] > 1]                 # one GPU is never spread
        if rows.size == 0:
            return
        rows = rows[~j.consolidated[rows] & (j.rate[rows] > 0) & ~j.mixed[rows]]
        for r in rows.tolist():
            k = int(j.gtype[r])
            if dec.gpus[r] != j.gpus[r] or dec.gpu_type[r] != k or r in dec.mixed:
                continue
            best = float(j.rates[r, k]) if j.gpus[r] == j.req[r] else 0.0
            now = float(j.rate[r])
            rem = float(j.remaining[r])
            if best > now and rem / now - rem / best > self.restart_s:
                dec.defrag.add(r)

    # ------------------------------------------------------------------ hooks for HadarE
    def own_copy(self, snap: Snapshot) -> np.ndarray:
        """(n, K) GPUs per type each job holds as its own gang. Hadar: all it holds."""
        return snap.jobs.parts

    def copy_gpus(self, snap: Snapshot) -> np.ndarray | None:
        """GPUs per node held by copies that are no job's own gang (HadarE's forks; Hadar:
        None)."""
        return None

    def node_counts(self, snap: Snapshot, r: int) -> np.ndarray:
        """GPUs per node that job r holds as its own gang."""
        cl = snap.cluster
        return np.bincount(cl.gpu_node[snap.jobs.placement[r]], minlength=len(cl.nodes))

    # ------------------------------------------------------------------ the plan
    def _weights(self, w: np.ndarray) -> np.ndarray:
        pos = w[w > 0]
        floor = float(pos.min()) if pos.size else 1.0
        return np.where(w > 0, w, floor)

    def price_bounds(self, rd: _Round, ok: np.ndarray) -> tuple[float, float]:
        """(U, L): utility per GPU-round, the highest and the lowest (module docstring)."""
        R = float(self.interval)
        if not ok.any():
            return R, R
        if self.bounds == "round":
            rounds_best = np.maximum(np.ceil(rd.ideal[ok] / R - 1e-9), 1)
            density = rd.weight[ok] * rd.ideal[ok] / (rounds_best * R)
            density = density[density > 0]
            if density.size == 0:
                return R, R
            return R * float(density.max()), R * float(density.min())
        w = rd.weight[ok]
        return R * float(w.max()), R * float(w.min())

    def _round(self, snap: Snapshot) -> _Round:
        j = snap.jobs
        n, K = len(j), len(snap.cluster.types)
        rates = np.where(j.allowed, j.rates, 0.0)
        # the best rate a job can get: on a type with room for its gang; a gang too big for
        # every type alone runs over the fastest types that together hold it, at the slowest's
        # pace (the mixed rule)
        fits = rates * (snap.capacity[None, :] >= j.req[:, None])
        best = fits.max(axis=1) if n else np.zeros(0)
        if self.mix and K > 1 and n and (best == 0).any():
            for r in np.flatnonzero((best == 0) & (rates.max(axis=1) > 0)).tolist():
                by = np.argsort(-rates[r], kind="stable")
                got = np.cumsum(np.where(rates[r, by] > 0, snap.capacity[by], 0))
                m = int(np.searchsorted(got, j.req[r]))
                if m < K and rates[r, by[m]] > 0:
                    best[r] = rates[r, by[m]]
        remaining = j.remaining
        inv = 1.0 / np.maximum(best, 1e-12)
        held = self.own_copy(snap)
        restart = np.where((j.executed > 0) | (j.gpus > 0), self.restart_s, 0.0)
        return _Round(rates, best, remaining, remaining * inv, np.maximum(j.total * inv, 1.0),
                      restart, snap.now - j.submit, self._weights(j.weight),
                      j.req.astype(np.int64), held, j.gpus > 0)

    def _window(self, rd: _Round, ok: np.ndarray) -> tuple[int, int]:
        """(rounds in the window, start rounds)."""
        if self.horizon != "full":
            H = int(self.horizon)
        else:
            R = float(self.interval)
            slow = np.where(rd.rates > 0, rd.rates, np.inf).min(axis=1) if len(ok) else np.ones(0)
            longest = rd.remaining[ok] / slow[ok] + self.restart_s if ok.any() else np.zeros(1)
            H = int(min(np.ceil(float(longest.max()) / R) + self.starts + 1, FULL_CAP))
        return H, min(self.starts, H)

    def plan(self, snap: Snapshot) -> tuple[list[Schedule], list[int], Prices]:
        """(schedules committed this round, kept running jobs included; rows that wait; the
        prices after the round's commitments)."""
        j, cl = snap.jobs, snap.cluster
        n, K, N = len(j), len(cl.types), len(cl.nodes)
        R = float(self.interval)
        rd = self._round(snap)
        ok = rd.best > 0
        low, high = self.price_bounds(rd, ok)
        H, S = self._window(rd, ok)
        cap = np.where(snap.node_up, cl.node_gpus, 0).astype(np.int64)
        node_type = cl.node_type
        keep_all = self.replan == "changed"
        run_rows = np.flatnonzero(rd.running)
        done: list[Schedule] = []

        # GPUs planned now: kept jobs where they are (HadarE's extra copies excluded)
        if keep_all:
            extra = self.copy_gpus(snap)
            used0 = cap - snap.node_free.astype(np.int64)
            if extra is not None:
                used0 -= extra
        else:
            used0 = np.zeros(N, dtype=np.int64)
        used0 = np.clip(used0, 0, cap)
        free0 = cap - used0
        room0 = np.bincount(node_type, weights=free0, minlength=K)        # free GPUs per type now
        d_run = np.zeros(n, dtype=np.int64)
        rate_run = np.zeros(n)
        if keep_all and run_rows.size:
            rate_run[run_rows] = self.held_rates(snap, rd.held, run_rows)
            left = rd.remaining[run_rows] / np.maximum(rate_run[run_rows], 1e-12) + \
                np.maximum(j.resume_at[run_rows] - snap.now, 0.0)
            d_run[run_rows] = np.maximum(np.ceil(left / R - 1e-9), 1).astype(np.int64)

        wait_rows = np.flatnonzero(~rd.running)
        # running jobs that could run faster on GPUs free now: searched again (moves)
        movers = np.zeros(0, dtype=np.int64)
        if keep_all and run_rows.size and room0.any():
            faster = (rd.rates[run_rows] > rate_run[run_rows, None] * (1 + 1e-9)) & \
                (room0[None, :] >= rd.req[run_rows, None])
            movers = run_rows[faster.any(axis=1)]
        if not keep_all or not self.prune:
            order = np.lexsort((j.rows, j.submit, ~rd.running))
            if keep_all:
                order = order[~rd.running[order]]
            searched = order[ok[order]]
            delayed = order[~ok[order]].tolist()
        else:
            # exact pruning of waiting jobs against the GPUs free in each start round (kept jobs
            # that finish free theirs; room only shrinks as the round commits)
            fits = np.zeros(len(wait_rows), dtype=bool)
            allowed = rd.rates[wait_rows] > 0
            z = rd.req[wait_rows]
            room_t = room0.astype(float)
            for t in range(S):
                if t:
                    ends = run_rows[d_run[run_rows] == t]
                    if ends.size == 0:
                        continue
                    room_t = room_t + rd.held[ends].sum(axis=0)
                fits |= (allowed & (room_t[None, :] >= z[:, None])).any(axis=1)
                if self.mix and K > 1:
                    fits |= allowed @ room_t >= z
            fits &= ok[wait_rows]
            if not fits.any() and movers.size == 0:      # nothing can start or move: keep all
                prices = Prices(np.repeat(used0[:, None], H, axis=1), cap, low, high, self.eta,
                                self.price)
                return self._kept(snap, rd, run_rows, d_run), wait_rows.tolist(), prices
            searched = wait_rows[fits]
            searched = searched[np.lexsort((j.rows[searched], j.submit[searched]))]
            delayed = wait_rows[~fits].tolist()

        # the window's plan: kept jobs hold their GPUs until they finish
        used = np.repeat(used0[:, None], H, axis=1)
        if keep_all:
            for r in run_rows[d_run[run_rows] < H].tolist():
                used[:, d_run[r]:] -= self.node_counts(snap, r)[:, None]
            np.clip(used, 0, cap[:, None], out=used)
        prices = Prices(used, cap, low, high, self.eta, self.price)
        if keep_all:
            moved = set()
            for r in movers.tolist():
                s = self._move(snap, rd, r, d_run[r], rate_run[r], prices, S)
                if s is not None:
                    done.append(s)
                    moved.add(r)
            done.extend(self._kept(snap, rd, np.array([r for r in run_rows.tolist() if r not in moved],
                                                     dtype=np.int64), d_run))
            searched = self._prune(snap, rd, searched, prices, S, delayed)
        self._commit_in_order(snap, rd, searched, prices, prices, S, done, delayed)
        if self.backfill and delayed and (prices.cap - prices.used[:, 0]).any():
            delayed = self._backfill(snap, rd, np.array(delayed, dtype=np.int64), prices, done)
        return done, delayed, prices

    def _backfill(self, snap: Snapshot, rd: _Round, rows: np.ndarray, prices: Prices,
                  done: list[Schedule]) -> list[int]:
        """Second pass: the GPUs the primal-dual pass leaves idle now are offered at the idle
        price, in arrival order, to the jobs it left waiting (a schedule starting now, with room
        through its window: reservations stand). Returns the rows still waiting."""
        j = snap.jobs
        ok = rd.best[rows] > 0
        left = rows[~ok].tolist()
        rows = rows[ok]
        rows = rows[np.lexsort((j.rows[rows], j.submit[rows]))]
        floor = prices.at_floor()
        searched = self._prune(snap, rd, rows, floor, 1, left)
        self._commit_in_order(snap, rd, searched, floor, prices, 1, done, left)
        return sorted(left, key=lambda r: (j.submit[r], j.rows[r]))

    def _commit_in_order(self, snap: Snapshot, rd: _Round, rows: np.ndarray, priced: Prices,
                         prices: Prices, S: int, done: list[Schedule], delayed: list[int]) -> None:
        """Search each row in turn against `priced`; commit those with a positive payoff into
        `prices`. A row is searched only if some type (or the types together, for a mixed gang)
        still has room for it in a start round: room only shrinks as the round commits."""
        if rows.size == 0:
            return
        node_type = snap.cluster.node_type
        K = len(snap.cluster.types)
        room = prices.free_by_type(node_type, K, S)     # kept as the round commits
        req = rd.req[rows]
        smallest = np.minimum.accumulate(req[::-1])[::-1].tolist()   # least req from here on
        req = req.tolist()
        mixing = self.mix and K > 1
        rounds = range(S)
        for i, r in enumerate(rows.tolist()):
            if self.prune:
                most = max(map(sum, zip(*room))) if mixing else max(map(max, room))
                if most < smallest[i]:
                    delayed.extend(rows[i:].tolist())
                    return
                z = req[i]
                mine = [room[k] for k, ok in enumerate(rd.rates[r].tolist()) if ok > 0]
                if not (any(f >= z for m in mine for f in m)
                        or (mixing and any(sum(m[t] for m in mine) >= z for t in rounds))):
                    delayed.append(r)
                    continue
            s = self._search(snap, rd, r, priced, S, room)
            if s is None or s.payoff <= 0:
                delayed.append(r)
                continue
            prices.commit(s)
            done.append(s)
            end = min(s.start + s.rounds, S)
            if end > s.start:
                for k, c in enumerate(s.counts(node_type, K).tolist()):
                    if c:
                        row = room[k]
                        for t in range(s.start, end):
                            row[t] -= c

    def _search(self, snap: Snapshot, rd: _Round, r: int, prices: Prices, starts: int,
                room: list[list[float]] | None = None) -> Schedule | None:
        """Job r's best schedule against `prices` (`room[k][t]`: GPUs free of type k in start
        round t, where the caller keeps them)."""
        return self.schedule(r, int(rd.req[r]), float(rd.remaining[r]), rd.rates[r],
                             float(rd.weight[r]), float(rd.age[r]), float(rd.ideal[r]), rd.held[r],
                             float(rd.restart[r]), float(self.interval), starts, prices,
                             snap.cluster.node_type, self.mix_rate(snap, r), size=float(rd.size[r]),
                             rate_at=self.spread_rate(snap, r), prune=self.prune, room=room)

    def _kept(self, snap: Snapshot, rd: _Round, rows: np.ndarray, d_run: np.ndarray) -> list[Schedule]:
        """Running jobs kept on what they hold (their own gang)."""
        out = []
        empty = np.zeros(0, dtype=np.int64)
        for r in rows.tolist():
            counts = rd.held[r]
            types = np.flatnonzero(counts)
            if types.size == 0:
                continue
            mixed = types.size > 1
            k = int(types[np.argmin(rd.rates[r, types])]) if mixed else int(types[0])
            out.append(Schedule(r, k, 0, int(max(d_run[r], 1)), empty, np.nan, np.nan, mixed,
                                True, counts.copy()))
        return out

    def _move(self, snap: Snapshot, rd: _Round, r: int, d_run: int, rate_now: float,
              prices: Prices, S: int) -> Schedule | None:
        """Job r's best schedule now with its own GPUs released, if it beats staying (None:
        it stays; its GPUs are planned again)."""
        mine = self.node_counts(snap, r)
        prices.add(mine, 0, d_run, -1)
        s = self._search(snap, rd, r, prices, 1)
        if s is not None and s.start == 0 and not np.array_equal(
                s.counts(snap.cluster.node_type, len(rd.held[r])), rd.held[r]):
            H = prices.used.shape[1]
            R = float(self.interval)
            secs = float(rd.remaining[r]) / max(rate_now, 1e-12)
            end = min(d_run, H)
            win = prices.cum[:, end] - prices.cum[:, 0]
            past = d_run - end
            part = secs / R - (d_run - 1)
            if end == d_run:
                win = win - (1.0 - part) * prices.P[:, end - 1]
            else:
                win = win + (past - (1.0 - part)) * prices.P[:, H - 1]
            stay_cost = float(mine @ win)
            a, ideal = float(rd.age[r]), float(rd.ideal[r])
            stay = float(rd.weight[r]) * int(rd.req[r]) * float(rd.size[r]) * (a + ideal) / \
                max(a + secs, 1e-9) - stay_cost
            if s.payoff > stay + 1e-9:
                prices.commit(s)
                return s
        prices.add(mine, 0, d_run, 1)
        return None

    def _prune(self, snap: Snapshot, rd: _Round, rows: np.ndarray, prices: Prices, S: int,
               delayed: list[int]) -> np.ndarray:
        """Rows whose payoff can be positive against the prices now (an upper bound: their own
        utility at each type and start round, against the cheapest free GPU-round of the type
        and the idle price after it); the others join `delayed`. Exact: within a round prices
        only rise and room only shrinks."""
        if rows.size == 0 or not self.prune:
            return rows
        cl = snap.cluster
        K = len(cl.types)
        R = float(self.interval)
        node_type = cl.node_type
        free = prices.free[:, :S]
        rates = rd.rates[rows]
        z = rd.req[rows].astype(float)
        rem, age, ideal, w = rd.remaining[rows], rd.age[rows], rd.ideal[rows], rd.weight[rows]
        worth = w * z * rd.size[rows] * (age + ideal)
        restart = rd.restart[rows]
        bound = np.full(len(rows), -np.inf)
        for t0 in range(S):
            has = free[:, t0] > 0
            room = np.bincount(node_type, weights=free[:, t0], minlength=K)
            pmin = np.full(K, np.inf)
            np.minimum.at(pmin, node_type[has], prices.P[has, t0])
            for k in range(K):
                if room[k] <= 0:
                    continue
                rate = rates[:, k]
                okk = (rate > 0) & (z <= room[k])
                if not okk.any():
                    continue
                same = rd.held[rows, k] == rd.req[rows]
                secs = rem / np.maximum(rate, 1e-12) + np.where(same, 0.0, restart)
                u = worth / np.maximum(age + t0 * R + secs, 1e-9)
                b = u - z * (pmin[k] * np.minimum(secs / R, 1) + np.maximum(secs / R - 1, 0) * prices.idle)
                bound = np.where(okk, np.maximum(bound, b), bound)
            if self.mix and K > 1:
                allowed = rates > 0
                total = allowed @ room
                cand = (allowed.sum(axis=1) >= 2) & (total >= z)
                if cand.any():
                    srt = -np.sort(-rates, axis=1)
                    second = srt[:, 1]                     # a mixed gang is no faster than this
                    secs = rem / np.maximum(second, 1e-12)
                    u = worth / np.maximum(age + t0 * R + secs, 1e-9)
                    pm = np.where(allowed, pmin[None, :], np.inf).min(axis=1)
                    with np.errstate(invalid="ignore"):   # inf * 0 in rows left out below
                        b = u - z * (pm * np.minimum(secs / R, 1)
                                     + np.maximum(secs / R - 1, 0) * prices.idle)
                    bound = np.where(cand & (second > 0), np.maximum(bound, b), bound)
        keep = bound > 0
        delayed.extend(rows[~keep].tolist())
        return rows[keep]

    def decide(self, snap: Snapshot) -> Decision:
        if self.idle_round(snap):
            return self.keep_all(snap)
        dec = Decision.empty(snap)
        schedules, _, _ = self.plan(snap)
        self.emit(snap, dec, schedules)
        return dec

    def emit(self, snap: Snapshot, dec: Decision, schedules: list[Schedule]) -> None:
        """Put the schedules that run now into the decision (kept jobs on what they hold)."""
        K = len(snap.cluster.types)
        j = snap.jobs
        for s in schedules:
            if s.start != 0:
                continue
            counts = s.counts(snap.cluster.node_type, K)
            dec.gpus[s.job], dec.gpu_type[s.job] = int(counts.sum()), s.gtype
            if np.count_nonzero(counts) > 1:
                dec.mixed[s.job] = counts
                if s.kept and j.fork_s[s.job] > 0:
                    dec.fork[s.job] = float(j.fork_s[s.job])
        self.consolidate_kept(snap, dec, np.array([s.job for s in schedules if s.kept],
                                                  dtype=np.int64))
