"""`quanta reproduce SYSTEM`: Quanta's policies on a seed system's own workloads, beside the numbers
that system's own simulator gave (recorded in quanta/data/reference/, see its PROVENANCE.md).

Each recorded reference run (common format: bench/anchors/common.py) names a workload, a policy
of the reference and its cluster. Quanta replays the same workload with the matching policy twice:
under the reference's replay profile (`--world <system>-sim`) and under Quanta's own world, and
reports average JCT, makespan, per-application averages and the per-job JCT error against the
reference. A system's adapter (`Adapter`) says how its names map to Quanta's.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from quanta.core.jobtable import DROPPED
from quanta.errors import QuantaError
from quanta.paths import DATA_DIR

REFERENCE_DIR = DATA_DIR / "reference"
TRACES_DIR = DATA_DIR / "traces"


@dataclass(frozen=True)
class Adapter:
    system: str                      # folder under quanta/data/reference/
    world: str                       # its replay profile
    policies: dict[str, str]         # reference policy name -> Quanta policy spec
    cluster: Callable[[str], str]    # reference cluster string -> Quanta cluster spec
    trace: Callable[[str], tuple[str, int | None]] = field(
        default=lambda w: _bundled_trace(w))   # workload -> (trace path, max jobs)
    restart_delay: float = 30.0      # restart delay of the Quanta world (Quanta's default)
    format: str = "auto"             # the workload's trace format
    seed: Callable[[dict], int] = field(default=lambda summary: seed_of(summary))
    # the targets for the means (relative to the reference's): "avg_jct", "makespan",
    # "by_app" (each application's); a measure without one gets no verdict
    targets: dict[str, float] = field(default_factory=dict)


def seed_of(summary: dict) -> int:
    """The reference run's --seed (0 when it has none)."""
    m = re.search(r"--seed (\d+)", summary.get("command", ""))
    return int(m.group(1)) if m else 0


def variant_of(summary: dict) -> str:
    """What tells a reference run apart from the others of its workload and policy: its --seed
    and --solver when its command gives them ("seed 1", "solver highs"), else ""."""
    return ", ".join(f"{k} {v}" for k, v in re.findall(r"--(seed|solver) (\S+)",
                                                        summary.get("command", "")))


def _bundled_trace(workload: str) -> tuple[str, int | None]:
    """`name` or `name_firstN` -> the bundled trace file of that name (and N jobs)."""
    m = re.fullmatch(r"(.+)_first(\d+)", workload)
    name, n = (m.group(1), int(m.group(2))) if m else (workload, None)
    for sub in ("", "gavel_gen/", "tiresias/"):
        for ext in (".csv", ".trace"):
            p = TRACES_DIR / f"{sub}{name}{ext}"
            if p.exists():
                return str(p), n
    raise QuantaError(f"no bundled trace for the reference workload '{workload}'",
                      source=str(TRACES_DIR))


SIA_TYPES = {"aws": "t4", "rtx": "rtx", "dgx-ext": "a100", "dgx": "a100", "azure": "v100",
             "quad": "rtx6000"}


def _sia_cluster(spec: str) -> str:
    # "aws:6x4,rtx:3x8,dgx-ext:2x8" -> "t4:6x4,rtx:3x8,a100:2x8"
    parts = []
    for item in spec.split(","):
        name, _, shape = item.partition(":")
        parts.append(f"{SIA_TYPES.get(name, name)}:{shape}")
    return ",".join(parts)


def _gavel_cluster(spec: str) -> str:
    # "36:36:36" (V100:P100:K80, one GPU a server: --num_gpus_per_server 1:1:1)
    counts = [int(x) for x in spec.split(":")]
    return ",".join(f"{t}:{c}x1" for t, c in zip(("v100", "p100", "k80"), counts) if c)


def _gavel_policies() -> dict[str, str]:
    from quanta.worlds.gavel_sim import GAVEL_POLICIES
    return {g: q for g, (q, _agnostic) in GAVEL_POLICIES.items()}


def _tiresias_cluster(spec: str) -> str:
    # "1x16x4 (64 GPUs; switches x nodes x GPUs)" -> "v100:16x4"
    s, n, g = (int(x) for x in re.match(r"(\d+)x(\d+)x(\d+)", spec).groups())
    return f"v100:{s * n}x{g}"


def _tiresias_trace(workload: str) -> tuple[str, int | None]:
    # "tiresias_60_job_x10_1x2x4" -> the bundled tiresias_60_job_x10.csv
    return _bundled_trace(re.sub(r"_\d+x\d+x\d+$", "", workload))


def _tiresias_policies() -> dict[str, str]:
    # the authors' schedules (their placement schemes count / yarn / random give identical
    # results: these schedules only count GPUs); `gittins` is another algorithm, not replayed
    schedules = {"dlas-gpu": "tiresias-las", "dlas-gpu-2": "tiresias-las:promote_knob=2",
                 "dlas-gpu-8": "tiresias-las:promote_knob=8",
                 "dlas-gpu-gittins": "tiresias-gittins"}
    return {f"{s}_{scheme}": q for s, q in schedules.items() for scheme in ("count", "yarn", "random")}


# issue 16's targets: Sia, Pollux and Sia's Gavel baseline average JCT and makespan within 10%,
# each application's average within 15%; Gavel's average JCT within 2%, Tiresias' within 5%
SIA_TARGETS = {"avg_jct": 0.10, "makespan": 0.10, "by_app": 0.15}
ADAPTERS: dict[str, Adapter] = {
    "sia": Adapter("sia", "sia-sim", {"sia": "sia", "gavel": "gavel-throughput"}, _sia_cluster,
                   targets=SIA_TARGETS),
    "pollux": Adapter("sia", "sia-sim", {"pollux": "pollux"}, _sia_cluster, targets=SIA_TARGETS),
    "gavel": Adapter("gavel", "gavel-sim", _gavel_policies(), _gavel_cluster,
                     targets={"avg_jct": 0.02}),
    "tiresias": Adapter("tiresias", "tiresias-sim", _tiresias_policies(), _tiresias_cluster,
                        _tiresias_trace, format="tiresias", targets={"avg_jct": 0.05}),
}


@dataclass
class Reference:
    summary: dict
    jobs: list[dict]
    path: Path


def recorded(adapter: Adapter) -> list[Reference]:
    folder = REFERENCE_DIR / adapter.system
    out = []
    for p in sorted(folder.glob("*.json")):
        ref = load_reference(p)
        if ref.summary.get("policy") in adapter.policies:
            out.append(ref)
    return out


def load_reference(path: Path) -> Reference:
    """A recorded run: its summary (JSON) and its jobs (the CSV beside it)."""
    with open(path.with_suffix(".csv"), newline="") as f:
        return Reference(json.loads(path.read_text()), list(csv.DictReader(f)), path)


def _by_app(ids, apps, jct) -> dict[str, float]:
    acc: dict[str, list[float]] = {}
    for a, v in zip(apps, jct):
        acc.setdefault(a, []).append(v)
    return {a: float(np.mean(v)) for a, v in sorted(acc.items())}


def compare(ref: Reference, adapter: Adapter, world: str, seed: int | None = None) -> dict:
    """Run Quanta on the reference's workload in `world` (seed: the reference run's unless
    given); numbers side by side."""
    if seed is None:
        seed = adapter.seed(ref.summary)
    from quanta.runner import SimulationRequest, run_simulations
    from quanta.workloads.formats import load_trace  # noqa: F401  (trace formats registered)
    trace, max_jobs = adapter.trace(ref.summary["workload"])
    policy = adapter.policies[ref.summary["policy"]]
    req = SimulationRequest(trace=trace, format=adapter.format,
                            cluster=adapter.cluster(ref.summary["cluster"]),
                            policies=[policy], seed=seed, out=None, plots=False,
                            max_jobs=max_jobs, world=world, restart_delay=adapter.restart_delay,
                            drop_impossible=True)   # (the reference never finishes them either)
    rows, _header, results = run_simulations(req, keep_results=True)
    res = results[0]
    t = res.table
    ours = {s.job_id: float(t.end[i] - t.submit[i]) for i, s in enumerate(t.specs)}
    # the reference's job id where Quanta's reader keeps it, else its name (Gavel's traces have
    # no ids: Quanta numbers them, as the anchor's `name` column says)
    key = {j["job_id"]: j["job_id"] if j["job_id"] in ours else j["name"] for j in ref.jobs}
    ref_jct = {key[j["job_id"]]: float(j["jct_s"]) for j in ref.jobs}
    common = [k for k in ref_jct if k in ours and np.isfinite(ours[k])]
    err = [abs(ours[k] - ref_jct[k]) / ref_jct[k] for k in common if ref_jct[k] > 0]
    apps = {key[j["job_id"]]: j["application"] for j in ref.jobs}
    return {
        "avg_jct_s": rows[0]["avg_jct_s"], "makespan_s": rows[0]["makespan_s"],
        # over the jobs the reference finished (Gavel drops some multi-GPU jobs: gavel.md W7)
        "avg_jct_matched_s": float(np.mean([ours[k] for k in common])) if common else float("nan"),
        "matched": len(common), "dropped": int((t.state == DROPPED).sum()),
        "median_abs_err": float(np.median(err)) if err else float("nan"),
        "by_app": _by_app(common, [apps[k] for k in common], [ours[k] for k in common]),
        "world": world,
    }


def _compare_task(task: tuple[str, str, str, int | None]) -> dict:
    """`compare` for (system as `ADAPTERS` names it, recorded run's path, world, seed): what a
    worker process runs."""
    system, path, world, seed = task
    return compare(load_reference(Path(path)), ADAPTERS[system], world, seed)


def compare_all(system: str, runs: list[tuple[str, Reference, str, int | None]],
                workers: int | None = None, progress: Callable[[str], None] | None = None
                ) -> list[dict]:
    """`compare` for each (label, reference, world, seed) of `system` (an `ADAPTERS` name), in
    `workers` local processes (default: every core; 1 = in this process), results in the order
    given; `progress(message)` once at the start and as each one finishes ("replayed <label>").
    Each run is a function of its inputs, so the results do not depend on `workers`."""
    from quanta.executors import default_workers, one_thread, run_local
    out: list[dict | None] = [None] * len(runs)

    def done(i: int, res: dict) -> bool:
        out[i] = res
        if progress:
            progress(f"replayed {runs[i][0]}")
        return True
    n = min(workers or default_workers(), len(runs))
    if progress:
        progress(f"replaying {len(runs)} runs, {n} at a time")
    run_local(_compare_task, [(system, str(ref.path), world, seed)
                              for _, ref, world, seed in runs], n, done, one_thread)
    return out


def reproduce(system: str, workload: str | None = None, policy: str | None = None,
              seed: int | None = None, progress: Callable[[str], None] | None = None,
              ref_seed: int | None = None, replay_seeds: int = 0,
              workers: int | None = None) -> list[dict]:
    """Every recorded run of `system` (only `workload`, `policy`, and the reference's seed
    `ref_seed` if given), replayed; Quanta's runs take `seed`, else each reference run's own.
    With `replay_seeds` N, each workload and policy is also replayed with seeds 0..N-1 and
    compared with its reference runs as two samples (`seed_spread`). The runs go to `workers`
    local processes (default: every core; 1 = in this process); `progress(message)` at the start
    and as each one finishes."""
    adapter = ADAPTERS.get(system)
    if adapter is None:
        raise QuantaError(f"no recorded references for '{system}' (known: {', '.join(sorted(ADAPTERS))})",
                          field="SYSTEM")
    if seed is not None:                     # (before the plan is printed)
        from quanta.runner import check_seed
        check_seed(seed)
    every = recorded(adapter)
    # runs that share a workload and a policy (other seeds, another solver) are told apart
    shared = Counter((r.summary["workload"], r.summary["policy"]) for r in every)
    refs = [r for r in every
            if (workload is None or r.summary["workload"] == workload)
            and (policy is None or r.summary["policy"] == policy)
            and (ref_seed is None or adapter.seed(r.summary) == ref_seed)]
    if not refs:
        def shown(v: str | None) -> str:
            return "any" if v is None else repr(v)
        known = []
        for key, given, plural in (("workload", workload, "workloads"),
                                   ("policy", policy, "policies")):
            names = sorted({str(r.summary[key]) for r in every})
            if given is not None and given not in names:
                more = f" and {len(names) - 12} more" if len(names) > 12 else ""
                known.append(f"{plural}: {', '.join(names[:12])}{more}")
        raise QuantaError(f"no recorded reference run of {system} matches "
                          f"(workload={shown(workload)}, policy={shown(policy)}"
                          + ("" if ref_seed is None else f", seed {ref_seed}") + ")"
                          + (f"; recorded {'; '.join(known)}" if known else ""),
                          source=str(REFERENCE_DIR / adapter.system))
    out = []
    runs: list[tuple[str, Reference, str, int | None]] = []     # (label, reference, world, seed)
    for ref in refs:
        s = ref.summary
        variant = variant_of(s) if shared[(s["workload"], s["policy"])] > 1 else ""
        what = f"{s['workload']} / {s['policy']}" + (f" ({variant})" if variant else "")
        apps = [j["application"] for j in ref.jobs]
        row = {"workload": s["workload"], "policy": s["policy"], "variant": variant,
               "quanta_policy": adapter.policies[s["policy"]], "jobs": s["jobs"],
               "ref_avg_jct_s": s["avg_jct_s"], "ref_makespan_s": s["makespan_s"],
               "ref_by_app": _by_app(None, apps, [float(j["jct_s"]) for j in ref.jobs]),
               "ref_command": s.get("command", ""), "ref_commit": s.get("reference_commit", ""),
               "replay": {"seed": adapter.seed(s) if seed is None else seed}}
        runs += [(what, ref, adapter.world, seed), (f"{what}, Quanta's world", ref, "quanta", seed)]
        out.append(row)
    workloads = {(r.summary["workload"], r.summary["policy"]): r for r in refs}
    more = spread_needs(out, replay_seeds) if replay_seeds else []
    runs += [(f"{w} / {p} (replay seed {k})", workloads[(w, p)], adapter.world, k)
             for (w, p), k in more]
    got = compare_all(system, runs, workers, progress)
    for i, row in enumerate(out):
        row["replay"] = dict(got[2 * i], seed=row["replay"]["seed"])
        row["quanta"] = got[2 * i + 1]
    extra = []
    if replay_seeds:
        extra = seed_spread(out, workloads, adapter, replay_seeds, progress,
                            replays=dict(zip(more, got[2 * len(out):])))
    return out + seed_means(out) + extra


def plain_seed(variant: str) -> bool:
    """Whether a run is told apart from the others of its workload only by its seed (`variant_of`:
    "" or "seed N"; not, say, by its solver)."""
    return re.fullmatch(r"(seed \d+)?", variant) is not None


def seed_groups(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """The rows by (workload, policy), of runs told apart by their seed only (`plain_seed`)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if plain_seed(r["variant"]):
            groups.setdefault((r["workload"], r["policy"]), []).append(r)
    return groups


def _mean_side(sides: list[dict]) -> dict:
    """Several runs' results (`compare`) as one: their means; no per-job error (the jobs of
    different runs are not one another's); applications every run has."""
    def mean_of(key: str) -> float:
        return float(np.mean([p[key] for p in sides]))
    apps = sorted(set.intersection(*(set(p["by_app"]) for p in sides)))
    return {"avg_jct_s": mean_of("avg_jct_s"), "makespan_s": mean_of("makespan_s"),
            "avg_jct_matched_s": mean_of("avg_jct_matched_s"),
            "matched": min(p["matched"] for p in sides),
            "dropped": max(p["dropped"] for p in sides), "median_abs_err": float("nan"),
            "by_app": {a: float(np.mean([p["by_app"][a] for p in sides])) for a in apps},
            "world": sides[0]["world"]}


def _two_samples(ref: list[float], rep: list[float], target: float | None = None) -> dict:
    """The replay's mean against the reference's, as two samples of runs with different seeds:
    means, standard deviations (ddof 1; NaN for one run), the relative difference of the means
    and its 95% and 90% intervals (Welch's t; NaN unless both sides have two runs or more), each
    side's runs and, given a `target` (relative), a verdict on the means (`verdict`)."""
    a, b = np.asarray(ref, dtype=float), np.asarray(rep, dtype=float)
    ma, mb = float(a.mean()), float(b.mean())
    sa = float(a.std(ddof=1)) if len(a) > 1 else float("nan")
    sb = float(b.std(ddof=1)) if len(b) > 1 else float("nan")
    lo = hi = lo90 = hi90 = float("nan")
    if len(a) > 1 and len(b) > 1 and not (sa or sb):       # no spread on either side
        lo = hi = lo90 = hi90 = (mb - ma) / ma
    elif len(a) > 1 and len(b) > 1:
        import warnings

        from scipy.stats import ttest_ind
        with warnings.catch_warnings():   # a side whose runs are all equal is exact, not lossy
            warnings.simplefilter("ignore", RuntimeWarning)
            t = ttest_ind(b, a, equal_var=False)
            ci, ci90 = t.confidence_interval(0.95), t.confidence_interval(0.90)
        lo, hi = float(ci.low) / ma, float(ci.high) / ma
        lo90, hi90 = float(ci90.low) / ma, float(ci90.high) / ma
    out = {"ref_mean": ma, "ref_sd": sa, "ref_n": len(a), "replay_mean": mb, "replay_sd": sb,
           "replay_n": len(b), "diff": mb / ma - 1, "lo": lo, "hi": hi, "lo90": lo90,
           "hi90": hi90, "ref_runs": a.tolist(), "replay_runs": b.tolist()}
    if target is not None:
        out["target"] = target
        out["verdict"] = verdict(out, target)
    return out


def verdict(c: dict, target: float) -> str:
    """What two samples of runs say of the means against a relative `target`: "within" where the
    90% interval of the difference lies inside +-target (two one-sided tests at 5%: equivalent
    within the target), "differs" where the 95% interval leaves out 0, "outside" where it lies
    beyond the target (a difference larger than the target shown), else "undecided" (more runs
    needed); "-" without an interval. Where the reference draws (Pollux's search), this is the
    per-run target restated for distributions of runs."""
    if np.isnan(c["lo90"]):
        return "-"
    if -target < c["lo90"] and c["hi90"] < target:
        return "within"
    if c["lo"] > 0 or c["hi"] < 0:
        return "outside" if c["lo"] > target or c["hi"] < -target else "differs"
    return "undecided"


def spread_needs(rows: list[dict], n: int) -> list[tuple[tuple[str, str], int]]:
    """The replays `seed_spread` runs beyond the rows' own: ((workload, policy), seed) for each
    seed 0..n-1 not already replayed in a group of runs told apart by their seed only."""
    need = []
    for key, runs in seed_groups(rows).items():
        done = {r["replay"]["seed"] for r in runs}
        need += [(key, s) for s in range(n) if s not in done]
    return need


def seed_spread(rows: list[dict], workloads: dict[tuple[str, str], Reference], adapter: Adapter,
                n: int, progress: Callable[[str], None] | None = None,
                replays: dict[tuple[tuple[str, str], int], dict] | None = None) -> list[dict]:
    """Per workload and policy (its runs told apart by seed only): the replay with seeds 0..n-1
    (the runs already replayed with one of those seeds reused; `workloads`: a recorded run of each
    (workload, policy), for its trace, cluster and policy) against every recorded reference
    run, as two samples (`_two_samples`) of average JCT, makespan and each application's average,
    each with its verdict against the issue's target where it sets one (`Adapter.targets`,
    `verdict`).
    Where the reference's search is a draw (Pollux's unseeded genetic algorithm), one run against
    one run compares two draws, and a mean of two or three reference runs is itself uncertain:
    this says by how much. One row per group, variant "K reference / N replay seeds", its
    "spread" the comparisons; its replay side the means over the N seeds, its Quanta-world side
    over the reference's seeds. `replays`: those of `spread_needs` already run (the others are
    run here, in this process)."""
    replays = dict(replays or {})
    for (workload, policy), s in spread_needs(rows, n):
        if ((workload, policy), s) not in replays:
            if progress:
                progress(f"replaying {workload} / {policy} (replay seed {s})")
            replays[(workload, policy), s] = compare(workloads[(workload, policy)], adapter,
                                                     adapter.world, s)
    out = []
    for (workload, policy), runs in seed_groups(rows).items():
        done = {r["replay"]["seed"]: r["replay"] for r in runs}
        reps = [done[s] if s in done else replays[(workload, policy), s] for s in range(n)]
        apps = sorted(set.intersection(*(set(r["ref_by_app"]) for r in runs),
                                       *(set(p["by_app"]) for p in reps)))
        target = adapter.targets.get
        spread = {"avg_jct": _two_samples([r["ref_avg_jct_s"] for r in runs],
                                          [p["avg_jct_matched_s"] for p in reps],
                                          target("avg_jct")),
                  "makespan": _two_samples([r["ref_makespan_s"] for r in runs],
                                           [p["makespan_s"] for p in reps], target("makespan")),
                  "by_app": {a: _two_samples([r["ref_by_app"][a] for r in runs],
                                             [p["by_app"][a] for p in reps], target("by_app"))
                             for a in apps}}
        out.append({"workload": workload, "policy": policy,
                    "variant": f"{len(runs)} reference / {n} replay seeds", "seeds": len(runs),
                    "quanta_policy": runs[0]["quanta_policy"], "jobs": runs[0]["jobs"],
                    "ref_avg_jct_s": spread["avg_jct"]["ref_mean"],
                    "ref_makespan_s": spread["makespan"]["ref_mean"],
                    "ref_by_app": {a: spread["by_app"][a]["ref_mean"] for a in apps},
                    "ref_command": "; ".join(r["ref_command"] for r in runs),
                    "ref_commit": runs[0]["ref_commit"],
                    "replay": dict(_mean_side(reps), seeds=list(range(n))),
                    "quanta": _mean_side([r["quanta"] for r in runs]), "spread": spread})
    return out


def seed_means(rows: list[dict]) -> list[dict]:
    """One more row per workload and policy recorded with several seeds (and nothing else told
    apart, such as another solver): the means over those runs, each replayed with its own seed
    unless one was forced. Where the reference's search is a draw (Pollux's genetic algorithm:
    its own runs move by up to 12.6% from seed to seed), one run against one run compares two
    draws; the means compare the two distributions. variant "mean of N seeds"; no per-job
    error (the jobs of different runs are not one another's)."""
    out = []
    for (workload, policy), runs in seed_groups(rows).items():
        if len(runs) < 2:
            continue

        def mean_of(get) -> float:
            return float(np.mean([get(r) for r in runs]))
        ref_apps = sorted(set.intersection(*(set(r["ref_by_app"]) for r in runs)))
        out.append({"workload": workload, "policy": policy,
                    "variant": f"mean of {len(runs)} seeds", "seeds": len(runs),
                    "quanta_policy": runs[0]["quanta_policy"], "jobs": runs[0]["jobs"],
                    "ref_avg_jct_s": mean_of(lambda r: r["ref_avg_jct_s"]),
                    "ref_makespan_s": mean_of(lambda r: r["ref_makespan_s"]),
                    "ref_by_app": {a: mean_of(lambda r, a=a: r["ref_by_app"][a]) for a in ref_apps},
                    "ref_command": "; ".join(r["ref_command"] for r in runs),
                    "ref_commit": runs[0]["ref_commit"],
                    "replay": _mean_side([r["replay"] for r in runs]),
                    "quanta": _mean_side([r["quanta"] for r in runs])})
    return out
