"""Choose one configuration per job by integer programming (shared by Sia and Pollux).

Candidates are (job, GPU type, GPU count) triples with a cost each; the programme picks at most
one per job, within each type's GPUs, minimising total cost (a job left out costs 0, so a
negative cost means "worth admitting"). The LP relaxation is solved first and kept when it is
integral (then it is the ILP optimum); otherwise an exact branch and bound over the jobs
(`exact_optimum` in quanta/policies/config_search.py, bounded by the relaxation's duals, its
states memoised) answers; where that search gives up (thousands of jobs), the relaxation rounded
(`_rounded`: its split jobs given their best choices in what is left) where that is within the
MILP's gap (ties="search" only), else HiGHS' MILP (to a 1e-4 relative gap). Where optimal choice
sets tie, `ties` says who picks: "search" (the search's order) or "milp" (the search answers only an
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

import itertools

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.policies.config_candidates import Candidates
from quanta.policies.config_search import MIP_REL_GAP, TIE, exact_optimum
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
                   cost: np.ndarray, capacity: np.ndarray, time_limit: float = np.inf,
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
        if chosen is None and ties == "search":    # (the search gave up: thousands of jobs;
            chosen = _rounded(cand_j, cand_t, cand_n, cost, capacity, x)  # "milp": HiGHS' pick)
        if chosen is not None:
            return chosen
    x = _milp(n_jobs, cand_j, cand_t, cand_n, cost, capacity, time_limit)
    if x is None:
        return None
    return np.flatnonzero(x > 0.5)


SPLIT_COMBINATIONS = 4096   # combinations of the split jobs' choices _rounded tries (beyond: None)


def _rounded(cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray, cost: np.ndarray,
             capacity: np.ndarray, x: np.ndarray) -> np.ndarray | None:
    """The relaxation's optimum `x` rounded, where that is an answer the MILP accepts: its whole
    choices kept, and the few jobs it splits (a vertex splits at most one per GPU type) given
    the cheapest combination of their choices, none included, that fits the GPUs the whole
    choices leave. Taken where its cost is within MIP_REL_GAP (relative, as HiGHS measures its
    gap) of the relaxation's optimum: that is a bound on every choice set, at most HiGHS' own
    dual bound, so the MILP, which stops at any choice set within that gap of its bound, could
    stop there too. Else (or past SPLIT_COMBINATIONS combinations) None: the MILP answers.
    Only with ties="search": with "milp" HiGHS picks among near-optimal choice sets, as before.
    Deterministic (combinations in candidate order, the first of the cheapest), and on Sia's
    programmes of 5,000 jobs on 10,000 GPUs, where the search gives up and HiGHS spends its
    10 s time limit at the root without closing the gap, 2e-5 from the bound in ~0.4 s."""
    whole = x > 1 - 1e-7
    split = np.unique(cand_j[(x > 1e-7) & ~whole])
    keep = whole & ~np.isin(cand_j, split)
    left = capacity.astype(np.int64) - np.bincount(
        cand_t[keep], weights=cand_n[keep], minlength=len(capacity)).astype(np.int64)
    if np.any(left < 0):
        return None
    options = [[-1] + np.flatnonzero(cand_j == j).tolist() for j in split.tolist()]
    if np.prod([len(o) for o in options], dtype=float) > SPLIT_COMBINATIONS:
        return None
    costs, ctype, count, room = cost.tolist(), cand_t.tolist(), cand_n.tolist(), left.tolist()
    best, best_cost = (), 0.0
    for combo in itertools.product(*options):
        used = [0] * len(room)
        price = 0.0
        for c in combo:
            if c >= 0:
                used[ctype[c]] += count[c]
                price += costs[c]
        if price < best_cost and all(u <= r for u, r in zip(used, room)):
            best, best_cost = combo, price
    chosen = np.sort(np.concatenate([np.flatnonzero(keep),
                                     np.array([c for c in best if c >= 0], dtype=np.int64)]))
    total = float(cost[chosen].sum())
    bound = float(cost @ x)
    return chosen if total - bound <= MIP_REL_GAP * abs(total) else None


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


FIRST_SEARCH_STATES = 2_000   # states the first search (choose_configs, before the relaxation
                          # is solved) may expand; priced by older duals a search may branch
                          # much more (by duals of many rounds ago, Sia's 300-job run took
                          # 100 s): the relaxation then answers
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
    options = {"mip_rel_gap": MIP_REL_GAP}
    if time_limit < np.inf:        # (a wall-clock limit: reached, the answer is the machine's)
        options["time_limit"] = time_limit
    with silent_stdout():
        return milp(cost, integrality=np.ones(m), bounds=(0, 1), constraints=cons,
                    options=options).x


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
