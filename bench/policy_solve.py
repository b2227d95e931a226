"""Policy decision time against the number of active jobs (issue 3's speed table).

    python bench/policy_solve.py [--sizes 32,128,512,2048] [--policies gavel-las,...|all]
        [--repeat 3] [--stat max|median|min] [--gpus G] [--give-up S]

For n active jobs: a cluster with n/4 GPUs of each of V100, P100 and K80 (4 GPUs per server;
with --gpus G: G GPUs in all, a third of each type, whatever n),
jobs drawn from Gavel's 26 job types with Philly-like GPU counts, half of them running, random
progress. Times one `decide` on a fresh policy (so the allocation is computed, not cached) for
each of --repeat instances (seeds 0, 1, ...: different jobs, not the same round again); prints
the slowest instance's time per (policy, n) (--stat median or min for those instead: the best of
different instances hides an instance whose programme is hard, as sia's 5,000-job MILP is on
three seeds of four). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from quanta.core.jobtable import PENDING, JobTable
from quanta.core.snapshot import Snapshot
from quanta.core.synthetic import start_on_fastest
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.perf.table import TableModel
from quanta.placement import Occupancy
from quanta.policies import make_policy
from quanta.workloads.catalog import drawable_types
from quanta.workloads.synthetic import philly_scale_factor

DEFAULT = ["fifo", "las", "tiresias-las", "tiresias-gittins", "gavel-las", "gavel-las-agnostic",
           "gavel-ftf", "gavel-makespan", "gavel-throughput", "gavel-cost", "gavel-fifo",
           "gavel-hierarchical", "gavel-las-packed"]


def snapshot_of(n: int, seed: int = 0, gpus: int = 0) -> Snapshot:
    rng = np.random.default_rng(seed)
    per_type = max(4, gpus // 3 if gpus else n // 4)
    nodes = tuple(NodeSpec(f"{t}-{i}", t, 4) for t in ("v100", "p100", "k80")
                  for i in range(per_type // 4))
    cluster = Cluster(nodes)
    types = drawable_types()
    specs = [JobSpec(f"j{i}", float(i), philly_scale_factor(rng, 4), types[int(rng.integers(len(types)))],
                     total_steps=float(rng.integers(1_000, 100_000)), queue=f"q{i % 8}",
                     deadline=float(rng.uniform(1e4, 1e5)) if i % 5 == 0 else 0.0)
             for i in range(n)]
    perf = TableModel()
    table = JobTable(specs, cluster, perf)
    occ = Occupancy(cluster)
    table.state[:] = PENDING
    now = float(n) + 3600.0
    start_on_fastest(table, occ, rng.permutation(n)[: n // 2].tolist())
    table.att0[:] = rng.uniform(0, 20_000, n)
    table.prog0[:] = table.total * rng.uniform(0, 0.8, n)
    table.t0[:] = now       # progress and attained service as set above, at `now`
    table.ta[:] = now
    rows = np.arange(n)
    return Snapshot(now, cluster, perf, table.view(rows, now), occ.up_capacity(),
                    occ.node_free.copy(), occ.node_up.copy())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="32,128,512,1024,2048")
    ap.add_argument("--policies", default=",".join(DEFAULT))
    ap.add_argument("--repeat", type=int, default=3, help="instances per (policy, n)")
    ap.add_argument("--stat", choices=("max", "median", "min"), default="max",
                    help="over the instances (default: the slowest)")
    ap.add_argument("--gpus", type=int, default=0, help="GPUs in all (default: n/4 per type)")
    ap.add_argument("--give-up", type=float, default=60.0,
                    help="skip a policy's larger sizes once one decision took longer (s)")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    if a.policies == "all":
        from quanta.policies.registry import POLICIES
        names = sorted(POLICIES)
    else:
        names = a.policies.split(",")
    print("policy".ljust(22) + "".join(f"{n:>10d}" for n in sizes)
          + f"   (seconds per decision, {a.stat} of {a.repeat} instances)")
    for name in names:
        make_policy(name).decide(snapshot_of(32, seed=99))   # imports and first-use set-up, untimed
        cells = []
        for n in sizes:
            if cells and not cells[-1] <= a.give_up:     # too slow (or skipped) already
                cells.append(np.nan)
                continue
            times = []
            for r in range(a.repeat):
                snap = snapshot_of(n, seed=r, gpus=a.gpus)
                pol = make_policy(name)
                t0 = time.perf_counter()
                pol.decide(snap)
                times.append(time.perf_counter() - t0)
            cells.append(float({"max": np.max, "median": np.median, "min": np.min}[a.stat](times)))
        print(name.ljust(22) + "".join(f"{c:>10.4f}" if c == c else f"{'skipped':>10}"
                                       for c in cells), flush=True)


if __name__ == "__main__":
    main()
