"""Alibaba PAI 2020 (cluster-trace-gpu-v2020) task tables.

The released tables are headerless CSVs with separate .header files:
pai_task_table = `job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,
plan_gpu,gpu_type`; pai_job_table = `job_name,inst_id,user,status,start_time,end_time` (no GPU
request, so it cannot be read alone: join it with the task table first). A file with a header is
read by column name and needs at least job_name, start_time, end_time and plan_gpu.

plan_gpu is in percent of one GPU (100 = 1 GPU, 50 = half) per instance: GPUs =
ceil(plan_gpu * inst_num / 100), and a job below one GPU keeps the share as gpu_fraction. plan_cpu
is percent of a core and plan_mem GB, both per instance. gpu_type MISC (or empty) means any GPU;
T4/P100/V100/V100M32 become a lower-case type constraint. Rows without a GPU or without both times
are skipped. There is no submission time: submit = start_time, duration = end_time - start_time.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from quanta.model.job import Trace
from quanta.workloads.readers._base import (MAX_WHOLE, Parser, Sample, build_trace, check_file,
                                            count_note, csv_rows, norm)

FORMAT = "pai"
DESCRIPTION = "Alibaba PAI 2020 pai_task_table (headerless or with header; plan_gpu in % of a GPU)"
# the file's column of each JobSpec field whose name differs (errors after reading name it)
FIELDS = {"job_id": "job_name", "submit_time": "start_time", "num_gpus": "plan_gpu",
          "duration_s": "end_time", "gpu_types": "gpu_type"}
TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")
JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
REQUIRED = ("job_name", "start_time", "end_time", "plan_gpu")
STATUSES = frozenset({"terminated", "failed", "running", "waiting", "interrupted"})


def sniff(s: Sample) -> bool:
    if set(REQUIRED) <= s.header:
        return True
    if "job_name" in s.header:
        return False
    f = [c.strip() for c in s.first]
    if len(f) == len(TASK_COLUMNS):
        return f[3].lower() in STATUSES and all(_number_or_empty(x) for x in f[4:6])
    if len(f) == len(JOB_COLUMNS):
        return f[3].lower() in STATUSES and all(_number_or_empty(x) for x in f[4:6])
    return False


def _number_or_empty(text: str) -> bool:
    try:
        float(text or 0)
        return True
    except ValueError:
        return False


def read(path: str | Path, *, max_jobs: int | None = None) -> Trace:
    path = check_file(path)
    p = Parser(path, FORMAT)
    rows: list[dict[str, Any]] = []
    statuses: list[str] = []
    no_gpu = no_time = 0
    for line, row in csv_rows(path):
        p.line = line
        if not p.index:
            if "job_name" in (norm(c) for c in row):
                p.header(row, REQUIRED, line)
                continue
            if len(row) == len(JOB_COLUMNS):
                raise p.error("this looks like pai_job_table, which has no GPU request (plan_gpu); "
                              "read pai_task_table, or join the two on job_name first")
            if len(row) != len(TASK_COLUMNS):
                raise p.error(f"a headerless PAI task table has {len(TASK_COLUMNS)} columns "
                              f"({','.join(TASK_COLUMNS)}), this line has {len(row)}")
            p.columns(TASK_COLUMNS)
        p.check_width(row)
        gpu_text = p.get(row, "plan_gpu")
        plan_gpu = p.number(gpu_text, "plan_gpu") if gpu_text else 0.0
        if plan_gpu <= 0:
            no_gpu += 1
            continue
        t_start, t_end = p.get(row, "start_time"), p.get(row, "end_time")
        if not (t_start and t_end):
            no_time += 1
            continue
        begin = p.time(t_start, "start_time", "start_time/end_time")
        end = p.time(t_end, "end_time", "start_time/end_time")
        if end < begin:
            raise p.error(f"end {t_end} is before start {t_start} (negative duration)",
                          field="end_time")
        inst_text = p.opt(row, "inst_num")
        inst = p.whole(inst_text, "inst_num", minimum=1) if inst_text else 1
        total = plan_gpu * inst / 100.0
        if total > MAX_WHOLE:
            raise p.error(f"plan_gpu {gpu_text} x inst_num {inst} / 100 is {total:.3g} GPUs, above "
                          f"the maximum {MAX_WHOLE:.0e}", field="plan_gpu")
        task = p.opt(row, "task_name")
        name = p.get(row, "job_name") or f"{FORMAT}-{len(rows):06d}"
        cpu, mem = p.opt(row, "plan_cpu"), p.opt(row, "plan_mem")
        gpu_type = p.opt(row, "gpu_type").lower()
        rows.append({
            "job_id": f"{name}/{task}" if task else name,
            "submit_time": begin,
            "num_gpus": max(1, math.ceil(total - 1e-9)),
            "gpu_fraction": total if total < 1 else 1.0,
            "duration_s": end - begin,
            "gpu_types": () if gpu_type in ("", "misc", "nan") else (gpu_type,),
            "cpus": p.number(cpu, "plan_cpu") * inst / 100.0 if cpu else 0.0,
            "mem_gb": p.number(mem, "plan_mem") * inst if mem else 0.0,
            "user": p.opt(row, "user"),
            "source_line": line,
        })
        statuses.append(p.opt(row, "status"))
    notes = [f"skipped {no_gpu} rows without a GPU and {no_time} without start and end times",
             "no submission time in PAI: submit = start_time, duration = end_time - start_time",
             "plan_gpu in % of one GPU: num_gpus = ceil(plan_gpu*inst_num/100), "
             "a share below one GPU kept as gpu_fraction"]
    if any(statuses):
        notes.append(count_note("status", statuses))
    return build_trace(path, FORMAT, rows, notes, max_jobs=max_jobs)
