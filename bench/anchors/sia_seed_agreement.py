#!/usr/bin/env python3
"""How well do the reference's own runs agree with one another? Sia's simulator runs its Pollux
baseline with an unseeded genetic search; `bench/anchors/sia.py --seed S` seeds it, and some
workloads are recorded with several seeds (quanta/data/reference/PROVENANCE.md). This judges each
recorded run against every other run of its workload, under the issue's targets for Sia, Pollux
and Sia's Gavel baseline (average JCT within 10%, each application's average within 15%, makespan
within 10%), and, given the JSON of `quanta reproduce`, the replay against the reference under
the same targets, so that the two agreements can be read side by side:

    python bench/anchors/sia_seed_agreement.py [--policy pollux] [--replay OUT.json ...]

where OUT.json is `quanta reproduce pollux [--workload W] [--replay-seeds N] --json > OUT.json`;
with --recorded, the two-sample rows take each workload's reference runs as recorded now
(quanta/data/reference/, runs recorded since the replay included) instead of those in OUT.json.
Reference pairs are ordered (seed 1 judged against seed 0 and seed 0 against seed 1: the targets
are relative to the run judged against). Replay rows: each run replayed with its reference's seed
against that run, and, with --replay-seeds, the replay's mean over its seeds against the mean of
the reference's runs; then, over every workload with --replay-seeds rows, each measure pooled:
every run's value over its workload's reference mean, the reference's runs and the replay's as
two samples (is the replay longer or shorter across workloads, beyond the draws?).
"""

from __future__ import annotations

import argparse
import json
import sys
from itertools import permutations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from quanta.reproduce import (  # noqa: E402
    ADAPTERS, SIA_TARGETS, _by_app, plain_seed, recorded, seed_of, variant_of)

AVG, APP, MAKESPAN = SIA_TARGETS["avg_jct"], SIA_TARGETS["by_app"], SIA_TARGETS["makespan"]


def judge(ref: tuple[float, float, dict], other: tuple[float, float, dict]) -> dict:
    """`other` (average JCT, makespan, per-application averages) against `ref`."""
    apps = [a for a in ref[2] if a in other[2]]
    worst = max((abs(other[2][a] / ref[2][a] - 1) for a in apps), default=0.0)
    d_avg, d_mk = other[0] / ref[0] - 1, other[1] / ref[1] - 1
    return {"avg": d_avg, "makespan": d_mk, "worst_app": worst,
            "avg_ok": abs(d_avg) <= AVG, "makespan_ok": abs(d_mk) <= MAKESPAN,
            "apps_ok": worst <= APP}


def reference_runs(policy: str) -> dict[str, dict[int, tuple[float, float, dict]]]:
    """workload -> seed -> (average JCT, makespan, per-application averages), seconds."""
    out: dict[str, dict[int, tuple]] = {}
    for r in recorded(ADAPTERS["pollux" if policy == "pollux" else "sia"]):
        s = r.summary
        if s["policy"] != policy or not plain_seed(variant_of(s)):
            continue
        apps = _by_app(None, [j["application"] for j in r.jobs], [float(j["jct_s"]) for j in r.jobs])
        out.setdefault(s["workload"], {})[seed_of(s)] = (s["avg_jct_s"], s["makespan_s"], apps)
    return out


def _measure(run: tuple[float, float, dict], what: str) -> float | None:
    """A reference run's average JCT, makespan or application's average (None: no such job)."""
    return run[0] if what == "average JCT" else run[1] if what == "makespan" else run[2].get(what)


def _mean_run(by_seed: dict[int, tuple[float, float, dict]]) -> tuple[float, float, dict]:
    """The mean of reference runs (average JCT, makespan, each application's average)."""
    runs = list(by_seed.values())
    apps = {a for r in runs for a in r[2]}
    return (sum(r[0] for r in runs) / len(runs), sum(r[1] for r in runs) / len(runs),
            {a: sum(r[2][a] for r in runs if a in r[2]) / sum(a in r[2] for r in runs)
             for a in sorted(apps)})


def replay_rows(paths: list[str], policy: str, now: dict | None = None
                ) -> list[tuple[str, str, dict]]:
    """(workload, what, judgement) for each per-seed row and each two-sample row of the files;
    `now` (workload -> seed -> run, `reference_runs`): the reference runs the two-sample rows
    are judged against, where the workload has some (else the file's)."""
    out = []
    for p in paths:
        for r in json.loads(Path(p).read_text()):
            if r["policy"] != policy:
                continue
            rep = r["replay"]
            ref = (r["ref_avg_jct_s"], r["ref_makespan_s"], r["ref_by_app"])
            mine = (rep["avg_jct_matched_s"], rep["makespan_s"], rep["by_app"])
            if "spread" in r:
                what = r["variant"]
                if now and now.get(r["workload"]):
                    ref = _mean_run(now[r["workload"]])
                    what = f"{len(now[r['workload']])} reference (recorded now) / " \
                           f"{r['spread']['avg_jct']['replay_n']} replay seeds"
                out.append((r["workload"], what, judge(ref, mine)))
            elif plain_seed(r["variant"]):
                out.append((r["workload"], r["variant"] or "seed 0", judge(ref, mine)))
    return out


def pooled(paths: list[str], policy: str, now: dict | None = None
           ) -> dict[str, tuple[list[float], list[float]]]:
    """measure -> (the reference's runs, the replay's runs), each over its workload's reference
    mean, from the two-sample rows (`quanta reproduce --replay-seeds`) of the files; `now` as in
    `replay_rows`."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for p in paths:
        for r in json.loads(Path(p).read_text()):
            if r["policy"] != policy or "spread" not in r:
                continue
            sp = r["spread"]
            runs = list(now[r["workload"]].values()) if now and now.get(r["workload"]) else None
            for what, c in [("average JCT", sp["avg_jct"]), ("makespan", sp["makespan"]),
                            *sorted(sp["by_app"].items())]:
                refs = c["ref_runs"] if runs is None else \
                    [v for v in (_measure(x, what) for x in runs) if v is not None]
                mean = sum(refs) / len(refs)
                ref, rep = out.setdefault(what, ([], []))
                ref += [v / mean for v in refs]
                rep += [v / mean for v in c["replay_runs"]]
    return out


def line(workload: str, what: str, j: dict) -> str:
    flags = "".join(c if j[f"{k}_ok"] else "-" for c, k in zip("jma", ("avg", "makespan", "apps")))
    return (f"{workload:36s} {what:28s} avg {j['avg']:+7.1%}  makespan {j['makespan']:+7.1%}  "
            f"worst application {j['worst_app']:6.1%}  {flags}{'  ALL' if flags == 'jma' else ''}")


def tally(js: list[dict]) -> str:
    n = len(js)
    return (f"{n} comparisons: average within 10% on {sum(j['avg_ok'] for j in js)}, makespan "
            f"within 10% on {sum(j['makespan_ok'] for j in js)}, every application within 15% on "
            f"{sum(j['apps_ok'] for j in js)}, all three on "
            f"{sum(j['avg_ok'] and j['makespan_ok'] and j['apps_ok'] for j in js)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="pollux", help="reference policy (pollux, sia, gavel)")
    ap.add_argument("--replay", nargs="*", default=[], metavar="JSON",
                    help="`quanta reproduce ... --json` outputs to judge the same way")
    ap.add_argument("--recorded", action="store_true",
                    help="two-sample rows against the reference runs recorded now")
    a = ap.parse_args(argv)
    runs = reference_runs(a.policy)
    now = runs if a.recorded else None
    mine = []
    print(f"the reference against itself ({a.policy}; within the target: j = average JCT, "
          "m = makespan, a = every application)")
    for w, by in sorted(runs.items()):
        for s0, s1 in permutations(sorted(by), 2):
            j = judge(by[s0], by[s1])
            mine.append(j)
            print(line(w, f"seed {s1} against seed {s0}", j))
    print(tally(mine) if mine else "no workload recorded with two seeds or more")
    if a.replay:
        theirs = replay_rows(a.replay, a.policy, now)
        print(f"\nthe replay against the reference ({a.policy})")
        for w, what, j in theirs:
            print(line(w, what, j))
        per_run = [j for _w, what, j in theirs if what.startswith("seed")]
        spread = [j for _w, what, j in theirs if not what.startswith("seed")]
        if per_run:
            print("per run: " + tally(per_run))
        if spread:
            print("means over seeds: " + tally(spread))
        pool = pooled(a.replay, a.policy, now)
        if pool:
            from scipy.stats import ttest_ind
            print("\npooled over workloads (each run over its workload's reference mean; "
                  "Welch's t-test of the two samples)")
            for what, (ref, rep) in pool.items():
                p = ttest_ind(rep, ref, equal_var=False).pvalue if min(len(ref), len(rep)) > 1 \
                    else float("nan")
                print(f"{what:14s} reference {sum(ref) / len(ref):5.2f} ({len(ref):2d} runs)  "
                      f"replay {sum(rep) / len(rep):5.2f} ({len(rep):2d} runs)  p = {p:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
