"""SJF-BSBF reproduction: against SJF-FFS, plain SJF and the preemptive Tiresias on Philly.

    python bench/repro_sjf_bsbf.py [--clusters v100:8x8,v100:16x8] [--trace philly]

The bundled Philly sample (2,000 consecutive jobs of a busy 29.5 h window; job types drawn from
Gavel's catalog, whose measured co-location pairs give the sharing slowdowns and memory fit) on
64 and 128 V100s. Prints average / median JCT and queueing, preemptions, and BSBF's gain.
"""

from __future__ import annotations

import argparse

from quanta.runner import SimulationRequest, run_simulations

POLICIES = ("sjf-bsbf", "sjf-ffs", "sjf", "tiresias-las")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", default="v100:8x8,v100:16x8")
    ap.add_argument("--trace", default="philly")
    a = ap.parse_args()
    print("| cluster | policy | avg JCT (h) | p50 (h) | avg queue (h) | preemptions | BSBF lower by |")
    print("|---|---|---|---|---|---|---|")
    for cluster in a.clusters.split(","):
        rows, _ = run_simulations(SimulationRequest(trace=a.trace, cluster=cluster, policies=POLICIES,
                                                    out=None, plots=False))
        bsbf = rows[0]["avg_jct_s"]
        for r in rows:
            gain = "" if r["policy"] == "sjf-bsbf" else f"{100 * (1 - bsbf / r['avg_jct_s']):.0f}%"
            print(f"| {cluster} | {r['policy']} | {r['avg_jct_s'] / 3600:.2f} | {r['p50_jct_s'] / 3600:.2f} | "
                  f"{r['avg_queue_s'] / 3600:.2f} | {r['preemptions']} | {gain} |", flush=True)


if __name__ == "__main__":
    main()
