"""Tiresias reproduction, two modes.

    python bench/repro_tiresias.py --reference [--runs GLOB] [--world count|replay|nodes|quanta]
                                   [--variant quanta|authors] [--extra K=V,...] [--restart-delay S]
                                   [--per-job]
    python bench/repro_tiresias.py [--cluster v100:64x8] [--max-jobs N] [--policies ...]

--reference: Quanta's tiresias-las / tiresias-gittins on every run of Tiresias' own simulator
recorded in quanta/data/reference/tiresias/ (bench/anchors/tiresias.py; see
bench/anchors/tiresias.md), same trace and GPU count, printed beside the reference: average JCT, its
difference, per-job JCT error (median, max, share of jobs that match to the second) and
preemptions. The authors' schedules map to Quanta's policies as
    dlas-gpu -> tiresias-las, dlas-gpu-N -> tiresias-las:promote_knob=N,
    dlas-gpu-gittins -> tiresias-gittins,
    gittins -> tiresias-gittins (not the same algorithm: see tiresias.md; shown for the record).
--variant authors adds the two reference quirks that are the policy's (authors_timing=true, and
authors_index=true for Gittins); --variant quanta (default) runs Quanta's defaults; --extra appends
more policy parameters to every run (e.g. keep_running=false, to measure one setting's effect).
--world is what is not the policy's: `count` = the authors' simulator's world (one pool of GPUs,
no node boundaries, no placement slowdown, no restart cost: run on v100:1x<GPUs> with
--restart-delay 0); `nodes` = Quanta's node topology (v100:<nodes>x<GPUs per node>) without
restart cost; `replay` = the topology with the authors' world put back by hand (every placement at
the consolidated rate, `pack_limit=0`, no restart cost: a sketch of a `tiresias-sim` world);
`quanta` = Quanta's default world (the topology and its 30 s restart).
--restart-delay overrides the world's restart cost.

Without --reference: 2D-LAS and 2D-Gittins against FIFO and SRTF on the whole Philly trace (82,247
jobs; bundled in bench/data) on 512 V100s, 30 s checkpoint-restore per resumption: average, median
and p95 JCT, queueing delay, preemptions, and the ratio of FIFO's average JCT to each policy's.
"""

from __future__ import annotations

import argparse
import gzip
import re
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from quanta.model.presets import resolve_cluster
from quanta.paths import TRACES_DIR
from quanta.perf.catalog_model import CatalogModel
from quanta.perf.table import TableModel
from quanta.policies import make_policy
from quanta.report.metrics import summary
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost
from quanta.workloads.builder import build_workload
from quanta.workloads.formats import load_trace
from quanta.worlds import PlacementFree

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "philly_normalized.csv.gz"
sys.path.insert(0, str(HERE / "anchors"))
from common import RECORDED, read_run  # noqa: E402

# the authors' trace files, as bundled in quanta/data/traces
TRACE_FILES = {"60_job.csv": "tiresias_60_job.csv", "tf_job.csv": "tiresias_tf_job.csv"}


def quanta_policy(schedule: str, variant: str, extra: str = "") -> str | None:
    gittins = schedule in ("dlas-gpu-gittins", "gittins")
    if gittins:
        name, params = "tiresias-gittins", []
    elif schedule == "dlas-gpu":
        name, params = "tiresias-las", []
    elif m := re.fullmatch(r"dlas-gpu-(\d+)", schedule):
        knob = {"05": "0.5"}.get(m.group(1), m.group(1))
        name, params = "tiresias-las", [f"promote_knob={knob}"]
    else:
        return None
    if variant == "authors":
        params += ["authors_timing=true"] + (["authors_index=true"] if gittins else [])
    params += [x for x in extra.split(",") if x]
    return name + (":" + ",".join(params) if params else "")


def trace_of(run: dict) -> Path:
    """The trace a recorded run used (its --trace), as Quanta has it."""
    words = shlex.split(run["command"].split("#", 1)[0])
    name = words[words.index("--trace") + 1]
    base = Path(name).name
    for cand in (TRACES_DIR / TRACE_FILES.get(base, base), HERE.parent / name):
        if cand.is_file():
            return cand
    raise SystemExit(f"repro_tiresias.py: no trace {name} for {run['workload']} (looked in {TRACES_DIR})")


def run_quanta(trace: Path, policy: str, world: str, dims: tuple[int, int, int],
               restart: float | None = None):
    s, n, g = dims
    cluster = f"v100:1x{s * n * g}" if world == "count" else f"v100:{s * n}x{g}"
    if restart is None:
        restart = 30.0 if world == "quanta" else 0.0
    perf = PlacementFree(CatalogModel()) if world == "replay" else CatalogModel()
    if world == "replay":
        policy += ("," if ":" in policy else ":") + "pack_limit=0"
    wl = build_workload(load_trace(trace, "tiresias"), perf, seed=0)
    res = Simulator(wl.specs, resolve_cluster(cluster), make_policy(policy), perf,
                    restart=RestartCost(restart)).run()
    t = res.table
    by_id = {spec.job_id: i for i, spec in enumerate(wl.specs)}
    return t, by_id, cluster, restart


def reference_mode(a: argparse.Namespace) -> None:
    paths = sorted(RECORDED.joinpath("tiresias").glob(a.runs + ".json"))
    if not paths:
        raise SystemExit(f"repro_tiresias.py: no recorded runs match {a.runs} in {RECORDED / 'tiresias'}")
    print(f"world {a.world}, variant {a.variant}"
          + (f", extra {a.extra}" if a.extra else "")
          + (f", restart delay {a.restart_delay:g} s" if a.restart_delay is not None else "") + "\n")
    print("| workload | reference schedule | Quanta policy | ref avg JCT (s) | Quanta (s) | diff | "
          "per-job err median / max | jobs exact | preemptions ref / Quanta |")
    print("|---|---|---|---|---|---|---|---|---|")
    diffs = []
    for jp in paths:
        summ, ref = read_run(jp.with_suffix(".csv"))
        schedule, scheme = summ["policy"].rsplit("_", 1)
        pol = quanta_policy(schedule, a.variant, a.extra)
        if pol is None:
            continue
        dims = tuple(int(x) for x in re.search(r"(\d+)x(\d+)x(\d+)$", summ["workload"]).groups())
        t, by_id, _, _ = run_quanta(trace_of(summ), pol, a.world, dims, a.restart_delay)
        rows = [by_id[j.job_id] for j in ref]
        q = t.end[rows] - t.submit[rows]
        r = np.array([j.jct_s for j in ref])
        err = np.abs(q - r) / r
        pre_ref = re.search(r"preemptions (\d+)", " ".join(summ["notes"]))
        d = q.mean() / r.mean() - 1
        if schedule != "gittins":
            diffs.append(abs(d))
        print(f"| {summ['workload']} | {schedule} ({scheme}) | `{pol}` | {r.mean():.1f} | {q.mean():.1f} | "
              f"{100 * d:+.2f}% | {100 * np.median(err):.1f}% / {100 * err.max():.1f}% | "
              f"{100 * np.mean(err < 1e-9):.0f}% | {pre_ref.group(1) if pre_ref else '?'} / "
              f"{int(t.preemptions[rows].sum())} |", flush=True)
        if a.per_job:
            for j, i in zip(ref, rows):
                print(f"    {j.job_id:>6} {j.num_gpus:>2} GPUs  submit {j.submit_s:8.0f}  ref start "
                      f"{j.start_s:8.0f} end {j.end_s:8.0f}  Quanta start {t.first_start[i]:10.1f} "
                      f"end {t.end[i]:10.1f}  preemptions {t.preemptions[i]}")
    if diffs:
        print(f"\n{len(diffs)} runs (gittins left out): |avg JCT diff| max {100 * max(diffs):.2f}%, "
              f"mean {100 * float(np.mean(diffs)):.2f}%; within 5%: {sum(x <= 0.05 for x in diffs)}")


def philly():
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "philly.csv"
        with gzip.open(DATA, "rb") as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        return load_trace(path, "normalized")


def philly_mode(a: argparse.Namespace) -> None:
    perf = TableModel()
    wl = build_workload(philly(), perf, seed=0, max_jobs=a.max_jobs)
    cluster = resolve_cluster(a.cluster)
    rows = []
    for name in a.policies.split(","):
        t0 = time.perf_counter()
        res = Simulator(wl.specs, cluster, make_policy(name), perf).run()
        s = summary(res)
        rows.append((name, s, time.perf_counter() - t0))
        print(f"{name}: {s['avg_jct_s'] / 3600:.2f} h ({time.perf_counter() - t0:.0f} s)", flush=True)
    base = next((s["avg_jct_s"] for n, s, _ in rows if n == "fifo"), None)
    print(f"\nPhilly, {len(wl.specs)} jobs on {a.cluster}\n")
    print("| policy | avg JCT (h) | p50 (h) | p95 (h) | avg queue (h) | preemptions | FIFO / policy | "
          "sim time |")
    print("|---|---|---|---|---|---|---|---|")
    for name, s, wall in rows:
        ratio = f"{base / s['avg_jct_s']:.2f}x" if base else ""
        print(f"| {name} | {s['avg_jct_s'] / 3600:.2f} | {s['p50_jct_s'] / 3600:.2f} | "
              f"{s['p95_jct_s'] / 3600:.2f} | {s['avg_queue_s'] / 3600:.2f} | {s['preemptions']} | "
              f"{ratio} | {wall:.0f} s |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", action="store_true", help="compare with Tiresias' own simulator")
    ap.add_argument("--runs", default="*_count",
                    help="recorded runs (glob on the file stem, default *_count)")
    ap.add_argument("--world", choices=("count", "replay", "nodes", "quanta"), default="count")
    ap.add_argument("--variant", choices=("quanta", "authors"), default="quanta")
    ap.add_argument("--extra", default="", help="policy parameters added to every run, k=v,k=v")
    ap.add_argument("--restart-delay", type=float, default=None, help="override the world's restart cost (s)")
    ap.add_argument("--per-job", action="store_true")
    ap.add_argument("--cluster", default="v100:64x8")
    ap.add_argument("--max-jobs", type=int, default=None)
    ap.add_argument("--policies", default="fifo,srtf,las,tiresias-las,tiresias-gittins")
    a = ap.parse_args()
    if a.reference:
        reference_mode(a)
    else:
        philly_mode(a)


if __name__ == "__main__":
    main()
