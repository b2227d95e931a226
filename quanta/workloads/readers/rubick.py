"""Rubick's evaluation workloads: `name, submission_time, duration, application, num_gpus,
num_cpus, bandwidth, exec_plan, steps, is_sla`.

`duration` is the run time (s) at the requested GPUs and the user's plan on Rubick's A800 nodes,
so the reference GPU is a800. `steps` is kept out of the work (Rubick's iteration units); the work
comes from duration like every duration-carrying trace. is_sla = 1 marks a guaranteed job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quanta.model.job import Trace
from quanta.workloads.readers._base import Parser, Sample, build_trace, parse_rows

FORMAT = "rubick"
DESCRIPTION = ("Rubick workload (name,submission_time,duration,application,num_gpus,num_cpus,"
               "bandwidth,exec_plan,steps,is_sla)")
# the file's column of each JobSpec field whose name differs (errors after reading name it)
FIELDS = {"job_id": "name", "submit_time": "submission_time", "duration_s": "duration"}
REQUIRED = ("name", "submission_time", "duration", "application", "num_gpus")


def sniff(s: Sample) -> bool:
    return set(REQUIRED) <= s.header


def _row(p: Parser, row: list[str], i: int) -> dict[str, Any]:
    if not p.get(row, "application"):      # (a model was drawn for it, unsaid; Pollux's refuse)
        raise p.error("empty application", field="application")
    sla = p.opt(row, "is_sla")
    if sla and p.whole(sla, "is_sla") not in (0, 1):        # (2 ran as best-effort, unsaid)
        raise p.error(f"'{sla}' is not 0 or 1", field="is_sla")
    gpus = p.whole(p.get(row, "num_gpus"), "num_gpus", minimum=1)
    plan = p.opt(row, "exec_plan")
    if plan:
        from quanta.perf.plan import parse_plan
        try:
            ep = parse_plan(plan, gpus)
        except ValueError as err:     # (an unknown plan was kept, and the best plan run instead)
            raise p.error(str(err), field="exec_plan") from None
        if ep.num_gpus != gpus:      # (a 3D plan names its own size; it ran on num_gpus, unsaid)
            raise p.error(f"plan {plan} (PP {ep.pp} x TP {ep.tp} x DP {ep.dp}) uses {ep.num_gpus} "
                          f"GPUs, the job asks for {gpus}", field="exec_plan")
    return {
        "job_id": p.get(row, "name") or f"{FORMAT}-{i:06d}",
        "submit_time": p.number(p.get(row, "submission_time"), "submission_time"),
        "num_gpus": gpus,
        "duration_s": p.number(p.get(row, "duration"), "duration"),
        "job_type": p.get(row, "application"),
        "cpus": p.number(p.opt(row, "num_cpus") or "0", "num_cpus"),
        "plan": plan,
        "guaranteed": bool(sla) and p.whole(sla, "is_sla") == 1,
        "reference_gpu": "a800",
    }


def read(path: str | Path, *, max_jobs: int | None = None) -> Trace:
    path, rows = parse_rows(path, FORMAT, REQUIRED, _row)
    notes = ["rubick: durations are run times at the requested GPUs and plan on A800"]
    return build_trace(path, FORMAT, rows, notes, max_jobs=max_jobs)
