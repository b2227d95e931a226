"""Sweep wall time: one worker vs every local core vs a 2-node local Ray cluster.

    python bench/sweep_bench.py [--rates 1,2,3,4,5] [--seeds 0,1,2] [--jobs 80]
                                [--policies fifo,las,gavel-las,gavel-las-agnostic]
                                [--modes serial,pool,ray] [--workers N]

A Gavel-style sweep (Poisson arrivals at each rate, Gavel's job types and durations, the
108-GPU gavel-108 cluster, no restart cost as in Gavel's simulator, average JCT over the middle
half of the jobs by arrival): rates x seeds x policies cells, each a fresh run of the same sweep
into an empty folder. Checks that every mode wrote byte-identical tables. Prints a Markdown
table (docs/benchmarks.md); "sum of cell times" adds up each cell's own simulation time, which
grows when the cores are shared with other work.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from quanta.executors import default_workers  # noqa: E402
from quanta.report.window import Window  # noqa: E402
from quanta.sweeps import SweepSpec, expand, run_sweep, validate  # noqa: E402

FILES = ("results.csv", "results.parquet", "aggregate.csv", "aggregate.parquet", "jobs.parquet")


def cell_seconds(out: Path) -> float:
    """Simulation seconds summed over the cells (each cell's own wall time, in its worker)."""
    return sum(json.loads(p.read_text())["wall_s"] for p in (out / "cells").glob("*.json"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="1,2,3,4,5")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--jobs", type=int, default=80)
    ap.add_argument("--policies", default="fifo,las,gavel-las,gavel-las-agnostic")
    ap.add_argument("--modes", default="serial,pool,ray")
    ap.add_argument("--workers", type=int, default=0, help="pool workers (default: every core)")
    a = ap.parse_args()
    spec = SweepSpec(rates=tuple(float(r) for r in a.rates.split(",")), jobs=a.jobs,
                     clusters=("gavel-108",), policies=tuple(a.policies.split(",")),
                     seeds=tuple(int(s) for s in a.seeds.split(",")), restart_delay=0.0,
                     window=Window(a.jobs // 4, a.jobs - a.jobs // 4))
    cores = a.workers or default_workers()
    load0 = f"{os.getloadavg()[0]:.2f}"
    root = Path(tempfile.mkdtemp(prefix="sweep-bench-"))
    validate(spec)          # warm this process (imports, trace and model tables, code hash) first,
    expand(spec)            # so that the first mode timed does not pay for it alone
    rows = []
    for mode in a.modes.split(","):
        out = root / mode
        extra = ""
        if mode == "serial":
            label, t0 = "1 worker (in process)", time.perf_counter()
            res = run_sweep(spec, out, workers=1)
        elif mode == "pool":
            label, t0 = f"process pool, {cores} workers", time.perf_counter()
            res = run_sweep(spec, out, workers=cores)
        elif mode == "ray":
            import ray
            from ray.cluster_utils import Cluster
            per = max(1, cores // 2)
            t_up = time.perf_counter()
            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": per})
            cluster.add_node(num_cpus=per)
            cluster.wait_for_nodes()
            up = time.perf_counter() - t_up
            extra = f"; cluster start {up:.1f} s, not counted"
            label, t0 = f"Ray, 2 local nodes x {per} CPU", time.perf_counter()
            try:
                res = run_sweep(spec, out, ray=cluster.address)
            finally:
                if ray.is_initialized():
                    ray.shutdown()
                cluster.shutdown()
        else:
            sys.exit(f"unknown mode {mode}")
        wall = time.perf_counter() - t0
        rows.append((label, len(res.cells), wall, extra, out))
        print(f"{label}: {len(res.cells)} cells in {wall:.1f} s{extra}", flush=True)
    base = rows[0][2]
    print(f"\nload average before: {load0}, after: {os.getloadavg()[0]:.2f} ({cores} cores)")
    print("\n| runner | cells | wall | speed-up | sum of cell times |\n|---|---|---|---|---|")
    for label, n, wall, extra, out in rows:
        print(f"| {label} | {n} | {wall:.1f} s{extra} | {base / wall:.2f}x | "
              f"{cell_seconds(out):.1f} s |")
    ref = rows[0][4]
    for _label, _n, _wall, _extra, out in rows[1:]:
        for f in FILES:
            same = (ref / f).read_bytes() == (out / f).read_bytes()
            if not same:
                sys.exit(f"{out / f} differs from {ref / f}")
    print(f"\nevery mode wrote byte-identical tables ({', '.join(FILES)}); outputs in {root}")


if __name__ == "__main__":
    main()
