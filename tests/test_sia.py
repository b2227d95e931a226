"""Sia on hand-built snapshots: the fast type goes to the job that gains most from it, no job grows
more than 2x past what it has run with, and every job gets GPUs while capacity allows."""

from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.policies import make_policy
from quanta.policies.sia import config_counts

from conftest import ToyPerf
from test_policies_baselines import snapshot


def LinearPerf(speed):
    """steps/s = speed[(job type, GPU type)] x GPUs ** 0.9."""
    return ToyPerf(speed=speed)


def snap_of(specs, cluster, perf, now=1000.0, running=(), state=None):
    return snapshot(specs, cluster, perf, now=now, running=running, state=state)[0]


def test_config_counts_follow_sia():
    assert config_counts(8, 64) == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
    assert config_counts(4, 24) == [1, 2, 4, 8, 12, 16, 20, 24]
    assert config_counts(8, 16) == [1, 2, 4, 8, 16]


def test_fast_type_goes_to_the_job_that_gains_most():
    c = Cluster((NodeSpec("a", "a100", 1), NodeSpec("t", "t4", 1)))
    perf = LinearPerf({("gains", "a100"): 4.0, ("gains", "t4"): 1.0,
                       ("flat", "a100"): 1.2, ("flat", "t4"): 1.0})
    specs = [JobSpec("f", 0.0, 1, "flat", total_steps=1e6), JobSpec("g", 0.0, 1, "gains", total_steps=1e6)]
    dec = make_policy("sia").decide(snap_of(specs, c, perf))
    types = [c.types[t] for t in dec.gpu_type]
    assert types == ["t4", "a100"]


def test_never_scales_more_than_twice_what_it_ran_with():
    c = Cluster(tuple(NodeSpec(f"n{i}", "v100", 8) for i in range(2)))
    perf = LinearPerf({("x", "v100"): 1.0})
    specs = [JobSpec("x", 0.0, 1, "x", total_steps=1e6)]
    dec = make_policy("sia").decide(snap_of(specs, c, perf))
    assert dec.gpus[0] == 2                                   # fresh: 1 GPU profiled -> at most 2
    snap = snap_of(specs, c, perf, running={0: (0, 2)}, state={"seen": {}})
    dec = make_policy("sia").decide(snap)
    assert dec.gpus[0] == 4                                   # ran with 2 -> at most 4
    assert make_policy("sia:adaptive=false").decide(snap).gpus[0] == 1   # rigid: its request


def test_every_job_is_admitted_when_capacity_allows_and_no_gpu_idles():
    perf = LinearPerf({("x", "v100"): 1.0})
    specs = [JobSpec(f"j{i}", 0.0, 1, "x", total_steps=1e6) for i in range(4)]
    roomy = Cluster((NodeSpec("n", "v100", 8),))
    dec = make_policy("sia").decide(snap_of(specs, roomy, perf))
    assert list(dec.gpus) == [2, 2, 2, 2]      # everyone admitted (lambda_n), each at its 2x cap
    tight = Cluster((NodeSpec("n", "v100", 4),))
    dec = make_policy("sia").decide(snap_of(specs, tight, perf))
    # with p = -0.5 a second GPU lowers a job's term (1 -> 0.73) more than admitting another job
    # saves (lambda_n - 1 = 0.1): Sia grows two jobs rather than admitting four
    assert dec.gpus.sum() == 4 and sorted(dec.gpus) == [0, 0, 2, 2]
