"""The `quanta` command line."""

from __future__ import annotations

import copy
import gc
import math
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional


# True in `quanta`'s own process (main()), where what start-up imports make lives as long as the
# process; False where the CLI runs inside another program (tests' CliRunner)
_PROCESS = False


@contextmanager
def _imports_without_gc(freeze: bool):
    """The cyclic collector off while start-up imports run, and what they made (modules,
    classes, functions: objects that live as long as the process) frozen after them if `freeze`,
    so that no later pass goes over it again: the collector's passes cost 11-15 ms of a 0.5 s
    `quanta simulate`, 2-4 ms so (docs/benchmarks.md, "Forty-first session")."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was:
            gc.enable()


def _unshadow() -> None:
    """`python -m quanta.cli` puts the working folder first on sys.path; a folder there named
    quanta (an output folder: `--out quanta`) then shadows an editable install's package as an
    empty namespace package (no version, no file: `run_config` failed with a traceback). The
    package this file belongs to is put in its place."""
    import importlib.util
    import os
    pkg = sys.modules.get("quanta")
    if pkg is None or getattr(pkg, "__file__", None):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("quanta", os.path.join(here, "__init__.py"),
                                                  submodule_search_locations=[here])
    real = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(real)
    for name, mod in list(sys.modules.items()):      # submodules already imported, as attributes
        if name.startswith("quanta.") and name.count(".") == 1:
            setattr(real, name.partition(".")[2], mod)
    sys.modules["quanta"] = real


with _imports_without_gc(freeze=True):    # (once, at this module's import)
    _unshadow()
    import typer
    from quanta import cli_options  # noqa: E402
    from quanta.cli_print import console, rich_table, rich_text
    from quanta.errors import QuantaError, printable


class _Group(typer.core.TyperGroup):
    """Options converted without pydantic (quanta/cli_options.py)."""

    def get_help_option(self, ctx):
        return cli_options.bool_flag(super().get_help_option(ctx))

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        return name, cli_options.install(cmd, ctx), rest


# rich_markup_mode=None: help is click's plain text, wrapped to the terminal (no rich panels that
# cut `synthetic:JOBS_PER_HOUR:NUM_JOBS` at 80 columns, no ":B:" read as an emoji) and no
# typer.rich_utils / rich.markdown import on every start. What Quanta prints: cli_print.py.
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, cls=_Group,
                  help="Quanta: deep-learning cluster scheduling, simulated and for real.")


def _version(value: bool) -> None:
    if value:
        from quanta import __version__
        print(f"quanta {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Quanta: deep-learning cluster scheduling, simulated and for real."""


DEFAULT_TRACE = "philly"
DEFAULT_POLICIES = ["fifo", "sjf", "srtf", "las"]


@app.command()
def simulate(
    trace: str = typer.Option(DEFAULT_TRACE, metavar="TRACE", help="trace file, bundled sample "
                              "name (see `quanta traces`), or synthetic:JOBS_PER_HOUR:NUM_JOBS "
                              "(Gavel-style Poisson)"),
    format: str = typer.Option("auto", "--format", metavar="FORMAT", help="trace format (auto, "
                               "normalized, philly, gavel, pollux, tiresias, openb, helios, itp, "
                               "pai, rubick)"),
    cluster: Optional[str] = typer.Option(None, metavar="CLUSTER", help="preset name, YAML "
                                          "file, or TYPE:NODESxGPUS[,...] [default: gavel-108; "
                                          "under --world sia-sim or gavel-sim the reference's "
                                          "cluster]"),
    policy: Optional[List[str]] = typer.Option(None, "--policy", "-p", metavar="POLICY",
                                               help="policy NAME[:key=value,...]; repeat to "
                                               "compare [default: fifo, sjf, srtf, las]"),
    seed: int = typer.Option(0, metavar="N", help="seed for everything random (model draws, "
                             "synthetic traces, faults, a policy's own draws unless it is "
                             "given seed=)"),
    out: str = typer.Option("quanta-out", metavar="DIR", help="output folder (holding an "
                            "earlier run: see --force)"),
    force: bool = typer.Option(False, "--force", help="replace an earlier run's files in the "
                               "output folder (only files Quanta wrote)"),
    max_jobs: Optional[int] = typer.Option(None, "--max-jobs", min=1, metavar="N",
                                           help="keep the first N jobs"),
    load_scale: float = typer.Option(1.0, "--load-scale", metavar="X",
                                     help="divide inter-arrival times by X"),
    restart_delay: float = typer.Option(30.0, "--restart-delay", min=0.0, metavar="S",
                                        help="seconds to restore a checkpoint after "
                                        "preemption/migration"),
    drop_impossible: bool = typer.Option(False, "--drop-impossible",
                                         help="report jobs that can never fit instead of failing"),
    node_mtbf_h: float = typer.Option(0.0, "--node-mtbf-h", min=0.0, metavar="H",
                                      help="inject node failures: mean hours between failures "
                                      "per node (0.01 or more; 0: none)"),
    repair_h: Optional[float] = typer.Option(None, "--repair-h", min=0.0, metavar="H",
                                             help="hours a failed node stays down (with "
                                             "--node-mtbf-h) [default: 1]"),
    until_h: Optional[float] = typer.Option(None, "--until-h", metavar="H",
                                            help="stop the simulation at this hour (> 0)"),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="write figures"),
    fig_format: str = typer.Option("png", "--fig-format", metavar="png|pdf|svg",
                                   help="figure file format"),
    events: bool = typer.Option(False, "--events", help="write <policy>/events.csv: every submit, "
                                "start, preemption, migration, resize, failure and finish"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar or table"),
    world: str = typer.Option("quanta", "--world", metavar="WORLD", help="the simulated world: "
                              "quanta (Quanta's own model) or a reference simulator's replay "
                              "profile (see `quanta worlds`)"),
    queues: Optional[Path] = typer.Option(None, "--queues", metavar="FILE", help="queues file "
                                          "(docs/queues.md): every policy under its quotas, fair "
                                          "share and priorities; per-queue results in queues.csv"),
    window: Optional[str] = typer.Option(None, "--window", metavar="A:B", help="steady-state "
                                         "window: metrics over jobs A..B-1 by arrival order "
                                         "(Gavel: 4000:5000)"),
) -> None:
    """Replay a trace on a cluster under one or more policies and compare them."""
    with _imports_without_gc(freeze=_PROCESS):
        from quanta.report.window import parse_window
        from quanta.runner import SimulationRequest, run_simulations

    _repair_needs_failures(repair_h is not None, node_mtbf_h)
    req = SimulationRequest(trace=trace, format=format, cluster=cluster,
                            policies=policy or DEFAULT_POLICIES, seed=seed, out=out,
                            max_jobs=max_jobs, load_scale=load_scale, restart_delay=restart_delay,
                            drop_impossible=drop_impossible, node_mtbf_h=node_mtbf_h,
                            repair_h=1.0 if repair_h is None else repair_h, until_h=until_h,
                            plots=plots, events=events,
                            world=world, window=parse_window(window),
                            queues=str(queues) if queues else None, force=force,
                            fig_format=fig_format.lower())
    _unwind_on_stop()                          # (the run's folder put back)
    rows, header = run_simulations(req, console=None if quiet else console())
    if not quiet:
        table = rich_table(rich_text("Quanta: " + "; ".join(header[:2])))
        cols = [("policy", "policy"), ("finished", "done"), ("avg_jct_s", "avg JCT h"),
                ("p50_jct_s", "p50 h"), ("p99_jct_s", "p99 h"), ("avg_queue_s", "queue h"),
                ("makespan_s", "makespan h"), ("gpu_util", "util"), ("jain", "Jain"),
                ("preemptions", "preempt")]
        for _key, title in cols:
            table.add_column(title, justify="left" if _key == "policy" else "right", no_wrap=True)
        for r in rows:
            cells = []
            for key, _title in cols:
                v = r[key]
                cells.append(rich_text(f"{v / 3600:.1f}" if key.endswith("_s") else
                                       f"{v:.2f}" if isinstance(v, float) else str(v)))
            table.add_row(*cells)
        console().print(table)
        for h in header[2:]:
            console().print(rich_text(f"note: {h}", "dim"), soft_wrap=True)
        figs = f", figures *.{req.fig_format}" if plots else ""
        console().print(rich_text(f"results in {out}/ (summary.csv, report.md, config.yaml, "
                                  f"<policy>/jobs.csv, timeline.csv{figs})"), soft_wrap=True)


# sweep fields as `quanta sweep` spells their flags
SWEEP_FLAGS = {"load_scales": "--load-scale", "rates": "--rate", "seeds": "--seeds",
               "jobs": "--jobs", "max_jobs": "--max-jobs", "until_h": "--until-h",
               "restart_delay": "--restart-delay", "node_mtbf_h": "--node-mtbf-h",
               "repair_h": "--repair-h"}


def _repair_needs_failures(given: bool, node_mtbf_h: float) -> None:
    """A repair time without node failures would be ignored: refused (simulate and sweep)."""
    if given and not node_mtbf_h > 0:
        raise QuantaError("is the repair time of failing nodes: give --node-mtbf-h H too",
                          field="--repair-h")


def _unwind_on_stop() -> None:
    """SIGTERM (`timeout`, kill) and SIGHUP (a terminal or ssh session closed) as an exit that
    unwinds: what a command made is put back or shut down, as after Ctrl-C."""
    import signal
    signal.signal(signal.SIGTERM, _stopped)
    signal.signal(signal.SIGHUP, _stopped)


def _stopped(signum, _frame) -> None:
    """SIGTERM or SIGHUP as an exit that unwinds (the default ends the process where it
    stands)."""
    raise SystemExit(128 + signum)


def _numbers(values: Optional[List[str]], kind: type, flag: str) -> Optional[tuple]:
    """Repeated flags, each a comma list (seeds: A-B ranges too), as one tuple; None if none."""
    if not values:
        return None
    from quanta.sweepfile import RangeTooLong, int_range
    out: list = []
    for v in values:
        for part in (p.strip() for p in v.split(",")):
            if not part:
                raise QuantaError(f"'{v}' has an empty item", field=flag)
            try:
                out += int_range(part, len(out)) if kind is int and not part.startswith("-") \
                    else [kind(part)]
            except RangeTooLong as e:
                raise QuantaError(str(e), field=flag) from None
            except ValueError:
                raise QuantaError(f"bad value '{part}': want " + ("integers, comma lists or ranges "
                                  "A-B" if kind is int else "numbers or comma lists"),
                                  field=flag) from None
    return tuple(dict.fromkeys(out))


@app.command()
def sweep(
    file: Optional[Path] = typer.Argument(None, help="sweep YAML (see docs/sweeps.md); flags "
                                          "given here override its fields"),
    trace: Optional[List[str]] = typer.Option(None, "--trace", metavar="TRACE", help="trace "
                                              "(repeat): file, sample name or "
                                              "synthetic:JOBS_PER_HOUR:NUM_JOBS"),
    rate: Optional[List[str]] = typer.Option(None, "--rate", metavar="R[,R...]", help="synthetic "
                                             "Gavel-style arrival rates, jobs/hour (repeat or "
                                             "1,2,3)"),
    jobs: Optional[int] = typer.Option(None, "--jobs", min=1, metavar="N", help="jobs per "
                                       "synthetic trace (default 1000)"),
    cluster: Optional[List[str]] = typer.Option(None, "--cluster", metavar="CLUSTER",
                                                help="cluster (repeat): preset, YAML file or "
                                                "TYPE:NODESxGPUS[,...] [default: gavel-108, or "
                                                "the --world's reference cluster]"),
    policy: Optional[List[str]] = typer.Option(None, "--policy", "-p", metavar="POLICY",
                                               help="policy (repeat): NAME[:k=v,...] or "
                                               "module.path:Class[:k=v,...]"),
    seed: Optional[List[str]] = typer.Option(None, "--seed", "--seeds", metavar="SEEDS",
                                             help="seeds (repeat, 0,1,2 or 0-4)"),
    load_scale: Optional[List[str]] = typer.Option(None, "--load-scale", metavar="X[,X...]",
                                                   help="load scales (repeat or 1,1.5,2)"),
    window: Optional[str] = typer.Option(None, "--window", metavar="A:B", help="steady-state "
                                         "window A:B (jobs by arrival order)"),
    format: Optional[str] = typer.Option(None, "--format", metavar="FORMAT", help="trace format "
                                         "(default auto)"),
    max_jobs: Optional[int] = typer.Option(None, "--max-jobs", min=1, metavar="N",
                                           help="keep the first N jobs"),
    restart_delay: Optional[float] = typer.Option(None, "--restart-delay", min=0.0, metavar="S",
                                                  help="checkpoint-restore seconds (default 30)"),
    node_mtbf_h: Optional[float] = typer.Option(None, "--node-mtbf-h", min=0.0, metavar="H",
                                                help="node failures: mean hours between"),
    repair_h: Optional[float] = typer.Option(None, "--repair-h", min=0.0, metavar="H",
                                             help="repair hours"),
    until_h: Optional[float] = typer.Option(None, "--until-h", metavar="H", help="stop each run "
                                            "at this hour (> 0)"),
    drop_impossible: Optional[bool] = typer.Option(None, "--drop-impossible/--no-drop-impossible",
                                                   help="report jobs that never fit"),
    world: Optional[str] = typer.Option(None, "--world", metavar="WORLD", help="simulated world "
                                        "(default quanta)"),
    queues: Optional[Path] = typer.Option(None, "--queues", metavar="FILE", help="queues file: "
                                          "every policy under its quotas (docs/queues.md)"),
    out: str = typer.Option("quanta-sweep", metavar="DIR", help="output folder (finished "
                            "cells are reused from it)"),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", min=1, metavar="N",
                                          help="local worker processes (default: every core)"),
    ray: Optional[str] = typer.Option(None, "--ray", metavar="ADDRESS", help="run on the Ray "
                                      "cluster at ADDRESS (or auto) instead of local processes"),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="write JCT vs load figures "
                               "(two loads or more)"),
    fig_format: str = typer.Option("png", "--fig-format", metavar="png|pdf|svg",
                                   help="figure file format"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar or table"),
) -> None:
    """Sweep traces or rates x clusters x policies x load scales x seeds, in parallel and
    resumably; tidy results and mean / 95% CI over seeds."""
    from dataclasses import replace

    from quanta.report.window import parse_window
    from quanta.sweeps import SweepSpec, run_sweep
    if not out.strip():                  # (Path("") is the working folder)
        raise QuantaError("is empty: name a folder for the sweep's files", field="--out")
    if trace and not all(t.strip() for t in trace):    # (as simulate's; '' read the folder)
        raise QuantaError("is empty: name a trace file, a bundled sample or synthetic:RATE:JOBS",
                          field="--trace")
    if file is not None:
        from quanta.sweepfile import load_sweep_file
        spec = load_sweep_file(file, more_rates=bool(rate))
    else:
        spec = SweepSpec()
    over = {"traces": tuple(dict.fromkeys(trace)) if trace else None,
            "rates": _numbers(rate, float, "--rate"), "jobs": jobs,
            "clusters": tuple(dict.fromkeys(cluster)) if cluster else None,
            "policies": tuple(dict.fromkeys(policy)) if policy else None,
            "seeds": _numbers(seed, int, "--seed"),
            "load_scales": _numbers(load_scale, float, "--load-scale"),
            "window": parse_window(window), "format": format, "max_jobs": max_jobs,
            "restart_delay": restart_delay, "node_mtbf_h": node_mtbf_h, "repair_h": repair_h,
            "until_h": until_h, "drop_impossible": drop_impossible, "world": world,
            "queues": str(queues) if queues else None}
    spec = replace(spec, **{k: v for k, v in over.items() if v is not None})
    if jobs is not None and not spec.rates:      # (ignored: the traces ran whole)
        raise QuantaError("sizes the synthetic traces of --rate (none given): a trace's jobs are "
                          "cut with --max-jobs", field="--jobs")
    # (a sweep file's repair_h counts where it is not the default)
    _repair_needs_failures(repair_h is not None or spec.repair_h != SweepSpec.repair_h,
                           spec.node_mtbf_h)
    _unwind_on_stop()                          # (the worker pool shut down, no leaked semaphores)
    try:
        res = run_sweep(spec, Path(out), workers=workers, ray=ray,
                        console=None if quiet else console(), plots=plots,
                        fig_format=fig_format.lower())
    except QuantaError as err:       # a flag's value, named as the flag (a file's values were
        if err.source or err.field not in SWEEP_FLAGS:    # checked at their lines already)
            raise
        raise QuantaError(err.bare, field=SWEEP_FLAGS[err.field]) from None
    if quiet:
        return
    n = len(res.cells)
    console().print(f"Quanta sweep: {n} cell{'' if n == 1 else 's'} ({res.ran} run, "
                    f"{res.reused} reused) in {res.wall_s:.1f} s; mean ± 95% CI over seeds",
                    highlight=False, markup=False, soft_wrap=True)
    table = rich_table()
    cols = ["trace", "cluster", "policy", "load", "seeds", "avg JCT h", "p99 JCT h", "util",
            "preempt"]
    for c in cols:
        table.add_column(c, justify="left" if c in ("trace", "cluster", "policy") else "right",
                         overflow="fold")

    def pm(r: dict, m: str, scale: float = 1.0, fmt: str = ".2f") -> str:
        mean, ci = r[f"{m}_mean"] / scale, r[f"{m}_ci95"] / scale
        return f"{mean:{fmt}}" + ("" if ci != ci else f" ± {ci:{fmt}}")

    for r in res.aggregate:
        table.add_row(*map(rich_text, (r["trace"], r["cluster"], r["policy"],
                                    f"{r['load_scale']:g}", str(r["seeds"]),
                                    pm(r, "avg_jct_s", 3600), pm(r, "p99_jct_s", 3600),
                                    pm(r, "gpu_util"), pm(r, "preemptions", 1.0, ".0f"))))
    console().print(table)
    figs = "".join(f", {p.name}" for p in res.figures)
    console().print(rich_text(f"results in {res.out}/ (results.csv, results.parquet, "
                              f"aggregate.csv, aggregate.parquet, jobs.parquet, cells/{figs})"),
                    soft_wrap=True)


@app.command()
def reproduce(
    system: str = typer.Argument(..., help="seed system whose recorded reference runs to replay: "
                                 "sia, pollux, gavel, tiresias"),
    workload: Optional[str] = typer.Option(None, help="only this recorded workload"),
    ref_policy: Optional[str] = typer.Option(None, "--policy", help="only this reference policy"),
    seed: Optional[int] = typer.Option(None, help="seed for Quanta's runs (default: each "
                                       "reference run's own --seed, else 0)"),
    ref_seed: Optional[int] = typer.Option(None, help="only the reference runs of this --seed "
                                           "(some are recorded with several)"),
    replay_seeds: int = typer.Option(0, min=0, max=1000, help="also replay each workload with seeds "
                                     "0..N-1 and compare the two samples of runs (mean, spread, "
                                     "95% interval of the difference)"),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", min=1, metavar="N",
                                          help="local worker processes (default: every core)"),
    as_json: bool = typer.Option(False, "--json", help="print the results as JSON"),
) -> None:
    """Quanta's policies on a system's own workloads, under its replay profile and under Quanta's
    own world, beside the numbers its own simulator gave (recorded with their command and commit)."""
    from quanta.cli_print import json_text
    from quanta.reproduce import reproduce as run
    rows = run(system, workload, ref_policy, seed,
               progress=None if as_json else (lambda what: console().print(
                   rich_text(what, "dim"))), ref_seed=ref_seed,
               replay_seeds=replay_seeds, workers=workers)
    if as_json:
        print(json_text(rows, indent=1))
        return
    world = rows[0]["replay"]
    table = rich_table(f"{system}: reference simulator vs Quanta (average JCT, hours; "
                       f"per-job median |error| vs the reference)")
    for col in ("workload", "policy", "jobs", "ref", "replay", "err", "job err", "quanta", "err",
                "ref mksp", "replay mksp"):
        if col in ("workload", "policy"):
            table.add_column(col, overflow="fold")
        else:
            table.add_column(col, justify="right")
    def label(r: dict) -> str:          # the reference policy, and its seed where it has several
        return r["policy"] + (f" ({r['variant']})" if r["variant"] else "")

    for r in rows:
        rep, q, ref = r["replay"], r["quanta"], r["ref_avg_jct_s"]
        table.add_row(r["workload"], label(r), str(r["jobs"]),
                      f"{ref / 3600:.3f}", f"{rep['avg_jct_matched_s'] / 3600:.3f}",
                      f"{rep['avg_jct_matched_s'] / ref - 1:+.1%}",
                      "-" if math.isnan(rep["median_abs_err"]) else f"{rep['median_abs_err']:.1%}",
                      f"{q['avg_jct_matched_s'] / 3600:.3f}",
                      f"{q['avg_jct_matched_s'] / ref - 1:+.1%}",
                      f"{r['ref_makespan_s'] / 3600:.2f}", f"{rep['makespan_s'] / 3600:.2f}")
    console().print(table)
    mapping = dict((r["policy"], r["quanta_policy"]) for r in rows)
    console().print(rich_text("reference policy -> Quanta's: "
                              + ", ".join(f"{a} -> {b}" for a, b in mapping.items())
                              + f"; replay = Quanta under --world {world['world']}, quanta = "
                              "Quanta's own world; averages over the jobs the reference finished; "
                              "mksp = makespan (h); \"mean of N seeds\": the means over a "
                              "workload's runs recorded with several seeds", "dim"))
    names = sorted({a for r in rows for a in r["ref_by_app"]})
    if len(names) > 8:
        console().print(f"[dim]{len(names)} job types: per-type averages with --json[/dim]")
        names = []
    apps = rich_table("per application (average JCT, hours): reference / replay / quanta world")
    apps.add_column("workload / policy")
    for a in names:
        apps.add_column(a, justify="right")
    for r in rows:
        cells = []
        for a in names:
            if a not in r["ref_by_app"]:
                cells.append("")
                continue
            cells.append(f"{r['ref_by_app'][a] / 3600:.2f} / {r['replay']['by_app'].get(a, float('nan')) / 3600:.2f}"
                         f" / {r['quanta']['by_app'].get(a, float('nan')) / 3600:.2f}")
        apps.add_row(f"{r['workload']} / {label(r)}", *cells)
    if names:
        console().print(apps)
    _print_spread([r for r in rows if "spread" in r])
    console().print("[dim]reference runs and the command and commit of each: "
                    "quanta/data/reference/PROVENANCE.md[/dim]")


def _print_spread(rows: list[dict]) -> None:
    """`quanta reproduce --replay-seeds`: the reference's runs and the replay's as two samples."""
    if not rows:
        return
    table = rich_table("reference runs vs replay seeds (hours: mean ± standard deviation over "
                       "runs; difference of the means, 95% and 90% intervals; verdict against "
                       "the target)")
    for col in ("workload", "measure", "reference", "replay", "diff", "95% interval",
                "90% interval", "verdict"):
        table.add_column(col, overflow="fold", justify="left" if col in ("workload", "measure")
                         else "right")

    def side(mean: float, sd: float, n: int) -> str:
        return f"{mean / 3600:.2f}" + ("" if math.isnan(sd) else f" ± {sd / 3600:.2f}") + f" ({n})"

    def interval(lo: float, hi: float) -> str:
        return "-" if math.isnan(lo) else f"{100 * lo:+.1f}..{100 * hi:+.1f}%"
    for r in rows:
        sp = r["spread"]
        for i, (what, c) in enumerate([("average JCT", sp["avg_jct"]),
                                       ("makespan", sp["makespan"]),
                                       *sorted(sp["by_app"].items())]):
            table.add_row(r["workload"] if i == 0 else "", what,
                          side(c["ref_mean"], c["ref_sd"], c["ref_n"]),
                          side(c["replay_mean"], c["replay_sd"], c["replay_n"]),
                          f"{c['diff']:+.1%}", interval(c["lo"], c["hi"]),
                          interval(c["lo90"], c["hi90"]),
                          f"{c['verdict']} ±{c['target']:.0%}" if c.get("verdict", "-") != "-"
                          else "-")
    console().print(table)
    console().print(rich_text("(N): runs; the reference's runs differ by --seed only (its search "
                              "draws from it); the replay's are seeds 0..N-1 under the replay "
                              "profile. verdict: within = the 90% interval inside the target "
                              "(equivalent, two one-sided tests at 5%); differs = the 95% "
                              "interval leaves out 0; outside = beyond the target; undecided = "
                              "more runs needed", "dim"))


from quanta.cli_listings import register as _register_listings  # noqa: E402

_register_listings(app, console)

from quanta.cli_jobs import register as _register_job_commands  # noqa: E402

_register_job_commands(app, console)

from quanta.cli_queues import register as _register_queue_commands  # noqa: E402

_register_queue_commands(app, console)


def _usage_error(e: BaseException) -> str | None:
    """One line for a command-line usage error (unknown option or command, bad value), else None.
    Typer raises click's exceptions or, from 0.2x, those of its own bundled copy of click: both
    are recognised by what they offer (format_message, exit_code), not by one class."""
    if not (hasattr(e, "format_message") and hasattr(e, "exit_code")):
        return None
    msg = " ".join(str(e.format_message()).split())
    if not msg:                          # no arguments at all: the help was printed
        return ""
    ctx = getattr(e, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None and \
        getattr(ctx, "command_path", None) else ""
    return f"error: {msg}{where}"


# modules of the optional extras (pyproject.toml) -> the extra that installs them
_EXTRAS = {"torch": "runtime", "fastapi": "runtime", "starlette": "runtime", "uvicorn": "runtime",
           "httpx": "runtime", "ray": "ray"}


def _app_for(argv: list[str]) -> typer.Typer:
    """`app` holding only the command that argv names, when it names one: typer turns every
    registered command's parameters into click's on each start (~10 ms for 20 commands), and a
    command's options, help and errors do not depend on the others. Anything else (no command,
    --version, a typo to suggest a fix for) gets the whole app."""
    if len(argv) > 1:
        for info in app.registered_commands:
            name = info.name or typer.main.get_command_name(info.callback.__name__)
            if name == argv[1]:
                one = copy.copy(app)
                one.registered_commands = [info]
                return one
    return app


def main() -> None:
    global _PROCESS
    _PROCESS = True
    try:
        _main()
    finally:
        # Every object left is about to go: the collector's last passes over them all at exit
        # cost ~25 ms of a 0.25 s `quanta simulate`. Frozen, they are skipped (atexit handlers
        # and module teardown still run; only cyclic garbage is left to the operating system).
        gc.freeze()
        _PROCESS = False           # (a test that calls main() goes on in the same process)


def _main() -> None:
    try:
        rv = _app_for(sys.argv)(standalone_mode=False)
    except QuantaError as e:          # (control bytes a bad file put in it shown escaped)
        console(stderr=True).print(f"error: {printable(e)}", highlight=False, soft_wrap=True,
                                   markup=False)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except ModuleNotFoundError as e:
        extra = _EXTRAS.get((e.name or "").split(".")[0])
        if extra is None:
            raise
        console(stderr=True).print(f"error: this command needs the '{extra}' extra (no module "
                                   f"'{e.name}'): pip install 'quanta[{extra}]'", highlight=False,
                                   soft_wrap=True, markup=False)
        sys.exit(2)
    except Exception as e:
        if type(e).__name__ == "NoArgsIsHelpError":      # `quanta` alone: the help, exit 2
            print(e.format_message())
            sys.exit(2)
        line = _usage_error(e)
        if line is None:
            raise
        if line:
            console(stderr=True).print(line, highlight=False, soft_wrap=True, markup=False)
        sys.exit(2)
    if isinstance(rv, int) and rv:      # typer.Exit(code) under standalone_mode=False
        sys.exit(rv)


if __name__ == "__main__":
    main()
