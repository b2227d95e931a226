"""Gavel's programmes solved the way Gavel's simulator solves them: written in cvxpy as Gavel
writes them and handed to ECOS (`solution="ecos"`). Optional: needs `cvxpy` and `ecos`
(pip install "quanta[replay]": cvxpy-base and ecos); nothing else in Quanta imports them.

Why: many allocations reach the optimal level, and the one an interior-point solver stops at is
not the analytic centre that `central.py` computes; finish-time fairness is sensitive to which
one (bench/anchors/gavel.md). ECOS is deterministic, so the same programme, built the same way
(rows = jobs in arrival order, columns = GPU types sorted by name, as Gavel's Policy.flatten does,
policies/policy.py:26-43; the same expressions and constraint order), gives Gavel's X.

The programmes (stanford-futuredata/gavel @ c4fa400, scheduler/policies/):
- max-min fairness, max_min_fairness.py:42-81 (agnostic: T = 1, lines 17-32);
- finish-time fairness, finish_time_fairness.py:53-120 (isolated share as a fallback when ECOS
  returns nothing, lines 117-119);
- maximum total throughput, max_sum_throughput.py:39-66;
each with the base constraints of policy.py:56-63.
"""

from __future__ import annotations

import numpy as np

from quanta.errors import QuantaError


def _cvxpy():
    try:
        import cvxpy as cp
    except ImportError:
        raise QuantaError("gavel solution=ecos needs cvxpy and ECOS "
                          "(pip install \"quanta[replay]\")") from None
    return cp


def _columns(types) -> np.ndarray:
    """Gavel's column order: worker types sorted by name."""
    return np.array(sorted(range(len(types)), key=lambda k: types[k]), dtype=np.int64)


def _base(cp, x, z: np.ndarray, N: np.ndarray):
    sf = np.repeat(z.reshape(-1, 1).astype(float), x.shape[1], axis=1)
    return [x >= 0, cp.sum(cp.multiply(sf, x), axis=0) <= N, cp.sum(x, axis=1) <= 1]


def _solve(cp, problem, x, cols: np.ndarray) -> np.ndarray | None:
    try:
        problem.solve(solver="ECOS")
    except cp.error.SolverError:
        return None
    if x.value is None:
        return None
    X = np.empty_like(x.value)
    X[:, cols] = x.value.clip(min=0.0).clip(max=1.0)    # back to the cluster's column order
    return X


def ecos_max_min(T: np.ndarray, z: np.ndarray, N: np.ndarray, weight: np.ndarray,
                 tau_prop: np.ndarray, types) -> np.ndarray:
    """maximise min_j sum_k T[j,k] (1 / w_j)(1 / tau_prop_j) z_j X[j,k] (Gavel's expression)."""
    cp = _cvxpy()
    cols = _columns(types)
    Tc, Nc = T[:, cols].astype(float), np.asarray(N, dtype=float)[cols]
    m, n = Tc.shape
    pw = (1.0 / weight).reshape((m, 1)) * (1.0 / tau_prop.reshape((m, 1)))
    sf = np.repeat(z.reshape(-1, 1).astype(float), n, axis=1)
    x = cp.Variable((m, n))
    objective = cp.Maximize(cp.min(cp.sum(cp.multiply(np.multiply(Tc * pw, sf), x), axis=1)))
    X = _solve(cp, cp.Problem(objective, _base(cp, x, z, Nc)), x, cols)
    if X is None:
        raise RuntimeError("ECOS found no max-min allocation")
    return X


def ecos_min_max_ratio(T: np.ndarray, z: np.ndarray, N: np.ndarray, remaining: np.ndarray,
                       iso_time: np.ndarray, age: np.ndarray, types) -> np.ndarray | None:
    """minimise max_j (age_j + remaining_j inv_pos(tau_j)) / iso_time_j; None if ECOS fails
    (Gavel then uses the isolated share)."""
    cp = _cvxpy()
    cols = _columns(types)
    Tc, Nc = T[:, cols].astype(float), np.asarray(N, dtype=float)[cols]
    m = Tc.shape[0]
    x = cp.Variable(Tc.shape)
    fractions = []
    for i in range(m):
        tau = cp.sum(cp.multiply(Tc[i], x[i]))
        fractions.append((age[i] + remaining[i] * cp.inv_pos(tau)) / iso_time[i])
    objective = cp.Minimize(fractions[0] if m == 1 else cp.maximum(*fractions))
    return _solve(cp, cp.Problem(objective, _base(cp, x, z, Nc)), x, cols)


def ecos_max_sum(T: np.ndarray, z: np.ndarray, N: np.ndarray, value: np.ndarray, types) -> np.ndarray:
    """maximise sum value[j,k] X[j,k]."""
    cp = _cvxpy()
    cols = _columns(types)
    Vc, Nc = value[:, cols].astype(float), np.asarray(N, dtype=float)[cols]
    x = cp.Variable(Vc.shape)
    objective = cp.Maximize(cp.sum(cp.sum(cp.multiply(Vc / np.ones((1, Vc.shape[1])), x), axis=1)))
    X = _solve(cp, cp.Problem(objective, _base(cp, x, z, Nc)), x, cols)
    if X is None:
        raise RuntimeError("ECOS found no max-throughput allocation")
    return X
