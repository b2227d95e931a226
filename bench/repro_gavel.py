"""Gavel reproduction: heterogeneity-aware vs agnostic max-min fairness, and makespan vs FIFO.

    python bench/repro_gavel.py [--rates 1,2,3,4,5] [--seeds 0,1,2] [--jobs 500]

Set-up as in Gavel's continuous experiments: cluster gavel-108 (36 V100 + 36 P100 + 36 K80),
Poisson arrivals, job types uniform over Gavel's 26, durations from Gavel's distribution,
Philly-like GPU counts; average JCT over jobs 200-400 (the steady-state window Gavel's own
simulator was measured on here). Like Gavel's simulator, no checkpoint-restore cost per round
(restart delay 0). Makespan: 100 jobs all submitted at time 0, gavel-makespan vs gavel-fifo.
"""

from __future__ import annotations

import argparse

import numpy as np

from quanta.model.presets import resolve_cluster
from quanta.perf.table import TableModel
from quanta.policies import make_policy
from quanta.report.metrics import job_metrics, summary
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost
from quanta.workloads.builder import build_workload
from quanta.workloads.synthetic import gavel_poisson


def window_jct(res, lo: int, hi: int) -> float:
    m = job_metrics(res)
    idx = np.arange(lo, min(hi, len(m.jct)))
    return float(np.mean(m.jct[idx]))


def run(policy: str, specs, cluster, perf):
    return Simulator(specs, cluster, make_policy(policy), perf, restart=RestartCost(0.0)).run()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="1,2,3,4,5")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--jobs", type=int, default=500)
    a = ap.parse_args()
    cluster = resolve_cluster("gavel-108")
    perf = TableModel()
    print("## gavel-las vs gavel-las-agnostic (average JCT of jobs 200-400, hours)\n")
    print("| jobs/hour | seed | gavel-las | gavel-las-agnostic | agnostic / aware | gavel-las-packed |")
    print("|---|---|---|---|---|---|")
    ratios: dict[float, list[float]] = {}
    for rate in [float(r) for r in a.rates.split(",")]:
        for seed in [int(s) for s in a.seeds.split(",")]:
            wl = build_workload(gavel_poisson(a.jobs, rate, seed=seed), perf, seed=seed)
            aware = window_jct(run("gavel-las", wl.specs, cluster, perf), 200, 400)
            agn = window_jct(run("gavel-las-agnostic", wl.specs, cluster, perf), 200, 400)
            packed = window_jct(run("gavel-las-packed", wl.specs, cluster, perf), 200, 400)
            ratios.setdefault(rate, []).append(agn / aware)
            print(f"| {rate:g} | {seed} | {aware / 3600:.2f} | {agn / 3600:.2f} | {agn / aware:.2f}x "
                  f"| {packed / 3600:.2f} |", flush=True)
    print("\n| jobs/hour | mean ratio over seeds |\n|---|---|")
    for rate, rs in ratios.items():
        print(f"| {rate:g} | {np.mean(rs):.2f}x |")
    print("\n## makespan: 100 jobs submitted at once\n")
    print("| seed | gavel-makespan | gavel-fifo | fifo / makespan |\n|---|---|---|---|")
    for seed in [int(s) for s in a.seeds.split(",")]:
        wl = build_workload(gavel_poisson(100, 1e9, seed=seed), perf, seed=seed)
        ms = summary(run("gavel-makespan", wl.specs, cluster, perf))["makespan_s"]
        ff = summary(run("gavel-fifo", wl.specs, cluster, perf))["makespan_s"]
        print(f"| {seed} | {ms / 3600:.1f} h | {ff / 3600:.1f} h | {ff / ms:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
