"""Hadar: prices rise as a resource fills; a job whose best payoff is negative waits; a job goes to
the GPU type where its payoff is best."""

import numpy as np
import pytest
from conftest import ToyPerf, random_jobs
from test_policies_baselines import snapshot

from quanta.core.jobtable import DONE
from quanta.core.mechanism import apply, shadow
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.policies import make_policy
from quanta.policies.hadar import Hadar, best_schedule, exponential_price
from quanta.sim import Simulator

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
    on_v100 = next(s for s in done if s.job == 0)
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


# --- issue: idle GPUs under load, unstable price bounds, crash on zero work, churn, speed ---------

def one_node(gpus=4, gpu="v100"):
    return Cluster((NodeSpec("n0", gpu, gpus),))


def test_idle_gpus_now_are_not_held_back_for_a_far_future_reservation():
    """B (4 GPUs, first in line) can start only when A ends in 3 rounds; C (2 GPUs) fits the 2
    GPUs idle now. Reserving B's whole future run blocked C, so 2 GPUs stayed idle; reservations
    only for the next rounds let C start now. The paper's whole-run schedule stays reachable."""
    perf = ToyPerf(exponent={"x": 1.0})
    specs = [JobSpec("A", 0.0, 2, "x", total_steps=2 * 3 * R),
             JobSpec("B", 1.0, 4, "x", total_steps=4 * 100 * R),
             JobSpec("C", 2.0, 2, "x", total_steps=2 * 100 * R)]
    snap, _ = snapshot(specs, one_node(), perf, now=10.0, running={0: (0, 2)})
    dec = make_policy("hadar").decide(snap)
    assert list(dec.gpus) == [2, 0, 2]
    full = make_policy("hadar:horizon=full,starts=8").decide(snap)
    assert list(full.gpus) == [2, 0, 0]                       # B's reservation blocks C


def loaded(n=40, seed=5, gpus=(1, 1, 2, 4), gap=600.0):
    rng = np.random.default_rng(seed)
    t, out = 0.0, []
    for i in range(n):
        t += float(rng.exponential(gap))
        g = int(rng.choice(gpus))
        out.append(JobSpec(f"j{i}", t, g, "x", total_steps=g * float(rng.uniform(1, 8)) * 3600))
    return out


def test_a_loaded_homogeneous_cluster_stays_busy_while_jobs_wait():
    from quanta.report.metrics import summary
    perf = ToyPerf(exponent={"x": 1.0})
    jobs = loaded()
    cl = Cluster(tuple(NodeSpec(f"n{i}", "v100", 4) for i in range(2)))
    util = {p: summary(Simulator(jobs, cl, make_policy(p), perf).run())["gpu_util"]
            for p in ("hadar", "fifo")}
    assert util["hadar"] >= util["fifo"] - 0.05


def test_price_bounds_do_not_move_with_a_nearly_finished_job():
    """U and L come from the jobs' weights, not their remaining work: a job with one step left
    (or none) changes no price and no other job's schedule."""
    perf = ToyPerf(speed={("x", "k80"): 0.3}, exponent={"x": 1.0})
    base = [JobSpec(f"j{i}", float(i), 1 + i % 2, "x", total_steps=3600.0 * (i + 1)) for i in range(4)]
    extra = base + [JobSpec("nearly", 10.0, 1, "x", total_steps=1000.0)]
    pol = make_policy("hadar")
    snap1, _ = snapshot(base, two_types(), perf, now=R)
    snap2, t2 = snapshot(extra, two_types(), perf, now=R)
    t2.prog0[4] = 999.0                                         # one step left
    done1, _, p1 = pol.plan(snap1)
    done2, _, p2 = pol.plan(snap2)
    assert (p1.low, p1.high, p1.idle) == (p2.low, p2.high, p2.idle)
    assert [(s.job, s.gtype, s.start) for s in done1] == \
        [(s.job, s.gtype, s.start) for s in done2 if s.job < 4]


def test_jobs_with_no_work_left_do_not_crash_it():
    perf = ToyPerf(exponent={"x": 1.0})
    specs = [JobSpec("run", 0.0, 2, "x", total_steps=100.0),
             JobSpec("wait", 1.0, 1, "x", total_steps=100.0),
             JobSpec("other", 2.0, 1, "x", total_steps=3600.0)]
    for name in ("hadar", "hadare", "hadar:bounds=round", "hadar:replan=all"):
        snap, t = snapshot(specs, two_types(), perf, now=R, running={0: (0, 2)})
        t.prog0[:2] = 100.0                                      # done, not yet reaped
        dec = make_policy(name).decide(snap)
        apply(snap, dec, shadow(snap))                           # the mechanism accepts it
        assert dec.gpus[0] == 2 and dec.gpus[2] >= 1


def test_a_running_job_keeps_its_gpus_when_prices_turn_against_it():
    """Job 0 runs on a K80, 20x slower than a V100: its payoff there is negative, but an admitted
    schedule is honoured (no preemption); `replan=all` re-plans every job from empty prices,
    running ones first, and moves them."""
    perf = ToyPerf(speed={("x", "k80"): 0.05}, exponent={"x": 1.0})
    specs = [JobSpec("slow", 0.0, 1, "x", total_steps=0.05 * 50 * R),
             JobSpec("busy", 1.0, 4, "x", total_steps=4 * 50 * R)]
    snap, _ = snapshot(specs, two_types(), perf, now=R, running={0: (1, 1), 1: (0, 4)})
    dec = make_policy("hadar").decide(snap)
    assert list(dec.gpus) == [1, 4] and list(dec.gpu_type) == [1, 0]
    assert apply(snap, dec, shadow(snap)) == []                 # nothing moves
    assert apply(snap, make_policy("hadar:replan=all").decide(snap), shadow(snap)) != []


def test_a_running_job_moves_to_freed_faster_gpus_when_that_pays_for_the_restart():
    perf = ToyPerf(speed={("x", "k80"): 0.25}, exponent={"x": 1.0})
    long = [JobSpec("slow", 0.0, 2, "x", total_steps=2 * 0.25 * 40 * R)]
    snap, _ = snapshot(long, two_types(), perf, now=R, running={0: (1, 2)})
    dec = make_policy("hadar").decide(snap)
    assert dec.gpus[0] == 2 and dec.gpu_type[0] == 0            # V100s are free: it moves
    short = [JobSpec("slow", 0.0, 2, "x", total_steps=2 * 0.25 * 20.0)]   # 20 s left
    snap, _ = snapshot(short, two_types(), perf, now=R, running={0: (1, 2)})
    dec = make_policy("hadar").decide(snap)
    assert dec.gpus[0] == 2 and dec.gpu_type[0] == 1            # a 30 s restart does not pay


def test_only_changed_jobs_are_replanned_so_nothing_is_preempted(perf):
    cluster = Cluster(tuple(NodeSpec(f"{t}{i}", t, 4) for t in ("v100", "p100", "k80") for i in range(2)))
    from quanta.workloads.catalog import drawable_types
    types = drawable_types()
    rng = np.random.default_rng(3)
    jobs = [j.with_(job_type=types[int(rng.integers(len(types)))], total_steps=j.total_steps * 20)
            for j in random_jobs(60, seed=3, gap=300.0, max_gpus=4)]
    kept = Simulator(jobs, cluster, make_policy("hadar"), perf).run()
    assert (kept.table.state == DONE).all() and kept.table.preemptions.sum() == 0
    every = Simulator(jobs, cluster, make_policy("hadar:replan=all"), perf).run()
    assert (every.table.state == DONE).all() and every.table.preemptions.sum() > 0


class Counting:
    """A schedule search that counts its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return best_schedule(*args, **kwargs)


def test_searches_only_jobs_that_can_start():
    """A full cluster with a long queue: no search at all; one GPU free: one search, not one
    per waiting job."""
    perf = ToyPerf(exponent={"x": 1.0})
    queue = [JobSpec(f"w{i}", float(i + 2), 1, "x", total_steps=3600.0) for i in range(300)]
    specs = [JobSpec("a", 0.0, 2, "x", total_steps=1e6), JobSpec("b", 1.0, 2, "x", total_steps=1e6)]
    for running, free, searches in (({0: (0, 2), 1: (0, 2)}, 0, 0), ({0: (0, 2), 1: (0, 1)}, 1, 1)):
        snap, _ = snapshot(specs + queue, one_node(), perf, now=R, running=running)
        count = Counting()
        dec = Hadar(schedule=count).decide(snap)
        assert count.calls == searches
        assert int(dec.gpus[2:].sum()) == free and dec.gpus[2] == free   # the first in line


def test_pruning_is_exact():
    """Skipping the searches that provably find nothing, and the GPU types whose payoff bound
    cannot beat the best schedule found, changes no decision (a large cluster with room: the
    bound is what prunes there)."""
    from test_policy_properties import random_snapshot
    for seed in range(8):
        snap = random_snapshot(seed, 120, 12, 3, 0.1, 1, False) if seed < 6 else \
            random_snapshot(seed, 400, 300, 3, 0.0, 0, False)
        for spec in ("hadar", "hadar:mix=false"):
            a = make_policy(spec).decide(snap)
            b = make_policy(spec + (",prune=false" if ":" in spec else ":prune=false")).decide(snap)
            assert np.array_equal(a.gpus, b.gpus) and np.array_equal(a.gpu_type, b.gpu_type)
            assert a.mixed.keys() == b.mixed.keys()


def test_search_with_the_callers_room_is_the_search_without():
    """The free GPUs per type and start round that the round keeps as it commits (passed to
    the search as `room`) are those the search counts from the plan itself: each search of a
    round gives the same schedule either way, and a schedule's `at` names the nodes of its
    `nodes` (the commit and the per-type counts read it)."""
    from test_policy_properties import random_snapshot
    checked = spread = 0

    def both(*args, **kwargs):
        nonlocal checked, spread
        s = best_schedule(*args, **kwargs)
        if kwargs.get("room") is not None:
            t = best_schedule(*args, **{**kwargs, "room": None})
            assert (s is None) == (t is None)
            if s is not None:
                assert s[:4] == t[:4] and s.utility == t.utility and s.cost == t.cost
                assert np.array_equal(s.nodes, t.nodes)
                checked += 1
        if s is not None and not s.kept:
            assert np.array_equal(s.at, np.flatnonzero(s.nodes))
            spread += len(s.at) > 1
        return s

    for seed in range(6):
        snap = random_snapshot(seed, 120, 60, 3, 0.1, 1, False) if seed < 4 else \
            random_snapshot(seed, 400, 300, 3, 0.0, 0, False)
        for spec in ({}, {"mix": False}, {"horizon": "4", "starts": 3}):
            Hadar(schedule=both, **spec).decide(snap)
    assert checked > 100 and spread > 5       # searched with the kept room; gangs over nodes
