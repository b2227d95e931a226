"""bench/anchors/pollux_job_course.py and pollux_ga_check.py as typed from the repository root
(their replay's side; the reference's needs a checkout of Sia's artifact and its venv)."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, *args):
    return subprocess.run([sys.executable, f"bench/anchors/{script}", *args], capture_output=True,
                          text=True, cwd=ROOT)


def test_a_jobs_course_in_a_reference_log_and_in_a_replay(tmp_path):
    # a reference log of three rounds: the job starts on 2 T4s, moves to 4 A100s on 1 node, ends
    runs = tmp_path / "runs" / "sia_philly_workload-1_first8__pollux__s1"
    runs.mkdir(parents=True)
    rec = lambda t, cl, pl, n, done=None: json.dumps({"timestamp": t, "submitted_jobs": [
        {"name": "cifar10-1", "cluster": cl, "placement": pl, "num_restarts": n,
         "completion_time": done}]})
    with gzip.open(runs / "sim.log.gz", "wt") as f:
        f.write("\n".join([rec(60, None, [], None), rec(120, "aws", [2], 0),
                           rec(180, "dgx-ext", [4], 1), rec(240, "dgx-ext", [4], 1, 230.0)]) + "\n")
    run = _run("pollux_job_course.py", "--workload", "sia_philly_workload-1", "--max-jobs", "8",
               "--app", "cifar10", "--seeds", "1", "--runs", str(tmp_path / "runs"),
               "--replay-dir", str(tmp_path / "replay"))
    assert run.returncode == 0, run.stderr
    ref = [ln for ln in run.stdout.splitlines() if ln.startswith("reference seed 1")]
    assert ref == ["reference seed 1  cifar10-1        0.0 h  t4 50%, a100 50%             "
                   "longest t4 x2  0.0 h  changes   1  last a100 x4"]
    replayed = tmp_path / "replay" / "sia_philly_workload-1_first8_s1"
    assert (replayed / "pollux" / "events.csv").is_file()
    assert any(ln.startswith("replay    seed 1  cifar10-") for ln in run.stdout.splitlines())
    assert "reference: 1 jobs over 1 seeds" in run.stdout and "replay   : " in run.stdout


def test_the_searchs_draws_on_a_replays_rounds(tmp_path):
    run = _run("pollux_ga_check.py", "--workload", "sia_philly_workload-1", "--max-jobs", "30",
               "--rounds", "10,12", "--draws", "2", "--side", "replay", "--work", str(tmp_path))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("round   10") and "replay: power mean 0." in lines[0]
    assert lines[-1].startswith("over the rounds: replay ") and "(4 draws)" in lines[-1]
    kept = sorted(p.name for p in (tmp_path / "sia_philly_workload-1_first30_s0").iterdir())
    assert kept == ["10.npz", "12.npz"]


def test_bad_input_is_a_one_line_error(tmp_path):
    run = _run("pollux_ga_check.py", "--workload", "sia_philly_workload-1", "--max-jobs", "30",
               "--rounds", "ten", "--side", "replay", "--work", str(tmp_path))
    assert run.returncode == 2 and "--rounds 'ten'" in run.stderr and "Traceback" not in run.stderr
    run = _run("pollux_ga_check.py", "--workload", "sia_philly_workload-1", "--max-jobs", "30",
               "--work", str(tmp_path))
    assert run.returncode == 2 and "--sia PATH" in run.stderr and "Traceback" not in run.stderr
    run = _run("pollux_job_course.py", "--workload", "nope", "--max-jobs", "3")
    assert run.returncode == 2 and "no bundled trace" in run.stderr
    assert "Traceback" not in run.stderr
