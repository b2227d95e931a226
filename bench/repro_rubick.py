"""Rubick reproduction: rubick vs sia vs a Synergy-like baseline on rubick-64 with Rubick's Base
workload (406 jobs of vit, roberta, bert, t5, gpt2, llama7, llama30 over 13.2 h, bundled as
`rubick-base`).

    python bench/repro_rubick.py [--seed 0] [--guaranteed 0.48] [--policies rubick,sia,synergy,fifo]
                                 [--first-start-charge] [--first-round-late] [--run-measured]
                                 [--artifact]
                                 [--sla-from PATH] [--reference PATH]
    python bench/repro_rubick.py --ablation        # each artifact behaviour alone, then all of them
    python bench/repro_rubick.py --round-time      # rubick's decide time at 64 / 512 / 2,048 GPUs

The Base workload has no guaranteed job (is_sla = 0 everywhere). So a fraction `--guaranteed`
(default 194/406) of Base's jobs is marked guaranteed by a seeded draw (numpy
default_rng([seed, 0x5A1])). Rubick's Multi-tenant workload (simulator/workloads/workload-mt.csv in
the artifact, not bundled) is Base with is_sla = 1 on 194 jobs and nothing else changed; `--sla-from
workload-mt.csv` takes the guaranteed jobs from it (by name) instead of the draw. Jobs whose model has
no feasible plan on 2 GPUs (LLaMA-30B)
are marked rigid (min = max = requested GPUs): Sia starts a job at 1 GPU and grows it at most 2x
per step, so without that it never runs them; Rubick and the Synergy-like baseline ignore it.
Restarts cost 260 s (Rubick's simulator), rounds are 60 s, the plan model is the one fitted on
Rubick's profiles (docs/perf-plan.md).

Where Rubick's artifact differs from its paper (quanta/policies/rubick.py, "Paper vs artifact"):
- `--first-start-charge` (R4): a job's first start pays the 260 s too, as every placement change
  does in the artifact's simulator (simulator/job.py:218-227): RestartCost(first_start_as_restart).
- `--first-round-late` (R6): the first round one interval (60 s) in, not at time 0: the artifact's
  simulator advances its jobs and its clock before each policy call (simulator.py:76-107,
  `Cluster.step`), so its first call is at 60 s and jobs that arrive at 0 wait for it
  (`Simulator(round_at_zero=False)`).
- `--run-measured`: jobs run at the artifact's measured iteration time where it has the exact
  (plan, placement) row (quanta/perf/plan_measured.py), the fitted model elsewhere, and every
  policy decides on the fitted model (quanta/policies/decide_on.py), as in the artifact's
  simulator. Each job's work is its trace duration at the measured rate of its request, so alone on
  its request it runs exactly its trace duration in both worlds. The SLA columns then compare
  with the measured throughput of the request. Printed below the table: how many rate queries of
  the run were answered from a measured row, and measured / fitted over those.
- `--artifact`: all of the artifact's behaviours at once: rubick with `ARTIFACT_PARAMS` (R1
  shrink_running=false, R2 scale_cap=node, R3 normalize=model8, SLA sla_admit=1.5, (a) fill_node=true:
  a job starts on one node's free GPUs, (b) release_3d=32: 3D jobs on >= 32 GPUs placed again each round),
  --first-start-charge, --first-round-late and --run-measured (the three world options apply to
  every policy listed).
- `--ablation`: rubick with the paper's defaults, then each artifact behaviour alone, then all.

SLA columns, over guaranteed jobs: "floor kept" = every rate the job ran at was >= the rate of its
requested GPUs, plan and CPUs; "2/3 kept" = >= 1/1.5 of it (what the artifact's sla_admit = 1.5
admits); "no slower" = its time from first start to end was <= its run time alone on its request
(restart delays count against it).

`--reference PATH` (default: quanta/data/reference/rubick/rubick_workload-base__morphling.json if
recorded): a run of Rubick's own simulator in the common format (bench/anchors/rubick.py), printed
under the table.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np

from quanta.model.presets import resolve_cluster
from quanta.perf.catalog_model import CatalogModel
from quanta.perf.plan_measured import MeasuredPlanPerf
from quanta.policies import make_policy
from quanta.policies.decide_on import DecideOn
from quanta.report.metrics import summary
from quanta.sim.engine import RestartCost, Simulator
from quanta.workloads.builder import build_workload
from quanta.workloads.formats import load_trace

RESTART_S = 260.0
ARTIFACT_PARAMS = ("shrink_running=false,scale_cap=node,normalize=model8,sla_admit=1.5,fill_node=true,"
                   "release_3d=32")


def with_params(base: str, given: str) -> str:
    """`base` (key=value,...) with the keys of `given` replacing its own (a policy spec names each
    key once): `--artifact --policies rubick:fill_node=false` is the artifact but for fill_node."""
    mine = dict(kv.split("=", 1) for kv in given.split(",") if kv)
    kept = [kv for kv in base.split(",") if kv and kv.split("=", 1)[0] not in mine]
    return ",".join(kept + [f"{k}={v}" for k, v in mine.items()])


REFERENCE = (Path(__file__).resolve().parents[1] / "quanta" / "data" / "reference" / "rubick"
             / "rubick_workload-base__morphling.json")
# --ablation: (label, rubick's parameters, first start charged, run at measured throughput,
# first round one interval in)
ABLATION = (
    ("paper, no scale-out cap (before)", "scale_cap=none", False, False, False),
    ("paper (default: evidence cap)", "", False, False, False),
    ("R1 shrink_running=false", "shrink_running=false", False, False, False),
    ("R2 scale_cap=node", "scale_cap=node", False, False, False),
    ("R3 normalize=model8", "normalize=model8", False, False, False),
    ("R4 --first-start-charge", "", True, False, False),
    ("R6 --first-round-late", "", False, False, True),
    ("SLA sla_admit=1.5", "sla_admit=1.5", False, False, False),
    ("--run-measured", "", False, True, False),
    ("(a) fill_node=true", "fill_node=true", False, False, False),
    ("(b) release_3d=32", "release_3d=32", False, False, False),
    ("--artifact without (a), (b) (before)",
     ("shrink_running=false,scale_cap=node,normalize=model8,sla_admit=1.5"), True, True, False),
    ("--artifact (all) before R6", ARTIFACT_PARAMS, True, True, False),
    ("--artifact (all)", ARTIFACT_PARAMS, True, True, True),
)


def read_sla_flags(path) -> dict[str, bool]:
    """name -> is_sla from a Rubick-format CSV (e.g. the artifact's workload-mt.csv)."""
    with open(path, newline="") as fh:
        return {r["name"]: r.get("is_sla", "0").strip() in ("1", "1.0", "True", "true")
                for r in csv.DictReader(fh)}


def workload(perf, seed: int, guaranteed: float, sla_from: str | None = None, world=None):
    """The jobs; `world` (default `perf`) turns each trace duration into steps at its request."""
    trace = load_trace("rubick-base", "auto")
    rng = np.random.default_rng([seed, 0x5A1])
    mark = rng.random(len(trace.jobs)) < guaranteed
    if sla_from:
        flags = read_sla_flags(sla_from)
        mark = np.array([flags.get(j.job_id, False) for j in trace.jobs])
    jobs = []
    for j, g in zip(trace.jobs, mark):
        small = perf.plan.best_plan(j.job_type, 2) if perf.plan.family(j.job_type) else None
        rigid = small is not None and small[0] is None
        jobs.append(j.with_(guaranteed=bool(g), min_gpus=j.num_gpus if rigid else 0,
                            max_gpus=j.num_gpus if rigid else 0))
    trace.jobs = jobs
    return build_workload(trace, world if world is not None else perf, seed=seed).specs


def sla_met(res) -> tuple[float, float, float, int]:
    t = res.table
    g = np.array([s.guaranteed for s in t.specs]) & ~np.isnan(t.end)
    floor = t.rates[:, 0]
    kept = t.min_rate[g] >= floor[g] * (1 - 1e-9)
    kept23 = t.min_rate[g] >= floor[g] / 1.5 * (1 - 1e-9)
    alone = t.total[g] / floor[g]
    no_slower = (t.end[g] - t.first_start[g]) <= alone * (1 + 1e-9)
    n = int(g.sum())
    if not n:
        return float("nan"), float("nan"), float("nan"), 0
    return float(kept.mean()), float(kept23.mean()), float(no_slower.mean()), n


def simulate(specs, name: str, perf, *, first_start: bool = False, measured: bool = False,
             first_round_late: bool = False):
    """One run on rubick-64: (result, the world's perf model)."""
    cluster = resolve_cluster("rubick-64")
    policy = make_policy(name)
    world = perf
    if measured:
        world = MeasuredPlanPerf(perf)
        policy = DecideOn(policy, perf)
    restart = RestartCost(RESTART_S, first_start_as_restart=first_start)
    sim = Simulator(specs, cluster, policy, world, restart=restart,
                    round_at_zero=not first_round_late)
    if measured:
        world.reset_counts()
    return sim.run(), world


HEADER = ("| {first} | avg JCT (h) | avg JCT guaranteed / best-effort (h) | makespan (h) | "
          "SLA floor kept | SLA 2/3 kept | SLA no slower | reconfigurations | preemptions | "
          "GPU util | policy ms / round | sim time |")


def row(label: str, res, specs, wall: float) -> str:
    s = summary(res)
    t = res.table
    jct = t.end - t.submit
    g = np.array([x.guaranteed for x in specs])
    kept, kept23, slower, _ = sla_met(res)
    jg = f"{np.nanmean(jct[g]) / 3600:.2f}" if g.any() else "-"
    jb = f"{np.nanmean(jct[~g]) / 3600:.2f}" if (~g).any() else "-"
    pct = lambda x: "-" if np.isnan(x) else f"{x:.0%}"  # noqa: E731
    return (f"| {label} | {s['avg_jct_s'] / 3600:.2f} | {jg} / {jb} | "
            f"{s['makespan_s'] / 3600:.2f} | {pct(kept)} | {pct(kept23)} | {pct(slower)} | "
            f"{int(t.reconfigs.sum())} | {int(t.preemptions.sum())} | {s['gpu_util']:.2f} | "
            f"{1000 * res.decide_s / max(res.decisions, 1):.1f} | {wall:.0f} s |")


MODELS = ("vit", "roberta", "bert", "t5", "gpt2", "llama7", "llama30")


def per_model(label: str, res) -> str:
    """| label | avg JCT (h) of each model's jobs |"""
    t = res.table
    jct = (t.end - t.submit) / 3600
    kind = np.array([s.job_type for s in t.specs])
    return f"| {label} | " + " | ".join(
        f"{np.nanmean(jct[kind == m]):.2f}" if (kind == m).any() else "-" for m in MODELS) + " |"


def measured_note(world) -> str:
    if not isinstance(world, MeasuredPlanPerf):
        return ""
    q = world.hits + world.misses
    r = np.array(world.ratios)
    if not q:
        return "rate queries: none"
    tail = (f"; measured / fitted over those: median {np.median(r):.2f}, mean "
            f"{np.mean(r):.2f}, mean |error| {np.mean(np.abs(r - 1)):.0%}" if r.size else "")
    return f"rate queries answered from a measured row: {world.hits} of {q} ({world.hits / q:.0%}){tail}"


def reference_line(path) -> str:
    p = Path(path)
    if not p.exists():
        return ""
    d = json.loads(p.read_text())
    return (f"{d['system']}'s own simulator ({d['policy']}, {d['workload']}): avg JCT "
            f"{d['avg_jct_s'] / 3600:.2f} h, makespan {d['makespan_s'] / 3600:.2f} h, {d['jobs']} "
            f"jobs; command: {d['command']}")


def round_time(specs, perf, jobs_per_64: int = 32) -> None:
    """One rubick decide on rubick-64 repeated 1, 8, 32 times, with 32 active jobs per 64 GPUs
    drawn (seeded) from the workload, half of them running at their request where they fit."""
    from quanta.core.jobtable import PENDING, JobTable
    from quanta.core.snapshot import Snapshot
    from quanta.model.cluster import Cluster
    from quanta.placement import Occupancy
    base = resolve_cluster("rubick-64")
    print("| GPUs | active jobs | running | decide (s), best of 4 |\n|---|---|---|---|")
    for scale in (1, 8, 32):
        cluster = Cluster(base.nodes * scale, name=f"rubick-{64 * scale}")
        rng = np.random.default_rng(scale)
        n = jobs_per_64 * scale
        pick = [specs[int(k)].with_(job_id=f"j{i}") for i, k in enumerate(rng.integers(len(specs), size=n))]
        best = np.inf
        for _ in range(4):
            t = JobTable(pick, cluster, perf)
            occ = Occupancy(cluster)
            t.state[:] = PENDING
            for row in rng.permutation(n)[: n // 2].tolist():
                s, k = pick[row], 0
                got = occ.place(k, s.num_gpus, s.cpus / s.num_gpus)
                if got is not None:
                    occ.assign(row, got[0], s.cpus)
                    t.apply_transitions(0.0, np.array([row]), np.array([0]), np.array([k]), [got[0]],
                                        np.array([t.rates[row, k]]), np.array([0.0]), plan=[None],
                                        cpus=np.array([s.cpus]), mem_gb=np.array([0.0]))
            snap = Snapshot(3600.0, cluster, perf, t.view(np.arange(n), 3600.0), occ.up_capacity(),
                            occ.node_free.copy(), occ.node_up.copy(), resources=occ.up_resources())
            pol = make_policy("rubick")
            pol.decide(snap)                         # warm: curves are memoised per job kind
            t0 = time.perf_counter()
            pol.decide(snap)
            best = min(best, time.perf_counter() - t0)
        print(f"| {64 * scale} | {n} | {len(occ.held)} | {best:.3f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--guaranteed", type=float, default=194 / 406)
    ap.add_argument("--sla-from", default=None,
                    help="take guaranteed jobs (is_sla) by name from this Rubick-format CSV")
    ap.add_argument("--policies", default="rubick,sia,synergy,synergy:tune=false,fifo")
    ap.add_argument("--first-start-charge", action="store_true",
                    help="R4: the first start pays the 260 s restart too (the artifact's simulator)")
    ap.add_argument("--first-round-late", action="store_true",
                    help="R6: the first round at 60 s, not at 0 (the artifact's simulator)")
    ap.add_argument("--run-measured", action="store_true",
                    help="run jobs at the artifact's measured times where it has them; decide on "
                         "the fitted model")
    ap.add_argument("--artifact", action="store_true",
                    help="all of the artifact's behaviours: rubick:" + ARTIFACT_PARAMS
                         + ", --first-start-charge, --first-round-late, --run-measured")
    ap.add_argument("--ablation", action="store_true",
                    help="rubick with the paper's defaults, each artifact behaviour alone, all")
    ap.add_argument("--reference", default=str(REFERENCE))
    ap.add_argument("--per-model", action="store_true",
                    help="also print each model's average JCT per row")
    ap.add_argument("--round-time", action="store_true")
    a = ap.parse_args()
    perf = CatalogModel()
    specs = workload(perf, a.seed, a.guaranteed, a.sla_from)
    if a.round_time:
        return round_time(specs, perf)
    measured_specs = None

    def jobs(measured: bool):
        nonlocal measured_specs
        if not measured:
            return specs
        if measured_specs is None:
            measured_specs = workload(perf, a.seed, a.guaranteed, a.sla_from, MeasuredPlanPerf(perf))
        return measured_specs

    src = f"is_sla from {a.sla_from}" if a.sla_from else f"seed {a.seed}"
    print(f"{len(specs)} jobs, {sum(s.guaranteed for s in specs)} guaranteed ({src})")
    notes, models = [], []
    if a.ablation:
        print(HEADER.format(first="rubick variant"))
        print("|---" * 12 + "|")
        for label, params, first, measured, late in ABLATION:
            t0 = time.perf_counter()
            sp = jobs(measured)
            res, world = simulate(sp, "rubick" + (":" + params if params else ""), perf,
                                  first_start=first, measured=measured,
                                  first_round_late=late)
            print(row(label, res, sp, time.perf_counter() - t0), flush=True)
            models.append(per_model(label, res))
            if measured:
                notes.append(f"{label}: {measured_note(world)}")
    else:
        first = a.first_start_charge or a.artifact
        late = a.first_round_late or a.artifact
        measured = a.run_measured or a.artifact
        sp = jobs(measured)
        print(HEADER.format(first="policy"))
        print("|---" * 12 + "|")
        for name in a.policies.split(","):
            if a.artifact and name.split(":")[0] == "rubick":
                name = "rubick:" + with_params(ARTIFACT_PARAMS, name.partition(":")[2])
            t0 = time.perf_counter()
            res, world = simulate(sp, name, perf, first_start=first, measured=measured,
                                  first_round_late=late)
            print(row(name, res, sp, time.perf_counter() - t0), flush=True)
            models.append(per_model(name, res))
            if measured:
                notes.append(f"{name}: {measured_note(world)}")
    if a.per_model:
        print("\n| run | " + " | ".join(MODELS) + " |\n" + "|---" * (len(MODELS) + 1) + "|")
        print("\n".join(models))
    for line in notes:
        print(line)
    ref = reference_line(a.reference)
    if ref:
        print(ref)


if __name__ == "__main__":
    main()
