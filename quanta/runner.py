"""`quanta simulate` as a function: load, prepare, run every policy, write the outputs."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from quanta.core.jobtable import JobTable, mixes_types, never_fits
from quanta.errors import QuantaError
from quanta.model.cluster import Cluster
from quanta.model.job import JobSpec, Trace
from quanta.model.presets import resolve_cluster
from quanta.perf.catalog_model import CatalogModel
from quanta.policies import Policy, make_policy
from quanta.policies.base import MAX_SEED
from quanta.report.window import Window, parse_window
from quanta.sim.engine import SimResult, Simulator
from quanta.sim.faults import FailureModel
from quanta.workloads.builder import build_workload


@dataclass
class SimulationRequest:
    trace: str = "philly"
    format: str = "auto"
    cluster: str | None = None      # None: the world's (World.cluster)
    policies: Sequence[str | Policy] = ("fifo", "sjf", "srtf", "las")   # specs or Policy objects
    seed: int = 0
    out: Path | str | None = Path("quanta-out")   # (a str as typed: "" is refused, not ".")
    max_jobs: int | None = None
    load_scale: float = 1.0
    restart_delay: float = 30.0
    drop_impossible: bool = False
    node_mtbf_h: float = 0.0
    repair_h: float = 1.0
    until_h: float | None = None
    plots: bool = True
    events: bool = False
    world: str = "quanta"          # the simulated world (quanta.worlds): Quanta's own or a replay
    window: Window | str | None = None   # steady-state window: metrics over jobs A..B-1 by arrival
    extra_notes: list[str] = field(default_factory=list)
    queues: str | None = None      # queues file: every policy under quotas, fair share, priorities
    force: bool = False            # replace an earlier run's files in `out` (else refuse)
    fig_format: str = "png"        # figures: png, pdf or svg
    command: str | None = None     # the command line, for config.yaml (None: not from the CLI)


def object_label(p: Policy) -> str:
    """A Policy object's label where it gives none: its class, and its parameters that are not
    their defaults as a spec writes them (Las(backfill=False): 'Las:backfill=false'), so that
    two settings of one class run side by side."""
    from quanta.policies.registry import field_default, parameters, spec_text
    changed = []
    for f in parameters(type(p)):
        v = getattr(p, f.name)
        try:
            same = bool(v == field_default(f))
        except (TypeError, ValueError):       # (an array: ambiguous)
            same = False
        if not same:
            changed.append(f"{f.name}={spec_text(v)}")
    return type(p).__name__ + (":" + ",".join(changed) if changed else "")


def build_policy(p: str | Policy, world, seed: int) -> Policy:
    """A fresh policy for one run: from a spec (with the world's parameters for it, labelled as
    the user named it), or a copy of a Policy object (labelled by its label(), else its class)."""
    if isinstance(p, Policy):
        pol = copy.deepcopy(p)
        label = p.label() or object_label(p)
        try:
            pol.name = label      # type: ignore[misc]
        except AttributeError:    # a read-only name: label() already says it
            pass
        return pol
    if not isinstance(p, str):
        raise QuantaError(f"a policy is a name[:k=v,...] or a quanta.policies.Policy object, "
                          f"not {type(p).__name__}", field="policies")
    label = make_policy(p).label()   # (first: its errors quote what the user typed, not the
    pol = make_policy(with_run_seed(world.policy_spec(p, seed), seed))   # run's seed= added)
    pol.name = label                 # labelled as the user named it
    return pol


def with_run_seed(spec: str, seed: int) -> str:
    """`spec` with `seed=` the run's seed where the policy has a seed of its own (Gavel's
    agnostic type shuffle, Pollux's genetic search) that neither the user nor the world set:
    --seed is the seed of everything random in a run."""
    from quanta.policies.registry import param_items, parameters, policy_info, split_spec
    name, params = split_spec(spec)
    info = policy_info(name)
    items = param_items(params)
    if "seed" in info.defaults or any(i.partition("=")[0].strip() == "seed" for i in items) \
            or "seed" not in {f.name for f in parameters(info.cls)}:
        return spec
    return f"{name}:{','.join(items + [f'seed={seed}'])}"


def check_distinct(policies: Sequence[Policy], named: Sequence[bool]) -> None:
    """Two policies of one run may not share a label, nor an output folder (a label's folder
    name: quanta.report.output.policy_dir_name), nor, both given by name (`named`), be one
    policy written two ways (the same class and parameters: las:backfill=False and
    las:backfill=0; a Python object beside its registered name is the API user's choice)."""
    from quanta.policies.registry import parameters
    from quanta.report.output import policy_dir_name
    seen: dict[str, str] = {}                   # folder -> label
    built: dict[tuple, str] = {}                # (class, parameters) -> label
    for pol, by_name in zip(policies, named):
        label, folder = pol.label(), policy_dir_name(pol.label())
        other = seen.get(folder)
        if other is not None:
            what = f"'{label}' is given twice" if other == label else \
                f"'{other}' and '{label}' would write the same folder"
            raise QuantaError(f"policy {what}: give each policy once (a parameter tells runs "
                              f"apart, e.g. las:backfill=false)", field="--policy")
        seen[folder] = label
        cls = type(pol)
        params = parameters(cls)
        if by_name and params:      # (a class that is no dataclass: its parameters not known)
            other = built.setdefault((cls.__module__, cls.__qualname__,
                                      repr([(f.name, getattr(pol, f.name)) for f in params])),
                                     label)
            if other != label:
                raise QuantaError(f"policy '{other}' and '{label}' are the same policy (the "
                                  f"same parameters): give each once", field="--policy")


MAX_SYNTHETIC_JOBS = 10_000_000    # (issue 13's growth run of 1,000,000 jobs peaked at 1.8 GB)


def parse_synthetic(spec: str) -> tuple[float, int]:
    """(jobs per hour, jobs) of `synthetic:RATE[:JOBS]`; a QuantaError (field --trace) where
    the text is no such trace."""
    parts = spec.split(":")
    try:
        if len(parts) > 3:
            raise ValueError
        rate = float(parts[1])
        num = int(parts[2]) if len(parts) > 2 else 1000
    except (IndexError, ValueError):
        raise QuantaError(f"bad synthetic trace '{spec}': want synthetic:JOBS_PER_HOUR[:NUM_JOBS]",
                          field="--trace") from None
    if not 0 < rate < float("inf") or not 0 < num <= MAX_SYNTHETIC_JOBS:  # (NaN fails too)
        raise QuantaError(f"bad synthetic trace '{spec}': rate must be a positive number "
                          f"and the job count a positive integer up to "
                          f"{MAX_SYNTHETIC_JOBS:,}", field="--trace")
    return rate, num


def load_any_trace(spec: str, fmt: str, seed: int) -> Trace:
    if spec.startswith("synthetic:"):
        from quanta.workloads.synthetic import gavel_poisson
        rate, num = parse_synthetic(spec)
        return gavel_poisson(num, rate, seed=seed)
    from quanta.workloads.formats import load_trace
    return load_trace(spec, fmt)


def check_feasible(specs: Sequence[JobSpec], impossible: np.ndarray, trace: Trace,
                   cluster: Cluster, drop: bool, policy: Policy, name_it: bool = False
                   ) -> list[str]:
    """Jobs that `policy` can never fit (`impossible`, per job of `specs`): an error naming the
    first, or with `drop` a note; `name_it`: the policy named (where policies differ)."""
    bad = impossible.nonzero()[0]
    if not len(bad):
        return []
    under = f" under {policy.label()}" if name_it else ""
    if drop:
        return [f"{len(bad)} jobs can never fit on this cluster and are reported as "
                f"unschedulable{under}"]
    spec = specs[int(bad[0])]
    from quanta.workloads.formats import column_of
    allowed = [t for t in cluster.types if not spec.gpu_types or t in spec.gpu_types]
    if not allowed:
        field = column_of(trace.format, "gpu_types")
        what = f"job {spec.job_id} may only use {'|'.join(spec.gpu_types)}; cluster " \
               f"'{cluster.name}' has {', '.join(cluster.types)}"
    else:
        caps = [int(cluster.capacity[cluster.type_index(t)]) for t in allowed]
        has = f"its usable GPU types together have {sum(caps)}" \
            if mixes_types(policy) else \
            f"the largest usable GPU type of cluster '{cluster.name}' has {max(caps)}"
        field = column_of(trace.format, "num_gpus")
        what = f"job {spec.job_id} asks for {spec.num_gpus} GPUs{under}; {has}"
    more = f" ({len(bad) - 1} more such jobs)" if len(bad) > 1 else ""
    raise QuantaError(f"{what}{more}; use --drop-impossible to report them and go on",
                      source=trace.source or trace.name, line=spec.source_line or None, field=field)


def run_simulations(req: SimulationRequest, console=None, keep_results: bool = False):
    """Run every policy of `req`; returns (summary rows, header notes), and the SimResults too
    with keep_results."""
    from quanta.worlds import get_world
    check_request(req)
    world = get_world(req.world)
    if req.cluster is None:
        req = replace(req, cluster=world.cluster)
    cluster = resolve_cluster(req.cluster)
    window = parse_window(req.window)
    policies = [build_policy(p, world, req.seed) for p in req.policies]
    check_distinct(policies, [isinstance(p, str) for p in req.policies])
    built = list(policies)                      # before a queue layer wraps them
    trace = load_any_trace(req.trace, req.format, req.seed)
    if not trace.jobs:
        raise QuantaError("the trace has no jobs", source=trace.source or req.trace)
    perf = world.perf(CatalogModel())
    wl = build_workload(trace, perf, seed=req.seed, max_jobs=req.max_jobs, load_scale=req.load_scale,
                        keep_clock=world.keep_clock)
    restart = world.restart(req.restart_delay)
    failures = None
    if req.node_mtbf_h > 0:
        failures = FailureModel(req.node_mtbf_h * 3600, req.repair_h * 3600, seed=req.seed)
    until = req.until_h * 3600 if req.until_h is not None else None
    header = [f"trace: {trace.name} ({trace.format}, {len(wl.specs)} jobs)",
              f"cluster: {cluster.name} = {cluster.describe()} ({cluster.num_gpus} GPUs)",
              f"seed {req.seed}, " + (f"world {world.name}" if world.restart_fixed else
                                       f"restart delay {req.restart_delay:g} s")
              + ("" if world.name == "quanta" else f" ({world.description})")]
    header += list(world.notes) + wl.notes + req.extra_notes
    if any(isinstance(s.priority, str) for s in wl.specs):      # priority class names
        from quanta.queues.spec import load_queues, resolve_priorities
        wl.specs = resolve_priorities(wl.specs, load_queues(req.queues) if req.queues else None,
                                      trace.source or req.trace)
    if req.queues:
        from quanta.queues.sim import apply_queues
        policies, queue_notes = apply_queues(policies, req.queues, wl.specs, cluster,
                                             trace.source or req.trace)
        header += queue_notes
    if window is not None:
        window.mask(np.array([s.submit_time for s in wl.specs]), trace.source or req.trace)
        header.append(window.describe(len(wl.specs)))
    stage = None
    try:
        if req.out is not None:
            from quanta.report.outdir import Staging, git_describe_later
            from quanta.report.output import policy_dir_name
            stage = Staging(Path(req.out), req.force,    # refusals before any work; see its doc
                            [policy_dir_name(p.label()) for p in policies])
            git_describe = git_describe_later()          # runs beside the simulation
        results = _simulate(req, policies, world, wl, cluster, perf, restart, failures, until,
                            trace, header, console)
        from quanta.report.notes import run_notes
        notes = run_notes(wl.specs, cluster, perf, results, until_h=req.until_h,
                          node_mtbf_h=req.node_mtbf_h, repair_h=req.repair_h, seed=req.seed)
        rows: list[dict]
        if stage is not None:
            from quanta.report.outdir import write_config
            from quanta.report.output import write_run
            config = run_config(req, trace, wl, cluster, world, built, git=git_describe())
            written: list[Path] = []
            rows = write_run(stage.dir, results, header=header, notes=notes, plots=req.plots,
                             window=window, fig_format=req.fig_format, written=written,
                             title=f"{trace.name} on {cluster.name}")
            if req.queues:
                from quanta.queues.sim import write_queue_report
                write_queue_report(stage.dir, results, policies)     # OUT/queues.csv
                written.append(stage.dir / "queues.csv")
            write_config(stage.dir, config, written)
            stage.commit()
        else:
            from quanta.report.metrics import summary
            rows = [summary(r, window) for r in results]
    except BaseException:
        if stage is not None:
            stage.abort()
        raise
    header = header + notes
    return (rows, header, results) if keep_results else (rows, header)


def _simulate(req: SimulationRequest, policies, world, wl, cluster: Cluster, perf, restart,
              failures, until, trace: Trace, header: list[str], console) -> list[SimResult]:
    """One simulation per policy (notes on jobs that can never fit go into `header`)."""
    results: list[SimResult] = []

    def inputs(pol) -> tuple[list[JobSpec], object]:
        """The policy's jobs and performance model in this world."""
        named = getattr(pol, "inner", pol)          # a queue layer: the policy inside it
        name = named.label().partition(":")[0].strip()
        return world.jobs_for(name, wl.specs), world.perf_for_run(perf, name)

    def simulator(pol, specs, run_perf) -> Simulator:
        return Simulator(specs, cluster, pol, run_perf, restart=restart, failures=failures,
                         until=until, record_events=req.events, **world.engine_options())

    # every policy's jobs that can never fit, before any run: a policy that mixes GPU types
    # fits jobs another cannot (and a world may give each policy its own jobs and rates)
    specs0, perf0 = inputs(policies[0])
    first = simulator(policies[0], specs0, perf0)
    found = [(first.impossible, specs0, policies[0])]
    for pol in policies[1:]:
        specs, run_perf = inputs(pol)
        table = first.table if specs is specs0 and run_perf is perf0 else \
            JobTable(specs, cluster, run_perf)
        found.append((never_fits(table, pol), specs, pol))
    differ = any(not np.array_equal(imp, found[0][0]) for imp, _s, _p in found)
    for imp, specs, pol in found[:len(found) if differ else 1]:
        header += check_feasible(specs, imp, trace, cluster, req.drop_impossible, pol, differ)
    del found
    for i, pol in enumerate(policies):
        sim = first if i == 0 else simulator(pol, *inputs(pol))
        if console is not None and console.is_terminal:   # (elsewhere a bar is blank lines)
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            with Progress(TextColumn("{task.description:24s}"), BarColumn(),
                          TextColumn("{task.percentage:>5.1f}% of arrivals"), TimeElapsedColumn(),
                          console=console, transient=True) as bar:
                task = bar.add_task(pol.label(), total=1.0)
                sim.progress_cb = lambda f, task=task: bar.update(task, completed=f)
                results.append(sim.run())
        else:
            results.append(sim.run())
    return results


def check_seed(seed: int) -> None:
    """A seed is an int64 (the tables hold it), 0 or more."""
    if not 0 <= seed <= MAX_SEED:
        raise QuantaError(f"must be 0 to {MAX_SEED} (2^63 - 1), got {seed}", field="--seed")


MIN_MTBF_H = 0.01      # a node failing every 36 s or more often is no cluster: failures would
                       # outnumber every other event without bound (1e-9 h ran for ever)


def time_problem(name: str, v: float) -> str | None:
    """Why a restart delay (s), a node MTBF or a repair time (h) is no value a run can use, or
    None: negative, not finite, past the 1e15 s a run may last, an MTBF under MIN_MTBF_H."""
    from quanta.workloads.readers._base import MAX_NUMBER
    hours = name != "restart_delay"
    if not 0 <= v < float("inf"):
        return f"must be a number, 0 or more, got {v:g}"
    if v * (3600.0 if hours else 1.0) > MAX_NUMBER:
        return f"{v:g} {'h' if hours else 's'} is past the {MAX_NUMBER:g} s a run may last"
    if name == "node_mtbf_h" and 0 < v < MIN_MTBF_H:
        return f"must be 0 (no failures) or at least {MIN_MTBF_H:g} h, got {v:g}"
    return None


def check_request(req: SimulationRequest) -> None:
    """One-line errors for values no run can use (the CLI's and the API's alike)."""
    if not req.trace.strip():
        raise QuantaError("is empty: name a trace file, a bundled sample or synthetic:RATE:JOBS",
                          field="--trace")
    if req.trace.startswith("synthetic:") and req.format != "auto":
        raise QuantaError(f"a synthetic trace has no file format to read it as ('{req.format}'): "
                          f"leave --format out", field="--format")
    if req.out is not None and not str(req.out).strip():
        raise QuantaError("is empty: name a folder for the run's files", field="--out")
    if req.until_h is not None and not req.until_h > 0:
        raise QuantaError(f"must be a positive number of hours, got {req.until_h:g}",
                          field="--until-h")
    check_seed(req.seed)
    if not 0 < req.load_scale < float("inf"):
        raise QuantaError(f"must be a positive number, got {req.load_scale:g}",
                          field="--load-scale")
    for name, v in (("restart_delay", req.restart_delay), ("node_mtbf_h", req.node_mtbf_h),
                    ("repair_h", req.repair_h)):
        why = time_problem(name, v)
        if why:
            raise QuantaError(why, field="--" + name.replace("_", "-"))
    from quanta.report.outdir import FIG_FORMATS
    if req.fig_format not in FIG_FORMATS:
        raise QuantaError(f"unknown figure format '{req.fig_format}' (png, pdf or svg)",
                          field="--fig-format")


def run_config(req: SimulationRequest, trace: Trace, wl, cluster: Cluster, world,
               policies: Sequence[Policy], git: str | None) -> dict:
    """Every input of a run, for its config.yaml (`git`: the checkout's `git describe`)."""
    import quanta
    from quanta.cellstore import code_version, file_digest
    from quanta.policies.registry import parameters
    from quanta.report.outdir import command_line
    pols = []
    for given, pol in zip(req.policies, policies):
        params = {f.name: getattr(pol, f.name) for f in parameters(type(pol))}
        cls = type(pol)
        pols.append({"policy": given if isinstance(given, str) else pol.label(),
                     "label": pol.label(), "class": f"{cls.__module__}.{cls.__qualname__}",
                     "parameters": params})
    return {
        "command": req.command or command_line(),
        "quanta_version": quanta.__version__, "code_version": code_version(),
        "git": git,
        "trace": {"spec": req.trace, "format": req.format, "name": trace.name,
                  "read_as": trace.format, "source": trace.source or None,
                  "sha256": file_digest(req.trace), "jobs": len(wl.specs)},
        "cluster": {"spec": req.cluster, "name": cluster.name, "nodes": cluster.describe(),
                    "gpus": cluster.num_gpus, "sha256": file_digest(req.cluster)},
        "policies": pols,
        "seed": req.seed, "world": world.name,
        "window": None if req.window is None else str(parse_window(req.window)),
        "until_h": req.until_h, "max_jobs": req.max_jobs, "load_scale": req.load_scale,
        "restart_delay_s": req.restart_delay, "drop_impossible": req.drop_impossible,
        "node_mtbf_h": req.node_mtbf_h, "repair_h": req.repair_h, "queues": req.queues,
        "queues_sha256": file_digest(req.queues) if req.queues else None,
        "events": req.events, "plots": req.plots, "fig_format": req.fig_format,
    }
