"""Tiresias against the authors' simulator (SymbioticLab/Tiresias @ 959f9b08, simulator/): 3 queues,
running jobs kept ahead in a queue, PROMOTE off by default and counting all pending time since the
top queue, Gittins with a fixed quantum over the YARN sample; plus demotion, wake-ups and
skew-aware placement."""

import csv
from pathlib import Path

import numpy as np
import pytest

from quanta.core.snapshot import Snapshot
from quanta.core.jobtable import JobTable, PENDING
from quanta.model import JobSpec
from quanta.placement import Occupancy
from quanta.policies import make_policy
from quanta.policies.tiresias import authors_rank, gittins_index, yarn_gpu_times
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost

from conftest import homogeneous
from test_policies_baselines import snapshot


def two_jobs(submit_b=1.0):
    return [JobSpec("a", 0.0, 1, "", total_steps=1e6), JobSpec("b", submit_b, 1, "", total_steps=1e6)]


def at(specs, cluster, perf, now, rows, running=(), attained=None, executed=None, waiting=None,
       state=None):
    """A snapshot at `now` of the jobs `rows` only, where attained/executed/waiting (dicts row ->
    value) are their service at `now` and when they last lost their GPUs, and `running` is a set of
    rows holding their GPUs."""
    t = JobTable(specs, cluster, perf)
    occ = Occupancy(cluster)
    t.state[:] = PENDING
    for row in running:
        gpus, _ = occ.place(0, specs[row].num_gpus)
        occ.assign(row, gpus)
        t.hold(row, now, "start", 0, gpus, 1.0, 0.0)
    for row, v in (attained or {}).items():
        t.att0[row] = v
    for row, v in (executed or {}).items():
        t.run0[row] = v
    for row, v in (waiting or {}).items():
        t.waiting_since[row] = v
    t.ta[:] = now
    rows = np.asarray(rows)
    return Snapshot(now, cluster, perf, t.view(rows, now), occ.up_capacity(), occ.node_free.copy(),
                    occ.node_up.copy(), state=state or {})


# -- queues --------------------------------------------------------------------------------------
def test_three_queues_as_the_authors_simulator(perf):
    # jobs.py: num_queue = 3, queue_limit = [3250, 7200, 18000]; only the first num_queue - 1
    # limits are read (run_sim.py:1049-1050): 7,300 and 18,500 GPU-s are both in the last queue
    assert make_policy("tiresias-las").thresholds == (3250.0, 7200.0)
    assert make_policy("tiresias-gittins").thresholds == (3250.0, 7200.0)
    snap, _ = snapshot(two_jobs(), homogeneous(1, 1), perf, attained=np.array([18_500.0, 7_300.0]))
    assert list(make_policy("tiresias-las").decide(snap).gpus) == [1, 0]   # same queue: arrival order


def test_same_queue_is_fifo_not_las(perf):
    # a has more attained service than b but both are below the first threshold: a keeps the GPU
    snap, _ = snapshot(two_jobs(), homogeneous(1, 1), perf, running={0: (0, 1)},
                       attained=np.array([3000.0, 0.0]))
    assert list(make_policy("tiresias-las").decide(snap).gpus) == [1, 0]
    assert list(make_policy("las").decide(snap).gpus) == [0, 1]     # plain LAS would preempt


def test_demoted_past_the_threshold(perf):
    snap, _ = snapshot(two_jobs(), homogeneous(1, 1), perf, running={0: (0, 1)},
                       attained=np.array([3300.0, 0.0]))
    assert list(make_policy("tiresias-las").decide(snap).gpus) == [0, 1]


def test_wakes_exactly_when_the_running_job_crosses_its_threshold(perf):
    jobs = [JobSpec("a", 0.0, 2, "", total_steps=10_000.0), JobSpec("b", 10.0, 2, "", total_steps=100.0)]
    pol = make_policy("tiresias-las:thresholds=1000")
    res = Simulator(jobs, homogeneous(1, 2), pol, perf).run()
    t = res.table
    # a (2 GPUs) reaches 1000 GPU-s at t = 500 and is demoted; b starts at that moment
    assert t.first_start[1] == pytest.approx(500.0, abs=1e-6)
    assert t.preemptions[0] == 1 and t.end[1] == pytest.approx(600.0)


def test_a_waiting_job_never_preempts_a_running_one_of_its_queue(perf):
    # a (1 GPU) runs; b (2 GPUs) cannot fit; c (1 GPU) fills the other GPU. When a ends, the authors
    # keep c ahead of b (jobs without GPUs move behind the others after each pass,
    # run_sim.py:1132-1143): b waits for c instead of preempting it
    jobs = [JobSpec("a", 0.0, 1, "", total_steps=10.0), JobSpec("b", 1.0, 2, "", total_steps=10.0),
            JobSpec("c", 2.0, 1, "", total_steps=100.0)]
    t = Simulator(jobs, homogeneous(1, 2), make_policy("tiresias-las"), perf,
                  restart=RestartCost(0.0)).run().table
    assert int(t.preemptions.sum()) == 0
    assert t.first_start[1] == pytest.approx(102.0) and t.end[2] == pytest.approx(102.0)
    # the earlier Quanta order (by arrival inside a queue) stays reachable
    t = Simulator(jobs, homogeneous(1, 2), make_policy("tiresias-las:keep_running=false"), perf,
                  restart=RestartCost(0.0)).run().table
    assert t.preemptions[2] == 1 and t.first_start[1] == pytest.approx(10.0)


def test_a_demoted_job_goes_behind_the_jobs_already_in_its_new_queue(perf):
    # b (submitted later) already waits in queue 1; a is demoted into queue 1 and the authors append
    # it at the end (run_sim.py:1051-1053): b, not a, runs once the queue-0 job c is done
    jobs = [JobSpec("a", 0.0, 1, "", total_steps=1e6), JobSpec("b", 1.0, 1, "", total_steps=1e6),
            JobSpec("c", 2.0, 1, "", total_steps=1e6)]
    c = homogeneous(1, 1)
    pol = make_policy("tiresias-las:thresholds=100")
    d1 = pol.decide(at(jobs, c, perf, 50.0, [0, 1], running={0}, attained={0: 50.0, 1: 150.0},
                       executed={0: 50.0, 1: 150.0}))
    assert list(d1.gpus) == [1, 0]                                   # a in queue 0, b in queue 1
    d2 = pol.decide(at(jobs, c, perf, 110.0, [0, 1, 2], running={0}, attained={0: 110.0, 1: 150.0},
                       executed={0: 110.0, 1: 150.0}, state=d1.state))
    assert list(d2.gpus) == [0, 0, 1]                                # c (queue 0) first
    d3 = pol.decide(at(jobs, c, perf, 200.0, [0, 1], attained={0: 110.0, 1: 150.0},
                       executed={0: 110.0, 1: 150.0}, state=d2.state))
    assert list(d3.gpus) == [0, 1]


def test_authors_timing_demotes_multi_gpu_jobs_late_as_their_simulator_does(perf):
    # next_job_jump = t + (3250 - executed wall s) // GPUs (run_sim.py:1224-1226): for an 8-GPU job
    # run from 0, a check at 406 (3,248 GPU-s: not yet) and the next at 406 + 2844 // 8 = 761. Tiresias'
    # simulator (bench/anchors/tiresias.py, two such jobs on 1x2x4) starts the second job at 761;
    # the exact crossing is at 406.25
    jobs = [JobSpec("a", 0.0, 8, "", total_steps=2000.0), JobSpec("b", 0.0, 8, "", total_steps=100.0)]
    for spec, start in (("tiresias-las", 406.25), ("tiresias-las:authors_timing=true", 761.0)):
        t = Simulator(jobs, homogeneous(1, 8), make_policy(spec), perf, restart=RestartCost(0.0)).run().table
        assert t.first_start[1] == pytest.approx(start), spec
        assert t.end[0] == pytest.approx(2100.0)


# -- PROMOTE -------------------------------------------------------------------------------------
def test_promotion_is_off_by_default(perf):
    # the authors' dlas-gpu and dlas-gpu-gittins runs pass no knob (run_sim.py:2049,2052)
    assert make_policy("tiresias-las").promote_knob == float("inf")
    assert make_policy("tiresias-gittins").promote_knob == float("inf")
    # a (queue 1) ran 300 s and has waited 5,000 s: a knob of 8 would lift it above b
    snap, _ = snapshot(two_jobs(submit_b=5.0), homogeneous(1, 1), perf, now=5000.0,
                       running={1: (0, 1)}, attained=np.array([300.0, 150.0]),
                       executed=np.array([300.0, 150.0]), waiting=np.array([0.0, 0.0]))
    dec = make_policy("tiresias-las:thresholds=100").decide(snap)
    assert list(dec.gpus) == [0, 1] and dec.wake_at is None


def test_promotion_counts_all_pending_time_since_the_job_entered_the_top_queue(perf):
    # run_sim.py:1064-1074: last_pending_time adds up every pending stretch since the job last
    # entered queue 0 (once it has run), not only the current wait. a ran 120 s, waited 90 s,
    # ran 10 s, waited 40 s: 90 + 40 >= 1 x 130 s executed, so it is promoted, although its current
    # wait (40 s) is shorter than 130 s
    jobs = [JobSpec("a", 0.0, 1, "", total_steps=1e6), JobSpec("b", 115.0, 1, "", total_steps=90.0),
            JobSpec("d", 215.0, 1, "", total_steps=1e6)]
    c = homogeneous(1, 1)
    pol = make_policy("tiresias-las:thresholds=100,promote_knob=1")
    d = pol.decide(at(jobs, c, perf, 120.0, [0, 1], running={0}, attained={0: 120.0},
                      executed={0: 120.0}))
    assert list(d.gpus) == [0, 1]                       # b (queue 0) preempts a (queue 1)
    d = pol.decide(at(jobs, c, perf, 210.0, [0], attained={0: 120.0}, executed={0: 120.0},
                      waiting={0: 120.0}, state=d.state))
    assert list(d.gpus) == [1]                          # waited 90 < 120: not promoted, runs
    assert d.state["off_att"][0] == 0.0
    d = pol.decide(at(jobs, c, perf, 220.0, [0, 2], running={0}, attained={0: 130.0},
                      executed={0: 130.0}, waiting={0: 120.0}, state=d.state))
    assert list(d.gpus) == [0, 1]
    assert d.wake_at == pytest.approx(260.0)            # 130 - 90 s of waiting left
    d = pol.decide(at(jobs, c, perf, 260.0, [0, 2], running={2}, attained={0: 130.0, 2: 40.0},
                      executed={0: 130.0, 2: 40.0}, waiting={0: 220.0}, state=d.state))
    assert d.state["off_att"][0] == pytest.approx(130.0)   # promoted: service counted from zero
    assert list(d.gpus) == [0, 1]                       # at the end of queue 0, behind running d


def test_pending_time_before_the_first_run_is_not_counted(perf):
    # jobs.py:442, run_sim.py:1064: pending time counts only once the job has executed since it
    # entered the top queue. b waits 100 s before its first start, runs 100 s (queue 1), then
    # waits 50 s: 50 < 1 x 100 executed, so it is not promoted (counting the first wait would)
    jobs = [JobSpec("a", 0.0, 1, "", total_steps=1e6), JobSpec("b", 0.0, 1, "", total_steps=1e6)]
    c = homogeneous(1, 1)
    pol = make_policy("tiresias-las:thresholds=100,promote_knob=1")
    d = pol.decide(at(jobs, c, perf, 0.0, [0, 1]))
    assert list(d.gpus) == [1, 0]
    d = pol.decide(at(jobs, c, perf, 100.0, [0, 1], running={0}, attained={0: 100.0},
                      executed={0: 100.0}, state=d.state))
    assert list(d.gpus) == [0, 1]                       # a reached queue 1
    d = pol.decide(at(jobs, c, perf, 200.0, [0, 1], running={1}, attained={0: 100.0, 1: 100.0},
                      executed={0: 100.0, 1: 100.0}, waiting={0: 100.0}, state=d.state))
    assert list(d.gpus) == [1, 0]                       # a waited 100 >= 100: promoted, runs
    assert d.state["off_att"][0] == pytest.approx(100.0)
    d = pol.decide(at(jobs, c, perf, 250.0, [0, 1], running={0}, attained={0: 150.0, 1: 100.0},
                      executed={0: 150.0, 1: 100.0}, waiting={1: 200.0}, state=d.state))
    assert list(d.gpus) == [1, 0] and d.state["off_att"][1] == 0.0


# -- Gittins -------------------------------------------------------------------------------------
def test_gittins_index_matches_brute_force():
    rng = np.random.default_rng(0)
    s = np.sort(rng.lognormal(7, 1.5, size=300))
    for a, d in [(0.0, 500.0), (800.0, 2000.0), (5000.0, 3250.0), (1e9, 10.0)]:
        alive = s[s > a]
        if alive.size == 0:
            expect = 0.0
        else:
            p = np.mean(alive - a <= d)
            e = np.mean(np.minimum(alive - a, d))
            expect = p / e
        got = gittins_index(s, np.array([a]), np.array([d]))[0]
        assert got == pytest.approx(expect, rel=1e-9)


def test_gittins_uses_the_authors_fixed_quantum(perf):
    # jobs.py:116 gittins_delta = 3250 for every job (cal_r_gittins_index, run_sim.py:1956), not
    # the service left before the job's queue threshold. With a threshold at 20,000 GPU-s, jobs at
    # 14,400 and 19,800 GPU-s order differently under the two quanta.
    y = yarn_gpu_times()
    att = np.array([14_400.0, 19_800.0])
    fixed = gittins_index(y, att, np.array([3250.0, 3250.0]))
    to_th = gittins_index(y, att, 20_000.0 - att)
    assert (fixed[0] > fixed[1]) != (to_th[0] > to_th[1])
    snap, _ = snapshot(two_jobs(), homogeneous(1, 1), perf, attained=att)
    want = [1, 0] if fixed[0] > fixed[1] else [0, 1]
    assert list(make_policy("tiresias-gittins:thresholds=20000").decide(snap).gpus) == want
    other = [1, 0] if to_th[0] > to_th[1] else [0, 1]
    assert list(make_policy("tiresias-gittins:thresholds=20000,delta_to_threshold=true")
                .decide(snap).gpus) == other


def test_gittins_keeps_the_yarn_sample_however_many_jobs_finish(perf):
    # run_sim.py:1984-1990: the distribution is the bundled YARN sample for the whole run. 25 jobs
    # that finish at 3,000 GPU-s would make a learned distribution prefer the job at 1,000 GPU-s
    # (2,000 left, surely within the quantum) over the one at 0; the YARN sample prefers the one at 0
    jobs = [JobSpec(f"f{i}", 0.0, 1, "", total_steps=1e6) for i in range(25)] + two_jobs(submit_b=0.0)
    y = yarn_gpu_times()
    g = gittins_index(y, np.array([0.0, 1000.0]), np.array([3250.0, 3250.0]))
    assert g[0] > g[1]
    for spec, want in (("tiresias-gittins", [1, 0]),
                       ("tiresias-gittins:learn_distribution=true", [0, 1])):
        pol = make_policy(spec)
        d = pol.decide(at(jobs, homogeneous(1, 30), perf, 0.0, list(range(25)), running=set(range(25))))
        # the 25 jobs end at t = 3000 with 3,000 GPU-s each; a and b are then alone on one GPU
        snap = at(jobs, homogeneous(1, 1), perf, 3000.0, [25, 26], attained={26: 1000.0},
                  executed={26: 1000.0}, state=d.state)
        assert list(pol.decide(snap).gpus) == want, spec


def test_authors_index_is_the_rank_table_of_their_simulator():
    # get_gittins_index() of Tiresias' simulator (run under Python 2.7 by bench/anchors/tiresias.py's
    # setup) at these attained GPU-seconds; it differs from the Gittins index proper (E sums the
    # samples themselves, not S - a; the rank is taken at the next sample - 1)
    a = np.array([0.0, 100.0, 121.0, 200.0, 500.0, 1000.0, 2000.0, 3249.0, 3250.0, 7200.0, 6e7])
    want = [299.701, 299.701, 299.2165, 281.3944, 249.8181, 191.5154, 129.4345, 87.4493, 87.4493,
            36.7358, 0.0]
    assert authors_rank(a, 3250.0).tolist() == want
    exact = gittins_index(yarn_gpu_times(), a[:4], np.full(4, 3250.0)) * 1e6
    assert exact[1] > exact[0]                 # proper index: rises from 0 to 100 GPU-s ...
    assert want[1] == want[0]                  # ... the authors' table: a tie


def test_gittins_orders_a_queue_by_index_then_arrival(perf):
    # run_sim.py:1105: sort by (rank, -submit_time), descending: ties go to the earlier job
    jobs = [JobSpec("a", 5.0, 1, "", total_steps=1e6), JobSpec("b", 1.0, 1, "", total_steps=1e6)]
    snap, _ = snapshot(jobs, homogeneous(1, 1), perf, running={0: (0, 1)}, attained=np.array([0.0, 0.0]))
    assert list(make_policy("tiresias-gittins").decide(snap).gpus) == [0, 1]
    y = yarn_gpu_times()
    g = gittins_index(y, np.array([500.0, 1000.0]), np.array([3250.0, 3250.0]))
    snap, _ = snapshot(jobs, homogeneous(1, 1), perf, attained=np.array([1000.0, 500.0]))
    assert list(make_policy("tiresias-gittins").decide(snap).gpus) == ([0, 1] if g[0] > g[1] else [1, 0])


# -- placement -----------------------------------------------------------------------------------
def test_skewed_model_waits_for_consolidation(perf):
    from quanta.core.mechanism import apply
    c = homogeneous(2, 2)
    jobs = [JobSpec("x", 0.0, 1, "", total_steps=1e6), JobSpec("y", 0.0, 1, "", total_steps=1e6),
            JobSpec("z", 1.0, 2, "", total_steps=100.0)]
    # x holds a GPU of node 0, y one of node 1: z (2 GPUs; an unmeasured model loses 15% when
    # spread) could only be spread over both nodes
    snap, _ = snapshot(jobs, c, perf, running={0: (0, 1), 1: (0, 1)})
    for pack_limit, placed in ((0.9, False), (0.0, True)):
        occ = Occupancy(c)
        occ.assign(0, np.array([0]))    # node 0
        occ.assign(1, np.array([2]))    # node 1
        dec = make_policy(f"tiresias-las:pack_limit={pack_limit}").decide(snap)
        assert dec.gpus[2] == 2
        started = [t.row for t in apply(snap, dec, occ)]
        assert (2 in started) == placed


# -- replays of runs recorded from Tiresias' own simulator ------------------------------------------
REFERENCE = Path(__file__).resolve().parents[1] / "quanta" / "data" / "reference" / "tiresias"


@pytest.mark.parametrize("stem, trace, policy", [
    ("tiresias_60_job_1x2x4__dlas-gpu_count", "tiresias_60_job.csv", "tiresias-las"),
    ("tiresias_60_job_1x2x4__dlas-gpu-gittins_count", "tiresias_60_job.csv",
     "tiresias-gittins:authors_index=true"),
    ("tiresias_60_job_x10_1x2x4__dlas-gpu_count", "tiresias_60_job_x10.csv",
     "tiresias-las:authors_timing=true"),
    ("tiresias_60_job_x10_1x2x4__dlas-gpu-8_count", "tiresias_60_job_x10.csv",
     "tiresias-las:promote_knob=8,authors_timing=true"),
    ("tiresias_60_job_x10_1x2x4__dlas-gpu-gittins_count", "tiresias_60_job_x10.csv",
     "tiresias-gittins:authors_index=true,authors_timing=true"),
])
def test_replays_tiresias_simulator_runs_job_by_job(stem, trace, policy):
    # the authors' world: 8 GPUs counted as one pool, no restart cost (bench/anchors/tiresias.md)
    from quanta.model.presets import resolve_cluster
    from quanta.paths import TRACES_DIR
    from quanta.perf.catalog_model import CatalogModel
    from quanta.workloads.builder import build_workload
    from quanta.workloads.formats import load_trace
    with (REFERENCE / f"{stem}.csv").open() as f:
        ref = {r["job_id"]: float(r["jct_s"]) for r in csv.DictReader(f)}
    perf = CatalogModel()
    wl = build_workload(load_trace(TRACES_DIR / trace, "tiresias"), perf, seed=0)
    t = Simulator(wl.specs, resolve_cluster("v100:1x8"), make_policy(policy), perf,
                  restart=RestartCost(0.0)).run().table
    got = {s.job_id: t.end[i] - t.submit[i] for i, s in enumerate(wl.specs)}
    assert len(ref) == 60
    assert {k: round(got[k], 6) for k in ref} == ref
