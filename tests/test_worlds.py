"""Replay profiles (worlds): each setting of a reference simulator's world, pinned on tiny
hand-made workloads, and the command line that selects them."""

import subprocess
import sys

import numpy as np
import pytest

from quanta.errors import QuantaError
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.perf.catalog_model import CatalogModel
from quanta.policies import make_policy
from quanta.runner import SimulationRequest, run_simulations
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost
from quanta.worlds import get_world, world_names
from quanta.worlds.sia_sim import RESCALE_S, SLOWDOWNS


def _one_job_run(world, app, gpus=1, policy="fifo"):
    w = get_world(world)
    perf = w.perf(CatalogModel())
    job = JobSpec("a", 0.0, gpus, app, total_steps=1000.0, batch_size=0)
    c = Cluster((NodeSpec("n", "rtx", 8),))
    res = Simulator(w.jobs_for(policy, [job]), c, make_policy(w.policy_spec(policy)), perf,
                    restart=w.restart(30.0)).run()
    return res, perf, job


def test_worlds_are_listed_and_unknown_ones_refused():
    assert {"quanta", "sia-sim"} <= set(world_names())
    from quanta.errors import QuantaError
    with pytest.raises(QuantaError, match="unknown world 'nope'"):
        get_world("nope")


def test_a_world_is_loaded_alone_and_each_module_registers_the_name_it_is_listed_under():
    """`quanta simulate --world gavel-sim` imports gavel-sim's module only (a short run's imports
    count); WORLD_MODULES must name the module each world registers itself in."""
    code = ("import sys; from quanta.worlds import get_world, WORLD_MODULES, WORLDS; "
            "import quanta.worlds as w; "
            "[(get_world(n), print(n, sorted(k for k in WORLDS if k != 'quanta'), "
            "sorted(m for m in sys.modules if m.startswith('quanta.worlds.')))) "
            "for n in sorted(WORLD_MODULES)]")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "gavel-sim ['gavel-sim'] ['quanta.worlds.gavel_sim']", lines
    assert lines[1].startswith("sia-sim ['gavel-sim', 'sia-sim'] "), lines
    assert lines[2].startswith("tiresias-sim ['gavel-sim', 'sia-sim', 'tiresias-sim'] "), lines
    assert set(world_names()) == {"quanta"} | set(__import__("quanta.worlds").worlds.WORLD_MODULES)
    quanta_only = subprocess.run(
        [sys.executable, "-c", "import sys; from quanta.worlds import get_world; "
         "get_world('quanta'); print(sorted(m for m in sys.modules if m.startswith('quanta.worlds.')))"],
        capture_output=True, text=True, check=True)
    assert quanta_only.stdout.strip() == "[]"        # Quanta's own world loads no replay world


def test_every_world_module_is_listed():
    """A module of quanta/worlds/ that registers a world is listed in WORLD_MODULES under that
    name (else `--world NAME` would call it unknown)."""
    import re
    from pathlib import Path

    import quanta.worlds as w
    found = {}
    for f in sorted(Path(w.__file__).parent.glob("*.py")):
        for name in re.findall(r'^@world\("([^"]+)"\)', f.read_text(), flags=re.M):
            found[name] = f.stem
    assert found == {"quanta": "__init__", **w.WORLD_MODULES}


def test_sia_sim_charges_each_application_its_restore_time_at_the_first_start_too():
    for app in ("imagenet", "cifar10"):
        res, perf, job = _one_job_run("sia-sim", app)
        t = res.table
        # one job alone on 1 GPU: it waits its application's rescale time, then trains at the
        # slowed rate through every epoch
        assert t.first_start[0] == 0.0
        base = CatalogModel()
        ends = np.asarray(base.phase_fractions(job)) * 1000.0
        starts = np.concatenate([[0.0], ends[:-1]])
        # at the measured profiles' speed (sia_sim.MeasuredPerf), slowed by the calibration
        rates = [perf.base.rate(job.with_(phase=k), "rtx", 1) / SLOWDOWNS[app]
                 for k in range(len(ends))]
        expect = RESCALE_S[app] + float(np.sum((ends - starts) / np.array(rates)))
        assert t.end[0] == pytest.approx(expect, rel=1e-9)
    # Quanta's world: the first start is free and nothing is slowed
    res, _, job = _one_job_run("quanta", "cifar10")
    assert res.table.end[0] < expect


def test_sia_sim_runs_ncf_rigid_on_one_gpu_at_batch_32768_under_sia_only():
    w = get_world("sia-sim")
    ncf = JobSpec("n", 0.0, 4, "ncf", batch_size=256)
    (s,) = w.jobs_for("sia", [ncf])
    assert (s.num_gpus, s.min_gpus, s.max_gpus, s.batch_size) == (1, 1, 1, 32768)
    assert w.jobs_for("gavel-throughput", [ncf]) == [ncf]


def test_world_policy_parameters_come_before_the_users():
    w = get_world("sia-sim")
    assert make_policy(w.policy_spec("gavel-throughput")).interval == 360.0
    assert make_policy(w.policy_spec("gavel-throughput:interval=60")).interval == 60.0
    assert w.policy_spec("fifo") == "fifo"
    # the user's own replace the world's (each given once); one the user gives twice is refused
    spec = w.policy_spec("gavel-throughput:workers=,interval=60")
    assert spec.count("workers=") == 1 and spec.count("interval=") == 1
    assert make_policy(spec).workers == ""
    with pytest.raises(QuantaError, match="parameter 'interval' is given twice"):
        make_policy(w.policy_spec("gavel-throughput:interval=60,interval=30"))


def test_world_from_the_python_api_and_labels_kept():
    rows, header = run_simulations(SimulationRequest(trace="sia-philly-1", cluster="sia-64",
                                                     policies=["fifo"], max_jobs=8, out=None,
                                                     plots=False, world="sia-sim"))
    assert rows[0]["policy"] == "fifo" and any("world sia-sim" in h for h in header)


def test_sia_sim_keeps_the_traces_clock(tmp_path):
    """Sia's simulator runs its rounds at multiples of the interval from the workload's time 0
    and shows a job to the policy from the first round at or after its submission (cluster.py
    340-354; bench/anchors/sia.md section 3). A first job submitted at 498 s under the Gavel
    baseline's 360 s rounds starts at 720 s, not at its own arrival, as it does when the first
    arrival is taken as time 0 (Quanta's own world, where a round starts there); JCTs count from
    the submission either way. A job submitted exactly at a round start is seen in that round
    (the second, at 1440 s under sia-sim), whether or not a round had been due."""
    f = tmp_path / "w.csv"
    f.write_text("name,time,application,num_replicas,batch_size\n"
                 "cifar10-0,498,cifar10,4,2048\ncifar10-1,1427,cifar10,4,2048\n"
                 "cifar10-2,1938,cifar10,4,2048\n")
    starts = {}
    for world in ("sia-sim", "quanta"):
        _rows, _h, res = run_simulations(SimulationRequest(
            trace=str(f), cluster="sia-64", policies=["gavel-throughput"], out=None, plots=False,
            world=world), keep_results=True)
        t = res[0].table
        starts[world] = (t.submit.tolist(), t.first_start.tolist())
    assert starts["sia-sim"] == ([498.0, 1427.0, 1938.0], [720.0, 1440.0, 2160.0])
    assert starts["quanta"] == ([0.0, 929.0, 1440.0], [0.0, 1080.0, 1440.0])


def test_world_on_the_command_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "quanta.cli", "simulate", "--world", "sia-sim",
                          "--trace", "sia-philly-1", "--cluster", "sia-64", "--policy", "sia",
                          "--max-jobs", "6", "--no-plots", "--quiet", "--out", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    bad = subprocess.run([sys.executable, "-m", "quanta.cli", "simulate", "--world", "gavel",
                          "--quiet"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown world 'gavel'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_replay_world_runs_on_its_references_cluster_unless_one_is_named(tmp_path):
    """Without --cluster, `--world sia-sim` runs on Sia's simulator's default cluster and
    `--world gavel-sim` on Gavel's (the clusters `quanta reproduce` replays on); Quanta's world on
    gavel-108; a named cluster always wins. The run's config.yaml records the one used."""
    import yaml

    def run(*args):
        out = tmp_path / f"o{len(list(tmp_path.iterdir()))}"
        r = subprocess.run([sys.executable, "-m", "quanta.cli", "simulate", "--trace",
                            "sia-philly-1", "--policy", "fifo", "--max-jobs", "4", "--no-plots",
                            "--out", str(out), *args], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout, yaml.safe_load((out / "config.yaml").read_text())["cluster"]

    out, cl = run("--world", "sia-sim")
    assert cl["spec"] == "t4:6x4,rtx:3x8,a100:2x8" and cl["gpus"] == 64, cl
    assert "t4:6x4,rtx:3x8,a100:2x8 (64 GPUs)" in " ".join(out.split())
    _out, cl = run("--world", "gavel-sim")
    assert cl["spec"] == "v100:36x1,p100:36x1,k80:36x1" and cl["gpus"] == 108, cl
    _out, cl = run()
    assert cl["spec"] == "gavel-108", cl
    _out, cl = run("--world", "sia-sim", "--cluster", "a100:2x8")
    assert cl["spec"] == "a100:2x8" and cl["gpus"] == 16, cl


@pytest.mark.slow
def test_reproduce_sia_philly_3_meets_the_targets_with_the_references_type_ratios():
    """philly-3 under Sia (160 jobs, ~50 s): the issue's three targets. Its makespan was +10.6%
    while the replay projected a job's learned throughput to other GPU types by the seed
    profiles' 1-GPU ratios (yolov3: A100 2.91x a T4) instead of the reference's own (2.03x):
    its last yolov3 job kept 4 T4s for its last 3.6 h (bench/anchors/sia.md section 21)."""
    from quanta.reproduce import reproduce
    (row,) = reproduce("sia", workload="sia_philly_workload-3", policy="sia")
    rp = row["replay"]
    assert abs(rp["avg_jct_s"] / row["ref_avg_jct_s"] - 1) < 0.10                 # measured -0.5%
    assert abs(rp["makespan_s"] / row["ref_makespan_s"] - 1) < 0.10                # measured +1.0%
    for app, ref in row["ref_by_app"].items():
        assert abs(rp["by_app"][app] / ref - 1) < 0.15, app                      # worst bert +3.0%


def test_sia_sims_gavel_baseline_takes_ecos_point_of_the_optimal_set():
    """Sia's simulator solves its Gavel baseline's programme with ECOS (gavel.py:22); many
    allocations are optimal and ECOS's decides which jobs share which types. philly-3 (160 jobs):
    with ECOS's point (pinned) the average is +0.1% and the per-job median error 0.3%; with the
    centre of the optimal set it was +5.1% (bench/anchors/sia.md section 23)."""
    import dataclasses

    from quanta.reproduce import ADAPTERS, compare, recorded
    ad = ADAPTERS["sia"]
    (ref,) = [r for r in recorded(ad) if r.summary["workload"] == "sia_philly_workload-3"
              and r.summary["policy"] == "gavel"]
    r = compare(ref, ad, ad.world)
    assert abs(r["avg_jct_s"] / ref.summary["avg_jct_s"] - 1) < 0.01
    assert r["median_abs_err"] < 0.01
    central = dataclasses.replace(ad, policies={**ad.policies,
                                                "gavel": "gavel-throughput:solution=central"})
    c = compare(ref, central, ad.world)
    assert c["avg_jct_s"] / ref.summary["avg_jct_s"] - 1 > 0.03


def test_reproduce_sia_slice_stays_within_its_recorded_tolerance():
    """Regression guard on the recorded slice (first 30 jobs of Sia's Philly workload 1, run
    through Sia's own simulator: quanta/data/reference/sia/). Bounds are what this code measures
    plus a margin (issue 16's targets are tighter: 10% average, 15% per application)."""
    from quanta.reproduce import reproduce
    rows = {r["policy"]: r for r in reproduce("sia", workload="sia_philly_workload-1_first30")}
    sia, gavel = rows["sia"], rows["gavel"]
    assert sia["replay"]["matched"] == 30 and gavel["replay"]["matched"] == 30
    # measured -6.6% (its one imagenet job: 6.13 h against 7.06 h); the whole workloads'
    # averages are -2.8% to +5.0% (sia.md section 21)
    assert abs(sia["replay"]["avg_jct_s"] / sia["ref_avg_jct_s"] - 1) < 0.15
    assert sia["replay"]["median_abs_err"] < 0.15                                  # measured 12.8%
    # the Gavel baseline follows the reference round by round (bench/anchors/sia.md section 16)
    assert abs(gavel["replay"]["avg_jct_s"] / gavel["ref_avg_jct_s"] - 1) < 0.01  # measured +0.2%
    assert gavel["replay"]["median_abs_err"] < 0.02                                # measured 0.7%
    # the replay profile is closer to the reference than Quanta's own world on both
    for r in (sia, gavel):
        assert abs(r["replay"]["avg_jct_s"] - r["ref_avg_jct_s"]) < abs(r["quanta"]["avg_jct_s"] - r["ref_avg_jct_s"])


def test_sia_sims_gavel_baseline_rounds_follow_sias_simulator():
    """Sia's simulator's Gavel baseline (sia-simulator gavel.py): the interior-point X (ECOS)
    rounded to 5 decimals; priority X / (the job's time on the type / every job's time on it),
    a job starting at half a round on every type (which adds as much to each type's total) and
    each round crediting a whole round to the job and its type; one list over all types, ties
    taken type by type in the reference's order. Three identical 1-GPU jobs on one v100 and one
    k80, every X = 1/3 (values worked by hand from those rules):
    round 1: all priorities 1, type-major ties -> j0 on v100, j1 on k80;
    round 2: job times j0 (540, 180), j1 (180, 540), type totals (900, 900): j1 and j2 on v100
    and j0 and j2 on k80 come first (1.67), v100's first -> j1 on v100, j0 on k80 (they swap);
    round 3: j2 (2.33) first -> v100, then j0 keeps k80, j1 waits."""
    w = get_world("sia-sim")
    pol = make_policy(w.policy_spec("gavel-throughput"))
    assert (pol.solution, pol.priority, pol.decimals) == ("ecos", "cluster", 5)
    assert pol.tie_types == "t4/a100/rtx"          # simulator_config.py:11: aws, dgx-ext, rtx
    c = Cluster((NodeSpec("a", "v100", 1), NodeSpec("b", "k80", 1)))
    jobs = [JobSpec(f"j{i}", 0.0, 1, "x", total_steps=3000.0) for i in range(3)]
    from conftest import ToyPerf
    for spec, want in (("gavel-throughput:solution=central,priority=cluster,decimals=5,"
                        "tie_types=v100/k80", [[0, 1, -1], [1, 0, -1], [1, -1, 0]]),
                       ("gavel-throughput:solution=central,priority=cluster,decimals=5,"
                        "tie_types=k80/v100", [[1, 0, -1], [0, 1, -1], [0, -1, 1]])):
        pol = make_policy(spec)
        seen = []
        decide = pol.decide

        def spy(snap, decide=decide, seen=seen):
            d = decide(snap)
            seen.append((d.gpu_type.tolist(), d.state["job_time"][:3].tolist(),
                         d.state["type_time"].tolist(), d.state["X"][:3].tolist()))
            return d
        pol.decide = spy
        Simulator(jobs, c, pol, ToyPerf(), restart=RestartCost(0.0)).run()
        assert [g for g, *_ in seen[:3]] == want, spec
        assert seen[0][3] == [[0.33333, 0.33333]] * 3          # rounded to 5 decimals
        first = want[0].index(0)                                # the job put on v100 in round 1
        jt = [[180.0, 180.0]] * 3
        jt[first], jt[1 - first] = [540.0, 180.0], [180.0, 540.0]
        assert seen[0][1] == jt and seen[0][2] == [900.0, 900.0]


def test_sia_sims_gavel_baseline_sums_iterations_per_second():
    """Sia's simulator gives its Gavel baseline each job's iterations per second at its own batch
    (gavel.py:515-546), not its progress (goodput) rate: under sia-sim gavel-throughput takes
    the perf model's `iteration_rate` (Quanta's own world keeps progress rates). The values are
    the reference's own (PREDICT_XPUT lines of its run on sia_newtrace_workload-3_first160,
    ~/.cache/anchors/sia/runs/.../stdout.txt.gz), before its 1.2 calibration slowdown: the
    batch split per placement, with the largest atomic batch profiled for that placement
    (deepspeech2 on 8+4 GPUs: 26 x 2 steps, where the type's largest, 80, would give 54 x 1)."""
    from quanta.policies.gavel import Gavel
    w = get_world("sia-sim")
    assert make_policy(w.policy_spec("gavel-throughput")).rate_units == "iterations"
    assert make_policy(get_world("quanta").policy_spec("gavel-throughput")).rate_units == "progress"
    with pytest.raises(QuantaError):
        make_policy("gavel-throughput:rate_units=samples")
    perf = w.perf(CatalogModel())
    ref = {("deepspeech2", 12, 640): (0.5631624772133299, 0.6186565647006209, 0.6392915915130101),
           ("bert", 6, 384): (0.16393655890001596, 1.9385754665336932, 0.37221158228169005),
           ("imagenet", 10, 1600): (1.2638000292895464, 3.7471345465745274, 1.8219811881364272)}
    for (app, z, batch), want in ref.items():
        job = JobSpec("j", 0.0, z, app, batch_size=batch)
        got = [perf.iteration_rate(job, t, z) for t in ("t4", "a100", "rtx")]
        assert got == pytest.approx([x / 1.2 for x in want], rel=1e-9), app
    assert perf.base.split("deepspeech2", "rtx", (8, 4), 640, predicted=True) == (26, 1)
    assert perf.iteration_rate(JobSpec("x", 0.0, 1, "ResNet-18 (batch size 16)"), "v100", 1) is None

    class Stub:                     # 2 iterations/s for one job, no answer for the other
        def iteration_rate(self, job, gpu_type, num_gpus):
            return 2.0 if job.job_id == "a" else None

    class Snap:
        perf = Stub()
        cluster = Cluster((NodeSpec("n", "v100", 4),))

        class jobs:
            specs = [JobSpec("a", 0.0, 1, "cifar10"), JobSpec("b", 0.0, 1, "cifar10")]
    T = np.array([[4.0], [4.0]])
    assert Gavel._iteration_rates(Snap, T, np.array([1, 1])).tolist() == [[2.0], [4.0]]


def test_sia_sim_gives_pollux_what_sias_simulator_gives_it():
    """The Pollux baseline of Sia's simulator (bench/anchors/sia.md section 13): each job known
    only from the points it trained on (one model for every GPU type), speedups relative to the
    fair share, at most the smallest GPU type's GPUs, restarts counted after the first start;
    its genetic algorithm (section 18), drawing from the run's seed; the exact programme
    reachable (`pollux:search=ilp`)."""
    w = get_world("sia-sim")
    pol = make_policy(w.policy_spec("pollux", 5))
    assert (pol.learn, pol.fair_share, pol.type_cap, pol.first_start_counted) == (True,) * 4
    assert (pol.interval, pol.p, pol.aware, pol.search) == (60.0, -1.0, False, "ga")
    assert (pol.population, pol.generations, pol.seed) == (100, 100, 5)
    assert make_policy(w.policy_spec("pollux:search=ilp", 0)).search == "ilp"
    assert make_policy(get_world("quanta").policy_spec("pollux")).search == "ilp"
    assert make_policy(get_world("quanta").policy_spec("pollux")).learn is False
    # on a hand-made run: a job growing 1 -> 2 -> 4 would double again (16 T4s are free),
    # but not past the smallest type (4 A100s)
    c = Cluster((NodeSpec("a", "a100", 4),) + tuple(NodeSpec(f"t{i}", "t4", 4) for i in range(4)))
    job = JobSpec("c", 0.0, 1, "cifar10", total_steps=20000.0)
    res = Simulator([job], c, make_policy(w.policy_spec("pollux:search=ilp")),
                    w.perf(CatalogModel()), restart=w.restart(30.0), record_events=True).run()
    held = [e[4] for e in res.event_log if e[2] not in ("submit", "finish")]
    assert held[:3] == [1, 2, 4] and max(held) == 4 and np.isfinite(res.table.end[0])


@pytest.mark.slow          # ~1.5 min on 2 cores: Pollux's genetic algorithm every round, three seeds
def test_reproduce_pollux_stays_within_its_recorded_tolerance():
    """Regression guard on recorded Pollux runs (first 60 jobs of Sia's newtrace workload 1,
    run through Sia's own simulator's Pollux baseline with seeds 0, 1 and 2). Its genetic search
    is a draw: the reference's own average moves by up to 12.6% from one seed to another and its
    per-job JCTs by a median 27-36% (bench/anchors/sia.md section 19), so the bounds are on the
    means over the three seeds, each replayed with its seed. This workload has no imagenet job,
    whose GPU type under the heterogeneity-unaware Pollux moves a slice by tens of percent.
    Bounds are what this code measures plus a margin."""
    from statistics import mean

    from quanta.reproduce import reproduce
    *rows, means, spread = reproduce("pollux", workload="sia_newtrace_workload-1_first60",
                                     replay_seeds=3)
    assert sorted(r["variant"] for r in rows) == ["", "seed 1", "seed 2"]
    # seeds 0..2 are the reference runs' own: the two samples reuse their replays
    assert spread["variant"] == "3 reference / 3 replay seeds"
    assert spread["replay"]["avg_jct_matched_s"] == pytest.approx(
        mean(r["replay"]["avg_jct_matched_s"] for r in rows))
    sp = spread["spread"]["avg_jct"]
    assert (sp["ref_n"], sp["replay_n"]) == (3, 3) and sp["lo"] < sp["diff"] < sp["hi"]
    assert means["variant"] == "mean of 3 seeds" and means["seeds"] == 3
    assert means["replay"]["avg_jct_s"] == pytest.approx(mean(r["replay"]["avg_jct_s"] for r in rows))
    assert means["ref_by_app"]["bert"] == pytest.approx(mean(r["ref_by_app"]["bert"] for r in rows))
    assert all(r["replay"]["matched"] == 60 for r in rows)
    ref, rep = (mean(r["ref_avg_jct_s"] for r in rows), mean(r["replay"]["avg_jct_s"] for r in rows))
    assert abs(rep / ref - 1) < 0.06                                        # measured +0.3%
    mk = mean(r["replay"]["makespan_s"] for r in rows) / mean(r["ref_makespan_s"] for r in rows)
    assert abs(mk - 1) < 0.06                                               # measured -1.8%
    for app in rows[0]["ref_by_app"]:                      # measured +6.5%, -4.6%, -1.1%
        got = mean(r["replay"]["by_app"][app] for r in rows)
        assert abs(got / mean(r["ref_by_app"][app] for r in rows) - 1) < 0.10, app
    assert all(r["replay"]["median_abs_err"] < 0.40 for r in rows)          # measured 22-30%
    quanta = mean(r["quanta"]["avg_jct_s"] for r in rows)
    assert abs(rep - ref) < abs(quanta - ref)


@pytest.mark.parametrize("world, cluster, policies", [
    # a sharing policy after a Gavel one: gavel-sim's round clock kept the last round of the run
    # before (a job finishing in a pair was recorded as ending at gavel-fifo's last finish)
    ("gavel-sim", "v100:1x8", ["gavel-fifo", "sjf-ffs"]),
    ("gavel-sim", None, ["gavel-las-packed", "gavel-las", "gandiva"]),
    ("sia-sim", "t4:2x4,a100:1x8", ["sia", "gavel-las"]),
    ("tiresias-sim", "v100:2x4", ["tiresias-las", "fifo"]),
    ("quanta", "v100:1x4,k80:1x4", ["hadare", "sjf-bsbf", "las"]),
])
def test_each_policys_results_are_those_of_its_run_alone(world, cluster, policies):
    """One run of several policies is several runs: a policy's jobs end as they do alone,
    whichever policies come before it."""
    def jobs(pols):
        req = SimulationRequest(trace="synthetic:14:22", cluster=cluster, policies=pols, seed=13751,
                                out=None, plots=False, world=world, drop_impossible=True)
        _rows, _header, results = run_simulations(req, keep_results=True)
        return {p: np.stack([r.table.end, r.table.first_start]) for p, r in zip(pols, results)}
    together = jobs(policies)
    for p in policies:
        assert np.array_equal(jobs([p])[p], together[p], equal_nan=True), p
