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
