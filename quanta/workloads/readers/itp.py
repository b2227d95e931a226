"""Microsoft ITP traces via ElasticFlow (microsoft/elasticflow-traces).

Raw layout: `job_id,submission_time,duration,num_gpu` (seconds from the start of collection).
ElasticFlow's generated layout adds `num_iteration,model_name,deadline,batch_size`; model_name is
kept as job_type, batch_size as batch_size and deadline (absolute seconds, like submission_time)
as deadline. The work comes from duration (the measured run time); num_iteration, generated for
ElasticFlow's own throughput model, is not used. Other extra columns are ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quanta.model.job import Trace
from quanta.workloads.readers._base import Sample, build_trace, start

FORMAT = "itp"
DESCRIPTION = "Microsoft ITP via ElasticFlow (job_id,submission_time,duration,num_gpu[,...])"
# the file's column of each JobSpec field whose name differs (errors after reading name it)
FIELDS = {"submit_time": "submission_time", "num_gpus": "num_gpu", "duration_s": "duration"}
REQUIRED = ("job_id", "submission_time", "duration", "num_gpu")


def sniff(s: Sample) -> bool:
    return set(REQUIRED) <= s.header


def read(path: str | Path, *, max_jobs: int | None = None) -> Trace:
    path, p, it = start(path, FORMAT, REQUIRED)
    rows: list[dict[str, Any]] = []
    deadlines = 0
    for line, row in it:
        p.line = line
        p.check_width(row)
        submit = p.number(p.get(row, "submission_time"), "submission_time")
        r: dict[str, Any] = {
            "job_id": p.get(row, "job_id") or f"{FORMAT}-{len(rows):06d}",
            "submit_time": submit,
            "num_gpus": p.whole(p.get(row, "num_gpu"), "num_gpu", minimum=1),
            "duration_s": p.number(p.get(row, "duration"), "duration"),
            "job_type": p.opt(row, "model_name"),
            "source_line": line,
        }
        bsz = p.opt(row, "batch_size")
        if bsz:
            r["batch_size"] = p.whole(bsz, "batch_size")
        deadline = p.opt(row, "deadline")
        if deadline:
            d = p.number(deadline, "deadline")
            if d <= submit:
                raise p.error(f"deadline {deadline} is not after submission {submit:g}",
                              field="deadline")
            r["deadline"] = d
            deadlines += 1
        rows.append(r)
    notes = ["work comes from duration (measured run time)"
             + ("; num_iteration is not used" if p.has("num_iteration") else "")]
    if deadlines:
        notes.append(f"{deadlines} jobs with a deadline (ElasticFlow's generated deadlines)")
    return build_trace(path, FORMAT, rows, notes, max_jobs=max_jobs)
