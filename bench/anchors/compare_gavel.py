"""Quanta's Gavel policies beside Gavel's own simulator, on the recorded reference runs.

    python bench/anchors/compare_gavel.py [--ref quanta/data/reference/gavel] [--only PATTERN]
                                          [--modes quanta,gavel-sim,gavel-sim+world] [--per-job]

For every recorded run (<workload>__<policy>.csv/.json, from bench/anchors/gavel.py) it replays
the same trace (quanta/data/traces/gavel_gen/<workload>.trace) on the same cluster with Quanta's
policy of the same name (GAVEL_POLICY below) and prints, per run and mode, the average JCT beside
Gavel's and the per-job error (|Quanta JCT - Gavel JCT| / Gavel JCT: median and 90th percentile).

Modes (all with Quanta's engine unchanged, restart cost 0 as Gavel's simulator charges none):
- quanta: the policy with its defaults (Quanta's own mechanism).
- gavel-sim: the policy with quanta.policies.gavel.gavel_sim_params (Gavel's mechanism:
  allocations recomputed at most every 1,920 s, per-type queues V100 first, ...).
- gavel-sim+world: as gavel-sim, in the world of Gavel's simulator as `--world gavel-sim`
  (quanta/worlds/gavel_sim.py) models it: (1) rounds from the first arrival on, a round at an
  arrival when nothing runs (Gavel starts its first round at the first arrival and each next one
  when the last job of the round ends, scheduler.py:1281-1295; Quanta's default rounds are the
  multiples of 360 s); (2) the rate each job runs at rounded down to whole steps per round,
  floor(360 T) / 360, as Gavel runs int(T * 360) steps a round (scheduler.py:959-993); the perf
  model's rate stays T (quanta.worlds.gavel_sim.WholeSteps).

The cluster is one node per GPU type (36 GPUs each for 36:36:36): Gavel's simulator gives a job
its (job type, scale factor) throughput wherever its GPUs are (scheduler.py:959-993), so Quanta
must not charge a spread placement.
"""

from __future__ import annotations

import argparse
import fnmatch
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import RECORDED, read_run  # noqa: E402

TRACES = HERE.parents[1] / "quanta" / "data" / "traces" / "gavel_gen"
# Gavel's policy name -> (Quanta's policy, whether Gavel treats it as heterogeneity-agnostic)
from quanta.worlds.gavel_sim import GAVEL_POLICIES as GAVEL_POLICY  # noqa: E402
from quanta.worlds.gavel_sim import WholeSteps  # noqa: E402
from quanta.reproduce import seed_of  # noqa: E402

MODES = ("quanta", "gavel-sim", "gavel-sim+world")


def cluster_of(spec: str):
    from quanta.model import Cluster, NodeSpec
    counts = [int(x) for x in spec.split(":")]
    return Cluster(tuple(NodeSpec(t, t, c) for t, c in zip(("v100", "p100", "k80"), counts) if c))


SOLUTION: str | None = None   # --solution: overrides GAVEL_SIM's (e.g. ecos, in a venv with cvxpy)


def policy_spec(gavel_policy: str, mode: str, seed: int, revert: str = "") -> str:
    """Quanta's policy for a Gavel policy in a mode; `revert`: one gavel_sim parameter left at
    Quanta's default (the ablation)."""
    from quanta.policies.gavel import gavel_sim_params
    name, agnostic = GAVEL_POLICY[gavel_policy]
    if mode == "quanta":
        return name
    params = gavel_sim_params(agnostic, seed, name == "gavel-las-packed")
    if SOLUTION:
        params["solution"] = SOLUTION
    if revert:
        params.pop(revert)
    return name + ":" + ",".join(f"{k}={v}" for k, v in params.items())


def replay(trace: Path, cluster: str, spec: str, world: bool | str, restart_s: float = 0.0,
           preset: str | None = None) -> tuple[dict[str, float], float]:
    """{job id: JCT} from Quanta, and the wall time. `restart_s`, `preset` (a Quanta cluster
    preset instead of one node per type): for the ablation only."""
    from quanta.perf.table import TableModel
    from quanta.policies import make_policy
    from quanta.sim import Simulator
    from quanta.sim.engine import RestartCost
    from quanta.workloads.builder import build_workload
    from quanta.workloads.formats import load_trace
    perf = TableModel()
    specs = build_workload(load_trace(trace, "gavel"), perf).specs
    if world in (True, "steps"):
        perf = WholeSteps(perf)
    t0 = time.perf_counter()
    if preset:
        from quanta.model.presets import resolve_cluster
        c = resolve_cluster(preset)
    else:
        c = cluster_of(cluster)
    res = Simulator(specs, c, make_policy(spec), perf, restart=RestartCost(restart_s),
                    rounds_from_first_arrival=world in (True, "align")).run()
    t = res.table
    return {s.job_id: float(e - s.submit_time) for s, e in zip(t.specs, t.end)}, \
        time.perf_counter() - t0


def compare(ref_csv: Path, mode: str, traces: Path = TRACES, revert: str = "",
            world: bool | str | None = None, restart_s: float = 0.0,
            preset: str | None = None) -> dict:
    summary, jobs = read_run(ref_csv)
    trace = traces / f"{summary['workload']}.trace"
    if not trace.is_file():
        raise SystemExit(f"compare_gavel.py: no trace {trace} for {ref_csv.name}")
    spec = policy_spec(summary["policy"], mode, seed_of(summary), revert)
    q, wall = replay(trace, summary["cluster"], spec,
                     world=mode.endswith("+world") if world is None else world,
                     restart_s=restart_s, preset=preset)
    g = np.array([j.jct_s for j in jobs])
    qq = np.array([q.get(j.name, math.nan) for j in jobs])
    err = np.abs(qq - g) / g
    return {"workload": summary["workload"], "policy": summary["policy"], "mode": mode,
            "jobs": len(jobs), "gavel_h": g.mean() / 3600, "quanta_h": float(np.nanmean(qq)) / 3600,
            "diff": float(np.nanmean(qq) / g.mean() - 1), "med": float(np.nanmedian(err)),
            "p90": float(np.nanpercentile(err, 90)), "wall": wall, "spec": spec,
            "names": [j.name for j in jobs], "g": g, "q": qq}


def ablate(runs: list[Path], traces: Path) -> int:
    """What each of Gavel's settings is worth: the run's avg JCT diff and per-job median error
    with everything on, then with one setting undone."""
    from quanta.policies.gavel import GAVEL_SIM
    undo = [("(none)", "", True, 0.0, None)] + \
        [(f"policy {k}", k, True, 0.0, None) for k in GAVEL_SIM] + \
        [("world: rounds at multiples of 360 s", "", "steps", 0.0, None),
         ("world: no whole steps", "", "align", 0.0, None),
         ("world: 30 s restart per move (Quanta's default)", "", True, 30.0, None),
         ("world: gavel-108 preset (4 GPUs a server)", "", True, 0.0, "gavel-108")]
    print("| workload | Gavel policy | undone | diff | per-job median abs err |")
    print("|---|---|---|---|---|")
    for p in runs:
        for label, revert, world, restart_s, preset in undo:
            policy = p.stem.split("__")[-1]
            if revert == "fifo_stale_type" and policy != "fifo":
                continue
            r = compare(p, "gavel-sim+world", traces, revert, world, restart_s, preset)
            print(f"| {r['workload']} | {r['policy']} | {label} | {r['diff']:+.2%} | "
                  f"{r['med']:.2%} |", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default=str(RECORDED / "gavel"))
    ap.add_argument("--traces", default=str(TRACES), help="folder of the <workload>.trace files")
    ap.add_argument("--only", default="*", help="glob on <workload>__<policy>")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--per-job", action="store_true", help="print the 10 worst jobs of each run")
    ap.add_argument("--solution", choices=("vertex", "central", "ecos"),
                    help="gavel-sim modes: this allocation solution instead of GAVEL_SIM's "
                         "(ecos needs cvxpy and ecos, e.g. run with Gavel's venv python and "
                         "PYTHONPATH=. )")
    ap.add_argument("--ablate", action="store_true",
                    help="gavel-sim+world with each Gavel setting in turn undone (a policy "
                         "parameter back to Quanta's default, or one world approximation off)")
    a = ap.parse_args(argv)
    global SOLUTION
    SOLUTION = a.solution
    modes = [m for m in a.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad:
        print(f"compare_gavel.py: unknown mode {bad[0]} (known: {', '.join(MODES)})", file=sys.stderr)
        return 2
    runs = sorted(p for p in Path(a.ref).glob("*.csv") if fnmatch.fnmatch(p.stem, a.only))
    runs = [p for p in runs if p.stem.split("__")[-1] in GAVEL_POLICY]
    if not runs:
        print(f"compare_gavel.py: no recorded Gavel runs matching {a.only} in {a.ref}", file=sys.stderr)
        return 2
    if a.ablate:
        return ablate(runs, Path(a.traces))
    print("| workload | Gavel policy | mode | jobs | Gavel avg JCT (h) | Quanta avg JCT (h) | "
          "diff | per-job median abs err | p90 | Quanta wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for p in runs:
        for m in modes:
            r = compare(p, m, Path(a.traces))
            print(f"| {r['workload']} | {r['policy']} | {m} | {r['jobs']} | {r['gavel_h']:.3f} | "
                  f"{r['quanta_h']:.3f} | {r['diff']:+.2%} | {r['med']:.2%} | {r['p90']:.1%} | "
                  f"{r['wall']:.1f} |", flush=True)
            if a.per_job:
                err = np.abs(r["q"] - r["g"]) / r["g"]
                for i in np.argsort(-np.nan_to_num(err, nan=np.inf))[:10]:
                    print(f"    {r['names'][i]}: Gavel {r['g'][i]:.0f} s, Quanta {r['q'][i]:.0f} s "
                          f"({r['q'][i] / r['g'][i] - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
