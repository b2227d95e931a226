"""Pollux on hand-built snapshots: GPUs go where they add goodput, the fairness knob p trades
efficiency for fairness, every job is admitted first, and the 2x growth rule holds; then each
setting of the Pollux that Sia's simulator runs (--world sia-sim) on a case of its own, and the
genetic algorithm's parts."""

from dataclasses import replace

import numpy as np
import pytest
from conftest import ToyPerf, record_calls
from test_policies_baselines import snapshot
from test_sia import snap_of

from quanta.errors import QuantaError
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.perf.catalog_model import CatalogModel
from quanta.perf.pollux_online import MERGED, pollux_step_time
from quanta.policies import make_policy
from quanta.policies.pollux import _carried
from quanta.policies.pollux_ga import (
    Problem,
    VirtualNodes,
    crowding,
    keep_one_type,
    ranks_of,
)
from quanta.worlds import get_world


def PowerPerf(exponent, speed=None):
    """steps/s = speed x GPUs ** exponent[job type]: how well each job scales."""
    return ToyPerf(speed=speed, exponent=exponent)


def jobs(*types):
    return [JobSpec(f"j{i}", 0.0, 1, t, total_steps=1e6) for i, t in enumerate(types)]


def test_gpus_go_to_the_job_that_scales_and_p_sets_how_far():
    c = Cluster((NodeSpec("n", "v100", 8),))
    perf = PowerPerf({"scales": 0.95, "flat": 0.2})
    state = {"seen": {0: 4, 1: 4}}                            # both may grow to 8
    fair = make_policy("pollux").decide(snap_of(jobs("scales", "flat"), c, perf, state=dict(state)))
    eff = make_policy("pollux:p=1").decide(snap_of(jobs("scales", "flat"), c, perf,
                                                   state={"seen": {0: 4, 1: 4}}))
    assert fair.gpus[0] > fair.gpus[1] >= 1
    assert eff.gpus[0] >= fair.gpus[0] and eff.gpus.sum() <= 8


def test_every_job_is_admitted_before_any_grows():
    c = Cluster((NodeSpec("n", "v100", 4),))
    perf = PowerPerf({"x": 0.9})
    dec = make_policy("pollux").decide(snap_of(jobs("x", "x", "x", "x"), c, perf))
    assert list(dec.gpus) == [1, 1, 1, 1]


def test_growth_is_capped_at_twice_what_the_job_ran_with():
    c = Cluster((NodeSpec("n", "v100", 8),))
    perf = PowerPerf({"x": 1.0})
    # never ran: nothing profiled, Pollux's cap max(2 x 0, 1) = 1 GPU
    assert make_policy("pollux").decide(snap_of(jobs("x"), c, perf)).gpus[0] == 1
    snap = snap_of(jobs("x"), c, perf, running={0: (0, 2)})
    assert make_policy("pollux").decide(snap).gpus[0] == 4


def test_unaware_by_default_aware_on_request():
    c = Cluster((NodeSpec("a", "a100", 1), NodeSpec("t", "t4", 2)))
    perf = PowerPerf({"gains": 1.0, "flat": 1.0},
                     {("gains", "a100"): 4.0, ("gains", "t4"): 1.0, ("flat", "a100"): 1.1, ("flat", "t4"): 1.0})
    snap = snap_of(jobs("flat", "gains"), c, perf)
    aware = make_policy("pollux:aware=true").decide(snap)
    assert [c.types[t] for t in aware.gpu_type] == ["t4", "a100"]
    unaware = make_policy("pollux").decide(snap_of(jobs("flat", "gains"), c, perf))
    assert (unaware.gpus >= 1).all()                          # admitted, types not told apart


# -- the reference's semantics (Sia's simulator's Pollux baseline; --world sia-sim turns them on) --

def test_growth_counts_only_gpu_counts_the_job_trained_on():
    """A count still restoring its checkpoint was never profiled: no 2x growth from it."""
    c = Cluster((NodeSpec("n", "v100", 8),))
    perf = PowerPerf({"x": 1.0})
    snap, t = snapshot(jobs("x"), c, perf, now=30.0, running={0: (0, 2)})
    t.t0[0] = t.resume_at[0] = 60.0                  # restoring until t = 60
    assert make_policy("pollux").decide(snap).gpus[0] == 1      # cap max(2 x 0, 1)
    snap, t = snapshot(jobs("x"), c, perf, now=90.0, running={0: (0, 2)})
    t.t0[0] = t.resume_at[0] = 60.0                  # trained on 2 since t = 60
    assert make_policy("pollux").decide(snap).gpus[0] == 4


def test_fair_share_weighs_each_job_by_its_goodput_at_its_fair_share():
    """Pollux's speedup is relative to the job's fair share (4 of 8 GPUs here), not to 1 GPU:
    the job that scales linearly gains weight against the one that scales as sqrt."""
    c = Cluster((NodeSpec("n", "v100", 8),))
    perf = PowerPerf({"lin": 1.0, "sqrt": 0.5})
    one = make_policy("pollux").decide(snap_of(jobs("lin", "sqrt"), c, perf,
                                               state={"seen": {0: 4, 1: 4}}))
    fair = make_policy("pollux:fair_share=true").decide(
        snap_of(jobs("lin", "sqrt"), c, perf, state={"seen": {0: 4, 1: 4}}))
    assert list(one.gpus) == [4, 4]       # min 1/x + 1/sqrt(y)
    assert list(fair.gpus) == [5, 3]      # min 32/x + 16/sqrt(y): s = g / g(4 GPUs) / 8


def test_type_cap_holds_a_job_to_the_smallest_gpu_type():
    c = Cluster((NodeSpec("a", "a100", 4),) + tuple(NodeSpec(f"t{i}", "t4", 4) for i in range(4)))
    perf = PowerPerf({"x": 1.0})
    state = {"seen": {0: 8}}                                  # ran on 8: may grow to 16
    assert make_policy("pollux").decide(snap_of(jobs("x"), c, perf, state=dict(state))).gpus[0] == 16
    assert make_policy("pollux:type_cap=true").decide(
        snap_of(jobs("x"), c, perf, state={"seen": {0: 8}})).gpus[0] == 4


def test_first_start_counted_takes_the_first_start_off_the_restart_count():
    """A job 40 s old whose first start the world counted as a restart: Pollux's penalty is
    40 / 70 (no restart yet), not 10 / 70, so growing from 2 to 4 GPUs pays off."""
    c = Cluster((NodeSpec("n", "v100", 8),))
    perf = PowerPerf({"x": 1.0})

    def decide(spec):
        snap, t = snapshot(jobs("x"), c, perf, now=40.0, running={0: (0, 2)})
        t.restarts[0] = 1
        return make_policy(spec).decide(snap).gpus[0]
    assert decide("pollux") == 2
    assert decide("pollux:first_start_counted=true") == 4


def test_learn_knows_a_job_only_from_what_it_measured_one_model_for_every_type():
    c = Cluster((NodeSpec("a", "a100", 8),) + tuple(NodeSpec(f"t{i}", "t4", 4) for i in range(2)))
    perf = CatalogModel()
    spec = [JobSpec("c", 0.0, 1, "cifar10", total_steps=1e6)]
    pol = make_policy("pollux:learn=true,fair_share=true")
    snap, _ = snapshot(spec, c, perf, now=100.0)
    dec = pol.decide(snap)
    assert dec.gpus[0] == 1 and not dec.state.get("fits")        # never trained: nothing known
    snap, _ = snapshot(spec, c, perf, now=100.0, running={0: (0, 2)})   # trained on 2 A100s
    dec = pol.decide(snap)
    assert list(dec.state["fits"]) == [(0, MERGED)]              # one fit, for every type
    ((key, point),) = dec.state["points"][(0, MERGED)].items()
    assert key[:2] == (1, 2) and point[0] > point[1] > 0         # (nodes, GPUs, batch): step, sync
    assert 1 <= dec.gpus[0] <= 4                                  # 2x what it trained on


def test_learned_model_is_optimistic_about_what_the_job_never_ran():
    """With one 1-GPU point the fit knows no network cost: on 2 GPUs of one node it expects the
    same step time as on 1, while the profiled truth has a synchronisation cost."""
    c = Cluster((NodeSpec("n", "t4", 4),))
    perf = CatalogModel()
    spec = [JobSpec("c", 0.0, 1, "cifar10", total_steps=1e6)]
    snap, _ = snapshot(spec, c, perf, now=100.0, running={0: (0, 1)})
    st = make_policy("pollux:learn=true").decide(snap).state
    (m,) = [k[2] for k in st["points"][(0, MERGED)]]
    fit = st["fits"][(0, MERGED)]
    one, two = (float(pollux_step_time(fit, 1, k, m)) for k in (1, 2))
    assert two == pytest.approx(one, rel=1e-6)
    assert perf.observe(spec[0], "t4", 2, 1).sync_time > 0          # the truth synchronises


# -- the genetic algorithm ----------------------------------------------------------------------

def test_ranks_are_pareto_fronts():
    rng = np.random.default_rng(3)
    F = rng.integers(0, 5, size=(60, 2)).astype(float)        # many ties and duplicates
    rank = ranks_of(F)

    def dom(a, b):
        return np.all(F[a] <= F[b]) and np.any(F[a] < F[b])
    for b in range(len(F)):
        assert not any(dom(a, b) for a in range(len(F)) if rank[a] >= rank[b])
        if rank[b] > 0:
            assert any(dom(a, b) for a in range(len(F)) if rank[a] == rank[b] - 1)
    cd = crowding(F, rank)
    assert np.all(cd >= 0)
    for r in set(rank.tolist()):                               # a front's extremes: infinite
        f = np.flatnonzero(rank == r)
        if len(f) > 2 and np.ptp(F[f, 0]) > 0:
            assert np.isinf(cd[f[np.argmin(F[f, 0])]])


def test_repair_keeps_nodes_caps_and_one_distributed_job_per_node():
    rng = np.random.default_rng(0)
    J, N = 5, 6
    res = np.array([4, 4, 4, 4, 0, 4])
    cap = np.array([1, 2, 8, 8, 3])
    prob = Problem(np.ones((J, 17, 9)), np.zeros((J, N), dtype=np.int64), cap, res,
                   np.ones(J), -1.0, 0.25)
    X = prob.repair(rng, rng.integers(0, 5, size=(200, J, N)))
    assert np.all(X.sum(axis=1) <= res) and np.all(X.sum(axis=2) <= cap)
    dist = (np.count_nonzero(X, axis=2) > 1)[:, :, None] & (X > 0)
    assert np.all(dist.sum(axis=1) <= 1)


def test_a_job_split_over_types_keeps_its_majority_type():
    types = ("t4", "rtx", "a100")
    vtype = np.array([0, 0, 1, 2, 2])
    assert list(keep_one_type(np.array([1, 1, 3, 0, 0]), vtype, types)) == [0, 0, 3, 0, 0]
    assert list(keep_one_type(np.array([2, 0, 0, 1, 1]), vtype, types)) == [0, 0, 0, 1, 1]  # tie: A100


def test_virtual_nodes_are_the_smallest_node():
    c = Cluster((NodeSpec("t", "t4", 4), NodeSpec("r", "rtx", 8)))
    vn = VirtualNodes(c, np.ones(2, dtype=bool))
    assert vn.size == 4 and list(vn.node) == [0, 1, 1] and list(vn.first) == [0, 4, 8]


def test_ga_gives_each_job_gpus_of_one_type_within_its_cap_and_repeats_for_a_seed():
    c = Cluster((NodeSpec("a", "a100", 8),) + tuple(NodeSpec(f"t{i}", "t4", 4) for i in range(2)))
    perf = PowerPerf({"x": 0.9, "y": 0.5})
    spec = "pollux:search=ga,fair_share=true,population=30,generations=15,seed=7"

    def decide():
        snap, _ = snapshot(jobs("x", "y", "x"), c, perf, now=600.0, running={0: (0, 2)})
        return make_policy(spec).decide(snap)
    dec = decide()
    assert dec.gpus[0] <= 4 and dec.gpus[1] <= 1 and dec.gpus[2] <= 1    # 2x 2, never ran: 1
    used = np.concatenate([g for g in dec.exact.values()])
    assert len(used) == len(set(used.tolist())) == dec.gpus.sum()
    for i, g in dec.exact.items():
        assert len(g) == dec.gpus[i] and set(c.gpu_type_idx[g].tolist()) == {dec.gpu_type[i]}
    again = decide()
    assert list(again.gpus) == list(dec.gpus) and all(
        np.array_equal(again.exact[i], dec.exact[i]) for i in dec.exact)


def test_the_previous_front_seeds_each_job_by_job_or_by_position_as_the_reference():
    """Job 5 and job 7 swapped places (attained service), job 9 left, job 11 came: by job, each
    starts from its own row; the reference pairs the common jobs by position, so 7 starts from
    5's row and 5 from 7's (pollux_unaware.py:65-85)."""
    before, now = np.array([5, 7, 9]), np.array([7, 5, 11])
    src, dst = _carried(before, now, "job")
    assert dict(zip(dst.tolist(), src.tolist())) == {0: 1, 1: 0}
    src, dst = _carried(before, now, "position")
    assert dict(zip(dst.tolist(), src.tolist())) == {0: 0, 1: 1}
    for carry in ("job", "position"):          # the order kept: the two pairings agree
        src, dst = _carried(before, np.array([5, 7, 11]), carry)
        assert dict(zip(dst.tolist(), src.tolist())) == {0: 0, 1: 1}
        assert len(_carried(before, np.array([1, 2]), carry)[0]) == 0
    with pytest.raises(QuantaError, match="carry must be job or position"):
        make_policy("pollux:search=ga,carry=row")
    assert "carry=position" in get_world("sia-sim").policy_params(0)["pollux"]


def test_kept_candidates_follow_the_jobs_spec_and_cap(monkeypatch):
    """With a model that declares its rates pure, Pollux keeps each job's candidates between
    rounds (`RateMemo`, as Sia does) only while the job's spec object and GPU cap are the same,
    and a whole round's while nothing they come of changed;
    a model without the declaration is asked every round. Unaware, every type is rated as the
    cluster's main one."""
    from test_sia import LinearPerf

    from quanta.perf.online import OnlineModel
    c = Cluster(tuple(NodeSpec(f"n{i}", "v100", 8) for i in range(2))
                + (NodeSpec("k", "k80", 4),))
    perf = LinearPerf({("x", "v100"): 1.0, ("x", "k80"): 0.25, ("y", "v100"): 5.0})
    perf.pure_rates = True
    pol = make_policy("pollux")
    specs = jobs("x")

    def cands(specs, model, cap, allowed=None, capacity=None):
        snap = snap_of(specs, c, model, state={"seen": {}})
        if allowed is not None:
            snap.jobs.__dict__["allowed"] = np.array([allowed])
        if capacity is not None:
            snap = replace(snap, capacity=np.array(capacity))
        return pol._candidates(snap, {}, 0, np.array([cap]))

    first = cands(specs, perf, 2)
    assert list(zip(first.gtype.tolist(), first.count.tolist())) == [(0, 1), (0, 2), (1, 1),
                                                                     (1, 2)]
    assert first.rate.tolist() == pytest.approx([1.0, 2 ** 0.9] * 2)    # k80 seen as v100
    perf.speed[("x", "v100")] = 3.0              # pure by declaration: the kept rates stand
    assert cands(specs, perf, 2).rate[0] == pytest.approx(1.0)
    assert cands(specs, perf, 8).count.tolist() == list(range(1, 9)) + [1, 2, 3, 4]
    assert cands(specs, perf, 8).rate[0] == pytest.approx(3.0)          # a new cap: rated now
    assert cands(jobs("y"), perf, 2).rate[0] == pytest.approx(5.0)      # same row, new spec
    # a round like the last (same specs, allowed types, cap, capacity) takes the last round's
    # candidates as they are (`RateMemo.unchanged`: no loop over the jobs, whose end is
    # kept_candidates); each of those one step away, made again
    import quanta.policies.pollux as pollux_module
    made = record_calls(monkeypatch, pollux_module, "kept_candidates")
    assert cands(specs, perf, 2) is cands(specs, perf, 2) and len(made) == 1
    assert cands(specs, perf, 2, allowed=[True, False]).gtype.tolist() == [0, 0]
    cands(specs, perf, 2)
    assert cands(specs, perf, 2, capacity=[16, 1]).count.tolist() == [1, 2, 1]
    cands(specs, perf, 2)
    assert cands(specs, perf, 1).count.tolist() == [1, 1]
    assert cands(jobs("x"), perf, 1) is not cands(jobs("x"), perf, 1)   # other spec objects
    online = OnlineModel(perf)
    assert cands(specs, online, 2).rate[0] == pytest.approx(3.0)
    online.observe(specs[0], "v100", 1, 1, 2.0)                         # measured: 2 steps/s
    assert cands(specs, online, 2).rate[0] == pytest.approx(2.0)


@pytest.mark.parametrize("v100s,k80s,jobs", [(4, 4, 3), (4, 2, 2), (8, 8, 6)])
def test_unaware_pollux_never_chooses_a_count_the_job_cannot_run_at(v100s, k80s, jobs):
    """Unaware Pollux values every type as its main one (V100 here), but a ResNet-50 (batch 128)
    cannot run on 2 K80s (Gavel's table: rate 0, it does not fit): that choice stopped the run
    with a PolicyError (first seen on synthetic:3:300 over gavel-108). It is no candidate now;
    the jobs finish, none on 2 K80s."""
    from quanta.sim import Simulator
    c = Cluster((NodeSpec("v", "v100", v100s), NodeSpec("k", "k80", k80s)))
    specs = [JobSpec(f"r{i}", 0.0, 1, "ResNet-50 (batch size 128)", total_steps=20000.0)
             for i in range(jobs)]
    res = Simulator(specs, c, make_policy("pollux"), CatalogModel(), record_events=True).run()
    assert (res.table.state == 3).all()
    assert not [e for e in res.event_log if e[3] == 1 and e[4] > 1]    # k80 is type 1


def test_pollux_search_keeps_jobs_off_the_types_they_may_not_use():
    """Pollux's genetic search knows no GPU types: it put replicas of a ResNet-50 at batch 128
    (which 2 K80s cannot hold) on K80 nodes, and the mechanism stopped the run ('decision puts a
    job on a GPU type it may not use'). Its repair drops replicas there now; the jobs run on the
    V100s."""
    from quanta.model.presets import resolve_cluster
    from quanta.sim import Simulator
    jobs = [JobSpec(f"r{i}", 0.0, 2, "ResNet-50 (batch size 128)", total_steps=2000.0)
            for i in range(3)]
    cluster = resolve_cluster("v100:1x2,k80:2x4")
    res = Simulator(jobs, cluster, make_policy("pollux:search=ga,population=20,generations=10"),
                    CatalogModel(), record_events=True).run()
    assert (res.table.state == 3).all()
    k80 = cluster.types.index("k80")
    assert all(e[3] != k80 for e in res.event_log if e[2] in ("start", "resize", "migrate"))


@pytest.mark.parametrize("policy,cluster", [
    ("pollux:search=ilp", "v100:1x2,k80:1x4"), ("pollux:search=ilp", "k80:1x4"),
    pytest.param("pollux:population=20,generations=10", "v100:1x2,k80:1x4",
                 marks=pytest.mark.slow)])          # (~100 s: the search on three jobs)
def test_learning_pollux_never_chooses_a_count_the_job_cannot_run_at(tmp_path, policy, cluster):
    """The Pollux of Sia's simulator (under sia-sim: it knows a job from what it measured, as if
    on the cluster's main type), with the exact programme or its genetic search, gave a
    ResNet-50 at batch 128 two K80s, where it cannot run: the run stopped with a PolicyError
    (found on synthetic:5:39 over v100:1x8,k80:2x4). Now no job runs where it cannot (the
    programme does not offer it; the search's choice is cut to the most the job runs at there),
    and all finish."""
    from quanta.runner import SimulationRequest, run_simulations
    trace = tmp_path / "r.csv"
    trace.write_text("job_id,submit_time_s,num_gpus,duration_s,job_type\n" + "".join(
        f"r{i},0,1,3600,ResNet-50 (batch size 128)\n" for i in range(3)))
    req = SimulationRequest(trace=str(trace), cluster=cluster, policies=[policy],
                            out=None, world="sia-sim", plots=False, events=True)
    rows, _header, (res,) = run_simulations(req, keep_results=True)
    assert rows[0]["finished"] == 3
    k80 = res.cluster.types.index("k80")
    held = [(e[3], e[4]) for e in res.event_log if e[2] in ("start", "resize", "migrate")]
    assert held and all(n == 1 for t, n in held if t == k80)
