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

`sjf-bsbf:accumulate=true` forms memory-short pairs with gradient accumulation. quanta/sim does not
charge Decision.plans yet, so those runs use PlanChargingSimulator below: a prototype of the engine
hook (remember each job's plan from its transition; price a job that accumulates, and its partner,
with the table model's accumulated rates).
"""

from __future__ import annotations

import argparse
import time

from quanta.core.mechanism import Kind
from quanta.model.presets import resolve_cluster
from quanta.perf.catalog_model import CatalogModel
from quanta.perf.table import table_for
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


class PlanChargingSimulator(Simulator):
    """PROTOTYPE of an engine hook (not in quanta/sim): charge gradient accumulation.

    A transition that places a job carries its plan; a job whose plan accumulates (ga_steps k > 1)
    runs at the table model's accumulated rate (micro-batch B/k: measured steps/s / k), and packed
    beside a partner both take the measured pair slowdown with the micro-batch type. The plan
    holds until the job is placed again or preempted (a former guest keeps it when its partner
    ends)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.micro: dict[int, tuple[int, str]] = {}   # driver row -> (k, micro-batch job type)

    def _apply(self, now, trs, *args, **kwargs):
        for tr in trs:
            if tr.kind in (Kind.START, Kind.MIGRATE, Kind.RESIZE, Kind.PREEMPT):
                k = int(getattr(tr.plan, "ga_steps", 1) or 1)
                spec = self.table.specs[tr.row]
                table = table_for(self.perf, spec)
                steps = dict(table.accumulation_steps(spec.job_type)) if table else {}
                if k > 1 and k in steps and tr.kind is not Kind.PREEMPT:
                    self.micro[tr.row] = (k, steps[k])
                else:
                    self.micro.pop(tr.row, None)
        return super()._apply(now, trs, *args, **kwargs)

    def _rate(self, row, gtype, count, nodes, cons, partner, mode, *rest):
        mine = self.micro.get(row)
        theirs = self.micro.get(partner) if partner >= 0 else None
        if mine is None and theirs is None:
            return super()._rate(row, gtype, count, nodes, cons, partner, mode, *rest)
        spec, gpu = self.table.specs[row], self.cluster.types[gtype]
        table = table_for(self.perf, spec)
        k, my_type = mine if mine else (1, spec.job_type)
        rate = table.accumulated_rate(spec, k, my_type, gpu, count, nodes, cons)
        if partner < 0:
            return rate
        other = theirs[1] if theirs else self.table.specs[partner].job_type
        return rate * table.pack_slowdown(my_type, other, gpu)


def run(trace: str, cluster: str, policies, seed: int, load_scale: float) -> list[dict]:
    c = resolve_cluster(cluster)
    perf = CatalogModel()
    wl = build_workload(load_any_trace(trace, "auto", seed), perf, seed=seed, load_scale=load_scale)
    rows = []
    for name in policies:
        t0 = time.perf_counter()
        sim = PlanChargingSimulator(wl.specs, c, make_policy(name), perf, restart=RestartCost(30.0))
        res = sim.run()
        s = summary(res)
        s["shared_gpu_h"] = float((res.shared[:-1] * (res.times[1:] - res.times[:-1])).sum()) / 3600
        s["accumulating"] = len(sim.micro)
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
