"""The queue layer driven by the simulator: quotas hold at every event of a run, no job is
preempted before its minimum run time, lent GPUs are reclaimed, per-queue metrics add up, runs
are deterministic; `quanta queues` lists a file and a simulated moment."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from quanta.core.jobtable import DONE
from quanta.errors import QuantaError
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.policies import make_policy
from quanta.runner import SimulationRequest, run_simulations
from quanta.queues import QueueLayer, parse_queues, queue_metrics, with_queues
from quanta.queues.sim import apply_queues, write_queue_report
from quanta.report.metrics import job_metrics, summary
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost

MIN_RT = 900.0


def cl() -> Cluster:
    return Cluster(tuple([NodeSpec(f"v{i}", "v100", 8) for i in range(4)] +
                         [NodeSpec(f"p{i}", "p100", 8) for i in range(2)]))


def tree():
    return parse_queues({
        "name": "two-cohorts",
        "fairshare": {"half_life_h": 2},
        "preemption": {"min_runtime_s": MIN_RT, "reclaim_grace_s": 60},
        "queues": [
            {"name": "all"},
            {"name": "r", "parent": "all"}, {"name": "p", "parent": "all"},
            {"name": "a", "parent": "r", "weight": 2, "quota": {"v100": 8, "p100": 4}},
            {"name": "b", "parent": "r", "quota": {"v100": 8, "p100": 4}},
            {"name": "c", "parent": "p", "quota": {"v100": {"nominal": 12, "lending_limit": 4},
                                                   "p100": 8}},
            {"name": "d", "parent": "p", "quota": {"v100": 4}, "min_runtime_s": 300}]})


def jobs(n=100, seed=3):
    rng = np.random.default_rng(seed)
    out, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(120.0))
        d = float(rng.integers(300, 8000))
        q = str(rng.choice(["a", "b", "c", "d"], p=[0.4, 0.2, 0.3, 0.1]))
        out.append(JobSpec(f"j{i:03d}", t, int(rng.choice([1, 1, 2, 4, 8])), "", total_steps=d,
                           duration_s=d, queue=q, user=f"{q}{int(rng.integers(3))}",
                           priority=int(rng.choice([0, 0, 0, 10]))))
    return out


def run(inner, perf, scope="queue", specs=None, events=True):
    layer = QueueLayer(make_policy(inner), tree(), scope=scope)
    sim = Simulator(specs or jobs(), cl(), layer, perf, restart=RestartCost(30.0),
                    record_events=events)
    return layer, sim, sim.run()


def replay_usage(res, tr):
    """Per event time: GPUs per (leaf, type) held, from the event log."""
    t = res.table
    leaf = [tr.leaf_pos[tr.queue_of(s)] for s in t.specs]
    holding: dict[int, tuple[int, int]] = {}
    use = np.zeros((tr.num_leaves, len(res.cluster.types)))
    last_start: dict[int, float] = {}
    snaps, preempt_after = [], []
    for when, row, what, ty, g, _nodes, _mode in res.event_log:
        if row in holding:
            k, old = holding.pop(row)
            use[leaf[row], k] -= old
        if what in ("start", "migrate", "resize", "reconfigure", "reshare") and g > 0:
            holding[row] = (ty, g)
            use[leaf[row], ty] += g
            if what != "reshare":
                last_start[row] = when
        if what == "preempt":
            preempt_after.append((row, when - last_start[row]))
        snaps.append((when, use.copy()))
    return snaps, preempt_after


@pytest.mark.parametrize("inner, scope", [("fifo", "queue"), ("las", "queue"),
                                          ("las", "cluster"), ("gavel-las", "cluster"),
                                          ("tiresias-las", "queue")])
def test_quotas_hold_at_every_event_and_min_runtime(inner, scope, perf):
    layer, sim, res = run(inner, perf, scope)
    t = res.table
    assert not res.stalled and np.all(t.state == DONE)
    tr = layer.tree
    comp = tr.compile(res.cluster.types)
    most = np.array([comp.cap[p].min(axis=0) for p in tr.paths])
    snaps, preempts = replay_usage(res, tr)
    by_time = {}
    for when, u in snaps:
        by_time[when] = u                       # the state after the last event of each instant
    for when, u in by_time.items():
        assert (u <= most + 1e-9).all(), (when, u)
        for node in range(len(tr.names)):       # cohorts within their caps too
            sub = [li for li, p in enumerate(tr.paths) if node in p]
            assert (u[sub].sum(axis=0) <= comp.cap[node] + 1e-9).all()
    mins = {i: float(tr.min_runtime[tr.queue_of(s)]) for i, s in enumerate(t.specs)}
    for row, ran in preempts:
        assert ran >= mins[row] - 1e-6, (row, ran)
    # per-queue metrics add up to the run's
    rows = queue_metrics(res, layer, sim.loop.state)
    leaves = [r for r in rows if r["queue"] in ("a", "b", "c", "d")]
    s = summary(res)
    assert sum(r["jobs"] for r in leaves) == s["jobs"]
    assert sum(r["gpu_hours"] for r in leaves) == pytest.approx(s["gpu_hours"], rel=1e-9)
    per_type = sum(r["gpu_hours_v100"] + r["gpu_hours_p100"] for r in leaves)
    # exact for event-driven policies; a round-based one's jobs that end between rounds are
    # accounted at their estimated end
    assert per_type == pytest.approx(s["gpu_hours"], rel=1e-6 if layer.interval is None else 0.02)
    top = next(r for r in rows if r["queue"] == "all")
    assert top["jobs"] == s["jobs"] and top["gpu_hours"] == pytest.approx(s["gpu_hours"])
    m = job_metrics(res)
    a = next(r for r in rows if r["queue"] == "a")
    sel = [i for i, sp in enumerate(t.specs) if sp.queue == "a"]
    assert a["avg_jct_s"] == pytest.approx(float(np.mean(m.jct[sel])))
    assert all(r["borrowed_gpu_hours"] >= 0 for r in rows)


def test_reclaim_in_a_run(perf):
    # b fills its cohort with long jobs while a is idle; a's jobs arrive later and reclaim
    specs = [JobSpec(f"b{i}", float(i), 4, "", total_steps=20000.0, duration_s=20000.0,
                     queue="b") for i in range(6)]
    specs += [JobSpec(f"a{i}", 5000.0 + i, 4, "", total_steps=1000.0, duration_s=1000.0,
                      queue="a") for i in range(2)]
    t = parse_queues({"preemption": {"min_runtime_s": MIN_RT, "reclaim_grace_s": 120},
                      "queues": [{"name": "lab"},
                                 {"name": "a", "parent": "lab", "quota": {"v100": 8}},
                                 {"name": "b", "parent": "lab", "quota": {"v100": 8}}]})
    c = Cluster(tuple(NodeSpec(f"v{i}", "v100", 8) for i in range(2)))
    layer = QueueLayer(make_policy("fifo"), t)
    sim = Simulator(specs, c, layer, perf, restart=RestartCost(30.0), record_events=True)
    res = sim.run()
    tb = res.table
    assert np.all(tb.state == DONE)
    # b borrowed a's 8 GPUs until a came: a's jobs start after the grace, two of b's are reclaimed
    a_rows = [tb.index["a0"], tb.index["a1"]]
    assert np.all(tb.first_start[a_rows] == pytest.approx(5000.0 + 120.0, abs=2.0))
    assert int(tb.preemptions.sum()) == 2
    rows = queue_metrics(res, layer, sim.loop.state)
    rb = next(r for r in rows if r["queue"] == "b")
    assert rb["reclaim_preemptions"] == 2
    # borrowed GPU-hours: the integral of b's GPUs beyond its nominal 8, from the event log
    snaps, _ = replay_usage(res, t)
    times = [w for w, _u in snaps]
    over = [max(u[t.leaf_pos[t.names.index("b")], 0] - 8.0, 0.0) for _w, u in snaps]
    want = sum(o * (t1 - t0) for o, t0, t1 in zip(over, times, times[1:])) / 3600.0
    assert want > 8 * 5000 / 3600
    assert rb["borrowed_gpu_hours"] == pytest.approx(want, rel=1e-6)


def _one_queue_run(specs, queues, perf, inner, nodes=1, gpus=4):
    c = Cluster(tuple(NodeSpec(f"v{i}", "v100", gpus) for i in range(nodes)))
    res = Simulator(specs, c, QueueLayer(make_policy(inner), parse_queues(queues)), perf,
                    restart=RestartCost(0.0)).run()
    assert np.all(res.table.state == DONE)
    return res.table


def test_a_higher_class_goes_first_under_a_time_sharing_inner_policy(perf):
    """One GPU, no preemption within the queue: when blk ends, h (high) starts before the
    normal and low jobs that came before it. las was handed every waiting class as candidates
    and started the low one first (least attained service, earliest)."""
    def job(name, submit, prio, dur=100.0):
        return JobSpec(name, submit, 1, "", total_steps=dur, duration_s=dur, queue="a",
                       priority=prio)
    specs = [job("blk", 0.0, -100, 1000.0), job("l1", 5.0, -100), job("n1", 10.0, 0),
             job("h1", 20.0, 100), job("n2", 30.0, 0)]
    q = {"preemption": {"within_queue": "never"},
         "priority_classes": {"high": 100, "normal": 0, "low": -100},
         "queues": [{"name": "a", "quota": {"v100": 1}}]}
    for inner in ("fifo", "las"):
        t = _one_queue_run(specs, q, perf, inner)
        order = sorted(["l1", "n1", "h1", "n2"], key=lambda j: t.first_start[t.index[j]])
        assert order == ["h1", "n1", "n2", "l1"], (inner, order)


def test_a_starving_job_keeps_the_room_it_waits_for(perf):
    """big (2 GPUs) waits behind a stream of 1-GPU jobs in a 2-GPU queue: past starvation_s the
    smaller jobs no longer take the GPU freed first (they did, and big started after all of
    them, at 5,795 s under fifo, as with no starvation_s)."""
    specs = [JobSpec("s0", 0.0, 1, "", total_steps=1000.0, duration_s=1000.0, queue="a"),
             JobSpec("big", 1.0, 2, "", total_steps=500.0, duration_s=500.0, queue="a")]
    specs += [JobSpec(f"s{i}", 2.0 + i, 1, "", total_steps=700.0 + 37 * i,
                      duration_s=700.0 + 37 * i, queue="a") for i in range(1, 12)]
    q = {"starvation_s": 1500, "queues": [{"name": "a", "quota": {"v100": 2}}]}
    for inner in ("fifo", "las"):
        t = _one_queue_run(specs, q, perf, inner)
        big = t.first_start[t.index["big"]]
        assert big < 2000.0, (inner, big)
        # once big starves, no job behind it starts until big has
        later = [t.first_start[t.index[f"s{i}"]] for i in range(4, 12)]
        assert all(x >= big for x in later if x > 1501.0 + 1e-6), (inner, big, later)


def test_same_inputs_same_run(perf):
    specs = jobs(60)
    a = run("las", perf, events=False, specs=specs)[2]
    b = run("las", perf, events=False, specs=specs)[2]
    assert np.array_equal(a.table.end, b.table.end, equal_nan=True)
    assert np.array_equal(a.busy, b.busy)


def test_apply_queues_and_report(perf, tmp_path):
    specs = jobs(60)
    layers, notes = apply_queues([make_policy("fifo"), make_policy("las")], tree(), specs, cl(),
                                 "trace.csv")
    assert [p.label() for p in layers] == ["fifo+queues", "las+queues"]
    assert notes[0].startswith("queues: two-cohorts")
    results = []
    for p in layers:
        sim = Simulator(specs, cl(), p, perf)
        results.append(sim.run())
        assert results[-1].policy_state is sim.loop.state      # the layer's state, with its books
    rows = write_queue_report(tmp_path, results, layers)
    with open(tmp_path / "queues.csv") as f:
        got = list(csv.DictReader(f))
    assert len(got) == len(rows) == 2 * 7
    assert got[0]["policy"] == "fifo+queues" and "gpu_hours_v100" in got[0]
    bad = specs + [JobSpec("x", 1.0, 1, "", queue="nowhere", user="eve", source_line=61)]
    with pytest.raises(QuantaError, match=r"^trace.csv:61: field 'user'"):
        apply_queues([make_policy("fifo")], tree(), bad, cl(), "trace.csv")


def test_with_queues_from_file(tmp_path):
    p = tmp_path / "q.yaml"
    p.write_text("queues:\n  - name: a\n    quota: {v100: 4}\n")
    layer = with_queues(make_policy("srtf"), p)
    assert layer.label() == "srtf+queues" and layer.interval is None and layer.tree.name == "q"


# -- quanta queues ------------------------------------------------------------------------------------
def app():
    from rich.console import Console
    from quanta.cli_queues import register
    a = typer.Typer()

    @a.callback()
    def _root() -> None:
        pass

    console = Console(width=200)
    register(a, lambda: console)          # register takes the console's maker
    return a


def test_cli_lists_a_file():
    r = CliRunner().invoke(app(), ["queues", "quanta/examples/queues/teams.yaml"])
    assert r.exit_code == 0, r.output
    assert "vision" in r.output and "12/24" in r.output
    r = CliRunner().invoke(app(), ["queues", "quanta/examples/queues/teams.yaml", "--json"])
    data = json.loads(r.output)
    assert {q["queue"] for q in data["queues"]} >= {"vision", "speech", "nlp", "platform"}


def test_cli_simulated_moment_and_jobs():
    base = ["queues", "quanta/examples/queues/teams.yaml", "--trace", "philly", "--max-jobs",
            "150", "--policy", "las", "--at-h", "6"]
    r = CliRunner().invoke(app(), base + ["--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert set(rep["queues"]) >= {"research", "vision", "production"}
    q = rep["queues"]["cluster"]
    assert q["running"] + q["pending"] > 0 and 0 < q["fairshare"] <= 1
    r = CliRunner().invoke(app(), base + ["--jobs", "--json"])
    rows = json.loads(r.output)
    for x in rows:
        assert x["position"] >= 1 and x["reason"]


def test_cli_bad_file_is_one_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("queues:\n  - name: a\n    quota:\n      v100: -1\n")
    r = CliRunner().invoke(app(), ["queues", str(p)])
    assert isinstance(r.exception, QuantaError)
    assert str(r.exception).startswith(f"{p}:4: field 'queues[a].quota.v100.nominal'")


@pytest.mark.parametrize("inner", ["fifo", "las", "srtf", "tiresias-las", "gavel-las"])
@pytest.mark.parametrize("scope", ["cluster", "queue"])
def test_one_queue_holding_the_cluster_changes_nothing(inner, scope, perf):
    """A single queue whose quota is the whole cluster, no minimum run time, one priority: the
    layer is transparent, the inner policy's run is reproduced exactly."""
    t = parse_queues({"default_queue": "all", "preemption": {"min_runtime_s": 0},
                      "queues": [{"name": "all", "quota": {"v100": 32, "p100": 16}}]})
    specs = [s.with_(priority=0) for s in jobs(80, seed=5)]
    plain = Simulator(specs, cl(), make_policy(inner), perf).run()
    layered = Simulator(specs, cl(), QueueLayer(make_policy(inner), t, scope=scope), perf).run()
    assert np.array_equal(plain.table.end, layered.table.end, equal_nan=True)
    assert np.array_equal(plain.table.preemptions, layered.table.preemptions)


def test_cli_service_report_rendering():
    """`quanta queues` without a file shows a service's /v1/queues report: the same table."""
    from io import StringIO

    from rich.console import Console

    from quanta.cli_queues import render_report
    report = {"types": ["v100"], "queues": {
        "a": {"parent": "lab", "usage": [4.0], "nominal": [2.0], "borrowed": [2.0], "running": 1,
              "pending": 2, "pending_gpus": 8, "fairshare": 0.25},
        "lab": {"parent": "", "usage": [4.0], "nominal": [8.0], "borrowed": [0.0], "running": 1,
                "pending": 2, "pending_gpus": 8, "fairshare": 0.5}}}
    buf = StringIO()
    render_report(Console(file=buf, width=200), report, "t")
    lines = buf.getvalue().splitlines()
    lab = next(i for i, x in enumerate(lines) if x.strip().startswith("lab"))
    a = next(i for i, x in enumerate(lines) if x.strip().startswith("a "))
    assert lab < a and "4/2" in lines[a] and "0.250" in lines[a]


@pytest.mark.parametrize("quota, trace, starts", [
    # no V100 quota: the 2-GPU job never left its first type for P100, on an idle cluster
    ("v100: 0\n      p100: 2", "j0,0,2,100,c,ResNet-18 (batch size 32)\n", {"j0": 0.0}),
    # V100 quota held by j0: j1 waited for it instead of taking P100's room
    ("v100: 2\n      p100: 4", "j0,0,2,1000,c,ResNet-18 (batch size 32)\n"
                              "j1,10,2,1000,c,ResNet-18 (batch size 32)\n", {"j0": 0.0, "j1": 10.0}),
])
def test_a_job_refused_on_a_type_over_quota_takes_another_with_room(tmp_path, quota, trace, starts):
    q = tmp_path / "q.yaml"
    q.write_text(f"queues:\n  - name: c\n    quota:\n      {quota}\n")
    t = tmp_path / "t.csv"
    t.write_text("job_id,submit_time_s,num_gpus,duration_s,vc,job_type\n" + trace)
    req = SimulationRequest(trace=str(t), cluster="v100:1x4,p100:1x4", policies=["fifo"],
                            seed=0, out=None, plots=False, queues=str(q))
    _rows, _h, (res,) = run_simulations(req, keep_results=True)
    got = {s.job_id: float(res.table.first_start[i]) for i, s in enumerate(res.table.specs)}
    assert got == starts


def test_per_type_gpu_hours_add_up_to_the_queues_gpu_hours(tmp_path):
    """An event-driven policy is asked at a completion only when something is left to run: the
    next arrival's decision counted the idle time since as the finished job's (the bundled
    teams.yaml on 300 Philly jobs: nlp's per-type hours 0.39 GPU-h over its total)."""
    req = SimulationRequest(trace="philly", cluster=None, policies=["fifo", "las"], seed=0,
                            out=str(tmp_path / "o"), plots=False, max_jobs=300,
                            queues=str(Path(__file__).resolve().parents[1] / "quanta" / "examples"
                                       / "queues" / "teams.yaml"))
    run_simulations(req)
    rows = list(csv.DictReader(open(tmp_path / "o" / "queues.csv")))
    assert rows
    for r in rows:
        types = sum(float(v) for k, v in r.items() if k.startswith("gpu_hours_"))
        # (queues.csv keeps 6 significant digits)
        assert abs(types - float(r["gpu_hours"])) <= 1e-5 * max(1.0, float(r["gpu_hours"])), r


def test_cli_a_job_the_cluster_can_never_fit_stops_it_as_simulate_does(tmp_path):
    """`quanta queues FILE --trace T` ran a trace whose 16-GPU job no node of v100:2x4 holds and
    printed the queue's averages without a word (the job simply never ran); `quanta simulate`
    refuses it. Now the same one-line error, exit 2; --drop-impossible goes on with a note."""
    import subprocess
    import sys
    (tmp_path / "q.yaml").write_text("name: t\ndefault_queue: a\nqueues:\n  - name: a\n"
                                     "    quota: {v100: 8}\n")
    (tmp_path / "tr.csv").write_text("job_id,submit_time,num_gpu,duration\nj1,0,1,3600\n"
                                     "j2,0,16,3600\n")
    cmd = [sys.executable, "-m", "quanta.cli", "queues", "q.yaml", "--trace", "tr.csv",
           "--cluster", "v100:2x4"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ("error: tr.csv:3: field 'num_gpu': job j2 asks for 16 GPUs; the largest "
                        "usable GPU type of cluster 'v100:2x4' has 8; use --drop-impossible to "
                        "report them and go on\n")
    r = subprocess.run(cmd + ["--drop-impossible", "--json"], cwd=tmp_path, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "note: 1 jobs can never fit on this cluster and are reported as " \
                       "unschedulable\n"
    (row,) = json.loads(r.stdout)
    assert row["queue"] == "a" and row["jobs"] == 2 and row["finished"] == 1


@pytest.mark.parametrize("policy", ["sjf-bsbf", "sjf-ffs"])
def test_a_spanning_guests_own_gpus_count_against_the_queues_and_the_cluster(tmp_path, policy):
    """A guest spanning its hosts' GPUs and idle ones holds those idle GPUs as its own (the
    mechanism counts them); the layer did not: each queue deciding within its own room (scope:
    queue), the decision asked the cluster for 37 of its 36 V100s (a PolicyError traceback; the
    determinism probe)."""
    from quanta.runner import SimulationRequest, run_simulations
    teams = (Path(__file__).resolve().parents[1] / "quanta" / "examples" / "queues"
             / "teams.yaml").read_text()
    assert "\nname: teams\n" in teams
    (tmp_path / "q.yaml").write_text(teams.replace("\nname: teams\n",
                                                   "\nname: teams\nscope: queue\n"))
    rows, _ = run_simulations(SimulationRequest(
        trace="philly", max_jobs=300, load_scale=3.0, cluster="gavel-108",
        queues=str(tmp_path / "q.yaml"), policies=[policy], out=tmp_path / "o", plots=False))
    assert rows[0]["finished"] == 300
