"""The scheduler service when things go wrong, for real (`quanta serve` on 127.0.0.1, SQLite
state, example jobs training in worker processes): preemption to a checkpoint and resumption,
kill -9 of the service and restart, jobs whose processes die, corrupt or missing checkpoints."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from test_service import PY, Service, finished, service  # noqa: F401 - the fixture


def train(step_sleep: str) -> list[str]:
    """The example training job's command, each step stretched by `step_sleep` seconds."""
    return [PY, "-m", "quanta.examples.train", "--step-sleep", step_sleep]


@pytest.mark.slow
def test_preempted_job_resumes_from_its_checkpoint(service):
    """LAS on one slot: a new job preempts the running one, which checkpoints, waits and resumes."""
    s = service(policy="las", cluster="cpu:1x1")
    long = s.submit(name="long", steps=400, checkpoint_every=1000,
                    command=train("0.02"))
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


@pytest.mark.slow
def test_kill9_and_restart_loses_no_job(service):
    s = service(cluster="cpu:1x1")
    run = s.submit(name="run", steps=300, command=train("0.02"))
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


@pytest.mark.slow
def test_restart_requeues_a_job_whose_processes_died(service):
    s = service(cluster="cpu:1x1")
    run = s.submit(name="run", steps=300, checkpoint_every=20,
                   command=train("0.02"))
    s.wait(run, lambda j: j["steps_done"] >= 45)
    s.kill9()
    os.killpg(_launcher_pid(s.state, run), signal.SIGKILL)        # the job dies while no scheduler watches
    s2 = Service(s.state, cluster="cpu:1x1").start()
    s.proc = s2.proc
    j = s2.wait(run, finished, timeout=120)
    assert j["failures"] == 1
    log = (s.state / "jobs" / str(run) / "job.log").read_text()
    assert j["steps_done"] == 300 and "step 1/300" in log and log.count("step 1/300") == 1


@pytest.mark.slow
def test_a_launcher_killed_while_no_scheduler_watches_leaves_no_second_copy(service):
    """(Only the launcher killed, the service down: the training process, started by a wrapper,
    trained on as an orphan while the restarted service launched the job again beside it.) The
    restarted service kills what the dead launch left before launching it again."""
    s = service(cluster="cpu:1x1")
    wrapped = ["sh", "-c", " ".join(train("0.02")) + "; true"]     # (sh forks: not an exec)
    run = s.submit(name="run", steps=300, checkpoint_every=20, command=wrapped)
    s.wait(run, lambda j: j["steps_done"] >= 45)
    s.kill9()
    os.kill(_launcher_pid(s.state, run), signal.SIGKILL)          # the launcher alone
    s2 = Service(s.state, cluster="cpu:1x1").start()
    s.proc = s2.proc
    j = s2.wait(run, finished, timeout=120)
    assert j["failures"] == 1 and j["steps_done"] == 300
    log = (s.state / "jobs" / str(run) / "job.log").read_text()
    assert log.count("step 300/300") == 1, "two copies of the job trained to the end"


@pytest.mark.slow
def test_a_job_that_ended_while_no_scheduler_ran_is_charged_until_its_exit(service):
    """(Its end, run time and GPU-hours were the restart's time: the downtime counted as run.)"""
    import json
    s = service(cluster="cpu:1x1")
    r = s.req("POST", "/v1/jobs", json={"name": "short", "command": [
        PY, "-c", "import time; time.sleep(1.5)"]})
    assert r.status_code == 201, r.text
    run = r.json()["id"]
    s.wait(run, lambda j: j["state"] == "running")
    s.kill9()
    done = s.state / "jobs" / str(run) / "exit.json"
    end = time.time() + 60
    while not done.exists():
        assert time.time() < end, "the job never ended"
        time.sleep(0.05)
    time.sleep(4.0)                      # the service stays down after the job's end
    s2 = Service(s.state, cluster="cpu:1x1").start()
    s.proc = s2.proc
    j = s2.wait(run, finished, timeout=60)
    exited = json.loads(done.read_text())["time"]
    assert abs(j["end_time"] - exited) < 0.01, (j["end_time"], exited)
    assert j["run_s"] < 3.0, j["run_s"]                 # ~1.5 s of sleep, not 5.5 s


def _launcher_pid(state: Path, job_id: int) -> int:
    import sqlite3
    with sqlite3.connect(state / "quanta.db") as db:
        return int(db.execute("SELECT handle FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])


@pytest.mark.slow
def test_a_killed_worker_is_requeued_and_others_are_untouched(service):
    s = service(cluster="cpu:1x2")
    victim = s.submit(name="victim", steps=200, checkpoint_every=20,
                      command=train("0.02"))
    other = s.submit(name="other", steps=150, command=train("0.02"))
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


@pytest.mark.slow
def test_corrupt_checkpoints_fail_the_job_clearly(service):
    s = service(cluster="cpu:1x1")
    a = s.submit(name="a", steps=2000, checkpoint_every=10,
                 command=train("0.01"))
    s.wait(a, lambda j: j["steps_done"] >= 25)
    s.req("POST", f"/v1/jobs/{a}/hold")
    s.wait(a, lambda j: j["reason"] == "JobHeldUser")
    for f in (s.state / "jobs" / str(a) / "checkpoints").glob("*.pt"):
        f.write_bytes(b"not a checkpoint")
    s.req("POST", f"/v1/jobs/{a}/release")
    j = s.wait(a, lambda j: j["state"] == "failed")
    assert "corrupt" in j["reason"]
    assert "is corrupt" in s.req("GET", f"/v1/jobs/{a}/logs").text


def test_a_job_preempted_while_starting_reports_its_real_step(service):
    """LAS preempts a job that never reported a step: 'preempted at step 0', not an estimate."""
    s = service(policy="las", cluster="cpu:1x1")
    slow = s.submit(name="slow", steps=100_000, command=[PY, "-c", "import time; time.sleep(60)"])
    s.wait(slow, lambda j: j["state"] == "running")
    time.sleep(2.0)
    quick = s.submit(name="quick", steps=5, command=[PY, "-c", "pass"])
    s.wait(quick, finished)
    ev = s.req("GET", f"/v1/jobs/{slow}/events").json()
    assert [e["detail"] for e in ev if e["kind"] == "preempted"][0] == "at step 0", ev
    assert s.job(slow)["steps_done"] == 0


@pytest.mark.slow
def test_a_corrupt_or_missing_checkpoint_manifest_never_restarts_from_step_0(service):
    s = service(cluster="cpu:1x1")
    a = s.submit(name="a", steps=3000, checkpoint_every=10,
                 command=train("0.01"))
    folder = s.state / "jobs" / str(a)
    s.wait(a, lambda j: j["steps_done"] >= 45)
    s.req("POST", f"/v1/jobs/{a}/hold")
    held = s.wait(a, lambda j: j["reason"] == "JobHeldUser")
    (folder / "checkpoints" / "manifest.json").write_text("{not json")
    s.req("POST", f"/v1/jobs/{a}/release")
    # resumed from the newest checkpoint file (verified by the digest beside it), not step 0
    s.wait(a, lambda j: j["state"] == "running" and j["steps_done"] > held["steps_done"] + 5)
    log = (folder / "job.log").read_text()
    assert "recovering from the 2 checkpoint file(s)" in log and log.count("step 1/3000") == 1
    # every checkpoint gone (manifest too): the scheduler knew of one, the job fails clearly
    s.req("POST", f"/v1/jobs/{a}/hold")
    s.wait(a, lambda j: j["state"] == "pending" and j["reason"] == "JobHeldUser")
    for f in (folder / "checkpoints").iterdir():
        f.unlink()
    s.req("POST", f"/v1/jobs/{a}/release")
    j = s.wait(a, lambda j: j["state"] == "failed")
    assert "no usable checkpoint" in j["reason"] and "holds none" in j["reason"], j
    assert j["failures"] == 0


@pytest.mark.slow
def test_a_restart_on_fewer_devices_requeues_the_jobs_on_those_gone(service):
    """Started on cpu:1x2, restarted on cpu:1x1: the job on device 1 met an IndexError (marked
    FAILED, its launcher left running unwatched). Now it is stopped and requeued as on a lost
    node; a waiting job that no cluster device can hold any more says so."""
    s = service(cluster="cpu:1x2")
    a = s.submit(name="a", steps=2000, checkpoint_every=20, command=train("0.02"))
    b = s.submit(name="b", steps=300, checkpoint_every=20, command=train("0.02"))
    s.wait(a, lambda j: j["state"] == "running" and j["steps_done"] >= 5)
    s.wait(b, lambda j: j["state"] == "running" and j["steps_done"] >= 5)
    wide = s.submit(name="wide", steps=20, gpus=2)
    gone = next(j for j in (a, b) if s.job(j)["devices"] == [1])
    pid = _launcher_pid(s.state, gone)
    s.kill9()
    s2 = Service(s.state, cluster="cpu:1x1").start()
    s.proc = s2.proc
    s2.wait(wide, lambda j: j["reason"] == "BadConstraints", timeout=60)
    deadline = time.time() + 60
    while _alive(pid):
        assert time.time() < deadline, "the launcher on the gone device was left running"
        time.sleep(0.2)
    # (its launcher gone, the service records the requeue at its next poll: waited for)
    deadline = time.time() + 60
    while "requeued" not in s2.kinds(gone) and time.time() < deadline:
        time.sleep(0.2)
    j = s2.job(gone)
    assert j["failures"] == 0 and "internal error" not in str(j)
    assert "requeued" in s2.kinds(gone)
    s2.req("POST", f"/v1/jobs/{a if gone == b else b}/cancel")
    s2.wait(gone, finished, timeout=180)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.slow
def test_attained_service_goes_on_across_a_restart(service):
    """A job's attained service (what las and Tiresias order jobs by) was stored only when the
    job reported progress or ended, and a restart took the stored value: a job with no progress
    reports, running 4 s before a kill -9, restarted at 0 (and the API said 0 while it ran). Now
    it is counted from when it was stored, through the restart, for a job adopted and for one
    that ended while no scheduler ran."""
    s = service(policy="las", cluster="cpu:1x2")
    adopted = s.submit(name="adopted", steps=None, command=["sleep", "15"])
    ended = s.submit(name="ended", steps=None, command=["sleep", "3"])
    s.wait(ended, lambda j: j["state"] == "running")
    time.sleep(2.0)
    live = s.job(adopted)
    assert live["state"] == "running" and live["attained"] >= 1.5, live   # (it said 0)
    s.kill9()
    time.sleep(2.5)                    # `ended` ends while no scheduler runs
    s2 = Service(s.state, policy="las", cluster="cpu:1x2").start()
    s.proc = s2.proc
    for job_id, run_s in ((adopted, 15.0), (ended, 3.0)):
        j = s2.wait(job_id, finished, timeout=60)
        held = j["end_time"] - j["start"]
        assert run_s - 0.5 <= held and abs(j["attained"] - held) < 1.0, (job_id, j)
    assert "adopt" in s2.kinds(adopted, every=True), s2.kinds(adopted, every=True)
