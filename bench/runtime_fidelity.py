"""Runtime fidelity: the same small workload run for real and simulated.

    python bench/runtime_fidelity.py [--policy fifo] [--slots 2] [--jobs 10] [--scale 1.0]
    python bench/runtime_fidelity.py --latency-only [--queued 1000]

1. Real: `--jobs` example jobs (MLP, CNN, tiny LM; 1 or 2 workers) are submitted on a schedule to
   the runtime (local backend, `--slots` CPU slots, the policy) and run to completion.
2. Simulated: the same jobs, submit times and steps go through the simulator with the throughput
   the runtime measured for each job and allocation (the runtime's online performance model) and
   the restart delay it measured (mean preempt-to-resume overhead).
3. Reported: per-job JCT real vs simulated and the error; preempt-to-resume times (stop request ->
   checkpointed exit -> training again); and the decision latency of the runtime with `--queued`
   jobs waiting (policy + placement + transitions, and the whole iteration with SQLite writes).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from quanta.model.presets import resolve_cluster
from quanta.perf.catalog_model import CatalogModel
from quanta.policies import make_policy
from quanta.runtime.backends.local import LocalBackend
from quanta.runtime.controller import Runtime
from quanta.runtime.spec import parse_submission
from quanta.service.store import ACTIVE, Store
from quanta.sim.engine import RestartCost, Simulator

PY = sys.executable
# (model, workers, steps, step sleep s): a few tens of seconds each on this machine
MIX = [("mlp", 1, 1500, 0.01), ("cnn", 1, 600, 0.01), ("lm", 2, 250, 0.0), ("mlp", 1, 800, 0.01),
       ("lm", 1, 300, 0.0), ("cnn", 2, 500, 0.0), ("mlp", 1, 2500, 0.005), ("cnn", 1, 400, 0.01),
       ("lm", 1, 150, 0.0), ("mlp", 2, 1200, 0.005)]


def submission(i: int, scale: float) -> dict:
    model, workers, steps, sleep = MIX[i % len(MIX)]
    return {"name": f"{model}-{i}", "gpus": workers, "steps": max(20, int(steps * scale)),
            "batch_size": 32, "checkpoint_every": 50, "grace_s": 30, "model": f"example-{model}",
            "command": [PY, "-m", "quanta.examples.train", "--model", model,
                        "--step-sleep", str(sleep)]}


def run_real(args, state: Path):
    store = Store(state / "q.db")
    cluster = resolve_cluster(f"cpu:1x{args.slots}")
    rt = Runtime(store, LocalBackend(), cluster, make_policy(args.policy), CatalogModel(),
                 state / "jobs", poll_s=0.1)
    rt.recover()
    t0 = time.time()
    gaps = [0.0] + [args.gap] * (args.jobs - 1)
    due = np.cumsum(gaps)
    ids: list[int] = []
    while True:
        now = time.time() - t0
        while len(ids) < args.jobs and now >= due[len(ids)]:
            sub = parse_submission(submission(len(ids), args.scale))
            ids.append(store.add_job("bench", sub.name, sub.queue, sub.model_dump(), sub.steps,
                                     time.time()))
        rt.step()
        recs = store.jobs()
        if len(ids) == args.jobs and all(r.state in ("finished", "failed", "cancelled") for r in recs):
            break
        time.sleep(0.1)
    bad = [r for r in recs if r.state != "finished"]
    if bad:
        raise SystemExit(f"jobs did not finish: {[(r.id, r.state, r.reason) for r in bad]}")
    return store, rt, cluster


def restart_overheads(store: Store) -> tuple[list[float], list[float]]:
    """Per preemption: stop request -> checkpointed exit, and stop request -> training again."""
    to_exit, to_train = [], []
    for rec in store.jobs():
        ev = store.events(rec.id)
        for i, e in enumerate(ev):
            if e["kind"] != "stopping" or e["detail"] != "preempt":
                continue
            rest = ev[i + 1:]
            out = next((x for x in rest if x["kind"] == "preempted"), None)
            back = next((x for x in rest if x["kind"] == "training"), None)
            if out:
                to_exit.append(out["time"] - e["time"])
            if back:
                to_train.append(back["time"] - e["time"])
    return to_exit, to_train


def startup_overhead(store: Store) -> float:
    """Mean seconds from a (re)launch to training (process start, imports, restore)."""
    gaps = []
    for rec in store.jobs():
        ev = store.events(rec.id)
        for i, e in enumerate(ev):
            if e["kind"] in ("start", "resume"):   # to training, unless stopped before that
                back = next((x for x in ev[i + 1:] if x["kind"] in ("training", "stopping")), None)
                if back and back["kind"] == "training":
                    gaps.append(back["time"] - e["time"])
    return statistics.mean(gaps) if gaps else 0.0


def finish_overhead(store: Store, jobs_dir: Path) -> float:
    """Mean seconds from a job's last step (its final progress report) to its 'finished' event:
    final checkpoint, process exit, the scheduler noticing. The devices stay held meanwhile."""
    from quanta.job import read_json
    gaps = []
    for rec in store.jobs(states=["finished"]):
        last = (read_json(jobs_dir / str(rec.id) / "progress.json") or {}).get("time")
        done = next((e["time"] for e in store.events(rec.id) if e["kind"] == "finished"), None)
        if last and done:
            gaps.append(done - last)
    return statistics.mean(gaps) if gaps else 0.0


def simulate(store: Store, rt: Runtime, cluster, policy: str, startup: float, finish: float,
             drain: float):
    recs = store.jobs()
    t0 = min(r.submit for r in recs)
    specs = [rt.table.specs[rt.row_of[r.id]].with_(submit_time=r.submit - t0) for r in recs]
    # a first start pays the measured start-up (process, imports, restore) and the finish overhead
    # (every job finishes once; its devices are held meanwhile); a restart pays the start-up and
    # the checkpointing stop that held the devices before it
    restart = RestartCost(default=startup + drain, first_start_s=startup + finish)
    res = Simulator(specs, cluster, make_policy(policy), rt.perf, restart=restart).run()
    t = res.table
    jct_sim = {int(s.job_id): float(t.end[i] - t.submit[i]) for i, s in enumerate(t.specs)}
    jct_real = {r.id: r.end_time - r.submit for r in recs}
    return jct_real, jct_sim, res


def latency(args, state: Path) -> dict:
    """Decision latency with `queued` jobs waiting (2 run, the rest queue)."""
    store = Store(state / "lat.db")
    cluster = resolve_cluster("cpu:1x2")
    out = {}
    rt = Runtime(store, LocalBackend(), cluster, make_policy(args.latency_policy), CatalogModel(),
                 state / "lat-jobs", poll_s=0.1)
    rt.recover()
    body = submission(0, 1.0) | {"steps": 10_000_000, "command": [PY, "-c",
                                                                  "import time; time.sleep(600)"]}
    sub = parse_submission(body)
    for _ in range(args.queued):
        store.add_job("bench", sub.name, sub.queue, sub.model_dump(), sub.steps, time.time())
    rt.step()
    rt.stats.latencies.clear()
    steps = []
    for _ in range(args.decisions):       # each arrival is an event: one decision per iteration
        store.add_job("bench", sub.name, sub.queue, sub.model_dump(), sub.steps, time.time())
        t = time.perf_counter()
        rt.step()
        steps.append(time.perf_counter() - t)
    lat = np.array(rt.stats.latencies)
    out = {"queued": args.queued + args.decisions, "decisions": len(lat),
           "decision_p50_ms": 1e3 * float(np.quantile(lat, 0.5)),
           "decision_p99_ms": 1e3 * float(np.quantile(lat, 0.99)),
           "iteration_p50_ms": 1e3 * float(np.quantile(steps, 0.5)),
           "iteration_p99_ms": 1e3 * float(np.quantile(steps, 0.99))}
    # every job cancelled, the queued ones too (the policy starts queued jobs as the running
    # ones go: cancelling only those left two launchers training after the bench had ended)
    active = list(ACTIVE)
    for rec in store.jobs(states=active):
        store.request(rec.id, cancel=True)
    for _ in range(300):
        rt.step()
        if not store.jobs(states=active):
            break
        time.sleep(0.1)
    else:
        raise SystemExit(f"runtime_fidelity.py: jobs still active after the latency run: "
                         f"{[r.id for r in store.jobs(states=active)]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--gap", type=float, default=6.0, help="seconds between submissions")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every job's steps")
    ap.add_argument("--queued", type=int, default=1000)
    ap.add_argument("--decisions", type=int, default=200)
    ap.add_argument("--latency-policy", default="las")
    ap.add_argument("--latency-only", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        if not args.latency_only:
            wall = time.time()
            store, rt, cluster = run_real(args, state)
            wall = time.time() - wall
            startup = startup_overhead(store)
            finish = finish_overhead(store, state / "jobs")
            to_exit, to_train = restart_overheads(store)
            drain = float(np.mean(to_exit)) if to_exit else 0.0
            jct_real, jct_sim, res = simulate(store, rt, cluster, args.policy, startup, finish, drain)
            print(f"real run: {args.jobs} jobs under {args.policy} on {args.slots} CPU slots, "
                  f"{wall:.0f} s wall; measured (mean) start-up to training {startup:.2f} s, "
                  f"last step to finished {finish:.2f} s")
            print(f"{'job':>4} {'name':10s} {'real JCT s':>11} {'sim JCT s':>10} {'error':>7}")
            errs = []
            for rec in store.jobs():
                r, s_ = jct_real[rec.id], jct_sim[rec.id]
                errs.append(abs(s_ - r) / r)
                print(f"{rec.id:>4} {rec.name:10s} {r:11.1f} {s_:10.1f} {100 * (s_ - r) / r:+6.1f}%")
            print(f"per-job JCT error: mean {100 * np.mean(errs):.1f}%, max {100 * np.max(errs):.1f}%;"
                  f" average JCT real {np.mean(list(jct_real.values())):.1f} s, simulated "
                  f"{np.mean(list(jct_sim.values())):.1f} s")
            if to_exit:
                print(f"preemptions: {len(to_exit)}; stop -> checkpointed exit {np.mean(to_exit):.2f} s"
                      f" mean ({np.max(to_exit):.2f} max); stop -> training again "
                      f"{np.mean(to_train):.2f} s mean ({np.max(to_train):.2f} max, includes waiting "
                      "for GPUs)")
            print(f"simulated preemptions {int(res.table.preemptions.sum())}, real "
                  f"{sum(r.preemptions for r in store.jobs())}")
        lat = latency(args, state)
        print(f"decision latency with {lat['queued']} queued jobs ({args.latency_policy}, "
              f"{lat['decisions']} decisions): policy+placement+transitions p50 "
              f"{lat['decision_p50_ms']:.1f} ms, p99 {lat['decision_p99_ms']:.1f} ms; whole iteration "
              f"(SQLite sync, progress, decision) p50 {lat['iteration_p50_ms']:.1f} ms, p99 "
              f"{lat['iteration_p99_ms']:.1f} ms")


if __name__ == "__main__":
    main()
