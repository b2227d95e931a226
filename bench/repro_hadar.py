"""Hadar / HadarE reproduction and checks (results: docs/results.md, section Hadar).

    python bench/repro_hadar.py [--part loads,gavel,hadare,trace] [--seeds 0] [--policies 'P;P:k=v,k=v']

Parts:
- loads: 16 V100s (v100:4x4), Gavel's synthetic generator (job types uniform over Gavel's 26, its
  duration distribution, Philly-like GPU counts 1-8), 300 jobs, Poisson at 0.5, 1, 2 and 4 jobs/h:
  GPU utilisation, average JCT, preemptions and decision time of Hadar (default and the paper's
  whole-run reservations `hadar:horizon=full,starts=8`) against fifo, sjf-bsbf and gavel-las.
- gavel: Gavel's heterogeneous 108-GPU cluster (36 V100 + 36 P100 + 36 K80), the same generator:
  batch = 100 jobs submitted at once (total time duration, TTD = makespan, the paper's headline),
  online = 300 jobs at 3 jobs/hour; Hadar, Hadar without task-level heterogeneity, HadarE,
  gavel-las, gavel-throughput.
- hadare: HadarE vs Hadar on (a) 16 V100s as 4 nodes with two long 4-GPU jobs (two nodes idle)
  and (b) a small heterogeneous cluster like the paper's physical ones (nodes of one GPU type each:
  2 x 4 V100, 2 x 4 P100, 1 x 4 K80, 10 GbE) with a batch of 6 jobs: CRU and TTD. Copies per node
  need the core's Decision.copies (printed: per node or per type).
- trace: the Alibaba openb pods that ask for whole GPUs (3,630 of them; a 120-day trace) on 16
  V100s (v100:2x8): a long queue; wall time of the whole simulation per policy. Needs the shared
  data (--openb PATH).
CRU = busy GPU-seconds / (cluster GPUs x makespan) (the summary's gpu_util). 30 s restart per
resumption or type change; 360 s rounds for the round-based policies. HadarE's copies average their
models every round over the nodes' links (10 GbE where the cluster gives no speed).
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
import time

from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.model.presets import resolve_cluster
from quanta.perf.catalog_model import CatalogModel
from quanta.policies import make_policy
from quanta.report.metrics import summary
from quanta.runner import load_any_trace
from quanta.sim.engine import RestartCost, Simulator
from quanta.workloads.builder import build_workload

LOADS = ("hadar", "hadar:horizon=full,starts=8", "fifo", "sjf-bsbf", "gavel-las")
GAVEL = ("hadar", "hadar:mix=false", "hadare", "gavel-las", "gavel-throughput")
TRACE = ("hadar", "fifo", "sjf-bsbf")
OPENB = "/work/shared/data/traces/alibaba_openb_2023/normalized.csv"


def run(specs, cluster, policies, perf) -> list[dict]:
    rows = []
    for name in policies:
        t0 = time.perf_counter()
        res = Simulator(specs, cluster, make_policy(name), perf, restart=RestartCost(30.0)).run()
        s = summary(res)
        s["wall_s"] = time.perf_counter() - t0
        s["decide_ms"] = 1000 * res.decide_s / max(res.decisions, 1)
        s["policy"] = name
        s["restarts"] = int(res.table.restarts.sum())
        rows.append(s)
    return rows


def workload(trace: str, seed: int, load_scale: float = 1.0):
    perf = CatalogModel()
    wl = build_workload(load_any_trace(trace, "auto", seed), perf, seed=seed, load_scale=load_scale)
    return wl.specs, perf


def line(*cells) -> None:
    print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def part_loads(seeds, policies, rates) -> None:
    print("\n16 V100s (v100:4x4), 300 synthetic jobs\n")
    line("jobs/h", "seed", "policy", "GPU util", "avg JCT (h)", "p99 JCT (h)", "makespan (h)",
         "preemptions", "ms / decision")
    line(*["---"] * 9)
    for rate in rates:
        for seed in seeds:
            specs, perf = workload(f"synthetic:{rate}:300", seed)
            for r in run(specs, resolve_cluster("v100:4x4"), policies or LOADS, perf):
                line(rate, seed, r["policy"], f"{r['gpu_util']:.2f}", f"{r['avg_jct_s'] / 3600:.1f}",
                     f"{r['p99_jct_s'] / 3600:.0f}", f"{r['makespan_s'] / 3600:.0f}",
                     r["preemptions"], f"{r['decide_ms']:.2f}")


def part_gavel(seeds, policies) -> None:
    print("\ngavel-108 (36 V100 + 36 P100 + 36 K80)\n")
    line("workload", "seed", "policy", "TTD / makespan (h)", "avg JCT (h)", "CRU", "preemptions",
         "Gavel-LAS TTD / TTD", "CRU / Hadar CRU")
    line(*["---"] * 9)
    for name, trace, scale in (("batch", "synthetic:1:100", 1e9), ("online", "synthetic:3:300", 1.0)):
        for seed in seeds:
            specs, perf = workload(trace, seed, scale)
            rows = run(specs, resolve_cluster("gavel-108"), policies or GAVEL, perf)
            las = next((r["makespan_s"] for r in rows if r["policy"] == "gavel-las"), None)
            cru = next((r["gpu_util"] for r in rows if r["policy"] == "hadar"), None)
            for r in rows:
                hadar_like = r["policy"].startswith("hadar")
                ratio = f"{las / r['makespan_s']:.2f}x" if hadar_like and las else ""
                gain = f"{r['gpu_util'] / cru:.2f}x" if r["policy"].startswith("hadare") and cru else ""
                line(name, seed, r["policy"], f"{r['makespan_s'] / 3600:.1f}",
                     f"{r['avg_jct_s'] / 3600:.2f}", f"{r['gpu_util']:.2f}", r["preemptions"],
                     ratio, gain)


def part_hadare(policies) -> None:
    from quanta.policies import hadare
    per_node = getattr(hadare, "CORE_COPIES", False)
    print(f"\nHadarE copies: {'per node' if per_node else 'per GPU type (the core has no Decision.copies)'}\n")
    line("setup", "policy", "TTD (h)", "avg JCT (h)", "CRU", "restarts", "TTD / Hadar TTD",
         "CRU / Hadar CRU")
    line(*["---"] * 8)
    perf = CatalogModel()
    homo = Cluster(tuple(NodeSpec(f"v{i}", "v100", 4) for i in range(4)))
    two = [JobSpec("resnet50", 0.0, 4, "ResNet-50 (batch size 64)", total_steps=400_000.0),
           JobSpec("transformer", 0.0, 4, "Transformer (batch size 128)", total_steps=600_000.0)]
    lab = Cluster(tuple(NodeSpec(f"{t}{i}", t, 4, inter_bw_gbps=1.25)
                        for t, n in (("v100", 2), ("p100", 2), ("k80", 1)) for i in range(n)))
    # six of Gavel's models, 1-2 GPUs each, sized to 3-8 h on their GPUs of V100
    six = []
    for i, (model, gpus, hours) in enumerate((("ResNet-18 (batch size 64)", 1, 4), ("ResNet-50 (batch size 64)", 2, 6),
                                              ("Transformer (batch size 64)", 2, 5), ("LM (batch size 20)", 1, 3),
                                              ("A3C", 1, 8), ("CycleGAN", 1, 4))):
        spec = JobSpec(f"job{i}", 0.0, gpus, model, total_steps=1.0)
        six.append(spec.with_(total_steps=perf.rate(spec, "v100", gpus) * hours * 3600))
    for name, cl, jobs in (("16 V100 as 4 nodes, 2 jobs", homo, two),
                           ("5 nodes: 2x4 V100, 2x4 P100, 1x4 K80; 6 jobs", lab, six)):
        rows = run(jobs, cl, policies or ("hadar", "hadare"), perf)
        base = next(r for r in rows if r["policy"] == "hadar")
        for r in rows:
            line(name, r["policy"], f"{r['makespan_s'] / 3600:.2f}", f"{r['avg_jct_s'] / 3600:.2f}",
                 f"{r['gpu_util']:.2f}", r["restarts"], f"{r['makespan_s'] / base['makespan_s']:.2f}",
                 f"{r['gpu_util'] / base['gpu_util']:.2f}x")


def part_trace(openb: str, policies) -> None:
    if not os.path.exists(openb):
        print(f"\n(trace part skipped: {openb} not found)")
        return
    with open(openb, newline="") as f:
        rows = [r for r in csv.DictReader(f) if float(r.get("gpu_fraction") or 1) >= 1.0]
    path = os.path.join(tempfile.mkdtemp(prefix="hadar-openb-"), "openb_whole_gpus.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    specs, perf = workload(path, 0)
    print(f"\nopenb whole-GPU pods ({len(specs)} jobs) on 16 V100s (v100:2x8)\n")
    line("policy", "wall (s)", "decisions", "ms / decision", "GPU util", "avg JCT (h)",
         "p99 JCT (h)", "preemptions")
    line(*["---"] * 8)
    for name in policies or TRACE:
        t0 = time.perf_counter()
        res = Simulator(specs, resolve_cluster("v100:2x8"), make_policy(name), perf,
                        restart=RestartCost(30.0)).run()
        wall = time.perf_counter() - t0
        s = summary(res)
        line(name, f"{wall:.1f}", res.decisions, f"{1000 * res.decide_s / max(res.decisions, 1):.2f}",
             f"{s['gpu_util']:.2f}", f"{s['avg_jct_s'] / 3600:.1f}", f"{s['p99_jct_s'] / 3600:.0f}",
             s["preemptions"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="loads,gavel,hadare,trace")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--rates", default="0.5,1,2,4", help="jobs/hour of the loads part")
    ap.add_argument("--policies", default="",
                    help="override the policies of every part, separated by ';'")
    ap.add_argument("--openb", default=OPENB)
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    policies = tuple(p for p in a.policies.split(";") if p) if a.policies else None
    parts = a.part.split(",")
    if "loads" in parts:
        part_loads(seeds, policies, [float(r) if "." in r else int(r) for r in a.rates.split(",")])
    if "gavel" in parts:
        part_gavel(seeds, policies)
    if "hadare" in parts:
        part_hadare(policies)
    if "trace" in parts:
        part_trace(a.openb, policies)


if __name__ == "__main__":
    main()
