"""bench/anchors/sia_job_trace.py: named jobs followed round by round through Sia's policy (the
replay's side here; the reference's needs a checkout of Sia's artifact)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "anchors" / "sia_job_trace.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          cwd=ROOT)


def test_the_replay_side_traces_estimates_allocations_and_learned_points(tmp_path):
    run = _run("--workload", "sia_philly_workload-1", "--max-jobs", "4", "--jobs", "cifar10-0",
               "--side", "replay", "--out", str(tmp_path))
    assert run.returncode == 0, run.stderr
    lines = (tmp_path / "replay.txt").read_text().splitlines()
    assert all(ln.startswith("TRACE t=") and "job=cifar10-0" in ln for ln in lines)
    # a new job is worth 1 on one GPU of every type, then holds GPUs, learns a point and a fit,
    # and is estimated from it on more GPUs
    assert "TRACE t=120 job=cifar10-0 estimate t4 1=1.00" in lines
    assert any(" point t4 key=(1, 1, " in ln and " fit=(" in ln for ln in lines)
    assert any(" holds=t4:1" in ln for ln in lines)
    assert any(" estimate t4 1=" in ln and " 2=" in ln for ln in lines)


def test_unknown_jobs_and_a_missing_reference_are_one_line_errors(tmp_path):
    run = _run("--workload", "sia_philly_workload-1", "--max-jobs", "4", "--jobs", "nope-9",
               "--side", "replay", "--out", str(tmp_path))
    assert run.returncode == 2 and "no such job" in run.stderr and "Traceback" not in run.stderr
    run = _run("--workload", "sia_philly_workload-1", "--jobs", "cifar10-0", "--out", str(tmp_path))
    assert run.returncode == 2 and "--sia PATH" in run.stderr and "Traceback" not in run.stderr
