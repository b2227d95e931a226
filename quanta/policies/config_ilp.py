"""Choose one configuration per job by integer programming (shared by Sia and Pollux).

Candidates are (job, GPU type, GPU count) triples with a cost each; the programme picks at most
one per job, within each type's GPUs, minimising total cost (a job left out costs 0, so a
negative cost means "worth admitting"). The LP relaxation is solved first and kept when it is
integral (then it is the ILP optimum); otherwise a small exact search (`unique_optimum`) answers
when it proves the optimum unique by more than the MILP's gap, and HiGHS' MILP (to a 1e-4
relative gap) answers the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.solver_output import silent_stdout


class Warm:
    """A configuration programme kept in HiGHS between one policy's rounds. From one round to
    the next usually only the costs change (ages, goodputs): the LP relaxation is then solved
    again from the last basis, which is optimal as it is in most rounds. One per policy object,
    forgotten at the first decision of a run (`Warm.of`), so a run never depends on an earlier
    one."""

    def __init__(self) -> None:
        self.lp = None
        self.key: tuple | None = None

    @staticmethod
    def of(policy, snap: Snapshot) -> Warm:
        w = policy.__dict__.get("_warm")
        if w is None or not snap.state:          # a new run: nothing kept from another
            w = policy.__dict__["_warm"] = Warm()
        return w


def _matrix(n_jobs: int, cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray, K: int):
    """Rows: one configuration per job at most (n_jobs), then each type's GPUs (K)."""
    from quanta import highs
    m = len(cand_j)
    return highs.csc(np.concatenate([cand_j, n_jobs + cand_t]), np.tile(np.arange(m), 2),
                     np.concatenate([np.ones(m), cand_n.astype(float)]), (n_jobs + K, m))


def choose_configs(n_jobs: int, cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray,
                   cost: np.ndarray, capacity: np.ndarray, time_limit: float = 10.0,
                   warm: Warm | None = None, fixed: np.ndarray | None = None) -> np.ndarray | None:
    """Indexes of the chosen candidates, or None if the solver found nothing. With `warm`, the
    LP relaxation of a programme with the same rows and columns as the last one is re-solved
    from its basis (only the costs changed). `fixed` (a mask over the candidates, at most one
    per job) are chosen whatever the costs: their GPUs come off the capacity and their jobs out
    of the programme, a constraint x = 1 as Sia's simulator pins a job mid-restore (sia.py:
    1021-1028). (A large negative cost instead would dwarf the objective, and with it the MILP's
    relative gap: HiGHS could then stop at any allocation that keeps the pins.)"""
    if fixed is not None and fixed.any():
        held = np.zeros(len(capacity))
        np.add.at(held, cand_t[fixed], cand_n[fixed])
        free = np.flatnonzero(~np.isin(cand_j, cand_j[fixed]))
        rest = choose_configs(n_jobs, cand_j[free], cand_t[free], cand_n[free], cost[free],
                              capacity - held.astype(capacity.dtype), time_limit, warm)
        return None if rest is None else np.sort(np.concatenate([np.flatnonzero(fixed),
                                                                free[rest]]))
    m = len(cand_j)
    if m == 0:
        return np.empty(0, dtype=np.int64)
    from quanta import highs
    key = (n_jobs, cand_j.tobytes(), cand_t.tobytes(), cand_n.tobytes(), capacity.tobytes())
    if warm is not None and warm.lp is not None and warm.key == key:
        res = warm.lp.resolve(cost=cost)
    else:
        A = _matrix(n_jobs, cand_j, cand_t, cand_n, len(capacity))
        lp = warm.lp if warm is not None and warm.lp is not None else \
            highs.LP() if warm is not None else highs.solver("configs")
        res = lp.solve(cost, A, np.concatenate([np.ones(n_jobs), capacity.astype(float)]),
                       np.zeros(m), np.ones(m))
        if warm is not None:
            warm.lp, warm.key = lp, key
    x = res.x if res.status == 0 else None
    if x is not None and not np.any(np.abs(x - np.round(x)) > 1e-7):
        return np.flatnonzero(x > 0.5)                    # integral: the ILP optimum
    if x is not None:
        chosen = unique_optimum(cand_j, cand_t, cand_n, cost, capacity, x,
                                np.maximum(-res.row_dual[n_jobs:], 0.0))
        if chosen is not None:
            return chosen
    x = _milp(n_jobs, cand_j, cand_t, cand_n, cost, capacity, time_limit)
    if x is None:
        return None
    return np.flatnonzero(x > 0.5)


MIP_REL_GAP = 1e-4     # the MILP's relative gap (HiGHS stops within it of its dual bound)
SEARCH_NODES = 2000    # nodes the exact search may visit before the MILP takes over


def _milp(n_jobs: int, cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray,
          cost: np.ndarray, capacity: np.ndarray, time_limit: float) -> np.ndarray | None:
    """The integer programme by scipy's milp (HiGHS' MIP through highspy directly is no faster
    on these, ~25 ms): x, or None if it found nothing."""
    from scipy.optimize import (  # (imported when first needed)
        LinearConstraint,
        milp,
    )
    from scipy.sparse import coo_matrix
    m = len(cand_j)
    per_job = coo_matrix((np.ones(m), (cand_j, np.arange(m))), shape=(n_jobs, m)).tocsr()
    per_type = coo_matrix((cand_n.astype(float), (cand_t, np.arange(m))),
                          shape=(len(capacity), m)).tocsr()
    cons = [LinearConstraint(per_job, -np.inf, 1.0),
            LinearConstraint(per_type, -np.inf, capacity.astype(float))]
    with silent_stdout():
        return milp(cost, integrality=np.ones(m), bounds=(0, 1), constraints=cons,
                    options={"mip_rel_gap": MIP_REL_GAP, "time_limit": time_limit}).x


def _window(z: float) -> float:
    """How far above the optimum z HiGHS' MILP may stop: its relative gap (taken on |z| + 1, a
    little more than HiGHS' own |incumbent|) plus 1e-5 for its absolute gap (1e-6) and
    feasibility tolerance (1e-6)."""
    return MIP_REL_GAP * (abs(z) + 1.0) + 1e-5


def _job_choices(cand_j: np.ndarray, val: np.ndarray) -> tuple[list[tuple[list, list]], float]:
    """Per job, its choices (candidate index; -1: none, worth 0) by excess over its best val,
    as (excesses, indexes); and the sum of the jobs' best vals."""
    order = np.argsort(cand_j, kind="stable")
    bounds = np.flatnonzero(np.diff(cand_j[order])) + 1
    out, floor = [], 0.0
    for cols in np.split(order, bounds):
        v = np.concatenate([[0.0], val[cols]])
        idx = np.concatenate([[-1], cols])
        low = v.min()
        o = np.argsort(v - low, kind="stable")
        out.append(((v[o] - low).tolist(), idx[o].tolist()))
        floor += float(low)
    return out, floor


def _incumbent(cand_j, cand_t, cand_n, cost, capacity, x, choices) -> float:
    """Cost of a feasible programme: the relaxation's integral part, then every other job its
    first choice that still fits."""
    ones = np.flatnonzero(x > 1 - 1e-7)
    left = capacity.astype(np.int64) - np.bincount(cand_t[ones], weights=cand_n[ones],
                                                   minlength=len(capacity)).astype(np.int64)
    total = float(cost[ones].sum())
    placed = set(cand_j[ones].tolist())
    for _ex, idx in choices:
        for c in idx:
            if c < 0 or cand_j[c] in placed:
                break
            if cand_n[c] <= left[cand_t[c]]:
                left[cand_t[c]] -= cand_n[c]
                total += float(cost[c])
                break
    return total


def unique_optimum(cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray, cost: np.ndarray,
                   capacity: np.ndarray, x: np.ndarray, price: np.ndarray) -> np.ndarray | None:
    """The programme's optimum when every other configuration costs more than `_window` above
    it: then HiGHS' MILP, which stops within that window of the optimum, returns it too, and
    this answer is the MILP's; None when that is not shown within SEARCH_NODES nodes (ties,
    near ties, hard programmes: the MILP answers).

    A depth-first enumeration of every choice set that costs at most the best one found plus
    the window, bounded by Lagrangian duality: with `price` (>= 0 per GPU of each type; the
    relaxation's duals make it tight) a programme costs sum_c (cost_c + price_t n_c) x_c minus
    price . capacity plus the unused GPUs' price, so each job's choice adds its excess over the
    job's best one. Jobs whose every other choice exceeds the budget keep their best one."""
    val = cost + price[cand_t] * cand_n
    choices, floor = _job_choices(cand_j, val)
    floor -= float(price @ capacity)
    bound = _incumbent(cand_j, cand_t, cand_n, cost, capacity, x, choices)
    bound += _window(bound)
    fixed, free = [], []
    for ex, idx in choices:
        if len(ex) > 1 and floor + ex[1] <= bound:
            free.append((ex, idx))
        elif idx[0] >= 0:
            fixed.append(idx[0])
    free.sort(key=lambda ch: sum(floor + e <= bound for e in ch[0]))   # fewest choices first
    left = capacity.astype(np.int64) - np.bincount(
        cand_t[fixed], weights=cand_n[fixed], minlength=len(capacity)).astype(np.int64)
    if np.any(left < 0):      # (cannot be: the incumbent is within the bound; rounding)
        return None
    found = _enumerate(free, floor, bound, cost.tolist(), cand_t.tolist(), cand_n.tolist(),
                       left.tolist(), float(cost[fixed].sum()))
    if not found:             # past the node limit (or nothing within the bound: rounding)
        return None
    best = min(found, key=lambda f: f[0])
    if sum(z <= best[0] + _window(best[0]) for z, _ in found) > 1:
        return None
    return np.sort(np.array(fixed + best[1], dtype=np.int64))


def _enumerate(free: list, floor: float, bound: float, cost: list, ctype: list, count: list,
               left: list, fixed_cost: float) -> list[tuple[float, list]] | None:
    """(cost, chosen candidates of the free jobs) of every feasible choice within the bound,
    which tightens to the best found plus its window (z + _window(z) grows with z: nothing
    within the final best's window is cut); None past SEARCH_NODES nodes."""
    found: list[tuple[float, list]] = []
    chosen: list[int] = []
    nodes = 0

    def visit(k: int, excess: float) -> bool:
        nonlocal nodes, bound
        nodes += 1
        if nodes > SEARCH_NODES:
            return False
        if k == len(free):
            z = fixed_cost + sum(cost[c] for c in chosen)
            if z <= bound:
                found.append((z, list(chosen)))
                bound = min(bound, z + _window(z))
            return True
        ex, idx = free[k]
        for e, c in zip(ex, idx):
            if floor + excess + e > bound:
                break
            if c < 0:
                if not visit(k + 1, excess + e):
                    return False
            elif count[c] <= left[ctype[c]]:
                left[ctype[c]] -= count[c]
                chosen.append(c)
                ok = visit(k + 1, excess + e)
                chosen.pop()
                left[ctype[c]] += count[c]
                if not ok:
                    return False
        return True

    return found if visit(0, 0.0) else None


@dataclass(frozen=True)
class Candidates:
    """(job, GPU type, GPU count) triples a job could be given, with the model's rate for each."""

    job: np.ndarray
    gtype: np.ndarray
    count: np.ndarray
    rate: np.ndarray

    @classmethod
    def of(cls, rows: list[tuple[int, int, int, float]]) -> Candidates:
        a = np.array(rows, dtype=float).reshape(-1, 4)
        return cls(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2].astype(np.int64),
                   a[:, 3])

    def __len__(self) -> int:
        return len(self.job)

    def current(self, snap: Snapshot) -> np.ndarray:
        """The candidates equal to what each job holds now."""
        j = snap.jobs
        return (self.gtype == j.gtype[self.job]) & (self.count == j.gpus[self.job])


def restart_factor(snap: Snapshot, delta: float | np.ndarray, grace: bool,
                   first_start_counted: bool = False) -> np.ndarray:
    """Pollux/Sia re-allocation penalty per job: max(age - restarts * delta, 0) / (age + delta);
    with `grace`, none while the job is younger than delta (Sia). With `first_start_counted`
    the world charged each job's first start as a restart, which Pollux's and Sia's own count
    leaves out (sia-simulator job.py:537-542: `num_restarts` is 0 at the first start), so one
    is taken off the snapshot's count."""
    j = snap.jobs
    age = snap.now - j.submit
    restarts = np.maximum(j.restarts - 1, 0) if first_start_counted else j.restarts
    r = np.maximum(age - restarts * delta, 0.0) / (age + delta)
    return np.where(age < delta, 1.0, r) if grace else r


def decide_configs(snap: Snapshot, cands: Candidates, cost: np.ndarray, state: dict,
                   time_limit: float, plans: dict[int, object] | None = None,
                   warm: Warm | None = None, fixed: np.ndarray | None = None) -> Decision:
    """Solve the programme and turn the chosen candidates into a decision (if the solver finds
    nothing, everything keeps what it holds); `plans` (snapshot row -> plan) go with the rows
    that get GPUs; `fixed` candidates are chosen whatever the costs (`choose_configs`)."""
    j = snap.jobs
    chosen = choose_configs(len(j), cands.job, cands.gtype, cands.count, cost, snap.capacity,
                            time_limit, warm, fixed)
    if chosen is None:
        held = {i: j.plan[i] for i in np.flatnonzero(j.running).tolist() if j.plan[i] is not None}
        return Decision(j.gpus.copy(), j.gtype.copy(), plans=held, state=state)
    dec = Decision.empty(snap)
    dec.state = state
    dec.gpus[cands.job[chosen]] = cands.count[chosen]
    dec.gpu_type[cands.job[chosen]] = cands.gtype[chosen]
    if plans:
        dec.plans = {i: plans[i] for i in cands.job[chosen].tolist() if i in plans}
    return dec
