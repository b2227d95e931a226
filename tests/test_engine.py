"""Simulator invariants and exactness on hand-built workloads."""

import numpy as np
import pytest

from quanta.core.jobtable import DONE, UNSCHEDULABLE
from quanta.model import JobSpec
from quanta.policies import make_policy
from quanta.report.metrics import job_metrics, summary
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost
from quanta.sim.faults import FailureModel, NodeOutage

from conftest import homogeneous, random_jobs

BASELINES = ["fifo", "sjf", "srtf", "las", "fifo:backfill=false", "las:backfill=false"]


def timeline_gpu_seconds(res):
    """GPU-seconds held by jobs according to the timeline: busy GPUs plus shared (second) jobs."""
    held = res.busy.sum(axis=1) + res.shared
    return float(np.sum(held[:-1] * np.diff(res.times)))


@pytest.mark.parametrize("policy", BASELINES)
def test_invariants_on_reference_cluster(policy, perf):
    jobs = random_jobs(400, seed=1, gap=40.0)
    res = Simulator(jobs, homogeneous(), make_policy(policy), perf,
                    restart=RestartCost(15.0)).run()
    m = job_metrics(res)
    t = res.table
    assert np.all(t.state == DONE), "every job finishes"
    dur = np.array([j.duration_s for j in jobs])
    # JCT >= run time alone on the reference allocation (here: the requested V100s, consolidated)
    assert np.all(m.jct >= dur - 1e-6)
    # a 1-GPU job (always consolidated) that started at submit and was never preempted runs
    # exactly its duration; bigger gangs may have been spread over nodes (slower, by design)
    clean = (t.preemptions == 0) & (t.first_start == t.submit) & (t.req == 1)
    assert clean.any()
    np.testing.assert_allclose(m.jct[clean], dur[clean], rtol=1e-9)
    # GPU-seconds conserved: per-job accounting == integral of the busy timeline
    assert np.isclose(m.gpu_seconds.sum(), timeline_gpu_seconds(res), rtol=1e-9)
    s = summary(res)
    assert 0 < s["gpu_util"] <= 1.0
    assert np.all(res.busy.sum(axis=1) <= 32)
    assert s["finished"] == 400


def test_same_seed_same_result_bit_for_bit(perf):
    jobs = random_jobs(300, seed=3, gap=20.0)
    a = Simulator(jobs, homogeneous(2), make_policy("las"), perf).run()
    b = Simulator(jobs, homogeneous(2), make_policy("las"), perf).run()
    assert np.array_equal(a.table.end, b.table.end)
    assert np.array_equal(a.times, b.times) and np.array_equal(a.busy, b.busy)


def test_completion_is_exact_not_stepped(perf):
    job = JobSpec("solo", 10.0, 2, "", total_steps=1234.5678, duration_s=1234.5678)
    res = Simulator([job], homogeneous(1), make_policy("fifo"), perf).run()
    assert res.table.end[0] == pytest.approx(10.0 + 1234.5678, abs=1e-9)
    assert res.events == 2


def test_preemption_charges_restart_delay(perf):
    # LAS: long job runs alone, a short job arrives and preempts it (less attained service).
    long_ = JobSpec("long", 0.0, 8, "", total_steps=1000.0, duration_s=1000.0)
    short = JobSpec("short", 100.0, 8, "", total_steps=50.0, duration_s=50.0)
    res = Simulator([long_, short], homogeneous(1), make_policy("las"), perf,
                    restart=RestartCost(20.0)).run()
    t = res.table
    assert t.end[1] == pytest.approx(150.0)            # short job: no restart (first start)
    assert t.preemptions[0] == 1 and t.restarts[0] == 1
    assert t.end[0] == pytest.approx(1000.0 + 50.0 + 20.0)  # waited 50 s, then paid 20 s restore


def test_restart_cost_per_job_type(perf):
    rc = RestartCost(10.0, {"ResNet-18 (batch size 32)": 99.0})
    assert rc(JobSpec("a", 0, 1, "ResNet-18 (batch size 32)")) == 99.0
    assert rc(JobSpec("b", 0, 1, "")) == 10.0


def test_impossible_job_is_reported_not_hung(perf):
    jobs = [JobSpec("big", 0.0, 64, "", total_steps=10.0), JobSpec("ok", 0.0, 1, "", total_steps=10.0),
            JobSpec("k80only", 0.0, 1, "", total_steps=10.0, gpu_types=("k80",))]
    res = Simulator(jobs, homogeneous(1), make_policy("fifo"), perf).run()
    assert res.table.state[0] == UNSCHEDULABLE and res.table.state[2] == UNSCHEDULABLE
    assert res.table.state[1] == DONE


def test_scripted_node_outage_preempts_and_recovers(perf):
    jobs = [JobSpec("a", 0.0, 8, "", total_steps=1000.0), JobSpec("b", 0.0, 8, "", total_steps=1000.0)]
    res = Simulator(jobs, homogeneous(2), make_policy("fifo"), perf, restart=RestartCost(30.0),
                    outages=[NodeOutage(node=0, at=100.0, duration=500.0)]).run()
    t = res.table
    hit = int(np.argmax(t.preemptions))
    assert t.preemptions[hit] == 1
    assert t.end[1 - hit] == pytest.approx(1000.0)
    # the victim waits for the node (the other node is busy until 1000 s), then restores
    assert t.end[hit] == pytest.approx(600.0 + 30.0 + 900.0)
    assert np.all(t.state == DONE)


def test_random_failures_are_seeded(perf):
    jobs = random_jobs(200, seed=5, gap=30.0)
    fm = FailureModel(mtbf_s=20_000.0, repair_s=600.0, seed=7)
    a = Simulator(jobs, homogeneous(4), make_policy("las"), perf, failures=fm).run()
    b = Simulator(jobs, homogeneous(4), make_policy("las"), perf, failures=fm).run()
    assert np.array_equal(a.table.end, b.table.end)
    assert a.table.preemptions.sum() > 0
    assert np.all(a.table.state == DONE)


def test_heterogeneous_rates_follow_the_table(perf):
    from quanta.model import Cluster, NodeSpec
    c = Cluster((NodeSpec("k", "k80", 4),))
    job = JobSpec("r", 0.0, 1, "ResNet-18 (batch size 32)", total_steps=1000.0)
    res = Simulator([job], c, make_policy("fifo"), perf).run()
    rate_k80 = perf.table.alone[("ResNet-18 (batch size 32)", 1, "k80")]
    assert res.table.end[0] == pytest.approx(1000.0 / rate_k80)


class RecordingRounds:
    """A round-based policy (FIFO decisions every 100 s) that records when it was called."""

    interval = 100.0

    def __init__(self):
        self.calls = []

    def label(self):
        return "rounds"

    def decide(self, snap):
        self.calls.append((snap.now, snap.events))
        return make_policy("fifo").decide(snap)


def test_round_based_policy_decides_on_ticks_only(perf):
    jobs = [JobSpec("a", 30.0, 1, "", total_steps=250.0), JobSpec("b", 50.0, 1, "", total_steps=10.0)]
    pol = RecordingRounds()
    res = Simulator(jobs, homogeneous(1), pol, perf).run()
    assert [c[0] for c in pol.calls] == [100.0, 200.0, 300.0]   # every round while jobs are active
    assert res.table.end[0] == pytest.approx(350.0) and res.table.end[1] == pytest.approx(110.0)
    assert all("tick" in c[1] for c in pol.calls)


def test_an_arrival_at_a_round_start_is_that_rounds_when_no_tick_stood_for_it(perf):
    """Rounds at multiples of the interval: a job arriving on an idle cluster exactly at a round
    start is decided then (the first job of every trace, at time 0, waited a whole round; a job
    arriving at a round start after an idle spell too, while one arriving there with a tick
    queued was not); one arriving between round starts waits for the next."""
    jobs = [JobSpec("a", 0.0, 1, "", total_steps=50.0), JobSpec("b", 200.0, 1, "", total_steps=10.0),
            JobSpec("c", 450.0, 1, "", total_steps=10.0)]
    pol = RecordingRounds()
    res = Simulator(jobs, homogeneous(1), pol, perf).run()
    assert [c[0] for c in pol.calls] == [0.0, 200.0, 500.0]
    assert res.table.first_start.tolist() == [0.0, 200.0, 500.0]


def test_round_clock_moves_on_where_a_round_start_rounds_down():
    """Rounds from a first arrival at 7349.774233024967 s, 60 s long: at the round start
    65549.77423302496 s, (now - origin) / 60 is 969.9999999999999, and the next round computed
    as origin + (floor + 1) * 60 was that same instant again: the simulation stood still (Sia
    under --world gavel-sim, synthetic:3:20, seed 3)."""
    from quanta.core.loop import next_round
    now, origin = np.float64(65549.77423302496), 7349.774233024967
    assert np.floor((now - origin) / 60.0) == 969.0 and origin + 970 * 60.0 == now
    assert next_round(now, origin, 60.0) == origin + 971 * 60.0
    assert next_round(now - 1.0, origin, 60.0) == now            # between starts: the next one
    rng = np.random.default_rng(0)
    for origin, interval in zip(rng.uniform(0, 1e5, 300), rng.choice([60.0, 360.0, 300.0], 300)):
        for k in (1, 17, 970, 12345):
            at = origin + k * interval
            assert at < next_round(at, origin, interval) <= at + interval * (1 + 1e-9)


def test_sia_under_gavel_sims_rounds_finishes(tmp_path):
    """The run that stood still finishes (in about a second; a subprocess, so that a clock
    standing still again fails here instead of hanging the suite)."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "quanta.cli", "simulate", "--trace",
                           "synthetic:3:20", "--world", "gavel-sim", "--policy", "sia", "--seed",
                           "3", "--out", str(tmp_path / "o"), "--no-plots", "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    summary = (tmp_path / "o" / "summary.csv").read_text().splitlines()
    assert summary[1].startswith("sia,20,20,")       # 20 jobs, 20 finished


class NeverSchedules:
    interval = None

    def label(self):
        return "never"

    def decide(self, snap):
        from quanta.core.decision import Decision
        return Decision.empty(snap)


def test_policy_that_never_schedules_stalls_instead_of_hanging(perf):
    res = Simulator(random_jobs(5), homogeneous(1), NeverSchedules(), perf).run()
    assert res.stalled
    assert not np.any(res.table.state == DONE)
    from quanta.report.metrics import summary
    from quanta.report.output import markdown_report
    text = markdown_report([summary(res)], [res], ["a", "b", "c"], [])
    # (the report said the jobs "could never be scheduled": other policies run them)
    assert "the policy started none of the jobs still waiting" in text


class FirstJobOnly(NeverSchedules):
    """Runs the trace's first job (row 0) where it is waiting, none of the others."""

    def decide(self, snap):
        from quanta.core.decision import Decision
        dec = Decision.empty(snap)
        at = np.flatnonzero(snap.jobs.rows == 0)
        if at.size:
            dec.gpus[at] = snap.jobs.req[at]
            dec.gpu_type[at] = 0
        return dec


def test_a_stall_keeps_the_completion_that_left_it_in_the_timeline(perf):
    """The batch in which a stall is found (here: the one running job's completion) was not
    recorded: the timeline stopped at the job's start, so utilisation counted none of its GPU
    time (0 where it should be its GPU-seconds over the makespan)."""
    jobs = [j.with_(num_gpus=1) for j in random_jobs(3, seed=2, gap=0.0)]
    res = Simulator(jobs, homogeneous(1), FirstJobOnly(), perf).run()
    assert res.stalled and res.table.state[0] == DONE
    end = float(res.table.end[0])
    assert res.times[-1] == end and res.busy[-1].sum() == 0 and res.running[-1] == 0
    s = summary(res)
    assert s["gpu_util"] == pytest.approx((end - res.table.submit[0]) / (8 * s["makespan_s"]))
    assert s["gpu_util"] > 0


def test_openb_preset_is_the_alibaba_node_list():
    from quanta.model.presets import resolve_cluster
    c = resolve_cluster("openb")
    assert c.num_gpus == 6212
    assert set(c.types) == {"g2", "t4", "g3", "p100", "v100m32", "v100m16", "a10"}
    assert c.capacity[c.type_index("g2")] == 4392


def test_jobtable_extend_grows_every_column(perf):
    from quanta.core.jobtable import JobTable, PENDING
    jobs = random_jobs(6, seed=3, gap=10.0)
    full = JobTable(jobs, homogeneous(), perf)
    grown = JobTable([], homogeneous(), perf)
    rows = grown.extend(jobs[:4])
    grown.state[rows] = PENDING
    assert rows.tolist() == [0, 1, 2, 3]
    assert grown.extend(jobs[4:]).tolist() == [4, 5]
    for name, col in vars(full).items():
        if isinstance(col, np.ndarray) and name != "state":
            np.testing.assert_array_equal(getattr(grown, name), col, err_msg=name)
    assert grown.index == full.index and grown.state[:4].tolist() == [PENDING] * 4
    with pytest.raises(ValueError, match="duplicate job id"):
        grown.extend(jobs[:1])


def test_first_start_cost_delays_every_job(perf):
    jobs = random_jobs(20, seed=5, gap=400.0)
    plain = Simulator(jobs, homogeneous(), make_policy("fifo"), perf, restart=RestartCost(7.0)).run()
    first = Simulator(jobs, homogeneous(), make_policy("fifo"), perf,
                      restart=RestartCost(7.0, first_start_s=4.0)).run()
    never_preempted = plain.table.preemptions == 0
    assert never_preempted.all() and (first.table.preemptions == 0).all()
    np.testing.assert_allclose(first.table.end - plain.table.end, 4.0, atol=1e-6)


class PhasedPerf:
    """Toy model whose rate changes as a job trains: phase k (of 3, equal thirds of the work)
    runs at (k + 1) steps/s per GPU ** 0.5; records the phases it was asked about."""

    def __init__(self):
        self.asked = set()

    def rate(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None):
        self.asked.add(job.phase)
        return (job.phase + 1) * num_gpus ** 0.5

    def rate_matrix(self, jobs, types):
        return np.array([[self.rate(j, t, j.num_gpus) for t in types] for j in jobs])

    def phase_fractions(self, job):
        return np.array([1 / 3, 2 / 3, 1.0])

    def provenance(self, job, gpu_type):
        return "fitted"

    def shared_rate(self, *args, **kwargs):
        return 0.0


def test_jobs_are_re_rated_at_each_training_phase():
    """A job whose rate changes with progress (a goodput job's epochs) finishes exactly when the
    piecewise rates say, in every phase of its run, also across a preemption."""
    perf = PhasedPerf()
    job = JobSpec("a", 0.0, 1, "x", total_steps=300.0)
    res = Simulator([job], homogeneous(1, 1), make_policy("fifo"), perf,
                    restart=RestartCost(0.0)).run()
    # 100 steps at 1/s, 100 at 2/s, 100 at 3/s
    assert res.table.end[0] == pytest.approx(100 + 50 + 100 / 3)
    assert perf.asked == {0, 1, 2} and res.table.specs[0].phase == 2
    # LAS with two jobs time-shares one GPU: every job still runs its phases at their own rates
    jobs = [JobSpec("a", 0.0, 1, "x", total_steps=300.0), JobSpec("b", 10.0, 1, "x", total_steps=30.0)]
    res = Simulator(jobs, homogeneous(1, 1), make_policy("las"), PhasedPerf(),
                    restart=RestartCost(0.0)).run()
    # b (10 steps each at 1, 2, 3/s) preempts a at t=10 and runs alone for 18.33 s; then a
    # resumes in its first phase with 90 steps to go
    b_end = 10.0 + 10 + 5 + 10 / 3
    assert res.table.end[1] == pytest.approx(b_end)
    assert res.table.end[0] == pytest.approx(b_end + (100 - 10) + 50 + 100 / 3)


def test_goodput_jobs_speed_up_as_their_gradient_noise_grows():
    """deepspeech2 on 4 RTX 2080Tis re-tuning its batch (Sia, Pollux): at epoch 0 barely faster than
    on 1 GPU, by mid-training ~4x (the gradient noise scale grows), and the simulator charges it."""
    from quanta.perf.base import ADAPTIVE_BATCH
    from quanta.perf.goodput import GoodputPerf
    g = GoodputPerf()
    early = JobSpec("d", 0.0, 1, "deepspeech2", batch_size=20)
    late = early.with_(phase=40)
    ratio = [g.rate_with(s, "rtx", 4, 1, True, ADAPTIVE_BATCH) / g.rate_with(s, "rtx", 1, 1, True, ADAPTIVE_BATCH)
             for s in (early, late)]
    assert ratio[0] < 1.2 and ratio[1] > 3.0
    # at its own batch (no re-tuning) more GPUs only split the same batch: no statistical gain
    assert g.rate(late, "rtx", 4) == g.rate(early, "rtx", 4)
    fr = g.phase_fractions(early)
    assert len(fr) == 80 and fr[-1] == 1.0 and np.all(np.diff(fr) > 0)


def test_ideal_time_of_a_phased_job_sums_its_phases():
    res = Simulator([JobSpec("a", 0.0, 1, "x", total_steps=300.0)], homogeneous(1, 1),
                    make_policy("fifo"), PhasedPerf(), restart=RestartCost(0.0)).run()
    m = job_metrics(res)
    assert m.ideal[0] == pytest.approx(100 + 50 + 100 / 3)
    assert m.jct[0] == pytest.approx(m.ideal[0])


def test_a_job_re_rated_at_a_decision_still_resumed_when_its_restore_ended(perf):
    """Re-rating a running job folds its progress at that instant (`mark`), which moves the lazy
    accumulators' base; the snapshot's resume time stays the end of its restore. Before, a job
    re-rated at a round (sia-sim's job agents, an epoch ending on the round) looked to Sia and
    Pollux as if it were still restoring, so they learned nothing from it that round."""
    from quanta.core.jobtable import KIND_CODES, JobTable
    t = JobTable([JobSpec("a", 0.0, 1, "resnet50", total_steps=1e6)], homogeneous(1, 1), perf)
    t.apply_transitions(0.0, np.array([0]), np.array([KIND_CODES["start"]]), np.array([0]),
                        [np.array([0])], np.array([2.0]), np.array([30.0]))
    assert t.view(np.array([0]), 10.0).resume_at[0] == 30.0       # restoring
    t.mark(0, 60.0)
    t.rate[0] = 3.0
    view = t.view(np.array([0]), 60.0)
    assert view.resume_at[0] == 30.0 and view.resume_at[0] < 60.0
    assert t.progress(np.array([0]), 60.0)[0] == 2.0 * 30.0       # folded at the old rate


@pytest.mark.parametrize("nodes", [(8, 8), (16, 1)])
def test_plain_columns_are_the_transitions_fields(perf, monkeypatch, nodes):
    """Where every changed job holds GPUs only, the mechanism hands the simulator its
    transitions' columns (`mechanism.Plain`) beside the tuples: they say exactly what the tuples
    say (starts, migrations, resizes, preemptions; one-GPU nodes and gangs)."""
    from quanta.core.jobtable import KIND_CODES
    from quanta.core.mechanism import Transition
    from quanta.model import Cluster, NodeSpec
    seen = []
    orig = Simulator._apply

    def check(self, now, trs, version, push):
        plain = getattr(trs, "plain", None)
        if plain is not None:
            seen.append(len(trs))
            assert [t.row for t in trs] == plain.rows
            assert [KIND_CODES[t.kind.value] for t in trs] == plain.kinds
            assert [t.gpu_type for t in trs] == plain.gpu_type
            assert all(a is b for a, b in zip((t.gpus for t in trs), plain.gpus))
            assert [len(t.gpus) for t in trs] == plain.count
            assert [t.nodes for t in trs] == plain.nodes
            assert [t.consolidated for t in trs] == plain.consolidated
            defaults = Transition(0, None, 0, None, 0, True)[6:]
            assert all(t[6:] == defaults for t in trs)
        return orig(self, now, trs, version, push)
    monkeypatch.setattr(Simulator, "_apply", check)
    count, size = nodes
    cluster = Cluster(tuple(NodeSpec(f"n{i}", "v100", size) for i in range(count)))
    jobs = [j if size > 1 else j.with_(num_gpus=1) for j in random_jobs(120, seed=3, gap=20.0)]
    res = Simulator(jobs, cluster, make_policy("las"), perf, restart=RestartCost(5.0)).run()
    assert len(seen) > 20 and sum(seen) > 100 and res.table.preemptions.sum() > 0


def _same_table(a, b) -> None:
    for name, col in vars(a).items():
        if isinstance(col, np.ndarray):
            np.testing.assert_array_equal(getattr(b, name), col, err_msg=name, strict=True)
    assert list(a.placement) == list(b.placement)
    assert all(a.placement[r] is b.placement[r] for r in a.placement)


from hypothesis import given, settings            # noqa: E402
from hypothesis import strategies as st           # noqa: E402


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 11), st.integers(0, 3), st.integers(0, 2),
                                   st.floats(0.1, 50.0), st.sampled_from([0.0, 0.0, 7.5, 30.0]),
                                   st.booleans()), min_size=1, max_size=6),
                min_size=1, max_size=25),
       st.floats(0.0, 400.0))
def test_apply_few_is_apply_transitions(decisions, gap):
    """`JobTable.apply_few` (a few GPUs-only transitions, Python scalars) leaves every column,
    the placements and their order exactly as `apply_transitions` (numpy) leaves them, through
    random histories of starts, migrations, resizes and preemptions (0 GPUs) with and without
    restart delays, at equal and later times."""
    from quanta.core.jobtable import KIND_CODES, PENDING, JobTable
    from quanta.model import Cluster, NodeSpec
    from quanta.perf import TableModel
    cluster = Cluster(tuple(NodeSpec(f"{t}{i}", t, 4) for t in ("v100", "k80", "p100") for i in range(2)))
    jobs = random_jobs(12, seed=5, gap=5.0)
    vec, few = JobTable(jobs, cluster, TableModel()), JobTable(jobs, cluster, TableModel())
    for t in (vec, few):
        t.state[:] = PENDING
    now = 100.0
    for i, dec in enumerate(decisions):
        now += gap * (i % 3 != 0)
        seen, rows, kinds, types, gpus, counts, rates, delays, cons = set(), [], [], [], [], [], [], [], []
        for row, n, ty, rate, delay, c in dec:
            if row in seen:
                continue
            seen.add(row)
            held = int(vec.gpus[row])
            kind = ("preempt" if n == 0 else "start" if held == 0 else
                    "resize" if n != held else "migrate")
            rows.append(row)
            kinds.append(KIND_CODES[kind])
            types.append(ty if n else -1)
            gpus.append(np.arange(4 * ty, 4 * ty + n, dtype=np.int64) if n else np.empty(0, np.int64))
            counts.append(n)
            rates.append(rate if n else 0.0)
            delays.append(delay if n else 0.0)
            cons.append(c if n else True)
        vec.apply_transitions(now, np.array(rows), np.array(kinds), np.array(types), list(gpus),
                              np.array(rates), np.array(delays), consolidated=np.array(cons),
                              count=np.array(counts), mixed=False)
        assert few.few_ok()
        few.apply_few(now, rows, kinds, types, gpus, counts, rates, delays, cons)
        _same_table(vec, few)


@pytest.mark.parametrize("policy,cluster,restart", [
    ("las", "v100:3x8", RestartCost(5.0)),
    ("srtf", "v100:3x8", RestartCost(5.0, first_start_s=12.0)),
    ("gavel-las", "v100:2x4,k80:2x4,p100:1x4", RestartCost(20.0, first_start_as_restart=True)),
    ("tiresias-las", "v100:10x1,k80:6x1", RestartCost(0.0)),
    ("gandiva", "v100:2x8,k80:2x4", RestartCost(10.0)),
])
def test_few_transitions_apply_as_many_do(perf, monkeypatch, policy, cluster, restart):
    """Whole simulations with the simulator's few-transitions path (`Simulator._apply_few`)
    and without it (numpy for every decision): the same tables, timelines and event logs."""
    import quanta.sim.engine as engine
    from quanta.model.presets import resolve_cluster
    jobs = random_jobs(90, seed=7, gap=25.0)
    out = []
    for few in (engine.FEW, 0):
        monkeypatch.setattr(engine, "FEW", few)
        sim = Simulator(jobs, resolve_cluster(cluster), make_policy(policy), perf, restart=restart,
                        record_events=True)
        calls = []
        orig = sim._apply_few
        sim._apply_few = lambda *a, _o=orig: calls.append(1) or _o(*a)
        out.append((sim.run(), len(calls)))
    (a, used), (b, unused) = out
    assert used >= 5 and unused == 0       # (gandiva: until GPUs are first shared)
    _same_table(a.table, b.table)
    for name in ("times", "busy", "pending", "running", "shared", "active_integral_end"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.event_log == b.event_log and a.transitions == b.transitions


def test_jobs_that_ran_alone_at_full_speed_are_not_counted_unfair():
    """ftf_unfair_frac counted rho > 1 exactly: a job alone at full speed has JCT = ideal, but
    end - submit and total / rate round apart (rho 1.0000000000000002), so an idle cluster
    under FIFO reported a fifth or more of its jobs as unfair."""
    import quanta
    res = quanta.simulate("synthetic:6:20", "gavel-108", ["fifo"]).results[0]
    m = job_metrics(res)
    rho = m.rho[m.finished]
    assert ((rho > 1.0) & (rho < 1.0 + 1e-12)).sum() >= 2     # the rounding the test is about
    assert (rho <= 1.0 + 1e-12).all()                         # nobody waited: FIFO, idle cluster
    assert summary(res)["ftf_unfair_frac"] == 0.0


def test_queue_time_is_never_negative():
    """A job preempted a dozen times (node failures under LAS) summed its runs a few ulps past
    its JCT: queue_s -1.2e-10 in jobs.csv, avg_queue_s -3.9e-12 in the summary."""
    import quanta
    res = quanta.simulate("synthetic:6:60", "gavel-108", ["las"], seed=5, node_mtbf_h=20,
                          repair_h=2).results[0]
    t = res.table
    assert (t.end - t.submit - t.run0).min() < 0          # the rounding the test is about
    m = job_metrics(res)
    assert m.queue.min() == 0.0 and not np.signbit(m.queue).any()
    assert summary(res)["avg_queue_s"] >= 0.0
