"""Write a run's files: summary.csv, report.md, <policy>/jobs.csv, <policy>/timeline.csv, plots."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Sequence

from quanta.core.jobtable import DROPPED, UNSCHEDULABLE
from quanta.report.metrics import (JOB_COLUMNS, JOB_FLOAT_COLUMNS, SUMMARY_COLUMNS, job_columns,
                                   summary, unfinished)
from quanta.report.window import Window
from quanta.sim.engine import SimResult


def policy_dir_name(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)


def _fmt_floats(values) -> list[str]:
    """Floats as the CSV files write them: 6 significant digits below a million, one decimal
    from there to 1e15, Python's shortest form beyond (one decimal of 1e300 wrote 300 digits),
    NaN as an empty field (one comprehension over a column, not a call per value)."""
    return ["" if v != v else f"{v:.6g}" if -1e6 < v < 1e6 else f"{v:.1f}" if -1e15 < v < 1e15
            else repr(float(v)) for v in values]


def _fmt(v) -> str:
    return _fmt_floats((v,))[0] if isinstance(v, float) else str(v)


FLOAT_AT = frozenset(JOB_COLUMNS.index(c) for c in JOB_FLOAT_COLUMNS)


def write_run(out: Path, results: Sequence[SimResult], *, header: Sequence[str] = (),
              notes: Sequence[str] = (), plots: bool = True, window: Window | None = None,
              fig_format: str = "png", title: str = "",
              written: list[Path] | None = None) -> list[dict]:
    """Write a run's files into `out`; the paths written are appended to `written`."""
    files: list[Path] = [] if written is None else written
    out.mkdir(parents=True, exist_ok=True)
    rows = [summary(r, window) for r in results]
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(SUMMARY_COLUMNS)
        for s in rows:
            w.writerow([_fmt(s[c]) for c in SUMMARY_COLUMNS])
    files.append(out / "summary.csv")
    for res in results:
        d = out / policy_dir_name(res.policy)
        d.mkdir(exist_ok=True)
        with open(d / "jobs.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(JOB_COLUMNS)
            # (ints and strings as csv writes them, str(); floats as _fmt: the same as _fmt of
            # every value, column by column)
            w.writerows(zip(*[_fmt_floats(c) if i in FLOAT_AT else c
                              for i, c in enumerate(job_columns(res))]))
        with open(d / "timeline.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time_s"] + [f"busy_{t}" for t in res.cluster.types]
                       + ["shared_gpus", "pending", "running"])
            w.writerows(zip(_fmt_floats(res.times.tolist()), *res.busy.T.tolist(),
                            res.shared.tolist(), res.pending.tolist(),
                            res.running.tolist()))     # (int64 counts)
        files += [d / "jobs.csv", d / "timeline.csv"]
        if res.event_log is not None:
            with open(d / "events.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["time_s", "job_id", "event", "gpu_type", "gpus", "nodes", "sharing"])
                specs, types = res.table.specs, res.cluster.types
                for when, row, what, ty, n, nodes, mode in res.event_log:
                    w.writerow([_fmt(float(when)), specs[row].job_id, what,
                                "+".join(types[k] for k in ty) if isinstance(ty, tuple) else
                                types[ty] if ty >= 0 else "", n, nodes, mode])
            files.append(d / "events.csv")
    figures: list[Path] = []
    if plots:
        from quanta.report.plots import run_figures
        figures = run_figures(results, out, fig_format, title=title)
        files += figures
    (out / "report.md").write_text(markdown_report(rows, results, header, notes,
                                                   [p.name for p in figures]))
    files.append(out / "report.md")
    return rows


# report.md's summary table: (summary key, header with its unit, scale, format)
REPORT_COLUMNS = [
    ("policy", "policy", None, ""), ("jobs", "jobs", None, ""), ("finished", "finished", None, ""),
    ("avg_jct_s", "avg JCT (h)", 3600.0, ".2f"), ("p50_jct_s", "p50 JCT (h)", 3600.0, ".2f"),
    ("p95_jct_s", "p95 JCT (h)", 3600.0, ".2f"), ("p99_jct_s", "p99 JCT (h)", 3600.0, ".2f"),
    ("avg_queue_s", "avg queue (h)", 3600.0, ".2f"), ("makespan_s", "makespan (h)", 3600.0, ".2f"),
    ("gpu_util", "GPU util", 1.0, ".3f"), ("ftf_rho_max", "max FTF ρ", 1.0, ".3g"),
    ("ftf_unfair_frac", "unfair (ρ > 1)", 1.0, ".3f"), ("jain", "Jain (1/ρ)", 1.0, ".3f"),
    ("preemptions", "preemptions", None, ""), ("gpu_hours", "GPU-hours", 1.0, ".1f"),
]


def markdown_table(rows: Sequence[dict]) -> str:
    lines = ["| " + " | ".join(h for _k, h, _s, _f in REPORT_COLUMNS) + " |",
             "|" + "".join("---|" if s is None and k == "policy" else "---:|"
                           for k, _h, s, _f in REPORT_COLUMNS)]
    for r in rows:
        cells = []
        for key, _h, scale, fmt in REPORT_COLUMNS:
            v = r[key]
            if scale is None:
                cells.append(str(v))
            elif isinstance(v, float) and math.isnan(v):
                cells.append("-")
            else:
                cells.append(f"{v / scale:{fmt}}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_report(rows: Sequence[dict], results: Sequence[SimResult], header: Sequence[str],
                    notes: Sequence[str] = (), figures: Sequence[str] = ()) -> str:
    parts = ["# Quanta simulation report", ""]
    parts += [f"- {h}" for h in header[:3]]
    parts += ["", markdown_table(rows),
              "Times in hours (h); the wall times below in seconds (s). JCT = finish - submit; "
              "queue = time waiting without GPUs; GPU util = busy GPU-time / (GPUs x makespan); "
              "FTF ρ = JCT / JCT on a 1/N share of the cluster (finish-time fairness), unfair = "
              "fraction of jobs with ρ > 1; Jain = Jain's index of 1/ρ (1 = equal). "
              "Definitions: docs/metrics.md.", "", "## Notes", ""]
    parts += [f"- {n}" for n in list(header[3:]) + list(notes)] or ["- none"]
    parts += ["", "## Runs", ""]
    for r in results:
        st = r.table.state
        over = [f"{n} {name}" for code, name in ((UNSCHEDULABLE, "unschedulable"), (DROPPED, "dropped"))
                if (n := int((st == code).sum()))]
        left = int(unfinished(st).sum())     # (as the cut's note counts them)
        parts.append(f"- `{r.policy}`: {r.events} events, {r.decisions} decisions, "
                     f"simulated in {r.wall_s:.2f} s (policy {r.decide_s:.2f} s); "
                     f"{left} jobs not finished" + "".join(f", {o}" for o in over)
                     + ("; stopped: nothing ran, nothing was left to arrive, and the policy "
                        "started none of the jobs still waiting" if r.stalled else ""))
    if figures:
        parts += ["", "## Figures", ""] + [f"- [{f}]({f})" for f in figures]
    return "\n".join(parts) + "\n"
