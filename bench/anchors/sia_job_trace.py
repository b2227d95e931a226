#!/usr/bin/env python3
"""Follow named jobs through Sia's policy, round by round, in Sia's own simulator and in
Quanta's sia-sim replay: what each side's policy estimates for every configuration it offers the
job, what it gives it, and the profile points and fits the job learns.

    python bench/anchors/sia_job_trace.py --sia PATH --workload sia_newtrace_workload-1 \\
        --max-jobs 160 --jobs yolov3-136,yolov3-147 [--side both|reference|replay] [--out DIR]

Reference side: sia-simulator runs unchanged in the venv of `bench/anchors/sia.py` (same
source export, workload slice, seeds and environment), under a driver that wraps
`SiaPolicy.optimize_mip`, `SiaPolicy._compute_goodputs_v2` and `Job.update_params` to print
lines for the named jobs. Replay side: `quanta reproduce sia`'s sia-sim run of the same
workload, with the same kind of wrappers around `Sia._candidates` and
`LearningJobs.segment_end`. Lines go to DIR/reference.txt and DIR/replay.txt (default
/tmp/sia_job_trace); both are grep-able by `t=` (the round last decided: a point is learned
during the round after it) and `job=`. Estimates are the policy's goodputs
before its per-job normalisation (reference: samples/s of the learned or projected fit; Quanta:
the same quantity, 1.0 for a job with no model yet). Slow: the reference takes the time of a
`bench/anchors/sia.py` run (about 4 minutes for 160 jobs).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sia as anchor  # noqa: E402  (bench/anchors/sia.py)

DRIVER = """\
import os, random, runpy, sys
import numpy
TARGETS = set(sys.argv[1].split(","))
sys.path.insert(0, os.getcwd())
import cluster as C, sia as S, job as J
CLOCK = [0]
_op = C.Cluster.optimize_policy
def optimize_policy(self):
    CLOCK[0] = self.current_time
    return _op(self)
C.Cluster.optimize_policy = optimize_policy
NAMES = {}
_om = S.SiaPolicy.optimize_mip
def optimize_mip(self, jobs, nodes, prev):
    NAMES.clear()
    for n, ji in jobs.items():
        NAMES[id(ji)] = n
        if n in TARGETS:
            print(f"TRACE t={CLOCK[0]} job={n} holds={prev.get(n)} age={ji.age:.0f} "
                  f"fits={[k for k, v in ji.speedup_fn.items() if v is not None]}")
    out = _om(self, jobs, nodes, prev)
    for n in jobs:
        if n in TARGETS:
            print(f"TRACE t={CLOCK[0]} job={n} gets={out.get(n)}")
    return out
S.SiaPolicy.optimize_mip = optimize_mip
_cg = S.SiaPolicy._compute_goodputs_v2
def cg(self, ji, cl, nn, ng):
    out = _cg(self, ji, cl, nn, ng)
    n = NAMES.get(id(ji))
    if n in TARGETS and out is not None:
        est = " ".join(f"{int(g)}={float(v):.2f}" for g, v in zip(ng, numpy.atleast_1d(out)))
        print(f"TRACE t={CLOCK[0]} job={n} estimate {cl} {est}")
    return out
S.SiaPolicy._compute_goodputs_v2 = cg
_up = J.Job.update_params
def up(self, nn, nr, bsz, st, sy, gs, gv):
    prof = self.profiles if self.h_unaware else self.profiles[self.current_cluster]
    new = self.name in TARGETS and (nn, nr, bsz) not in prof
    _up(self, nn, nr, bsz, st, sy, gs, gv)
    if new:
        pp = self.perf_params if self.h_unaware else self.perf_params[self.current_cluster]
        print(f"TRACE t={CLOCK[0]} job={self.name} point {self.current_cluster} "
              f"key={(nn, nr, bsz)} step={st:.4f} sync={sy:.4f} grad=({gs:.4g},{gv:.4g}) "
              f"fit={tuple(round(float(x), 6) for x in pp)}")
J.Job.update_params = up
random.seed(0)
numpy.random.seed(0)
script = sys.argv[2]
sys.argv = [script] + sys.argv[3:]
runpy.run_path(script, run_name="__main__")
"""


def reference(sia: Path, workload: str, max_jobs: int | None, jobs: str, out: Path) -> Path:
    sim, _commit, _notes = anchor.export_source(sia)
    wl_path, _label = anchor.resolve_workload(workload, sim)
    rows = anchor.read_workload(wl_path, max_jobs)
    wl = out / "workload.csv"
    with wl.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    script, args = anchor.POLICIES["sia"]
    py = anchor.ensure_venv()
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONHASHSEED="0")
    env.pop("PYTHONPATH", None)
    dest = out / "reference.txt"
    proc = subprocess.run([str(py), "-c", DRIVER, jobs, script, str(wl), *args,
                           f"--output={out / 'reference_sim.log'}"],
                          cwd=sim, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("TRACE ")]
    dest.write_text("\n".join(lines) + "\n")
    if proc.returncode != 0:
        anchor.die(f"the reference exited with {proc.returncode}: {proc.stderr[-1500:]}", 1)
    if not lines:
        raise anchor.InputError(f"--jobs {jobs}: no such job reached Sia's policy in {workload}")
    return dest


def replay(workload: str, max_jobs: int | None, jobs: str, out: Path) -> Path:
    from quanta.policies import sia as policy
    from quanta.runner import SimulationRequest, run_simulations
    from quanta.reproduce import ADAPTERS
    from quanta.worlds import sia_agents
    targets = set(jobs.split(","))
    lines: list[str] = []
    now = [0.0]

    cand = policy.Sia._candidates

    def candidates(self, snap, seen, pinned, *rest):
        c = cand(self, snap, seen, pinned, *rest)
        now[0] = snap.now
        j, types = snap.jobs, snap.cluster.types
        for i, s in enumerate(j.specs):
            if s.job_id not in targets:
                continue
            holds = f"{types[int(j.gtype[i])]}:{int(j.gpus[i])}" if j.gpus[i] else None
            lines.append(f"TRACE t={snap.now:.0f} job={s.job_id} holds={holds}")
            sel = c.job == i
            for k in sorted(set(c.gtype[sel].tolist())):
                on = sel & (c.gtype == k)
                est = " ".join(f"{n}={r:.2f}" for n, r in zip(c.count[on].tolist(), c.rate[on].tolist()))
                lines.append(f"TRACE t={snap.now:.0f} job={s.job_id} estimate {types[k]} {est}")
        return c

    seg = sia_agents.LearningJobs.segment_end

    def segment_end(self, job, trained):
        got = self.pending.get(job.job_id)
        before = len(self.points.get(job.job_id, {}).get(got[0], {})) if got else 0
        seg(self, job, trained)
        if job.job_id in targets and got is not None and trained:
            tkey, key, point, stats = got
            if len(self.points[job.job_id][tkey]) > before:
                fit = tuple(round(float(x), 6) for x in self.fits[(job.job_id, tkey)])
                lines.append(f"TRACE t={now[0]:.0f} job={job.job_id} point {tkey} key={key} "
                             f"step={point[0]:.4f} sync={point[1]:.4f} "
                             f"grad=({stats[0]:.4g},{stats[1]:.4g}) fit={fit}")

    policy.Sia._candidates = candidates
    sia_agents.LearningJobs.segment_end = segment_end
    try:
        ad = ADAPTERS["sia"]
        trace, _n = ad.trace(workload)
        req = SimulationRequest(trace=trace, cluster=ad.cluster("aws:6x4,rtx:3x8,dgx-ext:2x8"),
                                policies=["sia"], out=None, plots=False, max_jobs=max_jobs,
                                world="sia-sim", drop_impossible=True)
        run_simulations(req)
    finally:
        policy.Sia._candidates = cand
        sia_agents.LearningJobs.segment_end = seg
    dest = out / "replay.txt"
    dest.write_text("\n".join(lines) + "\n")
    if not lines:
        raise anchor.InputError(f"--jobs {jobs}: no such job reached Sia's policy in {workload}")
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sia", help="checkout of siasosp23/artifacts (needed for --side reference/both)")
    ap.add_argument("--workload", required=True, help="a bundled Sia workload, e.g. sia_philly_workload-3")
    ap.add_argument("--max-jobs", type=int, default=None, help="keep only the first N jobs")
    ap.add_argument("--jobs", required=True, help="job names, comma-separated (e.g. yolov3-136)")
    ap.add_argument("--side", default="both", choices=("both", "reference", "replay"))
    ap.add_argument("--out", default="/tmp/sia_job_trace", help="folder for the two traces")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        if a.side in ("both", "reference"):
            if not a.sia:
                raise anchor.InputError("--sia PATH is needed for the reference's side")
            print(reference(Path(a.sia).expanduser(), a.workload, a.max_jobs, a.jobs, out))
        if a.side in ("both", "replay"):
            print(replay(a.workload, a.max_jobs, a.jobs, out))
    except anchor.InputError as e:
        anchor.die(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
