"""Pollux on hand-built snapshots: GPUs go where they add goodput, the fairness knob p trades
efficiency for fairness, every job is admitted first, and the 2x growth rule holds."""

from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.policies import make_policy

from conftest import ToyPerf
from test_sia import snap_of


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
