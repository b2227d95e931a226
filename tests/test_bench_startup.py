"""bench/startup.py --floor as typed from the repository root: the layers below a run, each a
row with its cost over the row above; and a run that fails is one line."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def startup(*args):
    return subprocess.run([sys.executable, "bench/startup.py", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300, env=ENV)


def test_floor_prints_each_layer():
    r = startup("--repeats", "1", "--floor",
                "--trace synthetic:3:5 --cluster v100:1x8 --policy fifo --quiet --no-plots")
    assert r.returncode == 0, r.stderr + r.stdout
    rows = [line for line in r.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    names = [row.split(" | ")[0][2:] for row in rows[1:]]
    assert names[:3] == ["bare interpreter (python -c pass)", "+ import numpy", "+ import typer"]
    assert names[3].startswith("+ the ") and "Quanta modules the run imports" in names[3]
    assert int(names[3].split()[2]) > 10             # the count read from the untimed run
    assert names[4].startswith("the whole run: quanta simulate --trace synthetic:3:5")
    for row in rows[1:]:
        med, low, over = row.rstrip(" |").split(" | ")[1:]
        assert 0 < float(low) <= float(med) and over.startswith(("+", "-"))


def test_floor_run_that_fails_is_one_line():
    r = startup("--repeats", "1", "--floor", "--policy no-such-policy")
    assert r.returncode != 0
    assert "--floor: quanta simulate --policy no-such-policy failed" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
