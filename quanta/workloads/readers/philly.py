"""Microsoft Philly 2017 as shipped with Pollux/Sia: `timestamp,duration,num_gpus,gpu_time,cluster`.

`timestamp` is a naive local date-time (e.g. `2017-10-09 07:01:55`); submit times are wall-clock
seconds from the first kept submission (no time zone, so a DST change is not corrected for).
`duration` is the run time in seconds; `cluster` is the virtual-cluster hash, kept as the queue.
Rows are not sorted in the file; job ids are `philly-<row index>` in file order (0-based data row).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quanta.model.job import Trace
from quanta.workloads.readers._base import Sample, build_trace, start

FORMAT = "philly"
DESCRIPTION = "Philly 2017 via Pollux/Sia (timestamp,duration,num_gpus,gpu_time,cluster)"
# the file's column of each JobSpec field whose name differs (errors after reading name it)
FIELDS = {"submit_time": "timestamp", "duration_s": "duration"}
REQUIRED = ("timestamp", "duration", "num_gpus")


def sniff(s: Sample) -> bool:
    return set(REQUIRED) <= s.header


def read(path: str | Path, *, max_jobs: int | None = None) -> Trace:
    path, p, it = start(path, FORMAT, REQUIRED)
    i_ts, i_dur, i_gpu = (p.index[c] for c in REQUIRED)
    i_vc = p.index.get("cluster", -1)
    rows: list[dict[str, Any]] = []
    for line, row in it:
        p.line = line
        p.check_width(row)
        vc = row[i_vc].strip() if 0 <= i_vc < len(row) else ""
        rows.append({
            "job_id": len(rows),
            "submit_time": p.date_time(row[i_ts].strip(), "timestamp"),
            "num_gpus": p.whole(row[i_gpu].strip(), "num_gpus", minimum=1),
            "duration_s": p.number(row[i_dur].strip(), "duration"),
            "queue": vc or "default",
            "source_line": line,
        })
    width = max(6, len(str(len(rows) - 1)))
    for r in rows:
        r["job_id"] = f"{FORMAT}-{r['job_id']:0{width}d}"
    notes = [
        "timestamps are naive local time; submit times are seconds from the first kept submission",
        "queue = Philly virtual cluster (the `cluster` column)" if i_vc >= 0
        else "no `cluster` column: every job in the default queue",
    ]
    return build_trace(path, FORMAT, rows, notes, max_jobs=max_jobs)
