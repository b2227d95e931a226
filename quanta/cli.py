"""The `quanta` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from quanta.errors import QuantaError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Quanta: deep-learning cluster scheduling, simulated and for real.")
console = Console(width=None if sys.stdout.isatty() else 120)   # pipes and logs get full rows
err_console = Console(stderr=True)



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
DEFAULT_CLUSTER = "gavel-108"
DEFAULT_POLICIES = ["fifo", "sjf", "srtf", "las"]


@app.command()
def simulate(
    trace: str = typer.Option(DEFAULT_TRACE, help="trace file, bundled sample name (see `quanta traces`), "
                              "or synthetic:JOBS_PER_HOUR:NUM_JOBS (Gavel-style Poisson)"),
    format: str = typer.Option("auto", "--format", help="trace format (auto, normalized, philly, gavel, "
                               "pollux, tiresias, openb, helios, itp, pai)"),
    cluster: str = typer.Option(DEFAULT_CLUSTER, help="preset name, YAML file, or TYPE:NODESxGPUS[,...]"),
    policy: Optional[List[str]] = typer.Option(None, "--policy", "-p",
                                               help="policy NAME[:key=value,...]; repeat to compare"),
    seed: int = typer.Option(0, help="seed for everything random (model draws, synthetic traces, faults)"),
    out: Path = typer.Option(Path("quanta-out"), help="output folder"),
    max_jobs: Optional[int] = typer.Option(None, "--max-jobs", min=1, help="keep the first N jobs"),
    load_scale: float = typer.Option(1.0, "--load-scale", help="divide inter-arrival times by X"),
    restart_delay: float = typer.Option(30.0, "--restart-delay", min=0.0,
                                        help="seconds to restore a checkpoint after preemption/migration"),
    drop_impossible: bool = typer.Option(False, "--drop-impossible",
                                         help="report jobs that can never fit instead of failing"),
    node_mtbf_h: float = typer.Option(0.0, "--node-mtbf-h", min=0.0,
                                      help="inject node failures: mean hours between failures per node"),
    repair_h: float = typer.Option(1.0, "--repair-h", min=0.0, help="hours a failed node stays down"),
    until_h: Optional[float] = typer.Option(None, "--until-h", help="stop the simulation at this hour"),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="write PNG plots"),
    events: bool = typer.Option(False, "--events", help="write <policy>/events.csv: every submit, "
                                "start, preemption, migration, resize, failure and finish"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar or table"),
    world: str = typer.Option("quanta", "--world", help="the simulated world: quanta (Quanta's own "
                              "model) or a reference simulator's replay profile (see `quanta worlds`)"),
) -> None:
    """Replay a trace on a cluster under one or more policies and compare them."""
    from quanta.runner import SimulationRequest, run_simulations

    req = SimulationRequest(trace=trace, format=format, cluster=cluster,
                            policies=policy or DEFAULT_POLICIES, seed=seed, out=out,
                            max_jobs=max_jobs, load_scale=load_scale, restart_delay=restart_delay,
                            drop_impossible=drop_impossible, node_mtbf_h=node_mtbf_h,
                            repair_h=repair_h, until_h=until_h, plots=plots, events=events,
                            world=world)
    rows, header = run_simulations(req, console=None if quiet else console)
    if not quiet:
        table = Table(title="Quanta: " + "; ".join(header[:2]), title_justify="left",
                      box=box.SIMPLE_HEAD)
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
                cells.append(f"{v / 3600:.1f}" if key.endswith("_s") else
                             f"{v:.2f}" if isinstance(v, float) else str(v))
            table.add_row(*cells)
        console.print(table)
        for h in header[2:]:
            console.print(f"[dim]note: {h}[/dim]")
        console.print(f"results in {out}/ (summary.csv, report.md, <policy>/jobs.csv, timeline.csv"
                      + (", jct_cdf.png, utilisation.png)" if plots else ")"))


@app.command()
def reproduce(
    system: str = typer.Argument(..., help="seed system whose recorded reference runs to replay: "
                                 "sia, pollux, gavel, tiresias"),
    workload: Optional[str] = typer.Option(None, help="only this recorded workload"),
    ref_policy: Optional[str] = typer.Option(None, "--policy", help="only this reference policy"),
    seed: Optional[int] = typer.Option(None, help="seed for Quanta's runs (default: each "
                                       "reference run's own --seed, else 0)"),
    as_json: bool = typer.Option(False, "--json", help="print the results as JSON"),
) -> None:
    """Quanta's policies on a system's own workloads, under its replay profile and under Quanta's
    own world, beside the numbers its own simulator gave (recorded with their command and commit)."""
    import json as _json

    from quanta.reproduce import reproduce as run
    rows = run(system, workload, ref_policy, seed,
               progress=None if as_json else (lambda what: console.print(f"[dim]replaying {what}[/dim]")))
    if as_json:
        print(_json.dumps(rows, indent=1))
        return
    world = rows[0]["replay"]
    table = Table(title=f"{system}: reference simulator vs Quanta (average JCT, hours; "
                        f"per-job median |error| vs the reference)", title_justify="left",
                  box=box.SIMPLE_HEAD)
    for col in ("workload", "policy", "jobs", "ref", "replay", "err", "job err", "quanta", "err",
                "ref mksp", "replay mksp"):
        if col in ("workload", "policy"):
            table.add_column(col, overflow="fold")
        else:
            table.add_column(col, justify="right")
    for r in rows:
        rep, q, ref = r["replay"], r["quanta"], r["ref_avg_jct_s"]
        table.add_row(r["workload"], r["policy"], str(r["jobs"]),
                      f"{ref / 3600:.3f}", f"{rep['avg_jct_matched_s'] / 3600:.3f}",
                      f"{rep['avg_jct_matched_s'] / ref - 1:+.1%}", f"{rep['median_abs_err']:.1%}",
                      f"{q['avg_jct_matched_s'] / 3600:.3f}",
                      f"{q['avg_jct_matched_s'] / ref - 1:+.1%}",
                      f"{r['ref_makespan_s'] / 3600:.2f}", f"{rep['makespan_s'] / 3600:.2f}")
    console.print(table)
    mapping = dict((r["policy"], r["quanta_policy"]) for r in rows)
    console.print("[dim]reference policy -> Quanta's: "
                  + ", ".join(f"{a} -> {b}" for a, b in mapping.items())
                  + f"; replay = Quanta under --world {world['world']}, quanta = Quanta's own "
                  "world; averages over the jobs the reference finished; mksp = makespan (h)[/dim]")
    names = sorted({a for r in rows for a in r["ref_by_app"]})
    if len(names) > 8:
        console.print(f"[dim]{len(names)} job types: per-type averages with --json[/dim]")
        names = []
    apps = Table(title="per application (average JCT, hours): reference / replay / quanta world",
                 title_justify="left", box=box.SIMPLE_HEAD)
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
        apps.add_row(f"{r['workload']} / {r['policy']}", *cells)
    if names:
        console.print(apps)
    console.print("[dim]reference runs and the command and commit of each: "
                  "quanta/data/reference/PROVENANCE.md[/dim]")


@app.command()
def worlds() -> None:
    """Simulated worlds: Quanta's own and the reference simulators' replay profiles."""
    from quanta.worlds import get_world, world_names
    for name in world_names():
        console.print(f"[bold]{name:12s}[/bold] {get_world(name).description}")


@app.command()
def policies() -> None:
    """List the scheduling policies."""
    from quanta.policies import POLICIES
    for name, info in sorted(POLICIES.items()):
        console.print(f"{name:24s} {info.description}", highlight=False)


@app.command()
def clusters() -> None:
    """List the cluster presets."""
    from quanta.model.presets import PRESETS
    for name, p in PRESETS.items():
        console.print(f"{name:16s} {p.description}", highlight=False)


@app.command()
def traces() -> None:
    """List the bundled trace samples and the trace formats that can be read."""
    from quanta.workloads.formats import FORMATS
    from quanta.workloads.samples import SAMPLES
    console.print("bundled samples (use the name with --trace):", highlight=False)
    for name, (_file, fmt, desc) in SAMPLES.items():
        console.print(f"  {name:14s} [{fmt}] {desc}", highlight=False)
    console.print("formats (--format):", highlight=False)
    for name, info in FORMATS.items():
        console.print(f"  {name:14s} {info.description}", highlight=False)


@app.command()
def catalog() -> None:
    """List the job types the performance models know, with their source."""
    from quanta.workloads.catalog import catalog_rows
    for r in catalog_rows():
        console.print(f"{r.name:34s} {r.model:22s} {r.gpu_types:38s} {r.cpu_mem:20s} {r.source}",
                      highlight=False, soft_wrap=True)


from quanta.cli_jobs import register as _register_job_commands  # noqa: E402

_register_job_commands(app, console)


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


def main() -> None:
    try:
        rv = app(standalone_mode=False)
    except QuantaError as e:
        err_console.print(f"error: {e}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except Exception as e:
        line = _usage_error(e)
        if line is None:
            raise
        if line:
            err_console.print(line, highlight=False, soft_wrap=True, markup=False)
        sys.exit(2)
    if isinstance(rv, int) and rv:      # typer.Exit(code) under standalone_mode=False
        sys.exit(rv)


if __name__ == "__main__":
    main()
