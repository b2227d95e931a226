"""Pollux (OSDI'21) and Sia (SOSP'23) workloads: `name,time,application,num_replicas,batch_size`.

`time` is the submit time in seconds, `application` the model (cifar10, imagenet, bert, ...), kept
as job_type, `num_replicas` the GPUs requested and `batch_size` the initial global batch. These
workloads carry no duration or step count: Pollux/Sia run each application to a fixed target from
their profiles, so total_steps and duration_s stay 0 and the work must come from the catalog.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quanta.model.job import Trace
from quanta.workloads.readers._base import Parser, Sample, build_trace, count_note, parse_rows

FORMAT = "pollux"
DESCRIPTION = "Pollux/Sia workload (name,time,application,num_replicas,batch_size); no durations"
# the file's column of each JobSpec field whose name differs (errors after reading name it)
FIELDS = {"job_id": "name", "submit_time": "time", "num_gpus": "num_replicas"}
REQUIRED = ("name", "time", "application", "num_replicas")


def sniff(s: Sample) -> bool:
    return set(REQUIRED) <= s.header


def _row(p: Parser, row: list[str], i: int) -> dict[str, Any]:
    app = p.get(row, "application")
    if not app:
        raise p.error("empty application", field="application")
    bsz = p.opt(row, "batch_size")
    return {
        "job_id": p.get(row, "name") or f"{FORMAT}-{i:06d}",
        "submit_time": p.number(p.get(row, "time"), "time"),
        "num_gpus": p.whole(p.get(row, "num_replicas"), "num_replicas", minimum=1),
        "job_type": app,
        "batch_size": p.whole(bsz, "batch_size") if bsz else 0,
    }


def read(path: str | Path, *, max_jobs: int | None = None) -> Trace:
    path, rows = parse_rows(path, FORMAT, REQUIRED, _row)
    notes = ["Pollux/Sia workloads give no duration or steps: total_steps = duration_s = 0, "
             "the work of each job must come from the catalog (its application's profile)",
             count_note("application", [r["job_type"] for r in rows])]
    return build_trace(path, FORMAT, rows, notes, max_jobs=max_jobs)
