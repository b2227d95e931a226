"""Sia's per-round decision time at 64, 512 and 2,048 GPUs with proportional job counts.

    python bench/sia_round.py [--scales 1,8,32] [--jobs-per-64 32] [--repeat 3]

Cluster: Sia's 64-GPU mix (6x4 T4, 3x8 RTX 2080Ti, 2x8 A100) repeated `scale` times; active jobs:
`jobs-per-64` per 64 GPUs, drawn from the Pollux/Sia applications (goodput model), half of them
running on a random type with 1-8 GPUs. Times one `decide` after a warm-up round (the goodput
model's cache warm, as in a running simulation). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from quanta.core.jobtable import PENDING, JobTable
from quanta.core.snapshot import Snapshot
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.perf.catalog_model import CatalogModel
from quanta.perf.goodput_data import APPS
from quanta.placement import Occupancy
from quanta.policies import make_policy


def snapshot(scale: int, jobs_per_64: int, perf, seed: int = 0) -> Snapshot:
    rng = np.random.default_rng(seed)
    nodes = []
    for s in range(scale):
        nodes += [NodeSpec(f"aws{s}-{i}", "t4", 4) for i in range(6)]
        nodes += [NodeSpec(f"rtx{s}-{i}", "rtx", 8) for i in range(3)]
        nodes += [NodeSpec(f"dgx{s}-{i}", "a100", 8) for i in range(2)]
    cluster = Cluster(tuple(nodes))
    n = jobs_per_64 * scale
    specs = [JobSpec(f"j{i}", float(i), 1, APPS[int(rng.integers(len(APPS)))], total_steps=1e6)
             for i in range(n)]
    t = JobTable(specs, cluster, perf)
    occ = Occupancy(cluster)
    t.state[:] = PENDING
    now = 3600.0 + n
    for row in rng.permutation(n)[: n // 2].tolist():
        k = int(rng.integers(len(cluster.types)))
        got = occ.place(k, int(rng.choice([1, 2, 4, 8])))
        if got is not None:
            occ.assign(row, got[0])
            t.hold(row, float(row), "start", k, got[0], 1.0, 0.0)
    rows = np.arange(n)
    return Snapshot(now, cluster, perf, t.view(rows, now), occ.up_capacity(), occ.node_free.copy(),
                    occ.node_up.copy())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scales", default="1,8,32")
    ap.add_argument("--jobs-per-64", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    perf = CatalogModel()
    print("| GPUs | active jobs | decide (s), best of runs | candidates |\n|---|---|---|---|")
    for scale in [int(s) for s in a.scales.split(",")]:
        best, cands = np.inf, 0
        for r in range(a.repeat):
            snap = snapshot(scale, a.jobs_per_64, perf, seed=r)
            pol = make_policy("sia")
            pol.decide(snap)                                  # warm the model's cache
            snap = snapshot(scale, a.jobs_per_64, perf, seed=r)
            t0 = time.perf_counter()
            dec = pol.decide(snap)
            best = min(best, time.perf_counter() - t0)
            cands = len(pol._candidates(snap, dec.state["seen"], np.zeros(len(snap.jobs), dtype=bool)))
        print(f"| {64 * scale} | {a.jobs_per_64 * scale} | {best:.3f} | {cands} |", flush=True)


if __name__ == "__main__":
    main()
