"""The exact search of the configuration programme (quanta/policies/config_ilp.py): a
depth-first branch and bound over the jobs, bounded by prices of the GPU types (Lagrangian), its
states memoised (`exact_optimum`). config_ilp calls it in front of HiGHS' MILP."""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

MIP_REL_GAP = 1e-4        # the MILP's relative gap (HiGHS stops within it of its dual bound)
SEARCH_STATES = 200_000   # states the exact search may expand before HiGHS' MILP takes over
SEARCH_DEPTH = 500        # jobs left free past which the MILP answers (the search recurses per job)
TIE = 1e-9                # relative: a solution must beat the best found by this much to replace it


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
