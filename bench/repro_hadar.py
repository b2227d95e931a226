"""Hadar reproduction: Hadar (with task-level heterogeneity, and without: `hadar:mix=false`) and
HadarE vs Gavel (max-min `gavel-las` and max-throughput `gavel-throughput`) on Gavel's
heterogeneous cluster.

    python bench/repro_hadar.py [--seeds 0,1,2] [--cluster gavel-108]

Workloads (Gavel's synthetic generator: job types uniform over Gavel's 26, its duration
distribution, Philly-like GPU counts; throughputs from Gavel's measured table):
- batch: N jobs submitted at once (the arrival times compressed to ~0): total time duration
  (TTD = makespan, the paper's headline metric), average JCT, cluster resource utilisation;
- online: Poisson arrivals at R jobs/hour.
CRU = busy GPU-seconds / (cluster GPUs x makespan) (the summary's gpu_util). 30 s restart per
resumption or type change; 360 s rounds for every policy. HadarE's copies average their models
every round over 10 GbE (gavel-108 gives no link speed), model sizes from quanta.perf.table.
"""

from __future__ import annotations

import argparse

from quanta.runner import SimulationRequest, run_simulations

POLICIES = ("hadar", "hadar:mix=false", "hadare", "gavel-las", "gavel-throughput")
WORKLOADS = [("batch", "synthetic:1:100", 1e9), ("online", "synthetic:3:300", 1.0)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--cluster", default="gavel-108")
    a = ap.parse_args()
    print("| workload | seed | policy | TTD / makespan (h) | avg JCT (h) | CRU | preemptions | "
          "Gavel-LAS TTD / TTD | CRU / Hadar CRU |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, trace, scale in WORKLOADS:
        for seed in (int(s) for s in a.seeds.split(",")):
            rows, _ = run_simulations(SimulationRequest(trace=trace, cluster=a.cluster, policies=POLICIES,
                                                        seed=seed, load_scale=scale, out=None,
                                                        plots=False))
            las = next(r for r in rows if r["policy"] == "gavel-las")["makespan_s"]
            cru = next(r for r in rows if r["policy"] == "hadar")["gpu_util"]
            for r in rows:
                hadar_like = r["policy"].startswith("hadar")
                ratio = f"{las / r['makespan_s']:.2f}x" if hadar_like else ""
                gain = f"{r['gpu_util'] / cru:.2f}x" if r["policy"] == "hadare" else ""
                print(f"| {name} | {seed} | {r['policy']} | {r['makespan_s'] / 3600:.1f} | "
                      f"{r['avg_jct_s'] / 3600:.2f} | {r['gpu_util']:.2f} | {r['preemptions']} | "
                      f"{ratio} | {gain} |", flush=True)


if __name__ == "__main__":
    main()
