#!/usr/bin/env python3
"""Where one application's jobs spend their lives under Pollux, in Sia's simulator and in
Quanta's sia-sim replay, seed by seed: hours on each (GPU type, GPU count), the allocation held
longest, the number of placement changes, and over the seeds the time on each type and the
allocation each run's job ended its life on.

    python bench/anchors/pollux_job_course.py --workload sia_saturn_workload-3 --max-jobs 60 \\
        [--app imagenet] [--seeds 0-7] [--runs DIR] [--replay-dir DIR]

Reference side: the per-round logs (`sim.log.gz`) that `bench/anchors/sia.py --policy pollux
--seed S` leaves in its cache (`--runs`, default ~/.cache/anchors/sia/runs; seeds whose run is
not there are skipped). Replay side: `quanta simulate --world sia-sim --trace <the bundled
trace> --max-jobs N --policy pollux --seed S --events`, run into `--replay-dir` (default
/tmp/pollux_job_course) unless its events.csv is already there. Each side's job is counted from
its first allocation to its end; time without GPUs counts as (none, 0).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from quanta.reproduce import SIA_TYPES  # noqa: E402  (Sia's cluster names -> Quanta's types)

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "anchors" / "sia"
ROUND = 60.0                                                # the reference's round


class Course:
    """One job's life: seconds on each (type, GPUs), its placement changes, its last
    allocation."""

    def __init__(self) -> None:
        self.time: Counter = Counter()
        self.changes = 0
        self.last: tuple[str, int] = ("none", 0)
        self.shape: tuple = ()            # (type, GPUs) and nodes now (replay side)

    def hours(self) -> float:
        return sum(self.time.values()) / 3600

    def by_type(self) -> Counter:
        out: Counter = Counter()
        for (t, _g), s in self.time.items():
            out[t] += s
        return out


def reference(log_gz: Path, app: str) -> dict[str, Course]:
    """Each `app` job's course from the reference's per-round log (a record per 60 s round:
    the allocation each job held during the round that ends there, its restart count)."""
    out: dict[str, Course] = {}
    with gzip.open(log_gz, "rt") as f:
        for line in f:
            for j in json.loads(line)["submitted_jobs"]:
                if not j["name"].startswith(app + "-") or j["completion_time"] is not None:
                    continue
                key = (SIA_TYPES.get(j["cluster"], j["cluster"]), sum(j["placement"])) \
                    if j["placement"] else ("none", 0)
                c = out.setdefault(j["name"], Course())
                if key == ("none", 0) and not c.time:
                    continue                      # not started yet
                c.time[key] += ROUND
                c.changes = j["num_restarts"] or 0
                if key != ("none", 0):
                    c.last = key
    return out


def replay(events: Path, app: str) -> dict[str, Course]:
    """Each `app` job's course from a replay's events.csv (every start, move, resize,
    preemption and finish)."""
    out: dict[str, Course] = {}
    held: dict[str, tuple[float, tuple[str, int]]] = {}
    with open(events, newline="") as f:
        for row in csv.DictReader(f):
            name = row["job_id"]
            if not name.startswith(app + "-") or row["event"] == "submit":
                continue
            t = float(row["time_s"])
            c = out.setdefault(name, Course())
            if name in held:
                t0, key = held[name]
                c.time[key] += t - t0
            if row["event"] == "finish":
                held.pop(name, None)
                continue
            key = ("none", 0) if row["event"] == "preempt" else (row["gpu_type"], int(row["gpus"]))
            shape = (key, row["nodes"])
            # a restart, as the reference counts them: a move that keeps the type, the GPUs
            # and the nodes is taken for one that keeps the GPUs per node, which sia-sim makes
            # free and does not count (job.py:524-542)
            if row["event"] == "resize" or (row["event"] == "start" and c.time) or \
                    (row["event"] == "migrate" and shape != c.shape):
                c.changes += 1
            c.shape = shape
            if key != ("none", 0):
                c.last = key
            held[name] = (t, key)
    return out


def run_replay(workload: str, max_jobs: int, seed: int, out: Path) -> Path:
    events = out / "pollux" / "events.csv"
    if not events.is_file():
        trace = ROOT / "quanta" / "data" / "traces" / f"{workload}.csv"
        cmd = [sys.executable, "-m", "quanta.cli", "simulate", "--world", "sia-sim", "--trace",
               str(trace), "--max-jobs", str(max_jobs), "--policy", "pollux", "--seed", str(seed),
               "--events", "--out", str(out), "--no-plots", "--quiet", "--force"]
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    return events


def describe(c: Course) -> str:
    tot = sum(c.time.values()) or 1.0
    types = ", ".join(f"{t} {s / tot:.0%}" for t, s in c.by_type().most_common())
    (t, g), s = c.time.most_common(1)[0]
    return (f"{c.hours():5.1f} h  {types:28s} longest {t} x{g} {s / 3600:4.1f} h  "
            f"changes {c.changes:3d}  last {c.last[0]} x{c.last[1]}")


def summary(label: str, runs: dict[int, dict[str, Course]]) -> None:
    courses = [c for by in runs.values() for c in by.values()]
    if not courses:
        print(f"{label}: no run")
        return
    tot: Counter = Counter()
    for c in courses:
        tot.update(c.by_type())
    allt = sum(tot.values())
    ends = Counter(f"{c.last[0]} x{c.last[1]}" for c in courses)
    mean = sum(c.hours() for c in courses) / len(courses)
    print(f"{label}: {len(courses)} jobs over {len(runs)} seeds, mean {mean:.1f} h, "
          f"changes {sum(c.changes for c in courses) / len(courses):.1f} a job; time by type "
          + ", ".join(f"{t} {s / allt:.0%}" for t, s in tot.most_common())
          + "; last allocation " + ", ".join(f"{k} ({n})" for k, n in ends.most_common()))


def seeds_of(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", required=True,
                    help="bundled Sia workload, e.g. sia_saturn_workload-3")
    ap.add_argument("--max-jobs", type=int, required=True, help="the slice's first N jobs")
    ap.add_argument("--app", default="imagenet", help="application (default imagenet)")
    ap.add_argument("--seeds", default="0-7", help="seeds, e.g. 0-7 or 3")
    ap.add_argument("--runs", default=str(CACHE / "runs"), help="the reference runs' cache")
    ap.add_argument("--replay-dir", default="/tmp/pollux_job_course")
    a = ap.parse_args(argv)
    if not (ROOT / "quanta" / "data" / "traces" / f"{a.workload}.csv").is_file():
        print(f"pollux_job_course.py: no bundled trace quanta/data/traces/{a.workload}.csv",
              file=sys.stderr)
        return 2
    label = f"{a.workload}_first{a.max_jobs}"
    refs: dict[int, dict[str, Course]] = {}
    reps: dict[int, dict[str, Course]] = {}
    for s in seeds_of(a.seeds):
        log = Path(a.runs) / (f"{label}__pollux" + ("" if s == 0 else f"__s{s}")) / "sim.log.gz"
        if log.is_file():
            refs[s] = reference(log, a.app)
            for name, c in sorted(refs[s].items()):
                print(f"reference seed {s}  {name:14s} {describe(c)}")
        events = run_replay(a.workload, a.max_jobs, s, Path(a.replay_dir) / f"{label}_s{s}")
        reps[s] = replay(events, a.app)
        for name, c in sorted(reps[s].items()):
            print(f"replay    seed {s}  {name:14s} {describe(c)}")
    summary("reference", refs)
    summary("replay   ", reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
