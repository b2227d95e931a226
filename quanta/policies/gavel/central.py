"""The central solution of Gavel's programmes: the point in the middle of the optimal set that an
interior-point solver returns, rather than a vertex.

Gavel solves its programmes with ECOS through cvxpy (scheduler/policies/*.py, `--solver ECOS`), an
interior-point method: among the many allocations with the optimal level it returns one deep
inside the optimal set, where every job has some time on every type and no row or type is filled
unless it must be. A simplex solver returns a vertex instead (few non-zeros, full rows), and the
round mechanism, whose priorities are X itself, then runs other jobs elsewhere. This module
follows the central path of the same constraints as Gavel's cvxpy programmes with a primal
barrier method to its end, the analytic centre of the optimal face. ECOS stops near the optimal
face but not at that centre (its predictor-corrector steps leave the path): for max-min and
maximum throughput the rounds come out the same, for finish-time fairness they do not
(bench/anchors/gavel.md measures both; ecos.py gives ECOS's own point when cvxpy is installed).

Variables: X (n jobs x K types, every entry, as in Gavel's cp.Variable((m, n))) and the level t.
Constraints (Policy.get_base_constraints, policies/policy.py:56-63): X >= 0, sum_j z_j X[j,k] <=
N_k, sum_k X[j,k] <= 1; and per job a fairness term in (tau_j = sum_k T[j,k] X[j,k], t):
- max-min (max_min_fairness.py:69-72): t <= c_j tau_j, maximise t;
- finish-time fairness (finish_time_fairness.py:90-100): t >= a_j + b_j / tau_j, minimise t, with
  1/tau_j as cvxpy writes inv_pos (a second-order cone s_j tau_j >= 1 beside a_j + b_j s_j <= t;
  the barrier below is that pair's, minimised over s_j);
- maximum throughput (max_sum_throughput.py:60-66): no level, maximise sum value X.

Each Newton step is solved in O(n K^3): the Hessian is block-diagonal per job plus the K capacity
rows (Woodbury) plus the level's row and column (Schur complement). Interchangeable jobs (the same
row of every input) are one row with a multiplicity (`_solve`'s `w`): the same central path over
fewer variables (max-min: one row per job type; agnostic max-min: usually a single row).
"""

from __future__ import annotations

import numpy as np

from quanta.policies.gavel.allocations import classes, memo

MAX_NEWTON = 60
# a Newton step cut below this fraction means the direction is lost to rounding (the Hessian is
# too ill-conditioned near the optimal face): the iterates only wander by tiny steps from there
STALL = 1e-3


def _terms_max_min(tau: np.ndarray, t: float, c: np.ndarray):
    """Per row: F_j = -log(c_j tau_j - t) and its derivatives (in tau_j and t)."""
    s = c * tau - t
    if s.min() <= 0:
        return None
    inv = 1.0 / s
    inv2 = inv * inv
    return -np.log(s), -c * inv, inv, c * c * inv2, -c * inv2, inv2


def _terms_ftf(tau: np.ndarray, t: float, a: np.ndarray, b: np.ndarray):
    """Per row: F_j = -2 log(tau_j (t - a_j) - b_j) + log tau_j (the cone pair's barrier,
    minimised over its auxiliary variable) and its derivatives."""
    if tau.min() <= 0:
        return None
    d = t - a
    u = tau * d - b
    if u.min() <= 0:
        return None
    iu = 1.0 / u
    iu2 = iu * iu
    it = 1.0 / tau
    return (-2.0 * np.log(u) + np.log(tau), -2.0 * d * iu + it, -2.0 * tau * iu,
            2.0 * d * d * iu2 - it * it, 2.0 * b * iu2, 2.0 * tau * tau * iu2)


def _solve(T: np.ndarray, z: np.ndarray, N: np.ndarray, terms, sense: float, t0: float,
           tol: float, value: np.ndarray | None = None,
           w: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """minimise sense * t over the constraints, following the central path; `terms(tau, t)` gives
    the per-row fairness barrier and its derivatives (None outside its domain). With `value`
    (n x K) and no terms: maximise sum value * X instead (no level variable).

    `w`: how many interchangeable jobs each row stands for (default 1). The barrier of the whole
    programme is symmetric in interchangeable jobs and the start point is too, so every Newton
    iterate gives them the same X: solving over classes with these multiplicities follows the
    same central path (the same iterates, up to rounding) with fewer variables."""
    n, K = T.shape
    w = np.ones(n) if w is None else np.asarray(w, dtype=float)
    if terms is None:     # no level: a dummy term that does not depend on X, t fixed by it
        zero = np.zeros(n)

        def terms(tau, t):
            return zero, zero, zero, zero, zero, zero
    z = z.astype(float)
    N = N.astype(float)
    wz = w * z
    wz2 = wz * z
    jobs = float(w.sum())
    wc = w[:, None]
    # a strictly feasible start: the same small share everywhere
    x0 = min(0.5 / K, 0.5 * float(np.min(N / max(wz.sum(), 1e-12))))
    X = np.full((n, K), x0)
    t = t0
    m = jobs * K + jobs + K + (0 if value is not None else 2 * jobs)   # barrier weight (a cone: 2)
    wvalue = None if value is None else wc * value
    diag = np.arange(K)
    U = np.stack([np.ones_like(T), T], axis=2)                  # (n, K, 2): the row sum and tau
    Ut = U.transpose(0, 2, 1)
    V = np.empty((n, K, 2))

    def barrier(X, t):
        if X.min() <= 0:
            return None
        row = 1.0 - X.sum(axis=1)
        cap = N - wz @ X
        if row.min() <= 0 or cap.min() <= 0:
            return None
        tr = terms((T * X).sum(axis=1), t)
        if tr is None:
            return None
        F = float(w @ (tr[0] - np.log(X).sum(axis=1) - np.log(row))) - float(np.log(cap).sum())
        return F, row, cap, tr

    def f(X, t, F):
        obj = sense * t if value is None else -float((wvalue * X).sum())
        return obj / mu + F

    mu = max(abs(t0), 1e-3) if value is None else max(float(np.abs(wvalue).sum()) * x0, 1e-3)
    b = barrier(X, t)
    while True:
        for _ in range(MAX_NEWTON):
            F, row, cap, (_Ff, Fx_tau, Ft, Ftt_tau, Fxt_tau, Ftt) = b
            # gradient of  sense*t/mu + F  (per class: w_j times a job's, plus the capacities)
            gX = wc * (-1.0 / X + (1.0 / row)[:, None] + Fx_tau[:, None] * T) + \
                wz[:, None] / cap[None, :]
            if value is not None:
                gX = gX - wvalue / mu
            gt = sense / mu + float(w @ Ft)
            # Hessian: per class w_j B_j, B_j = diag(1/X^2) + 11^T/row^2 + Ftt_tau T T^T; the
            # capacities add (w z)(w z)^T / cap^2 per type; the level Ftt and cross terms Fxt T.
            # B_j^-1 by Woodbury on the diagonal: B_j = D^-1 + U C U^T, U = [1, T_j],
            # C = diag(1/row^2, Ftt_tau) (stable where a row or a job's level is nearly tight)
            D = X * X
            DU = D[:, :, None] * U                                   # (n, K, 2)
            s = Ut @ DU                                              # (n, 2, 2)
            s00 = s[:, 0, 0] + row * row
            s11 = s[:, 1, 1] + 1.0 / np.maximum(Ftt_tau, 1e-300)
            s01 = s[:, 0, 1]
            det = s00 * s11 - s01 * s01
            sinv = np.empty_like(s)
            sinv[:, 0, 0] = s11 / det
            sinv[:, 1, 1] = s00 / det
            sinv[:, 0, 1] = sinv[:, 1, 0] = -s01 / det
            Binv = -(DU @ sinv @ DU.transpose(0, 2, 1))              # (n, K, K), one job's
            Binv[:, diag, diag] += D
            # capacities (Woodbury again): S = diag(cap^2) + sum_j w_j z_j^2 B_j^-1
            S = (wz2 @ Binv.reshape(n, K * K)).reshape(K, K)
            S[diag, diag] += cap * cap
            Sinv = np.linalg.inv(S)
            G = (w * Fxt_tau)[:, None] * T                           # d2/dX dt
            # M^-1 [-gX, G] at once: row j: b_j / w_j - z_j B_j^-1 S^-1 sum_i z_i b_i
            V[:, :, 0] = -gX                                         # (n, K, 2)
            V[:, :, 1] = G
            bv = Binv @ V
            y = Sinv @ (z @ bv.reshape(n, 2 * K)).reshape(K, 2)     # (K, 2)
            MV = bv / wc[:, :, None] - z[:, None, None] * (Binv @ y)
            Mg = MV[:, :, 0]
            if value is not None:
                dt, dX = 0.0, Mg
                dec = -float((gX * dX).sum())
            else:
                MG = MV[:, :, 1]
                schur = float(w @ Ftt) - float((G * MG).sum())
                if not np.isfinite(schur) or schur <= 0:   # lost to rounding: stop here
                    return X, t
                dt = (-gt - float((G * Mg).sum())) / schur
                dX = Mg - MG * dt
                dec = -(float((gX * dX).sum()) + gt * dt)       # Newton decrement squared
            if dec < 1e-9:
                break
            step = 1.0
            f0 = f(X, t, F)
            slack = 1e-12 * (abs(f0 - F) + abs(F))       # rounding in f itself
            while step > 1e-12:
                nb = barrier(X + step * dX, t + step * dt)
                if nb is not None and (f(X + step * dX, t + step * dt, nb[0])
                                       <= f0 - 0.25 * step * dec + slack):
                    break
                step *= 0.5
            if step <= 1e-12:           # no progress at this precision: as close as it gets
                return X, t
            X, t = X + step * dX, t + step * dt
            b = nb
            if step < STALL:    # rounding has taken over the direction: the point no longer moves
                return X, t
        level = abs(t) if value is None else abs(float((wvalue * X).sum()))
        if m * mu <= tol * max(level, 1e-9):
            return X, t
        mu *= 0.2


def central_max_min(T: np.ndarray, z: np.ndarray, N: np.ndarray, coef: np.ndarray,
                    tol: float = 1e-8) -> tuple[np.ndarray, float]:
    """maximise min_j coef_j tau_j(X), the central optimum. Returns (X, level). Solved over
    classes of interchangeable jobs (same throughputs, size and coefficient)."""
    n = T.shape[0]
    if n == 0:
        return np.zeros_like(T, dtype=float), 0.0
    c = np.asarray(coef, dtype=float)
    first, inv, mult = classes(T, z, c)
    Tc, zc, cc, Nf = T[first], np.asarray(z[first], dtype=np.int64), c[first], np.asarray(N, float)
    X, t = memo("central_max_min", (Tc, zc, Nf, cc, mult, tol),
                lambda: _max_min_rows(Tc, zc, Nf, cc, mult, tol))
    return X[inv], t


def _max_min_rows(T: np.ndarray, z: np.ndarray, N: np.ndarray, c: np.ndarray, w: np.ndarray,
                  tol: float) -> tuple[np.ndarray, float]:
    # start the level below every job's value at the uniform start point
    K = T.shape[1]
    x0 = min(0.5 / K, 0.5 * float(np.min(N / max(float(w @ z), 1e-12))))
    t0 = 0.5 * float(np.min(c * T.sum(axis=1) * x0))
    if t0 <= 0:     # a job that can run nowhere: its level is 0; solve for the others
        ok = (c * T.sum(axis=1)) > 0
        X = np.zeros_like(T, dtype=float)
        if ok.any():
            X[ok], _ = _max_min_rows(T[ok], z[ok], N, c[ok], w[ok], tol)
        return X, 0.0
    X, t = _solve(T, z, N, lambda tau, t: _terms_max_min(tau, t, c), -1.0, t0, tol, w=w)
    return X, float(t)


def central_min_max_ratio(T: np.ndarray, z: np.ndarray, N: np.ndarray, num: np.ndarray,
                          den: np.ndarray, base: np.ndarray, tol: float = 1e-8
                          ) -> tuple[np.ndarray, float]:
    """minimise max_j (base_j + num_j / tau_j(X)) / den_j, the central optimum (Gavel's
    finish-time fairness). Returns (X, rho)."""
    n, K = T.shape
    if n == 0:
        return np.zeros_like(T, dtype=float), 0.0
    a = base / den
    b = num / den
    runs = T.sum(axis=1) > 0
    if not runs.all():
        X = np.zeros_like(T, dtype=float)
        if runs.any():
            X[runs], rho = central_min_max_ratio(T[runs], z[runs], N, num[runs], den[runs],
                                                 base[runs], tol)
            return X, rho
        return X, float("inf")
    x0 = min(0.5 / K, 0.5 * float(np.min(N / max(float(z.sum()), 1e-12))))
    t0 = 2.0 * float(np.max(a + b / (T.sum(axis=1) * x0))) + 1.0
    first, inv, mult = classes(T, z, a, b)
    ac, bc = a[first], b[first]
    X, t = _solve(T[first], z[first], N, lambda tau, t: _terms_ftf(tau, t, ac, bc), 1.0, t0, tol,
                  w=mult)
    return X[inv], float(t)


def central_max_sum(T: np.ndarray, z: np.ndarray, N: np.ndarray, value: np.ndarray,
                    tol: float = 1e-8) -> np.ndarray:
    """maximise sum value[j,k] X[j,k], the central optimum (Gavel's max_sum_throughput_perf:
    cp.Maximize(cp.sum(cp.multiply(throughputs, x))) with the base constraints,
    max_sum_throughput.py:60-66)."""
    if T.shape[0] == 0:
        return np.zeros_like(T, dtype=float)
    value = np.asarray(value, dtype=float)
    first, inv, mult = classes(T, z, value)
    Tc, zc, vc, Nf = T[first], np.asarray(z[first], dtype=np.int64), value[first], np.asarray(N, float)
    X = memo("central_max_sum", (Tc, zc, Nf, vc, mult, tol),
             lambda: _solve(Tc, zc, Nf, None, 0.0, 0.0, tol, value=vc, w=mult)[0])
    return X[inv]
