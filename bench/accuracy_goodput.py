"""Accuracy of the Pollux throughput model on the bundled Sia/Pollux profiles, and query cost.

For every application and profiled GPU type:
- fit on what a scheduler sees early and cheaply: every single-node sample (all GPU counts that
  fit one node, all local batches) plus the multi-node configurations with the fewest replicas
  (at most 3 distinct (nodes, replicas) pairs, all their local batches);
- predict every other measured configuration (the larger multi-node ones, up to 16 nodes / 64
  GPUs on T4): relative error of the predicted iteration time against the measured `step_time`
  (the whole optimiser step; `sync_time` is a part of it, see goodput_fit.py);
- second split, interpolation: fit on a fixed random 25% of the samples (numpy seed 0), predict
  the other 75%;
- for reference, the in-sample error of the catalog model fitted on all samples.
Then the time of one `GoodputPerf.rate` query (cached and first-time).

Usage: python bench/accuracy_goodput.py
"""

from __future__ import annotations

import time

import numpy as np

from quanta.model.job import JobSpec
from quanta.perf.goodput import GoodputPerf, fit_throughput, iteration_time, load_goodput_catalog
from quanta.perf.goodput_data import APPS, CLUSTER_OF_TYPE, load_samples, profiled_types

MAX_MULTI_NODE_CONFIGS = 3
RANDOM_FRACTION, SEED = 0.25, 0


def split(s):
    """Boolean mask of the fitting samples (see module docstring)."""
    fit = s.num_nodes == 1
    multi = sorted({(int(k), int(n)) for n, k in zip(s.num_nodes, s.num_replicas) if n > 1})
    for k, n in multi[:MAX_MULTI_NODE_CONFIGS]:
        fit |= (s.num_nodes == n) & (s.num_replicas == k)
    return fit


def random_split(s):
    rng = np.random.default_rng(SEED)
    return rng.random(len(s)) < RANDOM_FRACTION


def held_out(s, mask):
    fit, test = s.subset(mask), s.subset(~mask)
    params = fit_throughput(fit.num_nodes, fit.num_replicas, fit.local_bsz,
                            fit.step_time, fit.sync_time, fit.per_node)
    return len(fit), (rel_err(params, test) if len(test) else np.array([]))


def rel_err(params, s):
    pred = iteration_time(params, s.num_nodes, s.num_replicas, s.local_bsz, 0, s.per_node)
    return np.abs(pred / s.step_time - 1.0)


def accuracy_rows():
    catalog = load_goodput_catalog()
    rows, pooled_test, pooled_rand, pooled_full = [], [], [], []
    for app in APPS:
        for gpu in profiled_types(app):
            s = load_samples(app, gpu)
            nf, err = held_out(s, split(s))
            _, rnd = held_out(s, random_split(s))
            full = rel_err(catalog[app].profile(gpu).params, s)
            pooled_test.append(err)
            pooled_rand.append(rnd)
            pooled_full.append(full)
            nan = float("nan")
            rows.append((app, gpu, CLUSTER_OF_TYPE[gpu], nf, len(err),
                         err.mean() if len(err) else nan, err.max() if len(err) else nan,
                         rnd.mean(), rnd.max(), full.mean(), full.max()))
    return rows, [np.concatenate(x) for x in (pooled_test, pooled_rand, pooled_full)]


def query_time():
    perf = GoodputPerf()
    jobs = [JobSpec(f"j{a}", 0.0, 1, a) for a in APPS]
    keys = [(j, t, n, 1 if n <= 4 else 2) for j in jobs for t in ("t4", "v100", "a100")
            for n in (1, 2, 4, 8, 16)]
    t0 = time.perf_counter()
    for j, t, n, nodes in keys:
        perf.rate(j, t, n, nodes)
    first = (time.perf_counter() - t0) / len(keys)
    reps = 200
    t0 = time.perf_counter()
    for _ in range(reps):
        for j, t, n, nodes in keys:
            perf.rate(j, t, n, nodes)
    cached = (time.perf_counter() - t0) / (reps * len(keys))
    return first, cached


def main() -> None:
    t0 = time.perf_counter()
    load_goodput_catalog()
    load_s = time.perf_counter() - t0
    rows, (test, rand, full) = accuracy_rows()
    print("| app | GPU type (cluster) | fit samples | held-out samples | extrapolation mean err | "
          "extrapolation max err | random-25% mean err | random-25% max err | "
          "all-data fit mean err | all-data fit max err |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")

    def fmt(v):
        return "n/a" if np.isnan(v) else f"{100 * v:.1f}%"

    for app, gpu, cluster, nf, nt, *errs in rows:
        print(f"| {app} | {gpu} ({cluster}) | {nf} | {nt} | " + " | ".join(map(fmt, errs)) + " |")
    print(f"| **overall (pooled samples)** | | {sum(r[3] for r in rows)} | {len(test)} | "
          f"**{fmt(test.mean())}** | **{fmt(test.max())}** | **{fmt(rand.mean())}** | "
          f"**{fmt(rand.max())}** | {fmt(full.mean())} | {fmt(full.max())} |")
    medians = [np.nanmedian([r[i] for r in rows]) for i in (5, 7, 9)]
    print(f"| median over (app, type) of the mean | | | | {fmt(medians[0])} | | "
          f"{fmt(medians[1])} | | {fmt(medians[2])} | |")
    print()
    for name, e in (("extrapolation", test), ("random-25%", rand)):
        print(f"{name}: held-out points within 10%: {100 * np.mean(e < 0.10):.0f}%, "
              f"within 25%: {100 * np.mean(e < 0.25):.0f}%")
    first, cached = query_time()
    print(f"catalog load (fit {len(rows)} models): {load_s:.2f} s")
    print(f"GoodputPerf.rate: first query {1e6 * first:.0f} us, cached query {1e6 * cached:.2f} us")


if __name__ == "__main__":
    main()
