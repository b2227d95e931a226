#!/usr/bin/env python3
"""Run Rubick's own simulator (AlibabaPAI/reconfigurable-dl-scheduler, the MLSys'25 artifact
"Morphling": ``simulator/`` and ``sched/``, unchanged) on one of its workloads and record its per-job
results in the common format (``bench/anchors/common.py``).

Usage::

    python bench/anchors/rubick.py [--repo PATH] [--workload base|bp|mt|FILE.csv] [--root DIR]
                                   [--python PYTHON] [--out DIR] [--reuse]

``PATH`` is a checkout of the artifact or its bare git dir (default: the mirror
``/work/.mirror/AlibabaPAI+reconfigurable-dl-scheduler/repo``). What is run is the artifact's own
command for its cluster experiments (README.md section 7.3, ``artifact/73_cluster_experiment/
morphling_exp`` with ``simulator/workloads/workload-base.csv morphling 60 8 8 96 1600 400 100 0``)::

    python simulator/simulator.py simulator/workloads/workload-<w>.csv --policy morphling
        --interval 60 --num-nodes 8 --num-gpus 8 --num-cpus 96 --mem-per-node 1600
        --intra-bandwidth 400 --inter-bandwidth 100 --online-model-fitting 0 --output LOG

from the root of an export of the artifact's ``simulator/`` and ``sched/`` folders (``git archive``
into ``DIR/src/<commit>``), with ``PYTHONHASHSEED=0`` and ``OMP_NUM_THREADS=1``. The policy draws no
random numbers; two runs give the same log. The interpreter is ``DIR/venv`` built on first use from
``rubick_requirements.txt`` beside this script (the artifact's ``requirements.txt`` pins: numpy
1.21.5, pandas 1.4.2, scipy 1.7.3, autograd 1.5, which need Python <= 3.10; ``--python`` names the
interpreter to build it with, default ``python3.9``). ``DIR`` defaults to ``~/.cache/anchors/rubick``;
it is outside the project. The simulator is not a dependency of Quanta, only a tool for comparison.

Results (``--out``, default ``quanta/data/reference/rubick/``): ``rubick_workload-<w>__morphling.csv``
and ``.json``. From the simulator's own log (``--output``: one JSON record per 60 s round, written by
``Cluster.step``, simulator.py:139-156): the last record gives each job's ``submission_time`` and
``completion_time`` (jct = end - submit, what ``Cluster.get_jcts`` prints, simulator.py:312-321);
``start_s`` = the timestamp of the first record in which the job's ``placement`` is non-empty (the end
of the round that first gave it GPUs; it then pays 260 s before progressing, simulator/job.py:223).
Makespan = last completion - first submission (common.write_run); the simulator prints the round
time at which the last job finished (a multiple of 60 s). The notes add the per-model average JCT,
the total number of restarts (``num_restarts``: placement changes after the first start) and the
simulator's own printed average JCT and makespan.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import RECORDED, JobResult, RunSummary, write_run  # noqa: E402

ME = "rubick.py"
REFERENCE_REPO = "https://github.com/AlibabaPAI/reconfigurable-dl-scheduler"
DEFAULT_REPO = Path("/work/.mirror/AlibabaPAI+reconfigurable-dl-scheduler/repo")
ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "anchors" / "rubick"
REQUIREMENTS = HERE / "rubick_requirements.txt"
FOLDERS = ("simulator", "sched")
# README.md section 7.3 / artifact/73_cluster_experiment/morphling_exp: 60 8 8 96 1600 400 100 0
ARGS = ["--policy", "morphling", "--interval", "60", "--num-nodes", "8", "--num-gpus", "8",
        "--num-cpus", "96", "--mem-per-node", "1600", "--intra-bandwidth", "400",
        "--inter-bandwidth", "100", "--online-model-fitting", "0"]


def die(msg: str, rc: int = 2) -> None:
    print(f"{ME}: error: {msg}", file=sys.stderr)
    sys.exit(rc)


def _git(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True, **kw)


def export_source(repo: Path, root: Path) -> tuple[Path, str]:
    """Export simulator/ and sched/ of the artifact into root/src/<commit>; (folder, commit)."""
    if (repo / "simulator" / "simulator.py").is_file():          # a checkout
        r = _git(["-C", str(repo), "rev-parse", "HEAD"])
        commit = r.stdout.strip() if r.returncode == 0 else "unknown"
        dest = root / "src" / ("local-" + commit[:12])
        if dest.exists():
            shutil.rmtree(dest)
        for f in FOLDERS:
            shutil.copytree(repo / f, dest / f, ignore=shutil.ignore_patterns("__pycache__", ".git"))
        return dest, commit
    r = _git(["--git-dir", str(repo), "rev-parse", "--verify", "-q", "HEAD^{commit}"])
    if r.returncode != 0:
        die(f"--repo {repo}: neither a checkout of the artifact nor its bare git dir")
    commit = r.stdout.strip()
    dest = root / "src" / commit[:12]
    if (dest / ".exported").is_file():
        return dest, commit
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tempfile.TemporaryFile() as tar:
        arch = subprocess.run(["git", "--git-dir", str(repo), "archive", "HEAD", *FOLDERS],
                              stdout=tar, stderr=subprocess.PIPE)
        if arch.returncode != 0:
            die(f"git archive failed: {arch.stderr.decode(errors='replace').strip()}", 1)
        tar.seek(0)
        subprocess.run(["tar", "-x", "-C", str(dest)], stdin=tar, check=True)
    (dest / ".exported").write_text(commit + "\n")
    return dest, commit


def ensure_venv(root: Path, python: str) -> Path:
    venv = root / "venv"
    py = venv / "bin" / "python"
    stamp = venv / ".requirements"
    want = REQUIREMENTS.read_text()
    if py.is_file() and stamp.is_file() and stamp.read_text() == want:
        return py
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=True)
    stamp.write_text(want)
    return py


def read_log(log: Path) -> tuple[list[dict], dict[str, float]]:
    """(the last record's jobs, name -> first timestamp with a placement)."""
    first: dict[str, float] = {}
    last = None
    with open(log) as fh:
        for line in fh:
            rec = json.loads(line)
            for j in rec["submitted_jobs"]:
                if j["placement"] and j["name"] not in first:
                    first[j["name"]] = float(rec["timestamp"])
            last = rec
    if last is None:
        die(f"{log}: empty log", 1)
    return last["submitted_jobs"], first


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=DEFAULT_REPO)
    ap.add_argument("--workload", default="base", help="base, bp, mt or a workload CSV path")
    ap.add_argument("--root", type=Path, default=ROOT, help="export, venv and run logs (outside the project)")
    ap.add_argument("--python", default="python3.9", help="interpreter to build the venv with")
    ap.add_argument("--out", type=Path, default=RECORDED / "rubick")
    ap.add_argument("--reuse", action="store_true", help="read the previous run's log instead of running")
    a = ap.parse_args(argv)
    src, commit = export_source(a.repo, a.root)
    if a.workload in ("base", "bp", "mt"):
        wl_rel = f"simulator/workloads/workload-{a.workload}.csv"
        name = f"rubick_workload-{a.workload}"
    else:
        wl_rel = str(Path(a.workload).resolve())
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(a.workload).stem)
    run_dir = a.root / "runs" / name
    run_dir.mkdir(parents=True, exist_ok=True)
    log, out_gz = run_dir / "sim.jsonl", run_dir / "stdout.txt.gz"
    cmd_shown = ("python simulator/simulator.py " + wl_rel + " " + " ".join(ARGS)
                 + " --output LOG  (PYTHONHASHSEED=0 OMP_NUM_THREADS=1, cwd = export of "
                 f"simulator/ and sched/ @ {commit[:7]})")
    if not a.reuse:
        py = ensure_venv(a.root, a.python)
        env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
        t0 = time.time()
        proc = subprocess.run([str(py), "simulator/simulator.py", wl_rel, *ARGS, "--output", str(log)],
                              cwd=src, env=env, capture_output=True)
        wall = time.time() - t0
        with gzip.open(out_gz, "wb") as fh:
            fh.write(proc.stdout + proc.stderr)
        (run_dir / "meta.json").write_text(json.dumps(
            {"command": cmd_shown, "commit": commit, "wall_s": wall, "returncode": proc.returncode},
            indent=1))
        if proc.returncode != 0:
            die(f"the simulator exited with {proc.returncode}; see {out_gz}", 1)
    meta = json.loads((run_dir / "meta.json").read_text())
    jobs, first = read_log(log)
    results, by_app, restarts = [], collections.defaultdict(list), 0
    for j in jobs:
        if j["completion_time"] is None:
            continue
        app = j["name"].rsplit("-", 1)[0]
        jct = float(j["completion_time"]) - float(j["submission_time"])
        by_app[app].append(jct)
        restarts += int(j["num_restarts"] or 0)
        results.append(JobResult(j["name"], j["name"], app, 0, float(j["submission_time"]),
                                 first.get(j["name"]), float(j["completion_time"]), jct))
    gpus = _requested_gpus(src / wl_rel if not Path(wl_rel).is_absolute() else Path(wl_rel))
    for r in results:
        r.num_gpus = gpus.get(r.name, 0)
    printed = _printed(out_gz)
    notes = [f"{len(results)} of {len(jobs)} jobs completed",
             "avg JCT per model (h): " + ", ".join(f"{k} {sum(v) / len(v) / 3600:.2f}"
                                                   for k, v in sorted(by_app.items())),
             f"restarts (placement changes after the first start): {restarts}",
             f"the simulator's own last lines: {printed}"]
    run = RunSummary("Rubick (Morphling)", name, "morphling", "8 nodes x 8 A800, 96 CPUs, 1600 GB",
                     REFERENCE_REPO, commit, cmd_shown, float(meta["wall_s"]), notes)
    csv_path, json_path = write_run(a.out, run, results)
    print(json_path.read_text())
    return 0


def _requested_gpus(path: Path) -> dict[str, int]:
    import csv
    with open(path, newline="") as fh:
        return {r["name"]: int(float(r["num_gpus"])) for r in csv.DictReader(fh)}


def _printed(out_gz: Path) -> str:
    """The simulator's last printed 'Average JCT (s)' and 'Makespan (s)'."""
    if not out_gz.is_file():
        return "(no stdout kept)"
    avg = mk = None
    with gzip.open(out_gz, "rt", errors="replace") as fh:
        for line in fh:
            if line.startswith("Average JCT (s):"):
                avg = line.split(":", 1)[1].strip()
            elif line.startswith("Makespan (s):"):
                mk = line.split(":", 1)[1].strip()
    return f"Average JCT (s): {avg}; Makespan (s): {mk}"


if __name__ == "__main__":
    sys.exit(main())
