"""Alibaba openb pod list (FGD, ATC'23): `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,
pod_phase,creation_time,deletion_time,scheduled_time` (times in seconds).

Same filters as the project's normalized openb file: CPU-only pods (num_gpu 0) and never-scheduled
pods (no scheduled_time) are dropped, failed pods are kept. submit = creation_time, duration =
deletion_time - scheduled_time; a pod deleted at the trace end (the largest deletion_time) is
censored (still running, so its duration is a lower bound). gpu_fraction = gpu_milli/1000 for
1-GPU pods; gpu_spec `V100M16|V100M32` -> gpu_types ('v100m16', 'v100m32'); cpus = cpu_milli/1000;
mem_gb = memory_mib/1024; qos LS (latency-sensitive) and Guaranteed -> guaranteed=True.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quanta.model.job import Trace
from quanta.workloads.readers._base import GUARANTEED_QOS, Sample, build_trace, count_note, start

FORMAT = "openb"
DESCRIPTION = "Alibaba openb pod list (FGD ATC'23): GPU sharing, GPU-type constraints, QoS"
# the file's column of each JobSpec field whose name differs (errors after reading name it)
FIELDS = {"job_id": "name", "submit_time": "creation_time", "num_gpus": "num_gpu",
          "duration_s": "deletion_time", "gpu_types": "gpu_spec"}
REQUIRED = ("name", "num_gpu", "creation_time", "deletion_time", "scheduled_time")


def sniff(s: Sample) -> bool:
    return set(REQUIRED) <= s.header and "gpu_milli" in s.header


def read(path: str | Path, *, max_jobs: int | None = None) -> Trace:
    path, p, it = start(path, FORMAT, REQUIRED)
    rows: list[dict[str, Any]] = []
    ends: list[float] = []
    cpu_only = unscheduled = 0
    last_end = 0.0
    for line, row in it:
        p.line = line
        p.check_width(row)
        gpus = p.whole(p.get(row, "num_gpu"), "num_gpu")
        deleted = p.get(row, "deletion_time")
        end = p.number(deleted, "deletion_time") if deleted else 0.0
        last_end = max(last_end, end)
        if gpus == 0:
            cpu_only += 1
            continue
        sched = p.get(row, "scheduled_time")
        if not sched:
            unscheduled += 1
            continue
        start_t = p.number(sched, "scheduled_time")
        if not deleted:
            raise p.error("a scheduled pod needs a deletion time", field="deletion_time")
        if end < start_t:
            raise p.error(f"deletion {deleted} is before scheduling {sched} (negative duration)",
                          field="deletion_time")
        r: dict[str, Any] = {
            "job_id": p.get(row, "name") or f"{FORMAT}-{len(rows):06d}",
            "submit_time": p.number(p.get(row, "creation_time"), "creation_time"),
            "num_gpus": gpus,
            "duration_s": end - start_t,
            "source_line": line,
            "_phase": p.opt(row, "pod_phase"),
            "_qos": p.opt(row, "qos"),
        }
        milli = p.opt(row, "gpu_milli")
        if milli:                          # (read on every pod: 'abc' on a 2-GPU one was taken)
            m = p.number(milli, "gpu_milli")
            if not 0 < m <= 1000:
                raise p.error(f"{milli} is not in (0, 1000]", field="gpu_milli")
            if gpus == 1:                  # a share of one GPU; a multi-GPU pod holds them whole
                r["gpu_fraction"] = m / 1000.0
        spec = p.opt(row, "gpu_spec")
        if spec and spec.lower() != "nan":
            r["gpu_types"] = tuple(t.strip().lower() for t in spec.split("|") if t.strip())
        cpu, mem = p.opt(row, "cpu_milli"), p.opt(row, "memory_mib")
        r["cpus"] = p.number(cpu, "cpu_milli") / 1000.0 if cpu else 0.0
        r["mem_gb"] = p.number(mem, "memory_mib") / 1024.0 if mem else 0.0
        r["guaranteed"] = r["_qos"].lower() in GUARANTEED_QOS
        rows.append(r)
        ends.append(end)
    censored = sum(1 for e in ends if e >= last_end)
    phases = [r.pop("_phase") for r in rows]
    qos = [r.pop("_qos") for r in rows]
    notes = [f"dropped {cpu_only} CPU-only pods and {unscheduled} never-scheduled GPU pods",
             "duration_s = deletion_time - scheduled_time; submit = creation_time",
             f"{censored} pods censored (still running at the trace end, {last_end:.0f} s)",
             count_note("pod_phase", phases),
             count_note("qos", qos) + " (LS and Guaranteed -> guaranteed=True)"]
    return build_trace(path, FORMAT, rows, notes, max_jobs=max_jobs)
