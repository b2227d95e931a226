"""Gandiva and the core's GPU sharing: time-slicing, packing kept or reverted by measurement,
migration to freed GPUs, grow-shrink, and GPU-seconds accounting with shared GPUs."""

import pytest

from quanta.core.jobtable import DONE
from quanta.model import JobSpec
from quanta.perf.table import SLICE_OVERHEAD
from quanta.policies import make_policy
from quanta.report.metrics import job_metrics, summary
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost

from conftest import homogeneous, random_jobs
from test_engine import timeline_gpu_seconds

HALF = 0.5 * (1 - SLICE_OVERHEAD)
GOOD = ("ResNet-50 (batch size 16)", "ResNet-18 (batch size 16)")        # measured: no slowdown
BAD = ("Recommendation (batch size 512)", "ResNet-50 (batch size 16)")   # measured: 0.38 together


def run(jobs, policy, gpus=1, nodes=1, restart=0.0, events=False):
    return Simulator(jobs, homogeneous(nodes, gpus), make_policy(policy), _perf(),
                     restart=RestartCost(restart), record_events=events).run()


def _perf():
    from quanta.perf import TableModel
    return TableModel()


def test_oversubscribed_jobs_time_slice_then_run_alone():
    a = JobSpec("a", 0.0, 1, "", total_steps=1000.0)
    b = JobSpec("b", 100.0, 1, "", total_steps=1000.0)
    res = run([a, b], "gandiva:pack=false")
    t = res.table
    end_a = 100.0 + 900.0 / HALF                    # a shares the GPU half-and-half from t = 100
    assert t.end[0] == pytest.approx(end_a)
    done_b = (end_a - 100.0) * HALF                 # then b runs alone on it, without a restart
    assert t.end[1] == pytest.approx(end_a + 1000.0 - done_b)
    assert t.preemptions.sum() == 0 and t.first_start[1] == pytest.approx(100.0)
    assert summary(res)["gpu_util"] <= 1.0
    assert job_metrics(res).gpu_seconds.sum() == pytest.approx(timeline_gpu_seconds(res))


@pytest.mark.parametrize("pair, kept", [(GOOD, True), (BAD, False)])
def test_packing_is_kept_only_if_measured_to_help(pair, kept):
    perf = _perf()
    a = JobSpec("a", 0.0, 1, pair[0], total_steps=perf.table.alone[(pair[0], 1, "v100")] * 20_000)
    b = JobSpec("b", 10.0, 1, pair[1], total_steps=perf.table.alone[(pair[1], 1, "v100")] * 20_000)
    res = run([a, b], "gandiva", events=True)
    # b starts time-sliced at 10 s, is tried packed at the next quantum (70 s) ...
    assert (res.table.state == DONE).all()
    modes = [e[6] for e in res.event_log if e[1] == 1 and e[2] in ("start", "reshare")]
    assert modes[0] == "slice" and "pack" in modes
    # ... and after a quantum of measurement the pack is kept (good pair) or reverted (bad pair)
    assert (modes[-1] == "pack") == kept
    if not kept:
        assert modes.count("pack") == 1             # never tried again


def test_sharing_job_migrates_to_freed_gpus():
    jobs = [JobSpec("a", 0.0, 1, "", total_steps=5000.0), JobSpec("b", 0.0, 1, "", total_steps=300.0),
            JobSpec("c", 50.0, 1, "", total_steps=2000.0)]
    res = run(jobs, "gandiva:pack=false", gpus=2, restart=5.0)
    t = res.table
    assert t.migrations[2] == 1                     # c moved to b's GPU when b finished
    assert t.end[1] == pytest.approx(300.0)
    assert (t.state == DONE).all()


def test_elastic_job_grows_when_idle_and_shrinks_when_others_wait():
    elastic = JobSpec("e", 0.0, 1, "", total_steps=20_000.0, max_gpus=4)
    late = JobSpec("l", 1000.0, 2, "", total_steps=500.0)
    res = run([elastic, late], "gandiva", gpus=4, restart=0.0)
    t = res.table
    assert t.reconfigs[0] == 2                      # grew to 4, then shrank back to 1
    assert t.first_start[1] == pytest.approx(1000.0)


def test_gandiva_conserves_gpu_seconds_on_a_busy_trace():
    res = run(random_jobs(150, seed=2, gap=20.0, max_gpus=4), "gandiva", gpus=4, nodes=2, restart=10.0)
    m = job_metrics(res)
    assert (res.table.state == DONE).all()
    assert m.gpu_seconds.sum() == pytest.approx(timeline_gpu_seconds(res), rel=1e-9)
    assert res.shared.max() > 0 and summary(res)["gpu_util"] <= 1.0


def test_pair_that_does_not_fit_together_is_never_packed():
    perf = _perf()
    pair = ("ResNet-50 (batch size 32)", "ResNet-50 (batch size 128)")    # measured 0: no fit
    a = JobSpec("a", 0.0, 1, pair[0], total_steps=perf.table.alone[(pair[0], 1, "v100")] * 5_000)
    b = JobSpec("b", 10.0, 1, pair[1], total_steps=perf.table.alone[(pair[1], 1, "v100")] * 5_000)
    res = run([a, b], "gandiva", events=True)
    modes = {e[6] for e in res.event_log if e[2] in ("start", "reshare")}
    assert "pack" not in modes and (res.table.state == DONE).all()


def test_memory_fit_from_measured_pairs_and_larger_gpus():
    perf = _perf()
    a, b = "ResNet-50 (batch size 64)", "ResNet-50 (batch size 128)"   # 0 on V100, P100, K80
    assert not perf.fits_together(a, b, "v100")
    assert perf.pack_slowdown(a, b, "v100") == 0.0
    assert not perf.fits_together(a, b, "t4")        # 16 GB: no more memory than the V100
    # measured to fit on a 16 GB P100 (not on the V100): then any >= 16 GB GPU is assumed to fit
    assert perf.fits_together("ResNet-50 (batch size 32)", "ResNet-50 (batch size 128)", "t4")
    assert perf.fits_together(a, b, "a100")          # 40 GB: at least twice the memory
    assert perf.pack_slowdown(a, b, "a100") > 0
    good = ("ResNet-50 (batch size 16)", "ResNet-18 (batch size 16)")
    assert perf.fits_together(*good, "v100") and perf.fits_together(*good, "t4")
    assert perf.fits_together("vgg19", "bert", "v100")   # unmeasured: assumed to fit


def test_jobs_submitted_together_time_slice_from_the_start():
    """A hyper-parameter search submitted at once on an oversubscribed GPU is time-sliced, as
    when the jobs arrive a second apart (it used to run back to back: a host had to be running
    already)."""
    from quanta.model import Cluster, JobSpec, NodeSpec
    from quanta.perf.table import TableModel
    from quanta.policies import make_policy
    from quanta.sim import Simulator
    from quanta.sim.engine import RestartCost
    c = Cluster((NodeSpec("n", "v100", 1),))
    starts = {}
    for gap in (0.0, 1.0):
        jobs = [JobSpec(f"j{i}", i * gap, 1, "ResNet-18 (batch size 32)", total_steps=20000)
                for i in range(2)]
        res = Simulator(jobs, c, make_policy("gandiva:pack=false"), TableModel(),
                        restart=RestartCost(0.0)).run()
        starts[gap] = res.table.first_start.tolist()
        ends = res.table.end
        assert abs(ends[0] - ends[1]) < 5.0        # sliced: both finish together
    assert starts[0.0] == [0.0, 0.0] and starts[1.0] == [0.0, 1.0]


def test_a_waiting_job_slices_with_the_first_arrived_unshared_job_of_its_size():
    """The host a waiting job time-slices with: among running jobs holding as many GPUs as it
    asks for, and jobs started by the same decision, not sharing yet, the first to arrive; a
    job with no such host waits (the policy's per-size host heaps, against the rule)."""
    from quanta.policies.gandiva import Gandiva

    seen = []

    class Recorded(Gandiva):
        def decide(self, snap):
            dec = super().decide(snap)
            rows = snap.jobs.rows
            seen.append((snap.now, {int(rows[g]): int(rows[h]) for g, (h, _m) in dec.share.items()}))
            return dec

    long = 50_000.0
    jobs = [JobSpec("a", 0.0, 2, "", total_steps=long), JobSpec("b", 5.0, 1, "", total_steps=long),
            JobSpec("b2", 6.0, 1, "", total_steps=long),
            JobSpec("c", 10.0, 1, "", total_steps=long), JobSpec("d", 10.0, 2, "", total_steps=long),
            JobSpec("e", 20.0, 1, "", total_steps=long), JobSpec("f", 20.0, 1, "", total_steps=long)]
    Simulator(jobs, homogeneous(1, 4), Recorded(pack=False), _perf(), restart=RestartCost(0.0)).run()
    at = dict(seen)
    assert at[10.0] == {3: 1, 4: 0}          # c with b (not b2, later; not a, 2 GPUs), d with a
    assert at[20.0] == {3: 1, 4: 0, 5: 2}    # e with b2; f waits: no unshared 1-GPU job left
    # jobs arriving together on an empty one-GPU cluster: the second slices with the first at once
    seen.clear()
    pair = [JobSpec("x", 0.0, 1, "", total_steps=long), JobSpec("y", 0.0, 1, "", total_steps=long)]
    Simulator(pair, homogeneous(1, 1), Recorded(pack=False), _perf(), restart=RestartCost(0.0)).run()
    assert seen[0] == (0.0, {1: 0})


def test_jobs_the_performance_model_cannot_share_wait_instead_of_time_slicing():
    """Pollux's and Sia's catalog jobs share GPUs with no one (their rate shared is 0): gandiva
    time-sliced them when the cluster was full anyway, and the mechanism stopped the run
    ('gandiva put job ... where it cannot run'). They wait for free GPUs now."""
    import quanta

    sim = quanta.simulate("sia-philly-1", "sia-64", ["gandiva", "fifo"], max_jobs=16)
    rows = {r["policy"]: r for r in sim.summary.to_dict("records")}
    assert rows["gandiva"]["finished"] == rows["fifo"]["finished"] == 16
    assert not sim.results[0].shared.any()          # (moves left: defragmentations only)


def test_a_spread_job_left_alone_is_defragmented_without_another_change():
    """Gandiva's defragmentation: a 4-GPU job that could only start over two nodes moves onto one
    when the jobs around it finish, although no other job changes in that decision (the mechanism
    dropped a decision's defragmentations when nothing else moved: the job ran spread to its end)."""
    jobs = [JobSpec(str(i), 0.0, 1, "", total_steps=200.0 if i in (3, 5) else 2000.0)
            for i in range(6)] + [JobSpec("6", 300.0, 4, "", total_steps=5000.0)]
    moves = {}
    for name in ("gandiva", "gandiva:defrag=false"):
        res = run(jobs, name, gpus=4, nodes=2, events=True)
        assert (res.table.state == DONE).all()
        starts = [e for e in res.event_log if e[1] == 6 and e[2] == "start"]
        assert starts and starts[0][5] == 2                    # started over two nodes
        moves[name] = [(e[0], e[5]) for e in res.event_log if e[1] == 6 and e[2] == "migrate"]
    assert moves["gandiva"] == [(2000.0, 1)]                   # onto one node once alone
    assert moves["gandiva:defrag=false"] == []
