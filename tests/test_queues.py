"""The queue layer on hand-built snapshots: quotas, borrowing, reclaim, minimum run time, fair
share with decay, priorities, reasons and positions (the queues file: test_queues_file.py)."""

import numpy as np
import pytest

from quanta.core.jobtable import PENDING, JobTable
from quanta.core.mechanism import Kind, apply
from quanta.core.snapshot import Snapshot
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.placement import Occupancy
from quanta.policies import make_policy
from quanta.queues import QueueLayer, parse_queues
from quanta.queues import fairshare as fs

from conftest import ToyPerf


def cluster(v100_nodes=4, p100_nodes=0, gpus=8) -> Cluster:
    nodes = [NodeSpec(f"v{i}", "v100", gpus) for i in range(v100_nodes)]
    nodes += [NodeSpec(f"p{i}", "p100", gpus) for i in range(p100_nodes)]
    return Cluster(tuple(nodes))


def tree(**over):
    """A cohort 'lab' with teams a and b (8 V100 each) and c (no quota, borrows only)."""
    spec = {"name": "t", "preemption": {"min_runtime_s": 600, "reclaim_grace_s": 0},
            "queues": [{"name": "lab"},
                       {"name": "a", "parent": "lab", "quota": {"v100": 8}},
                       {"name": "b", "parent": "lab", "quota": {"v100": 8}},
                       {"name": "c", "parent": "lab", "quota": {"v100": 0}}]}
    for k, v in over.items():
        spec[k] = v
    return parse_queues(spec, "t.yaml")


def job(i, queue, gpus, submit=0.0, user="", prio=0, steps=1e6):
    return JobSpec(f"j{i}", submit, gpus, "", total_steps=steps, duration_s=steps, user=user,
                   queue=queue, priority=prio)


class Built:
    """Jobs, some running since given times; `snap(now, state)` a snapshot of all of them."""

    def __init__(self, specs, cl, running=None):
        self.cl = cl
        self.table = JobTable(specs, cl, ToyPerf())
        self.occ = Occupancy(cl)
        self.table.state[:] = PENDING
        for row, (t, start) in (running or {}).items():
            k = cl.type_index(t)
            got = self.occ.place(k, int(self.table.req[row]))
            assert got is not None
            self.occ.assign(row, got[0])
            self.table.hold(row, start, "start", k, got[0], float(self.table.rates[row, k]), 0.0)

    def snap(self, now, state=None):
        rows = np.arange(len(self.table))
        return Snapshot(now, self.cl, self.table.perf, self.table.view(rows, now),
                        self.occ.up_capacity(), self.occ.node_free.copy(),
                        self.occ.node_up.copy(), state=state or {})

    def decide(self, layer, now, state=None):
        s = self.snap(now, state)
        dec = layer.decide(s)
        # the mechanism accepts it (no over-commit, allowed types) on a copy of the occupancy
        from quanta.core.mechanism import shadow
        trs = apply(s, dec, shadow(s))
        return s, dec, trs


def held(dec):
    return {i: int(g) for i, g in enumerate(dec.gpus.tolist()) if g}


# -- admission -------------------------------------------------------------------------------------
def test_within_quota_admits():
    b = Built([job(0, "a", 4), job(1, "a", 4)], cluster(2))
    _s, dec, trs = b.decide(QueueLayer(make_policy("fifo"), tree()), 100.0)
    assert held(dec) == {0: 4, 1: 4}
    assert {t.kind for t in trs} == {Kind.START}


def test_over_quota_waits_with_quota_exceeded():
    # a holds its 8; b holds its 8 (the cohort is full): a's next job cannot borrow
    b = Built([job(0, "a", 8), job(1, "b", 8), job(2, "a", 4, submit=50.0)], cluster(2),
              running={0: ("v100", 0.0), 1: ("v100", 0.0)})
    _s, dec, _trs = b.decide(QueueLayer(make_policy("fifo"), tree()), 100.0)
    assert dec.gpus[2] == 0
    assert dec.reasons[2] == "QuotaExceeded(a, v100)"
    assert dec.positions[2][0] == 1


def test_borrows_idle_cohort_quota():
    # b is idle: a borrows its 8 GPUs; c (no quota) borrows nothing while a took it all
    b = Built([job(0, "a", 8), job(1, "a", 8), job(2, "c", 4, submit=10.0)], cluster(2))
    layer = QueueLayer(make_policy("fifo"), tree())
    _s, dec, _trs = b.decide(layer, 100.0)
    assert dec.gpus[0] == 8 and dec.gpus[1] == 8
    assert dec.gpus[2] == 0
    assert dec.reasons[2] in ("FairShare", "QuotaExceeded(c, v100)")
    rep = dec.state["report"]["queues"]
    assert rep["a"]["borrowed"] == [8.0] and rep["a"]["usage"] == [16.0]


def test_borrowing_limit_is_respected():
    t = parse_queues({"queues": [{"name": "lab"},
                                 {"name": "a", "parent": "lab",
                                  "quota": {"v100": {"nominal": 8, "borrowing_limit": 4}}},
                                 {"name": "b", "parent": "lab", "quota": {"v100": 8}}]})
    b = Built([job(0, "a", 8), job(1, "a", 4), job(2, "a", 4)], cluster(2))
    _s, dec, _ = b.decide(QueueLayer(make_policy("fifo"), t), 10.0)
    assert int(dec.gpus.sum()) == 12 and dec.reasons[2] == "QuotaExceeded(a, v100)"


def test_lending_limit_keeps_part_of_the_quota():
    t = parse_queues({"queues": [{"name": "lab"},
                                 {"name": "a", "parent": "lab", "quota": {"v100": 8}},
                                 {"name": "b", "parent": "lab",
                                  "quota": {"v100": {"nominal": 8, "lending_limit": 2}}}]})
    b = Built([job(0, "a", 8), job(1, "a", 4), job(2, "a", 2), job(3, "a", 2)], cluster(2))
    _s, dec, _ = b.decide(QueueLayer(make_policy("fifo"), t), 10.0)
    assert int(dec.gpus.sum()) == 10          # a: its 8 + the 2 GPUs b lends


# -- reclaim ---------------------------------------------------------------------------------------
def test_reclaim_preempts_borrowed_jobs_first():
    # b holds 16 = its 8 + a's 8 borrowed, x its 16: the cohort's 32 GPUs are all held
    specs = [job(0, "b", 8), job(1, "b", 4, submit=1.0), job(2, "b", 4, submit=2.0),
             job(3, "x", 16), job(4, "a", 4, submit=1000.0)]
    b = Built(specs, cluster(4), running={0: ("v100", 0.0), 1: ("v100", 0.0), 2: ("v100", 10.0),
                                          3: ("v100", 0.0)})
    t = parse_queues({"preemption": {"min_runtime_s": 600},
                      "queues": [{"name": "lab"},
                                 {"name": "a", "parent": "lab", "quota": {"v100": 8}},
                                 {"name": "b", "parent": "lab", "quota": {"v100": 8}},
                                 {"name": "x", "parent": "lab", "quota": {"v100": 16}}]})
    # b's jobs 1 and 2 are beyond its nominal 8: the latest started (2) is reclaimed
    _s, dec, trs = b.decide(QueueLayer(make_policy("fifo"), t), 2000.0)
    assert dec.gpus[4] == 4
    assert dec.gpus[2] == 0 and dec.reasons[2] == "Preempted(Reclaim)"
    assert dec.gpus[0] == 8 and dec.gpus[1] == 4 and dec.gpus[3] == 16
    kinds = {b.table.specs[t_.row].job_id: t_.kind for t_ in trs}
    assert kinds == {"j2": Kind.PREEMPT, "j4": Kind.START}
    assert dec.state["totals"]["b"]["reclaims"] == 1


def test_reclaim_never_preempts_a_job_under_its_min_runtime():
    specs = [job(0, "b", 8), job(1, "b", 4, submit=1.0), job(2, "b", 4, submit=2.0),
             job(3, "x", 16), job(4, "a", 4, submit=1000.0)]
    t = parse_queues({"preemption": {"min_runtime_s": 600},
                      "queues": [{"name": "lab"},
                                 {"name": "a", "parent": "lab", "quota": {"v100": 8}},
                                 {"name": "b", "parent": "lab", "quota": {"v100": 8}},
                                 {"name": "x", "parent": "lab", "quota": {"v100": 16}}]})
    # both borrowed jobs started recently (1700 and 1800): nothing may be taken before 2300
    b = Built(specs, cluster(4), running={0: ("v100", 0.0), 1: ("v100", 1700.0),
                                          2: ("v100", 1800.0), 3: ("v100", 0.0)})
    layer = QueueLayer(make_policy("fifo"), t)
    _s, dec, trs = b.decide(layer, 2000.0)
    assert dec.gpus[4] == 0 and dec.reasons[4] == "WaitingForReclaim"
    assert not trs
    assert dec.wake_at == pytest.approx(2300.0)       # job 1's 600 s are up then
    assert dec.gpus[0] == 8                           # b's own quota is never reclaimed
    # at 2300 the earliest is reclaimed, never job 2 (protected until 2400)
    _s, dec, trs = b.decide(layer, 2300.0, dec.state)
    assert dec.gpus[4] == 4 and dec.gpus[1] == 0 and dec.gpus[2] == 4



@pytest.mark.parametrize("reclaim, says", [("any", "WaitingForReclaim"), ("never", "Resources")])
def test_jobs_within_their_nominal_quota_on_lent_gpus_are_not_said_over_quota(reclaim, says):
    """b's four 1-GPU jobs fit its nominal 4 while a's borrowers hold b's GPUs: the first was
    WaitingForReclaim and the three behind it QuotaExceeded(b, v100), b at 0 of 4 (reclaim:
    never, all four); a job beyond b's nominal counting those ahead is still QuotaExceeded."""
    specs = [job(i, "a", 1, prio=-100) for i in range(8)] + \
        [job(8 + i, "b", 1, submit=100.0) for i in range(5)]
    t = parse_queues({"preemption": {"min_runtime_s": 600, "reclaim": reclaim},
                      "queues": [{"name": "lab"},
                                 {"name": "a", "parent": "lab", "quota": {"v100": 4}},
                                 {"name": "b", "parent": "lab", "quota": {"v100": 4}}]})
    b = Built(specs, cluster(1), running={i: ("v100", 0.0) for i in range(8)})
    _s, dec, trs = b.decide(QueueLayer(make_policy("fifo"), t), 360.0)
    assert not trs and [dec.reasons[r] for r in range(8, 12)] == [says] * 4
    assert dec.reasons[12].startswith("QuotaExceeded(b")


def test_no_grace_wait_where_nothing_is_lent():
    """a's quota (40) is more than the cluster's 32 GPUs, all held by a's own jobs: a new job
    fits the quota but nothing is lent to reclaim. It was WaitingForReclaim for the grace (and
    woke the layer at its end); it waits for Resources."""
    specs = [job(0, "a", 16), job(1, "a", 8), job(2, "a", 8), job(3, "a", 4, submit=1000.0)]
    t = parse_queues({"preemption": {"min_runtime_s": 0, "reclaim_grace_s": 300},
                      "queues": [{"name": "lab"},
                                 {"name": "a", "parent": "lab", "quota": {"v100": 40}}]})
    b = Built(specs, cluster(4), running={0: ("v100", 0.0), 1: ("v100", 0.0), 2: ("v100", 0.0)})
    _s, dec, trs = b.decide(QueueLayer(make_policy("fifo"), t), 1100.0)
    assert not trs and dec.gpus[3] == 0 and dec.reasons[3] == "Resources", dec.reasons
    assert dec.wake_at is None or dec.wake_at != pytest.approx(1300.0)


def test_a_priority_preemption_blocked_by_min_runtime_wakes_the_layer_when_it_ends():
    """h (high) waits for GPUs its queue's low jobs hold, protected for 600 s: the layer asked
    for no wake-up (only reclaim did), so h waited for an unrelated event (a completion hours
    later, or another queue's arrival)."""
    specs = [job(i, "a", 8, prio=-100) for i in range(4)] + [job(4, "a", 16, submit=100.0, prio=100)]
    t = parse_queues({"preemption": {"min_runtime_s": 600},
                      "priority_classes": {"high": 100, "low": -100},
                      "queues": [{"name": "a", "quota": {"v100": 32}}]})
    b = Built(specs, cluster(4), running={i: ("v100", 0.0) for i in range(4)})
    layer = QueueLayer(make_policy("fifo"), t)
    _s, dec, trs = b.decide(layer, 100.0)
    assert not trs and dec.gpus[4] == 0
    assert dec.wake_at == pytest.approx(600.0)
    _s, dec, trs = b.decide(layer, 600.0, dec.state)
    assert dec.gpus[4] == 16 and sum(dec.gpus[:4]) == 16


@pytest.mark.parametrize("reclaim, starts", [("never", False), ("any", True)])
def test_a_job_within_its_nominal_quota_takes_lent_gpus_back_only_by_reclaim(reclaim, starts):
    """a's job fits a's nominal 8 while b's borrowers hold them: with `reclaim: never` they
    keep them, though the job outranks them (borrow_within_cohort preempted them for it: that
    rule is for a job that would borrow itself)."""
    specs = [job(i, "b", 1) for i in range(16)] + [job(16, "a", 2, submit=100.0, prio=100)]
    t = parse_queues({"preemption": {"min_runtime_s": 0, "reclaim": reclaim},
                      "priority_classes": {"high": 100},
                      "queues": [{"name": "lab"},
                                 {"name": "a", "parent": "lab", "quota": {"v100": 8}},
                                 {"name": "b", "parent": "lab", "quota": {"v100": 8}}]})
    b = Built(specs, cluster(2), running={i: ("v100", 0.0) for i in range(16)})
    _s, dec, trs = b.decide(QueueLayer(make_policy("fifo"), t), 200.0)
    assert (dec.gpus[16] == 2) == starts
    if not starts:
        assert not trs and dec.reasons[16] == "Resources"


def test_reclaim_grace():
    specs = [job(0, "b", 16), job(1, "x", 16), job(2, "a", 4, submit=1000.0)]
    t = parse_queues({"preemption": {"min_runtime_s": 0, "reclaim_grace_s": 300},
                      "queues": [{"name": "lab"},
                                 {"name": "a", "parent": "lab", "quota": {"v100": 8}},
                                 {"name": "b", "parent": "lab", "quota": {"v100": 8}},
                                 {"name": "x", "parent": "lab", "quota": {"v100": 16}}]})
    b = Built(specs, cluster(4), running={0: ("v100", 0.0), 1: ("v100", 0.0)})
    layer = QueueLayer(make_policy("fifo"), t)
    _s, dec, _ = b.decide(layer, 1100.0)
    assert dec.gpus[2] == 0 and dec.reasons[2] == "WaitingForReclaim"
    assert dec.wake_at == pytest.approx(1300.0)
    _s, dec, _ = b.decide(layer, 1300.0, dec.state)
    assert dec.gpus[2] == 4 and dec.gpus[0] == 0      # the 16-GPU borrower goes whole


def test_inner_policy_cannot_preempt_under_min_runtime():
    # LAS would preempt the long-running job for the newcomer with less attained service; the
    # layer keeps it (started 100 s ago, min run time 600 s)
    specs = [job(0, "a", 8), job(1, "a", 8, submit=50.0)]
    t = parse_queues({"preemption": {"min_runtime_s": 600},
                      "queues": [{"name": "a", "quota": {"v100": 8}}]})
    b = Built(specs, cluster(1), running={0: ("v100", 0.0)})
    b.table.att0[0] = 1e6
    layer = QueueLayer(make_policy("las"), t)
    _s, dec, trs = b.decide(layer, 100.0)
    assert dec.gpus[0] == 8 and dec.gpus[1] == 0 and not trs
    _s, dec, trs = b.decide(layer, 700.0, dec.state)
    assert dec.gpus[0] == 0 and dec.gpus[1] == 8      # now LAS may time-slice


def test_checkpoint_interval_extends_protection():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class CkptJob(JobSpec):
        checkpoint_s: float = 0.0

    specs = [CkptJob("j0", 0.0, 8, "", total_steps=1e6, queue="a", checkpoint_s=1800.0),
             job(1, "a", 8, submit=50.0)]
    t = parse_queues({"preemption": {"min_runtime_s": 600},
                      "queues": [{"name": "a", "quota": {"v100": 8}}]})
    b = Built(specs, cluster(1), running={0: ("v100", 0.0)})
    b.table.att0[0] = 1e6
    layer = QueueLayer(make_policy("las"), t)
    _s, dec, _ = b.decide(layer, 700.0)
    assert dec.gpus[0] == 8                         # its first checkpoint is at 1800 s
    _s, dec, _ = b.decide(layer, 1900.0, dec.state)
    assert dec.gpus[0] == 0


# -- priorities ------------------------------------------------------------------------------------
def test_priorities_preempt_only_lower_ones():
    t = parse_queues({"preemption": {"min_runtime_s": 0},
                      "queues": [{"name": "a", "quota": {"v100": 16}}]})
    specs = [job(0, "a", 8, prio=0), job(1, "a", 8, prio=-10, submit=1.0),
             job(2, "a", 8, prio=5, submit=100.0), job(3, "a", 8, prio=0, submit=100.0)]
    b = Built(specs, cluster(2), running={0: ("v100", 0.0), 1: ("v100", 0.0)})
    layer = QueueLayer(make_policy("fifo"), t)
    _s, dec, _ = b.decide(layer, 200.0)
    # the prio-5 job takes the place of the prio -10 one, not of the prio 0 one
    assert dec.gpus[2] == 8 and dec.gpus[1] == 0 and dec.gpus[0] == 8
    assert dec.reasons[1] == "Preempted(Priority)"
    # the prio-0 newcomer preempts nobody (equal or higher priority everywhere)
    assert dec.gpus[3] == 0 and dec.reasons[3].startswith("QuotaExceeded")
    assert dec.state["totals"]["a"]["priority_preemptions"] == 1


def test_equal_priority_never_preempts():
    t = parse_queues({"preemption": {"min_runtime_s": 0},
                      "queues": [{"name": "a", "quota": {"v100": 8}}]})
    specs = [job(0, "a", 8), job(1, "a", 8, submit=10.0)]
    b = Built(specs, cluster(1), running={0: ("v100", 0.0)})
    _s, dec, trs = b.decide(QueueLayer(make_policy("fifo"), t), 100.0)
    assert dec.gpus[0] == 8 and dec.gpus[1] == 0 and not trs


def test_higher_priority_preempts_lower_borrowed_jobs_of_the_cohort():
    """A job that would borrow takes GPUs of a lower-priority borrower of its cohort
    (borrow_within_cohort), reclaim off: a's job 3 goes beyond a's nominal 8 onto c's idle
    quota, which b's job 1 (priority -1) borrows."""
    specs = [job(0, "b", 4, prio=0), job(1, "b", 4, prio=-1, submit=1.0),
             job(2, "a", 8, prio=0, submit=5.0), job(3, "a", 4, prio=3, submit=100.0)]
    t = parse_queues({"preemption": {"min_runtime_s": 0, "reclaim": "never"},
                      "queues": [{"name": "lab"},
                                 {"name": "a", "parent": "lab", "quota": {"v100": 8}},
                                 {"name": "b", "parent": "lab", "quota": {"v100": 4}},
                                 {"name": "c", "parent": "lab", "quota": {"v100": 4}}]})
    # b borrows 4 of c's quota; the cohort's 16 GPUs are all held
    b = Built(specs, cluster(2), running={0: ("v100", 0.0), 1: ("v100", 0.0), 2: ("v100", 0.0)})
    _s, dec, _ = b.decide(QueueLayer(make_policy("fifo"), t), 200.0)
    assert dec.gpus[3] == 4 and dec.gpus[1] == 0 and dec.gpus[0] == 4 and dec.gpus[2] == 8
    assert dec.reasons[1] == "Preempted(Priority)"


# -- fair share --------------------------------------------------------------------------------------
def shared_pool():
    """Two teams with no quota of their own borrowing a cohort pool of 8 V100."""
    return parse_queues({"fairshare": {"half_life_h": 1},
                         "preemption": {"min_runtime_s": 0, "reclaim": "never",
                                        "within_queue": "never", "borrow_within_cohort": "never"},
                         "queues": [{"name": "pool", "quota": {"v100": 8}},
                                    {"name": "a", "parent": "pool", "quota": {"v100": 0}},
                                    {"name": "b", "parent": "pool", "quota": {"v100": 0}}]})


def test_fair_share_shifts_order_after_a_burst_and_decays():
    t = shared_pool()
    layer = QueueLayer(make_policy("fifo"), t)
    # a's burst: it runs the pool alone for an hour
    b = Built([job(0, "a", 8, steps=3600.0)], cluster(1))
    _s, dec, _ = b.decide(layer, 0.0)
    assert dec.gpus[0] == 8
    st = dec.state
    b2 = Built([job(0, "a", 8, steps=3600.0)], cluster(1), running={0: ("v100", 0.0)})
    _s, dec, _ = b2.decide(layer, 3600.0, st)      # one more decision folds in a's hour
    used_a = dec.state["usage"]["a"]
    assert used_a == pytest.approx(8 * 3600 * 2 ** -0.5, rel=1e-6)   # decayed to mid-hour
    # now both teams wait for the pool: b (no usage) goes first although a's job is older
    c = Built([job(0, "a", 8, submit=3600.0), job(1, "b", 8, submit=3700.0)], cluster(1))
    _s, dec, _ = c.decide(layer, 3800.0, {**dec.state, "prev": None})
    assert dec.gpus[1] == 8 and dec.gpus[0] == 0 and dec.reasons[0] == "FairShare"
    F = dec.state["report"]["queues"]
    assert F["b"]["fairshare"] > F["a"]["fairshare"]
    # a's usage halves every hour (the half-life) while nothing runs
    st2 = dict(dec.state, prev=None)
    _s, d2, _ = Built([job(0, "a", 8, submit=3600.0)], cluster(1)).decide(layer, 3800.0 + 3600.0, st2)
    assert d2.state["usage"]["a"] == pytest.approx(dec.state["usage"]["a"] / 2, rel=1e-9)
    # after enough half-lives b's later burst outweighs a's old one: the order flips back
    st3 = dict(d2.state, usage={"a": d2.state["usage"]["a"] * 2 ** -5, "b": 8 * 3600.0})
    d = Built([job(0, "a", 8, submit=3600.0), job(1, "b", 8, submit=3700.0)], cluster(1))
    _s, d3, _ = d.decide(layer, 20000.0, dict(st3, prev=None, t=20000.0))
    assert d3.gpus[0] == 8 and d3.gpus[1] == 0


def test_user_fair_share_orders_jobs_within_a_queue():
    t = parse_queues({"queues": [{"name": "a", "quota": {"v100": 8}}]})
    specs = [job(0, "a", 8, submit=0.0, user="alice"), job(1, "a", 8, submit=10.0, user="bob")]
    b = Built(specs, cluster(1))
    st = {"t": 100.0, "usage": {"a": 1e6}, "uusage": {fs.user_key("a", "alice"): 1e6}}
    _s, dec, _ = b.decide(QueueLayer(make_policy("fifo"), t, scope="cluster", overflow=0), 100.0, st)
    assert dec.gpus[1] == 8 and dec.gpus[0] == 0
    assert dec.positions[0] == (1, None) or dec.positions[0][0] == 1


def test_classic_factor_formula():
    t = shared_pool()
    F, UE, S = fs.classic(t, {"a": 3.0, "b": 1.0})
    ia, ib = t.names.index("a"), t.names.index("b")
    # pool: U = 1, S = 1 -> UE = 1; a: U_N = .75, UE = .75 + (1 - .75) / 2 = .875, S = .5
    assert UE[ia] == pytest.approx(0.875) and S[ia] == pytest.approx(0.5)
    assert F[ia] == pytest.approx(2 ** (-0.875 / 0.5))
    assert F[ib] == pytest.approx(2 ** (-(0.25 + 0.75 / 2) / 0.5))
    assert fs.classic(t, {})[0].tolist() == [1.0, 1.0, 1.0]


# -- positions and reasons ---------------------------------------------------------------------------
def test_positions_and_estimated_start():
    t = parse_queues({"queues": [{"name": "a", "quota": {"v100": 8}}]})
    specs = [job(0, "a", 8, steps=1000.0)] + [job(i, "a", 4, submit=float(i), steps=500.0)
                                               for i in (1, 2, 3)]
    b = Built(specs, cluster(1), running={0: ("v100", 0.0)})
    b.table.prog0[0] = 0.0
    s, dec, _ = b.decide(QueueLayer(make_policy("fifo"), t), 100.0)
    pos = {i: dec.positions[i][0] for i in (1, 2, 3)}
    assert pos == {1: 1, 2: 2, 3: 3}
    rate = float(b.table.rates[0, 0])
    end0 = 100.0 + (1000.0 - rate * 100.0) / rate
    assert dec.positions[1][1] == pytest.approx(end0)
    assert dec.positions[2][1] == pytest.approx(end0)    # 1 and 2 together fit its 8 GPUs
    assert dec.positions[3][1] is None                   # after jobs not yet started


def test_an_estimate_counts_the_room_given_to_a_job_behind_that_did_not_start():
    """r holds 1 of a's 4 GPUs; big (4) waits behind it, s (1) behind big is admitted but the
    policy (no backfill) leaves it waiting: big's estimate is r's end (it had none: s's admitted
    GPU was taken from the room big counts on)."""
    t = parse_queues({"queues": [{"name": "a", "quota": {"v100": 4}}]})
    specs = [job(0, "a", 1, steps=3600.0), job(1, "a", 4, submit=1.0, steps=100.0),
             job(2, "a", 1, submit=2.0, steps=100.0)]
    b = Built(specs, cluster(1, gpus=4), running={0: ("v100", 0.0)})
    b.table.prog0[0] = 0.0
    s, dec, _ = b.decide(QueueLayer(make_policy("fifo:backfill=false"), t), 360.0)
    assert dec.gpus[1] == 0 and dec.gpus[2] == 0 and dec.positions[1][0] == 1
    rate = float(b.table.rates[0, 0])
    assert dec.positions[1][1] == pytest.approx(360.0 + (3600.0 - rate * 360.0) / rate)


def test_job_of_no_queue_waits_with_a_reason():
    t = parse_queues({"queues": [{"name": "a", "quota": {"v100": 8}, "users": ["alice"]}]})
    b = Built([job(0, "zzz", 1, user="mallory")], cluster(1))
    _s, dec, _ = b.decide(QueueLayer(make_policy("fifo"), t), 1.0)
    assert dec.gpus[0] == 0 and dec.reasons[0] == "NoQueue(zzz)"


def test_queue_of_by_name_alias_user_default():
    t = parse_queues({"default_queue": "d",
                      "queues": [{"name": "a", "users": ["alice"], "aliases": ["vc1", 123]},
                                 {"name": "d"}]})
    a, d = t.names.index("a"), t.names.index("d")
    assert t.queue_of(job(0, "a", 1, user="alice")) == a
    assert t.queue_of(job(0, "vc1", 1, user="alice")) == a
    assert t.queue_of(job(0, "123", 1, user="alice")) == a
    assert t.queue_of(job(0, "default", 1, user="alice")) == a
    assert t.queue_of(job(0, "a", 1, user="bob")) == d       # not allowed in a: default
    assert t.queue_of(job(0, "x", 1, user="")) == d


# -- every policy composes -----------------------------------------------------------------------------
@pytest.mark.parametrize("inner", ["fifo", "las", "srtf", "tiresias-las", "gavel-las",
                                   "gavel-fifo", "gandiva"])
@pytest.mark.parametrize("scope", ["queue", "cluster"])
def test_random_states_give_valid_decisions_within_quota(inner, scope):
    rng = np.random.default_rng(7)
    cl = cluster(4, 2)
    t = parse_queues({"preemption": {"min_runtime_s": 300},
                      "queues": [{"name": "r"}, {"name": "p"},
                                 {"name": "a", "parent": "r", "quota": {"v100": 12, "p100": 4}},
                                 {"name": "b", "parent": "r", "quota": {"v100": 4, "p100": 4}},
                                 {"name": "c", "parent": "p", "quota": {"v100": 16,
                                                                        "p100": {"nominal": 8,
                                                                                 "lending_limit": 2}}}]})
    layer = QueueLayer(make_policy(inner), t, scope=scope)
    comp = t.compile(cl.types)
    for trial in range(6):
        n = 30
        specs = [job(i, str(rng.choice(["a", "b", "c"])), int(rng.choice([1, 1, 2, 4, 8])),
                     submit=float(i), prio=int(rng.choice([0, 0, 5])),
                     steps=float(rng.integers(100, 5000))) for i in range(n)]
        b = Built(specs, cl)
        # start some, respecting each queue's nominal quota per type
        left = comp.nominal_total[t.leaves].copy()
        for i in rng.permutation(n)[:15].tolist():
            li = t.leaf_pos[t.queue_of(specs[i])]
            for k in (0, 1):
                if left[li, k] >= specs[i].num_gpus:
                    got = b.occ.place(k, specs[i].num_gpus)
                    if got is not None:
                        b.occ.assign(i, got[0])
                        b.table.hold(i, float(rng.uniform(0, 900)), "start", k, got[0], 1.0, 0.0)
                        left[li, k] -= specs[i].num_gpus
                        break
        b.table.att0[:] = rng.uniform(0, 1e4, n)
        s, dec, trs = b.decide(layer, 1000.0 + trial)
        # every queue within what it may hold: its usage per type <= min cap along its path
        use = np.zeros((t.num_leaves, 2))
        for i in np.flatnonzero(dec.gpus > 0):
            if i in dec.share:
                continue
            use[t.leaf_pos[t.queue_of(specs[i])], dec.gpu_type[i]] += dec.gpus[i]
        for li, path in enumerate(t.paths):
            assert (use[li] <= comp.cap[path].min(axis=0) + 1e-9).all()
        # no running job under its minimum run time preempted
        for tr in trs:
            if tr.kind is Kind.PREEMPT:
                assert s.jobs.resume_at[tr.row] + 300.0 <= s.now
        # every waiting job has a reason and a position
        for i in np.flatnonzero(dec.gpus == 0).tolist():
            assert i in dec.reasons and i in dec.positions


def test_deterministic():
    t = tree()
    specs = [job(i, ["a", "b", "c"][i % 3], [1, 2, 4, 8][i % 4], submit=float(i)) for i in range(40)]
    outs = []
    for _ in range(2):
        b = Built(specs, cluster(2))
        _s, dec, _ = b.decide(QueueLayer(make_policy("las"), t), 100.0)
        outs.append((dec.gpus.tolist(), dec.gpu_type.tolist(), dict(dec.reasons), dict(dec.positions)))
    assert outs[0] == outs[1]


def test_a_guest_made_owner_needs_room():
    """A job sharing another's GPU that the inner policy turns into an owner of its own GPU is a
    new claim on the cluster: with no GPU left, it is not given one (no over-commit)."""
    from quanta.core.decision import Decision
    from quanta.core.jobtable import KIND_CODES, SHARE_MODES
    from quanta.policies.base import Policy

    class Unpair(Policy):
        name = "unpair"

        def decide(self, snap):
            d = Decision.empty(snap)
            d.gpus[:] = snap.jobs.req
            d.gpu_type[:] = 0
            return d

    t = parse_queues({"preemption": {"min_runtime_s": 0},
                      "queues": [{"name": "a", "quota": {"v100": 2}}]})
    specs = [job(0, "a", 1), job(1, "a", 1), job(2, "a", 1)]
    b = Built(specs, cluster(1, gpus=2), running={0: ("v100", 0.0), 1: ("v100", 0.0)})
    host = b.occ.held[1]
    b.occ.assign_guest(2, host)
    b.table.apply_transitions(0.0, np.array([1, 2]), np.array([KIND_CODES["reshare"],
                                                                 KIND_CODES["start"]]),
                              np.array([0, 0]), [host, host], np.array([1.0, 1.0]),
                              np.array([0.0, 0.0]), np.array([2, 1]),
                              np.array([SHARE_MODES["slice"]] * 2, dtype=np.int8),
                              np.array([False, True]))
    s, dec, _trs = b.decide(QueueLayer(Unpair(), t), 100.0)   # the mechanism accepts it
    assert int(dec.gpus.sum()) == 2 and dec.gpus[2] == 0
