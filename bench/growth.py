"""Simulation time against trace length, up to a million jobs: does it grow linearly?

    python bench/growth.py [--sizes 1000,10000,100000,1000000] [--policies las,gavel-las]
        [--rate 100] [--cluster v100:834x8,p100:833x8,k80:833x8] [--seed 0]
        [--jsonl FILE] [--plot PNG] [--plot-only]

Gavel-style synthetic jobs (`synthetic:RATE:N`: Poisson arrivals at --rate jobs/hour, seeded by
--seed; the load stays the same and only the trace gets longer), one process per (policy, size)
(fresh memory), the simulation alone timed (`run_simulations` without output files or plots).
The default cluster has 20,000 GPUs of three types (Gavel's V100, P100, K80). Prints wall time,
time per job, average JCT and peak resident memory per (policy, size); time per job staying flat
means linear growth. --jsonl appends each row to FILE (so that sizes run in separate invocations,
e.g. one per core, end up together); --plot draws time per job and peak memory against jobs for
every row of --jsonl (with --plot-only, without running anything). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CLUSTER = "v100:834x8,p100:833x8,k80:833x8"       # 20,000 GPUs

CHILD = """
import json, resource, sys, time
from quanta.runner import SimulationRequest, run_simulations
t0 = time.perf_counter()
rows, _, results = run_simulations(SimulationRequest(
    trace=sys.argv[1], cluster=sys.argv[2], policies=[sys.argv[3]], seed=int(sys.argv[4]),
    out=None, plots=False), keep_results=True)
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "avg_jct_h": rows[0]["avg_jct_s"] / 3600,
                  "finished": rows[0]["finished"], "gpu_util": rows[0]["gpu_util"],
                  "events": results[0].events, "decisions": results[0].decisions,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_one(policy: str, n: int, a: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, f"synthetic:{a.rate:g}:{n}", a.cluster,
                          policy, str(a.seed)], capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"policy": policy, "jobs": n, "error": tail[:300]}
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"policy": policy, "jobs": n, "rate": a.rate, "cluster": a.cluster, "seed": a.seed,
            **r, "process_s": time.perf_counter() - t0}


def plot(rows: list[dict], png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for pol in sorted({r["policy"] for r in rows}):
        pts = sorted((r["jobs"], r) for r in rows if r["policy"] == pol and "error" not in r)
        xs = [n for n, _ in pts]
        ax1.plot(xs, [1000 * r["wall_s"] / n for n, r in pts], marker="o", label=pol)
        ax2.plot(xs, [r["rss_mb"] for _, r in pts], marker="o", label=pol)
    first = rows[0]
    for ax, label in ((ax1, "simulation time per job (ms)"), (ax2, "peak RSS (MB)")):
        ax.set_xscale("log")
        ax.set_xlabel("jobs in the trace")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    ax1.set_ylim(bottom=0)
    ax2.set_yscale("log")
    fig.suptitle(f"synthetic Gavel-style jobs at {first['rate']:g} jobs/h on {first['cluster']}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--policies", default="las,gavel-las")
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--cluster", default=CLUSTER)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jsonl", type=Path, help="append each row to this file")
    ap.add_argument("--plot", type=Path, help="draw every row of --jsonl into this PNG")
    ap.add_argument("--plot-only", action="store_true", help="run nothing; only --plot")
    a = ap.parse_args()
    if a.plot_only:
        if not (a.plot and a.jsonl and a.jsonl.is_file()):
            raise SystemExit("growth.py: --plot-only needs --plot PNG and an existing --jsonl FILE")
    else:
        print(f"synthetic Gavel-style jobs at {a.rate:g} jobs/h (seed {a.seed}) on {a.cluster}")
        print("| policy | jobs | wall (s) | ms per job | events | avg JCT (h) | GPU util | "
              "peak RSS (MB) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for policy in a.policies.split(","):
            for n in [int(x) for x in a.sizes.split(",")]:
                r = run_one(policy, n, a)
                if "error" in r:
                    print(f"| {policy} | {n:,} | failed: {r['error']} | | | | | |", flush=True)
                    continue
                print(f"| {policy} | {n:,} | {r['wall_s']:.1f} | {1000 * r['wall_s'] / n:.3f} | "
                      f"{r['events']:,} | {r['avg_jct_h']:.2f} | {r['gpu_util']:.3f} | "
                      f"{r['rss_mb']:.0f} |", flush=True)
                if a.jsonl:
                    with a.jsonl.open("a") as f:
                        f.write(json.dumps(r) + "\n")
    if a.plot:
        if not a.jsonl:
            raise SystemExit("growth.py: --plot draws the rows of --jsonl FILE")
        rows = [json.loads(line) for line in a.jsonl.read_text().splitlines() if line.strip()]
        plot(rows, a.plot)
        print(f"plot: {a.plot}")


if __name__ == "__main__":
    main()
