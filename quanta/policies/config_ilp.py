"""Choose one configuration per job by integer programming (shared by Sia and Pollux).

Candidates are (job, GPU type, GPU count) triples with a cost each; the programme picks at most
one per job, within each type's GPUs, minimising total cost (a job left out costs 0, so a
negative cost means "worth admitting"). The LP relaxation is solved first and kept when it is
integral (then it is the ILP optimum); otherwise an exact branch and bound over the jobs
(`exact_optimum`, bounded by the relaxation's duals, its states memoised) answers, and HiGHS'
MILP (to a 1e-4 relative gap) only where that search gives up. Where optimal choice sets tie,
`ties` says who picks: "search" (the search's order) or "milp" (the search answers only an
optimum unique beyond the MILP's gap, the MILP the rest: HiGHS' answers throughout, as before
2026-11-26, and as a reference that solves a MILP, Sia's simulator with CBC, would).

A policy keeps its programme in HiGHS between rounds (`Warm`): where only the costs changed,
the exact search runs first, bounded by the kept relaxation's last duals and started from the
last answer, and if that does not settle it, the relaxation is re-solved from the last basis
(about 8x cheaper than afresh on Sia's rounds); where jobs came or left, the new programme
starts from the last basis mapped onto it. Each answer is taken only where a fresh solve would
certainly give the same (`_certified`); elsewhere the programme is solved afresh, so the answers
are those of fresh solves.
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.policies.config_candidates import Candidates
from quanta.solver_output import silent_stdout


class Warm:
    """A configuration programme kept in HiGHS between one policy's rounds, its relaxation's
    last prices and the last answer. From one round to the next usually only the costs change
    (ages, goodputs): the exact search, bounded by those prices, from that answer, then settles
    most rounds, and the relaxation is solved again from the last basis (optimal as it is in
    most rounds) only where it does not. One per policy object,
    forgotten at the first decision of a run (`Warm.of`), so a run never depends on an earlier
    one."""

    def __init__(self, exact: bool = True) -> None:
        self.lp = None
        self.key: tuple | None = None
        self.exact = exact        # answer only where a fresh solve would answer the same
        # the last answer given to a programme with this key: feasible for the next one with
        # it (the key fixes the candidates and the capacities), a search's incumbent
        self.last: np.ndarray | None = None
        # who the kept programme's columns and job rows are (`_identity`), to start another
        # programme from its basis where the same jobs and candidates come up again
        self.codes: np.ndarray | None = None
        self.ids: np.ndarray | None = None
        # the GPU types' duals (prices) of the kept programme's last relaxation: they bound the
        # search of a later round of it before its relaxation is solved again (any prices >= 0
        # bound it; the last ones, a round or a few old, bound it nearly as tightly)
        self.price: np.ndarray | None = None
        self.contended = False    # the last round's programme was not answered by
                                  # `_uncontended`

    def mapped_basis(self, codes: np.ndarray, ids: np.ndarray, K: int
                     ) -> tuple[np.ndarray, np.ndarray] | None:
        """A basis for a programme with columns `codes` and job rows `ids` (then K GPU-type
        rows) from the kept programme's last one: a column or job row kept has its status
        there; a new column is at 0 (its job takes none of its new choices) and a new job's row
        basic (its slack); the type rows as they were. None if nothing is kept to map from."""
        if self.codes is None or self.ids is None or self.lp is None:
            return None
        old_cols, old_rows = self.lp.basis()
        if len(old_cols) != len(self.codes) or len(old_rows) != len(self.ids) + K:
            return None
        cols = np.zeros(len(codes), dtype=np.int8)
        rows = np.ones(len(ids) + K, dtype=np.int8)
        for new, old, status, out in ((codes, self.codes, old_cols, cols),
                                      (ids, self.ids, old_rows[:len(self.ids)], rows)):
            if len(old) == 0 or len(new) == 0:
                continue
            o = np.argsort(old, kind="stable")
            at = np.minimum(np.searchsorted(old[o], new), len(old) - 1)
            hit = old[o][at] == new
            out[:len(new)][hit] = status[o[at[hit]]]
        rows[len(ids):] = old_rows[len(self.ids):]
        return cols, rows

    def carried(self, codes: np.ndarray, cand_j: np.ndarray, cand_t: np.ndarray,
                cand_n: np.ndarray, capacity: np.ndarray) -> np.ndarray | None:
        """The last answer's candidates that the programme with columns `codes` still has,
        as its column indexes, if they are a feasible choice set there (at most one per job,
        within the capacities), else None."""
        if self.last is None or self.codes is None or len(codes) == 0:
            return None
        o = np.argsort(codes, kind="stable")
        want = self.codes[self.last]
        at = np.minimum(np.searchsorted(codes[o], want), len(codes) - 1)
        keep = np.sort(o[at[codes[o][at] == want]])
        use = np.bincount(cand_t[keep], weights=cand_n[keep], minlength=len(capacity))
        one_each = len(np.unique(cand_j[keep])) == len(keep)
        return keep if one_each and (use <= capacity).all() else None

    def priced(self, res, types: int) -> None:
        """Keep the prices of the `types` GPU types (the last rows) from the kept programme's
        relaxation just solved (none where it has no optimum)."""
        self.price = None if res.status != 0 else _prices(res, types)

    @staticmethod
    def of(policy, snap: Snapshot, exact: bool = True) -> Warm:
        w = policy.__dict__.get("_warm")
        if w is None or not snap.state or w.exact != exact:   # a new run: nothing kept
            w = policy.__dict__["_warm"] = Warm(exact)
        return w


def _identity(cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray, job_ids: np.ndarray
              ) -> np.ndarray:
    """Each candidate as one integer that names it across rounds: its job's id (the driver's
    row), GPU type (< 2^8) and count (< 2^16). (Only a starting basis and an incumbent come of
    it: a programme's answer is certified or solved afresh whatever they are.)"""
    return (job_ids[cand_j].astype(np.int64) << 24) | (cand_t.astype(np.int64) << 16) | cand_n


def _prices(res, types: int) -> np.ndarray:
    """The GPU types' prices (>= 0) from a relaxation's duals: its last `types` rows."""
    return np.maximum(-res.row_dual[-types:], 0.0)


def _matrix(n_jobs: int, cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray, K: int):
    """Rows: one configuration per job at most (n_jobs), then each type's GPUs (K)."""
    from quanta import highs
    m = len(cand_j)
    return highs.csc(np.concatenate([cand_j, n_jobs + cand_t]), np.tile(np.arange(m), 2),
                     np.concatenate([np.ones(m), cand_n.astype(float)]), (n_jobs + K, m))


def choose_configs(n_jobs: int, cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray,
                   cost: np.ndarray, capacity: np.ndarray, time_limit: float = 10.0,
                   warm: Warm | None = None, fixed: np.ndarray | None = None,
                   ties: str = "search", job_ids: np.ndarray | None = None
                   ) -> np.ndarray | None:
    """Indexes of the chosen candidates, or None if the solver found nothing. With `warm`, the
    LP relaxation of a programme with the same rows and columns as the last one is re-solved
    from its basis (only the costs changed), its answer taken where certain to be a fresh
    solve's (`warm.exact`, else always). With `warm.exact` and `job_ids` (a stable id per job:
    the driver's rows), another programme (jobs came or left, a job's candidates changed) is
    first solved from the last basis mapped onto it (`Warm.mapped_basis`), its answer too
    taken only where certain to be a fresh solve's. `fixed` (a mask over the candidates, at
    most one per job) are chosen whatever the costs: their GPUs come off the capacity and their
    jobs out of the programme, a constraint x = 1 as Sia's simulator pins a job mid-restore
    (sia.py:1021-1028). (A large negative cost instead would dwarf the objective, and with it
    the MILP's relative gap: HiGHS could then stop at any allocation that keeps the pins.)
    `ties`: "search" or "milp", who picks among optimal choice sets (module docstring)."""
    if fixed is not None and fixed.any():
        held = np.zeros(len(capacity))
        np.add.at(held, cand_t[fixed], cand_n[fixed])
        free = np.flatnonzero(~np.isin(cand_j, cand_j[fixed]))
        rest = choose_configs(n_jobs, cand_j[free], cand_t[free], cand_n[free], cost[free],
                              capacity - held.astype(capacity.dtype), time_limit, warm, None,
                              ties, job_ids)
        return None if rest is None else np.sort(np.concatenate([np.flatnonzero(fixed),
                                                                free[rest]]))
    m = len(cand_j)
    if m == 0:
        return np.empty(0, dtype=np.int64)
    from quanta import highs
    key = (n_jobs, cand_j.tobytes(), cand_t.tobytes(), cand_n.tobytes(), capacity.tobytes(),
           None if job_ids is None else job_ids.tobytes())
    kept = warm is not None and warm.lp is not None and warm.key == key
    first = kept and warm.exact and warm.price is not None
    # the jobs' best choices, where they fit and nothing ties: the optimum at once (not tried
    # where this programme's last round was contended: the search answers these rounds too)
    if not (first and warm.contended):
        chosen = _uncontended(cand_j, cand_t, cand_n, cost, capacity)
        if warm is not None:
            warm.contended = chosen is None
        if chosen is not None:
            return chosen
    if first:
        # only the costs changed: the search first, priced by the last duals, from the last
        # answer; the relaxation only where that does not settle it (Sia's 300 jobs on Gavel's
        # cluster: 4,629 of 4,633 such rounds settled, the run 1.12x faster)
        chosen = exact_optimum(cand_j, cand_t, cand_n, cost, capacity, np.zeros(m), warm.price,
                               unique=True, width=_tie_width(cand_j, cost, ties),
                               hint=warm.last, max_states=FIRST_SEARCH_STATES)
        if chosen is not None:
            warm.last = chosen
            return chosen
    if kept:
        res = warm.lp.resolve(cost=cost)
        warm.priced(res, len(capacity))
        if warm.exact:
            chosen = _certified(cand_j, cand_t, cand_n, cost, capacity, res, ties, warm.last)
            if chosen is not None:
                warm.last = chosen
                return chosen
    A = rows = codes = None
    if not kept and warm is not None and warm.exact and job_ids is not None:
        codes = _identity(cand_j, cand_t, cand_n, job_ids)
        basis = warm.mapped_basis(codes, job_ids, len(capacity))
        if basis is not None:         # another programme, from the last one's basis
            A = _matrix(n_jobs, cand_j, cand_t, cand_n, len(capacity))
            rows = np.concatenate([np.ones(n_jobs), capacity.astype(float)])
            res = warm.lp.solve(cost, A, rows, np.zeros(m), np.ones(m), basis=basis)
            warm.priced(res, len(capacity))
            hint = warm.carried(codes, cand_j, cand_t, cand_n, capacity)
            warm.key, warm.codes, warm.ids = key, codes, job_ids
            chosen = _certified(cand_j, cand_t, cand_n, cost, capacity, res, ties, hint)
            if chosen is not None:
                warm.last = chosen
                return chosen
    if not kept or warm.exact:      # afresh (where a kept relaxation's answer is not certain)
        if A is None:
            A = _matrix(n_jobs, cand_j, cand_t, cand_n, len(capacity))
            rows = np.concatenate([np.ones(n_jobs), capacity.astype(float)])
        lp = highs.solver("configs") if warm is None else warm.lp or highs.LP()
        res = lp.solve(cost, A, rows, np.zeros(m), np.ones(m))
        if warm is not None:
            warm.lp, warm.key = lp, key
            warm.priced(res, len(capacity))
            if not kept and job_ids is not None:
                warm.codes = _identity(cand_j, cand_t, cand_n, job_ids) if codes is None \
                    else codes
                warm.ids = job_ids
    chosen = _from_relaxation(n_jobs, cand_j, cand_t, cand_n, cost, capacity, res, time_limit,
                              ties)
    if warm is not None:
        warm.last = chosen
    return chosen


def _from_relaxation(n_jobs, cand_j, cand_t, cand_n, cost, capacity, res, time_limit: float,
                     ties: str) -> np.ndarray | None:
    """The programme's answer from its relaxation `res`: the relaxation itself where it is
    integral, else the exact search bounded by its duals, else the MILP."""
    x = res.x if res.status == 0 else None
    if x is not None and not np.any(np.abs(x - np.round(x)) > 1e-7):
        return np.flatnonzero(x > 0.5)                    # integral: the ILP optimum
    if x is not None:
        chosen = exact_optimum(cand_j, cand_t, cand_n, cost, capacity, x,
                               _prices(res, len(capacity)), unique=ties == "milp")
        if chosen is not None:
            return chosen
    x = _milp(n_jobs, cand_j, cand_t, cand_n, cost, capacity, time_limit)
    if x is None:
        return None
    return np.flatnonzero(x > 0.5)


def _certified(cand_j, cand_t, cand_n, cost, capacity, res, ties: str,
               hint: np.ndarray | None = None) -> np.ndarray | None:
    """The answer a fresh solve of the relaxation would lead to, from a relaxation solved from
    the last basis (`res`), where that is certain; else None.

    Integral: where the optimum is unique (every nonbasic column and row has a reduced cost
    beyond DUAL_MARGIN: no other vertex is optimal), a fresh solve returns the same vertex.
    Fractional: the search, bounded by these duals, answers where the programme's optimum is
    unique beyond what decides ties: the MILP's window (ties="milp", as a fresh relaxation's
    search would: the MILP, which the search's doubts go to, returns it too), or any tie rule's
    margin (ties="search": the fresh relaxation's search, whatever its incumbent and order,
    would find the same optimum). `hint`, a feasible choice set (the last round's answer to a
    programme of the same rows and columns), is the search's incumbent if it is cheaper than its
    own: a unique optimum does not depend on it, the search's length does."""
    if res.status != 0:
        return None
    x = res.x
    if not np.any(np.abs(x - np.round(x)) > 1e-7):
        beyond = int((np.abs(res.col_dual) > DUAL_MARGIN).sum()
                     + (np.abs(res.row_dual) > DUAL_MARGIN).sum())
        return np.flatnonzero(x > 0.5) if beyond == len(x) else None
    return exact_optimum(cand_j, cand_t, cand_n, cost, capacity, x, _prices(res, len(capacity)),
                         unique=True, width=_tie_width(cand_j, cost, ties), hint=hint)


def _tie_width(cand_j: np.ndarray, cost: np.ndarray, ties: str) -> float | None:
    """How much a unique optimum must beat every other choice set by for any fresh solve to
    return it: with ties="search", above any tie the search may make (TIE x its incumbent, at
    most the sum of each job's largest |cost|), twice; with "milp", None (the MILP's window)."""
    if ties != "search":
        return None
    most = np.zeros(int(cand_j.max()) + 1)
    np.maximum.at(most, cand_j, np.abs(cost))
    return 2 * TIE * max(1.0, float(most.sum()))


MIP_REL_GAP = 1e-4        # the MILP's relative gap (HiGHS stops within it of its dual bound)
SEARCH_STATES = 200_000   # states the exact search may expand before HiGHS' MILP takes over
FIRST_SEARCH_STATES = 2_000   # the same before the relaxation is solved (choose_configs): a
                          # search priced by older duals may branch much more (priced by duals
                          # of many rounds ago, Sia's 300-job run took 100 s); the relaxation
                          # then answers
SEARCH_DEPTH = 500        # jobs left free past which the MILP answers (the search recurses per job)
TIE = 1e-9                # relative: a solution must beat the best found by this much to replace it
TIES = ("search", "milp")  # who picks among optimal choice sets (choose_configs)
DUAL_MARGIN = 1e-6        # reduced costs beyond this (10x HiGHS' dual feasibility tolerance)
                          # make a vertex the relaxation's only optimum (_certified)


def _milp(n_jobs: int, cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray,
          cost: np.ndarray, capacity: np.ndarray, time_limit: float) -> np.ndarray | None:
    """The integer programme by scipy's milp (HiGHS' MIP through highspy directly is no faster
    on these, 20-30 ms whatever its options): x, or None if it found nothing."""
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


def _uncontended(cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray, cost: np.ndarray,
                 capacity: np.ndarray) -> np.ndarray | None:
    """Every job's cheapest choice (none, costing 0, included), when each is cheaper than the
    job's next one by more than TIE (relative) and together they fit: then that is the unique
    optimum, the relaxation's too, found without solving it; else None. (Tried in most rounds:
    two minima per job by reduceat over the candidates grouped by job, no sort where they come
    grouped, as Sia's and Pollux's do.)"""
    order = None
    if len(cand_j) > 1 and (cand_j[1:] < cand_j[:-1]).any():
        order = np.argsort(cand_j, kind="stable")
        cand_j, cost = cand_j[order], cost[order]
    step = cand_j[1:] != cand_j[:-1]                     # where the next job's candidates start
    starts = np.flatnonzero(np.concatenate(([True], step)))
    job_of = np.cumsum(np.concatenate(([False], step)))
    low1 = np.minimum.reduceat(cost, starts)             # each job's cheapest candidate
    at = np.flatnonzero(cost == low1[job_of])
    first = at[np.concatenate(([True], job_of[at[1:]] != job_of[at[:-1]]))]   # one per job
    take = low1 < 0.0
    chosen = first[take]
    if order is not None:
        chosen = order[chosen]
    use = np.bincount(cand_t[chosen], weights=cand_n[chosen], minlength=len(capacity))
    if (use > capacity).any():      # (first: where the jobs contend, this is what fails)
        return None
    rest = cost.copy()
    rest[first] = np.inf
    low2 = np.minimum.reduceat(rest, starts)             # its next one (inf: none)
    # choices: leaving the job out (0), then its candidates; best and second best of those
    best = np.where(take, low1, 0.0)
    second = np.where(take, np.minimum(low2, 0.0), low1)
    tie = TIE * max(1.0, abs(float(best.sum())))
    if not (second - best > tie).all():
        return None
    return np.sort(chosen)


def _window(z: float) -> float:
    """How far above the optimum z HiGHS' MILP may stop: its relative gap (taken on |z| + 1, a
    little more than HiGHS' own |incumbent|) plus 1e-5 for its absolute gap (1e-6) and
    feasibility tolerance (1e-6)."""
    return MIP_REL_GAP * (abs(z) + 1.0) + 1e-5


def _sorted_choices(cand_j: np.ndarray, val: np.ndarray):
    """Every job's choices (candidate index; -1: none, worth 0) sorted job by job by their excess
    over the job's best val, ties in candidate order after none: (excesses, indexes, where each
    job's choices start and the last end, each job's best val)."""
    if len(cand_j) > 1 and (cand_j[1:] < cand_j[:-1]).any():
        jobs = np.unique(cand_j)
        job_of = np.searchsorted(jobs, cand_j)
        low = np.minimum.reduceat(val[np.argsort(cand_j, kind="stable")],
                                  np.searchsorted(np.sort(cand_j), jobs))
    else:             # grouped by job, as Sia's and Pollux's candidates come: no sort
        step = cand_j[1:] != cand_j[:-1]
        low = np.minimum.reduceat(val, np.flatnonzero(np.concatenate(([True], step))))
        job_of = np.cumsum(np.concatenate(([0], step)))
    n = len(low)
    low = np.minimum(low, 0.0)
    job = np.concatenate([np.arange(n), job_of])
    v = np.concatenate([np.zeros(n), val])
    idx = np.concatenate([np.full(n, -1), np.arange(len(cand_j))])
    ex = v - low[job]
    order = np.lexsort((idx, ex, job))
    return ex[order], idx[order], np.searchsorted(job[order], np.arange(n + 1)), low


def _job_choices(cand_j: np.ndarray, val: np.ndarray) -> tuple[list[tuple[list, list]], float]:
    """Per job, its choices by excess over its best val as lists (excesses, indexes)
    (`_sorted_choices`); and the sum of the jobs' best vals."""
    ex, idx, bounds, low = _sorted_choices(cand_j, val)
    exs, ids, b = ex.tolist(), idx.tolist(), bounds.tolist()
    return [(exs[a:z], ids[a:z]) for a, z in zip(b[:-1], b[1:])], sum(low.tolist())


def _incumbent(cand_j, cand_t, cand_n, cost, capacity, x, choices) -> tuple[float, list[int]]:
    """A feasible programme, (cost, chosen candidates): the relaxation's integral part, then
    every other job its first choice that still fits."""
    ones = np.flatnonzero(x > 1 - 1e-7)
    left = capacity.astype(np.int64) - np.bincount(cand_t[ones], weights=cand_n[ones],
                                                   minlength=len(capacity)).astype(np.int64)
    chosen = ones.tolist()
    placed = set(cand_j[ones].tolist())
    for _ex, idx in choices:
        for c in idx:
            if c < 0 or cand_j[c] in placed:
                break
            if cand_n[c] <= left[cand_t[c]]:
                left[cand_t[c]] -= cand_n[c]
                chosen.append(c)
                break
    return float(cost[chosen].sum()), chosen


_LEAF = (0.0, ())          # the search's answer past the last free job
_INF = float("inf")


def _costliest_alternatives_first(choices: tuple[list, list]) -> float:
    """The unique search's order of the free jobs: those whose next two choices cost most above
    their best come first, so the top of the search branches least (a job with two choices
    counts its second twice). Over the recorded searches of three runs (Sia 300 jobs on
    gavel-108, Pollux 80 there, Sia on sia-philly-1) it expands 20%, 76% and -0.5% fewer states
    than fewest-choices-first (1.33 M -> 1.07 M, 1.73 M -> 0.42 M, 11.0 k -> 11.1 k)."""
    ex = choices[0]
    return -(ex[1] + (ex[2] if len(ex) > 2 else ex[1]))


class _Overflow(Exception):
    """The exact search expanded as many states as it may."""


def exact_optimum(cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray, cost: np.ndarray,
                  capacity: np.ndarray, x: np.ndarray, price: np.ndarray,
                  unique: bool = False, width: float | None = None,
                  hint: np.ndarray | None = None, max_states: int | None = None
                  ) -> np.ndarray | None:
    """The programme's optimum (chosen candidates) by a depth-first branch and bound over the
    jobs, or None past `max_states` (default SEARCH_STATES) states or SEARCH_DEPTH free jobs (the MILP answers). With
    `unique`, only an optimum that every other choice set exceeds by more than `_window`: then
    HiGHS' MILP, which stops within that window of the optimum, returns it too, and the answer
    is the MILP's whatever the ties (None otherwise); `width` replaces that window; `hint` (a
    feasible choice set, with `unique` only) is the incumbent where it is cheaper.

    Bound, by Lagrangian duality: with `price` (>= 0 per GPU of each type; the relaxation's duals
    make it as tight as the relaxation) the jobs from k on, given `left` GPUs, cost at least the
    sum of their cheapest priced choices (cost + price . GPUs) minus price . left. A job whose
    every other choice exceeds the incumbent by that bound keeps its cheapest one.

    States are memoised: the jobs from k on with the same GPUs left have the same optimum
    whatever the earlier jobs chose (near-identical jobs reach one state by many paths, which
    without the memo cost millions of nodes on Sia's programmes; with it at most ~14,000 on
    Gavel's 108-GPU cluster). A state remembers its optimum, or, where nothing in it beat the
    threshold it was asked with, a lower bound on what it costs (the least of its choices'
    bounds and of what its children returned): reached again by a cheaper path (a higher
    threshold), it is searched again only where that bound allows (on a 300-job Sia run on
    Gavel's cluster half the states had been such searches again: 1.07 M -> 0.67 M states).

    Ties: the incumbent (the relaxation's whole part, completed greedily) is replaced only by a
    solution cheaper by more than TIE (relative), and so is each better one found after it,
    choices tried in order of priced cost (then candidate index): deterministic, and where the
    optimum is unique it is the MILP's (which stops within its 1e-4 gap of it). Over every
    programme of two Sia runs on Gavel's cluster (12,065 rounds, 4,963 of them fractional) the
    answers were the MILP's, ties included."""
    K = len(capacity)
    val = cost + price[cand_t] * cand_n
    choices, floor = _job_choices(cand_j, val)
    floor -= float(price @ capacity)
    inc, inc_set = _incumbent(cand_j, cand_t, cand_n, cost, capacity, x, choices)
    if unique and hint is not None and float(cost[hint].sum()) < inc:
        inc, inc_set = float(cost[hint].sum()), hint.tolist()
    tie = TIE * max(1.0, abs(inc))

    def within(z: float) -> float:
        return _window(z) if width is None else width

    budget = inc + within(inc) if unique else inc - tie   # what a choice set must cost below
    if floor >= budget:       # nothing can: the incumbent is optimal (ties="search")
        return np.sort(np.array(inc_set, dtype=np.int64))
    fixed, free = [], []
    for ex, idx in choices:
        if len(ex) > 1 and floor + ex[1] < budget:
            free.append((ex, idx))
        elif idx[0] >= 0:
            fixed.append(idx[0])
    if len(free) > SEARCH_DEPTH:
        return None
    if unique:     # the answer does not depend on the order: the one that prunes soonest
        free.sort(key=_costliest_alternatives_first)
    else:          # the order picks among tied optima: kept as it was (fewest choices first)
        free.sort(key=lambda ch: sum(floor + e < budget for e in ch[0]))
    left = (capacity.astype(np.int64) - np.bincount(cand_t[fixed], weights=cand_n[fixed],
                                                    minlength=K).astype(np.int64)).tolist()
    if min(left) < 0:        # (cannot be: the incumbent is within the bound; rounding)
        return None
    costs, ctype, count = cost.tolist(), cand_t.tolist(), cand_n.tolist()
    priced = (price[cand_t] * cand_n).tolist()
    nf = len(free)
    lowsum = [0.0] * (nf + 1)        # the free jobs' cheapest priced choices, from k on
    for k in range(nf - 1, -1, -1):
        c = free[k][1][0]
        lowsum[k] = lowsum[k + 1] + (0.0 if c < 0 else costs[c] + priced[c])
    # a state (k, left) as one integer: left in mixed radix (each type's GPUs only fall from
    # what is left now), plus k x the number of such lefts
    radix = [1] * K
    for t in range(1, K):
        radix[t] = radix[t - 1] * (left[t - 1] + 1)
    stride = radix[-1] * (left[-1] + 1)
    # each free job's choices as (excess, candidate, GPUs, type, cost, priced GPUs, GPUs in the
    # radix): one unpacking per choice on the search's hot path (none: -1 and zeros). Only the
    # choices under `reach`: one with floor + excess >= budget fails `base + e >= cut` in every
    # state (base + e there is at least floor + e, the threshold at most budget, both less the
    # costs of the choices above it), in `second_within` too (its bound is at most budget); the
    # margin keeps those that rounding could let through.
    reach = budget - floor + 1e-9 * (1.0 + abs(budget))
    packed = [[(e, c, count[c], ctype[c], costs[c], priced[c], count[c] * radix[ctype[c]])
               if c >= 0 else (e, c, 0, 0, 0.0, 0.0, 0)
               for e, c in zip(ex[:bisect_left(ex, reach)], idx)] for ex, idx in free]
    memo: dict[int, tuple | float] = {}
    states = 0
    most_states = SEARCH_STATES if max_states is None else max_states

    def solve(k: int, thr: float, priced_left: float, code: int) -> tuple[float, tuple] | float:
        """The cheapest choices of free jobs k.. within `left` (worth `priced_left` at the
        prices; `code`: left in the radix), (cost, candidates), if it costs less than thr;
        else a lower bound (>= thr) on what they cost, as a float."""
        nonlocal states
        if k == nf:
            return _LEAF if thr > 0.0 else 0.0
        key = k * stride + code
        m = memo.get(key)
        if m is not None:
            if m.__class__ is tuple:                # this state's optimum
                return m if m[0] < thr else m[0]
            if m >= thr:                            # nothing in it below m
                return m
        states += 1
        if states > most_states:
            raise _Overflow
        base = lowsum[k] - priced_left
        best, cut, low = None, thr, _INF    # low: a bound on what failed, while best is None
        last = k + 1 == nf                          # the children are leaves: no call
        for e, c, n, t, cc, pc, sc in packed[k]:
            if base + e >= cut:
                if base + e < low:
                    low = base + e
                break
            if c < 0:
                r = (_LEAF if cut > 0.0 else 0.0) if last else \
                    solve(k + 1, cut, priced_left, code)
                if r.__class__ is tuple:
                    best = (r[0], (-1,) + r[1])
                    cut = best[0] - tie
                elif r < low:
                    low = r
            elif n <= left[t]:
                if last:
                    r = _LEAF if cut - cc > 0.0 else 0.0
                else:
                    left[t] -= n
                    r = solve(k + 1, cut - cc, priced_left - pc, code - sc)
                    left[t] += n
                if r.__class__ is tuple:
                    best = (cc + r[0], (c,) + r[1])
                    cut = best[0] - tie
                elif cc + r < low:
                    low = cc + r
        if best is None:
            memo[key] = low
            return low
        memo[key] = best
        return best

    def second_within(path: list[int], z: float, prefix: float, priced_left: float,
                      code: int) -> bool:
        """Whether a choice set other than the optimum `path` (one choice per free job, -1:
        none; cost z) costs less than z + within(z): the first free job where it differs takes
        another choice, the ones before it their path's, the ones after it their best given
        what is left (`solve`, whose memo holds from the optimum's search)."""
        bound = z + within(z)
        for k, on_path in enumerate(path):
            base = prefix + lowsum[k] - priced_left
            for e, c, n, t, cc, pc, sc in packed[k]:
                if base + e >= bound:
                    break
                if c == on_path:
                    continue
                if c < 0:
                    if solve(k + 1, bound - prefix, priced_left, code).__class__ is tuple:
                        return True
                elif n <= left[t]:
                    left[t] -= n
                    r = solve(k + 1, bound - prefix - cc, priced_left - pc, code - sc)
                    left[t] += n
                    if r.__class__ is tuple:
                        return True
            if on_path >= 0:
                left[ctype[on_path]] -= count[on_path]
                prefix += costs[on_path]
                priced_left -= priced[on_path]
                code -= count[on_path] * radix[ctype[on_path]]
        return False

    fixed_cost = float(cost[fixed].sum())
    priced_left = float(price @ np.array(left, dtype=float))
    code = sum(n * r for n, r in zip(left, radix))
    try:
        found = solve(0, budget - fixed_cost, priced_left, code)
        if found.__class__ is not tuple:
            found = None
        if unique and (found is None or second_within(list(found[1]), fixed_cost + found[0],
                                                      fixed_cost, priced_left, code)):
            return None
    except _Overflow:
        return None
    chosen = inc_set if found is None else fixed + [c for c in found[1] if c >= 0]
    return np.sort(np.array(chosen, dtype=np.int64))


def decide_configs(snap: Snapshot, cands: Candidates, cost: np.ndarray, state: dict,
                   time_limit: float, plans: dict[int, object] | None = None,
                   warm: Warm | None = None, fixed: np.ndarray | None = None,
                   ties: str = "search") -> Decision:
    """Solve the programme and turn the chosen candidates into a decision (if the solver finds
    nothing, everything keeps what it holds); `plans` (snapshot row -> plan) go with the rows
    that get GPUs; `fixed` candidates are chosen whatever the costs and `ties` says who picks
    among optimal choice sets (`choose_configs`)."""
    j = snap.jobs
    chosen = choose_configs(len(j), cands.job, cands.gtype, cands.count, cost, snap.capacity,
                            time_limit, warm, fixed, ties, j.rows)
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
