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
from quanta import highs as _lp
from quanta.policies.gavel.allocations import classes, sane_coefficients, second_stage


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
    t_rows = [s_c, pa, pb]
    t_cols = [np.arange(ns), pcol, pcol]
    t_vals = [np.ones(ns), 1.0 / mult[pa], 1.0 / mult[pb]]
    # capacity rows (K), after the C time rows
    c_rows = np.concatenate([s_k, pk]) + C
    c_cols = np.concatenate([np.arange(ns), pcol])
    c_vals = np.concatenate([mult[s_c] * zc[s_c], zc[pa].astype(float)])
    # fairness rows (C), after those: t - coef_c tau_c <= 0
    f_rows = np.concatenate([s_c, pa, pb, np.arange(C)])
    f_cols = np.concatenate([np.arange(ns), pcol, pcol, np.full(C, nv - 1)])
    f_vals = np.concatenate([-cc[s_c] * Tc[s_c, s_k], -cc[pa] * ra / mult[pa], -cc[pb] * rb / mult[pb],
                             np.ones(C)])
    A = _lp.csc(np.concatenate(t_rows + [c_rows, f_rows + C + K]),
                np.concatenate(t_cols + [c_cols, f_cols]),
                np.concatenate(t_vals + [c_vals, f_vals]), (2 * C + K, nv))
    b = np.concatenate([np.ones(C), N.astype(float), np.zeros(C)])
    c = np.zeros(nv)
    c[-1] = -1.0
    hi = np.full(nv, np.inf)
    hi[:ns] = 1.0
    s = _lp.solver()
    res = s.solve(c, A, b, np.zeros(nv), hi)
    if res.status != 0:
        raise RuntimeError(f"packed max-min LP failed: {res.message}")
    # second stage: most sum m_c coef_c tau_c; per variable the sum of its fairness entries
    # (over the x variables), times the class multiplicity
    fx = f_cols < nv - 1
    gain = np.zeros(nv - 1)
    np.add.at(gain, f_cols[fx], -f_vals[fx] * mult[f_rows[fx]])
    x = second_stage(s, res.x, -gain)
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
