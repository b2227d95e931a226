#!/usr/bin/env python3
"""Fit Pollux's throughput model with the reference's own code, for point sets given in JSON.

Usage::

    python bench/anchors/pollux_fit.py --sia PATH --points IN.json --out OUT.json

``PATH``: a checkout of siasosp23/artifacts or its bare git dir (as for ``bench/anchors/sia.py``,
whose cached export and venv this reuses). ``IN.json``: a list of point sets, each an object with
``num_nodes``, ``num_replicas``, ``atomic_bsz``, ``step_time`` and ``sync_time`` (lists of one
length), or a file this script wrote (its point sets are fitted again). For each, the reference's ``goodput.fit_perf_params`` (``sia-simulator/goodput.py``
lines 149-208, unchanged) is called with accumulation time = max(step - sync, 1e-8) and optim time
= step, as Sia's simulator's jobs report them (``job.py`` lines 388-412), and ``OUT.json`` gets the
point sets with the fitted parameters (alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r, gamma)
under ``params`` and the reference's commit. Quanta's ``perf.pollux_online.fit_pollux`` is checked
against such a file in ``tests/test_sia_fidelity.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from sia import InputError, ensure_venv, export_source  # noqa: E402

ME = "pollux_fit.py"

FIELDS = ("num_nodes", "num_replicas", "atomic_bsz", "step_time", "sync_time")

# runs in the reference's venv, cwd sia-simulator/: reads point sets on stdin, prints params
CHILD = """\
import json, sys, warnings
import numpy as np
warnings.filterwarnings("ignore")
from goodput import fit_perf_params
out = []
for s in json.load(sys.stdin):
    step = np.array(s["step_time"], dtype=float)
    acc = np.maximum(step - np.array(s["sync_time"], dtype=float), 1e-8)
    p = fit_perf_params(np.array(s["num_nodes"]), np.array(s["num_replicas"]),
                        np.array(s["atomic_bsz"]), acc, step)
    out.append([float(v) for v in p])
json.dump(out, sys.stdout)
"""


def read_points(path: Path) -> list[dict]:
    try:
        sets = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: {e}")
    if isinstance(sets, dict) and "sets" in sets:      # a file this script wrote: fit it again
        sets = [{f: s.get(f) for f in FIELDS} for s in sets["sets"]]
    if not isinstance(sets, list):
        raise InputError(f"{path}: expected a list of point sets")
    for i, s in enumerate(sets):
        if not isinstance(s, dict) or any(not isinstance(s.get(f), list) for f in FIELDS):
            raise InputError(f"{path}: point set {i} needs the fields {', '.join(FIELDS)}")
        if len({len(s[f]) for f in FIELDS}) != 1 or not s["step_time"]:
            raise InputError(f"{path}: point set {i}: the fields' lists differ in length or are empty")
    return sets


def die(msg: str, rc: int = 2) -> None:
    print(f"{ME}: error: {msg}", file=sys.stderr)
    sys.exit(rc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pollux_fit.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sia", required=True, help="checkout of siasosp23/artifacts, or its bare git dir")
    ap.add_argument("--points", required=True, help="JSON list of point sets")
    ap.add_argument("--out", required=True, help="where to write the point sets with the reference's params")
    a = ap.parse_args(argv)
    try:
        sets = read_points(Path(a.points))
        sim, commit, _notes = export_source(Path(a.sia).expanduser())
        py = ensure_venv()
    except InputError as e:
        die(str(e))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    env.pop("PYTHONPATH", None)
    run = subprocess.run([str(py), "-c", CHILD], cwd=sim, input=json.dumps(sets),
                         capture_output=True, text=True, env=env)
    if run.returncode != 0:
        die(f"the reference's fit failed: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else run.returncode}", 1)
    params = json.loads(run.stdout)
    out = {"reference_repo": "https://github.com/siasosp23/artifacts", "reference_commit": commit,
           "function": "sia-simulator/goodput.py fit_perf_params (lines 149-208)",
           "command": f"python bench/anchors/pollux_fit.py --sia PATH --points {a.points} --out {a.out}",
           "sets": [dict(s, params=p) for s, p in zip(sets, params)]}
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(sets)} point sets fitted by the reference: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
