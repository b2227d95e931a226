"""SJF-BSBF shares a GPU only when that lowers the pair's average JCT; SJF-FFS whenever it fits."""

import numpy as np
import pytest

from quanta.core.jobtable import DONE
from quanta.model import JobSpec
from quanta.policies import make_policy
from quanta.perf.table import micro_type
from quanta.policies.sjf_bsbf import pair_times
from quanta.report.metrics import job_metrics
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost

from conftest import homogeneous, random_jobs
from test_engine import timeline_gpu_seconds
from test_policies_baselines import snapshot

GOOD = ("ResNet-50 (batch size 16)", "ResNet-18 (batch size 16)")        # packed: no slowdown
BAD = ("Recommendation (batch size 512)", "ResNet-50 (batch size 16)")   # packed: 0.38 together
NOFIT = ("ResNet-50 (batch size 64)", "ResNet-50 (batch size 128)")      # do not fit together


def test_pair_times_match_a_direct_simulation_of_the_pair():
    for e_a, e_b, xi_a, xi_b in [(100.0, 40.0, 1.5, 1.2), (30.0, 200.0, 2.0, 1.1), (50, 50, 1.0, 1.0)]:
        t_seq, t_con = pair_times(e_a, e_b, xi_a, xi_b)
        assert t_seq == pytest.approx((e_b + (e_b + e_a)) / 2)
        # packed: both progress at 1/xi until the first finishes, then the other runs alone
        first = min(xi_a * e_a, xi_b * e_b)
        if xi_a * e_a >= xi_b * e_b:
            end_a, end_b = first + e_a - first / xi_a, first
        else:
            end_a, end_b = first, first + e_b - first / xi_b
        assert t_con == pytest.approx((end_a + end_b) / 2)


def _pair_jct(e_a, e_b, xi_a, xi_b, s_a=1.0, s_b=1.0):
    """Average JCT of a packed pair by stepping the two jobs through time (no formula)."""
    left_a, left_b, t, ends = e_a, e_b, 0.0, {}
    while len(ends) < 2:
        speed_a = (1 / xi_a if "b" not in ends else 1 / s_a) if "a" not in ends else 0.0
        speed_b = (1 / xi_b if "a" not in ends else 1 / s_b) if "b" not in ends else 0.0
        dt = min(left_a / speed_a if speed_a else np.inf, left_b / speed_b if speed_b else np.inf)
        t += dt
        left_a -= speed_a * dt
        left_b -= speed_b * dt
        for name, left in (("a", left_a), ("b", left_b)):
            if name not in ends and left <= 1e-9 * (e_a + e_b):
                ends[name] = t
    return (ends["a"] + ends["b"]) / 2


def test_pair_times_with_a_slower_solo_phase_match_stepping():
    for args in [(100.0, 40.0, 1.5, 1.2, 1.3, 1.0), (30.0, 200.0, 2.0, 1.1, 1.0, 1.4),
                 (500.0, 20.0, 3.0, 1.1, 2.0, 1.0)]:
        t_seq, t_con = pair_times(*args)
        assert t_con == pytest.approx(_pair_jct(*args))
        assert t_seq == pytest.approx((args[1] + args[1] + args[0]) / 2)


def _snap(pair, perf, steps_a=None, steps_b=None):
    host, waiting = pair[1], pair[0]
    rate = perf.table.alone
    jobs = [JobSpec("b", 0.0, 1, host, total_steps=(steps_b or 3600) * rate[(host, 1, "v100")]),
            JobSpec("a", 1.0, 1, waiting, total_steps=(steps_a or 3600) * rate[(waiting, 1, "v100")])]
    snap, _ = snapshot(jobs, homogeneous(1, 1), perf, running={0: (0, 1)})
    return snap


@pytest.mark.parametrize("pair, bsbf_shares", [(GOOD, True), (BAD, False), (NOFIT, False)])
def test_bsbf_shares_only_when_it_helps_ffs_whenever_it_fits(pair, bsbf_shares, perf):
    snap = _snap(pair, perf)
    bsbf = make_policy("sjf-bsbf").decide(snap)
    ffs = make_policy("sjf-ffs").decide(snap)
    assert (1 in bsbf.share) == bsbf_shares
    assert (1 in ffs.share) == (pair != NOFIT)
    assert bsbf.gpus[0] == 1 and ffs.gpus[0] == 1          # never preempts the running job


def test_bsbf_runs_end_to_end_and_accounts_shared_gpus(perf):
    jobs = random_jobs(120, seed=4, gap=30.0, max_gpus=2)
    from quanta.workloads.catalog import drawable_types
    types = drawable_types()
    rng = np.random.default_rng(4)
    jobs = [j.with_(job_type=types[int(rng.integers(len(types)))]) for j in jobs]
    for name in ("sjf-bsbf", "sjf-ffs"):
        res = Simulator(jobs, homogeneous(2, 4), make_policy(name), perf, restart=RestartCost(5.0)).run()
        assert (res.table.state == DONE).all() and res.table.preemptions.sum() == 0
        assert job_metrics(res).gpu_seconds.sum() == pytest.approx(timeline_gpu_seconds(res), rel=1e-9)


def _accumulated_pair(perf, snap, k):
    """(e_a, e_b, xi_a, xi_b, s_a) of the NOFIT pair with the guest (row 1) at k micro-batches."""
    j = snap.jobs
    a, b = j.specs[1], j.specs[0]
    micro = dict(perf.accumulation_steps(a.job_type))[k]
    solo = perf.accumulated_rate(a, k, micro, "v100", 1)
    alone_a, alone_b = perf.rate(a, "v100", 1), perf.rate(b, "v100", 1)
    e_a, e_b = j.remaining[1] / alone_a, j.remaining[0] / alone_b
    xi_a = alone_a / (solo * perf.pack_slowdown(micro, b.job_type, "v100"))
    xi_b = 1 / perf.pack_slowdown(b.job_type, micro, "v100")
    return e_a, e_b, xi_a, xi_b, alone_a / solo


@pytest.mark.parametrize("guest_s, host_s, shares", [(600, 36000, True), (36000, 600, False)])
def test_memory_short_pair_shares_with_accumulation_only_if_the_pair_gains(guest_s, host_s, shares,
                                                                            perf):
    snap = _snap(NOFIT, perf, steps_a=guest_s, steps_b=host_s)
    assert not perf.fits_together(NOFIT[0], NOFIT[1], "v100")      # memory-short at full batch
    assert 1 not in make_policy("sjf-bsbf").decide(snap).share       # no accumulation: never
    dec = make_policy("sjf-bsbf:accumulate=true").decide(snap)
    assert (1 in dec.share) == shares
    fitting = [k for k, micro in perf.accumulation_steps(NOFIT[0])
               if perf.fits_together(micro, NOFIT[1], "v100")]
    assert fitting and 1 not in fitting
    wait = (host_s + host_s + guest_s) / 2                          # a waits for b, then runs
    if shares:
        k = dec.plans[1].ga_steps
        assert k in fitting and dec.plans[1].dp == 1
        jct = _pair_jct(*_accumulated_pair(perf, snap, k))
        assert jct < wait and jct == pytest.approx(pair_times(*_accumulated_pair(perf, snap, k))[1])
        assert all(jct <= _pair_jct(*_accumulated_pair(perf, snap, o)) + 1e-6 for o in fitting)
    else:
        assert not dec.plans
        assert all(_pair_jct(*_accumulated_pair(perf, snap, k)) >= wait for k in fitting)


def test_bsbf_with_accumulation_runs_end_to_end_and_the_engine_charges_the_micro_batch(perf):
    """The engine prices an accumulating guest (and its host) from each job's plan: the guest at
    its micro-batch speed / k, both with the measured pair slowdown of the micro-batch type."""
    rng = np.random.default_rng(5)
    mix = [NOFIT[0], NOFIT[1], "ResNet-50 (batch size 64)", "Transformer (batch size 256)"]
    jobs = [j.with_(job_type=mix[int(rng.integers(len(mix)))]) for j in random_jobs(80, seed=5, gap=20.0, max_gpus=1)]
    sim = Simulator(jobs, homogeneous(1, 4), make_policy("sjf-bsbf:accumulate=true"), perf,
                    restart=RestartCost(5.0))
    checked = []
    apply_ = sim._apply

    def spy(now, trs, *args):
        out = apply_(now, trs, *args)
        for tr in trs:
            k = getattr(tr.plan, "ga_steps", 1)
            if k > 1 and tr.guest:
                spec, host = sim.table.specs[tr.row], sim.table.specs[tr.partner]
                micro = dict(perf.accumulation_steps(spec.job_type))[k]
                # the host may accumulate too (a former guest keeps its micro-batch)
                hk, host_micro = micro_type(perf, host, sim.table.plan[tr.partner])
                want = perf.accumulated_rate(spec, k, micro, "v100", 1) * \
                    perf.pack_slowdown(micro, host_micro, "v100")
                assert sim.table.rate[tr.row] == pytest.approx(want) and want > 0
                assert perf.shared_rate(spec, host, "v100", 1) == 0   # memory-short at B
                host_want = perf.accumulated_rate(host, hk, host_micro, "v100", 1) * \
                    perf.pack_slowdown(host_micro, micro, "v100")
                assert sim.table.rate[tr.partner] == pytest.approx(host_want)
                checked.append(tr.row)
        return out
    sim._apply = spy
    res = sim.run()
    assert (res.table.state == DONE).all() and res.table.preemptions.sum() == 0
    assert job_metrics(res).gpu_seconds.sum() == pytest.approx(timeline_gpu_seconds(res), rel=1e-9)
    assert checked                                                 # some guests accumulated


# -- jobs started in the same pass host later ones ------------------------------------------------

@pytest.mark.parametrize("policy", ["sjf-bsbf", "sjf-bsbf:span=false"])
def test_jobs_arriving_together_share_as_if_they_arrived_apart(policy, perf):
    """Two jobs arriving in the same second: the shorter starts, and the longer may share with
    it in the same pass (before: it waited for the first to end, 6,600 s instead of 3,600 s)."""
    rate = perf.table.alone
    host, guest = GOOD[1], GOOD[0]
    for gap in (0.0, 1.0):
        jobs = [JobSpec("b", 0.0, 1, host, total_steps=3000 * rate[(host, 1, "v100")]),
                JobSpec("a", gap, 1, guest, total_steps=3600 * rate[(guest, 1, "v100")])]
        res = Simulator(jobs, homogeneous(1, 1), make_policy(policy), perf,
                        restart=RestartCost(0.0)).run()
        jct = res.table.end - res.table.submit
        assert jct[0] == pytest.approx(3000) and jct[1] == pytest.approx(3600, abs=2)


@pytest.mark.parametrize("types", [GOOD, BAD, ("ResNet-50 (batch size 64)", "ResNet-18 (batch size 16)"),
                                   ("Transformer (batch size 16)", "ResNet-18 (batch size 32)")])
def test_a_host_started_in_the_same_pass_is_tested_with_its_remaining_time(types, perf):
    """Both jobs wait; the shorter gets the idle GPU and the other shares with it iff the pair's
    test passes with the new host's remaining time alone."""
    guest, host = types
    rate = perf.table.alone
    jobs = [JobSpec("b", 0.0, 1, host, total_steps=2000 * rate[(host, 1, "v100")]),
            JobSpec("a", 0.0, 1, guest, total_steps=2500 * rate[(guest, 1, "v100")])]
    snap, _ = snapshot(jobs, homogeneous(1, 1), perf)
    dec = make_policy("sjf-bsbf").decide(snap)
    assert dec.gpus[0] == 1 and 1 not in dec.share.values()
    xi_a = 1 / perf.pack_slowdown(guest, host, "v100")
    xi_b = 1 / perf.pack_slowdown(host, guest, "v100")
    t_seq, t_con = pair_times(2500.0, 2000.0, xi_a, xi_b)
    assert (dec.share.get(1) == (0, "pack")) == (t_con < t_seq)
    assert (1 in make_policy("sjf-ffs").decide(snap).share) == perf.fits_together(guest, host, "v100")


# -- preemption (the reference's plain sjf-bsbf) ---------------------------------------------------

def _one_gpu_snap(perf, running_steps, waiting_steps, running_type=NOFIT[1], waiting_type=NOFIT[0],
                  total=None, running_rate=None):
    rate = perf.table.alone
    jobs = [JobSpec("r", 0.0, 1, running_type,
                    total_steps=total or running_steps * rate[(running_type, 1, "v100")]),
            JobSpec("w", 1.0, 1, waiting_type, total_steps=waiting_steps * rate[(waiting_type, 1, "v100")])]
    snap, table = snapshot(jobs, homogeneous(1, 1), perf, running={0: (0, 1)})
    table.rate[0] = running_rate or table.rates[0, 0]       # running at its rate alone
    return snap


def test_preempt_false_is_the_default_and_never_preempts(perf):
    snap = _one_gpu_snap(perf, 36000, 600)
    for name in ("sjf-bsbf", "sjf-ffs", "sjf-bsbf:span=false"):
        dec = make_policy(name).decide(snap)
        assert dec.gpus[0] == 1 and dec.gpus[1] == 0


@pytest.mark.parametrize("name", ["sjf-bsbf:preempt=true", "sjf-ffs:preempt=true",
                                  "sjf-bsbf:preempt=true,span=false"])
def test_preempt_true_evicts_a_longer_running_job_when_the_short_one_cannot_start(name, perf):
    dec = make_policy(name).decide(_one_gpu_snap(perf, 36000, 600))
    assert dec.gpus[0] == 0 and dec.gpus[1] == 1 and not dec.share
    # a running job that is shorter (earlier in SJF order) stays
    dec = make_policy(name).decide(_one_gpu_snap(perf, 300, 600))
    assert dec.gpus[0] == 1 and dec.gpus[1] == 0
    # nor one with 100 steps or fewer left, however long that takes
    for steps, evicted in ((100.0, False), (101.0, True)):
        snap = _one_gpu_snap(perf, 0, 600, total=steps, running_rate=steps / 36000)
        assert (make_policy(name).decide(snap).gpus[0] == 0) == evicted


def test_preempt_true_shares_before_it_preempts(perf):
    """A job that can share beneficially does not preempt."""
    dec = make_policy("sjf-bsbf:preempt=true").decide(
        _one_gpu_snap(perf, 36000, 600, running_type=GOOD[1], waiting_type=GOOD[0]))
    assert dec.gpus[0] == 1 and dec.share == {1: (0, "pack")}


def test_preempted_host_leaves_its_guest_running_without_a_restart(perf):
    """H hosts G on GPU 0, X runs on GPU 1; S (short, fits beside neither G nor X) arrives:
    the reference's preemption evicts H (the longest), whose GPU stays with G, then X; S starts on
    GPU 1. G keeps running on its GPU: no restart, no preemption."""
    H, G, X, S = ("ResNet-18 (batch size 16)", "ResNet-50 (batch size 64)",
                  "ResNet-50 (batch size 128)", "ResNet-50 (batch size 128)")
    assert perf.fits_together(G, H, "v100") and not perf.fits_together(G, X, "v100")
    assert not perf.fits_together(S, G, "v100") and not perf.fits_together(S, X, "v100")
    rate = perf.table.alone

    def job(name, t, typ, secs):
        return JobSpec(name, t, 1, typ, total_steps=secs * rate[(typ, 1, "v100")])
    jobs = [job("H", 0.0, H, 40000), job("X", 0.0, X, 30000), job("G", 10.0, G, 9000),
            job("S", 20.0, S, 600)]
    for preempt in (False, True):
        sim = Simulator(jobs, homogeneous(1, 2), make_policy(f"sjf-bsbf:preempt={preempt}"), perf,
                        restart=RestartCost(30.0), record_events=True)
        res = sim.run()
        t = res.table
        assert (t.state == DONE).all()
        log = [(now, jobs[r].job_id, what) for now, r, what, *_ in res.event_log]
        assert (10.0, "G", "start") in log                   # G shares with H
        if not preempt:
            assert t.preemptions.sum() == 0
            continue
        at20 = [(who, what) for now, who, what in log if now == 20.0]
        assert ("X", "preempt") in at20 and ("S", "start") in at20
        assert ("G", "reshare") in at20                      # G now owns H's GPU
        # H, preempted, may start again in the same pass: here as G's guest (a restart)
        assert ("H", "preempt") in at20 or ("H", "migrate") in at20
        assert t.preemptions[2] == 0 and t.restarts[2] == 0
        assert job_metrics(res).gpu_seconds.sum() == pytest.approx(timeline_gpu_seconds(res),
                                                                  rel=1e-9)


def test_preemptive_runs_end_to_end(perf):
    jobs = random_jobs(150, seed=7, gap=25.0, max_gpus=4)
    from quanta.workloads.catalog import drawable_types
    types = drawable_types()
    rng = np.random.default_rng(7)
    jobs = [j.with_(job_type=types[int(rng.integers(len(types)))]) for j in jobs]
    for name in ("sjf-bsbf:preempt=true", "sjf-ffs:preempt=true",
                 "sjf-bsbf:preempt=true,span=false,accumulate=true"):
        res = Simulator(jobs, homogeneous(2, 4), make_policy(name), perf,
                        restart=RestartCost(5.0)).run()
        assert (res.table.state == DONE).all() and res.table.preemptions.sum() > 0
        assert job_metrics(res).gpu_seconds.sum() == pytest.approx(timeline_gpu_seconds(res),
                                                                  rel=1e-9)


def test_a_preempted_host_may_come_back_as_its_former_guests_guest(perf):
    """H hosts G; S (fits beside nobody) evicts H, whose GPU stays with G, then X, and starts;
    H, preempted, shares with G in the same pass: G is the host now, H its guest, G never
    restarts (the job table says so: no two jobs are each other's guests)."""
    H, G, X, S = ("Recommendation (batch size 2048)", "A3C", "ResNet-50 (batch size 128)",
                  "ResNet-50 (batch size 128)")
    assert perf.fits_together(G, H, "v100") and not perf.fits_together(G, X, "v100")
    assert not any(perf.fits_together(S, o, "v100") for o in (H, G, X))
    rate = perf.table.alone

    def job(name, t, typ, secs):
        return JobSpec(name, t, 1, typ, total_steps=secs * rate[(typ, 1, "v100")])
    jobs = [job("H", 0.0, H, 40000), job("X", 0.0, X, 30000), job("G", 10.0, G, 9000),
            job("S", 20.0, S, 600)]
    sim = Simulator(jobs, homogeneous(1, 2), make_policy("sjf-bsbf:preempt=true"), perf,
                    restart=RestartCost(30.0), record_events=True)
    seen = {}
    apply_ = sim._apply

    def spy(now, trs, *args):
        out = apply_(now, trs, *args)
        t = sim.table
        seen[now] = [(bool(t.is_guest[r]), int(t.partner[r]), int(t.restarts[r])) for r in range(4)]
        return out
    sim._apply = spy
    res = sim.run()
    assert seen[20.0][0][:2] == (True, 2) and seen[20.0][2][:2] == (False, 0)   # H guest of G
    assert seen[20.0][2][2] == 0 and res.table.preemptions[2] == 0                # G: no restart
    assert (res.table.state == DONE).all()
    assert job_metrics(res).gpu_seconds.sum() == pytest.approx(timeline_gpu_seconds(res), rel=1e-9)
