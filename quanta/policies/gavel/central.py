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
rows (Woodbury) plus the level's row and column (Schur complement).
"""

from __future__ import annotations

import numpy as np

MAX_NEWTON = 60


def _terms_max_min(tau: np.ndarray, t: float, c: np.ndarray):
    s = c * tau - t
    if np.any(s <= 0):
        return None
    F = -np.log(s).sum()
    return F, -c / s, 1.0 / s, c * c / s**2, -c / s**2, 1.0 / s**2


def _terms_ftf(tau: np.ndarray, t: float, a: np.ndarray, b: np.ndarray):
    if np.any(tau <= 0):
        return None
    d = t - a
    u = tau * d - b
    if np.any(u <= 0):
        return None
    F = float((-2.0 * np.log(u) + np.log(tau)).sum())
    return (F, -2.0 * d / u + 1.0 / tau, -2.0 * tau / u, 2.0 * d * d / u**2 - 1.0 / tau**2,
            2.0 * b / u**2, 2.0 * tau * tau / u**2)


def _solve(T: np.ndarray, z: np.ndarray, N: np.ndarray, terms, sense: float, t0: float,
           tol: float, value: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """minimise sense * t over the constraints, following the central path; `terms(tau, t)` gives
    the per-job fairness barrier and its derivatives (None outside its domain). With `value`
    (n x K) and no terms: maximise sum value * X instead (no level variable)."""
    n, K = T.shape
    if terms is None:     # no level: a dummy term that does not depend on X, t fixed by it
        def terms(tau, t):
            return 0.0, np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    z = z.astype(float)
    N = N.astype(float)
    # a strictly feasible start: the same small share everywhere
    x0 = min(0.5 / K, 0.5 * float(np.min(N / max(z.sum(), 1e-12))))
    X = np.full((n, K), x0)
    t = t0
    m = n * K + n + K + (0 if value is not None else 2 * n)   # barrier weight (a cone counts 2)

    def barrier(X, t):
        if np.any(X <= 0):
            return None
        row = 1.0 - X.sum(axis=1)
        cap = N - z @ X
        if np.any(row <= 0) or np.any(cap <= 0):
            return None
        tr = terms((T * X).sum(axis=1), t)
        if tr is None:
            return None
        return -np.log(X).sum() - np.log(row).sum() - np.log(cap).sum() + tr[0], row, cap, tr

    mu = max(abs(t0), 1e-3) if value is None else max(float(np.abs(value).sum()) * x0, 1e-3)
    while True:
        for _ in range(MAX_NEWTON):
            b = barrier(X, t)
            F, row, cap, (Ff, Fx_tau, Ft, Ftt_tau, Fxt_tau, Ftt) = b
            # gradient of  sense*t/mu + F
            gX = -1.0 / X + (1.0 / row)[:, None] + (z[:, None] / cap[None, :]) + Fx_tau[:, None] * T
            if value is not None:
                gX = gX - value / mu
            gt = sense / mu + Ft.sum()
            # Hessian: per job B_j = diag(1/X^2) + 11^T/row^2 + Fττ T T^T; caps: z z^T / cap^2 per
            # type column; level: Ftt and cross terms Fτt T
            # B_j^-1 by Woodbury on the diagonal: B_j = diag(1/X^2) + U C U^T, U = [1, T_j],
            # C = diag(1/row^2, Fττ) (stable where a row or a job's level is nearly tight)
            Dinv = X**2
            U = np.stack([np.ones_like(T), T], axis=2)                  # (n, K, 2)
            DU = Dinv[:, :, None] * U
            small = np.einsum("jkr,jks->jrs", U, DU)
            small[:, 0, 0] += row**2
            small[:, 1, 1] += 1.0 / np.maximum(Ftt_tau, 1e-300)
            Binv = np.einsum("jk,kl->jkl", Dinv, np.eye(K)) - np.einsum(
                "jkr,jrs,jls->jkl", DU, np.linalg.inv(small), DU)
            G = Fxt_tau[:, None] * T                       # d2/dX dt
            htt = Ftt.sum()

            def Binv_mul(V):                                # V: (n, K, r)
                return np.einsum("jkl,jlr->jkr", Binv, V)
            # W: (n, K, K) capacity columns, W[j, k, k'] = z_j if k == k'
            W = z[:, None, None] * np.eye(K)[None, :, :]
            BW = Binv_mul(W)
            S = np.diag(cap**2) + np.einsum("jkr,jks->rs", W, BW)   # D^-1 + W^T B^-1 W
            Sinv = np.linalg.inv(S)

            def Minv(v):                                    # v: (n, K)
                bv = np.einsum("jkl,jl->jk", Binv, v)
                w = np.einsum("jkr,jk->r", W, bv)
                return bv - np.einsum("jkr,r->jk", BW, Sinv @ w)
            Mg = Minv(-gX)
            if value is not None:
                dt, dX = 0.0, Mg
                dec = -float((gX * dX).sum())
            else:
                MG = Minv(G)
                schur = htt - float((G * MG).sum())
                if not np.isfinite(schur) or schur <= 0:   # lost to rounding: stop here
                    return X, t
                dt = (-gt - float((G * Mg).sum())) / schur
                dX = Mg - MG * dt
                dec = -(float((gX * dX).sum()) + gt * dt)       # Newton decrement squared
            if dec < 1e-9:
                break
            step = 1.0
            def f(X, t, F):
                obj = sense * t if value is None else -float((value * X).sum())
                return obj / mu + F
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
        level = abs(t) if value is None else abs(float((value * X).sum()))
        if m * mu <= tol * max(level, 1e-9):
            return X, t
        mu *= 0.2


def central_max_min(T: np.ndarray, z: np.ndarray, N: np.ndarray, coef: np.ndarray,
                    tol: float = 1e-8) -> tuple[np.ndarray, float]:
    """maximise min_j coef_j tau_j(X), the central optimum. Returns (X, level)."""
    n = T.shape[0]
    if n == 0:
        return np.zeros_like(T, dtype=float), 0.0
    c = np.asarray(coef, dtype=float)
    # start the level below every job's value at the uniform start point
    K = T.shape[1]
    x0 = min(0.5 / K, 0.5 * float(np.min(N / max(float(z.sum()), 1e-12))))
    t0 = 0.5 * float(np.min(c * T.sum(axis=1) * x0))
    if t0 <= 0:     # a job that can run nowhere: its level is 0; solve for the others
        ok = (c * T.sum(axis=1)) > 0
        X = np.zeros_like(T, dtype=float)
        if ok.any():
            X[ok], _ = central_max_min(T[ok], z[ok], N, c[ok], tol)
        return X, 0.0
    X, t = _solve(T, z, N, lambda tau, t: _terms_max_min(tau, t, c), -1.0, t0, tol)
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
    X, t = _solve(T, z, N, lambda tau, t: _terms_ftf(tau, t, a, b), 1.0, t0, tol)
    return X, float(t)


def central_max_sum(T: np.ndarray, z: np.ndarray, N: np.ndarray, value: np.ndarray,
                    tol: float = 1e-8) -> np.ndarray:
    """maximise sum value[j,k] X[j,k], the central optimum (Gavel's max_sum_throughput_perf:
    cp.Maximize(cp.sum(cp.multiply(throughputs, x))) with the base constraints,
    max_sum_throughput.py:60-66)."""
    if T.shape[0] == 0:
        return np.zeros_like(T, dtype=float)
    return _solve(T, z, N, None, 0.0, 0.0, tol, value=np.asarray(value, dtype=float))[0]
