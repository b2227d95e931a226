"""bench/paired.py as typed from the repository root: a tiny simulation by the code here and by
HEAD in alternation, each side importing its own checkout (a relative trace path too); and its
refusals."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def paired(*args):
    return subprocess.run([sys.executable, "bench/paired.py", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300, env=ENV)


@pytest.mark.slow
def test_both_sides_run_and_outputs_compare():
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                      capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    r = paired("--baseline", "HEAD", "--repeat", "2", "--", "simulate", "--trace",
               "quanta/data/traces/sia_philly_workload-1.csv", "--max-jobs", "6",
               "--cluster", "v100:4x8", "--policy", "fifo", "--no-plots", "--quiet")
    assert r.returncode == 0, r.stderr + r.stdout
    out = r.stdout
    assert out.count(" new ") + out.count(" baseline ") >= 4          # 2 repeats x 2 sides
    assert "wall speed-up" in out and "CPU  speed-up" in out
    assert "outputs: byte-identical" in out
    head = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "quanta"],
                          capture_output=True, text=True).stdout
    if not head.strip():           # HEAD is the code here: the tool must say so
        assert "warning: both sides ran the same code" in out


@pytest.mark.parametrize("args, says", [
    (["--baseline", "HEAD"], "no quanta command given"),
    (["--baseline", "HEAD", "--", "simulate", "--out", "x"], "do not pass --out"),
    (["--baseline", "no-such-ref", "--", "simulate"], "--baseline no-such-ref"),
])
def test_refusals_are_one_line(args, says):
    r = paired(*args)
    assert r.returncode != 0
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_an_earlier_commit_runs_its_own_code():
    # the commit before the last one that changed a file the code version covers (quanta/ but
    # the runtime's: cellstore.NOT_SIMULATION): its code version differs from the code here, so
    # the baseline side imported its own export, not this checkout
    from quanta.cellstore import NOT_SIMULATION
    last = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%H", "--", "quanta",
                           *(f":(exclude)quanta/{name}" for name in NOT_SIMULATION)],
                          capture_output=True, text=True).stdout.strip()
    if not last or subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "-q",
                                   last + "^"], capture_output=True).returncode != 0:
        pytest.skip("no history to compare with")
    r = paired("--baseline", last + "^", "--repeat", "1", "--", "simulate", "--trace",
               "synthetic:3:5", "--cluster", "v100:1x8", "--policy", "fifo", "--no-plots",
               "--quiet")
    assert r.returncode == 0, r.stderr + r.stdout
    versions = [ln for ln in r.stdout.splitlines() if ln.startswith("code: ")]
    assert len(versions) == 1 and "warning" not in r.stdout
    new, base = versions[0].removeprefix("code: new ").split(", baseline ")
    assert new != base
