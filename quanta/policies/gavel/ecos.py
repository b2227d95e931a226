"""Gavel's programmes solved the way Gavel's simulator solves them: by ECOS (`solution="ecos"`),
on the cone programme that cvxpy builds from Gavel's code and hands to ECOS.

Why: many allocations reach the optimal level, and the one an interior-point solver stops at is
not the analytic centre that `central.py` computes; finish-time fairness is sensitive to which
one (bench/anchors/gavel.md). ECOS is deterministic: given the same programme data it returns the
same point. So each programme here is written out directly in ECOS's form (minimise c'v subject
to h - Gv in the cone: nonnegative rows first, then second-order cones), row for row and column
for column as cvxpy 1.9.3 writes Gavel's expressions (the version the recorded reference runs
used, quanta/data/reference/PROVENANCE.md): the same variable order (the objective's epigraph
variable, then X column by column, then one epigraph variable per job for inv_pos), the same
constraint order (epigraph rows, then Gavel's base constraints, then the cones), the same
coefficients computed with the same floating-point operations, and no stored zeros.
tests/test_gavel_ecos.py checks the data against cvxpy's (`get_problem_data`) and the answers
against cvxpy's solve, bit for bit. cvxpy is not needed at run time, only the `ecos` package.

The programmes (stanford-futuredata/gavel @ c4fa400, scheduler/policies/):
- max-min fairness, max_min_fairness.py:42-81 (agnostic: T = 1, lines 17-32);
- finish-time fairness, finish_time_fairness.py:53-120 (isolated share as a fallback when ECOS
  returns nothing, lines 117-119);
- maximum total throughput, max_sum_throughput.py:39-66;
each with the base constraints of policy.py:56-63. Rows = jobs in arrival order, columns = GPU
types sorted by name, as Gavel's Policy.flatten orders them (policy.py:26-43).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# ECOS exit flags after which cvxpy hands back a solution (cvxpy's ecos_conif.py STATUS_MAP and
# settings.SOLUTION_PRESENT: optimal, optimal but inaccurate, iteration limit); after the others
# x.value is None (infeasible, unbounded) or cvxpy raises SolverError (numerical failures)
_SOLUTION_PRESENT = (0, 10, -1)


@dataclass
class _Cone:
    """An ECOS programme being written: columns `nvar`, rows appended in order."""
    nvar: int
    n_rows: int = 0
    rows: list = field(default_factory=list)
    cols: list = field(default_factory=list)
    vals: list = field(default_factory=list)
    h: list = field(default_factory=list)

    def add(self, r: np.ndarray, c: np.ndarray, v: np.ndarray, h: np.ndarray) -> None:
        """Rows len(h) of G (entries (r, c, v), r counted from this block's first row)."""
        self.rows.append(np.asarray(r, dtype=np.int64) + self.n_rows)
        self.cols.append(np.asarray(c, dtype=np.int64))
        self.vals.append(np.asarray(v, dtype=float))
        self.h.append(np.asarray(h, dtype=float))
        self.n_rows += len(self.h[-1])

    def base(self, x0: int, z: np.ndarray, N: np.ndarray) -> None:
        """Gavel's base constraints on X (variables x0 + i + j m, column-major as cvxpy flattens):
        X >= 0, sum_i z_i X[i, j] <= N_j, sum_j X[i, j] <= 1."""
        m, n = len(z), len(N)
        idx = x0 + np.arange(m * n)
        self.add(np.arange(m * n), idx, -np.ones(m * n), np.zeros(m * n))
        col = np.repeat(np.arange(n), m)
        self.add(col, idx, np.tile(z.astype(float), n), N)
        self.add(np.tile(np.arange(m), n), idx, np.ones(m * n), np.ones(m))

    def solve(self, c: np.ndarray, l_rows: int, soc: list[int]):
        """ECOS's primal solution, or None where cvxpy would hand back none. G goes to ECOS's C
        entry point in compressed columns, rows ascending in each column, without stored zeros
        (what cvxpy hands it); `ecos.solve` would only unpack a scipy matrix into these arrays,
        and importing it imports scipy.sparse, a tenth of a second of a short run."""
        import _ecos                               # the ecos package's extension module
        r, cc, v = (np.concatenate(a) for a in (self.rows, self.cols, self.vals))
        keep = v != 0.0
        r, cc, v = r[keep], cc[keep], v[keep]
        order = np.lexsort((r, cc))
        indptr = np.zeros(self.nvar + 1, dtype=np.int64)
        np.cumsum(np.bincount(cc, minlength=self.nvar), out=indptr[1:])
        sol = _ecos.csolve((self.n_rows, self.nvar, 0), np.asarray(c, dtype=float), v[order],
                           r[order], indptr, np.concatenate(self.h),
                           {"l": l_rows, "q": soc, "e": 0}, verbose=False)
        return sol["x"] if sol["info"]["exitFlag"] in _SOLUTION_PRESENT else None


def _order(types) -> np.ndarray:
    """Gavel's column order: worker types sorted by name."""
    return np.array(sorted(range(len(types)), key=lambda k: types[k]), dtype=np.int64)


def _allocation(v: np.ndarray | None, x0: int, m: int, n: int, cols: np.ndarray) -> np.ndarray | None:
    """X from ECOS's solution vector, clipped to [0, 1] as Gavel does, in the cluster's order."""
    if v is None:
        return None
    X = np.empty((m, n))
    X[:, cols] = v[x0:x0 + m * n].reshape((m, n), order="F").clip(min=0.0).clip(max=1.0)
    return X


def ecos_max_min(T: np.ndarray, z: np.ndarray, N: np.ndarray, weight: np.ndarray,
                 tau_prop: np.ndarray, types) -> np.ndarray:
    """maximise min_j sum_k T[j,k] (1 / w_j)(1 / tau_prop_j) z_j X[j,k] (Gavel's expression).
    As ECOS gets it: minimise t over (t, X) with t >= -sum_k coef[j,k] X[j,k] per job."""
    cols = _order(types)
    Tc, Nc = T[:, cols].astype(float), np.asarray(N, dtype=float)[cols]
    m, n = Tc.shape
    pw = (1.0 / weight).reshape((m, 1)) * (1.0 / tau_prop.reshape((m, 1)))
    sf = np.repeat(z.reshape(-1, 1).astype(float), n, axis=1)
    coef = np.multiply(Tc * pw, sf)
    prog = _Cone(1 + m * n)
    jobs = np.tile(np.arange(m), n)
    prog.add(np.concatenate([np.arange(m), jobs]), np.concatenate([np.zeros(m), 1 + np.arange(m * n)]),
             np.concatenate([-np.ones(m), -coef.ravel(order="F")]), np.zeros(m))
    prog.base(1, z, Nc)
    c = np.zeros(prog.nvar)
    c[0] = 1.0
    X = _allocation(prog.solve(c, prog.n_rows, []), 1, m, n, cols)
    if X is None:
        raise RuntimeError("ECOS found no max-min allocation")
    return X


def ecos_min_max_ratio(T: np.ndarray, z: np.ndarray, N: np.ndarray, remaining: np.ndarray,
                       iso_time: np.ndarray, age: np.ndarray, types) -> np.ndarray | None:
    """minimise max_j (age_j + remaining_j inv_pos(tau_j)) / iso_time_j; None if ECOS fails
    (Gavel then uses the isolated share).

    As ECOS gets it: one variable s_j >= 1 / tau_j per job, written as the cone
    ||(tau_j - s_j, 2)|| <= tau_j + s_j; with several jobs, minimise t over (t, X, s) with
    t >= age_j / iso_j + (remaining_j / iso_j) s_j (each quotient a product with 1 / iso_j, as
    cvxpy forms it); with one job, minimise (remaining / iso) s over (s, X)."""
    cols = _order(types)
    Tc, Nc = T[:, cols].astype(float), np.asarray(N, dtype=float)[cols]
    m, n = Tc.shape
    inv = 1.0 / iso_time
    one = m == 1
    x0, s0 = 1, (0 if one else 1 + m * n)      # X after t (or after s, with one job)
    prog = _Cone(1 + m * n + (0 if one else m))
    c = np.zeros(prog.nvar)
    if one:
        c[s0] = remaining[0] * inv[0]
    else:
        prog.add(np.concatenate([np.arange(m), np.arange(m)]),
                 np.concatenate([np.zeros(m), s0 + np.arange(m)]),
                 np.concatenate([-np.ones(m), remaining * inv]), -(age * inv))
        c[0] = 1.0
    prog.base(x0, z, Nc)
    l_rows = prog.n_rows
    # per job i, rows 3i..3i+2 of h - Gv: (tau_i + s_i, tau_i - s_i, 2)
    i = np.arange(m)
    xij = (x0 + i[:, None] + m * np.arange(n)[None, :]).ravel()      # X[i, j], job-major
    tij = -Tc.ravel()
    top, mid = np.repeat(3 * i, n), np.repeat(3 * i + 1, n)
    prog.add(np.concatenate([3 * i, 3 * i + 1, top, mid]),
             np.concatenate([s0 + i, s0 + i, xij, xij]),
             np.concatenate([-np.ones(m), np.ones(m), tij, tij]), np.tile([0.0, 0.0, 2.0], m))
    return _allocation(prog.solve(c, l_rows, [3] * m), x0, m, n, cols)


def ecos_max_sum(T: np.ndarray, z: np.ndarray, N: np.ndarray, value: np.ndarray, types) -> np.ndarray:
    """maximise sum value[j,k] X[j,k]: minimise -value . X over X."""
    cols = _order(types)
    Vc, Nc = value[:, cols].astype(float), np.asarray(N, dtype=float)[cols]
    m, n = Vc.shape
    prog = _Cone(m * n)
    prog.base(0, z, Nc)
    X = _allocation(prog.solve(-Vc.ravel(order="F"), prog.n_rows, []), 0, m, n, cols)
    if X is None:
        raise RuntimeError("ECOS found no max-throughput allocation")
    return X
