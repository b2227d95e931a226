"""Tiresias reproduction: 2D-LAS and 2D-Gittins against FIFO and SRTF on the Philly trace.

    python bench/repro_tiresias.py [--cluster v100:64x8] [--max-jobs N] [--policies ...]

The whole Philly trace (82,247 jobs; bundled in bench/data) replayed on 512 V100s with each
policy; 30 s checkpoint-restore per resumption. Prints average, median and p95 JCT, queueing
delay, preemptions, and the ratio of FIFO's average JCT to each policy's.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import tempfile
import time
from pathlib import Path

from quanta.model.presets import resolve_cluster
from quanta.perf.table import TableModel
from quanta.policies import make_policy
from quanta.report.metrics import summary
from quanta.sim import Simulator
from quanta.workloads.builder import build_workload
from quanta.workloads.formats import load_trace

DATA = Path(__file__).resolve().parent / "data" / "philly_normalized.csv.gz"


def philly():
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "philly.csv"
        with gzip.open(DATA, "rb") as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        return load_trace(path, "normalized")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cluster", default="v100:64x8")
    ap.add_argument("--max-jobs", type=int, default=None)
    ap.add_argument("--policies", default="fifo,srtf,las,tiresias-las,tiresias-gittins")
    a = ap.parse_args()
    perf = TableModel()
    wl = build_workload(philly(), perf, seed=0, max_jobs=a.max_jobs)
    cluster = resolve_cluster(a.cluster)
    rows = []
    for name in a.policies.split(","):
        t0 = time.perf_counter()
        res = Simulator(wl.specs, cluster, make_policy(name), perf).run()
        s = summary(res)
        rows.append((name, s, time.perf_counter() - t0))
        print(f"{name}: {s['avg_jct_s'] / 3600:.2f} h ({time.perf_counter() - t0:.0f} s)", flush=True)
    base = next((s["avg_jct_s"] for n, s, _ in rows if n == "fifo"), None)
    print(f"\nPhilly, {len(wl.specs)} jobs on {a.cluster}\n")
    print("| policy | avg JCT (h) | p50 (h) | p95 (h) | avg queue (h) | preemptions | FIFO / policy | sim time |")
    print("|---|---|---|---|---|---|---|---|")
    for name, s, wall in rows:
        ratio = f"{base / s['avg_jct_s']:.2f}x" if base else ""
        print(f"| {name} | {s['avg_jct_s'] / 3600:.2f} | {s['p50_jct_s'] / 3600:.2f} | "
              f"{s['p95_jct_s'] / 3600:.2f} | {s['avg_queue_s'] / 3600:.2f} | {s['preemptions']} | "
              f"{ratio} | {wall:.0f} s |")


if __name__ == "__main__":
    main()
