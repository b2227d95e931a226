"""Write a run's files: summary.csv, report.md, <policy>/jobs.csv, <policy>/timeline.csv, plots."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Sequence


from quanta.report.metrics import JOB_COLUMNS, SUMMARY_COLUMNS, job_metrics, job_rows, summary
from quanta.report.window import Window
from quanta.sim.engine import SimResult


def policy_dir_name(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)


def _fmt(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return f"{v:.6g}" if abs(v) < 1e6 else f"{v:.1f}"
    return str(v)


def write_run(out: Path, results: Sequence[SimResult], *, header: Sequence[str] = (),
              plots: bool = True, window: Window | None = None) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    rows = [summary(r, window) for r in results]
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(SUMMARY_COLUMNS)
        for s in rows:
            w.writerow([_fmt(s[c]) for c in SUMMARY_COLUMNS])
    for res in results:
        d = out / policy_dir_name(res.policy)
        d.mkdir(exist_ok=True)
        with open(d / "jobs.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(JOB_COLUMNS)
            for row in job_rows(res):
                w.writerow([_fmt(v) for v in row])
        with open(d / "timeline.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time_s"] + [f"busy_{t}" for t in res.cluster.types]
                       + ["shared_gpus", "pending", "running"])
            for i in range(len(res.times)):
                w.writerow([_fmt(float(res.times[i]))] + [int(x) for x in res.busy[i]]
                           + [int(res.shared[i]), int(res.pending[i]), int(res.running[i])])
        if res.event_log is not None:
            with open(d / "events.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["time_s", "job_id", "event", "gpu_type", "gpus", "nodes", "sharing"])
                specs, types = res.table.specs, res.cluster.types
                for when, row, what, ty, n, nodes, mode in res.event_log:
                    w.writerow([_fmt(float(when)), specs[row].job_id, what,
                                types[ty] if ty >= 0 else "", n, nodes, mode])
    (out / "report.md").write_text(markdown_report(rows, results, header))
    if plots:
        from quanta.report.plots import plot_jct_cdf, plot_utilisation
        plot_jct_cdf(results, out / "jct_cdf.png")
        plot_utilisation(results, out / "utilisation.png")
    return rows


def markdown_table(rows: Sequence[dict]) -> str:
    cols = ["policy", "finished", "avg_jct_s", "p50_jct_s", "p99_jct_s", "avg_queue_s", "makespan_s",
            "gpu_util", "ftf_rho_max", "jain", "preemptions", "gpu_hours"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for s in rows:
        cells = []
        for c in cols:
            v = s[c]
            if c.endswith("_s") and isinstance(v, float) and not math.isnan(v):
                cells.append(f"{v / 3600:.2f} h")
            elif isinstance(v, float):
                cells.append("" if math.isnan(v) else f"{v:.3g}")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_report(rows: Sequence[dict], results: Sequence[SimResult], header: Sequence[str]) -> str:
    parts = ["# Quanta simulation report", ""]
    parts += [f"- {h}" for h in header]
    parts += ["", markdown_table(rows), "", "Times in hours. Per-policy run statistics:", ""]
    for r in results:
        m = job_metrics(r)
        parts.append(f"- `{r.policy}`: {r.events} events, {r.decisions} decisions, "
                     f"simulated in {r.wall_s:.2f} s (policy {r.decide_s:.2f} s); "
                     f"{int((~m.finished).sum())} jobs not finished"
                     + ("; stopped: the remaining jobs could never be scheduled" if r.stalled else ""))
    return "\n".join(parts) + "\n"
