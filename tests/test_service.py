"""The scheduler service for real: `quanta serve` in a subprocess on 127.0.0.1, HTTP requests,
SQLite state, example jobs training in worker processes; the job lifecycle and the API's
hardening (the command line: test_service_cli.py). `Service` (start, kill -9, requests) and the `service` fixture serve the other service
tests; preemption, restarts and broken checkpoints are in test_service_recovery.py."""

import json
import os
import signal
import socket
import sqlite3
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
    def __init__(self, state: Path, policy="fifo", cluster="cpu:1x2", env=None, port=None,
                 args=()):
        self.state, self.policy, self.cluster = state, policy, cluster
        self.args = list(args)                # more `quanta serve` flags, e.g. --queues FILE
        self.env = env or {}                  # e.g. QUANTA_FAULT (quanta.runtime.faults)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self):
        env = {k: v for k, v in os.environ.items() if k != "QUANTA_FAULT"}
        self.proc = subprocess.Popen(
            [PY, "-m", "quanta.cli", "serve", "--port", str(self.port), "--state", str(self.state),
             "--policy", self.policy, "--cluster", self.cluster, "--poll-s", "0.1", *self.args],
            stdout=open(self.state.parent / f"serve-{self.port}.log", "ab"), stderr=subprocess.STDOUT,
            env={**env, **self.env})
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

    def wait_dead(self, timeout=60.0):
        """The service killed itself (a fault injected with QUANTA_FAULT): SIGKILL."""
        self.proc.wait(timeout=timeout)
        assert self.proc.returncode == -signal.SIGKILL, self.proc.returncode

    def restart(self, **kw):
        """The same state folder and port, started again (without the injected fault)."""
        new = Service(self.state, kw.get("policy", self.policy), kw.get("cluster", self.cluster),
                      port=self.port, args=kw.get("args", self.args)).start()
        self.proc, self.admin = new.proc, new.admin     # the fixture stops the new one
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def req(self, method, path, token=None, headers=None, **kw):
        token = self.admin if token is None else token
        headers = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
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
    page = s.req("GET", "/").text                 # the token in a header (or the page's cookie)
    assert "<td>mlp</td>" in page and "cpu" in page
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
    loose = s.req("POST", "/v1/users", json={"name": "carol", "admin": "yes"})   # (made an admin)
    assert loose.status_code == 422 and "admin" in loose.text
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
    # strict kinds: true ran one step, "64" passed as a batch size
    ({"name": "x", "command": ["true"], "steps": True}, 422, "field 'steps'"),
    ({"name": "x", "command": ["true"], "steps": 5, "batch_size": "64"}, 422, "field 'batch_size'"),
    ({"name": "x", "command": ["true"], "priority": 1.5}, 422,
     "field 'priority': Input should be a valid integer or a valid string"),
    (None, 422, "no body: want a JSON object of the job's fields (quanta schema)"),
])
def test_bad_requests_get_one_clear_line(service, body, status, needle):
    s = service()
    r = s.req("POST", "/v1/jobs", json=body)
    assert r.status_code == status and needle in r.json()["error"], r.text
    assert "\n" not in r.json()["error"]
    assert s.req("GET", "/v1/jobs").json() == []     # nothing half-created


def test_a_key_that_does_not_print_is_named_escaped_on_one_line(service):
    """A body {"0\\n": null} was refused as "field '0<newline>': unknown key": two lines (the
    service fuzz test found it in CI)."""
    s = service()
    for body in ({"0\n": None}, {"name": "x", "command": ["true"], "a\tb": 1}):
        r = s.req("POST", "/v1/jobs", json=body)
        assert r.status_code == 422, r.text
        key = {"0\n": "0\\x0a", "a\tb": "a\\x09b"}[list(body)[-1]]
        assert r.json()["error"].startswith(f"field '{key}': "), r.text
        assert "\n" not in r.json()["error"] and "\t" not in r.json()["error"], r.text
    r = s.req("POST", "/v1/jobs", content=b'{"a\\n": 1, "a\\n": 2}',
              headers={"Content-Type": "application/json"})
    assert r.json()["error"] == "field 'a\\x0a': given twice in the JSON body", r.text
    assert s.req("GET", "/v1/jobs").json() == []


def test_a_key_twice_and_a_release_of_a_job_not_held(service):
    """{"name": "x", "name": "y"} made a job named y; releasing a job that was not held (or
    holding one held) said 'requested' and logged an event each time: now 422, and 'not held,
    nothing to release' with no event."""
    s = service()
    r = s.req("POST", "/v1/jobs", content=b'{"name": "x", "command": ["true"], "name": "y"}',
              headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"] == \
        "field 'name': given twice in the JSON body", r.text
    assert s.req("POST", "/v1/jobs", token="nobody", content=b'{"a": 1, "a": 2}',
                 headers={"Content-Type": "application/json"}).status_code == 401   # who first
    assert s.req("GET", "/v1/jobs").json() == []
    job = s.submit(name="sleeper", command=["sleep", "60"], steps=None)
    assert s.req("POST", f"/v1/jobs/{job}/release").json() == \
        {"id": job, "requested": "release", "unchanged": "not held"}
    assert s.req("POST", f"/v1/jobs/{job}/hold").json() == {"id": job, "requested": "hold"}
    assert s.req("POST", f"/v1/jobs/{job}/hold").json()["unchanged"] == "already held"
    kinds = [e["kind"] for e in s.req("GET", f"/v1/jobs/{job}/events").json()]
    assert kinds.count("hold") == 1 and "release" not in kinds, kinds
    r = cli("release", str(job), env={"QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin})
    assert r.returncode == 0 and f"job {job}: release requested" in r.stdout, r.stdout
    r = cli("release", str(job), env={"QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin})
    assert r.returncode == 0 and f"job {job}: not held, nothing to release" in r.stdout, r.stdout
    # no token anywhere: where one is looked for (it said only that one is required)
    r = cli("queue", env={"QUANTA_URL": s.url, "QUANTA_TOKEN": "", "QUANTA_STATE": "/nowhere"})
    assert r.returncode == 2 and "no token was given: --token, $QUANTA_TOKEN, or " \
        "/nowhere/admin.token readable here (HTTP 401)" in r.stderr, r.stderr
    s.req("POST", f"/v1/jobs/{job}/cancel")


@pytest.mark.slow
def test_hold_release_cancel(service):
    s = service(cluster="cpu:1x1")
    a = s.submit(name="a", steps=2000, command=[PY, "-m", "quanta.examples.train",
                                                "--step-sleep", "0.01"])
    s.wait(a, lambda j: j["state"] == "running" and j["steps_done"] > 5)
    assert s.req("POST", f"/v1/jobs/{a}/hold").status_code == 200
    held = s.wait(a, lambda j: j["state"] == "pending" and j["reason"] == "JobHeldUser")
    time.sleep(0.5)
    assert s.job(a)["state"] == "pending"          # stays held
    # its run time (quanta queue's TIME) stands still while it is held: it counted from the
    # first start, waits and holds included
    assert s.job(a)["run_s"] == held["run_s"] > 0
    s.req("POST", f"/v1/jobs/{a}/release")
    s.wait(a, lambda j: j["state"] == "running" and j["steps_done"] >= held["steps_done"])
    s.req("POST", f"/v1/jobs/{a}/cancel")
    j = s.wait(a, lambda j: j["state"] == "cancelled")
    assert j["end_time"] is not None
    assert s.req("POST", f"/v1/jobs/{a}/cancel").status_code == 409


def cli(*args, env=None):
    return subprocess.run([PY, "-m", "quanta.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_one_service_per_state_folder_and_port(service):
    s = service()
    other = cli("serve", "--state", str(s.state), "--port", str(free_port()))
    assert other.returncode == 2 and "another quanta serve uses this state folder" in other.stderr
    busy = cli("serve", "--state", str(s.state.parent / "other"), "--port", str(s.port))
    assert busy.returncode == 2 and f"cannot listen on 127.0.0.1:{s.port}" in busy.stderr


# -- bad progress, launch errors, retries ------------------------------------------------------------
def test_bad_progress_is_the_jobs_problem_never_the_services(service, tmp_path):
    """A job that writes a string step, and one that reports NaN (through the SDK, then raw): both
    finish, the service stays healthy, and a restart while such a job ran still starts."""
    s = service()
    words = s.submit(name="words", steps=10, command=[PY, "-c", (
        "import os, time; from quanta.job import write_json; "
        "write_json(os.environ['QUANTA_JOB_DIR'] + '/progress.json', {'step': 'abc'}); "
        "time.sleep(1)")])
    nan = s.submit(name="nan", steps=10, command=[PY, "-c", (
        "import os, time; from quanta.job import Job, Allocation, write_json; "
        "job = Job(Allocation.from_env()); job.report(float('nan'), force=True); "
        "write_json(os.environ['QUANTA_JOB_DIR'] + '/progress.json', "
        "{'step': float('nan'), 'steps_per_s': float('inf'), 'time': 'x'}); time.sleep(4)")])
    s.wait(words, finished)
    s.wait(nan, lambda j: j["state"] == "running")
    time.sleep(0.5)
    s.kill9()                                 # while the NaN job runs
    while not (s.state / "jobs" / str(nan) / "exit.json").exists():
        time.sleep(0.1)
    s.restart()
    assert s.wait(nan, finished)["steps_done"] == 0
    health = s.req("GET", "/v1/health").json()
    assert health == {"ok": True, "error": ""}, health
    assert "bad-progress" in s.kinds(words) and "bad-progress" in s.kinds(nan)
    assert "ignored" in s.req("GET", f"/v1/jobs/{nan}/logs").text     # the SDK said so


@pytest.mark.slow
def test_launch_errors_are_checked_shown_and_not_retried(service, tmp_path):
    s = service()
    ok = {"name": "x", "command": [PY, "-c", "pass"]}
    for body, status, needle in [
        ({**ok, "cwd": str(tmp_path / "nowhere")}, 400, "field 'cwd'"),
        ({**ok, "cwd": "/" + "a" * 300}, 400, "File name too long"),     # (was a 500)
        ({**ok, "command": ["a\0b"]}, 422, "field 'command'"),
        ({**ok, "env": {"A B": "1"}}, 422, "field 'env'"),
        ({**ok, "env": {"A": "x\0"}}, 422, "field 'env'"),
        ({**ok, "max_failures": 10**6}, 422, "field 'max_failures'"),
    ]:
        r = s.req("POST", "/v1/jobs", json=body)
        assert r.status_code == status and needle in r.json()["error"], (body, r.text)
    # an error of the launch itself: in the job's events, its reason and its log; not retried
    gone = s.submit(name="gone", command=["/nonexistent/program"], steps=5, max_failures=3)
    j = s.wait(gone, lambda j: j["state"] == "failed")
    assert "could not start rank 0" in j["reason"] and "No such file" in j["reason"], j
    assert j["failures"] == 1 and s.kinds(gone).count("start") == 1, s.kinds(gone)
    assert "could not start rank 0" in cli("logs", str(gone), env={
        "QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin}).stdout
    # exit code 3 is a failure like any other (not "every checkpoint is corrupt"), retried after
    # a growing pause; failures are not preemptions
    three = s.submit(name="three", command=[PY, "-c", "raise SystemExit(3)"], steps=5,
                     max_failures=3)
    j = s.wait(three, lambda j: j["state"] == "failed", timeout=120)
    assert "exited with code 3" in j["reason"] and "corrupt" not in j["reason"], j
    assert j["failures"] == 4 and j["preemptions"] == 0, j
    ev = s.req("GET", f"/v1/jobs/{three}/events").json()
    starts = [e["time"] for e in ev if e["kind"] in ("start", "resume")]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert len(gaps) == 3 and all(g >= 0.9 * w for g, w in zip(gaps, (1, 2, 4))), gaps
    # a cancel is not a preemption either
    run = s.submit(name="run", command=[PY, "-c", "import time; time.sleep(60)"], steps=5)
    s.wait(run, lambda j: j["state"] == "running")
    s.req("POST", f"/v1/jobs/{run}/cancel")
    assert s.wait(run, lambda j: j["state"] == "cancelled")["preemptions"] == 0


# -- the API and the CLI under many users -------------------------------------------------------------
def test_api_and_cli_hardening(service, tmp_path):
    s = service(policy="gavel-las:interval=600", cluster="cpu:1x1")   # nothing starts here
    env = {"QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin, "COLUMNS": "250"}
    body = {"name": "a", "command": [PY, "-c", "pass"], "steps": 5}
    # idempotent submission: the same key is the same job; another spec under it is refused
    key = {"Idempotency-Key": "k-1"}
    r1 = s.req("POST", "/v1/jobs", json=body, headers=key)
    r2 = s.req("POST", "/v1/jobs", json=body, headers=key)
    assert r1.status_code == 201 and r2.status_code == 200 and r1.json()["id"] == r2.json()["id"]
    r3 = s.req("POST", "/v1/jobs", json={**body, "steps": 6}, headers=key)
    assert r3.status_code == 409 and "Idempotency-Key" in r3.json()["error"]
    first = r1.json()["id"]
    # a round-based policy's waiting job says why before its first round
    assert s.job(first)["reason"] == "NextRound"
    # names that reach metrics and terminals are plain words
    forged = 'x"} 1\nquanta_gpus_total{gpu_type="cpu"} 9999'
    r = s.req("POST", "/v1/jobs", json={**body, "queue": forged})
    assert r.status_code == 422 and "field 'queue'" in r.json()["error"]
    # rows an older release stored: printed and exported safely
    import sqlite3
    with sqlite3.connect(s.state / "quanta.db") as db:
        for q in (forged, "[/]", "\x1b[31mred"):
            db.execute("INSERT INTO jobs(user, name, queue, spec, state, submit, total_steps) "
                       "VALUES ('admin', 'old', ?, ?, 'pending', 0, 5)",
                       (q, json.dumps({**body, "queue": q})))
    m = s.req("GET", "/metrics", token="").text
    assert [ln for ln in m.splitlines() if ln.startswith("quanta_gpus_total")] == \
        ['quanta_gpus_total{gpu_type="cpu"} 1.0'], m
    q = cli("queue", env=env)
    assert q.returncode == 0 and "Traceback" not in q.stderr, q.stderr
    assert "[/]" in q.stdout and "\x1b" not in q.stdout and "\\x1b[31mred" in q.stdout
    # pages: limit, after, the total; the CLI shows the first page and says how to get the next
    for i in range(5):
        s.submit(name=f"p{i}", steps=5, command=[PY, "-c", "pass"])
    page = s.req("GET", "/v1/queue", params={"limit": 3})
    assert len(page.json()) == 3 and page.headers["x-total-count"] == "9"
    after = int(page.headers["x-next-after"])
    rest = s.req("GET", "/v1/queue", params={"limit": 100, "after": after})
    assert [j["id"] for j in page.json() + rest.json()] == sorted(
        j["id"] for j in page.json() + rest.json()) and len(rest.json()) == 6
    assert "x-next-after" not in rest.headers
    q = cli("queue", "--limit", "4", env=env).stdout
    assert "4 of 9 jobs shown; next page: quanta queue --after" in q
    # bodies are capped; malformed JSON is named as such (not "field '26'")
    big = s.req("POST", "/v1/jobs", content=b"{" + b" " * (2 << 20) + b"}",
                headers={"content-type": "application/json"})
    assert big.status_code == 413 and "larger than" in big.json()["error"]
    bad = s.req("POST", "/v1/jobs", content=b'{"name": "x", "command": [}',
                headers={"content-type": "application/json"})
    assert bad.status_code == 422 and bad.json()["error"].startswith(
        "the request body is not valid JSON"), bad.text
    # ... as are bodies FastAPI could not parse at all, and bodies that are no JSON object (they
    # were "There was an error parsing the body" and "Input should be a valid dictionary ...")
    for body, ctype, want in [
            (b'{"name": "\xff"}', "application/json",
             "the request body is not valid JSON (not UTF-8: byte 0xff at offset 10)"),
            (b"[" * 100_000 + b"]" * 100_000, "application/json",
             "the request body is not valid JSON (nested too deep)"),
            (b"name=x", "application/x-www-form-urlencoded", "the request body is not a JSON "
             "object (Content-Type: application/x-www-form-urlencoded; want application/json)"),
            # (named the Content-Type it had as the one it wanted; blamed nesting for a number
            # of more digits than Python converts)
            (b"[1, 2]", "application/json", "the request body is not a JSON object (it is a "
             "list; want a JSON object of the job's fields)"),
            (b"null", "application/json; charset=utf-8", "the request body is not a JSON object "
             "(it is null; want a JSON object of the job's fields)"),
            (b'{"gpus": 1' + b"0" * 4300 + b"}", "application/json", "the request body is not "
             "valid JSON (Exceeds the limit (4300 digits) for integer string conversion: value "
             "has 4301 digits)")]:
        bad = s.req("POST", "/v1/jobs", content=body, headers={"content-type": ctype})
        assert bad.status_code == 422 and bad.json() == {"error": want}, bad.text
    bad = s.req("POST", "/v1/users", json={"name": "u1", "amdin": True})      # a typo: no user
    assert bad.status_code == 422 and "amdin" in bad.json()["error"], bad.text
    with sqlite3.connect(s.state / "quanta.db") as db:
        assert ("u1",) not in db.execute("SELECT name FROM users").fetchall()
    assert s.req("HEAD", "/v1/health", token="").status_code == 200
    # one operation id per operation (GET and HEAD of /v1/health shared one: FastAPI warned)
    ops = [op.get("operationId") for p in s.req("GET", "/openapi.json").json()["paths"].values()
           for op in p.values()]
    assert len(ops) == len(set(ops)), ops
    r = cli("logs", "1", "-n", "99999999999", env=env)    # the CLI's option named, not the API's
    assert r.returncode == 2 and "'--tail' / '-n'" in r.stderr and "100000" in r.stderr, r.stderr
    # `quanta add-user admin` renews the admin's token and keeps it an admin
    r = cli("add-user", "admin", env=env)
    assert r.returncode == 0
    new = r.stdout.strip()
    assert (s.state / "admin.token").read_text().strip() == new
    s.admin = env["QUANTA_TOKEN"] = new
    assert s.req("POST", "/v1/users", token=new, json={"name": "bob"}).status_code == 201
    demote = s.req("POST", "/v1/users", token=new, json={"name": "admin", "admin": False})
    assert demote.status_code == 409 and "only admin" in demote.json()["error"]
    # `logs -n 5` of a huge log reads its end, not the whole file
    log = s.state / "jobs" / str(first) / "job.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as f:
        f.truncate(200 << 20)                 # 200 MB (sparse), then the last lines
        f.seek(0, 2)
        f.write(b"".join(b"line %d\n" % i for i in range(10)))
    out = cli("logs", str(first), "-n", "5", env=env)
    assert out.stdout.split("\n")[:5] == [f"line {i}" for i in range(5, 10)], out.stdout[-200:]
    t0 = time.perf_counter()
    assert s.req("GET", f"/v1/jobs/{first}/logs", params={"tail": 5}).text.endswith("line 9\n")
    assert time.perf_counter() - t0 < 1.0


def test_metrics_label_values_are_escaped_with_or_without_prometheus_client():
    from quanta.service.metrics import exposition
    forged = 'x"} 1\nquanta_gpus_total{gpu_type="cpu"} 9999'
    fams = [("quanta_pending_jobs", "gauge", "Pending jobs per queue.", [("", {"queue": forged}, 2)]),
            ("quanta_gpus_total", "gauge", "GPUs per type.", [("", {"gpu_type": "cpu"}, 1)])]
    text = exposition(fams)
    assert [ln for ln in text.splitlines() if ln.startswith("quanta_gpus_total")] == \
        ['quanta_gpus_total{gpu_type="cpu"} 1.0']
    pytest.importorskip("prometheus_client")
    from prometheus_client.parser import text_string_to_metric_families
    got = {(s.name, tuple(sorted(s.labels.items())), s.value)
           for f in text_string_to_metric_families(text) for s in f.samples}
    assert got == {("quanta_pending_jobs", (("queue", forged),), 2.0),
                   ("quanta_gpus_total", (("gpu_type", "cpu"),), 1.0)}


def test_health_says_so_when_the_runtime_loop_stops(tmp_path):
    """`--poll-s inf` (now refused) killed the runtime's thread with an OverflowError while
    /v1/health went on answering ok and jobs waited for ever: a loop that stops is 503."""
    import threading

    import uvicorn

    from quanta.service.server import ServiceConfig, build
    _store, runtime, app, _tok = build(ServiceConfig(tmp_path / "st", "fifo", "cpu:1x2"))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}/v1/health"
    try:
        deadline = time.time() + 30
        while not server.started and time.time() < deadline:
            time.sleep(0.05)
        assert httpx.get(url).json() == {"ok": True, "error": ""}
        runtime.poll_s = float("inf")          # what the loop's wait cannot take
        runtime.poke()
        while runtime.loop_alive() and time.time() < deadline:
            time.sleep(0.05)
        r = httpx.get(url)
        assert r.status_code == 503 and r.json()["ok"] is False, r.text
        assert "the runtime's loop stopped (OverflowError" in r.json()["error"], r.text
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        runtime.state_lock.close()


TAIL_JOB = """
import signal, time
from quanta.job import Job
job = Job.from_env()
job.report(job.alloc.total_steps, force=True)      # every step done
signal.signal(signal.SIGTERM, signal.SIG_DFL)       # and killed by a stop, not checkpointing
print("all steps done", flush=True)
time.sleep(60)
"""


def test_a_job_stopped_after_its_last_step_is_finished_not_requeued(service, tmp_path):
    """A job that reported all its steps and was then stopped (a hold, a preemption) before its
    process ended was requeued as held or preempted, launched again and ran its tail twice: it
    is finished (runtime probe: `las` preempted an example job at step 20000 of 20000)."""
    s = service(cluster="cpu:1x1")
    (tmp_path / "tail.py").write_text(TAIL_JOB)
    a = s.submit(name="tail", steps=200, command=[PY, str(tmp_path / "tail.py")])
    s.wait(a, lambda j: j["state"] == "running" and j["steps_done"] >= 200)
    assert s.req("POST", f"/v1/jobs/{a}/hold").status_code == 200
    j = s.wait(a, lambda j: j["state"] in ("finished", "failed", "cancelled") or
               j["reason"] == "JobHeldUser")
    assert (j["state"], j["steps_done"]) == ("finished", 200), j
    assert j["preemptions"] == 0
    assert j["held"] is False           # (it stayed held: `FINISHED held`, release refused, 409)
    # `quanta status` says it holds nothing now (it showed `0 x cpu cpu-0-000`)
    out = cli("status", str(a), env={"QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin}).stdout
    assert "steps/s; no devices now (last on cpu-0-000); preemptions 0" in out, out


def test_a_clean_stop_leaves_the_whole_state_in_the_database_file(service, tmp_path):
    """(After a SIGTERM the database file was 4 KiB and every job in quanta.db-wal: a backup that
    copied quanta.db alone had nothing.)"""
    import shutil
    s = service()
    ids = [s.submit(name=f"j{i}", command=[PY, "-c", "pass"], steps=None) for i in range(3)]
    s.stop()              # SIGTERM: uvicorn's shutdown, then the signal again (exit -15)
    wal = s.state / "quanta.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    copy = tmp_path / "backup.db"
    shutil.copy(s.state / "quanta.db", copy)     # the database file alone
    with sqlite3.connect(copy) as db:
        assert [r[0] for r in db.execute("SELECT id FROM jobs ORDER BY id")] == ids
