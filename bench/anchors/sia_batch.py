#!/usr/bin/env python3
"""How close to the best batch do Sia's and Pollux's jobs run? In Sia's simulator each job runs at
the batch its own learned model picks (sia-simulator job.py:317-412); Quanta's `sia-sim` world
models that with job agents (quanta/worlds/sia_agents.py). This prints, per application, the
GPU-time-weighted mean of (goodput at the batch run) / (goodput at the best batch), both rated by
the world's measured profiles (`MeasuredPerf`) at the same placement and epoch:

    python bench/anchors/sia_batch.py --log ~/.cache/anchors/sia/runs/RUN/sim.log.gz
    python bench/anchors/sia_batch.py --replay sia_philly_workload-1 [--max-jobs 30] --policy sia

`--log`: the reference's per-round log (`bench/anchors/sia.py` keeps it): each round's placement,
GPU type, global batch, accumulation steps and epoch, weighted by GPUs x the round. `--replay`:
Quanta's sia-sim replay of a bundled Sia workload, every rate its engine asks the job agents
for, weighted by GPUs x the time until that job's next rate.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from quanta.perf.base import ADAPTIVE_BATCH  # noqa: E402
from quanta.perf.catalog_model import CatalogModel  # noqa: E402
from quanta.perf.goodput_data import CLUSTER_OF_TYPE  # noqa: E402
from quanta.worlds import get_world  # noqa: E402
from quanta.worlds.sia_agents import LearningJobs  # noqa: E402

TYPE_OF_CLUSTER = {c: t for t, c in CLUSTER_OF_TYPE.items()}


def _rate(ms, job, app: str, t: str, placement: tuple[int, ...], m: int, s: int) -> float | None:
    ss = ms.step_sync(app, t, placement, m)
    return None if ss is None else ms.progress_rate(job, app, placement, m, s, *ss)[0]


def _best(ms, job, app: str, t: str, placement: tuple[int, ...]) -> float | None:
    """The goodput-best batch on this placement, as the world's adaptive rate picks it
    (MeasuredPerf.config_at), rated at the placement itself."""
    if not ms.knows(app, t):
        return None
    nodes = 2 if len(placement) > 1 and sum(placement) > 1 else 1
    got = ms.config_at(job, app, t, placement, nodes, True)
    return None if got is None else ms.progress_rate(job, app, placement, got[1], got[2],
                                                     *got[3])[0]


def from_log(path: Path) -> dict[str, list[float]]:
    """Per application: [sum of fraction x weight, sum of weight] over the log's rounds."""
    from quanta.model.job import JobSpec
    ms = get_world("sia-sim").perf(CatalogModel()).base
    acc: dict[str, list[float]] = {}
    with gzip.open(path, "rt") as f:
        rounds = [json.loads(line) for line in f]
    for rec in rounds:
        for j in rec["submitted_jobs"]:
            pl = tuple(x for x in j["placement"] if x)
            if not pl or j["completion_time"] is not None or not j["batch_size"]:
                continue
            app = j["name"].rsplit("-", 1)[0]
            t = TYPE_OF_CLUSTER.get(j["cluster"])
            k = sum(pl)
            s = int(j["accum_steps"])
            m = round(j["batch_size"] / (k * (s + 1)))
            job = JobSpec(job_id=j["name"], submit_time=0.0, job_type=app,
                          num_gpus=k).with_(phase=int(j["epoch"]))
            got, best = _rate(ms, job, app, t, pl, m, s), _best(ms, job, app, t, pl)
            if got is None or not best:
                continue
            a = acc.setdefault(app, [0.0, 0.0])
            a[0] += got / best * k
            a[1] += k
    return acc


class _Recording(LearningJobs):
    """Job agents that note each rate they give beside the world's best-batch rate."""

    def __init__(self, perf, merged, now):
        super().__init__(perf, merged)
        self.now = now
        self.calls: list[tuple] = []

    def running_rate(self, job, gpu_type, num_gpus, num_nodes):
        r = super().running_rate(job, gpu_type, num_gpus, num_nodes)
        if r is not None:
            best = self.perf.rate_with(job, gpu_type, num_gpus, num_nodes, True, ADAPTIVE_BATCH)
            self.calls.append((self.now(), job.job_id, job.job_type.lower(), num_gpus, r, best))
        return r


def from_replay(workload: str, policy: str, max_jobs: int | None) -> dict[str, list[float]]:
    from quanta.model.presets import resolve_cluster
    from quanta.runner import build_policy, load_any_trace
    from quanta.sim.engine import Simulator
    from quanta.workloads.builder import build_workload
    w = get_world("sia-sim")
    perf = w.perf(CatalogModel())
    trace = load_any_trace(str(ROOT / "quanta" / "data" / "traces" / f"{workload}.csv"), "auto", 0)
    wl = build_workload(trace, perf, max_jobs=max_jobs, keep_clock=True)
    clock = {"now": 0.0}
    agents = _Recording(perf, policy == "pollux", lambda: clock["now"])
    sim = Simulator(w.jobs_for(policy, wl.specs), resolve_cluster(w.cluster), build_policy(policy, w, 0),
                    agents, restart=w.restart(30.0), **w.engine_options())
    # the engine's clock when it asks for rates: at transitions, phase ends and rounds
    for name in ("_apply", "_next_phase", "_retune"):
        def timed(*args, _f=getattr(sim, name), _at=1 if name == "_next_phase" else 0):
            clock["now"] = args[_at]
            return _f(*args)
        setattr(sim, name, timed)
    res = sim.run()
    end = {s.job_id: float(res.table.end[i]) for i, s in enumerate(res.table.specs)}
    last: dict[str, tuple] = {}
    acc: dict[str, list[float]] = {}

    def close(call, until):
        t0, jid, app, k, r, best = call
        if best > 0 and until > t0:
            a = acc.setdefault(app, [0.0, 0.0])
            a[0] += r / best * k * (until - t0)
            a[1] += k * (until - t0)
    for call in agents.calls:
        prev = last.get(call[1])
        if prev is not None:
            close(prev, call[0])
        last[call[1]] = call
    for jid, call in last.items():
        close(call, end[jid])
    return acc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", type=Path, help="a reference run's sim.log.gz (or its folder)")
    ap.add_argument("--replay", help="a bundled Sia workload, e.g. sia_philly_workload-1")
    ap.add_argument("--policy", default="sia", choices=("sia", "pollux"))
    ap.add_argument("--max-jobs", type=int, default=None)
    a = ap.parse_args()
    if (a.log is None) == (a.replay is None):
        ap.error("give one of --log and --replay")
    if a.log is not None:
        path = a.log / "sim.log.gz" if a.log.is_dir() else a.log
        if not path.is_file():
            ap.error(f"--log: {path} is not a file")
        acc = from_log(path)
    else:
        if not (ROOT / "quanta" / "data" / "traces" / f"{a.replay}.csv").is_file():
            ap.error(f"--replay: no bundled workload {a.replay}")
        acc = from_replay(a.replay, a.policy, a.max_jobs)
    tot = [sum(v[0] for v in acc.values()), sum(v[1] for v in acc.values())]
    for app, (num, den) in sorted(acc.items()) + [("all", tot)]:
        print(f"{app:12s} {num / den:7.1%} of the best batch's goodput (GPU-weighted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
