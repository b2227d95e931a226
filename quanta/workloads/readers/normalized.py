"""The project's normalized trace CSV (see the data README).

Columns: `job_id, submit_time_s, num_gpus, duration_s` and, where the source has them, `vc` (kept
as the queue), `status`, `gpu_fraction` (share of one GPU; a value above 1 is the job's GPU
amount, num_gpus x share, as the openb file writes it for multi-GPU pods), `qos` (LS and
Guaranteed -> guaranteed), `censored` (1 = still running at trace end, so `duration_s` is a
lower bound). A `duration_s` of 0 means unknown: the job's work is the catalog's for a Pollux/Sia
application, else its run time is drawn from Gavel's distribution (seeded, said in the run's
notes), as for every trace without run times. Optional `job_type`
and `user` columns are kept too, and `priority` (a number, or a class name of the queues file given
with --queues); other columns are ignored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from quanta.model.job import CLASS_NAME, Trace
from quanta.workloads.readers._base import GUARANTEED_QOS, Sample, build_trace, count_note, start

FORMAT = "normalized"
DESCRIPTION = ("normalized CSV (job_id,submit_time_s,num_gpus,duration_s"
               "[,vc,status,gpu_fraction,qos,censored])")
# the file's column of each JobSpec field whose name differs (errors after reading name it)
FIELDS = {"submit_time": "submit_time_s"}
REQUIRED = ("job_id", "submit_time_s", "num_gpus", "duration_s")


def sniff(s: Sample) -> bool:
    return set(REQUIRED) <= s.header


def read(path: str | Path, *, max_jobs: int | None = None) -> Trace:
    path, p, it = start(path, FORMAT, REQUIRED)
    rows: list[dict[str, Any]] = []
    statuses: list[str] = []
    qos_values: list[str] = []
    censored = 0
    unnamed = 0
    for line, row in it:
        p.line = line
        p.check_width(row)
        job_id = p.get(row, "job_id")
        unnamed += not job_id
        r: dict[str, Any] = {
            "job_id": job_id or f"{FORMAT}-{len(rows):06d}",
            "submit_time": p.number(p.get(row, "submit_time_s"), "submit_time_s", minimum=None),
            "num_gpus": p.whole(p.get(row, "num_gpus"), "num_gpus", minimum=1),
            "duration_s": p.number(p.get(row, "duration_s"), "duration_s"),
            "queue": p.opt(row, "vc") or "default",
            "job_type": p.opt(row, "job_type"),
            "user": p.opt(row, "user"),
            "source_line": line,
        }
        prio = p.opt(row, "priority")
        if prio:        # a number, or a priority class name of the queues file (--queues)
            if re.fullmatch(r"[+-]?\d+", prio):
                r["priority"] = p.whole(prio, "priority", minimum=None)
            elif re.fullmatch(CLASS_NAME, prio):
                r["priority"] = prio
            else:
                raise p.error(f"'{prio}' is neither a whole number nor a priority class name",
                              field="priority")
        frac = p.opt(row, "gpu_fraction")
        if frac:
            # Share of one GPU; the openb file writes the GPU amount (num_gpus x share) instead,
            # so 8.0 on an 8-GPU job means whole GPUs.
            share = p.number(frac, "gpu_fraction")
            share = share / r["num_gpus"] if share > 1 else share
            if not 0 < share <= 1:
                raise p.error(f"{frac} is neither a share of one GPU in (0, 1] nor the job's GPU "
                              f"amount", field="gpu_fraction")
            r["gpu_fraction"] = share
        qos = p.opt(row, "qos")
        r["guaranteed"] = qos.lower() in GUARANTEED_QOS
        if p.has("qos"):
            qos_values.append(qos)
        if p.has("status"):
            statuses.append(p.opt(row, "status"))
        cens = p.opt(row, "censored")
        if cens and cens not in ("0", "1", "true", "false", "True", "False"):
            raise p.error(f"'{cens}' is not 0 or 1", field="censored")
        censored += cens in ("1", "true", "True")
        rows.append(r)
    notes: list[str] = []
    if unnamed:
        notes.append(f"{unnamed} jobs without a job_id: named {FORMAT}-NNNNNN by their row")
    if statuses:
        notes.append(count_note("status", statuses))
    if qos_values:
        notes.append(count_note("qos", qos_values) + " (LS and Guaranteed -> guaranteed=True)")
    if censored:
        notes.append(f"{censored} jobs censored (still running at trace end; "
                     "duration_s is a lower bound)")
    return build_trace(path, FORMAT, rows, notes, max_jobs=max_jobs)
