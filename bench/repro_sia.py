"""Sia reproduction: sia vs pollux vs gavel-throughput on the Pollux/Sia workloads on sia-64.

    python bench/repro_sia.py [--traces sia-philly-1,sia-philly-2,sia-saturn-1] [--world quanta|sia-sim]
        [--policies sia,pollux,gavel-throughput]

Sia's default cluster (6x4 T4, 3x8 RTX 2080Ti, 2x8 A100), 160-job workloads from Sia's
artifact, jobs' work = their application's steps to the target metric (validation profiles),
goodput from the fitted Pollux/Sia model. Prints average and p99 JCT, makespan, GPU-hours and
simulation time per policy.
"""

from __future__ import annotations

import argparse
import time

from quanta.runner import SimulationRequest, run_simulations

POLICIES = ("sia", "pollux", "gavel-throughput")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", default="sia-philly-1,sia-philly-2,sia-saturn-1")
    ap.add_argument("--world", default="quanta", help="quanta (Quanta's own) or sia-sim (Sia's simulator)")
    ap.add_argument("--policies", default=",".join(POLICIES))
    a = ap.parse_args()
    print("| workload | policy | avg JCT (h) | p99 JCT (h) | makespan (h) | GPU-hours | sim time |")
    print("|---|---|---|---|---|---|---|")
    for trace in a.traces.split(","):
        for policy in a.policies.split(","):
            t0 = time.perf_counter()
            rows, _ = run_simulations(SimulationRequest(trace=trace, cluster="sia-64", policies=[policy],
                                                        out=None, plots=False, world=a.world))
            r = rows[0]
            print(f"| {trace} | {policy} | {r['avg_jct_s'] / 3600:.2f} | {r['p99_jct_s'] / 3600:.2f} | "
                  f"{r['makespan_s'] / 3600:.1f} | {r['gpu_hours']:.0f} | {time.perf_counter() - t0:.0f} s |",
                  flush=True)


if __name__ == "__main__":
    main()
