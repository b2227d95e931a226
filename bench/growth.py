"""Simulation time against trace length, up to a million jobs: does it grow linearly?

    python bench/growth.py [--sizes 10000,100000,1000000] [--policy fifo] [--rate 30]
        [--cluster v100:64x8]

Gavel-style synthetic jobs (Poisson arrivals at --rate jobs/hour: the load stays the same and only
the trace gets longer), one process per size (fresh memory), `quanta simulate` without plots.
Prints wall time, events, time per job and peak resident memory per size; time per job staying
flat means linear growth. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = """
import json, resource, sys, time
from quanta.runner import SimulationRequest, run_simulations
t0 = time.perf_counter()
rows, _ = run_simulations(SimulationRequest(trace=sys.argv[1], cluster=sys.argv[2],
                                            policies=[sys.argv[3]], out=None, plots=False))
wall = time.perf_counter() - t0
print(json.dumps({"wall": wall, "avg_jct_h": rows[0]["avg_jct_s"] / 3600,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--cluster", default="v100:64x8")
    a = ap.parse_args()
    print(f"policy {a.policy} on {a.cluster}, synthetic Gavel-style jobs at {a.rate:g} jobs/h")
    print("| jobs | wall (s) | ms per job | avg JCT (h) | peak RSS (MB) |")
    print("|---:|---:|---:|---:|---:|")
    for n in [int(x) for x in a.sizes.split(",")]:
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", CHILD, f"synthetic:{a.rate:g}:{n}", a.cluster,
                              a.policy], capture_output=True, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
        if out.returncode != 0:
            print(f"| {n} | failed: {out.stderr.strip().splitlines()[-1]} | | | |")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {n:,} | {r['wall']:.1f} | {1000 * r['wall'] / n:.3f} | {r['avg_jct_h']:.2f} | "
              f"{r['rss_mb']:.0f} |  (process {time.perf_counter() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
