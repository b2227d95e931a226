"""Crash tests: a real `quanta serve` (SQLite file, worker processes) killed with SIGKILL at each
named point of a job's life (submit, start, preempt, hold, cancel, finish), then started again.
The kill is injected at the exact point (QUANTA_FAULT, quanta/runtime/faults.py), not at random.
After every restart: each accepted job exists once, never ran twice at a time, and ends as it
should with all its steps; the database passes PRAGMA integrity_check."""

import os
import sqlite3
import subprocess
import time

import httpx
import pytest

pytestmark = pytest.mark.slow          # about 4 minutes: a service started twice per test

from test_service import PY, Service, service  # noqa: F401 - the fixture

# a light job (no torch): a checkpoint after every step, stop on SIGTERM (checkpointed), an
# exclusive lock on its folder (a second copy running at the same time says so in TWICE), every
# step it ran in steps.log; argv: seconds per step, seconds to "checkpoint" when stopped
JOB = r'''
import fcntl, os, signal, sys, time
from quanta.job import read_json, write_json
d = os.environ["QUANTA_JOB_DIR"]
total = int(os.environ["QUANTA_TOTAL_STEPS"])
pause, stop_s = float(sys.argv[1]), float(sys.argv[2])
lock = open(os.path.join(d, "once.lock"), "a")
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    with open(os.path.join(d, "TWICE"), "a") as f:
        f.write(f"{os.getpid()}\n")
    sys.exit(1)
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
ck = os.path.join(d, "ckpt.json")
step = (read_json(ck) or {}).get("step", 0)


def progress():
    write_json(os.path.join(d, "progress.json"), {"step": step, "steps_per_s": 1 / pause,
               "time": time.time(), "world_size": 1})


progress()
with open(os.path.join(d, "steps.log"), "a") as log:
    while step < total:
        if stop:
            time.sleep(stop_s)
            write_json(ck, {"step": step})
            progress()
            sys.exit(0)
        time.sleep(pause)
        log.write(f"{step} {os.environ.get('RUN', '')}\n")
        log.flush()
        step += 1
        write_json(ck, {"step": step})
        progress()
progress()
'''


@pytest.fixture
def job_script(tmp_path):
    path = tmp_path / "job.py"
    path.write_text(JOB)
    return path


def submit(s, script, name, steps, pause=0.05, stop_s=0.0, **kw):
    return s.submit(name=name, steps=steps, command=[PY, str(script), str(pause), str(stop_s)],
                    grace_s=30, **kw)


def exit_written(s, job_id, timeout=60.0):
    """Wait for the job's launcher to leave exit.json (its processes ended)."""
    path = s.state / "jobs" / str(job_id) / "exit.json"
    end = time.time() + timeout
    while not path.exists():
        assert time.time() < end, f"job {job_id} never ended"
        time.sleep(0.05)


def ran_steps(folder, run=None) -> set:
    """The steps the job's processes ran (of one run tag: the RUN environment variable)."""
    lines = [ln.split() for ln in (folder / "steps.log").read_text().splitlines() if ln.strip()]
    return {int(ln[0]) for ln in lines if run is None or ln[1:] == [run]}


def launchers(s, job_id) -> int:
    """Live launcher processes of that job folder."""
    out = subprocess.run(["pgrep", "-f", f"quanta.runtime.launch {s.state / 'jobs' / str(job_id)}"],
                         capture_output=True, text=True).stdout.split()
    return len(out)


def check(s, jobs: dict):
    """The invariants after a crash and a restart; `jobs`: id -> (name, steps, final state)."""
    with sqlite3.connect(s.state / "quanta.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        names = [r[0] for r in db.execute("SELECT name FROM jobs")]
    for job_id, (name, steps, final) in jobs.items():
        assert names.count(name) == 1, names                     # accepted once, stored once
        j = s.wait(job_id, lambda j: j["state"] == final, timeout=120)
        folder = s.state / "jobs" / str(job_id)
        assert not (folder / "TWICE").exists(), "two copies of the job ran at the same time"
        if final == "finished":
            ran = ran_steps(folder)
            assert ran == set(range(steps)) and j["steps_done"] == steps, j


# -- the kill at each named point -------------------------------------------------------------------
def test_kill_at_submit_stored_the_cli_retry_makes_one_job(service, job_script, tmp_path):
    """The service dies after storing a submission, before answering: `quanta submit` retries
    with its idempotency key once the service is back; one job, which runs."""
    s = service(env={"QUANTA_FAULT": "submit-stored"})
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: once\ncommand: ['{PY}', '{job_script}', '0.02', '0']\nsteps: 20\n")
    cli = subprocess.Popen([PY, "-m", "quanta.cli", "submit", str(spec)],
                           env={**os.environ, "QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin,
                                "QUANTA_RETRY_S": "90"},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    s.wait_dead()
    time.sleep(1.0)                      # the client is retrying against a dead service
    s.restart()
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0 and out.strip() == "Submitted job 1", (out, err)
    check(s, {1: ("once", 20, "finished")})


@pytest.mark.parametrize("point", ["launch-intent", "launched", "started"])
def test_kill_around_a_launch_runs_the_job_exactly_once(service, job_script, point):
    s = service(cluster="cpu:1x1", env={"QUANTA_FAULT": point})
    try:        # the launch races the answer: the service may die after sending its headers
        submit(s, job_script, "a", 40, pause=0.25)       # still running after the restart
    except httpx.HTTPError:
        pass
    s.wait_dead()
    s.restart()
    a = next(j["id"] for j in s.req("GET", "/v1/jobs").json() if j["name"] == "a")
    check(s, {a: ("a", 40, "finished")})
    kinds = s.kinds(a)
    if point == "launch-intent":        # recorded, never started: started once after the restart
        assert kinds.count("start") == 1 and "adopt" not in kinds, kinds
    else:                               # started: adopted, never started a second time
        assert kinds.count("start") + kinds.count("resume") <= 1 and "adopt" in kinds, kinds


def _running(s, job_id, steps=3):
    return s.wait(job_id, lambda j: j["state"] == "running" and j["steps_done"] >= steps)


@pytest.mark.parametrize("point", ["stop-recorded", "stop-signalled"])
@pytest.mark.parametrize("action", ["preempt", "hold", "cancel"])
def test_kill_while_a_job_stops_it_ends_as_what_it_was_becoming(service, job_script, point, action):
    """stop-recorded: the job was not yet signalled (the restart adopts and stops it);
    stop-signalled: it checkpoints and exits while no service runs (the restart reads its
    end as the stop it was)."""
    s = service(policy="las", cluster="cpu:1x1", env={"QUANTA_FAULT": point})
    a = submit(s, job_script, "a", 200, pause=0.03)
    _running(s, a, 10)
    jobs = {a: ("a", 200, "finished")}
    try:        # the service may die before it answers (the stop follows at once)
        if action == "preempt":
            submit(s, job_script, "b", 10, pause=0.02)
        else:
            s.req("POST", f"/v1/jobs/{a}/{action}")
    except httpx.HTTPError:
        pass
    s.wait_dead()
    if point == "stop-signalled":
        exit_written(s, a)
    s.restart()
    if action == "preempt":
        b = next(j["id"] for j in s.req("GET", "/v1/jobs").json() if j["name"] == "b")
        jobs[b] = ("b", 10, "finished")
    if action == "hold":
        j = s.wait(a, lambda j: j["state"] == "pending" and j["reason"] == "JobHeldUser")
        assert j["failures"] == 0 and 10 <= j["steps_done"] < 200
        time.sleep(1.0)
        assert s.job(a)["state"] == "pending"              # stays held
        s.req("POST", f"/v1/jobs/{a}/release")
    if action == "cancel":
        jobs[a] = ("a", 200, "cancelled")
    check(s, jobs)
    j = s.job(a)
    assert j["failures"] == 0, j
    if action == "preempt":
        assert j["preemptions"] == 1 and "preempted" in s.kinds(a), s.kinds(a)


@pytest.mark.parametrize("point", ["exit-seen", "exit-recorded"])
def test_kill_as_a_job_finishes_it_is_finished_once(service, job_script, point):
    s = service(cluster="cpu:1x1", env={"QUANTA_FAULT": point})
    a = submit(s, job_script, "a", 30, pause=0.02)
    s.wait_dead()
    s.restart()
    check(s, {a: ("a", 30, "finished")})
    assert s.kinds(a).count("finished") == 1


def test_kill_after_a_hold_request_is_stored(service, job_script):
    s = service(cluster="cpu:1x1", env={"QUANTA_FAULT": "request-stored"})
    a = submit(s, job_script, "a", 200, pause=0.03)
    _running(s, a)
    try:
        s.req("POST", f"/v1/jobs/{a}/hold")
    except httpx.HTTPError:      # the service died before answering
        pass
    s.wait_dead()
    s.restart()
    s.wait(a, lambda j: j["state"] == "pending" and j["reason"] == "JobHeldUser")
    s.req("POST", f"/v1/jobs/{a}/release")
    check(s, {a: ("a", 200, "finished")})


# -- without fault injection: a plain kill -9 while a job checkpoints -----------------------------
@pytest.mark.parametrize("action", ["preempt", "hold", "cancel"])
def test_a_job_stopping_when_the_service_is_killed_comes_back_as_what_it_was_becoming(
        service, job_script, action):
    """The job takes 2 s to checkpoint when stopped: the service is killed with -9 as soon as it
    asked the job to stop, the job ends while no service runs, and the restarted service finds
    it ended. It must be pending (preempt: from its checkpoint), held or cancelled: not failed,
    and not 'finished' with its steps undone."""
    s = service(policy="las", cluster="cpu:1x1")
    a = submit(s, job_script, "a", 150, pause=0.03, stop_s=2.0)
    _running(s, a, 10)
    if action == "preempt":
        b = submit(s, job_script, "b", 10, pause=0.02)
    else:
        s.req("POST", f"/v1/jobs/{a}/{action}")
    end = time.time() + 60
    while "stopping" not in s.kinds(a, every=True):
        assert time.time() < end
        time.sleep(0.05)
    s.kill9()
    exit_written(s, a)
    s.restart()
    if action == "cancel":
        j = s.wait(a, lambda j: j["state"] != "running")
        assert j["state"] == "cancelled", j
        return
    j = s.wait(a, lambda j: j["state"] != "running")
    assert j["state"] == "pending" and j["failures"] == 0 and 10 <= j["steps_done"] < 150, j
    if action == "hold":
        assert j["reason"] == "JobHeldUser"
        s.req("POST", f"/v1/jobs/{a}/release")
    else:
        s.wait(b, lambda j: j["state"] == "finished")
    j = s.wait(a, lambda j: j["state"] == "finished", timeout=120)
    assert j["steps_done"] == 150
    assert ran_steps(s.state / "jobs" / str(a)) == set(range(150))



@pytest.mark.parametrize("action", ["hold", "cancel"])
def test_a_hold_or_cancel_while_a_preempted_job_checkpoints_is_no_preemption(
        service, job_script, action):
    """(The job's status said 0 preemptions, then 1 after a restart or at its end, while the
    preemption counter said 0: the stop ended as the user's hold or cancel.)"""
    s = service(policy="las", cluster="cpu:1x1")
    a = submit(s, job_script, "a", 150, pause=0.03, stop_s=2.0)
    _running(s, a, 10)
    b = submit(s, job_script, "b", 10, pause=0.02)
    end = time.time() + 60
    while "stopping" not in s.kinds(a, every=True):
        assert time.time() < end
        time.sleep(0.05)
    s.req("POST", f"/v1/jobs/{a}/{action}")
    if action == "hold":
        j = s.wait(a, lambda j: j["reason"] == "JobHeldUser" and j["state"] == "pending")
    else:
        j = s.wait(a, lambda j: j["state"] == "cancelled")
    s.wait(b, lambda j: j["state"] == "finished")
    assert j["preemptions"] == 0 and "preempted" not in s.kinds(a), (j, s.kinds(a))
    if action == "hold":
        s.req("POST", f"/v1/jobs/{a}/release")
        j = s.wait(a, lambda j: j["state"] == "finished", timeout=120)
        assert j["preemptions"] == 0 and j["steps_done"] == 150, j
    assert "quanta_preemptions_total 0" in s.req("GET", "/metrics", token="").text
    s.stop()
    s.restart()
    assert s.job(a)["preemptions"] == 0

def test_a_new_database_never_resumes_an_old_databases_job_folder(service, job_script):
    """Job folders carry their database's identity: job 1 of a new database (the old database
    deleted, the job folders left) starts from step 0, and the old folder is moved aside."""
    s = service(cluster="cpu:1x1")
    old = submit(s, job_script, "old", 20, pause=0.01, env={"RUN": "old"})
    s.wait(old, lambda j: j["state"] == "finished")
    s.stop()
    for f in s.state.glob("quanta.db*"):
        f.unlink()
    s.restart()
    new = submit(s, job_script, "new", 40, pause=0.01, env={"RUN": "new"})
    assert new == old
    s.wait(new, lambda j: j["state"] == "finished")
    assert ran_steps(s.state / "jobs" / str(new), "new") == set(range(40))
    moved = list((s.state / "jobs" / ".orphaned").iterdir())
    assert len(moved) == 1 and ran_steps(moved[0], "old") == set(range(20))
    assert "folder-moved" in s.kinds(new)
