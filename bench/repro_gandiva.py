"""Gandiva reproduction: time-slicing and packing against FIFO on an oversubscribed cluster.

    python bench/repro_gandiva.py [--cluster v100:8x4] [--rates 6,9,12] [--jobs 400] [--seeds 0,1,2]

Gavel-style workload (26 job types whose co-location slowdowns Gavel measured on V100) arriving
faster than a 32-V100 cluster can serve. Reports average JCT, allocation utilisation (GPUs
holding a job) and the useful work per busy GPU-second: reference GPU-seconds of the finished
jobs / busy GPU-seconds. That ratio is 1 for exclusive placement on the reference GPUs, below 1
for time-slicing (switching overhead) and above 1 when packing makes two jobs progress on one
GPU: the analogue of the GPU utilisation gain the Gandiva paper reports.
"""

from __future__ import annotations

import argparse

import numpy as np

from quanta.model.presets import resolve_cluster
from quanta.perf.table import TableModel
from quanta.policies import make_policy
from quanta.report.metrics import job_metrics, summary, timeline_integral
from quanta.sim import Simulator
from quanta.workloads.builder import build_workload
from quanta.workloads.synthetic import gavel_poisson

POLICIES = ("fifo", "gandiva:pack=false", "gandiva")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cluster", default="v100:8x4")
    ap.add_argument("--rates", default="6,9,12")
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--seeds", default="0,1,2")
    a = ap.parse_args()
    cluster = resolve_cluster(a.cluster)
    perf = TableModel()
    print("| jobs/hour | policy | avg JCT (h) | util (allocated) | useful work / busy GPU-s | shared GPU-h |")
    print("|---|---|---|---|---|---|")
    for rate in [float(r) for r in a.rates.split(",")]:
        acc: dict[str, list[tuple[float, float, float, float]]] = {p: [] for p in POLICIES}
        for seed in [int(s) for s in a.seeds.split(",")]:
            wl = build_workload(gavel_poisson(a.jobs, rate, seed=seed, max_scale_factor=4), perf,
                                seed=seed)
            for name in POLICIES:
                res = Simulator(wl.specs, cluster, make_policy(name), perf).run()
                s = summary(res)
                m = job_metrics(res)
                busy = timeline_integral(res, res.busy.sum(axis=1))
                useful = float(np.nansum(m.ideal * res.table.req))
                shared = timeline_integral(res, res.shared) / 3600
                acc[name].append((s["avg_jct_s"] / 3600, s["gpu_util"], useful / busy, shared))
        for name in POLICIES:
            v = np.mean(acc[name], axis=0)
            print(f"| {rate:g} | {name} | {v[0]:.2f} | {v[1]:.3f} | {v[2]:.3f} | {v[3]:.0f} |", flush=True)


if __name__ == "__main__":
    main()
