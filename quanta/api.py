"""The Python API for notebooks and scripts: `quanta.simulate(...)` and `quanta.sweep(...)`
return pandas DataFrames, computed by the same code as `quanta simulate` and `quanta sweep`.

    import quanta
    run = quanta.simulate(trace="synthetic:3:200", cluster="gavel-108",
                          policies=["las", "fifo:backfill=false"], seed=0)
    run.summary        # a row per policy (the CLI's summary.csv columns, then run statistics)
    run.jobs           # a row per job per policy

    sw = quanta.sweep(rates=[2, 4], jobs=200, policies=["las", "fifo"], seeds=[0, 1, 2])
    sw.results         # a row per cell: every input and every metric
    sw.aggregate       # mean and 95% confidence interval over seeds

Policies are names (`"las"`, `"las:backfill=false"`, `"my_mod:MyPolicy:k=v"`) or
`quanta.policies.Policy` objects. Bad input raises `quanta.QuantaError` with one line naming
the field.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from quanta.errors import QuantaError
from quanta.policies.base import Policy

DEFAULT_POLICIES = ("fifo", "sjf", "srtf", "las")


@dataclass
class Simulation:
    """What `quanta.simulate` returns."""
    summary: Any                 # pandas DataFrame, a row per policy
    jobs: Any                    # pandas DataFrame, a row per job per policy
    notes: list[str]             # the run's header: trace, cluster, seed, world, notes
    queues: Any = None           # with `queues`: pandas DataFrame, a row per queue per policy
    results: list = field(repr=False, default_factory=list)   # the simulator's SimResults


@dataclass
class SweepResult:
    """What `quanta.sweep` returns. `jobs` (a row per job per cell) is read on first use."""
    results: Any                 # pandas DataFrame, a row per cell
    aggregate: Any               # pandas DataFrame, a row per cell group over seeds
    out: Path
    ran: int
    reused: int

    @property
    def jobs(self):
        import pandas as pd
        return pd.read_parquet(self.out / "jobs.parquet")


def _policies(p: str | Policy | Iterable[str | Policy]) -> list[str | Policy]:
    if isinstance(p, (str, Policy)):
        return [p]
    if isinstance(p, type) and issubclass(p, Policy):
        raise QuantaError(f"give a policy object ({p.__name__}()), not its class",
                          field="policies")
    if not isinstance(p, (list, tuple)):
        raise QuantaError(f"want a policy name, a Policy object or a list of them, got "
                          f"{_shown(p)}", field="policies")
    for item in p:
        if not isinstance(item, (str, Policy)):
            what = f"{item.__name__}(), not its class" if isinstance(item, type) and \
                issubclass(item, Policy) else f"a name or a Policy object, not {_shown(item)}"
            raise QuantaError(f"each policy is {what}", field="policies")
    if not p:
        raise QuantaError("no policies given", field="policies")
    return list(p)


def _shown(v: Any) -> str:
    text = repr(v)
    return f"{type(v).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


@contextmanager
def _argument_names(renamed: dict[str, str]):
    """The checks shared with the command line name its flags (`--seed`, `--load-scale`): a
    QuantaError from them names the Python argument instead (`seed`, `load_scale`; `renamed`
    where the argument's name is another, e.g. `--policy` -> `policies`)."""
    try:
        yield
    except QuantaError as e:
        field = e.field
        if (field or "").startswith("--"):
            name = field[2:].replace("-", "_")
            field = renamed.get(name, name)
        bare = _python_words(e.bare, renamed)    # ("use --force" -> "use force=True")
        if field == e.field and bare == e.bare:
            raise
        raise QuantaError(bare, source=e.source, line=e.line, field=field) from None


def _python_words(text: str, renamed: dict[str, str]) -> str:
    """A message's command-line flags as the Python arguments that do the same: a flag
    (`--force`) as `force=True`, an option (`--out`) as its argument's name (`out`)."""
    def one(m: re.Match) -> str:
        name = m.group(1).replace("-", "_")
        return f"{name}=True" if name in _FLAGS else renamed.get(name, name)
    return re.sub(r"(?<![\w-])--([a-z][a-z0-9-]*)", one, text)


# what each argument of simulate and sweep takes (None allowed where its default is None)
_TEXT = ("trace", "format", "world", "fig_format", "ray")
_PATHS = ("cluster", "queues", "out", "file")         # text, or a pathlib.Path (a trace too)
_INTS = ("seed", "max_jobs", "jobs", "workers")
_NUMBERS = ("load_scale", "restart_delay", "node_mtbf_h", "repair_h", "until_h")
_FLAGS = ("drop_impossible", "plots", "events", "force", "progress")
_OPTIONAL = ("cluster", "queues", "out", "file", "ray", "max_jobs", "jobs", "workers", "until_h")


def _check_args(args: dict[str, Any]) -> dict[str, Any]:
    """Each argument of the kind it takes (a QuantaError naming it, not an AttributeError or a
    numpy error from deep inside; a bool is no number here, a float no integer), paths as text;
    counts (max_jobs, jobs, workers) at least 1."""
    out = dict(args)
    for name, v in args.items():
        if v is None:
            if name not in _OPTIONAL:
                raise QuantaError("want a value, got None", field=name)
            continue
        if name in _TEXT or name in _PATHS:
            if isinstance(v, Path) and name in _PATHS + ("trace",):
                v = out[name] = str(v)
            if not isinstance(v, str):
                raise QuantaError(f"want text{' or a path' if name in _PATHS else ''}, got "
                                  f"{_shown(v)}", field=name)
            if name in ("out", "file") and not v.strip():
                raise QuantaError("is empty: name a folder" if name == "out" else
                                  "is empty: name a sweep file", field=name)
        elif name in _INTS:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise QuantaError(f"want an integer, got {_shown(v)}", field=name)
            if name != "seed" and v < 1:
                raise QuantaError(f"want 1 or more, got {v}", field=name)
            out[name] = int(v)
        elif name in _NUMBERS:
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise QuantaError(f"want a number, got {_shown(v)}", field=name)
            out[name] = float(v)
        elif name in _FLAGS and not isinstance(v, (bool, np.bool_)):
            raise QuantaError(f"want True or False, got {_shown(v)}", field=name)
    return out


def _axis_of(name: str, v: Any, kind: str) -> tuple:
    """A sweep axis: one value or a non-empty list of values of `kind` (text, int, number)."""
    values = [v] if isinstance(v, (str, Path, int, float, np.integer, np.floating)) else v
    if isinstance(values, (range, np.ndarray)) and np.ndim(values) == 1:
        values = list(values.tolist() if isinstance(values, np.ndarray) else values)
    if not isinstance(values, (list, tuple)):     # (a set has no order; a generator no length)
        raise QuantaError(f"want a value or a list of them, got {_shown(v)}", field=name)
    if not values:
        raise QuantaError("is an empty list", field=name)
    for x in values:
        ok = isinstance(x, (str, Path)) if kind == "text" else not isinstance(x, bool) and (
            isinstance(x, (int, np.integer)) if kind == "int" else
            isinstance(x, (int, float, np.integer, np.floating)))
        if not ok:
            want = {"text": "names or paths", "int": "integers", "num": "numbers"}[kind]
            raise QuantaError(f"want {want}, got {_shown(x)}", field=name)
    conv = {"text": str, "int": int, "num": float}[kind]
    return tuple(dict.fromkeys(conv(x) for x in values))


def simulate(trace: str = "philly", cluster: str | None = None,
             policies: str | Policy | Sequence[str | Policy] = DEFAULT_POLICIES, seed: int = 0, *,
             window: str | tuple | None = None, format: str = "auto", max_jobs: int | None = None,
             load_scale: float = 1.0, restart_delay: float = 30.0, drop_impossible: bool = False,
             node_mtbf_h: float = 0.0, repair_h: float = 1.0, until_h: float | None = None,
             world: str = "quanta", out: str | Path | None = None, plots: bool = False,
             events: bool = False, force: bool = False, fig_format: str = "png",
             queues: str | Path | None = None) -> Simulation:
    """Replay `trace` on `cluster` (None: gavel-108, or the world's reference cluster) under each
    policy (as `quanta simulate`); with `out`, the same
    files as the CLI are written there too (a folder holding an earlier run's files is refused
    unless `force`, which replaces them). `queues`: a queues file (docs/queues.md): every policy
    under its quotas, fair share and priorities; each result's per-queue figures are in
    `Simulation.queues`."""
    # (the request's own fields, checked; paths as text)
    a = _check_args(dict(trace=trace, cluster=cluster, seed=seed, format=format,
                         max_jobs=max_jobs, load_scale=load_scale, restart_delay=restart_delay,
                         drop_impossible=drop_impossible, node_mtbf_h=node_mtbf_h,
                         repair_h=repair_h, until_h=until_h, world=world, out=out, plots=plots,
                         events=events, force=force, fig_format=fig_format, queues=queues))
    from quanta.report.metrics import JOB_COLUMNS, SUMMARY_COLUMNS, job_rows
    from quanta.report.tables import JOB_TABLE_COLUMNS, METRIC_COLUMNS, frame
    from quanta.report.window import parse_window
    from quanta.runner import SimulationRequest, run_simulations
    win = parse_window(window, field="window")
    if a["out"] is not None:
        a["out"] = Path(a["out"])
    req = SimulationRequest(**a, policies=_policies(policies), window=win,
                            command="quanta.simulate(...) from Python: every input below")
    with _argument_names({"policy": "policies"}):
        rows, header, results = run_simulations(req, keep_results=True)
    stat_cols = {"events": "int", "decisions": "int", "transitions": "int", "stalled": "bool"}
    sum_cols = {"policy": "str", **{c: METRIC_COLUMNS[c] for c in SUMMARY_COLUMNS[1:]},
                **stat_cols}
    srows = [{**r, "events": res.events, "decisions": res.decisions,
              "transitions": res.transitions, "stalled": res.stalled}
             for r, res in zip(rows, results)]
    job_cols = {"policy": "str", "arrival": "int", "in_window": "bool",
                **{c: JOB_TABLE_COLUMNS[c] for c in JOB_COLUMNS}}
    jrows = []
    for res in results:
        submit = res.table.submit
        rank = np.empty(len(submit), dtype=np.int64)
        rank[np.argsort(submit, kind="stable")] = np.arange(len(submit))
        inside = win.mask(submit) if win is not None else np.ones(len(submit), bool)
        for i, row in enumerate(job_rows(res)):
            jrows.append({"policy": res.policy, "arrival": int(rank[i]),
                          "in_window": bool(inside[i]), **dict(zip(JOB_COLUMNS, row))})
    queue_frame = None
    if req.queues is not None:
        import pandas as pd

        from quanta.queues.metrics import queue_columns
        from quanta.queues.sim import write_queue_report
        from quanta.queues.spec import load_queues
        tree = load_queues(req.queues)
        qrows = write_queue_report(None, results, [tree] * len(results))
        queue_frame = pd.DataFrame(qrows, columns=queue_columns(qrows))
    return Simulation(frame(srows, sum_cols), frame(jrows, job_cols), list(header), queue_frame,
                      results)


def sweep(traces: str | Sequence[str] | None = None, clusters: str | Sequence[str] | None = None,
          policies: str | Policy | Sequence[str | Policy] | None = None,
          seeds: int | Sequence[int] | None = None,
          load_scales: float | Sequence[float] | None = None, *,
          rates: float | Sequence[float] | None = None, jobs: int | None = None,
          file: str | Path | None = None, window: str | tuple | None = None,
          out: str | Path | None = "quanta-sweep", workers: int | None = None,
          ray: str | None = None, progress: bool = True, **options: Any) -> SweepResult:
    """Run a sweep (as `quanta sweep`): the product of traces (and synthetic `rates` with `jobs`
    jobs each), clusters, policies, load scales and seeds, resumably in `out` (None: a temporary
    folder). `file`: a sweep YAML whose fields the arguments given here override. `workers`:
    local processes (default every core); `ray`: a Ray cluster address or 'auto'. Other options:
    format, max_jobs, restart_delay, node_mtbf_h, repair_h, until_h, drop_impossible, world."""
    import tempfile

    from quanta.report import tables
    from quanta.report.window import parse_window
    from quanta.sweeps import SweepSpec, run_sweep
    file = _check_args({"file": file})["file"]
    spec = SweepSpec()
    if file is not None:
        from quanta.sweepfile import load_sweep_file
        spec = load_sweep_file(file, more_rates=rates is not None)
    known = {f.name for f in fields(SweepSpec)}
    bad = sorted(set(options) - known)
    if bad:
        raise QuantaError(f"unknown option '{bad[0]}' (options: "
                          f"{', '.join(sorted(known - {'traces', 'rates', 'clusters'}))})",
                          field=bad[0])
    options = _check_args(dict(jobs=jobs, out=out, workers=workers, ray=ray, progress=progress,
                               **options))
    jobs, out, workers, ray, progress = (options.pop(k) for k in ("jobs", "out", "workers",
                                                                  "ray", "progress"))
    axes = {"traces": (traces, "text"), "clusters": (clusters, "text"), "rates": (rates, "num"),
            "seeds": (seeds, "int"), "load_scales": (load_scales, "num")}
    over: dict[str, Any] = {k: _axis_of(k, v, kind) for k, (v, kind) in axes.items()
                            if v is not None}
    if policies is not None:
        over["policies"] = tuple(_policies(policies))
    if jobs is not None:
        over["jobs"] = jobs
    if window is not None:
        over["window"] = parse_window(window, field="window")
    over.update(options)
    spec = replace(spec, **over)
    if jobs is not None and not spec.rates:      # (as the CLI's --jobs)
        raise QuantaError("sizes the synthetic traces of rates (none given): a trace's jobs are "
                          "cut with max_jobs", field="jobs")
    if out is None:
        out = Path(tempfile.mkdtemp(prefix="quanta-sweep-"))
    console = None
    if progress:
        from rich.console import Console
        console = Console(stderr=True)
    with _argument_names({"policy": "policies", "trace": "traces", "cluster": "clusters",
                          "seed": "seeds", "load_scale": "load_scales"}):
        res = run_sweep(spec, Path(out), workers=workers, ray=ray, console=console)
    return SweepResult(tables.frame(res.rows, tables.RESULT_COLUMNS),
                       tables.frame(res.aggregate, tables.aggregate_columns()), res.out,
                       res.ran, res.reused)

