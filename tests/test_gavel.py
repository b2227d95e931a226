"""Gavel: allocations against brute force on tiny cases, and the round-based mechanism."""

import itertools

import numpy as np
import pytest

from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.policies import make_policy
from quanta.policies.gavel import allocations as A
from quanta.policies.gavel.rounds import round_assignment
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost

from conftest import homogeneous

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


def test_round_priority_alternates_jobs_sharing_one_gpu():
    X = np.array([[0.5], [0.5]])
    T = np.ones((2, 1))
    z = np.array([1, 1])
    N = np.array([1])
    g0, _ = round_assignment(X, T, z, N, np.zeros((2, 1)), np.zeros(2))
    first = int(np.argmax(g0))
    received = np.zeros((2, 1))
    received[first] = 360.0
    g1, _ = round_assignment(X, T, z, N, received, np.array([360.0, 360.0]))
    assert g1[1 - first] == 1 and g1[first] == 0


def test_gavel_policies_run_end_to_end_and_respect_capacity(perf):
    c = Cluster((NodeSpec("v", "v100", 4), NodeSpec("p", "p100", 4), NodeSpec("k", "k80", 4)))
    rng = np.random.default_rng(0)
    from quanta.workloads.catalog import drawable_types
    types = drawable_types()
    jobs = [JobSpec(f"g{i}", float(i * 200), int(rng.choice([1, 1, 2, 4])),
                    types[int(rng.integers(len(types)))], total_steps=float(rng.integers(2000, 20000)),
                    queue=f"q{i % 3}", deadline=float(i * 200 + 40_000) if i % 4 == 0 else 0.0)
            for i in range(40)]
    for name in ("gavel-las", "gavel-las-agnostic", "gavel-ftf", "gavel-makespan", "gavel-throughput",
                 "gavel-cost", "gavel-fifo", "gavel-hierarchical"):
        res = Simulator(jobs, c, make_policy(name), perf, restart=RestartCost(10.0)).run()
        assert (res.table.state == 3).all(), name
        assert (res.busy <= c.capacity).all(), name
        assert res.decisions > 0


def test_rounds_happen_every_interval(perf):
    jobs = [JobSpec("a", 0.0, 1, "", total_steps=2000.0), JobSpec("b", 0.0, 1, "", total_steps=2000.0)]
    res = Simulator(jobs, homogeneous(1, 1), make_policy("gavel-las"), perf,
                    restart=RestartCost(0.0)).run()
    t = res.table
    # the first round starts at 360 s; the two jobs then alternate on the GPU round by round:
    # the first finishes inside its 6th round (3960 + 200 s) and its GPU idles until the next
    # round, where the second needs 200 s more
    assert t.preemptions.sum() >= 8
    assert sorted(t.end) == pytest.approx([4160.0, 4520.0], abs=1e-6)


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


def test_packed_allocation_beats_unpacked_when_pairs_help(perf):
    from quanta.policies.gavel.space_sharing import packed_max_min
    kinds = ["ResNet-50 (batch size 16)", "ResNet-18 (batch size 16)"]    # measured: no slowdown
    T = np.array([[perf.table.alone[(k, 1, "v100")]] for k in kinds] * 2)
    z = np.ones(4, dtype=np.int64)
    N = np.array([2])
    coef = 1 / T[:, 0]
    specs = [JobSpec(f"p{i}", 0, 1, kinds[i % 2]) for i in range(4)]
    P = packed_max_min(T, z, N, coef, np.array([0, 1, 0, 1]),
                       lambda a, b, k: perf.shared_rate(specs[a], specs[b], "v100", 1, mode="pack"))
    _, lev = A.max_min(T, z, N, coef)
    assert lev == pytest.approx(0.5, rel=1e-6)       # 4 jobs, 2 GPUs: half the time each
    assert P.level == pytest.approx(1.0, rel=1e-5)   # packed in pairs: all at full speed
    assert sum(P.pair_time.values()) > 0


def test_packed_policy_pairs_jobs_on_shared_gpus(perf):
    kinds = ["ResNet-50 (batch size 16)", "ResNet-18 (batch size 16)"]
    jobs = [JobSpec(f"p{i}", 0.0, 1, kinds[i % 2],
                    total_steps=perf.table.alone[(kinds[i % 2], 1, "v100")] * 3600) for i in range(4)]
    res = Simulator(jobs, homogeneous(1, 2), make_policy("gavel-las-packed"), perf,
                    restart=RestartCost(0.0)).run()
    assert res.shared.max() == 2 and (res.table.state == 3).all()
    # packed without slowdown, all four finish one hour after the first round (360 s)
    assert max(res.table.end) == pytest.approx(360.0 + 3600.0, rel=1e-3)
