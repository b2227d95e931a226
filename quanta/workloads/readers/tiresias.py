"""Tiresias' example traces: `job_id,num_gpu,submit_time,iterations,model_name,duration,interval`.

Times are seconds; `duration` is the run time that Tiresias' simulator plays, kept as duration_s.
`iterations` count steps on Tiresias' testbed, in units foreign to our catalog, so the work is
derived from duration_s and total_steps stays 0. `interval` (gap to the previous submission) is
redundant with submit_time and ignored. model_name is kept as job_type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quanta.model.job import Trace
from quanta.workloads.readers._base import Parser, Sample, build_trace, parse_rows

FORMAT = "tiresias"
DESCRIPTION = "Tiresias trace (job_id,num_gpu,submit_time,iterations,model_name,duration,interval)"
# the file's column of each JobSpec field whose name differs (errors after reading name it)
FIELDS = {"num_gpus": "num_gpu", "duration_s": "duration"}
REQUIRED = ("job_id", "num_gpu", "submit_time", "duration")


def sniff(s: Sample) -> bool:
    return set(REQUIRED) <= s.header and bool({"iterations", "model_name", "interval"} & s.header)


def _row(p: Parser, row: list[str], i: int) -> dict[str, Any]:
    return {
        "job_id": p.get(row, "job_id") or f"{FORMAT}-{i:06d}",
        "submit_time": p.number(p.get(row, "submit_time"), "submit_time"),
        "num_gpus": p.whole(p.get(row, "num_gpu"), "num_gpu", minimum=1),
        "duration_s": p.number(p.get(row, "duration"), "duration"),
        "job_type": p.opt(row, "model_name"),
    }


def read(path: str | Path, *, max_jobs: int | None = None) -> Trace:
    path, rows = parse_rows(path, FORMAT, REQUIRED, _row)
    notes = ["work comes from duration (Tiresias' simulated run time); iterations are not used"]
    return build_trace(path, FORMAT, rows, notes, max_jobs=max_jobs)
