"""Execution plans and CPU / host-memory resources through the core: decision -> mechanism ->
occupancy -> simulator rate, restart and bookkeeping."""

import numpy as np
import pytest
from conftest import ToyPerf

from quanta.core.decision import Decision
from quanta.core.jobtable import DONE, PENDING, JobTable
from quanta.core.loop import DecisionLoop
from quanta.core.mechanism import Kind, apply
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.placement import Occupancy
from quanta.policies.base import Policy, PolicyError
from quanta.sim.engine import RestartCost, Simulator


def cpu_cluster(nodes=2, gpus=8, cpus=16, mem=100.0) -> Cluster:
    return Cluster(tuple(NodeSpec(f"n{i}", "a800", gpus, cpus=cpus, mem_gb=mem) for i in range(nodes)))


class PlanToy(ToyPerf):
    """ToyPerf plus plans and CPUs: plan "fast" runs 2x, each CPU thread per GPU above 1 adds 10%."""

    def rate_with(self, job, gpu_type, n, nodes=1, cons=None, plan=None, cpus=0.0, mem_gb=0.0):
        r = self.rate(job, gpu_type, n, nodes, cons)
        if plan == "fast":
            r *= 2.0
        elif plan == "bad":
            return 0.0
        if cpus:
            r *= 1.0 + 0.1 * (cpus / n - 1.0)
        return r


class Scripted(Policy):
    """Returns the decisions a test scripts, one per call (the last one repeats)."""

    def __init__(self, *decisions):
        self.decisions = list(decisions)
        self.calls = 0
        self.seen = []

    def decide(self, snap):
        self.seen.append((snap.now, snap.jobs.plan.copy(), snap.jobs.cpus.copy()))
        make = self.decisions[min(self.calls, len(self.decisions) - 1)]
        self.calls += 1
        return make(snap)


def target(g, plan=None, cpus=None, mem=None, net=None):
    def make(snap):
        n = len(snap.jobs)
        d = Decision(np.full(n, g, dtype=np.int64), np.zeros(n, dtype=np.int64))
        if plan is not None:
            d.plans = {i: plan for i in range(n)}
        if cpus is not None:
            d.cpus = np.full(n, float(cpus))
        if mem is not None:
            d.mem_gb = np.full(n, float(mem))
        if net is not None:
            d.net_gbps = np.full(n, float(net))
        return d
    return make


def snap_of(table, occ, rows, now=0.0):
    from quanta.core.snapshot import Snapshot
    return Snapshot(now, table.cluster, table.perf, table.view(rows, now), occ.up_capacity(),
                    occ.node_free.copy(), occ.node_up.copy(), resources=occ.up_resources(),
                    network=occ.up_network())


def net_cluster(nodes=2, gpus=8, bw=50.0) -> Cluster:
    return Cluster(tuple(NodeSpec(f"n{i}", "a800", gpus, inter_bw_gbps=bw) for i in range(nodes)))


def test_plan_sets_the_rate_and_a_plan_change_is_a_reconfiguration_on_the_same_gpus():
    job = JobSpec("a", 0.0, 4, "x", total_steps=2000.0)
    pol = Scripted(target(4), target(4, plan="fast"))
    pol.interval = 100.0
    sim = Simulator([job], cpu_cluster(), pol, PlanToy(exponent={"x": 1.0}),
                    restart=RestartCost(10.0), record_events=True)
    res = sim.run()
    t = res.table
    # rounds at 0, 100, ...: 100 s at 4 steps/s, then the plan change at 100: 10 s restore,
    # then 8 steps/s for the other 1600
    assert t.state[0] == DONE and t.end[0] == pytest.approx(100 + 10 + 1600 / 8)
    assert t.reconfigs[0] == 1 and t.restarts[0] == 1 and t.migrations[0] == 0
    kinds = [e[2] for e in res.event_log if e[1] == 0]
    assert kinds == ["submit", "start", "reconfigure", "finish"]
    # the snapshot shows the plan the job holds
    assert pol.seen[1][1].tolist() == [None] and pol.seen[2][1].tolist() == ["fast"]


def test_cpu_change_on_held_gpus_reconfigures_and_an_unrunnable_plan_is_a_policy_error():
    job = JobSpec("a", 0.0, 2, "x", total_steps=1e6)
    pol = Scripted(target(2, cpus=2), target(2, cpus=8))
    pol.interval = 50.0
    sim = Simulator([job], cpu_cluster(), pol, PlanToy(exponent={"x": 1.0}), until=170.0)
    res = sim.run()
    assert res.table.cpus[0] == 8 and res.table.reconfigs[0] == 1
    # rate 2 * (1 + 0.1 * 3) = 2.6 after the change
    assert res.table.rate[0] == pytest.approx(2.6)
    with pytest.raises(PolicyError, match="cannot run"):
        Simulator([job], cpu_cluster(), Scripted(target(2, plan="bad")),
                  PlanToy()).run()


@pytest.mark.parametrize("first, then, cpus, mem", [
    (target(2, mem=10), target(2, mem=30), 0, 30),        # memory alone asked, then more
    (target(2, cpus=4), target(2), 0, 0),                 # CPUs held, then nothing asked
])
def test_a_resource_change_on_held_gpus_reconfigures_whatever_else_is_asked(first, then, cpus,
                                                                           mem):
    # a job keeps its GPUs while what it asks for besides changes: memory alone, or CPUs (let
    # go when the next decision asks for none); each is a reconfiguration
    job = JobSpec("a", 0.0, 2, "x", total_steps=1e6)
    pol = Scripted(first, then)
    pol.interval = 50.0
    res = Simulator([job], cpu_cluster(), pol, PlanToy(exponent={"x": 1.0}), until=170.0).run()
    assert res.table.reconfigs[0] == 1 and res.table.migrations[0] == 0
    assert res.table.cpus[0] == cpus and res.table.mem_gb[0] == mem


def test_placement_skips_nodes_without_enough_cpus_or_memory():
    c = cpu_cluster(nodes=3, gpus=8, cpus=16, mem=100.0)
    occ = Occupancy(c)
    occ.assign(100, np.arange(0, 2), cpus=15.0)        # node 0: 6 GPUs free, 1 CPU free
    occ.assign(101, np.arange(8, 10), mem_gb=90.0)     # node 1: 6 GPUs free, 10 GB free
    gpus, nodes = occ.place(0, 2, cpus_per_gpu=2.0, mem_per_gpu=10.0)
    assert nodes == 1 and set(c.gpu_node[gpus].tolist()) == {2}
    four, k = occ.place(0, 4, cpus_per_gpu=5.0)       # 16 CPUs give 3 such GPUs per node
    assert k == 2 and len(four) == 4 and set(c.gpu_node[four].tolist()) == {1, 2}
    assert occ.place(0, 4, cpus_per_gpu=5.0, mem_per_gpu=30.0) is None   # node 2 lacks memory
    # without a resource ask, the fullest node with room is taken as before (node 0 or 1)
    g2, _ = occ.place(0, 6)
    assert set(c.gpu_node[g2].tolist()) <= {0, 1}
    # across nodes: whole nodes' rooms count, with CPUs split by GPUs
    big, k = occ.place(0, 10, cpus_per_gpu=1.0)
    assert k == 2 and len(big) == 10 and 0 not in c.gpu_node[big]
    occ.release(100)
    assert occ.cpu_free[0] == 16 and occ.fits(np.arange(0, 8), 16.0, 0.0)
    with pytest.raises(RuntimeError, match="lack"):
        occ.assign(102, np.arange(8, 10), mem_gb=20.0)


@pytest.mark.parametrize("res", ["cpus", "net_gbps"])
def test_overcommitting_a_node_resource_is_a_policy_error_and_a_fragmented_job_waits(res):
    if res == "cpus":
        c = cpu_cluster(nodes=2, gpus=8, cpus=16, mem=100.0)
        over = [("CPU threads", {"cpus": 11}), ("host memory", {"mem": 70})]
        ask, left, free = [10.0, 10.0, 12.0], [6.0, 6.0], "cpu_free"
    else:
        c = net_cluster(nodes=2, gpus=8, bw=50.0)
        over = [("node network", {"net": 34})]
        ask, left, free = [30.0, 30.0, 40.0], [20.0, 20.0], "net_free"
    jobs = [JobSpec(f"j{i}", 0.0, 2, "x", total_steps=100.0) for i in range(3)]
    t = JobTable(jobs, c, ToyPerf())
    t.state[:] = PENDING
    occ = Occupancy(c)
    rows = np.arange(3)
    for match, kw in over:
        with pytest.raises(PolicyError, match=match):
            apply(snap_of(t, occ, rows), target(2, **kw)(snap_of(t, occ, rows)), occ)
    # the first two fit, and all three in total, but no node keeps the third one's share: it waits
    snap = snap_of(t, occ, rows)
    dec = target(1)(snap)
    setattr(dec, res, np.array(ask))
    trs = apply(snap, dec, occ)
    assert [(tr.row, tr.kind, getattr(tr, res)) for tr in trs] == \
        [(0, Kind.START, ask[0]), (1, Kind.START, ask[1])]
    assert getattr(occ, free).tolist() == left


def test_jobs_asking_nothing_are_placed_exactly_as_before():
    c = cpu_cluster(nodes=4, gpus=8)
    jobs = [JobSpec(f"j{i}", 0.0, g, "x", total_steps=50.0 * (i + 1)) for i, g in enumerate([3, 8, 1, 5, 2])]
    a = Simulator(jobs, c, Scripted(lambda s: Decision(s.jobs.req.copy(), np.zeros(len(s.jobs), np.int64))),
                  ToyPerf(), record_events=True).run()
    c0 = Cluster(tuple(NodeSpec(f"n{i}", "a800", 8) for i in range(4)))
    b = Simulator(jobs, c0, Scripted(lambda s: Decision(s.jobs.req.copy(), np.zeros(len(s.jobs), np.int64))),
                  ToyPerf(), record_events=True).run()
    assert a.event_log == b.event_log
    assert not a.table.extras_seen


def test_decision_loop_snapshot_carries_resources_up():
    c = cpu_cluster(nodes=2, cpus=16, mem=100.0)
    t = JobTable([JobSpec("a", 0.0, 1, "x", total_steps=1.0)], c, ToyPerf())
    t.state[:] = PENDING
    occ = Occupancy(c)
    seen = {}

    class Look(Policy):
        def decide(self, snap):
            seen["res"] = snap.resources
            return Decision.empty(snap)

    DecisionLoop(Look(), t, occ).step(0.0, np.arange(1))
    assert seen["res"] == (32.0, 200.0)
    occ.node_down(1)
    DecisionLoop(Look(), t, occ).step(0.0, np.arange(1))
    assert seen["res"] == (16.0, 100.0)


def test_placement_skips_nodes_without_enough_network_bandwidth_and_release_frees_it():
    c = net_cluster(nodes=3, gpus=8, bw=50.0)
    occ = Occupancy(c)
    occ.assign(100, np.arange(0, 2), net_gbps=45.0)    # node 0: 6 GPUs free, 5 GB/s free
    occ.assign(101, np.arange(8, 10), net_gbps=30.0)   # node 1: 6 GPUs free, 20 GB/s free
    gpus, nodes = occ.place(0, 2, net_per_gpu=5.0)      # 10 GB/s: node 0 lacks it
    assert nodes == 1 and set(c.gpu_node[gpus].tolist()) == {1}
    gpus, nodes = occ.place(0, 4, net_per_gpu=10.0)     # 40 GB/s: only node 2 has it
    assert nodes == 1 and set(c.gpu_node[gpus].tolist()) == {2}
    six, k = occ.place(0, 6, net_per_gpu=10.0)         # room 5 on node 2, 2 on node 1: split
    assert k == 2 and set(c.gpu_node[six].tolist()) == {1, 2}
    assert occ.place(0, 8, net_per_gpu=10.0) is None    # rooms 0 + 2 + 5 < 8
    assert not occ.fits(np.arange(2, 4), 0.0, 0.0, 10.0) and occ.fits(np.arange(2, 4), 0.0, 0.0, 5.0)
    with pytest.raises(RuntimeError, match="network"):
        occ.assign(102, np.arange(2, 4), net_gbps=10.0)
    occ.release(100)
    assert occ.net_free.tolist() == [50.0, 20.0, 50.0]
    assert occ.fits(np.arange(0, 8), 0.0, 0.0, 50.0)
    # a job split over two nodes holds its bandwidth by GPUs; a failed node's job gives it back
    occ.assign(103, np.concatenate([np.arange(0, 6), np.arange(16, 18)]), net_gbps=40.0)
    assert occ.net_free.tolist() == [20.0, 20.0, 40.0]
    assert occ.up_network() == 150.0
    for row in occ.node_down(2):
        occ.release(row)
    assert occ.net_free.tolist() == [50.0, 20.0, 50.0] and occ.up_network() == 100.0
    # nodes whose spec gives no bandwidth have no limit
    free = Occupancy(cpu_cluster())
    assert free.place(0, 8, net_per_gpu=1e6) is not None and free.up_network() == np.inf


def test_a_multi_node_plan_job_granted_less_network_runs_slower_and_the_simulator_charges_it():
    from quanta.perf.plan_perf import PlanPerf
    perf = PlanPerf()
    job = JobSpec("a", 0.0, 16, "gpt2", total_steps=1e6)
    full = perf.rate(job, "a800", 16, 2, True)
    assert perf.rate_with(job, "a800", 16, 2, True, None, 0.0, 0.0, net_gbps=100.0) == full
    slow = perf.rate_with(job, "a800", 16, 2, True, None, 0.0, 0.0, net_gbps=8.0)
    assert 0 < slow < full
    # one node does not use the network: the reservation changes nothing there
    eight = JobSpec("b", 0.0, 8, "gpt2", total_steps=1.0)
    assert perf.rate_with(eight, "a800", 8, 1, True, None, 0.0, 0.0, net_gbps=1.0) == \
        perf.rate(eight, "a800", 8, 1, True)
    pol = Scripted(target(16, net=100), target(16, net=8))
    pol.interval = 50.0
    sim = Simulator([job], net_cluster(nodes=2, gpus=8, bw=50.0), pol, perf,
                    restart=RestartCost(10.0), until=170.0, record_events=True)
    res = sim.run()
    t = res.table
    # the change of bandwidth on the same GPUs is a reconfiguration, charged at the slower rate
    assert t.net_gbps[0] == 8.0 and t.reconfigs[0] == 1 and t.migrations[0] == 0
    assert t.rate[0] == pytest.approx(slow)
    assert [e[2] for e in res.event_log if e[1] == 0] == ["submit", "start", "reconfigure"]
    assert sim.occ.net_free.tolist() == [46.0, 46.0]
    # started at 0 at the full rate; from 50 a 10 s restore, then the slower rate until 170
    assert t.progress(np.array([0]), 170.0)[0] == pytest.approx(full * 50 + slow * 110)
    t.extend([JobSpec("late", 0.0, 1, "x", total_steps=1.0)])
    assert t.net_gbps.tolist() == [8.0, 0.0]
