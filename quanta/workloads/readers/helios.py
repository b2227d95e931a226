"""SenseTime Helios (HeliosData) Slurm job logs: `job_id,user,vc,jobname,gpu_num,cpu_num,node_num,
state,submit_time,start_time,end_time,duration,queue`.

submit_time is a date-time string (`2020-04-01 00:00:07`, naive local time) or epoch seconds;
both are accepted. `duration` is the run time in seconds; when it is empty it is end - start.
CPU-only jobs (gpu_num 0) are skipped, and so are jobs that never ran (no duration and no
start/end time). `vc` is kept as the queue, `user` as the user; `jobname` is a free-form name,
not a model, so job_type stays empty. `queue` (the queueing delay) is not used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quanta.model.job import Trace
from quanta.workloads.readers._base import Sample, build_trace, count_note, start

FORMAT = "helios"
DESCRIPTION = "SenseTime Helios Slurm log (job_id,user,vc,jobname,gpu_num,...,submit_time,...)"
# the file's column of each JobSpec field whose name differs (errors after reading name it)
FIELDS = {"num_gpus": "gpu_num", "duration_s": "duration"}
REQUIRED = ("job_id", "gpu_num", "submit_time")


def sniff(s: Sample) -> bool:
    return set(REQUIRED) <= s.header


def read(path: str | Path, *, max_jobs: int | None = None) -> Trace:
    path, p, it = start(path, FORMAT, REQUIRED)
    if not p.has("duration") and not (p.has("start_time") and p.has("end_time")):
        raise p.error("a Helios trace needs `duration` or `start_time` and `end_time`",
                      field="duration", line=1)
    rows: list[dict[str, Any]] = []
    states: list[str] = []
    cpu_only = never_ran = 0
    for line, row in it:
        p.line = line
        p.check_width(row)
        gpus = p.whole(p.get(row, "gpu_num"), "gpu_num")
        if gpus == 0:
            cpu_only += 1
            continue
        submit = p.time(p.get(row, "submit_time"), "submit_time")
        dur_text = p.opt(row, "duration")
        if dur_text:
            duration = p.number(dur_text, "duration")
        else:
            t_start, t_end = p.opt(row, "start_time"), p.opt(row, "end_time")
            if not (t_start and t_end):
                never_ran += 1
                continue
            duration = p.time(t_end, "end_time", "start_time/end_time") - \
                p.time(t_start, "start_time", "start_time/end_time")
            if duration < 0:
                raise p.error(f"end {t_end} is before start {t_start} (negative duration)",
                              field="end_time")
        cpus = p.opt(row, "cpu_num")
        rows.append({
            "job_id": p.get(row, "job_id") or f"{FORMAT}-{len(rows):06d}",
            "submit_time": submit,
            "num_gpus": gpus,
            "duration_s": duration,
            "user": p.opt(row, "user"),
            "queue": p.opt(row, "vc") or "default",
            "cpus": p.number(cpus, "cpu_num") if cpus else 0.0,
            "source_line": line,
        })
        states.append(p.opt(row, "state"))
    notes = [f"skipped {cpu_only} CPU-only jobs (gpu_num 0) and {never_ran} jobs that never ran",
             "queue = Helios virtual cluster (vc)"]
    if p.has("state"):
        notes.append(count_note("state", states))
    return build_trace(path, FORMAT, rows, notes, max_jobs=max_jobs)
