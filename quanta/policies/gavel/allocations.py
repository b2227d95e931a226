"""Gavel's allocations: X[j, k] = fraction of wall time job j spends on GPU type k.

Every function takes the throughput matrix T (n jobs x K types; 0 = the job cannot use the type),
scale factors z (GPUs per job) and capacities N (GPUs per type), and returns X with
X >= 0, sum_k X[j,k] <= 1 and sum_j z_j X[j,k] <= N_k. Effective throughput tau_j = sum_k T X.

The LPs are built column-wise over the allowed (job, type) pairs only, with vectorised index
arithmetic (no per-job Python loops), and solved by HiGHS called directly (quanta/highs.py).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from quanta import highs as _lp

# The second stage solved from the first stage's basis is ~20% of the max-min LP time faster, but
# where the most-throughput optimum is not unique HiGHS then stops at another optimal vertex (the
# vertex agnostic max-min of Quanta's world moved by up to 12% average JCT on a multi-GPU trace):
# solved afresh, as before, so that the allocations stay the same.
SECOND_STAGE_WARM = False
LEVEL_SLACK = 1e-6  # second_stage fixes the max-min level this much (relative) below its optimum
MEMO_SIZE = 256     # programmes remembered (allocations are deterministic functions of them)
_MEMO: "OrderedDict[tuple, object]" = OrderedDict()


def memo(kind: str, arrays: tuple, solve):
    """solve() for a programme given by `arrays` (its whole input, at class level), or the
    answer kept from the last time the same programme came up: the job set changes at every
    arrival and completion, but the classes it aggregates to and their multiplicities often
    recur (a heterogeneity-agnostic max-min programme depends only on how many jobs there are).
    The answer is the one the solver gave, so the results are the same with or without."""
    key = (kind,) + tuple((a.shape, a.dtype.str, a.tobytes()) if isinstance(a, np.ndarray) else a
                          for a in arrays)
    out = _MEMO.get(key)
    if out is None:
        out = _MEMO[key] = solve()
        if len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    else:
        _MEMO.move_to_end(key)
    return out


@dataclass(frozen=True)
class Pairs:
    """The allowed (job, type) pairs of a throughput matrix: the LP's variables."""

    j: np.ndarray
    k: np.ndarray
    t: np.ndarray      # throughput of each pair
    n: int
    K: int

    @classmethod
    def of(cls, T: np.ndarray) -> "Pairs":
        j, k = np.nonzero(T > 0)
        return cls(j, k, T[j, k], T.shape[0], T.shape[1])

    @property
    def size(self) -> int:
        return len(self.j)

    def to_matrix(self, x: np.ndarray) -> np.ndarray:
        X = np.zeros((self.n, self.K))
        X[self.j, self.k] = np.clip(x[: self.size], 0.0, 1.0)
        return X

    def capacity_entries(self, z: np.ndarray, mult: np.ndarray | None = None):
        """(rows, cols, values) of sum_k x_jk <= 1 (row j) and sum_j m_j z_j x_jk <= N_k
        (row n + k) over the pair columns (their upper bounds: ones, then N)."""
        zz = z[self.j].astype(float) if mult is None else (z * mult)[self.j].astype(float)
        cols = np.arange(self.size)
        return (np.concatenate([self.j, self.n + self.k]), np.concatenate([cols, cols]),
                np.concatenate([np.ones(self.size), zz]))


def proportional_share(N: np.ndarray, n: int) -> np.ndarray:
    """Gavel's proportional share (policies/proportional.py:35-38), the baseline of its max-min
    policies: every job gets N_k / n of each type's time, all scaled down alike so that no job
    exceeds 100% of the time: N_k / max(n, sum N). Per type, the same for every job; it ignores
    the job's GPU count (the objective multiplies by it once, max_min_fairness.py:65-72) and whether
    the job can use the type (a type it cannot use adds nothing to its throughput)."""
    N = np.asarray(N, dtype=float)
    return N / max(float(n), float(N.sum()), 1e-12)


def isolated_share(z: np.ndarray, N: np.ndarray) -> np.ndarray:
    """Gavel's isolated allocation (policies/isolated.py:41-46), the baseline of finish-time
    fairness: job j gets N_k / (n z_j) of each type (so the n jobs together fill every type), its
    own row scaled down to at most 100% of the time (each row on its own)."""
    n = len(z)
    X = np.asarray(N, dtype=float)[None, :] / max(n, 1) / np.maximum(z, 1)[:, None]
    return X / np.maximum(X.sum(axis=1, keepdims=True), 1.0)


def equal_share(T: np.ndarray, z: np.ndarray, N: np.ndarray) -> np.ndarray:
    """X^eq: every job gets an equal time share N_k / M of each type it may use, scaled so that
    no job exceeds 100% of the time and no type is over-committed."""
    n = T.shape[0]
    X = np.where(T > 0, N[None, :] / max(n, 1), 0.0) / np.maximum(z, 1)[:, None]
    rows = X.sum(axis=1).max() if n else 0.0
    if rows > 1:
        X = X / rows
    load = (z[:, None] * X).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        over = np.where(load > 0, N / load, np.inf).min()
    return X * min(1.0, over)


def classes(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group jobs whose columns are all equal: (first job of each class, class of each job,
    class sizes). Interchangeable jobs get the same share in a symmetric optimum, so the LP is
    solved once per class (Gavel's speed-up hint: aggregate jobs by type)."""
    key = np.column_stack([np.nan_to_num(c.reshape(len(c), -1).astype(float), nan=-1.0)
                           for c in columns])
    _, first, inverse, counts = np.unique(key, axis=0, return_index=True, return_inverse=True,
                                          return_counts=True)
    return first, inverse.reshape(-1), counts


def max_min(T: np.ndarray, z: np.ndarray, N: np.ndarray, coef: np.ndarray,
            floor: np.ndarray | None = None, refine: bool = True,
            known: float | None = None) -> tuple[np.ndarray, float]:
    """maximise min_j coef_j * tau_j(X) over the jobs with no `floor`; jobs with a floor (per
    job, NaN = none: water-filling's frozen jobs) keep coef_j * tau_j >= floor_j instead.
    Returns X and the optimal level. Solved over classes of interchangeable jobs. `known`: the
    optimal level, already found (by _LevelLP, for `sane_coefficients(coef)`, no floors), for
    `refine` to go straight to its second stage."""
    n = T.shape[0]
    if n == 0 or not (T > 0).any() or not (np.asarray(N) > 0).any():
        return np.zeros_like(T, dtype=float), 0.0
    fl = np.full(n, np.nan) if floor is None else floor
    coef, scale = sane_coefficients(coef, T)
    first, inv, mult = classes(T, z, coef, fl)
    Tc, zc, cc, fc = T[first], np.asarray(z[first], dtype=np.int64), coef[first], fl[first] / scale
    Nf = np.asarray(N, dtype=float)
    Xc, lev = memo("max_min", (Tc, zc, Nf, cc, fc, mult, refine, known),
                   lambda: _max_min_rows(Tc, zc, Nf, cc, fc, mult, refine=refine, known=known))
    return Xc[inv], lev * scale


def sane_coefficients(coef: np.ndarray, T: np.ndarray) -> tuple[np.ndarray, float]:
    """Fairness coefficients HiGHS can take, and the factor that maps the LP's level back.
    A job about to finish (or a cluster with almost nothing up) has a huge coefficient: it never
    binds, so it is capped at 1e6 x the median. Where the largest coefficient x throughput still
    exceeds 1e9 (HiGHS reads 1e15 as infinite: "Model error"), all are divided by one factor,
    which scales the max-min level and leaves the allocation unchanged."""
    pos = coef[coef > 0]
    if pos.size:
        coef = np.minimum(coef, 1e6 * float(np.median(pos)))
    big = float(np.max(coef[:, None] * T)) if T.size else 0.0
    if big <= 1e9:
        return coef, 1.0
    scale = big / 1e9
    return coef / scale, scale


def _max_min_rows(T: np.ndarray, z: np.ndarray, N: np.ndarray, coef: np.ndarray,
                  floor: np.ndarray, mult: np.ndarray, duals: np.ndarray | None = None,
                  refine: bool = True, known: float | None = None) -> tuple[np.ndarray, float]:
    """The max-min LP over rows; if `duals` is given (length n), it receives each free row's
    marginal on its fairness constraint (non-zero: the row holds the level down). `refine`:
    pick the max-throughput optimum (second_stage); without duals only. `known` (with refine):
    the optimal level, found elsewhere: the second stage is solved without the first (the
    first's only output it uses is the level), and the first only if the second fails.

    Rows: sum_k x_jk <= 1 per row j, the K capacities, then t - coef_j tau_j <= 0 per free row,
    then -coef_j tau_j <= -floor_j per frozen row; columns: the pairs, then t."""
    p = Pairs.of(T)
    n, K, P = p.n, p.K, p.size
    has_pair = np.bincount(p.j, minlength=n) > 0
    frozen = ~np.isnan(floor) & has_pair
    free = has_pair & np.isnan(floor)
    free_rows = np.flatnonzero(free)
    frozen_rows = np.flatnonzero(frozen)
    nf, nz = len(free_rows), len(frozen_rows)
    fair_row = np.zeros(n, dtype=np.int64)
    fair_row[free_rows] = n + K + np.arange(nf)
    fair_row[frozen_rows] = n + K + nf + np.arange(nz)
    zz = (z * mult)[p.j].astype(float)
    tau = coef[p.j] * p.t                                   # coef_j * T_jk per pair
    # every pair column has 3 entries (its job's row, its type's row, its job's fairness row,
    # in that order: ascending); t's column one per free row
    start = np.arange(0, 3 * P + 1, 3, dtype=np.int64)
    A = (np.append(start, 3 * P + nf),
         np.concatenate([np.column_stack([p.j, n + p.k, fair_row[p.j]]).ravel(),
                         n + K + np.arange(nf)]),
         np.concatenate([np.column_stack([np.ones(P), zz, -tau]).ravel(), np.ones(nf)]))
    b = np.concatenate([np.ones(n), N.astype(float), np.zeros(nf), -floor[frozen_rows]])
    c = np.zeros(P + 1)
    c[-1] = -1.0
    lo = np.zeros(P + 1)
    hi = np.append(np.ones(P), np.inf)
    s = _lp.solver()
    refine = refine and duals is None and nf > 0
    cost = -(tau * np.asarray(mult, dtype=float)[p.j]) if refine else None
    if refine and known is not None and not SECOND_STAGE_WARM:
        # second_stage's programme, solved as second_stage solves it (afresh, the level fixed
        # where it fixes it)
        lo2, hi2 = lo.copy(), hi.copy()
        lo2[-1] = hi2[-1] = known * (1 - LEVEL_SLACK)
        res = s.solve(np.append(cost, 0.0), A, b, lo2, hi2)
        if res.status == 0:
            return p.to_matrix(res.x), float(known)
    res = s.solve(c, A, b, lo, hi)
    if res.status != 0:
        raise RuntimeError(f"max-min LP failed: {res.message}")
    if refine:
        x = second_stage(s, res.x, cost)
        return p.to_matrix(x), float(res.x[-1])
    if duals is not None:
        duals[:] = 0.0
        duals[free_rows] = -res.row_dual[n + K:n + K + nf]
    return p.to_matrix(res.x), float(res.x[-1])


def second_stage(s: "_lp.LP", x0: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Among the max-min optima, the one with the most total (weighted) throughput: max-min only
    pins the worst job, and the rest of an optimal vertex is arbitrary (it may leave jobs on
    slow types or pack them for nothing). The programme just solved by `s` again, with its last
    variable (the level t) fixed just below its optimum and `cost` (minus sum m_j coef_j tau_j
    over the other variables) minimised (afresh, or from the first stage's basis:
    SECOND_STAGE_WARM)."""
    level = x0[-1] * (1 - LEVEL_SLACK)
    res = s.resolve(np.append(cost, 0.0), (len(x0) - 1, level, level), warm=SECOND_STAGE_WARM)
    return res.x if res.status == 0 else x0


def max_sum(T: np.ndarray, z: np.ndarray, N: np.ndarray, value: np.ndarray,
            min_tau: np.ndarray | None = None) -> np.ndarray | None:
    """maximise sum value_jk x_jk (value per pair of T's shape); optional tau_j >= min_tau_j
    (NaN = none). None if those floors are infeasible."""
    p = Pairs.of(T)
    if p.size == 0:
        return np.zeros_like(T, dtype=float)
    rows, cols, vals = p.capacity_entries(z)
    nrow = p.n + p.K
    b = np.concatenate([np.ones(p.n), N.astype(float)])
    if min_tau is not None:                  # -tau_j <= -min_tau_j, one row per job with a floor
        need = ~np.isnan(min_tau)
        row_of = np.full(p.n, -1, dtype=np.int64)
        row_of[need] = nrow + np.arange(int(need.sum()))
        on = need[p.j]
        rows = np.concatenate([rows, row_of[p.j[on]]])
        cols = np.concatenate([cols, np.flatnonzero(on)])
        vals = np.concatenate([vals, -p.t[on]])
        nrow += int(need.sum())
        b = np.concatenate([b, -min_tau[need]])
    res = _lp.solver().solve(-value[p.j, p.k], _lp.csc(rows, cols, vals, (nrow, p.size)), b,
                             np.zeros(p.size), np.ones(p.size))
    if res.status == 2:
        return None
    if res.status != 0:
        raise RuntimeError(f"max-sum LP failed: {res.message}")
    return p.to_matrix(res.x)


def fastest_first(T: np.ndarray, z: np.ndarray, N: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Gavel's FIFO with performance (policies/fifo.py, mode 'perf'): in `order`, each job gets its
    fastest type that still has room for all its GPUs; the first job that fits on no type stops
    the allocation, as FIFO does (no job jumps ahead of it: fifo.py:141-142). A job that cannot
    run at all (T = 0 everywhere) is passed over (fifo.py:157)."""
    X = np.zeros_like(T, dtype=float)
    free = N.astype(float).tolist()
    zl = np.asarray(z).tolist()
    Tl = T.tolist()
    K = len(free)
    for j in order.tolist():
        room = [free[k] >= zl[j] for k in range(K)]
        if not any(room):
            break
        row = Tl[j]
        k = max(range(K), key=lambda k: (row[k] if room[k] else -1.0, -k))   # first of the best
        if row[k] > 0:
            X[j, k] = 1.0
            free[k] -= zl[j]
    return X


def fifo_base(T: np.ndarray, z: np.ndarray, N: np.ndarray, rows: np.ndarray, types: list[str],
              held: dict[int, str], rng, stale_type: bool = False) -> tuple[np.ndarray, dict[int, str]]:
    """Gavel's heterogeneity-agnostic FIFO (policies/fifo.py:74-176, mode 'base'), an allocation
    of one whole type per job that persists from one computation to the next.

    `held` maps the driver row of each job allocated last time to its type name (the policy's own
    state; Gavel keeps it in FIFOPolicy._allocation). A job allocated last time keeps its type; the
    GPUs of a job that finished go first to the head of the queue if it fits there (fifo.py:96-122).
    Then, in arrival order, each waiting job gets a random type (`rng.randrange`, Gavel's
    random.Random(seed)) among those with room for it, and the first job that fits nowhere stops
    the allocation (fifo.py:131-163).

    stale_type=True reproduces what Gavel's code really does there: the chosen index is only used
    to drop a type from the list when the job fills it, while the job itself is given
    `worker_type`, the last type of the (sorted) list of types with free GPUs, which the loop
    variable at fifo.py:137 leaves behind (fifo.py:157-163), even where that type is full.
    Returns (X, new held)."""
    n, K = T.shape
    idx = {name: k for k, name in enumerate(types)}
    live = {int(r): i for i, r in enumerate(rows.tolist())}
    avail = {name: int(N[k]) for k, name in enumerate(types)}
    queue = sorted(int(r) for r in rows.tolist() if int(r) not in held)   # arrival (row) order
    new_held: dict[int, str] = {}
    for r in sorted(held):
        wt = held[r]
        if r not in live:                  # finished: its GPUs go to the head of the queue
            if queue:
                head = queue[0]
                i = live[head]
                if z[i] <= avail[wt] and T[i, idx[wt]] > 0:
                    queue.pop(0)
                    new_held[head] = wt
                    avail[wt] -= int(z[i])
        else:
            new_held[r] = wt
            avail[wt] -= int(z[live[r]])
    names = sorted(name for name in types if avail[name] > 0)
    while queue and names:
        r = queue.pop(0)
        i = live[r]
        fits = [(m, name) for m, name in enumerate(names) if avail[name] >= z[i]]
        if not fits:
            break
        pick = rng.randrange(len(fits))
        wt = names[-1] if stale_type else fits[pick][1]
        if T[i, idx[wt]] > 0:
            new_held[r] = wt
            avail[wt] -= int(z[i])
            if avail[wt] == 0:
                names.pop(fits[pick][0] if stale_type else names.index(wt))
    X = np.zeros((n, K))
    for r, wt in new_held.items():
        X[live[r], idx[wt]] = 1.0
    return X, new_held


def min_max_ratio(T: np.ndarray, z: np.ndarray, N: np.ndarray, num: np.ndarray, den: np.ndarray,
                  base: np.ndarray, rel_tol: float = 1e-2, guess: float | None = None
                  ) -> tuple[np.ndarray, float]:
    """minimise max_j (base_j + num_j / tau_j(X)) / den_j   (finish-time fairness:
    base = age, num = remaining steps, den = isolated finish time).

    For a fixed rho the condition is linear: tau_j >= num_j / (rho den_j - base_j); so
    level(rho) = max_X min_j tau_j (rho den_j - base_j) / num_j is a max-min LP and rho is
    feasible iff level >= 1. rho is found by regula falsi (Illinois) on level(rho) - 1."""
    if T.shape[0] == 0 or not (T > 0).any() or not (np.asarray(N) > 0).any():
        return np.zeros_like(T, dtype=float), 0.0

    search = _LevelLP(T, z, N)
    raw: dict[float, float] = {}     # the level LP's optimum at each rho tried (its own units)

    def level(rho: float, refine: bool = False) -> tuple[np.ndarray | None, float]:
        if refine:        # the allocation itself: the max-min programme as max_min solves it,
            # its level the one the search's programme found at rho (its second stage alone)
            return max_min(T, z, N, (rho * den - base) / num, refine=True, known=raw.get(rho))
        coef, scale = sane_coefficients((rho * den - base) / num, T)
        # the level programme's rows hold 1 / coef, and HiGHS takes an entry under 1e-9 for 0
        # (the level then unbounded: a lone job with almost no steps left at 0.02 steps/s): such
        # coefficients are divided by one factor there, the level multiplied back (raw: in
        # sane_coefficients' units, as max_min's `known` reads it)
        top = float(coef.max()) if coef.size else 0.0
        f = top / 1e8 if top > 1e9 else 1.0
        raw[rho] = search.level(coef / f) * f
        return None, raw[rho] * scale

    lo = float(np.max(base / den)) * (1 + 1e-9) + 1e-12   # below this some job can never make it
    hi = max(2.0 * lo, 1.0) if guess is None or guess <= lo else guess * 1.05
    v_hi = level(hi)[1]
    if guess is not None and v_hi >= 1.0 and guess * 0.8 > lo:   # try a tighter lower end
        v_try = level(guess * 0.8)[1]
        if v_try < 1.0:
            lo = guess * 0.8
    for _ in range(64):      # level grows without bound in rho unless some job can never run
        if v_hi >= 1.0:
            break
        lo, hi = hi, hi * 4.0
        v_hi = level(hi)[1]
    v_lo = level(lo)[1]
    f_lo, f_hi = v_lo - 1.0, v_hi - 1.0
    side = 0
    for _ in range(40):
        if hi - lo <= rel_tol * hi:
            break
        mid = hi - f_hi * (hi - lo) / (f_hi - f_lo) if f_hi != f_lo else 0.5 * (lo + hi)
        mid = min(max(mid, lo + 0.01 * (hi - lo)), hi - 0.01 * (hi - lo))
        v_mid = level(mid)[1]
        f_mid = v_mid - 1.0
        if f_mid >= 0:
            hi, f_hi = mid, f_mid
            if side == 1:
                f_lo /= 2
            side = 1
        else:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi /= 2
            side = -1
    return level(hi, refine=True)[0], hi


class _LevelLP:
    """max t  s.t.  t / coef_j <= tau_j(X) per job that can run, X feasible: the max-min
    programme with each fairness row divided by its coefficient, so that a new set of
    coefficients changes only the level's column. Kept in HiGHS between the calls of one
    search and solved from the last basis (finish-time fairness solves it ~8 times per
    allocation, for coefficients that move a little each time)."""

    def __init__(self, T: np.ndarray, z: np.ndarray, N: np.ndarray):
        p = Pairs.of(T)
        n, K, P = p.n, p.K, p.size
        self.rows = np.flatnonzero(np.bincount(p.j, minlength=n) > 0)   # jobs with a fairness row
        nf = len(self.rows)
        fair_row = np.zeros(n, dtype=np.int64)
        fair_row[self.rows] = n + K + np.arange(nf)
        self.frow = (n + K + np.arange(nf)).astype(np.int32)
        start = np.arange(0, 3 * P + 1, 3, dtype=np.int64)
        A = (np.append(start, 3 * P + nf),
             np.concatenate([np.column_stack([p.j, n + p.k, fair_row[p.j]]).ravel(),
                             n + K + np.arange(nf)]),
             np.concatenate([np.column_stack([np.ones(P), z[p.j].astype(float), -p.t]).ravel(),
                             np.ones(nf)]))
        self.model = (A, np.concatenate([np.ones(n), N.astype(float), np.zeros(nf)]),
                      np.zeros(P + 1), np.append(np.ones(P), np.inf))
        self.cost = np.zeros(P + 1)
        self.cost[-1] = -1.0
        self.tcol = P

    def level(self, coef: np.ndarray) -> float:
        g = 1.0 / coef[self.rows]
        s = _lp.solver("level")
        res = None
        if s.owner is self and _lp.WARM:           # only the level's column changed
            for r, v in zip(self.frow.tolist(), g.tolist()):
                s.h.changeCoeff(r, self.tcol, v)
            res = s.resolve()
            # (HiGHS may end a warm start with no answer, "Unknown": under finish-time fairness
            # with ~2,000 jobs it did, and the run was lost. Then afresh, as below.)
        if res is None or res.status != 0:         # the whole programme, solved afresh
            A, b, lo, hi = self.model
            A = (A[0], A[1], A[2].copy())
            A[2][len(A[2]) - len(g):] = g
            res = s.solve(self.cost, A, b, lo, hi, owner=self)
        if res.status != 0:
            raise RuntimeError(f"max-min LP failed: {res.message}")
        return float(res.x[-1])


def water_filling(T: np.ndarray, z: np.ndarray, N: np.ndarray, coef: np.ndarray,
                  max_levels: int = 32) -> np.ndarray:
    """Max-min fairness applied level by level: solve max-min, freeze the bottleneck jobs (those
    that cannot get more without lowering the level) at that level, and re-solve for the rest.
    Interchangeable jobs (same throughputs, size, coefficient) are one class throughout."""
    n = T.shape[0]
    if n == 0:
        return np.zeros_like(T, dtype=float)
    first, inv, mult = classes(T, z, coef)
    Tc, zc, cc = T[first], z[first], coef[first]
    floor = np.full(len(first), np.nan)
    can_run = (Tc > 0).any(axis=1)
    Xc = np.zeros_like(Tc, dtype=float)
    duals = np.zeros(len(first))
    for _ in range(max_levels):
        free = can_run & np.isnan(floor)
        if not free.any():
            break
        Xc, lev = _max_min_rows(Tc, zc, N, cc, floor, mult, duals)
        stuck = free & (duals > 1e-7 * max(duals.max(), 1e-12))
        if not stuck.any():      # degenerate duals: ask the slack LP which rows are stuck
            stuck = _bottlenecks(Tc, zc, N, cc, floor, lev, mult) & free
        if not stuck.any() or stuck.sum() == free.sum():
            break
        floor[stuck] = lev
    return Xc[inv]


def _bottlenecks(T: np.ndarray, z: np.ndarray, N: np.ndarray, coef: np.ndarray,
                 floor: np.ndarray, lev: float, mult: np.ndarray) -> np.ndarray:
    """Free jobs that cannot rise above `lev` while every free job keeps `lev` and frozen ones
    their floors: maximise sum of slacks s_j in [0, eps] with coef_j tau_j >= lev + s_j."""
    p = Pairs.of(T)
    n, K = p.n, p.K
    eps = max(lev, 1e-9) * 1e-3
    has = np.bincount(p.j, minlength=n) > 0
    free = np.isnan(floor) & has
    target = np.where(free, lev, np.nan_to_num(floor, nan=0.0))
    rows = np.flatnonzero(has)
    fr = free[rows]
    nf = int(fr.sum())
    # rows: capacities (n + K), then -coef_j tau_j + s_j <= -target_j per row with pairs;
    # columns: the pairs, then a slack per free row
    tau_row = np.full(n, -1, dtype=np.int64)
    tau_row[rows] = n + K + np.arange(len(rows))
    r0, c0, v0 = p.capacity_entries(z, mult)
    slack_rows = tau_row[rows[fr]]
    A = _lp.csc(np.concatenate([r0, tau_row[p.j], slack_rows]),
                np.concatenate([c0, np.arange(p.size), p.size + np.arange(nf)]),
                np.concatenate([v0, -(coef[p.j] * p.t), np.ones(nf)]),
                (n + K + len(rows), p.size + nf))
    b = np.concatenate([np.ones(n), N.astype(float), -target[rows] * (1 - 1e-7)])
    c = np.concatenate([np.zeros(p.size), -np.ones(nf)])
    res = _lp.solver().solve(c, A, b, np.zeros(p.size + nf),
                             np.concatenate([np.ones(p.size), np.full(nf, eps)]))
    out = np.zeros(n, dtype=bool)
    if res.status != 0:
        out[free] = True
        return out
    out[rows[fr]] = res.x[p.size:] < 0.5 * eps
    return out


def spread_like_agnostic(X: np.ndarray, allowed: np.ndarray, z: np.ndarray, N: np.ndarray) -> np.ndarray:
    """A heterogeneity-agnostic policy sees every type as the same, so among its equally good
    optima it has no reason to prefer one type: spread each job's total time share over the
    types it may use in proportion to their capacity (keeping X if that would over-commit a
    type). Avoids reporting an arbitrary LP vertex (e.g. one class entirely on K80) as
    "agnostic"."""
    share = np.where(allowed, N[None, :].astype(float), 0.0)
    share = share / np.maximum(share.sum(axis=1, keepdims=True), 1e-12)
    Y = X.sum(axis=1, keepdims=True) * share
    if ((z[:, None] * Y).sum(axis=0) <= N + 1e-9).all():
        return Y
    return X
