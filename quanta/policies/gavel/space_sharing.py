"""Gavel's space sharing: max-min fairness over single jobs and co-located pairs of jobs.

Variables are per class of interchangeable jobs (same job type, GPU count, allowed types and
fairness coefficient), so the programme grows with pairs of job kinds, not pairs of jobs:
- y[c, k]: time fraction each job of class c runs alone on type k;
- p[(a, b), k]: pair-slots of type k running a job of class a packed with one of class b
  (a <= b, equal GPU counts, both able to run together: measured rate > 0).
Per job of class c: sum_k y + (pair time of c) / m_c <= 1; per type: sum m z y + sum z p <= N;
tau per job of class c: sum_k T y + sum (pair rate of c) (pair time of c) / m_c.
Maximise min_c coef_c tau_c.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix

from quanta.policies.gavel.allocations import _solve, classes, sane_coefficients, second_stage


@dataclass(frozen=True)
class PackedAllocation:
    cls: np.ndarray            # class of each job
    counts: np.ndarray         # jobs per class
    single: np.ndarray         # (n, K) time fraction alone per job
    pair_time: dict[tuple[int, int, int], float]   # (class, partner class, type) -> per-job fraction
    level: float


def packed_max_min(T: np.ndarray, z: np.ndarray, N: np.ndarray, coef: np.ndarray,
                   kind: np.ndarray, pair_rate) -> PackedAllocation:
    """`kind`: an integer job-type id per job; pair_rate(a_job, b_job, k) -> steps/s of job a
    packed with job b on type k (0 = they cannot run together)."""
    n, K = T.shape
    if n == 0 or not (T > 0).any() or not (np.asarray(N) > 0).any():
        return PackedAllocation(np.zeros(n, dtype=np.int64), np.zeros(0, dtype=np.int64),
                                np.zeros((n, K)), {}, 0.0)
    coef, scale = sane_coefficients(coef, T)
    first, inv, mult = classes(T, z, coef, kind)
    C = len(first)
    Tc, zc, cc = T[first], z[first], coef[first]
    # variables: singles (c, k) allowed, then pairs (a, b, k)
    s_c, s_k = np.nonzero(Tc > 0)
    pairs: list[tuple[int, int, int, float, float]] = []
    for a in range(C):
        for b in range(a, C):
            if zc[a] != zc[b] or (a == b and mult[a] < 2):
                continue
            for k in range(K):
                if Tc[a, k] <= 0 or Tc[b, k] <= 0:
                    continue
                ra, rb = pair_rate(first[a], first[b], k), pair_rate(first[b], first[a], k)
                if ra > 0 and rb > 0:
                    pairs.append((a, b, k, ra, rb))
    ns, npairs = len(s_c), len(pairs)
    nv = ns + npairs + 1
    pa = np.array([p[0] for p in pairs], dtype=np.int64)
    pb = np.array([p[1] for p in pairs], dtype=np.int64)
    pk = np.array([p[2] for p in pairs], dtype=np.int64)
    ra = np.array([p[3] for p in pairs])
    rb = np.array([p[4] for p in pairs])
    pcol = ns + np.arange(npairs)
    # per-job time rows (C): singles 1; pairs 1/m for each side (2/m when a == b)
    rows = [s_c, pa, pb]
    cols = [np.arange(ns), pcol, pcol]
    vals = [np.ones(ns), 1.0 / mult[pa], 1.0 / mult[pb]]
    time_rows = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                           shape=(C, nv))
    # capacity rows (K)
    cap_rows = coo_matrix((np.concatenate([mult[s_c] * zc[s_c], zc[pa].astype(float)]),
                           (np.concatenate([s_k, pk]), np.concatenate([np.arange(ns), pcol]))),
                          shape=(K, nv))
    # fairness rows (C): t - coef_c tau_c <= 0
    f_rows = np.concatenate([s_c, pa, pb, np.arange(C)])
    f_cols = np.concatenate([np.arange(ns), pcol, pcol, np.full(C, nv - 1)])
    f_vals = np.concatenate([-cc[s_c] * Tc[s_c, s_k], -cc[pa] * ra / mult[pa], -cc[pb] * rb / mult[pb],
                             np.ones(C)])
    fair = coo_matrix((f_vals, (f_rows, f_cols)), shape=(C, nv))
    from scipy.sparse import vstack
    A = vstack([time_rows, cap_rows, fair]).tocsr()
    b = np.concatenate([np.ones(C), N.astype(float), np.zeros(C)])
    c = np.zeros(nv)
    c[-1] = -1.0
    bounds = np.column_stack([np.zeros(nv), np.full(nv, np.inf)])
    bounds[:ns, 1] = 1.0
    res = _solve(c, A, b, bounds)
    if res.status != 0:
        raise RuntimeError(f"packed max-min LP failed: {res.message}")
    tau_rows = -fair.tocsr()[:, :nv - 1]          # coef_c tau_c per class over x
    x = second_stage(A, b, bounds, tau_rows, mult, res.x)
    single_c = np.zeros((C, K))
    single_c[s_c, s_k] = np.clip(x[:ns], 0, 1)
    pair_time: dict[tuple[int, int, int], float] = {}
    for i, (a, b, k, _ra, _rb) in enumerate(pairs):
        mass = float(x[ns + i])
        if mass <= 1e-9:
            continue
        pair_time[(a, b, k)] = pair_time.get((a, b, k), 0.0) + mass / mult[a]
        if a != b:
            pair_time[(b, a, k)] = pair_time.get((b, a, k), 0.0) + mass / mult[b]
        else:
            pair_time[(a, a, k)] = pair_time.get((a, a, k), 0.0) + mass / mult[a]
    return PackedAllocation(inv, mult, single_c[inv], pair_time, float(x[-1]) * scale)
