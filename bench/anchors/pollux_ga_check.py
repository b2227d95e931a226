#!/usr/bin/env python3
"""Pollux's search and what it searches, the replay's against the reference's, on the same
rounds: given a round's inputs as the replay has them, (1) the speedup tables the reference's own
code computes from the same learned profiles and gradient statistics (goodput.py
`fit_perf_params`, `GoodputFunction`, speedup.py `SpeedupFunction`, the fair-share base of
pollux_unaware.py:247-260) against the replay's, and (2) the reference's genetic search
(pollux_unaware.py's Problem operators under pymoo 0.4.2.1's NSGA-II, as its `optimize` runs
them) against the replay's (`quanta/policies/pollux_ga.py`), each drawn many times from that
round's starting population: the best solution's power mean and how many jobs it moves.

    python bench/anchors/pollux_ga_check.py --sia PATH --workload sia_philly_workload-1 \\
        --max-jobs 30 [--seed 0] [--rounds 30,45,60,75,90,105] [--draws 30] [--work DIR]
        [--side both|replay]

The rounds are those of `quanta simulate --world sia-sim --policy pollux --seed S` on the
workload's first N jobs on Sia's default cluster (6 x 4 T4, 3 x 8 RTX, 2 x 8 A100: 16 virtual
nodes of 4 GPUs; a round = one decision of the run, from 0). The reference's side runs
in the venv of `bench/anchors/sia.py` on its export of sia-simulator (`--sia`: a checkout of
siasosp23/artifacts or its bare git dir); `--side replay` runs only the replay's draws. Moved
jobs are counted after the majority-type repair (cluster_unaware.py:448-503).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sia as anchor  # noqa: E402  (bench/anchors/sia.py)

DRIVER = """\
import json, os, sys
import numpy as np
sys.path.insert(0, os.getcwd())
import pymoo.model.problem, pymoo.optimize
from pymoo.algorithms.nsga2 import NSGA2
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting
import pollux_unaware as PU
from goodput import GoodputFunction, GradParams, fit_perf_params
from speedup import SpeedupFunction
work, rounds, draws = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])

class Job:
    pass

def problem(r):
    base, table, n = r["base"], r["table"], len(r["base"])
    jobs = []
    for j in range(n):
        o = Job()
        t = table[j]
        o.speedup_fn = (lambda t: lambda nn, k: t[np.minimum(nn, t.shape[0] - 1),
                                                  np.minimum(k, t.shape[1] - 1)])(t)
        o.max_replicas, o.min_replicas = int(r["cap"][j]), 0
        f = float(r["factor"][j])          # the restart factor as (age, 0 restarts)
        o.num_restarts, o.age = 0, (30 * f / (1 - f) if f < 1 else 1e18)
        jobs.append(o)
    P = PU.Problem.__new__(PU.Problem)
    P.p_fairness, P._jobs, P._nodes = float(r["p"]), jobs, list(range(base.shape[1]))
    P._base_state = base.astype(int)
    P._job_resources = np.ones((n, 1), np.int64)
    P._node_resources = r["res"].astype(np.int64)[:, None]
    P._dominant_share = np.full(n, 1.0 / r["res"].sum())
    P._max_replicas = np.tile(r["res"].astype(int), (n, 1))
    pymoo.model.problem.Problem.__init__(P, n_var=base.size, n_obj=2, type_var=int)
    return P

for i in rounds:
    r = dict(np.load(f"{work}/{i}.npz"))
    n = len(r["base"])
    worst = 0.0
    for a in range(n):
        pts, grad = r[f"pts{a}"], r[f"grad{a}"]
        if len(pts) == 0 or np.isnan(grad).any():
            continue
        init_b, max_b, lo, hi = r[f"prof{a}"]
        perf = fit_perf_params(pts[:, 0], pts[:, 1], pts[:, 2], pts[:, 3] - pts[:, 4], pts[:, 3])
        gf = GoodputFunction(perf, GradParams(grad[0], grad[1]), int(init_b))
        sf = SpeedupFunction(gf, max_b, (int(lo), int(hi)), accumulation=True, tune_bsz=True)
        sf._base_goodput = gf.optimize(num_nodes=1, num_replicas=float(r["fair"]),
                                       max_batch_size=max_b, atomic_bsz_range=(int(lo), int(hi)),
                                       accumulation=True)[0]
        cap = int(r["cap"][a])
        rr, nn = np.meshgrid(np.arange(1, cap + 1), np.arange(1, 17))
        ok = nn <= rr
        ref = sf(nn[ok], rr[ok])
        mine = r["table"][a][nn[ok], rr[ok]]
        worst = max(worst, float(np.max(np.abs(mine / ref - 1))))
    print(json.dumps({"round": int(i), "table_worst": worst, "jobs": n}), flush=True)
    P = problem(r)
    for s in range(draws):
        np.random.seed(1000 + s)
        alg = NSGA2(pop_size=100, sampling=r["init"].reshape(len(r["init"]), -1),
                    crossover=PU.Crossover(), mutation=PU.Mutation(), repair=PU.Repair())
        res = pymoo.optimize.minimize(P, alg, ("n_gen", 100))
        X = res.X.reshape(len(res.X), *r["base"].shape)
        front = NonDominatedSorting().do(res.F, only_non_dominated_front=True)
        X, F = X[front], res.F[front]
        b = int(np.argmin(F[:, 0]))
        print(json.dumps({"round": int(i), "draw": s, "best": X[b].tolist(), "F": F[b].tolist()}),
              flush=True)
"""


class _Enough(Exception):
    """The last round asked for is kept: the run need not go on."""


def dump_rounds(workload: str, max_jobs: int, seed: int, rounds: list[int], work: Path) -> None:
    """Replay the workload under sia-sim and keep the chosen rounds' search inputs (speedup
    tables, current allocation, caps, restart factors, starting population) and each job's
    learned profile, gradient statistics and batch limits, in Pollux's job order."""
    from quanta.perf.pollux_online import MERGED
    from quanta.policies import pollux
    from quanta.reproduce import TRACES_DIR
    from quanta.runner import SimulationRequest, run_simulations
    work.mkdir(parents=True, exist_ok=True)
    state = {"round": 0, "jobs": None}
    real_ga, real_nsga2 = pollux.Pollux._decide_ga, pollux.nsga2

    def nsga2(rng, prob, init, pop, gens):
        X, F = real_nsga2(rng, prob, init, pop, gens)
        k = state["round"]
        if k in rounds:
            np.savez(work / f"{k}.npz", table=prob.table, base=prob.base, cap=prob.cap,
                     res=prob.res, factor=prob.factor, p=prob.p, scale=prob.scale, init=init,
                     **state["jobs"])
        return X, F

    def decide_ga(self, snap, st, main, cap):
        j = snap.jobs
        order = pollux.ga_order(j)
        if state["round"] in rounds:
            cl = snap.cluster
            vn = pollux.VirtualNodes(cl, snap.node_up)
            jobs = {"fair": np.array(np.ceil(vn.res.sum() / len(order))),   # as _decide_ga
                    "vtype": vn.type, "types": np.array(cl.types)}
            for a, i in enumerate(order.tolist()):
                row = int(j.rows[i])
                pts = st.get("points", {}).get((row, MERGED)) or {}
                prof = snap.perf.goodput_profile(j.specs[i], cl.types[main])
                jobs[f"pts{a}"] = np.array([(*k, *v) for k, v in pts.items()], dtype=float
                                           ).reshape(-1, 5)
                jobs[f"grad{a}"] = np.array(st.get("grad", {}).get(row, (np.nan, np.nan)))
                jobs[f"prof{a}"] = np.array([prof.init_batch, prof.max_batch, prof.min_local,
                                             prof.max_local], dtype=float)
            state["jobs"] = jobs
        dec = real_ga(self, snap, st, main, cap)
        state["round"] += 1
        if state["round"] > max(rounds):
            raise _Enough
        return dec

    pollux.Pollux._decide_ga, pollux.nsga2 = decide_ga, nsga2
    try:
        req = SimulationRequest(trace=str(TRACES_DIR / f"{workload}.csv"), format="auto",
                                cluster="t4:6x4,rtx:3x8,a100:2x8", policies=["pollux"],
                                seed=seed, out=None, plots=False, max_jobs=max_jobs,
                                world="sia-sim", drop_impossible=True)
        run_simulations(req)
    except _Enough:
        pass
    finally:
        pollux.Pollux._decide_ga, pollux.nsga2 = real_ga, real_nsga2
    missing = [k for k in rounds if not (work / f"{k}.npz").is_file()]
    if missing:
        raise anchor.InputError(f"--rounds: the run has no round {missing[0]} with jobs "
                                f"(it made {state['round']} decisions)")


def replay_draws(work: Path, rounds: list[int], draws: int) -> list[dict]:
    from quanta.policies.pollux_ga import Problem, nsga2
    out = []
    for k in rounds:
        r = dict(np.load(work / f"{k}.npz"))
        prob = Problem(r["table"], r["base"], r["cap"], r["res"], r["factor"], float(r["p"]),
                       float(r["scale"]))
        for s in range(draws):
            X, F = nsga2(np.random.default_rng(1000 + s), prob, r["init"], 100, 100)
            b = int(np.argmin(F[:, 0]))
            out.append({"round": k, "draw": s, "best": X[b].tolist(), "F": F[b].tolist()})
    return out


def reference_draws(sia: Path, work: Path, rounds: list[int], draws: int) -> tuple[list, dict]:
    sim, _commit, _notes = anchor.export_source(sia)
    py = anchor.ensure_venv()
    proc = subprocess.run([str(py), "-c", DRIVER, str(work), ",".join(map(str, rounds)),
                           str(draws)], cwd=sim, capture_output=True, text=True,
                          env={"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1",
                               "PATH": "/usr/bin:/bin"})
    if proc.returncode != 0:
        anchor.die(f"the reference's search exited with {proc.returncode}: "
                   f"{proc.stderr[-1500:]}", 1)
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return [d for d in lines if "draw" in d], {d["round"]: d for d in lines if "table_worst" in d}


def moved(draw: dict, r: dict) -> int:
    """Jobs whose row the best solution changes, after the majority-type repair."""
    from quanta.policies.pollux_ga import keep_one_type
    types = tuple(r["types"].tolist())
    best = np.array(draw["best"])
    kept = np.array([keep_one_type(row, r["vtype"], types) for row in best])
    return int((kept != r["base"]).any(axis=1).sum())


def summarise(work: Path, rounds: list[int], sides: dict[str, list[dict]], tables: dict) -> None:
    from scipy.stats import ttest_ind
    pooled: dict[str, list[int]] = {s: [] for s in sides}
    for k in rounds:
        r = dict(np.load(work / f"{k}.npz"))
        cells = [f"round {k:4d}  {len(r['base']):2d} jobs"]
        if k in tables:
            cells.append(f"tables within {tables[k]['table_worst']:.1e}")
        for side, draws in sides.items():
            mine = [d for d in draws if d["round"] == k]
            f0 = np.array([-d["F"][0] for d in mine])
            mv = [moved(d, r) for d in mine]
            pooled[side] += mv
            cells.append(f"{side}: power mean {f0.mean():.4f} ± {f0.std():.4f}, "
                         f"moves {np.mean(mv):.2f}")
        print("  ".join(cells))
    line = []
    for side, mv in pooled.items():
        line.append(f"{side} {np.mean(mv):.3f} moves a solution ({len(mv)} draws)")
    if len(pooled) == 2:
        a, b = pooled.values()
        line.append(f"Welch p = {ttest_ind(a, b, equal_var=False).pvalue:.2f}")
    print("over the rounds: " + ", ".join(line))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sia", help="checkout of siasosp23/artifacts or its bare git dir")
    ap.add_argument("--workload", required=True,
                    help="bundled Sia workload, e.g. sia_philly_workload-1")
    ap.add_argument("--max-jobs", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0, help="the replay run's seed")
    ap.add_argument("--rounds", default="30,45,60,75,90,105", help="decisions of the run, from 0")
    ap.add_argument("--draws", type=int, default=30, help="searches per round and side")
    ap.add_argument("--work", default="/tmp/pollux_ga_check")
    ap.add_argument("--side", default="both", choices=("both", "replay"))
    a = ap.parse_args(argv)
    try:
        try:
            rounds = [int(x) for x in a.rounds.split(",")]
        except ValueError:
            raise anchor.InputError(f"--rounds {a.rounds!r}: decisions as numbers, e.g. 30,45")
        if a.side == "both" and not a.sia:
            raise anchor.InputError("--sia PATH is needed for the reference's side "
                                    "(or --side replay)")
        work = Path(a.work) / f"{a.workload}_first{a.max_jobs}_s{a.seed}"
        dump_rounds(a.workload, a.max_jobs, a.seed, rounds, work)
        sides = {"replay": replay_draws(work, rounds, a.draws)}
        tables = {}
        if a.side == "both":
            sides["reference"], tables = reference_draws(Path(a.sia).expanduser(), work, rounds,
                                                         a.draws)
        summarise(work, rounds, sides, tables)
    except anchor.InputError as e:
        anchor.die(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
