"""Gavel's space sharing: max-min fairness over single jobs and co-located pairs of jobs.

Variables are per class of interchangeable jobs (same job type, GPU count, allowed types and
fairness coefficient), so the programme grows with pairs of job kinds, not pairs of jobs:
- y[c, k]: time fraction each job of class c runs alone on type k;
- p[(a, b), k]: pair-slots of type k running a job of class a packed with one of class b
  (a <= b, equal GPU counts, both able to run together: measured rate > 0).
Per job of class c: sum_k y + (pair time of c) / m_c <= 1; per type: sum m z y + sum z p <= N;
tau per job of class c: sum_k T y + sum (pair rate of c) (pair time of c) / m_c.
Maximise min_c coef_c tau_c.

`pair_max_min` is Gavel's own programme instead (policies/max_min_fairness.py:274-358): one
variable per job and per pair of jobs, for `gavel-las-packed:programme=pairs`.
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


@dataclass(frozen=True)
class PairAllocation:
    """Gavel's job-pair allocation: X for each job alone and for each pair of jobs together."""
    single: np.ndarray         # (n, K) time fraction job j runs alone on type k
    pairs: np.ndarray          # (P, 2) job indexes (a < b) of each pair with a variable
    pair: np.ndarray           # (P, K) time fraction the pair runs together on type k
    level: float


def pair_max_min(T: np.ndarray, z: np.ndarray, N: np.ndarray, coef: np.ndarray,
                 rate_a: np.ndarray, rate_b: np.ndarray, pairs: np.ndarray,
                 interior: bool = False) -> PairAllocation:
    """Gavel's `max_min_fairness_packed` programme (stanford-futuredata/gavel @ c4fa400,
    scheduler/policies/max_min_fairness.py:274-358, with PolicyWithPacking.flatten and
    get_base_constraints, policies/policy.py:85-182): one variable per (job or pair of jobs, GPU
    type), not per class of jobs.

    - pairs: every pair of active jobs of equal GPU count (scheduler.py:2197-2212; pairs of
      different counts get scale factor 0 and x = 0, max_min_fairness.py:341-344 and
      policy.py:71-83); `rate_a[p, k]`, `rate_b[p, k]`: the colocated throughputs of the pair's
      first and second job on type k (the oracle's colocated table, scheduler.py:2239-2251). A
      pair or single job with a zero throughput on a type is not given a variable there: it can
      only take GPUs without helping anyone, and Gavel's mechanism never runs it there
      (scheduler.py:821-827).
    - per-job normalisation (max_min_fairness.py:309-316, policy.py:146-148): job i's throughput
      in every combination holding it, times the combination's scale factor, divided by its
      priority weight and by its throughput under the proportional share of the single jobs
      (lines 290-298): `coef[i] = z_i / (w_i tau_prop_i)`, as for max_min_fairness_perf.
    - maximise min_i coef_i (sum_k T[i,k] x[i,k] + sum_{p holds i, k} rate_i(p,k) x[p,k])
      (lines 318-329);
    - x >= 0; per type sum_c z_c x[c,k] <= N_k, a pair counting its GPUs once (policy.py:166-170);
      per job sum of x over every combination holding it and every type <= 1 (policy.py:172-181).
    `interior` False: solved by HiGHS's simplex, then, among the optima, the vertex with the most
    sum_i coef_i tau_i (Quanta's second stage). True: HiGHS's interior-point method stopped
    before its crossover to a vertex, a point inside the optimal set as Gavel's interior-point
    solver ECOS returns one (`--solver ECOS`, max_min_fairness.py:353; most pairs get a little
    time, gavel.md P7). It is not ECOS's point, only one of the same kind; the rounds depend on
    which (gavel.md row 23)."""
    n, K = T.shape
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    P = len(pairs)
    empty = PairAllocation(np.zeros((n, K)), pairs, np.zeros((P, K)), 0.0)
    if n == 0 or not (T > 0).any() or not (np.asarray(N) > 0).any():
        return empty
    coef, scale = sane_coefficients(np.asarray(coef, dtype=float), T)
    z = np.asarray(z, dtype=float)
    s_j, s_k = np.nonzero(T > 0)
    ok = (rate_a > 0) & (rate_b > 0) if P else np.zeros((0, K), dtype=bool)
    p_i, p_k = np.nonzero(ok)
    pa, pb = pairs[p_i, 0], pairs[p_i, 1]
    ns, npv = len(s_j), len(p_i)
    nv = ns + npv + 1
    scol = np.arange(ns)
    pcol = ns + np.arange(npv)
    one_s, one_p = np.ones(ns), np.ones(npv)
    # rows: n per-job time rows, K capacity rows, n fairness rows (t - coef_i tau_i <= 0)
    rows = np.concatenate([s_j, pa, pb,
                           n + s_k, n + p_k,
                           n + K + s_j, n + K + pa, n + K + pb, n + K + np.arange(n)])
    cols = np.concatenate([scol, pcol, pcol, scol, pcol, scol, pcol, pcol, np.full(n, nv - 1)])
    fs = -coef[s_j] * T[s_j, s_k]
    fa = -coef[pa] * rate_a[p_i, p_k]
    fb = -coef[pb] * rate_b[p_i, p_k]
    vals = np.concatenate([one_s, one_p, one_p, z[s_j], z[pa], fs, fa, fb, np.ones(n)])
    A = _lp.csc(rows, cols, vals, (2 * n + K, nv))
    b = np.concatenate([np.ones(n), np.asarray(N, dtype=float), np.zeros(n)])
    c = np.zeros(nv)
    c[-1] = -1.0
    hi = np.full(nv, np.inf)
    hi[:-1] = 1.0
    if interior:
        s = _lp.solver("gavel-pairs-ipm")     # its own solver: the crossover option stays off
        if s.ipm is not True:
            s._options(True)
            s.h.setOptionValue("run_crossover", "off")
        res = s.solve(c, A, b, np.zeros(nv), hi, ipm=True)
        if res.status != 0:
            # without its crossover HiGHS may not certify the point ("Unknown") although its
            # interior-point iterations ended near the optimum: take it if it is feasible
            got = s.h.getSolution()
            sol, act = np.array(got.col_value), np.array(got.row_value)
            ok = sol.size == nv and act.size == len(b) and sol[-1] > 0 and \
                bool(np.all(sol[:-1] >= -1e-6)) and bool(np.all(act <= b + 1e-6))
            if ok:
                res = type(res)(0, "interior (uncertified)", np.clip(sol, 0.0, None), None)
            else:          # the vertex, from a fresh simplex
                interior = False
                s = _lp.solver()
                res = s.solve(c, A, b, np.zeros(nv), hi)
    else:
        s = _lp.solver()
        res = s.solve(c, A, b, np.zeros(nv), hi)
    if res.status != 0:
        raise RuntimeError(f"pair max-min LP failed: {res.message}")
    if interior:
        x = res.x
    else:
        gain = np.zeros(nv - 1)      # sum_i coef_i tau_i per variable
        gain[:ns] = -fs
        np.add.at(gain, pcol, -fa - fb)
        x = second_stage(s, res.x, -gain)
    single = np.zeros((n, K))
    single[s_j, s_k] = np.clip(x[:ns], 0.0, 1.0)
    pair = np.zeros((P, K))
    pair[p_i, p_k] = np.clip(x[ns:nv - 1], 0.0, 1.0)
    return PairAllocation(single, pairs, pair, float(x[-1]) * scale)
