"""SJF-BSBF reproduction: against SJF-FFS, plain SJF and the preemptive Tiresias (2D-LAS), on the
Philly sample and on the Alibaba openb GPU-sharing sample.

    python bench/repro_sjf_bsbf.py [--part philly,openb] [--seed 0]

Philly: the bundled sample (2,000 consecutive jobs of a busy 29.5 h window) on 64 and 128 V100s.
openb: the bundled sample (805 GPU pods over 120 days, 284 of them asking for a fraction of one
GPU). On the `openb` cluster preset (6,212 GPUs) no pod ever waits, so every policy gives the same
JCT; that row is printed as the check. The comparison proper runs the same pods on small clusters
of openb's most common GPU type (G2, 16 GB): 16 GPUs (about the sample's mean demand, heavy
load) and 24.
Job types are drawn from Gavel's catalog (seeded); its measured co-location pairs give the sharing
slowdowns and the memory fit; 30 s restore per resumption for the preemptive Tiresias.

`sjf-bsbf:accumulate=true` forms memory-short pairs with gradient accumulation; the engine charges
each job's plan (the guest's micro-batch speed / k, the pair slowdown of the micro-batch type for
both: quanta.perf.base.allocation_rate with both plans).
"""

from __future__ import annotations

import argparse
import time

from quanta.model.presets import resolve_cluster
from quanta.perf.catalog_model import CatalogModel
from quanta.policies import make_policy
from quanta.report.metrics import summary
from quanta.runner import load_any_trace
from quanta.sim.engine import RestartCost, Simulator
from quanta.workloads.builder import build_workload

POLICIES = ("sjf-bsbf", "sjf-bsbf:accumulate=true", "sjf-ffs", "sjf", "tiresias-las")
OPENB_POLICIES = ("sjf-bsbf", "sjf-bsbf:accumulate=true", "sjf-ffs",
                  "sjf-bsbf:fraction_cap=true", "sjf-ffs:fraction_cap=true", "tiresias-las")
# (trace, cluster, load scale)
PHILLY = [("philly", "v100:8x8", 1.0), ("philly", "v100:16x8", 1.0)]
OPENB = [("openb", "openb", 1.0), ("openb", "g2:2x8", 1.0), ("openb", "g2:3x8", 1.0)]


def run(trace: str, cluster: str, policies, seed: int, load_scale: float) -> list[dict]:
    c = resolve_cluster(cluster)
    perf = CatalogModel()
    wl = build_workload(load_any_trace(trace, "auto", seed), perf, seed=seed, load_scale=load_scale)
    rows = []
    for name in policies:
        t0 = time.perf_counter()
        res = Simulator(wl.specs, c, make_policy(name), perf, restart=RestartCost(30.0)).run()
        s = summary(res)
        s["shared_gpu_h"] = float((res.shared[:-1] * (res.times[1:] - res.times[:-1])).sum()) / 3600
        s["wall_s"] = time.perf_counter() - t0
        rows.append(s)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="philly,openb")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    cases = (PHILLY if "philly" in a.part else []) + (OPENB if "openb" in a.part else [])
    print("| trace | cluster | load x | policy | avg JCT (h) | p50 (h) | avg queue (h) | preemptions "
          "| shared GPU-h | BSBF lower by |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for trace, cluster, scale in cases:
        pols = OPENB_POLICIES if trace == "openb" else POLICIES
        rows = run(trace, cluster, pols, a.seed, scale)
        bsbf = rows[0]["avg_jct_s"]
        for r in rows:
            gain = "" if r["policy"] == "sjf-bsbf" else f"{100 * (1 - bsbf / r['avg_jct_s']):.0f}%"
            print(f"| {trace} | {cluster} | {scale:g} | {r['policy']} | {r['avg_jct_s'] / 3600:.2f} | "
                  f"{r['p50_jct_s'] / 3600:.2f} | {r['avg_queue_s'] / 3600:.2f} | {r['preemptions']} | "
                  f"{r['shared_gpu_h']:.0f} | {gain} |", flush=True)


if __name__ == "__main__":
    main()
