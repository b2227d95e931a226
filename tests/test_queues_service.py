"""Queues in the service (issue 15): `quanta serve --queues FILE` against `quanta simulate --queues
FILE` on the same small workload (same admission order, same reasons and positions), submissions
refused by the queues, GET /v1/queues and `quanta queues`, REASON / POS / EST START in `quanta
queue`, `quanta sacct`, named priority classes (service, traces, files), `queues:` in sweeps."""

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quanta.errors import QuantaError

sys.path.insert(0, str(Path(__file__).parent))
from test_service import PY, Service, cli, free_port, service  # noqa: E402,F401

QUEUES = """\
name: two-teams
default_queue: platform
fairshare: {half_life_h: 1000, weight_age: 0}
preemption: {min_runtime_s: 3600}
priority_classes: {high: 100, normal: 0, low: -100}
queues:
  - name: all
  - name: team-a
    parent: all
    users: [alice]
    quota: {cpu: {nominal: 1, borrowing_limit: 0}}
  - name: team-b
    parent: all
    users: [bob]
    quota: {cpu: {nominal: 1, borrowing_limit: 0}}
  - name: platform
    parent: all
    quota: {cpu: 0}
"""
# (name, user, queue, priority, GPUs, submitted at s): a blocker holds the whole cluster on
# borrowed quota (protected by the minimum run time) while the teams' jobs arrive, so the layer
# orders all of them at once when it ends
JOBS = [("blocker", "admin", "platform", "normal", 2, 0),
        ("a1", "alice", "team-a", "normal", 1, 1), ("a2", "alice", "team-a", "low", 1, 2),
        ("a3", "alice", "team-a", "high", 1, 3), ("b1", "bob", "team-b", "normal", 1, 4),
        ("b2", "bob", "team-b", "high", 1, 5)]
SLEEP_S = 2.0


def write_inputs(tmp: Path) -> tuple[Path, Path]:
    q = tmp / "queues.yaml"
    q.write_text(QUEUES)
    t = tmp / "trace.csv"
    with open(t, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["job_id", "submit_time_s", "num_gpus", "duration_s", "vc", "user", "priority"])
        for name, user, queue, prio, gpus, at in JOBS:
            w.writerow([name, at, gpus, 60 if name == "blocker" else 10, queue, user, prio])
    return q, t


@pytest.fixture
def queued(service, tmp_path):
    """`quanta serve --queues QUEUES` (test_service's fixture: stopped, its jobs ended after)."""
    def make(**kw):
        return service(args=["--queues", str(write_inputs(tmp_path)[0])], **kw)
    return make


def spec_file(tmp: Path, name: str, queue: str, prio: str, gpus: int, sleep: float) -> Path:
    p = tmp / f"{name}.yaml"
    p.write_text(f"name: {name}\ncommand: [{PY}, -c, 'import time; time.sleep({sleep})']\n"
                 f"gpus: {gpus}\nqueue: {queue}\npriority: {prio}\n")
    return p


@pytest.mark.slow       # ~25 s: a service, real jobs, the simulator twice and 15 CLI commands
def test_same_admission_order_as_the_simulator(queued, tmp_path):
    """The same queues file and workload under `quanta simulate` and `quanta serve` (real jobs):
    the same reasons and positions while the blocker runs, the same order of first starts."""
    s = queued()
    q, trace = write_inputs(tmp_path)
    env = {"QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin, "COLUMNS": "250"}
    tokens = {"admin": s.admin}
    for user in ("alice", "bob"):
        r = cli("add-user", user, env=env)
        assert r.returncode == 0, r.stderr
        tokens[user] = r.stdout.strip()
    ids = {}
    for name, user, queue, prio, gpus, _at in JOBS:   # in the trace's order, each as its user
        sleep = 600 if name == "blocker" else SLEEP_S
        r = s.req("POST", "/v1/jobs", tokens[user], json={
            "name": name, "command": [PY, "-c", f"import time; time.sleep({sleep})"],
            "gpus": gpus, "queue": queue, "priority": prio})
        assert r.status_code == 201, r.text
        ids[name] = r.json()["id"]
        if name == "blocker":
            s.wait(ids[name], lambda j: j["state"] == "running")
    s.wait(ids["b2"], lambda j: j["reason"] != "")

    # the simulator at a moment while the blocker runs: each waiting job's reason and position
    sim = subprocess.run([PY, "-m", "quanta.cli", "queues", str(q), "--trace", str(trace),
                          "--cluster", "cpu:1x2", "--policy", "fifo", "--at-h", str(30 / 3600),
                          "--jobs", "--json"], capture_output=True, text=True, timeout=120)
    assert sim.returncode == 0, sim.stderr
    want = {r["job"]: (r["reason"], r["position"]) for r in json.loads(sim.stdout)}
    assert want == {"a3": ("WaitingForReclaim", 1), "a1": ("QuotaExceeded(team-a, cpu)", 2),
                    "a2": ("QuotaExceeded(team-a, cpu)", 3), "b2": ("WaitingForReclaim", 1),
                    "b1": ("QuotaExceeded(team-b, cpu)", 2)}
    # the service says the same, in `quanta queue` as a user types it (REASON, POS columns)
    out = cli("queue", env=env).stdout
    head = out.split("\n")[1].split()
    assert head == ["JOBID", "NAME", "USER", "QUEUE", "STATE", "TIME", "GPUS", "NODES/REASON",
                    "POS", "EST", "START"], out
    lines = {ln.split()[1]: ln for ln in out.splitlines()[3:] if ln.strip()}
    for name, (reason, pos) in want.items():     # no estimated start: the blocker never ends
        assert f" {reason} " in lines[name] and lines[name].split()[-1] == str(pos), out
    assert lines["blocker"].split()[4] == "RUNNING"
    js = json.loads(cli("queue", "--json", env=env).stdout)
    assert {j["name"]: j["position"] for j in js if j["state"] == "pending"} == \
        {k: v[1] for k, v in want.items()}
    # a plain user sees their own positions only
    mine = s.req("GET", "/v1/positions", tokens["bob"]).json()["positions"]
    assert set(mine) == {str(ids["b1"]), str(ids["b2"])}

    # the queues, from the API and from `quanta queues` against the service
    rep = s.req("GET", "/v1/queues").json()
    assert rep["queues"]["platform"]["borrowed"] == [2.0]
    assert rep["queues"]["team-a"]["pending"] == 3
    assert rep["queues"]["team-a"]["quota"]["cpu"] == {"nominal": 1.0, "max": 1.0, "lendable": 1.0}
    assert 0 < rep["queues"]["team-b"]["fairshare"] <= 1 and rep["priority_classes"]["high"] == 100
    r = cli("queues", env=env)
    assert r.returncode == 0 and "team-a" in r.stdout and "FAIRSHARE" in r.stdout, r.stderr
    assert json.loads(cli("queues", "--json", env=env).stdout)["name"] == "two-teams"

    # the blocker ends (the simulator: it finishes; here: cancelled): the teams' jobs run
    s.req("POST", f"/v1/jobs/{ids['blocker']}/cancel")
    for name in ("a1", "a2", "a3", "b1", "b2"):
        s.wait(ids[name], lambda j: j["state"] == "finished", timeout=120)
    served = {j["name"]: j["start"] for j in s.req("GET", "/v1/jobs").json()}
    res = subprocess.run([PY, "-m", "quanta.cli", "simulate", "--trace", str(trace), "--cluster",
                          "cpu:1x2", "--queues", str(q), "-p", "fifo", "--out",
                          str(tmp_path / "sim"), "--no-plots", "--quiet"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    with open(tmp_path / "sim" / "fifo_queues" / "jobs.csv") as f:
        simulated = {r["job_id"]: float(r["start_s"]) for r in csv.DictReader(f)}
    teams = [n for n, *_ in JOBS if n != "blocker"]
    # same order of first starts: per queue exactly; across queues wherever the simulator's
    # starts differ (jobs it starts at one instant may start in either order for real)
    for team in ("a", "b"):
        mine = [n for n in teams if n.startswith(team)]
        assert sorted(mine, key=simulated.get) == sorted(mine, key=served.get), (simulated, served)
    for x in teams:
        for y in teams:
            if simulated[x] < simulated[y]:
                assert served[x] < served[y], (x, y, simulated, served)
    assert sorted(teams, key=simulated.get)[:2] == ["a3", "b2"]
    assert served["a3"] == served["b2"]            # started by one decision

    # finished jobs show no waiting reason; sacct has their history
    out = cli("queue", "--all", env=env).stdout
    for ln in out.splitlines()[3:]:
        if "FINISHED" in ln:
            assert ln.split()[-1] == "-", out
    acct = json.loads(cli("sacct", "--json", env=env).stdout)
    assert [r["name"] for r in acct] == [n for n, *_ in JOBS]
    done = {r["name"]: r for r in acct}
    assert done["blocker"]["state"] == "cancelled" and done["a1"]["state"] == "finished"
    assert done["a1"]["queue"] == "team-a" and done["a1"]["user"] == "alice"
    assert SLEEP_S / 3600 * 0.9 < done["a1"]["gpu_hours"]["cpu"] < (SLEEP_S + 30) / 3600
    assert done["blocker"]["gpu_hours"]["cpu"] > 2 * 1.0 / 3600      # 2 slots, a few seconds
    assert done["a1"]["elapsed_s"] >= SLEEP_S * 0.9 and done["a1"]["end"] >= done["a1"]["start"]
    by_user = json.loads(cli("sacct", "--by", "user", "--json", env=env).stdout)["totals"]
    assert [(t["user"], t["jobs"], t["finished"], t["cancelled"]) for t in by_user] == \
        [("admin", 1, 0, 1), ("alice", 3, 3, 0), ("bob", 2, 2, 0)]
    alice = next(t for t in by_user if t["user"] == "alice")
    assert alice["gpu_hours_total"] == pytest.approx(sum(done[n]["gpu_hours"]["cpu"]
                                                         for n in ("a1", "a2", "a3")))
    only_b = json.loads(cli("sacct", "--queue", "team-b", "--json", env=env).stdout)
    assert [r["name"] for r in only_b] == ["b1", "b2"]
    assert json.loads(cli("sacct", "--since", "1h", "--json", env=env).stdout) == acct
    later = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 3600))
    assert json.loads(cli("sacct", "--since", later, "--json", env=env).stdout) == []
    table = cli("sacct", "--by", "queue", env=env)
    assert table.returncode == 0 and "team-a" in table.stdout and "CPU GPU-H" in table.stdout
    table = cli("sacct", "--user", "admin", env=env).stdout
    head, row = table.split("\n")[1].split(), table.split("\n")[3].split()
    assert head == ["JOBID", "NAME", "USER", "QUEUE", "STATE", "START", "END", "ELAPSED", "CPU",
                    "GPU-H", "HOW", "IT", "ENDED"], table
    assert row[:5] == [str(ids["blocker"]), "blocker", "admin", "platform", "CANCELLED"], table
    assert " ".join(table.split()).count("cancelled by its user") == 1, table
    as_bob = json.loads(cli("sacct", "--json", env={**env, "QUANTA_TOKEN": tokens["bob"]}).stdout)
    assert {r["user"] for r in as_bob} == {"bob"}
    # another user's history is an admin's to see (bob's own was shown, unsaid)
    r = cli("sacct", "--user", "admin", env={**env, "QUANTA_TOKEN": tokens["bob"]})
    assert r.returncode != 0 and "only an admin may see another user's jobs" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_submissions_the_queues_refuse(queued, tmp_path):
    s = queued()
    env = {"QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin}
    alice = cli("add-user", "alice", env=env).stdout.strip()
    carol = cli("add-user", "carol", env=env).stdout.strip()
    body = {"name": "x", "command": [PY, "-c", "pass"]}
    for fields, field, words in [
            ({"queue": "team-b"}, "queue", "user 'alice' may not submit to queue 'team-b'"),
            ({"queue": "nope"}, "queue", "no queue 'nope' in two-teams (queues alice may "
                                         "submit to: team-a, platform)"),
            ({"queue": "all"}, "queue", "'all' is a cohort of two-teams"),
            ({"queue": "team-a", "priority": "urgent"}, "priority",
             "unknown priority class 'urgent' (classes: high=100, normal=0, low=-100)"),
            # accepted before, then pending (QuotaExceeded) for ever
            ({"queue": "team-a", "gpus": 2}, "gpus", "queue 'team-a' can never hold 2 GPUs of "
                                                     "one type (the most it may hold: cpu 1)")]:
        r = s.req("POST", "/v1/jobs", alice, json={**body, **fields})
        assert r.status_code == 400, r.text
        assert r.json()["error"].startswith(f"field '{field}': {words}"), r.json()
    # accepted: a number, a class, no queue (alice's own), the open default queue for carol
    for fields in ({"queue": "team-a", "priority": 7}, {"priority": "low"}, {}):
        r = s.req("POST", "/v1/jobs", alice, json={**body, **fields})
        assert r.status_code == 201, r.text
    s.wait(r.json()["id"], lambda j: j["queue"] == "team-a")      # "default": her queue
    r = s.req("POST", "/v1/jobs", carol, json=body)
    assert r.status_code == 201, r.text
    s.wait(r.json()["id"], lambda j: j["queue"] == "platform")    # the default queue
    # the CLI as a user types it: one line naming the spec file, its line and the field; exit 2
    spec = spec_file(tmp_path, "mine", "team-b", "normal", 1, 0)
    r = cli("submit", str(spec), env={**env, "QUANTA_TOKEN": alice})
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"error: {spec}:4: field 'queue': user 'alice' may not submit"), \
        r.stderr
    spec = spec_file(tmp_path, "mine2", "team-a", "hgh", 1, 0)
    r = cli("submit", str(spec), env={**env, "QUANTA_TOKEN": alice})
    assert r.returncode == 2 and r.stderr.startswith(f"error: {spec}:5: field 'priority': "
                                                     "unknown priority class 'hgh'"), r.stderr
    bad = s.req("POST", "/v1/jobs", alice, json={**body, "priority": "two words"})
    assert bad.status_code == 422 and "field 'priority'" in bad.json()["error"]


@pytest.mark.slow
def test_estimated_start_from_the_measured_rate(queued):
    """EST START: the running job ends at the rate it reports (not the model's prior)."""
    s = queued()
    env = {"QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin}
    alice = cli("add-user", "alice", env=env).stdout.strip()
    body = {"name": "t", "command": [PY, "-m", "quanta.examples.train", "--step-sleep", "0.02"],
            "steps": 250, "queue": "team-a"}
    first, second = (s.req("POST", "/v1/jobs", alice, json=body).json()["id"] for _ in range(2))
    s.wait(first, lambda j: j["steps_done"] >= 60)
    time.sleep(1)
    mine = json.loads(cli("queue", "--json", env={**env, "QUANTA_TOKEN": alice}).stdout)
    est = next(j for j in mine if j["id"] == second)["est_start"]
    assert est is not None and time.time() < est < time.time() + 60, mine
    j = s.wait(second, lambda j: j["start"] is not None, timeout=120)
    assert abs(j["start"] - est) < 10, (j["start"], est)


def test_round_based_policy_waiting_for_its_first_round(queued):
    s = queued(policy="gavel-las:interval=600")         # no round for ten minutes
    r = s.req("POST", "/v1/jobs", json={"name": "w", "command": [PY, "-c", "pass"],
                                        "queue": "platform"})
    j = s.wait(r.json()["id"], lambda j: j["reason"] != "")
    assert j["state"] == "pending" and j["reason"] == "NextRound"
    assert s.req("GET", "/v1/queues").json()["queues"]["platform"]["pending"] == 1


def test_service_without_queues_has_no_queue_report(tmp_path):
    s = Service(tmp_path / "state").start()
    try:
        r = s.req("GET", "/v1/queues")
        assert r.status_code == 404 and "--queues" in r.json()["error"]
        r = s.req("POST", "/v1/jobs", json={"name": "x", "command": [PY, "-c", "pass"],
                                            "priority": "high"})
        assert r.status_code == 400 and r.json()["error"].startswith("field 'priority'")
        r = s.req("POST", "/v1/jobs", json={"name": "x", "command": [PY, "-c", "pass"],
                                            "priority": 3})
        assert r.status_code == 201
        env = {"QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin, "COLUMNS": "200"}
        q = cli("queue", env=env).stdout      # no POS / EST START columns without queues
        assert q.split("\n")[1].split()[-1] == "NODES/REASON"
        bad = cli("queues", env=env)
        assert bad.returncode == 2 and "--queues" in bad.stderr
    finally:
        s.stop()


def test_serve_refuses_a_bad_queues_file(tmp_path):
    p = tmp_path / "q.yaml"
    p.write_text("priority_classes: {high: 100, 9lives: 1}\nqueues:\n  - name: a\n")
    r = subprocess.run([PY, "-m", "quanta.cli", "serve", "--state", str(tmp_path / "st"),
                        "--port", str(free_port()), "--queues", str(p)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == (
        f"error: {p}:1: field 'priority_classes.9lives': priority class '9lives' is not a name "
        "(a letter, then letters, digits, _ . -)")
    assert not (tmp_path / "st").exists()


def test_service_config_carries_the_queues(tmp_path):
    """`ServiceConfig.queues`: build() puts the runtime under the layer (as `serve --queues`), and a
    bad file is refused before the state folder is created."""
    from quanta.queues.layer import QueueLayer
    from quanta.service.server import ServiceConfig, build
    q, _trace = write_inputs(tmp_path)
    _store, runtime, _app, _tok = build(ServiceConfig(tmp_path / "st", "fifo", "cpu:1x2",
                                                      queues=q))
    runtime.state_lock.close()
    assert isinstance(runtime.policy, QueueLayer) and runtime.tree.names[1] == "team-a"
    from quanta.runtime.spec import JobSubmission
    sub = JobSubmission(name="x", command=[PY, "-c", "pass"], queue="team-b")
    with pytest.raises(QuantaError, match="queue"):
        runtime.check_submission(sub, "alice")          # team-b admits bob only
    runtime.check_submission(sub, "bob")
    p = tmp_path / "q.yaml"
    p.write_text("queues:\n  - name: a\n    quota: {v100: -1}\n")
    with pytest.raises(QuantaError, match="q.yaml:3"):
        build(ServiceConfig(tmp_path / "st2", queues=p))
    assert not (tmp_path / "st2").exists()


# -- priority classes and sweeps in the simulator -------------------------------------------------
def test_trace_priority_names_need_the_queues_classes(tmp_path):
    q, trace = write_inputs(tmp_path)
    base = [PY, "-m", "quanta.cli", "simulate", "--trace", str(trace), "--cluster", "cpu:1x2",
            "-p", "fifo", "--no-plots", "--quiet"]
    r = subprocess.run(base + ["--out", str(tmp_path / "o1")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith(
        f"error: {trace}:2: field 'priority': job blocker: priority class 'normal' needs --queues "
        "FILE with priority_classes (or give numbers)"), r.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text(trace.read_text().replace("team-b,bob,high", "team-b,bob,urgent"))
    r = subprocess.run(base + ["--out", str(tmp_path / "o2"), "--trace", str(bad), "--queues",
                               str(q)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith(
        f"error: {bad}:7: field 'priority': job b2: unknown priority class 'urgent' (classes: "
        "high=100, normal=0, low=-100)"), r.stderr
    numbers = tmp_path / "numbers.csv"          # numbers work as before, with or without queues
    numbers.write_text(trace.read_text().replace(",normal", ",0").replace(",high", ",100")
                       .replace(",low", ",-100"))
    r = subprocess.run(base + ["--out", str(tmp_path / "o3"), "--trace", str(numbers)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_priority_classes_order_jobs_in_the_simulator(tmp_path):
    from quanta.model.job import JobSpec
    from quanta.queues.spec import load_queues, resolve_priorities
    q, _t = write_inputs(tmp_path)
    tree = load_queues(q)
    specs = [JobSpec("x", 0, 1, priority="high"), JobSpec("y", 0, 1, priority=5),
             JobSpec("z", 0, 1, priority="low", source_line=9)]
    assert [s.priority for s in resolve_priorities(specs, tree)] == [100, 5, -100]
    with pytest.raises(QuantaError, match=r"^t.csv:9: field 'priority': job z: unknown "):
        resolve_priorities([specs[2].with_(priority="lowest")], tree, "t.csv")
    assert tree.admission_error("default", "alice") is None            # her own queue
    assert tree.admission_error("team-a", "bob")[0] == "queue"


def test_sweep_compares_policies_under_a_queues_file(tmp_path):
    import quanta
    from quanta.sweepfile import load_sweep_file
    q, trace = write_inputs(tmp_path)
    f = tmp_path / "sweep.yaml"
    f.write_text(f"traces: [{trace.name}]\nclusters: [cpu:1x2]\npolicies: [fifo, las]\n"
                 f"queues: {q.name}\n")
    spec = load_sweep_file(f)
    assert spec.queues == str(q)
    res = quanta.sweep(file=f, out=tmp_path / "sw", workers=1, progress=False)
    assert list(res.results["queues"]) == [str(q)] * 2
    assert list(res.results["finished"]) == [6, 6]
    numbers = tmp_path / "numbers.csv"                     # (class names need the queues)
    numbers.write_text(trace.read_text().replace(",normal", ",0").replace(",high", ",100")
                       .replace(",low", ",-100"))
    plain = quanta.sweep(traces=[str(numbers)], clusters="cpu:1x2", policies=["fifo", "las"],
                         out=tmp_path / "sw2", workers=1, progress=False)
    assert list(plain.results["queues"].fillna("")) == ["", ""]
    # the queue layer changes the runs: the high-priority jobs go first only under it
    first = {}
    for name, r in (("queues", res), ("plain", plain)):
        j = r.jobs
        j = j[(j.policy == "fifo") & (j.job_id != "blocker")]
        first[name] = set(j[j.start_s == j.start_s.min()].job_id)
    assert first == {"queues": {"a3", "b2"}, "plain": {"a1", "a2"}}
    f.write_text(f"traces: [{trace.name}]\nclusters: [cpu:1x2]\npolicies: [fifo]\n"
                 "queues: missing.yaml\n")
    with pytest.raises(QuantaError, match="missing.yaml"):
        load_sweep_file(f)


# -- the pieces ------------------------------------------------------------------------------------
def test_since_and_where_column():
    from quanta.cli_jobs import since_time, where_column
    now = 1_800_000_000.0
    assert since_time("2h", now) == now - 7200 and since_time("90m", now) == now - 5400
    assert since_time("1800000000", now) == now
    assert since_time("2026-11-24T15:00") == time.mktime((2026, 11, 24, 15, 0, 0, 0, 0, -1))
    with pytest.raises(QuantaError, match="--since"):
        since_time("yesterday-ish", now)
    # before 1970: said here (the service refused its own 'since', by its name)
    for text in ("99999999d", "0001-01-01", "9" * 400 + "d"):
        with pytest.raises(QuantaError, match=r"field '--since': '.*' is before 1970"):
            since_time(text, now)
    done = {"state": "finished", "reason": "Priority", "held": False, "nodes": ""}
    assert where_column(done) == "-"
    assert where_column({**done, "reason": "QuotaExceeded(a, cpu)"}) == "-"
    assert where_column({**done, "state": "failed", "reason": "exit code 3"}) == "exit code 3"
    assert where_column({**done, "state": "pending", "reason": ""}) == "None"


def test_accounting_history_and_totals(tmp_path):
    from quanta.service import accounting
    from quanta.service.store import Store
    st = Store(tmp_path / "q.db")
    a = st.add_job("alice", "a", "team-a", {}, 0, 100.0)
    b = st.add_job("bob", "b", "team-b", {}, 0, 100.0)
    old = st.add_job("bob", "old", "team-b", {}, 0, 100.0)
    accounting.started(st, a, 1, "v100", 2, 200.0)
    accounting.ended(st, a, 200.0 + 1800)             # 1 GPU-hour
    accounting.started(st, a, 2, "k80", 1, 3000.0)
    accounting.ended(st, a, 3000.0 + 3600)            # 1 GPU-hour on K80
    st.update(a, state="finished", start=200.0, end_time=6600.0)
    accounting.started(st, b, 1, "v100", 1, 300.0)    # still running: not in the history
    st.update(old, state="failed", reason="exit code 3", start=10.0, end_time=20.0,
              attained=7200.0, gpu_type="p100")       # finished before accounting was kept
    rows = accounting.history(st)
    assert [(r["name"], r["state"], r["gpu_hours"]) for r in rows] == [
        ("a", "finished", {"k80": 1.0, "v100": 1.0}), ("old", "failed", {"p100": 2.0})]
    assert rows[0]["elapsed_s"] == 6400.0
    assert [r["name"] for r in accounting.history(st, since=1000.0)] == ["a"]
    assert [r["name"] for r in accounting.history(st, user="bob")] == ["old"]
    tot = accounting.totals(rows, "queue")
    assert [(t["queue"], t["jobs"], t["gpu_hours_total"]) for t in tot] == [
        ("team-a", 1, 2.0), ("team-b", 1, 2.0)]
    assert tot[1]["failed"] == 1
    # run time over launches, a running one's to now (quanta queue's TIME); none: not listed
    assert accounting.run_seconds(st, [a, b, old], now=400.0) == {a: 1800.0 + 3600.0, b: 100.0}


@pytest.mark.parametrize("text, says", [
    # read as every other file of ours: no key twice (the last one won), no FIFO or /dev/zero
    ("queues:\n  - name: a\n  - name: b\n    weight: 1\n    weight: 2\n",
     "q.yaml:5: not valid YAML (duplicate key 'weight')"),
    (None, "q.yaml: cannot read it: not a regular file"),
])
def test_queues_files_are_read_as_every_yaml_file_of_ours(tmp_path, text, says):
    import os
    p = tmp_path / "q.yaml"
    if text is None:
        os.mkfifo(p)
    else:
        p.write_text(text)
    r = subprocess.run([PY, "-m", "quanta.cli", "queues", str(p)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == f"error: {p.parent}/{says}", r.stderr
