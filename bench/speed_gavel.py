"""Speed against Gavel's own simulator: the same Gavel-format trace and policies through Gavel's
simulator (unchanged, bench/anchors/gavel.py) and `quanta simulate`, wall times and average JCTs
side by side.

    python bench/speed_gavel.py --gavel PATH [--trace FILE | --rate 30 --jobs 600 --seed 1
        [--multi-gpu]] [--policies max_min_fairness_perf,max_min_fairness,fifo_perf,
        finish_time_fairness_perf] [--worlds gavel-sim,quanta] [--repeat N]
        [--quanta CHECKOUT] [--baseline CHECKOUT] [--no-gavel] [--no-combined] [--work DIR]
        [--json FILE]

PATH is a Gavel checkout or the bare git dir `fetch github:stanford-futuredata/gavel` gives (Gavel
is not a dependency: bench/anchors/gavel.py exports it and builds its venv once, under
~/.cache/anchors/gavel). Without --trace, a trace is made once with Gavel's own generator
(`gavel.py generate --rate R --jobs N --seed S`) into --work (default
~/.cache/anchors/gavel/speed) and reused after that: `single_r30_n600_s1.trace` for the defaults.
--trace FILE: a path, or the bare name of a trace in --work (one made so).

Per Gavel policy (Quanta's policy of the same name: quanta.worlds.gavel_sim.GAVEL_POLICIES):
- Gavel: `gavel.py run --trace T --policy P --seed S` (cluster 36:36:36, one GPU per server, ECOS,
  360 s rounds). Wall = Gavel's process (its Python, imports, trace reading, simulate()), as
  gavel.py measures it; loop = its Scheduler.simulate() alone.
- Quanta, per world: `python -m quanta.cli simulate --trace T --format gavel --cluster
  v100:36x1,p100:36x1,k80:36x1 --policy Q --seed S --world W --quiet --no-plots` (one process
  per policy, as Gavel's). Wall = that process; loop = its "simulated in" time (report.md).
  `--world gavel-sim` is Gavel's simulator's world and mechanism (the one to compare results
  with); `--world quanta` is Quanta's own (its defaults: 30 s restart, allocation recomputed at
  every change, vertex solutions).
- Unless --no-combined: one `quanta simulate` process per world with every policy at once (imports
  paid once), against the sum of Gavel's processes.

Average JCT: Gavel's over the jobs it finished (it drops some multi-GPU jobs, gavel.md W7),
Quanta's over the same jobs; diff = Quanta / Gavel - 1.

--quanta CHECKOUT times the Quanta at CHECKOUT (run with PYTHONPATH=CHECKOUT) instead of the
one this Python imports. --baseline CHECKOUT also times the Quanta at CHECKOUT (e.g. `git worktree add /tmp/wt_old HEAD`),
run with PYTHONPATH=CHECKOUT, alternating with the current code in every repeat (the order flips
from one repeat to the next), so that both see the same machine load. Results of the two are
compared file by file (jobs.csv of every policy): "same" means byte-identical outputs.
Times are the median over --repeat (min in brackets). OMP_NUM_THREADS=1 for every process;
Python bytecode cached as in a normal install (PYTHONDONTWRITEBYTECODE removed), after one
untimed warm-up process per side that writes the caches.
"""

from __future__ import annotations

import argparse
import csv
import filecmp
import json
import os
import re
import resource
import statistics
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "anchors"))

import gavel as anchor  # noqa: E402  (bench/anchors/gavel.py: Gavel's generator and simulator)

CLUSTER = "36:36:36"
QUANTA_CLUSTER = "v100:36x1,p100:36x1,k80:36x1"     # quanta.reproduce._gavel_cluster("36:36:36")
DEFAULT_POLICIES = "max_min_fairness_perf,max_min_fairness,fifo_perf,finish_time_fairness_perf"
SIM_RE = re.compile(r"`([^`]+)`: \d+ events, \d+ decisions, simulated in ([0-9.]+) s "
                    r"\(policy ([0-9.]+) s\)")


def gavel_policies() -> dict[str, tuple[str, bool]]:
    from quanta.worlds.gavel_sim import GAVEL_POLICIES
    return GAVEL_POLICIES


def env_for(pythonpath: str | None) -> dict:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env.pop("PYTHONPATH", None)
    # bytecode cached as a normal install does (some machines set PYTHONDONTWRITEBYTECODE: then
    # every process compiles every module again, ~0.2 s of Quanta's start-up and Gavel's alike);
    # the untimed warm-up runs in main() write the caches of both
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def make_trace(a: argparse.Namespace, work: Path) -> Path:
    if a.trace:
        p = Path(a.trace).expanduser()
        if not p.is_file() and p.name == a.trace:      # a bare name: one this bench made
            p = work / a.trace
        if not p.is_file():
            raise SystemExit(f"speed_gavel.py: --trace {a.trace}: no such file (here or in {work})")
        return p.resolve()
    kind = "multi" if a.multi_gpu else "single"
    rate = f"{a.rate:g}".replace(".", "p")
    p = work / f"{kind}_r{rate}_n{a.jobs}_s{a.seed}.trace"
    if not p.is_file():
        args = ["--gavel", a.gavel, "generate", "--rate", str(a.rate), "--jobs", str(a.jobs),
                "--seed", str(a.seed), "--out", str(p)] + (["--multi-gpu"] if a.multi_gpu else [])
        if anchor.main(args) != 0:
            raise SystemExit("speed_gavel.py: Gavel's generator failed")
    return p


def cpu_children() -> float:
    """User + system CPU seconds of the finished child processes so far (their own children
    included): a measure less sensitive than wall time to other work on the machine."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_gavel(trace: Path, policy: str, seed: int, work: Path, gavel: str) -> dict:
    out = work / "gavel"
    c0 = cpu_children()
    r = subprocess.run([sys.executable, str(HERE / "anchors" / "gavel.py"), "--gavel", gavel, "run",
                        "--trace", str(trace), "--policy", policy, "--seed", str(seed),
                        "--cluster", CLUSTER, "--out", str(out)],
                       capture_output=True, text=True, env=env_for(None))
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:300]}
    cpu = cpu_children() - c0       # (gavel.py's own start-up included: ~0.1 s)
    info = json.loads(r.stdout.strip().splitlines()[-1])
    res = anchor.cache_dir() / "runs" / f"{trace.stem}__{policy}__{CLUSTER.replace(':', '-')}_s{seed}.result.json"
    sim_s = json.loads(res.read_text())["sim_s"] if res.is_file() else float("nan")
    jct = {}
    with open(out / f"{trace.stem}__{policy}.csv", newline="") as f:
        for row in csv.DictReader(f):
            jct[row["name"]] = float(row["jct_s"])
    return {"wall": float(info["wall_s"]), "loop": sim_s, "cpu": cpu, "jct": jct}


def run_quanta(trace: Path, specs: list[str], seed: int, world: str, out: Path,
               pythonpath: str | None) -> dict:
    cmd = [sys.executable, "-m", "quanta.cli", "simulate", "--trace", str(trace), "--format", "gavel",
           "--cluster", QUANTA_CLUSTER, "--seed", str(seed), "--world", world, "--out", str(out),
           "--quiet", "--no-plots"]
    for s in specs:
        cmd += ["--policy", s]
    shutil.rmtree(out, ignore_errors=True)    # this bench's own folder: a repeat writes afresh
    out.mkdir(parents=True)                   # (quanta simulate refuses an earlier run's files)
    c0 = cpu_children()
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env_for(pythonpath), cwd=str(out.parent))
    wall = time.perf_counter() - t0
    cpu = cpu_children() - c0
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:300]}
    loops = {m.group(1): float(m.group(2)) for m in SIM_RE.finditer((out / "report.md").read_text())}
    jct = {}
    for s in specs:
        with open(out / s / "jobs.csv", newline="") as f:
            jct[s] = {row["job_id"]: float(row["jct_s"]) for row in csv.DictReader(f)
                      if row["state"] == "finished"}
    return {"wall": wall, "loop": loops, "cpu": cpu, "jct": jct}


def same_outputs(a: Path, b: Path, specs: list[str]) -> bool:
    try:
        return all(filecmp.cmp(a / s / "jobs.csv", b / s / "jobs.csv", shallow=False) for s in specs)
    except FileNotFoundError:      # (a run failed: its error is printed)
        return False


def avg_over(jct: dict[str, float], names) -> float:
    vals = [jct[n] for n in names if n in jct]
    return sum(vals) / len(vals) if vals else float("nan")


def fmt_t(xs: list[float]) -> str:
    xs = [x for x in xs if x == x]
    if not xs:
        return "-"
    return f"{statistics.median(xs):.2f}" + (f" ({min(xs):.2f})" if len(xs) > 1 else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gavel", required=True, help="Gavel checkout or bare git dir")
    ap.add_argument("--trace", help="a Gavel-format trace (default: generated with Gavel's generator)")
    ap.add_argument("--rate", type=float, default=30.0, help="jobs per hour (generated trace)")
    ap.add_argument("--jobs", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1, help="generator seed, and both simulators' --seed")
    ap.add_argument("--multi-gpu", action="store_true")
    ap.add_argument("--policies", default=DEFAULT_POLICIES, help="Gavel policy names")
    ap.add_argument("--worlds", default="gavel-sim,quanta")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--quanta", help="the Quanta checkout to time (PYTHONPATH; default: the one "
                                     "this Python imports)")
    ap.add_argument("--baseline", help="another Quanta checkout to time in alternation (PYTHONPATH)")
    ap.add_argument("--no-gavel", action="store_true", help="skip Gavel's simulator")
    ap.add_argument("--no-combined", action="store_true",
                    help="skip the one-process-for-all-policies runs")
    ap.add_argument("--work", default=str(anchor.cache_dir() / "speed"))
    ap.add_argument("--json", help="write every measurement here")
    a = ap.parse_args(argv)
    work = Path(a.work).expanduser().resolve()
    work.mkdir(parents=True, exist_ok=True)
    table = gavel_policies()
    policies = [p for p in a.policies.split(",") if p]
    bad = [p for p in policies if p not in table]
    if bad:
        print(f"speed_gavel.py: no Quanta policy for Gavel's {bad[0]} (known: {', '.join(table)})",
              file=sys.stderr)
        return 2
    worlds = [w for w in a.worlds.split(",") if w]
    trace = make_trace(a, work)
    spec = {p: table[p][0] for p in policies}
    variants = [("new", str(Path(a.quanta).resolve()) if a.quanta else None)]
    if a.baseline:
        variants.append(("old", str(Path(a.baseline).resolve())))
    load0 = os.getloadavg()
    print(f"trace {trace} ({sum(1 for ln in trace.read_text().splitlines() if ln.strip())} jobs), "
          f"seed {a.seed}; load average at start {load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f} "
          f"on {os.cpu_count()} cores", flush=True)
    # warm-up, untimed: each side's first process compiles its modules (bytecode caches)
    if not a.no_gavel:
        run_gavel(trace, policies[0], a.seed, work, a.gavel)
    for w in worlds:
        for name, pp in variants:
            run_quanta(trace, list(spec.values()), a.seed, w, work / f"warmup_{name}" / w, pp)
    gav: dict[str, list[dict]] = {p: [] for p in policies}
    qu: dict[tuple, list[dict]] = {}
    same: dict[tuple, list[bool]] = {}
    for rep in range(a.repeat):
        order = variants if rep % 2 == 0 else variants[::-1]
        for p in policies:
            if not a.no_gavel:
                g = run_gavel(trace, p, a.seed, work, a.gavel)
                gav[p].append(g)
                print(f"  [{rep}] gavel {p}: " + (g.get("error") or f"{g['wall']:.2f} s"), flush=True)
            for w in worlds:
                for name, pp in order:
                    out = work / f"quanta_{name}" / w / p
                    q = run_quanta(trace, [spec[p]], a.seed, w, out, pp)
                    qu.setdefault((name, w, p), []).append(q)
                    print(f"  [{rep}] quanta {name} {w} {spec[p]}: "
                          + (q.get("error") or f"{q['wall']:.2f} s"), flush=True)
                if len(variants) == 2:
                    same.setdefault((w, p), []).append(same_outputs(
                        work / "quanta_new" / w / p, work / "quanta_old" / w / p, [spec[p]]))
        if not a.no_combined:
            for w in worlds:
                for name, pp in order:
                    out = work / f"quanta_{name}" / w / "all"
                    q = run_quanta(trace, list(spec.values()), a.seed, w, out, pp)
                    qu.setdefault((name, w, "all"), []).append(q)
                    print(f"  [{rep}] quanta {name} {w} all policies: "
                          + (q.get("error") or f"{q['wall']:.2f} s"), flush=True)
    load1 = os.getloadavg()
    ok = lambda xs: [x for x in xs if "error" not in x]   # noqa: E731
    print()
    print(f"Times in seconds: median over {a.repeat} run(s) (min in brackets). Gavel: wall of its "
          f"process / its simulate() loop; Quanta: wall of `quanta simulate` / its simulation loop.")
    head = "| Gavel policy | Gavel wall | Gavel loop | Gavel avg JCT (h) | world | Quanta policy |"
    rule = "|---|---|---|---|---|---|"
    for name, _ in variants:
        head += f" Quanta {name} wall | {name} loop |"
        rule += "---|---|"
    head += " Quanta avg JCT (h) | diff | speed-up wall | speed-up loop |"
    rule += "---|---|---|---|"
    if len(variants) == 2:
        head += " new vs old wall | outputs |"
        rule += "---|---|"
    print(head)
    print(rule)
    rows = []
    for p in policies:
        g = ok(gav[p])
        gw = [x["wall"] for x in g]
        gl = [x["loop"] for x in g]
        names = list(g[0]["jct"]) if g else None
        g_avg = avg_over(g[0]["jct"], names) / 3600 if g else float("nan")
        for w in worlds:
            line = f"| {p} | {fmt_t(gw)} | {fmt_t(gl)} | {g_avg:.3f} | {w} | {spec[p]} |"
            walls = {}
            for name, _ in variants:
                q = ok(qu.get((name, w, p), []))
                walls[name] = [x["wall"] for x in q]
                line += f" {fmt_t(walls[name])} | {fmt_t([x['loop'].get(spec[p], float('nan')) for x in q])} |"
            qn = ok(qu.get(("new", w, p), []))
            jq = qn[0]["jct"][spec[p]] if qn else {}
            q_avg = avg_over(jq, names if names else list(jq)) / 3600
            diff = q_avg / g_avg - 1 if g else float("nan")
            sw = statistics.median(gw) / statistics.median(walls["new"]) if gw and walls["new"] else float("nan")
            ql = [x["loop"].get(spec[p], float("nan")) for x in qn]
            sl = statistics.median(gl) / statistics.median(ql) if gl and ql else float("nan")
            line += f" {q_avg:.3f} | {diff:+.2%} | {sw:.1f}x | {sl:.1f}x |"
            if len(variants) == 2:
                r = statistics.median(walls["old"]) / statistics.median(walls["new"]) \
                    if walls["old"] and walls["new"] else float("nan")
                s = same.get((w, p), [])
                line += f" {r:.2f}x | {'same' if s and all(s) else 'differ'} |"
            print(line)
            rows.append({"policy": p, "world": w, "gavel_wall": gw, "gavel_loop": gl,
                         "gavel_avg_jct_h": g_avg, "quanta_avg_jct_h": q_avg,
                         **{f"quanta_{n}_wall": walls[n] for n, _ in variants}})
    print()
    print("CPU seconds (user + system) of the same processes, median (min):")
    print("| Gavel policy | Gavel | world | " + " | ".join(f"Quanta {n}" for n, _ in variants)
          + " | speed-up (CPU) |")
    print("|---|---|---|" + "---|" * len(variants) + "---|")
    for p in policies:
        gc = [x["cpu"] for x in ok(gav[p])]
        for w in worlds:
            cols = {n: [x["cpu"] for x in ok(qu.get((n, w, p), []))] for n, _ in variants}
            sp = statistics.median(gc) / statistics.median(cols["new"]) if gc and cols["new"] \
                else float("nan")
            print(f"| {p} | {fmt_t(gc)} | {w} | " + " | ".join(fmt_t(cols[n]) for n, _ in variants)
                  + f" | {sp:.1f}x |")
            for r in rows:
                if r["policy"] == p and r["world"] == w:
                    r.update({"gavel_cpu": gc, **{f"quanta_{n}_cpu": cols[n] for n, _ in variants}})
    if not a.no_combined:
        tot = [sum(vals) for vals in zip(*[[x["wall"] for x in ok(gav[p])] for p in policies])] \
            if not a.no_gavel else []
        print()
        gcpu = [sum(vals) for vals in zip(*[[x["cpu"] for x in ok(gav[p])] for p in policies])] \
            if not a.no_gavel else []
        print(f"All {len(policies)} policies: Gavel, one process each, summed: {fmt_t(tot)} s wall, "
              f"{fmt_t(gcpu)} s CPU")
        for w in worlds:
            line = f"- `quanta simulate --world {w}` with all of them in one process:"
            for name, _ in variants:
                q = ok(qu.get((name, w, "all"), []))
                wl = [x["wall"] for x in q]
                cl = [x["cpu"] for x in q]
                line += f" {name} {fmt_t(wl)} s wall, {fmt_t(cl)} s CPU"
                if name == "new" and tot and wl:
                    line += f" ({statistics.median(tot) / statistics.median(wl):.1f}x Gavel's wall)"
                line += ";"
            print(line.rstrip(";"))
    print()
    print(f"load average at end {load1[0]:.2f} / {load1[1]:.2f} / {load1[2]:.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"trace": str(trace), "load_start": load0,
                                            "load_end": load1, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
