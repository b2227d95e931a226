"""Replay the whole Philly trace (82,247 jobs, 109 days) on v100:64x8 and report speed.

    python bench/philly_replay.py [--policy las] [--cluster v100:64x8] [--max-jobs N]

Prints wall time, events per second, decisions, peak memory (resident set, from
resource.getrusage), a hash of the per-job results and one of the timeline (to check that a
speed change keeps them bit-identical; `PYTHONPATH=OTHER_CHECKOUT python bench/philly_replay.py` times another
version). Results are recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from quanta.model.presets import resolve_cluster
from quanta.perf.table import TableModel
from quanta.policies import make_policy
from quanta.report.metrics import summary
from quanta.sim import Simulator
from quanta.workloads.builder import build_workload
from quanta.workloads.formats import load_trace

DATA = Path(__file__).resolve().parent / "data" / "philly_normalized.csv.gz"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="las")
    ap.add_argument("--cluster", default="v100:64x8")
    ap.add_argument("--max-jobs", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "philly_normalized.csv"
        with gzip.open(DATA, "rb") as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        trace = load_trace(path, "normalized")
    t_read = time.perf_counter() - t0
    perf = TableModel()
    wl = build_workload(trace, perf, seed=a.seed, max_jobs=a.max_jobs)
    t_build = time.perf_counter() - t0 - t_read
    cluster = resolve_cluster(a.cluster)
    sim = Simulator(wl.specs, cluster, make_policy(a.policy), perf)
    t_setup = time.perf_counter() - t0 - t_read - t_build
    res = sim.run()
    total = time.perf_counter() - t0
    s = summary(res)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"jobs                 {len(wl.specs)}")
    print(f"policy / cluster     {a.policy} on {a.cluster} ({cluster.num_gpus} GPUs)")
    print(f"read trace           {t_read:.2f} s")
    print(f"build workload       {t_build:.2f} s")
    print(f"set up simulator     {t_setup:.2f} s")
    print(f"simulate             {res.wall_s:.2f} s  (policy {res.decide_s:.2f} s, "
          f"{res.decisions} decisions)")
    print(f"events               {res.events}  ({res.events / res.wall_s:,.0f} events/s)")
    print(f"transitions          {res.transitions}  ({res.transitions / res.wall_s:,.0f} /s)")
    print(f"total wall           {total:.2f} s")
    print(f"peak memory (RSS)    {peak_mb:.0f} MB")
    print(f"finished             {s['finished']} / {s['jobs']}; avg JCT {s['avg_jct_s'] / 3600:.2f} h; "
          f"util {s['gpu_util']:.3f}; preemptions {s['preemptions']}")
    t = res.table
    h = hashlib.sha256()
    for col in (t.end, t.first_start, t.preemptions, t.migrations, t.restarts):
        h.update(np.ascontiguousarray(col).tobytes())
    print(f"result hash          {h.hexdigest()[:16]}  (end, first start, preemptions, migrations, "
          f"restarts of every job: equal hashes, bit-identical results)")
    h = hashlib.sha256()
    for col in (res.times, res.busy, res.pending, res.running):
        h.update(np.ascontiguousarray(col).tobytes())
    print(f"timeline hash        {h.hexdigest()[:16]}  (time, busy GPUs, waiting and running jobs "
          f"after every batch of events)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
