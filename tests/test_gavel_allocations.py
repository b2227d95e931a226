"""Gavel's allocation programmes (quanta/policies/gavel/allocations.py, central.py, the HiGHS
calls of quanta/highs.py): against brute force on tiny cases, and their solution paths."""

import itertools

import numpy as np
import pytest

from quanta.policies.gavel import allocations as A

from conftest import record_calls

T2 = np.array([[4.0, 1.0],     # job 0 gains 4x on type 0
               [1.2, 1.0]])    # job 1 barely cares
Z2 = np.array([1, 1])
N2 = np.array([1, 1])


def grid_allocations(step=0.05):
    """Every X on a grid satisfying the constraints for 2 jobs x 2 types, 1 GPU each."""
    v = np.arange(0, 1 + 1e-9, step)
    g = np.array(list(itertools.product(v, repeat=4))).reshape(-1, 2, 2)
    ok = (g.sum(axis=2) <= 1 + 1e-9).all(axis=1) & (g.sum(axis=1) <= N2 + 1e-9).all(axis=1)
    return g[ok]


def test_max_min_matches_brute_force():
    coef = np.array([0.7, 1.3])
    X, lev = A.max_min(T2, Z2, N2, coef)
    grid = grid_allocations()
    tau = (grid * T2).sum(axis=2)
    best = (tau * coef).min(axis=1).max()
    assert lev == pytest.approx((coef * (X * T2).sum(1)).min(), rel=1e-5)   # stage 2 keeps the level
    assert best <= lev + 1e-6 and lev <= best * 1.05      # LP >= every grid point, grid close
    assert (X.sum(1) <= 1 + 1e-6).all() and ((Z2[:, None] * X).sum(0) <= N2 + 1e-6).all()


def test_makespan_matches_brute_force():
    s = np.array([1000.0, 300.0])
    X, lev = A.max_min(T2, Z2, N2, 1 / s)
    grid = grid_allocations()
    makespans = (s / np.maximum((grid * T2).sum(axis=2), 1e-12)).max(axis=1)
    assert 1 / lev <= makespans.min() + 1e-6 and makespans.min() <= (1 / lev) * 1.05


def test_ftf_matches_brute_force():
    num, den, base = np.array([1000.0, 600.0]), np.array([400.0, 700.0]), np.array([50.0, 10.0])
    X, rho = A.min_max_ratio(T2, Z2, N2, num, den, base, rel_tol=1e-4)
    grid = grid_allocations(0.02)
    tau = np.maximum((grid * T2).sum(axis=2), 1e-12)
    best = ((base + num / tau) / den).max(axis=1).min()
    got = ((base + num / np.maximum((X * T2).sum(1), 1e-12)) / den).max()
    assert got <= best + 1e-6 and rho == pytest.approx(got, rel=1e-3)


def test_heterogeneity_aware_trades_types_when_both_jobs_gain():
    T = np.array([[4.0, 1.0],      # job 0 is 4x faster on type 0
                  [1.0, 2.0]])     # job 1 is 2x faster on type 1
    Xeq = A.equal_share(T, Z2, N2)
    aware, lev = A.max_min(T, Z2, N2, 1 / (Xeq * T).sum(1))
    # the level is set by job 1 holding all of type 1: tau = 2 against 1.5 with an equal share
    assert lev == pytest.approx(2.0 / 1.5, rel=1e-6) and aware[1, 1] == pytest.approx(1.0, abs=1e-6)
    assert aware[0, 0] >= 0.8                # both better off than with an equal time share
    wf = A.water_filling(T, Z2, N2, 1 / (Xeq * T).sum(1))
    assert wf[0, 0] == pytest.approx(1.0, abs=1e-6)   # water-filling then gives job 0 the rest
    # agnostic: every type looks the same, so the swapped allocation is just as good to it
    Ta = (T > 0).astype(float)
    _, lev_a = A.max_min(Ta, Z2, N2, 1 / (A.equal_share(Ta, Z2, N2) * Ta).sum(1))
    swapped = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert (swapped * Ta).sum(1).min() == pytest.approx(lev_a * (A.equal_share(Ta, Z2, N2) * Ta).sum(1)[0])


def test_water_filling_gives_spare_capacity_to_the_unsaturated():
    # one type, 4 GPUs; queue a has 1 job, queue b has 3: weights 1 and 1/3 each
    T = np.ones((4, 1))
    z = np.ones(4, dtype=np.int64)
    N = np.array([4])
    w = np.array([1.0, 1 / 3, 1 / 3, 1 / 3])
    coef = 1 / w
    X = A.water_filling(T, z, N, coef)
    np.testing.assert_allclose(X[:, 0], 1.0, atol=1e-6)   # nobody is capped by anybody: all run
    N = np.array([2])
    X = A.water_filling(T, z, N, coef)
    assert X[0, 0] == pytest.approx(1.0, abs=1e-6)          # entity a: one GPU of two
    np.testing.assert_allclose(X[1:, 0], 1 / 3, atol=1e-6)  # entity b's GPU split three ways


def test_class_aggregation_is_exact():
    rng = np.random.default_rng(3)
    base_T = rng.uniform(0.5, 3, (5, 3))
    T = base_T[rng.integers(5, size=60)]
    z = np.ones(60, dtype=np.int64)
    N = np.array([10, 10, 10])
    coef = 1 / T.max(1)
    X, lev = A.max_min(T, z, N, coef)
    X1, lev1 = A._max_min_rows(T, z, N, coef, np.full(60, np.nan), np.ones(60))
    assert lev == pytest.approx(lev1, rel=1e-6)


def test_throughput_with_slo_and_fallback():
    T = np.array([[1.0, 0.5], [1.0, 0.5]])
    value = T / T.max(1, keepdims=True)
    X = A.max_sum(T, Z2, N2, value, min_tau=np.array([0.9, np.nan]))
    assert (X * T).sum(1)[0] >= 0.9 - 1e-6
    assert A.max_sum(T, Z2, N2, value, min_tau=np.array([5.0, np.nan])) is None   # infeasible SLO


def test_second_stage_keeps_the_level_and_adds_throughput():
    # three jobs, one type of 2 GPUs: max-min level is set by capacity; the second stage must not
    # lower it, and must use all capacity (a vertex of stage 1 alone may leave a GPU idle)
    T = np.array([[1.0], [1.0], [3.0]])
    z = np.array([1, 1, 1])
    N = np.array([2])
    coef = np.array([1.0, 1.0, 1.0 / 3.0])
    X, lev = A.max_min(T, z, N, coef)
    assert (coef * (X * T).sum(1)).min() == pytest.approx(lev, rel=1e-5)
    assert (z[:, None] * X).sum() == pytest.approx(2.0, abs=1e-6)


def test_proportional_and_isolated_shares_are_gavels():
    N = np.array([36, 36, 36])
    np.testing.assert_allclose(A.proportional_share(N, 54), N / 108)      # capped at 100% of time
    np.testing.assert_allclose(A.proportional_share(N, 216), N / 216)
    iso = A.isolated_share(np.array([1, 4]), N)       # N_k / (n z), each row on its own
    np.testing.assert_allclose(iso[0], 1 / 3)                      # 18 each: row capped at 1
    np.testing.assert_allclose(iso[1], 36 / 2 / 4 / 13.5)          # 4.5 each, row 13.5 -> 1


def test_central_solution_sits_inside_the_optimal_set():
    # one type, 3 GPUs, 2 jobs: any split with both jobs at 1 GPU is optimal (level 1); the
    # central one leaves every entry strictly inside, a vertex is what HiGHS returns
    from quanta.policies.gavel.central import central_max_min
    T = np.array([[1.0, 1.0], [1.0, 1.0]])
    X, lev = central_max_min(T, np.array([1, 1]), np.array([3, 3]), np.array([1.0, 1.0]))
    assert lev == pytest.approx(1.0, rel=1e-3)
    np.testing.assert_allclose(X, 0.5, atol=1e-3)     # symmetric centre of the optimal face


def test_csc_sorts_rows_and_sums_repeated_entries():
    from quanta.highs import csc
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, 7, 60), rng.integers(0, 5, 60)
    vals = rng.normal(size=60)
    start, index, value = csc(rows, cols, vals, (7, 5))
    dense = np.zeros((7, 5))
    np.add.at(dense, (rows, cols), vals)
    back = np.zeros((7, 5))
    for c in range(5):
        seg = slice(start[c], start[c + 1])
        assert (np.diff(index[seg]) > 0).all()           # ascending, no repeats
        back[index[seg], c] = value[seg]
    np.testing.assert_allclose(back, dense, atol=1e-12)


def test_highspys_highs_gives_the_same_allocations_as_scipys(monkeypatch):
    # the HiGHS scipy bundles (the default) and highspy's (QUANTA_HIGHS=highspy): the same
    # programmes, the same answers here (unique optima)
    highspy_core = pytest.importorskip("highspy._core")
    from quanta import highs as lp
    rng = np.random.default_rng(5)
    T = rng.uniform(0.5, 3, (40, 3)) * (rng.random((40, 3)) > 0.2)
    z = rng.integers(1, 3, 40)
    N = np.array([12, 8, 10])
    coef = 1 / np.maximum(T.max(1), 1e-9)

    def solve_all():
        return (A.max_min(T, z, N, coef)[0], A.max_sum(T, z, N, T),
                A.water_filling(T, z, N, coef),
                A.min_max_ratio(T, z, N, rng_num, rng_den, rng_base)[0])
    rng_num, rng_den = rng.uniform(1e3, 1e4, 40), rng.uniform(1e3, 1e4, 40)
    rng_base = rng.uniform(0, 500, 40)
    first = solve_all()
    A._MEMO.clear()                   # (else the answers come from memory)
    monkeypatch.setattr(lp, "_CORE", highspy_core)
    monkeypatch.setattr(lp, "_LP", None)
    monkeypatch.setattr(lp, "_NAMED", {})
    for a, b in zip(first, solve_all()):
        np.testing.assert_allclose(a, b, atol=1e-7)


def test_level_search_programme_gives_max_mins_level():
    # finish-time fairness' search solves max-min with rows divided by their coefficients, kept
    # between calls: the same level as the max-min programme solved afresh
    rng = np.random.default_rng(7)
    T = rng.uniform(0.5, 3, (30, 3)) * (rng.random((30, 3)) > 0.3)
    z = rng.integers(1, 3, 30)
    N = np.array([6, 6, 6])
    search = A._LevelLP(T, z, N)
    for _ in range(5):
        coef = rng.uniform(0.1, 2.0, 30)
        c, scale = A.sane_coefficients(coef, T)
        assert search.level(c) * scale == pytest.approx(A.max_min(T, z, N, coef, refine=False)[1],
                                                        rel=1e-7)


def test_refine_with_the_level_known_is_its_second_stage_alone(monkeypatch):
    # max_min's refinement fixes the level just below the first stage's optimum, then takes the
    # most throughput: given that level (`known`), it solves the second stage alone, the same
    # programme afresh, so the same allocation, one solve instead of two; given a level no
    # allocation reaches, it falls back to both stages. Finish-time fairness' search passes the
    # level its own programme found at the rho it settles on.
    from quanta import highs as lp
    solves = record_calls(monkeypatch, lp.LP, "solve")
    rng = np.random.default_rng(9)
    for n in (12, 40):
        T = rng.uniform(0.5, 3, (n, 3)) * (rng.random((n, 3)) > 0.25)
        z = rng.integers(1, 3, n)
        N = np.array([6, 5, 7])
        coef = rng.uniform(0.2, 2.0, n)
        A._MEMO.clear()
        solves.clear()
        X, lev = A.max_min(T, z, N, coef)
        assert len(solves) == 2
        A._MEMO.clear()
        solves.clear()
        Xk, levk = A.max_min(T, z, N, coef, known=lev)
        assert len(solves) == 1 and levk == lev
        np.testing.assert_array_equal(Xk, X)
        A._MEMO.clear()
        solves.clear()
        Xh, _ = A.max_min(T, z, N, coef, known=lev * 1.5)    # beyond the optimum: infeasible
        assert len(solves) == 3
        np.testing.assert_array_equal(Xh, X)
    # min_max_ratio: the refinement gets the level LP's optimum at the rho returned
    seen = {}
    _rows = A._max_min_rows

    def rows(*a, **k):
        seen["known"] = k.get("known")
        return _rows(*a, **k)

    levels = []
    _level = A._LevelLP.level

    def level(self, c):
        levels.append((c, _level(self, c)))
        return levels[-1][1]

    monkeypatch.setattr(A, "_max_min_rows", rows)
    monkeypatch.setattr(A._LevelLP, "level", level)
    num, den, base = rng.uniform(1e3, 1e4, n), rng.uniform(1e3, 1e4, n), rng.uniform(0, 500, n)
    A._MEMO.clear()
    X, rho = A.min_max_ratio(T, z, N, num, den, base)
    c, _scale = A.sane_coefficients((rho * den - base) / num, T)
    assert seen["known"] == [v for cc, v in levels if np.array_equal(cc, c)][-1]


def test_central_solution_over_classes_follows_the_per_job_path():
    # interchangeable jobs are one row with a multiplicity: the same central point as per job
    from quanta.policies.gavel import central as C
    rng = np.random.default_rng(3)
    T = rng.uniform(0.5, 3, (5, 3))[rng.integers(5, size=30)]
    z, N = np.ones(30, dtype=np.int64), np.array([10, 10, 10])
    coef = 1 / T.max(1)
    X, lev = C.central_max_min(T, z, N, coef)
    x0 = min(0.5 / 3, 0.5 * float(np.min(N / 30)))
    X1, lev1 = C._solve(T, z, N, lambda tau, t: C._terms_max_min(tau, t, coef), -1.0,
                        0.5 * float(np.min(coef * T.sum(1) * x0)), 1e-8)
    assert lev == pytest.approx(lev1, rel=1e-4)
    np.testing.assert_allclose(X, X1, atol=1e-4)


def test_programmes_that_come_up_again_are_answered_from_memory():
    # the same class-level programme (here: more jobs of the same kinds, in another order) is
    # solved once; the answer is the solver's, so nothing changes but the time
    A._MEMO.clear()
    T = np.array([[2.0, 1.0], [1.0, 1.0]])
    z, N, coef = np.array([1, 1]), np.array([1, 1]), np.array([0.5, 1.0])
    X1, lev1 = A.max_min(T, z, N, coef)
    assert len(A._MEMO) == 1
    X2, lev2 = A.max_min(T[::-1], z, N, coef[::-1])
    assert len(A._MEMO) == 1 and lev2 == lev1
    np.testing.assert_array_equal(X2, X1[::-1])
    for i in range(A.MEMO_SIZE + 5):          # bounded
        A.max_min(T, z, N, coef * (1 + i / 1000))
    assert len(A._MEMO) == A.MEMO_SIZE


def test_a_warm_level_solve_with_no_answer_is_solved_afresh(monkeypatch):
    """HiGHS may end a warm start with no answer ("Unknown"): finish-time fairness on ~2,000 jobs
    did and the run stopped with `max-min LP failed: Unknown`. The level programme is then solved
    afresh, with the same answer as a run whose warm starts all succeed."""
    from quanta import highs
    rng = np.random.default_rng(3)
    T = rng.uniform(0.5, 3.0, size=(12, 3))
    z = rng.choice([1, 2], size=12)
    N = np.array([4, 4, 4])
    num, den = rng.uniform(1e3, 1e4, size=12), rng.uniform(1e3, 1e4, size=12)
    base = rng.uniform(0, 100, size=12)
    X0, rho0 = A.min_max_ratio(T, z, N, num, den, base)
    real, failed = highs.LP.resolve, []

    def flaky(lp, *a, **k):
        if not a and not k:                  # the level programme's warm re-solve
            failed.append(1)
            return highs.Result(4, "Unknown", None, None)
        return real(lp, *a, **k)
    monkeypatch.setattr(highs.LP, "resolve", flaky)
    X1, rho1 = A.min_max_ratio(T, z, N, num, den, base)
    assert failed and rho1 == pytest.approx(rho0, rel=1e-9) and np.allclose(X1, X0, atol=1e-9)


def test_a_job_with_almost_no_steps_left_does_not_unbound_the_level():
    """Finish-time fairness with a lone job all but done at the runtime's fallback 0.02 steps/s:
    its coefficient (5e10) put 2e-11 in the level programme, which HiGHS reads as 0, and the
    level was unbounded (`max-min LP failed: Unbounded`, found by the slow runtime test)."""
    for num in (1e-9, 1e-12):
        X, rho = A.min_max_ratio(np.array([[0.02]]), np.array([1]), np.array([2]),
                                 np.array([num]), np.array([100.0]), np.array([5.0]))
        assert X[0, 0] == pytest.approx(1.0) and rho == pytest.approx(0.05, rel=1e-2)
