"""Allocations over several GPU types in the core: one job's workers on two types (synchronous:
the slowest worker sets the pace) and forked copies (HadarE: summed rates less model averaging)."""

from dataclasses import dataclass

import numpy as np
import pytest

from quanta.core.decision import Decision
from quanta.core.jobtable import DONE
from quanta.core.mechanism import Kind, apply
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.perf.base import Part, aggregation_seconds, mixed_rate
from quanta.policies.base import Policy, PolicyError
from quanta.report.metrics import job_metrics, timeline_integral
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost

from conftest import ToyPerf
from test_policies_baselines import snapshot


def v100_p100(gpus=2, bw=0.0):
    return Cluster((NodeSpec("v0", "v100", gpus, inter_bw_gbps=bw),
                    NodeSpec("p0", "p100", gpus, inter_bw_gbps=bw)))


PERF = ToyPerf(speed={("x", "p100"): 0.5}, exponent={"x": 1.0})


@dataclass
class Fixed(Policy):
    """Job 0 on `counts` GPUs per type (forked every `fork` s if given), others wait."""
    counts: tuple = (2, 2)
    fork: float = 0.0
    mixes_types = True

    def decide(self, snap):
        dec = Decision.empty(snap)
        for r in range(len(snap.jobs)):
            if snap.jobs.rows[r] == 0:
                dec.gpus[r], dec.gpu_type[r] = sum(self.counts), 0
                dec.mixed[r] = np.array(self.counts)
                if self.fork:
                    dec.fork[r] = self.fork
        return dec


def test_mixed_gang_is_placed_over_two_types_and_runs_at_the_slowest_workers_rate():
    spec = [JobSpec("a", 0.0, 4, "x", total_steps=4000.0)]
    res = Simulator(spec, v100_p100(), Fixed(), PERF, restart=RestartCost(0.0),
                    record_events=True).run()
    t = res.table
    assert t.state[0] == DONE
    # 4 workers, 2 per type: every step waits for the P100 workers (0.5 steps/s per GPU)
    slow = PERF.rate(spec[0], "p100", 4, 2, False)
    assert slow == pytest.approx(2.0)
    assert t.end[0] == pytest.approx(4000.0 / slow)
    assert t.types_used[0] == 0b11
    assert res.busy[0].tolist() == [2, 2]                  # GPUs per type held by the gang
    gpu_s = job_metrics(res).gpu_seconds
    assert gpu_s[0] == pytest.approx(4 * t.end[0])
    assert gpu_s.sum() == pytest.approx(timeline_integral(res, res.busy.sum(axis=1)))


def test_mixed_allocation_is_validated_and_kept_without_restart():
    specs = [JobSpec("a", 0.0, 4, "x", total_steps=4000.0)]
    snap, t = snapshot(specs, v100_p100(), PERF)
    from quanta.placement.occupancy import Occupancy
    occ = Occupancy(v100_p100())
    dec = Fixed().decide(snap)
    trs = apply(snap, dec, occ)
    assert len(trs) == 1 and trs[0].kind is Kind.START
    assert [(p.gpu_type, p.count) for p in trs[0].parts] == [("v100", 2), ("p100", 2)]
    assert trs[0].fork is None
    assert mixed_rate(PERF, specs[0], trs[0].parts) == pytest.approx(2.0)
    t.apply_transitions(0.0, np.array([0]), np.array([0]), np.array([trs[0].gpu_type]),
                        [trs[0].gpus], np.array([2.0]), np.array([0.0]))
    assert t.mix[0].tolist() == [2, 2]
    snap2 = type(snap)(10.0, snap.cluster, PERF, t.view(np.array([0]), 10.0), occ.up_capacity(),
                       occ.node_free.copy(), occ.node_up.copy())
    assert snap2.jobs.mixed[0] and snap2.jobs.parts[0].tolist() == [2, 2]
    assert apply(snap2, Fixed().decide(snap2), occ) == []           # same parts: lease kept
    with pytest.raises(PolicyError, match="asks for 3 p100"):
        apply(snap, Fixed(counts=(1, 3)).decide(snap), Occupancy(v100_p100()))
    only_v100 = [specs[0].with_(gpu_types=("v100",))]
    snap3, _ = snapshot(only_v100, v100_p100(), PERF)
    with pytest.raises(PolicyError, match="may not use"):
        apply(snap3, Fixed().decide(snap3), Occupancy(v100_p100()))
    bad = Fixed().decide(snap)
    bad.gpus[0] = 3
    with pytest.raises(PolicyError, match="adding up"):
        apply(snap, bad, Occupancy(v100_p100()))


def test_forked_copies_sum_their_rates_less_model_averaging_and_finish_the_work():
    perf = ToyPerf(speed={("ResNet-50 (batch size 64)", "p100"): 0.5}, exponent={})
    perf.model_bytes = lambda job: 100e6                     # 100 MB of parameters
    spec = [JobSpec("a", 0.0, 2, "ResNet-50 (batch size 64)", total_steps=5000.0)]
    cl = v100_p100(bw=1.0)                                    # 1 GB/s between nodes
    res = Simulator(spec, cl, Fixed(counts=(2, 2), fork=100.0), perf,
                    restart=RestartCost(0.0)).run()
    agg = aggregation_seconds(perf, spec[0], 2, 1.0)
    assert agg == pytest.approx(2 * 0.5 * 100e6 / 1e9)       # ring all-reduce of 2 copies: 0.1 s
    one = perf.rate(spec[0], "v100", 2)                       # each copy: the job's 2-GPU gang
    rate = (one + perf.rate(spec[0], "p100", 2)) * (1 - agg / 100.0)
    assert mixed_rate(perf, spec[0], (Part("v100", 2, 1, True), Part("p100", 2, 1, True)),
                      (100.0, agg)) == pytest.approx(rate)
    t = res.table
    assert t.state[0] == DONE and t.end[0] == pytest.approx(5000.0 / rate)
    assert t.end[0] < 5000.0 / one                            # faster than one copy alone
    assert t.prog0[0] == pytest.approx(5000.0)
