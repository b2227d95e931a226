"""Gavel job traces: tab-separated, no header, one job per line, in one of two layouts.

Old (7 columns, the msr/Philly replays): job_type, command, num_steps_arg, needs_data_dir,
total_steps, arrival_time, scale_factor.
New (10 columns, physical-cluster traces): job_type, command, working_directory, num_steps_arg,
needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time.
The layout is chosen per file from the first line's column count; every line must match it.

Work is `total_steps` in Gavel's steps of `job_type` (duration_s stays 0); num_gpus = scale_factor;
weight = priority_weight. Job ids are `gavel-<row index>` in file order.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from quanta.model.job import Trace
from quanta.workloads.readers._base import (MAX_NUMBER, MAX_WHOLE, Parser, Sample, build_trace,
                                           check_file, csv_rows)

FORMAT = "gavel"
DESCRIPTION = "Gavel .trace, tab-separated, old 7-column or new 10-column layout"
# the file's column of each JobSpec field whose name differs (errors after reading name it)
FIELDS = {"submit_time": "arrival_time", "num_gpus": "scale_factor"}
OLD = ("job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "arrival_time",
       "scale_factor")
NEW = ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir", "total_steps",
       "scale_factor", "priority_weight", "SLO", "arrival_time")
_BATCH = re.compile(r"\(batch size (\d+)\)")


def sniff(s: Sample) -> bool:
    """A `.trace` file of tab-separated fields, or a first line of 7 or 10 of them whose step
    count, arrival and scale factor are numbers (a tab-separated file with a header row of
    another format is not taken for Gavel's, to fail on its header's words)."""
    if s.suffix == ".trace" and s.tabs > 1:
        return True
    if s.tabs not in (len(OLD), len(NEW)):
        return False
    fields = s.line.split("\t")
    numbers = fields[4:7] if s.tabs == len(OLD) else fields[5:10]
    try:
        for x in numbers:
            float(x)
    except ValueError:
        return False
    return True


def read(path: str | Path, *, max_jobs: int | None = None) -> Trace:
    path = check_file(path)
    p = Parser(path, FORMAT)
    rows: list[dict[str, Any]] = []
    layout: tuple[str, ...] = ()
    slos = 0
    for line, row in csv_rows(path, "\t", quoting=csv.QUOTE_NONE):
        p.line = line
        if not layout:
            if len(row) not in (len(OLD), len(NEW)):
                raise p.error(f"a Gavel trace line has {len(OLD)} (old) or {len(NEW)} (new) "
                              f"tab-separated fields, this one has {len(row)}")
            layout = OLD if len(row) == len(OLD) else NEW
            p.columns(layout)
        if len(row) != len(layout):
            p.check_width(row)
            raise p.error(f"line has {len(row)} tab-separated fields, the file's layout has "
                          f"{len(layout)}")
        r = _plain_row(row, layout is NEW, len(rows), line)
        if r is not None:
            if "deadline" in r:
                slos += 1
            rows.append(r)
            continue
        # a field the fast path does not take as it is: read again field by field, which says
        # what is wrong (or takes it, e.g. a scale factor written "2.0")
        job_type = p.get(row, "job_type")
        if not job_type:
            raise p.error("empty job type", field="job_type")
        arrival = p.number(p.get(row, "arrival_time"), "arrival_time")
        m = _BATCH.search(job_type)
        r: dict[str, Any] = {
            "job_id": f"{FORMAT}-{len(rows):06d}",
            "submit_time": arrival,
            "num_gpus": p.whole(p.get(row, "scale_factor"), "scale_factor", minimum=1),
            "job_type": job_type,
            "total_steps": p.number(p.get(row, "total_steps"), "total_steps"),
            "batch_size": int(m.group(1)) if m else 0,
            "source_line": line,
        }
        if r["total_steps"] <= 0:
            raise p.error("total_steps must be positive", field="total_steps")
        if layout is NEW:
            r["weight"] = p.number(p.get(row, "priority_weight"), "priority_weight")
            if r["weight"] <= 0:
                raise p.error("priority_weight must be positive", field="priority_weight")
            # SLO: Gavel writes -1 for "no SLO"; every physical-cluster trace in its repository
            # does. We read a positive value as seconds after arrival: deadline = arrival + SLO.
            # A trace that means something else by it (e.g. a multiple of the job's run time)
            # must be converted before it is read.
            slo = p.number(p.get(row, "SLO"), "SLO", minimum=None)
            if slo > 0:
                r["deadline"] = arrival + slo
                slos += 1
        rows.append(r)
    notes = [f"{'new 10' if layout is NEW else 'old 7'}-column Gavel layout",
             "work is total_steps in Gavel's steps of job_type; duration_s is 0"]
    if slos:
        notes.append(f"{slos} jobs with an SLO: deadline = arrival + SLO seconds")
    return build_trace(path, FORMAT, rows, notes, max_jobs=max_jobs)


def _plain_row(row: list[str], new: bool, index: int, line: int) -> dict[str, Any] | None:
    """The job of a line whose fields are all well-formed as they stand (what `read` makes of
    them field by field, without its per-field calls: ~2x faster on a long trace), else None."""
    job_type = row[0].strip()
    try:
        if new:
            steps, sf, weight, slo, arrival = (float(row[5]), int(row[6]), float(row[7]),
                                               float(row[8]), float(row[9]))
        else:
            steps, arrival, sf = float(row[4]), float(row[5]), int(row[6])
    except ValueError:
        return None
    if not (job_type and 0.0 <= arrival <= MAX_NUMBER and 0.0 < steps <= MAX_NUMBER
            and 1 <= sf <= MAX_WHOLE):
        return None
    m = _BATCH.search(job_type)
    r: dict[str, Any] = {"job_id": f"{FORMAT}-{index:06d}", "submit_time": arrival,
                         "num_gpus": sf, "job_type": job_type, "total_steps": steps,
                         "batch_size": int(m.group(1)) if m else 0, "source_line": line}
    if new:
        if not (0.0 < weight <= MAX_NUMBER and abs(slo) <= MAX_NUMBER):   # (NaN: read again)
            return None
        r["weight"] = weight
        if slo > 0:
            r["deadline"] = arrival + slo
    return r
