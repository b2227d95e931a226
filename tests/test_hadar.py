"""Hadar: prices rise as a resource fills; a job whose best payoff is negative waits; a job goes to
the GPU type where its payoff is best."""

import numpy as np
import pytest

from quanta.core.jobtable import DONE
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.policies import make_policy
from quanta.policies.hadar import exponential_price
from quanta.sim import Simulator

from conftest import ToyPerf, random_jobs
from test_policies_baselines import snapshot

R = 360.0


def two_types(a="v100", b="k80", gpus=4):
    return Cluster((NodeSpec("n0", a, gpus), NodeSpec("n1", b, gpus)))


def test_price_function_rises_exponentially_from_idle_to_the_top_utility():
    g = np.arange(5.0)
    p = exponential_price(g, np.full(5, 4.0), low=2.0, high=50.0, eta=1.0)
    assert p[0] == pytest.approx(0.5) and p[-1] == pytest.approx(50.0)
    assert np.all(np.diff(p) > 0)
    assert np.allclose(p[1:] / p[:-1], p[1] / p[0])           # constant ratio: exponential


def test_prices_rise_as_a_node_fills_and_later_jobs_pay_more():
    perf = ToyPerf(speed={("x", "k80"): 0.2}, exponent={"x": 1.0})
    specs = [JobSpec(f"j{i}", float(i), 1, "x", total_steps=3600.0) for i in range(3)]
    snap, _ = snapshot(specs, two_types(), perf, now=10.0)
    done, delayed, prices = make_policy("hadar").plan(snap)
    assert [s.job for s in done] == [0, 1, 2] and not delayed
    assert all(s.gtype == 0 and s.start == 0 for s in done)     # all on the fast V100 node, now
    table = prices.table()
    assert table[0, 0] > table[1, 0] == pytest.approx(prices.idle)  # filled node dearer than idle
    costs = [s.cost for s in done]
    assert costs[0] < costs[1] < costs[2]                       # each job sees the earlier ones


def test_job_with_negative_payoff_is_delayed():
    """A 4-GPU job whose only room is the slow type: payoff there < 0, so it waits."""
    perf = ToyPerf(speed={("x", "k80"): 0.05}, exponent={"x": 1.0})
    specs = [JobSpec("long", 0.0, 4, "x", total_steps=4 * 1e6),
             JobSpec("short", 1.0, 4, "x", total_steps=4 * 10 * R)]
    snap, _ = snapshot(specs, two_types(), perf, now=R, running={0: (0, 4)})
    pol = make_policy("hadar")
    done, delayed, _ = pol.plan(snap)
    assert [s.job for s in done] == [0] and delayed == [1]
    dec = pol.decide(snap)
    assert list(dec.gpus) == [4, 0]
    # the same job alone on an empty cluster is admitted on the fast type
    snap2, _ = snapshot(specs[1:], two_types(), perf, now=R)
    dec2 = pol.decide(snap2)
    assert dec2.gpus[0] == 4 and dec2.gpu_type[0] == 0


def test_job_goes_where_its_payoff_is_best():
    # faster on the second type: it goes there
    perf = ToyPerf(speed={("x", "p100"): 2.0}, exponent={"x": 1.0})
    spec = [JobSpec("a", 0.0, 2, "x", total_steps=2 * 20 * R)]
    snap, _ = snapshot(spec, two_types("v100", "p100"), perf)
    assert make_policy("hadar").decide(snap).gpu_type[0] == 1
    # equal speeds, but the first type is nearly full (high price): the idle one wins
    perf = ToyPerf(exponent={"x": 1.0})
    specs = [JobSpec("busy", 0.0, 3, "x", total_steps=3 * 100 * R),
             JobSpec("b", 1.0, 1, "x", total_steps=20 * R)]
    snap, _ = snapshot(specs, two_types("v100", "p100"), perf, now=R, running={0: (0, 3)})
    done, _, _ = make_policy("hadar").plan(snap)
    b = next(s for s in done if s.job == 1)
    assert b.gtype == 1 and b.start == 0
    on_v100 = [s for s in done if s.job == 0][0]
    assert on_v100.gtype == 0                                   # the running job keeps its type


def test_hadar_runs_end_to_end_on_a_heterogeneous_cluster(perf):
    cluster = Cluster(tuple(NodeSpec(f"{t}{i}", t, 4) for t in ("v100", "p100", "k80") for i in range(2)))
    from quanta.workloads.catalog import drawable_types
    types = drawable_types()
    rng = np.random.default_rng(3)
    jobs = [j.with_(job_type=types[int(rng.integers(len(types)))])
            for j in random_jobs(60, seed=3, gap=120.0, max_gpus=4)]
    results = [Simulator(jobs, cluster, make_policy("hadar"), perf).run() for _ in range(2)]
    t = results[0].table
    assert (t.state == DONE).all()
    assert np.array_equal(t.end, results[1].table.end)          # deterministic
    used = t.types_used
    assert (used & 1).any() and (used & 6).any()                # more than the fastest type used


def test_job_that_fits_only_across_two_types_gets_a_mixed_gang_at_the_slowest_workers_rate():
    """4 workers, 2 V100 + 2 P100 in the cluster: no type alone has room, the gang spans both
    and every step waits for the P100 workers."""
    perf = ToyPerf(speed={("x", "p100"): 0.8}, exponent={"x": 1.0})
    spec = [JobSpec("a", 0.0, 4, "x", total_steps=4 * 3600.0)]
    cl = two_types("v100", "p100", gpus=2)
    snap, _ = snapshot(spec, cl, perf)
    dec = make_policy("hadar").decide(snap)
    assert dec.gpus[0] == 4 and dec.mixed[0].tolist() == [2, 2]
    assert make_policy("hadar:mix=false").decide(snap).gpus[0] == 0   # whole-job: never fits
    res = Simulator(spec, cl, make_policy("hadar"), perf).run()
    t = res.table
    assert t.state[0] == DONE and t.types_used[0] == 0b11
    slow = 4 * 0.8                                   # P100 per-GPU rate x 4 workers
    assert t.end[0] - t.first_start[0] == pytest.approx(4 * 3600.0 / slow)
    assert t.preemptions[0] == 0 and t.migrations[0] == 0   # kept round after round


def test_mixed_gang_only_when_the_fast_type_lacks_room():
    perf = ToyPerf(speed={("x", "p100"): 0.5}, exponent={"x": 1.0})
    spec = [JobSpec("a", 0.0, 2, "x", total_steps=2 * 3600.0)]
    snap, _ = snapshot(spec, two_types("v100", "p100", gpus=2), perf)
    dec = make_policy("hadar").decide(snap)
    assert dec.gpus[0] == 2 and dec.gpu_type[0] == 0 and not dec.mixed
