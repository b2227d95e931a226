"""Real throughput of the example jobs, GPU against CPU, and runtime fidelity on a GPU.

    python bench/gpu_throughput.py [--device cuda,cpu] [--batch N] [--reps 3]
    python bench/gpu_throughput.py --breakdown
    python bench/gpu_throughput.py --fidelity [--policy fifo] [--jobs 10] [--scale 1.0]

Throughput: every example job spec (quanta/examples/jobs/*.yaml) is run through its own command,
`quanta.examples.train` (job SDK, synthetic data drawn on the CPU each step, `.to(device)`, one
`loss.item()` per step), at the spec's batch size, in one process per (job, device) with the
allocation the runtime would give it (QUANTA_GPU_TYPE, CUDA_VISIBLE_DEVICES, one CPU thread unless
OMP_NUM_THREADS says otherwise). Each measurement trains N1 and N2 steps from scratch (after a
warm-up run) and takes steps/s = (N2 - N1) / (t2 - t1), so process start, model build, CUDA
context and the final checkpoint cancel out; the median of --reps pairs is reported. A spec with
several workers is measured as one process with the whole global batch (the per-worker loop).

--breakdown: where a GPU step of each example goes: drawing the batch on the CPU and copying it
to the GPU, against the model step (forward, backward, SGD, loss.item()) on data already there.

--fidelity: bench/runtime_fidelity.py's real-vs-simulated run on this machine's detected cluster
(its GPUs), every job on one worker (one GPU cannot hold a 2-worker job).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "quanta" / "examples" / "jobs"


def example_jobs() -> list[dict]:
    out = []
    for path in sorted(JOBS.glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())
        cmd = [str(c) for c in spec["command"]]
        model = cmd[cmd.index("--model") + 1] if "--model" in cmd else "mlp"
        out.append({"file": path.name, "name": spec["name"], "model": model,
                    "batch": int(spec.get("batch_size", 64)), "workers": int(spec.get("gpus", 1))})
    return out


# -- one process: one (model, device) ------------------------------------------------------------------
def _run_steps(model: str, steps: int, batch: int, device: str) -> float:
    """Seconds for train.main to run `steps` steps from scratch in a fresh job folder."""
    import torch

    from quanta.examples import train
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"QUANTA_JOB_DIR": tmp, "QUANTA_TOTAL_STEPS": str(steps),
                           "QUANTA_GLOBAL_BATCH": str(batch), "QUANTA_CHECKPOINT_EVERY": "1000000000"})
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            train.main(["--model", model])
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t


def worker(model: str, batch: int, device: str, n1: int, n2: int, reps: int) -> dict:
    import torch
    if device == "cuda":
        from quanta.runtime.backends.local import gpu_type_of
        name = torch.cuda.get_device_name(0)
        os.environ.update({"QUANTA_GPU_TYPE": gpu_type_of(name) or "gpu",
                           "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES") or "0"})
    else:
        name = "cpu"
        os.environ.update({"QUANTA_GPU_TYPE": "cpu", "CUDA_VISIBLE_DEVICES": ""})
    _run_steps(model, max(20, n1 // 2), batch, device)          # warm-up: CUDA context, kernels
    rates, plain = [], []
    for _ in range(reps):
        t1 = _run_steps(model, n1, batch, device)
        t2 = _run_steps(model, n2, batch, device)
        rates.append((n2 - n1) / (t2 - t1))
        plain.append(n2 / t2)
    return {"device_name": name, "steps_per_s": statistics.median(rates),
            "spread": [min(rates), max(rates)], "whole_run_steps_per_s": statistics.median(plain),
            "threads": torch.get_num_threads(), "torch": torch.__version__}


def _num(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


# -- the table -----------------------------------------------------------------------------------------
def measure(job: dict, device: str, batch: int, args) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.setdefault("OMP_NUM_THREADS", "1")
    n1, n2 = (args.n1, args.n2) if device == "cuda" else (args.cpu_n1, args.cpu_n2)
    r = subprocess.run([sys.executable, __file__, "--worker", job["model"], str(batch), device,
                        str(n1), str(n2), str(args.reps)], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{job['name']} on {device} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def throughput(args) -> None:
    devices = [d.strip() for d in args.device.split(",") if d.strip()]
    import torch
    if "cuda" in devices and not torch.cuda.is_available():
        print("no CUDA GPU here: measuring the CPU only", file=sys.stderr)
        devices = [d for d in devices if d != "cuda"]
    rows = []
    for job in example_jobs():
        batch = args.batch or job["batch"]
        got = {d: measure(job, d, batch, args) for d in devices}
        rows.append((job, batch, got))
        if args.json:
            print(json.dumps({"job": job, "batch": batch, "results": got}), flush=True)
    first = next(iter(rows[0][2].values())) if rows and rows[0][2] else {}
    print(f"torch {first.get('torch', '?')}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')}"
          + "".join(f"; {d}: {rows[0][2][d]['device_name']}" for d in devices))
    head = f"{'job':8s} {'model':5s} {'batch':>5s} {'workers':>7s}"
    for d in devices:
        head += f" {d + ' steps/s':>14s} {'(min-max)':>15s}"
    if len(devices) == 2:
        head += f" {devices[0] + '/' + devices[1]:>9s}"
    print(head)
    for job, batch, got in rows:
        line = f"{job['name']:8s} {job['model']:5s} {batch:5d} {job['workers']:7d}"
        for d in devices:
            lo, hi = got[d]["spread"]
            line += f" {_num(got[d]['steps_per_s']):>14s} {f'({_num(lo)}-{_num(hi)})':>15s}"
        if len(devices) == 2:
            line += f" {got[devices[0]]['steps_per_s'] / got[devices[1]]['steps_per_s']:8.1f}x"
        print(line, flush=True)


# -- where a GPU step goes ----------------------------------------------------------------------------
def breakdown(args) -> None:
    import torch

    from quanta.examples.train import batch, build, loss_sum
    if not torch.cuda.is_available():
        raise SystemExit("--breakdown needs a CUDA GPU (torch.cuda.is_available() is False)")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dev = torch.device("cuda:0")
    n = args.n2 // 2
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}; ms per step, {n} steps")
    print(f"{'job':8s} {'model':5s} {'batch':>5s} {'data+copy':>10s} {'model step':>11s} {'sum':>7s}")
    for job in example_jobs():
        name, bs = job["model"], args.batch or job["batch"]
        model = build(name, 0).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        on_gpu = [tuple(t.to(dev) for t in batch(name, 0, s, bs)) for s in range(50)]

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = loss_sum(name, model(x), y) / bs
            loss.backward()
            opt.step()
            return loss.item()

        for x, y in on_gpu:                       # warm-up
            step(x, y)
        t = time.perf_counter()
        for s in range(n):
            x, y = batch(name, 0, s, bs)
            x.to(dev), y.to(dev)
        torch.cuda.synchronize()
        t_data = (time.perf_counter() - t) / n
        t = time.perf_counter()
        for s in range(n):
            step(*on_gpu[s % len(on_gpu)])
        t_step = (time.perf_counter() - t) / n
        print(f"{job['name']:8s} {name:5s} {bs:5d} {1e3 * t_data:10.3f} {1e3 * t_step:11.3f} "
              f"{1e3 * (t_data + t_step):7.3f}", flush=True)


# -- runtime fidelity on the GPUs ----------------------------------------------------------------------
def fidelity(args) -> None:
    import numpy as np
    sys.path.insert(0, str(ROOT / "bench"))
    import runtime_fidelity as rf

    from quanta.runtime.backends.local import detect_cluster
    spec = args.cluster or detect_cluster()
    real_resolve = rf.resolve_cluster
    rf.resolve_cluster = lambda _cpu_spec: real_resolve(spec)       # the GPUs, not CPU slots
    rf.MIX = [(m, 1, steps, sleep) for m, _w, steps, sleep in rf.MIX]
    run = argparse.Namespace(policy=args.policy, slots=0, jobs=args.jobs, gap=args.gap,
                             scale=args.scale)
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        wall = time.time()
        store, rt, cluster = rf.run_real(run, state)
        wall = time.time() - wall
        startup = rf.startup_overhead(store)
        finish = rf.finish_overhead(store, state / "jobs")
        to_exit, to_train = rf.restart_overheads(store)
        drain = float(np.mean(to_exit)) if to_exit else 0.0
        real, sim, res = rf.simulate(store, rt, cluster, args.policy, startup, finish, drain)
        recs = store.jobs()
        print(f"real run: {args.jobs} jobs under {args.policy} on {cluster.describe()}, {wall:.0f} s "
              f"wall; start-up to training {startup:.2f} s, last step to finished {finish:.2f} s")
        print(f"{'job':>4} {'name':10s} {'GPU':5s} {'steps/s':>8s} {'real JCT s':>11} "
              f"{'sim JCT s':>10} {'error':>7}")
        errs = []
        for rec in recs:
            r, s = real[rec.id], sim[rec.id]
            errs.append(abs(s - r) / r)
            print(f"{rec.id:>4} {rec.name:10s} {rec.gpu_type:5s} {rec.steps_per_s:8.1f} {r:11.1f} "
                  f"{s:10.1f} {100 * (s - r) / r:+6.1f}%")
        print(f"per-job JCT error: mean {100 * np.mean(errs):.1f}%, max {100 * np.max(errs):.1f}%; "
              f"average JCT real {np.mean(list(real.values())):.1f} s, simulated "
              f"{np.mean(list(sim.values())):.1f} s")
        if to_exit:
            print(f"preemptions: {len(to_exit)}; stop -> checkpointed exit {np.mean(to_exit):.2f} s "
                  f"mean ({np.max(to_exit):.2f} max); stop -> training again {np.mean(to_train):.2f} s"
                  " mean")
        print(f"preemptions real {sum(r.preemptions for r in recs)}, simulated "
              f"{int(res.table.preemptions.sum())}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        model, batch, device, n1, n2, reps = sys.argv[2:8]
        print(json.dumps(worker(model, int(batch), device, int(n1), int(n2), int(reps))))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda,cpu", help="comma-separated: cuda, cpu")
    ap.add_argument("--batch", type=int, default=0, help="override every job's batch size")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--n1", type=int, default=200, help="GPU: steps of the short run")
    ap.add_argument("--n2", type=int, default=1200, help="GPU: steps of the long run")
    ap.add_argument("--cpu-n1", type=int, default=100)
    ap.add_argument("--cpu-n2", type=int, default=500)
    ap.add_argument("--json", action="store_true", help="also one JSON line per job")
    ap.add_argument("--breakdown", action="store_true")
    ap.add_argument("--fidelity", action="store_true")
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--cluster", default="", help="--fidelity: cluster spec (default: detected)")
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--gap", type=float, default=6.0)
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()
    if args.fidelity:
        fidelity(args)
    elif args.breakdown:
        breakdown(args)
    else:
        throughput(args)


if __name__ == "__main__":
    main()
