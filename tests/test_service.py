"""The scheduler service for real: `quanta serve` in a subprocess on 127.0.0.1, HTTP requests,
SQLite state, example jobs training in worker processes, kill -9 and restart."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    def __init__(self, state: Path, policy="fifo", cluster="cpu:1x2"):
        self.state, self.policy, self.cluster = state, policy, cluster
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [PY, "-m", "quanta.cli", "serve", "--port", str(self.port), "--state", str(self.state),
             "--policy", self.policy, "--cluster", self.cluster, "--poll-s", "0.1"],
            stdout=open(self.state.parent / f"serve-{self.port}.log", "ab"), stderr=subprocess.STDOUT)
        end = time.time() + 60
        while True:
            try:
                if httpx.get(self.url + "/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None, "quanta serve exited"
            assert time.time() < end, "quanta serve did not come up"
            time.sleep(0.1)
        self.admin = (self.state / "admin.token").read_text().strip()
        return self

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def req(self, method, path, token=None, **kw):
        token = self.admin if token is None else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.request(method, self.url + path, headers=headers, timeout=30, **kw)

    def submit(self, token=None, **fields):
        body = {"name": "mlp", "command": [PY, "-m", "quanta.examples.train", "--model", "mlp"],
                "steps": 60, "checkpoint_every": 20, "grace_s": 20}
        body.update(fields)
        r = self.req("POST", "/v1/jobs", token, json=body)
        assert r.status_code == 201, r.text
        return r.json()["id"]

    def job(self, job_id):
        return self.req("GET", f"/v1/jobs/{job_id}").json()

    def wait(self, job_id, cond, timeout=90.0):
        end = time.time() + timeout
        while time.time() < end:
            j = self.job(job_id)
            if cond(j):
                return j
            time.sleep(0.1)
        ev = self.req("GET", f"/v1/jobs/{job_id}/events").json()
        raise AssertionError(f"job {job_id} never reached the condition: {self.job(job_id)} {ev}")

    def kinds(self, job_id, every=False):
        """The job's life events (every=True: also 'stopping' requests and 'training' starts)."""
        kinds = [e["kind"] for e in self.req("GET", f"/v1/jobs/{job_id}/events").json()]
        return kinds if every else [k for k in kinds if k not in ("stopping", "training")]


@pytest.fixture
def service(tmp_path):
    procs = []

    def make(**kw):
        s = Service(tmp_path / "state", **kw).start()
        procs.append(s)
        return s
    yield make
    for s in procs:
        s.stop()
    # leave no job processes behind
    subprocess.run(["pkill", "-f", f"quanta.runtime.launch {tmp_path}"], check=False)


def finished(j):
    return j["state"] == "finished"


def test_submit_run_finish_logs_metrics_and_page(service):
    s = service()
    a = s.submit(name="mlp", steps=80)
    b = s.submit(name="lm", command=[PY, "-m", "quanta.examples.train", "--model", "lm"], gpus=2,
                 steps=30)
    ja = s.wait(a, finished)
    jb = s.wait(b, finished)
    assert ja["steps_done"] == 80 and jb["steps_done"] == 30
    assert ja["gpu_type"] == "cpu" and ja["start"] >= ja["submit"] and ja["preemptions"] == 0
    assert s.kinds(a) == ["submit", "start", "finished"]
    log = s.req("GET", f"/v1/jobs/{a}/logs", params={"tail": 1}).text
    assert log.startswith("step 80/80 loss")
    m = s.req("GET", "/metrics", token="").text
    assert 'quanta_jobs{state="finished"} 2' in m
    assert 'quanta_gpus_total{gpu_type="cpu"} 2' in m and "quanta_decision_seconds_count" in m
    page = s.req("GET", "/", token="", params={"token": s.admin}).text
    assert "<td>mlp</td>" in page and "cpu" in page
    assert s.req("GET", "/docs", token="").status_code == 200
    assert s.req("GET", "/openapi.json", token="").json()["paths"]["/v1/jobs"]


def test_a_command_without_the_sdk_that_exits_0_succeeds_and_steps_are_optional(service):
    s = service()
    body = {"name": "plain", "command": [PY, "-c", "print('hello')"]}
    r = s.req("POST", "/v1/jobs", json=body)                        # no steps: accepted
    assert r.status_code == 201, r.text
    a = r.json()["id"]
    b = s.submit(name="counted", command=[PY, "-c", "pass"], steps=10)   # never reports a step
    c = s.submit(name="crash", command=[PY, "-c", "raise SystemExit(1)"], max_failures=0)
    ja, jb = s.wait(a, finished), s.wait(b, finished)
    assert ja["total_steps"] == 0 and ja["steps_done"] == 0 and jb["steps_done"] == 0
    jc = s.wait(c, lambda j: j["state"] == "failed")
    assert "exited with code 1" in jc["reason"]
    out = subprocess.run([PY, "-m", "quanta.cli", "status", str(a)], capture_output=True,
                         text=True, env={**os.environ, "QUANTA_URL": s.url,
                                         "QUANTA_TOKEN": s.admin})
    text = " ".join(out.stdout.split())
    assert out.returncode == 0 and "FINISHED" in text and "0/? steps" in text
    assert "restarts from scratch when preempted" in text
    too_big = s.req("POST", "/v1/jobs", json={**body, "steps": 2 ** 63})
    assert too_big.status_code == 422 and "steps" in too_big.text   # (was a 500)


def test_tokens_separate_users(service):
    s = service()
    r = s.req("POST", "/v1/users", json={"name": "alice"})
    alice = r.json()["token"]
    bob = s.req("POST", "/v1/users", json={"name": "bob"}).json()["token"]
    assert s.req("GET", "/v1/jobs", token="").status_code == 401
    assert s.req("GET", "/v1/jobs", token="wrong").status_code == 401
    assert s.req("POST", "/v1/users", token=alice, json={"name": "eve"}).status_code == 403
    ja = s.submit(token=alice, steps=5)
    assert s.req("GET", f"/v1/jobs/{ja}", token=bob).status_code == 403
    assert s.req("POST", f"/v1/jobs/{ja}/cancel", token=bob).status_code == 403
    assert s.req("GET", "/v1/jobs", token=bob).json() == []
    assert [j["id"] for j in s.req("GET", "/v1/jobs", token=alice).json()] == [ja]
    assert [j["user"] for j in s.req("GET", "/v1/jobs").json()] == ["alice"]   # admin sees all
    assert s.req("GET", "/v1/jobs/999").status_code == 404


@pytest.mark.parametrize("body,status,needle", [
    ({"name": "x", "steps": 5}, 422, "field 'command': Field required"),
    ({"name": "x", "command": ["true"], "steps": 0}, 422, "field 'steps'"),
    ({"name": "x", "command": ["true"], "steps": 5, "colour": 1}, 422, "field 'colour'"),
    ({"name": "x", "command": [], "steps": 5}, 422, "field 'command'"),
    ({"name": "x", "command": ["true"], "steps": 5, "gpu_type": "a100"}, 400,
     "field 'gpu_type': the cluster has no 'a100' GPUs"),
    ({"name": "x", "command": ["true"], "steps": 5, "gpus": 3}, 400, "field 'gpus'"),
])
def test_bad_requests_get_one_clear_line(service, body, status, needle):
    s = service()
    r = s.req("POST", "/v1/jobs", json=body)
    assert r.status_code == status and needle in r.json()["error"], r.text
    assert "\n" not in r.json()["error"]
    assert s.req("GET", "/v1/jobs").json() == []     # nothing half-created


def test_preempted_job_resumes_from_its_checkpoint(service):
    """LAS on one slot: a new job preempts the running one, which checkpoints, waits and resumes."""
    s = service(policy="las", cluster="cpu:1x1")
    long = s.submit(name="long", steps=400, checkpoint_every=1000,
                    command=[PY, "-m", "quanta.examples.train", "--step-sleep", "0.02"])
    s.wait(long, lambda j: j["steps_done"] >= 20)
    short = s.submit(name="short", steps=20)
    s.wait(short, finished)
    j = s.wait(long, finished)
    kinds = s.kinds(long)
    assert kinds[:3] == ["submit", "start", "preempted"] and "resume" in kinds
    assert kinds[-1] == "finished" and j["preemptions"] >= 1 and j["steps_done"] == 400
    every = s.kinds(long, every=True)
    assert every[2:5] == ["training", "stopping", "preempted"] and every[-2:] == ["training", "finished"]
    events = s.req("GET", f"/v1/jobs/{long}/events").json()
    stopped = int(next(e for e in events if e["kind"] == "preempted")["detail"].split()[-1])
    assert stopped >= 20      # the checkpoint taken when stopped kept the work
    assert 'quanta_preemptions_total 1' in s.req("GET", "/metrics", token="").text


def test_hold_release_cancel(service):
    s = service(cluster="cpu:1x1")
    a = s.submit(name="a", steps=2000, command=[PY, "-m", "quanta.examples.train",
                                                "--step-sleep", "0.01"])
    s.wait(a, lambda j: j["state"] == "running" and j["steps_done"] > 5)
    assert s.req("POST", f"/v1/jobs/{a}/hold").status_code == 200
    held = s.wait(a, lambda j: j["state"] == "pending" and j["reason"] == "JobHeldUser")
    time.sleep(0.5)
    assert s.job(a)["state"] == "pending"          # stays held
    s.req("POST", f"/v1/jobs/{a}/release")
    s.wait(a, lambda j: j["state"] == "running" and j["steps_done"] >= held["steps_done"])
    s.req("POST", f"/v1/jobs/{a}/cancel")
    j = s.wait(a, lambda j: j["state"] == "cancelled")
    assert j["end_time"] is not None
    assert s.req("POST", f"/v1/jobs/{a}/cancel").status_code == 409


def test_kill9_and_restart_loses_no_job(service):
    s = service(cluster="cpu:1x1")
    run = s.submit(name="run", steps=300, command=[PY, "-m", "quanta.examples.train",
                                                   "--step-sleep", "0.02"])
    queued = s.submit(name="queued", steps=20)
    s.wait(run, lambda j: j["state"] == "running" and j["steps_done"] >= 10)
    s.kill9()
    s2 = Service(s.state, cluster="cpu:1x1").start()
    s.proc = s2.proc            # the fixture stops the new one
    late = s2.submit(name="late", steps=20)
    for j in (run, queued, late):
        s2.wait(j, finished, timeout=120)
    kinds = s2.kinds(run)
    assert "adopt" in kinds and kinds.count("start") == 1     # adopted, never restarted
    assert s2.job(run)["steps_done"] == 300


def test_restart_requeues_a_job_whose_processes_died(service):
    s = service(cluster="cpu:1x1")
    run = s.submit(name="run", steps=300, checkpoint_every=20,
                   command=[PY, "-m", "quanta.examples.train", "--step-sleep", "0.02"])
    s.wait(run, lambda j: j["steps_done"] >= 45)
    s.kill9()
    os.killpg(_launcher_pid(s.state, run), signal.SIGKILL)        # the job dies while no scheduler watches
    s2 = Service(s.state, cluster="cpu:1x1").start()
    s.proc = s2.proc
    j = s2.wait(run, finished, timeout=120)
    assert j["failures"] == 1
    log = (s.state / "jobs" / str(run) / "job.log").read_text()
    assert j["steps_done"] == 300 and "step 1/300" in log and log.count("step 1/300") == 1


def _launcher_pid(state: Path, job_id: int) -> int:
    import sqlite3
    with sqlite3.connect(state / "quanta.db") as db:
        return int(db.execute("SELECT handle FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])


def test_a_killed_worker_is_requeued_and_others_are_untouched(service):
    s = service(cluster="cpu:1x2")
    victim = s.submit(name="victim", steps=200, checkpoint_every=20,
                      command=[PY, "-m", "quanta.examples.train", "--step-sleep", "0.02"])
    other = s.submit(name="other", steps=150, command=[PY, "-m", "quanta.examples.train",
                                                       "--step-sleep", "0.02"])
    s.wait(victim, lambda j: j["steps_done"] >= 30)
    launcher = _launcher_pid(s.state, victim)
    rank = subprocess.run(["pgrep", "-P", str(launcher)], capture_output=True, text=True).stdout.split()
    os.kill(int(rank[0]), signal.SIGKILL)
    j = s.wait(victim, finished, timeout=120)
    assert j["failures"] == 1 and "failure" in s.kinds(victim)
    ev = s.req("GET", f"/v1/jobs/{victim}/events").json()
    assert "rank 0 was killed by SIGKILL" in next(e["detail"] for e in ev if e["kind"] == "failure")
    o = s.wait(other, finished)
    assert o["failures"] == 0 and s.kinds(other) == ["submit", "start", "finished"]


def test_corrupt_checkpoints_fail_the_job_clearly(service):
    s = service(cluster="cpu:1x1")
    a = s.submit(name="a", steps=2000, checkpoint_every=10,
                 command=[PY, "-m", "quanta.examples.train", "--step-sleep", "0.01"])
    s.wait(a, lambda j: j["steps_done"] >= 25)
    s.req("POST", f"/v1/jobs/{a}/hold")
    s.wait(a, lambda j: j["reason"] == "JobHeldUser")
    for f in (s.state / "jobs" / str(a) / "checkpoints").glob("*.pt"):
        f.write_bytes(b"not a checkpoint")
    s.req("POST", f"/v1/jobs/{a}/release")
    j = s.wait(a, lambda j: j["state"] == "failed")
    assert "corrupt" in j["reason"]
    assert "is corrupt" in s.req("GET", f"/v1/jobs/{a}/logs").text


def cli(*args, env=None):
    return subprocess.run([PY, "-m", "quanta.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_cli_submit_queue_status_logs_cancel(service, tmp_path):
    import json
    s = service(cluster="cpu:1x1")
    env = {"QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin, "COLUMNS": "200"}
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: demo\ncommand: [{PY}, -m, quanta.examples.train, --step-sleep, '0.02']\n"
                    "steps: 3000\n")
    r = cli("submit", str(spec), env=env)
    assert r.returncode == 0 and r.stdout.strip() == "Submitted job 1", r.stderr
    second = json.loads(cli("submit", str(spec), "--json", env=env).stdout)["id"]
    s.wait(1, lambda j: j["state"] == "running" and j["steps_done"] > 0)
    q = cli("queue", env=env).stdout
    assert q.split("\n")[1].split() == ["JOBID", "NAME", "USER", "QUEUE", "STATE", "TIME", "GPUS",
                                        "NODES/REASON"]
    rows = {ln.split()[0]: ln.split() for ln in q.splitlines()[3:] if ln.strip()}
    assert rows["1"][4] == "RUNNING" and rows["1"][-1] == "cpu-0-000"
    assert rows[str(second)][4] == "PENDING" and rows[str(second)][-1] in ("Resources", "Priority")
    st = json.loads(cli("status", "1", "--json", env=env).stdout)
    assert st["state"] == "running" and [e["kind"] for e in st["events"]][:2] == ["submit", "start"]
    assert cli("logs", "1", "-n", "5", env=env).returncode == 0
    assert cli("cancel", "1", str(second), env=env).returncode == 0
    s.wait(1, lambda j: j["state"] == "cancelled")
    s.wait(second, lambda j: j["state"] == "cancelled")
    cl = json.loads(cli("status", "--json", env=env).stdout)
    assert cl["types"] == [{"gpu_type": "cpu", "total": 1, "allocated": 0}]
    # errors: one line, exit 2, no traceback
    bad = cli("cancel", "77", env=env)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: no job 77 (HTTP 404)"
    nobody = cli("queue", env={"QUANTA_URL": s.url, "QUANTA_TOKEN": "nope"})
    assert nobody.returncode == 2 and "valid token" in nobody.stderr and "Traceback" not in nobody.stderr
    down = cli("queue", env={"QUANTA_URL": f"http://127.0.0.1:{free_port()}", "QUANTA_TOKEN": "x"})
    assert down.returncode == 2 and "is `quanta serve` running?" in down.stderr


@pytest.mark.parametrize("text,needle", [
    ("name: x\nsteps: 5\n", "job.yaml: field 'command': Field required"),
    ("name: x\ncommand: [echo]\nsteps: 5\ngpus: -1\n", "job.yaml: field 'gpus'"),
    ("name: x\n  command: [echo\n", "job.yaml:2: not valid YAML"),
    ("- 1\n- 2\n", "job.yaml: a job spec is a mapping"),
])
def test_cli_rejects_a_malformed_job_spec_in_one_line(tmp_path, text, needle):
    spec = tmp_path / "job.yaml"
    spec.write_text(text)
    r = cli("submit", str(spec), env={"QUANTA_URL": "http://127.0.0.1:9", "QUANTA_TOKEN": "x"})
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_job_spec_schema_and_bundled_examples_validate():
    import json
    from pathlib import Path as P

    from quanta.runtime.spec import load_submission
    schema = json.loads(cli("schema").stdout)
    assert set(schema["required"]) == {"name", "command"}         # steps optional
    folder = P(__file__).resolve().parents[1] / "quanta" / "examples" / "jobs"
    subs = [load_submission(p) for p in sorted(folder.glob("*.yaml"))]
    assert {s.name for s in subs} >= {"mlp", "cnn", "lm-ddp"}


def test_one_service_per_state_folder_and_port(service):
    s = service()
    other = cli("serve", "--state", str(s.state), "--port", str(free_port()))
    assert other.returncode == 2 and "another quanta serve uses this state folder" in other.stderr
    busy = cli("serve", "--state", str(s.state.parent / "other"), "--port", str(s.port))
    assert busy.returncode == 2 and f"cannot listen on 127.0.0.1:{s.port}" in busy.stderr
