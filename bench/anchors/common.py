"""The common format in which every reference simulator's results are recorded.

Each run of a reference (Gavel's, Sia's or Tiresias' own simulator, unchanged) is written as two
files named ``<workload>__<policy>`` in a results folder (by default the project's recorded
references, ``quanta/data/reference/<system>/``):

- ``.csv``: one row per job, ``job_id,name,application,num_gpus,submit_s,start_s,end_s,jct_s``
  (times in seconds of simulated time from the start of the trace; ``start_s`` empty where the
  reference does not report it; ``application`` is the job's model or job type);
- ``.json``: the run's summary and provenance: ``system``, ``workload``, ``policy``, ``cluster``,
  ``jobs``, ``avg_jct_s``, ``makespan_s``, ``wall_s`` (the reference process, measured here),
  ``reference_repo``, ``reference_commit``, ``command`` (what was run, with its arguments),
  ``notes`` (anything a reader must know, e.g. a job the reference dropped).

The references are not dependencies of Quanta: these scripts are tools for comparison only.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDED = REPO_ROOT / "quanta" / "data" / "reference"
COLUMNS = ("job_id", "name", "application", "num_gpus", "submit_s", "start_s", "end_s", "jct_s")


@dataclass
class JobResult:
    job_id: str
    name: str
    application: str
    num_gpus: int
    submit_s: float
    start_s: float | None
    end_s: float
    jct_s: float


@dataclass
class RunSummary:
    system: str
    workload: str
    policy: str
    cluster: str
    reference_repo: str
    reference_commit: str
    command: str
    wall_s: float
    notes: list[str] = field(default_factory=list)


def _fmt(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return repr(float(x))


def write_run(folder: Path, run: RunSummary, jobs: list[JobResult], suffix: str = "") -> tuple[Path, Path]:
    """Write ``<workload>__<policy><suffix>.csv`` and ``.json`` into ``folder`` (``suffix`` tells
    apart runs of one workload and policy, e.g. ``__s1`` for another seed); return both paths."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{run.workload}__{run.policy}{suffix}"
    csv_path, json_path = folder / f"{stem}.csv", folder / f"{stem}.json"
    jobs = sorted(jobs, key=lambda j: (j.submit_s, j.job_id))
    with csv_path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for j in jobs:
            w.writerow([j.job_id, j.name, j.application, int(j.num_gpus), _fmt(j.submit_s),
                        _fmt(j.start_s), _fmt(j.end_s), _fmt(j.jct_s)])
    n = len(jobs)
    first = min((j.submit_s for j in jobs), default=0.0)
    summary = {
        "system": run.system, "workload": run.workload, "policy": run.policy, "cluster": run.cluster,
        "jobs": n,
        "avg_jct_s": sum(j.jct_s for j in jobs) / n if n else None,
        "makespan_s": (max(j.end_s for j in jobs) - first) if n else None,
        "wall_s": round(run.wall_s, 2),
        "reference_repo": run.reference_repo, "reference_commit": run.reference_commit,
        "command": run.command, "notes": run.notes,
    }
    json_path.write_text(json.dumps(summary, indent=1) + "\n")
    return csv_path, json_path


def read_run(csv_path: Path) -> tuple[dict, list[JobResult]]:
    """Read back a recorded run: (summary dict, jobs)."""
    summary = json.loads(csv_path.with_suffix(".json").read_text())
    jobs = []
    with csv_path.open() as f:
        for r in csv.DictReader(f):
            jobs.append(JobResult(r["job_id"], r["name"], r["application"], int(r["num_gpus"]),
                                  float(r["submit_s"]), float(r["start_s"]) if r["start_s"] else None,
                                  float(r["end_s"]), float(r["jct_s"])))
    return summary, jobs
