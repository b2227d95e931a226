"""The per-job launcher (quanta/runtime/launch.py) run as the service runs it: every process of a
rank stopped with it, none left behind when it ends."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:        # (a zombie waiting for its reaper is gone)
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def _launch(tmp_path, script: str, grace_s: float = 5.0):
    """The launcher of a one-rank job whose command is `sh -c script` (the script writes the
    pid of the process it leaves running to child.pid)."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "launch.json").write_text(json.dumps({
        "token": "t1", "command": ["sh", "-c", script], "ranks": [{}], "master_port": 29999,
        "grace_s": grace_s, "cwd": str(job)}))
    p = subprocess.Popen([sys.executable, "-m", "quanta.runtime.launch", str(job), "t1"],
                         start_new_session=True)
    deadline = time.monotonic() + 20
    while not (job / "child.pid").exists() or not (job / "child.pid").read_text().strip():
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.05)
    return p, job, int((job / "child.pid").read_text())


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("trap", ["", "trap '' TERM; "])
def test_a_stopped_rank_takes_the_processes_it_started_with_it(tmp_path, trap):
    """(A wrapper `sh -c "python train.py; ..."` died on SIGTERM and its training process went on
    as an orphan, beside the job's next launch; one that ignores SIGTERM outlived the SIGKILL.)"""
    p, job, child = _launch(tmp_path, f"{trap}sleep 300 & echo $! > child.pid; wait", grace_s=1)
    try:
        os.kill(p.pid, signal.SIGTERM)                 # what a hold, cancel or preemption sends
        assert p.wait(timeout=20) == 0
        assert _gone(child, 5), "the rank's child outlived the job"
        exit_ = json.loads((job / "exit.json").read_text())
        assert exit_["token"] == "t1"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_what_an_ended_rank_leaves_behind_is_killed(tmp_path):
    p, job, child = _launch(tmp_path, "sleep 300 > /dev/null 2>&1 & echo $! > child.pid; exit 0")
    try:
        assert p.wait(timeout=20) == 0
        assert json.loads((job / "exit.json").read_text())["returncode"] == 0
        assert _gone(child, 5)
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_what_an_ended_rank_detached_from_its_group_is_killed(tmp_path):
    """(`setsid sleep 302 &` in a job's command outlived the job, which had ended FINISHED: only
    the rank's process group was swept.) It carries the launch's token, by which it is found."""
    p, job, child = _launch(tmp_path, "setsid sh -c 'echo $$ > child.pid; exec sleep 300' "
                                      "> /dev/null 2>&1 & sleep 1; exit 0")
    try:
        assert p.wait(timeout=20) == 0
        assert json.loads((job / "exit.json").read_text())["returncode"] == 0
        assert _gone(child, 5), "the detached process outlived the job"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_launcher_killed_outright_leaves_no_rank_behind(tmp_path):
    """(A launcher killed with SIGKILL left its ranks training as orphans in sessions of their
    own; the service requeued the job and launched a second copy beside them.) Its rank dies
    with it (the parent-death signal), and what the rank started carries the launch's token, by
    which the backend kills it."""
    from quanta.runtime.launch import kill_leftovers
    p, job, child = _launch(tmp_path, "sleep 300 & echo $! > child.pid; echo $$ > rank.pid; wait")
    rank = int((job / "rank.pid").read_text())
    try:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=20)
        assert _gone(rank, 5), "the rank outlived its launcher"
        assert _alive(child)                           # in the rank's session, left to the sweep
        assert kill_leftovers("t1") == 1 and _gone(child, 5)
        assert kill_leftovers("t1") == 0 and kill_leftovers("") == 0
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_the_local_backend_sweeps_a_dead_launchers_processes(tmp_path):
    """LocalBackend.poll, finding its launcher killed, kills what the ranks left (the job is then
    requeued: its next launch never runs beside the last one)."""
    from quanta.runtime.backends.base import Launch, Rank
    from quanta.runtime.backends.local import LocalBackend
    be = LocalBackend()
    job = tmp_path / "job"
    be.launch(Launch("7", job, ["sh", "-c", "sleep 300 & echo $! > child.pid; wait"],
                     [Rank(0, 0, "")], "cpu", 0, cwd=str(job), token="t7"))
    deadline = time.monotonic() + 20
    while not (job / "child.pid").exists() or not (job / "child.pid").read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int((job / "child.pid").read_text())
    try:
        os.kill(be.procs["7"].pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while not (done := be.poll()):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert "launcher was killed" in done[0].message
        assert _gone(child, 5)
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
