"""quanta.highs: scipy's HiGHS bindings loaded without scipy.optimize, in a real process; a
programme solved from a given (possibly inconsistent) basis lands on the same optimum."""

import subprocess
import sys

import numpy as np
import pytest

from quanta import highs


def test_bindings_load_without_scipy_optimize_which_still_imports_after():
    # scipy.optimize's __init__ (~0.35 s) is not imported to solve a programme; a later import
    # of it (milp, a user's linprog) finds the same module and works
    code = """
import sys
import numpy as np
from quanta import highs
A = highs.csc(np.array([0, 0]), np.array([0, 1]), np.array([1.0, 1.0]), (1, 2))
r = highs.LP().solve(np.array([-1.0, -2.0]), A, np.array([1.0]), np.zeros(2), np.ones(2))
print(r.status, r.x.round(6).tolist(), "scipy.optimize" in sys.modules)
from scipy.optimize import linprog
import scipy.optimize._highspy._core as c
print(c is highs.core(), linprog([1, 1], A_ub=[[-1, -1]], b_ub=[-1]).fun)
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:2] == ["0 [0.0, 1.0] False", "True 1.0"]


def _programme(rng, n: int, K: int = 3):
    cj = np.repeat(np.arange(n), 2 * K)
    ct = np.tile(np.repeat(np.arange(K), 2), n)
    cn = np.tile([1, 2], n * K)
    A = highs.csc(np.concatenate([cj, n + ct]), np.tile(np.arange(len(cj)), 2),
                  np.concatenate([np.ones(len(cj)), cn.astype(float)]), (n + K, len(cj)))
    rows = np.concatenate([np.ones(n), rng.integers(3, 8, K).astype(float)])
    return -rng.uniform(0.1, 2.0, len(cj)) * cn ** 0.7, A, rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_given_basis_reaches_the_fresh_optimum(seed):
    # the last basis, a basis with too many basic variables, one with too few, all slack: HiGHS
    # repairs what needs repairing (alien), and every start gives the fresh solve's optimum
    rng = np.random.default_rng(seed)
    cost, A, rows = _programme(rng, 9)
    m, r = len(cost), len(rows)
    lp = highs.LP()
    fresh = lp.solve(cost, A, rows, np.zeros(m), np.ones(m))
    last = lp.basis()
    assert fresh.status == 0 and len(last[0]) == m and len(last[1]) == r
    assert (last[0] == 1).sum() + (last[1] == 1).sum() == r       # basic: one per row
    starts = [last,
              (np.ones(m, dtype=np.int8), np.ones(r, dtype=np.int8)),   # everything basic
              (np.zeros(m, dtype=np.int8), np.zeros(r, dtype=np.int8)),  # nothing basic
              (np.zeros(m, dtype=np.int8), np.ones(r, dtype=np.int8))]   # the slacks
    for basis in starts:
        got = highs.LP().solve(cost * 1.0, A, rows, np.zeros(m), np.ones(m), basis=basis)
        assert got.status == 0
        assert float(cost @ got.x) == pytest.approx(float(cost @ fresh.x), abs=1e-9)


def _highs_basis(lp):
    b = lp.h.getBasis()      # HiGHS' own statuses (a list of status objects)
    return ([int(s) for s in b.col_status], [int(s) for s in b.row_status])


@pytest.mark.parametrize("seed", range(6))
def test_basis_is_highs_own(seed):
    # LP.basis reads the basic variables and the solution after a simplex solve: the statuses
    # HiGHS itself reports, on programmes with columns at both bounds, rows bounded on one side
    # and on both (ranged, equal), after resolve changed a column's bounds (fixed at 1, at 0)
    # or the costs; after interior point (whose basic variables crash scipy's bindings); after
    # an infeasible solve
    rng = np.random.default_rng(seed)
    cost, A, rows = _programme(rng, 12)
    m, r = len(cost), len(rows)
    lower = np.where(rng.random(r) < 0.3, rows - rng.integers(0, 2, r), -np.inf)
    lp = highs.LP()
    got = lp.solve(cost, A, rows, np.zeros(m), np.ones(m), row_lower=lower, ipm=seed % 2 == 1)
    assert got.status == 0
    seen = set()
    for step in range(4):
        cols_b, rows_b = lp.basis()
        assert (cols_b.tolist(), rows_b.tolist()) == _highs_basis(lp)
        seen |= set(cols_b.tolist()) | set(rows_b.tolist())
        if step == 0:
            got = lp.resolve(bounds=(int(np.argmax(got.x)), 1.0, 1.0))
        elif step == 1:
            got = lp.resolve(cost=cost * rng.uniform(0.5, 1.5, m))
        else:
            got = lp.resolve(bounds=(int(rng.integers(m)), 0.0, 0.0))
        assert got.status == 0
    assert {0, 1, 2} <= seen
    # infeasible (every column at 0, every row asks for 1 or more), found by the simplex from a
    # given basis (no presolve) and by presolve
    for start in (lp.basis(), None):
        failed = lp.solve(cost, A, rows, np.zeros(m), np.zeros(m), row_lower=np.ones(r),
                          basis=start)
        assert failed.status == 2
        assert tuple(b.tolist() for b in lp.basis()) == _highs_basis(lp)
