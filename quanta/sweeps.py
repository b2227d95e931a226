"""Sweeps: the cartesian product of traces (or synthetic rates), clusters, policies, load scales
and seeds, one `quanta simulate` run per cell (the same code path: `runner.run_simulations`),
in parallel on local processes or on a Ray cluster, resumable, gathered into tidy tables.

A cell is one (trace, cluster, load scale, policy, seed). Its key is a hash of its full
configuration (every option, the bytes of trace and cluster files, a plugin policy's module) and
of the code version; finished cells are kept in `<out>/cells/` and never run twice.
Outputs in `<out>/`: results.csv/.parquet (a row per cell), aggregate.csv/.parquet (mean and 95%
confidence interval over seeds), jobs.parquet (a row per job per cell), sweep.json (the spec).
"""

from __future__ import annotations

import json
import math
import os
import pickle
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from quanta.cellstore import (CellStore, cell_key, code_version, file_digest, library_versions,
                              policy_config)
from quanta.errors import QuantaError
from quanta.policies.base import Policy
from quanta.report.window import Window, parse_window


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep. Axes are tuples; every other field is one value for all cells."""
    traces: tuple[str, ...] = ()              # files, sample names, synthetic:RATE:JOBS
    rates: tuple[float, ...] = ()             # synthetic Gavel-style arrivals (jobs/hour) ...
    jobs: int = 1000                          # ... with this many jobs each
    clusters: tuple[str, ...] | None = None   # None: the world's (World.cluster)
    policies: tuple[str | Policy, ...] = ("fifo", "sjf", "srtf", "las")
    seeds: tuple[int, ...] = (0,)
    load_scales: tuple[float, ...] = (1.0,)
    format: str = "auto"
    max_jobs: int | None = None
    restart_delay: float = 30.0
    node_mtbf_h: float = 0.0
    repair_h: float = 1.0
    until_h: float | None = None
    drop_impossible: bool = False
    world: str = "quanta"
    window: Window | None = None
    queues: str | None = None                 # queues file: every cell's policy under it

    def __post_init__(self) -> None:
        # names as given, less the spaces around them (" v100:2x4" made cells of their own)
        strip = lambda xs: None if xs is None else tuple(  # noqa: E731
            x.strip() if isinstance(x, str) else x for x in xs)
        for name in ("traces", "clusters", "policies"):
            object.__setattr__(self, name, strip(getattr(self, name)))

    def all_clusters(self) -> tuple[str, ...]:
        if self.clusters is not None:
            return self.clusters
        from quanta.worlds import get_world
        return (get_world(self.world).cluster,)

    def all_traces(self) -> list[str]:
        out = list(self.traces) + [f"synthetic:{_rate_text(r)}:{self.jobs}" for r in self.rates]
        return out or ["philly"]


@dataclass(frozen=True)
class Cell:
    index: int
    trace: str
    cluster: str
    policy: str | Policy
    seed: int
    load_scale: float
    config: dict = field(hash=False, compare=False)
    key: str = ""

    @property
    def label(self) -> str:
        return f"{self.trace} | {self.cluster} | {policy_label(self.policy)} | " \
               f"load x{self.load_scale:g} | seed {self.seed}"


def policy_label(p: str | Policy) -> str:
    """A cell's policy as its tables name it: as `quanta simulate` labels it (runner.build_policy;
    a Policy object: its label(), else its class and its parameters that are not defaults)."""
    if isinstance(p, Policy):
        from quanta.runner import object_label
        return p.label() or object_label(p)
    from quanta.policies import make_policy
    return make_policy(p).label()


def synthetic_rate(trace: str) -> float | None:
    if not trace.startswith("synthetic:"):
        return None
    try:
        return float(trace.split(":")[1])
    except (IndexError, ValueError):
        return None


def expand(spec: SweepSpec) -> list[Cell]:
    """Every cell of the sweep, in table order (trace, cluster, load scale, policy, seed);
    cells with the same key (a value given twice) appear once."""
    version = code_version()
    common = {k: getattr(spec, k) for k in ("format", "max_jobs", "restart_delay", "node_mtbf_h",
                                            "repair_h", "until_h", "drop_impossible", "world")}
    common["window"] = None if spec.window is None else str(spec.window)
    common["code"] = version
    common["libraries"] = library_versions()
    if spec.queues is not None:            # (absent otherwise: earlier cells keep their keys)
        common["queues"], common["queues_digest"] = spec.queues, file_digest(spec.queues)
    pol_cfg = [policy_config(p) for p in spec.policies]
    cells, seen = [], set()
    for trace in spec.all_traces():
        tdig = file_digest(trace) if not trace.startswith("synthetic:") else None
        for cluster in spec.all_clusters():
            cdig = file_digest(cluster)
            for scale in spec.load_scales:
                for pol, pcfg in zip(spec.policies, pol_cfg):
                    for seed in spec.seeds:
                        config = {**common, "trace": trace, "trace_digest": tdig,
                                  "cluster": cluster, "cluster_digest": cdig, "policy": pcfg,
                                  "seed": int(seed), "load_scale": float(scale)}
                        key = cell_key(_by_content(config))
                        if key in seen:
                            continue
                        seen.add(key)
                        cells.append(Cell(len(cells), trace, cluster, pol, int(seed),
                                          float(scale), config, key))
    return cells


def _by_content(config: dict) -> dict:
    """What a cell's key is made of: its config with each input file (trace, cluster, queues)
    known by its bytes and its extension alone, so that one file named another way (`t.csv`,
    `./t.csv`, an absolute path) keeps its cells. (Nothing a cell stores depends on the rest of
    the path's text; the extension may: a `.trace` file of tab-separated fields is Gavel's.)"""
    out = dict(config)
    for name in ("trace", "cluster", "queues"):
        if out.get(f"{name}_digest") is not None:
            out[name] = Path(out[name]).suffix.lower()
    return out


def _rate_text(r: float) -> str:
    """A rate as a synthetic trace names it: short (3, 2.5), exact (1234567.8 and 2.5000001 were
    rounded to six digits by :g, the second one merged with 2.5)."""
    from quanta.policies.registry import spec_text
    return spec_text(float(r))


def check_values(spec: SweepSpec) -> None:
    """A QuantaError (one line, the field's name) for a number no cell could use."""
    from quanta.policies.base import MAX_SEED
    for s in spec.seeds:
        if int(s) < 0:
            raise QuantaError(f"seed {s} is negative", field="seeds")
        if int(s) > MAX_SEED:
            raise QuantaError(f"seed {s} is past {MAX_SEED} (2^63 - 1)", field="seeds")
    for x in spec.load_scales:
        if not 0 < x < float("inf"):
            raise QuantaError(f"load scale {x} is not a positive number", field="load_scales")
    for r in spec.rates:
        if not 0 < r < float("inf"):
            raise QuantaError(f"rate {r} is not a positive number (jobs/hour)", field="rates")
    from quanta.runner import MAX_SYNTHETIC_JOBS
    if spec.jobs <= 0:
        raise QuantaError(f"jobs {spec.jobs} is not positive", field="jobs")
    if spec.jobs > MAX_SYNTHETIC_JOBS:      # (was the synthetic trace's error, named --trace)
        raise QuantaError(f"jobs {spec.jobs:,} is past the {MAX_SYNTHETIC_JOBS:,} a synthetic "
                          f"trace may have", field="jobs")
    if spec.max_jobs is not None and spec.max_jobs <= 0:
        raise QuantaError(f"max_jobs {spec.max_jobs} is not positive", field="max_jobs")
    if spec.max_jobs is not None and spec.max_jobs > MAX_SEED:   # (the tables hold an int64)
        raise QuantaError(f"max_jobs {spec.max_jobs} is past {MAX_SEED} (2^63 - 1)",
                          field="max_jobs")
    if spec.until_h is not None and not spec.until_h > 0:
        raise QuantaError(f"until_h {spec.until_h:g} is not a positive number of hours",
                          field="until_h")
    from quanta.runner import time_problem
    for name in ("restart_delay", "node_mtbf_h", "repair_h"):
        why = time_problem(name, getattr(spec, name))
        if why:
            raise QuantaError(why, field=name)
    if spec.repair_h != SweepSpec.repair_h and not spec.node_mtbf_h > 0:    # (it would be ignored)
        raise QuantaError("is the repair time of failing nodes: give node_mtbf_h too",
                          field="repair_h")


def validate(spec: SweepSpec) -> None:
    """Fail before running anything on an input no cell could use (one-line QuantaError)."""
    from quanta.model.presets import resolve_cluster
    from quanta.runner import build_policy, check_distinct, load_any_trace
    from quanta.worlds import get_world
    world = get_world(spec.world)
    if not spec.policies:
        raise QuantaError("no policies to sweep", field="policies")
    if not spec.all_clusters():
        raise QuantaError("no clusters to sweep", field="clusters")
    if not spec.seeds:
        raise QuantaError("no seeds to sweep", field="seeds")
    check_values(spec)
    built, named, specs = [], [], set()
    for p in spec.policies:
        if isinstance(p, str):
            if p.strip() in specs:        # the same text twice: one cell (expand)
                continue
            specs.add(p.strip())
        built.append(build_policy(p, world, 0))
        named.append(isinstance(p, str))
    check_distinct(built, named)
    for c in spec.all_clusters():
        resolve_cluster(c)
    if spec.queues is not None:
        from quanta.queues.spec import load_queues
        load_queues(spec.queues)
    for t in spec.all_traces():
        tr = load_any_trace(t, spec.format, 0)
        if spec.window is not None and spec.window.lo >= min(len(tr.jobs), spec.max_jobs or
                                                             len(tr.jobs)):
            raise QuantaError(f"window {spec.window} starts past the last of the trace's "
                              f"{min(len(tr.jobs), spec.max_jobs or len(tr.jobs))} jobs",
                              source=t, field="window")


# ---------------------------------------------------------------------------------------------
# one cell (runs in a worker process, a Ray task, or inline)

def cell_payload(cell: Cell, spec: SweepSpec, with_paths: bool = False,
                 pickled: bool = True) -> dict:
    """What a cell's run needs, as plain values; a Policy object pickled by value (cloudpickle)
    for another process, or itself for this one (`pickled=False`: unpickling a class of
    __main__ in the process that defined it rebuilt that very class, without its dataclass
    fields)."""
    import cloudpickle
    trace = cell.trace
    if not trace.startswith("synthetic:") and Path(trace).exists():
        trace = str(Path(trace).resolve())
    cluster = cell.cluster
    if Path(cluster).is_file():
        cluster = str(Path(cluster).resolve())
    pol = cell.policy
    return {
        "trace": trace, "cluster": cluster, "seed": cell.seed, "load_scale": cell.load_scale,
        "policy": cloudpickle.dumps(pol) if pickled and not isinstance(pol, str) else pol,
        "options": {k: getattr(spec, k) for k in ("format", "max_jobs", "restart_delay",
                                                  "node_mtbf_h", "repair_h", "until_h",
                                                  "drop_impossible", "world")},
        "window": None if spec.window is None else str(spec.window),
        "queues": None if spec.queues is None else str(Path(spec.queues).resolve()),
        "paths": [p for p in sys.path if p and os.path.isdir(p)] if with_paths else [],
        "cwd": os.getcwd(),
    }


def run_cell(payload: dict) -> dict:
    """Simulate one cell through `quanta simulate`'s own code path; a dict of plain values
    (`error` set on a user error, which stops the sweep with that one line)."""
    for p in payload.get("paths", ()):            # a Ray worker: the driver's plugin modules
        if p not in sys.path:
            sys.path.append(p)
    from threadpoolctl import threadpool_limits

    from quanta.report.metrics import job_rows
    from quanta.runner import SimulationRequest, run_simulations
    pol = payload["policy"]
    if isinstance(pol, bytes):
        pol = pickle.loads(pol)
    req = SimulationRequest(trace=payload["trace"], cluster=payload["cluster"], policies=[pol],
                            seed=payload["seed"], load_scale=payload["load_scale"], out=None,
                            plots=False, window=payload["window"], queues=payload.get("queues"),
                            **payload["options"])
    cwd = os.getcwd()
    try:
        if os.path.isdir(payload.get("cwd", "")):
            os.chdir(payload["cwd"])                 # relative paths inside cluster files etc.
        with threadpool_limits(1):
            rows, header, results = run_simulations(req, keep_results=True)
    except QuantaError as err:
        return {"error": str(err)}
    finally:
        os.chdir(cwd)
    res = results[0]
    window = parse_window(payload["window"])
    submit = res.table.submit
    import numpy as np
    rank = np.empty(len(submit), dtype=np.int64)
    rank[np.argsort(submit, kind="stable")] = np.arange(len(submit))
    inside = window.mask(submit) if window is not None else np.ones(len(submit), bool)
    jobs = [[int(rank[i]), bool(inside[i])] + [_plain(v) for v in row]
            for i, row in enumerate(job_rows(res))]
    return {"summary": {k: _plain(v) for k, v in rows[0].items()}, "jobs": jobs, "notes": header,
            "events": int(res.events), "decisions": int(res.decisions),
            "transitions": int(res.transitions), "stalled": bool(res.stalled),
            "wall_s": float(res.wall_s)}


def _plain(v):
    """numpy scalars -> Python values (JSON and identical bytes whatever process made them)."""
    if hasattr(v, "item"):
        v = v.item()
    return v


# ---------------------------------------------------------------------------------------------
# the rows of the tables

_TOP = ("events", "decisions", "transitions", "stalled")     # a cell's metrics beside its summary


def result_row(cell: Cell, spec: SweepSpec, data: dict) -> dict:
    from quanta.policies.registry import split_spec
    import quanta
    label = policy_label(cell.policy)
    if isinstance(cell.policy, Policy):        # (params: what object_label says of it)
        name, params = type(cell.policy).__name__, label.partition(":")[2] \
            if label.startswith(type(cell.policy).__name__ + ":") else ""
    else:
        name, params = split_spec(cell.policy)
    s = data["summary"]
    row = {"trace": cell.trace, "rate": synthetic_rate(cell.trace), "cluster": cell.cluster,
           "policy": label, "policy_name": name, "params": params, "seed": cell.seed,
           "load_scale": cell.load_scale, "format": spec.format, "world": spec.world,
           "max_jobs": spec.max_jobs, "restart_delay": float(spec.restart_delay),
           "node_mtbf_h": float(spec.node_mtbf_h), "repair_h": float(spec.repair_h),
           "until_h": spec.until_h, "drop_impossible": spec.drop_impossible,
           "window": "" if spec.window is None else str(spec.window),
           "queues": spec.queues or "",
           "quanta_version": quanta.__version__, "code_version": cell.config["code"],
           "cell": cell.key}
    for k, v in s.items():
        if k != "policy":
            row[k] = v
    for k in _TOP:
        row[k] = data[k]
    return row


_OF_KIND = {"int": lambda v: v is None or type(v) is int,
            "float": lambda v: v is None or type(v) in (int, float),
            "str": lambda v: v is None or type(v) is str,
            "bool": lambda v: type(v) is bool}


def stored_cell_whole(data: dict) -> bool:
    """Whether a stored cell holds every value the sweep's tables take, each of its column's
    kind: a cell file edited or garbled by hand runs again, as an unreadable one does (a
    KeyError or ValueError stopped the sweep before)."""
    from quanta.report.metrics import JOB_COLUMNS
    from quanta.report.tables import JOB_TABLE_COLUMNS, METRIC_COLUMNS
    summary, jobs = data.get("summary"), data.get("jobs")
    if not isinstance(summary, dict) or not isinstance(jobs, list):
        return False
    for c, kind in METRIC_COLUMNS.items():
        held = data if c in _TOP else summary
        if held.get(c) is None or not _OF_KIND[kind](held[c]):      # (missing: NaN, not None)
            return False
    kinds = [_OF_KIND[JOB_TABLE_COLUMNS[c]] for c in ["arrival", "in_window"] + JOB_COLUMNS]
    fine: set[tuple] = set()         # the rows' types checked (rows of one cell share a few)
    for j in jobs:
        if not isinstance(j, list) or len(j) != len(kinds):
            return False
        types = tuple(map(type, j))
        if types not in fine:
            if not all(f(v) for f, v in zip(kinds, j)):
                return False
            fine.add(types)
    # every job once (arrival ranks 0..n-1), as many in the window as the summary counts (a row
    # taken out by hand was reused: one job fewer in jobs.parquet)
    if sorted(j[0] for j in jobs) != list(range(len(jobs))) or \
            sum(1 for j in jobs if j[1]) != summary["jobs"]:
        return False
    return True


def job_table_rows(cell: Cell, row: dict, data: dict) -> list[dict]:
    from quanta.report.metrics import JOB_COLUMNS
    head = {c: row[c] for c in ("trace", "rate", "cluster", "policy", "seed", "load_scale", "cell")}
    cols = ["arrival", "in_window"] + JOB_COLUMNS
    return [{**head, **dict(zip(cols, j))} for j in data["jobs"]]


# ---------------------------------------------------------------------------------------------
# running a sweep

@dataclass
class SweepOutcome:
    out: Path
    cells: list[Cell]
    rows: list[dict]              # results, a row per cell in table order
    aggregate: list[dict]
    ran: int                      # cells simulated now
    reused: int                   # cells found finished
    wall_s: float
    figures: list[Path] = field(default_factory=list)   # JCT vs load figures written


def run_sweep(spec: SweepSpec, out: Path, *, workers: int | None = None, ray: str | None = None,
              console=None, on_cell: Callable[[int, int], None] | None = None,
              plots: bool = False, fig_format: str = "png") -> SweepOutcome:
    """Run every cell not already finished in `out`, then write the tables. `workers`: local
    processes (default: every core; 1 = in this process); `ray`: a Ray cluster's address (or
    'auto'; an already connected Ray is used as it is). `console`: a rich progress bar on it;
    `on_cell(done, total)` after each cell; `plots`: JCT vs load figures (`fig_format`)."""
    t0 = time.time()
    out = Path(out)
    validate(spec)
    from quanta.report.outdir import FIG_FORMATS
    if fig_format not in FIG_FORMATS:         # (with --no-plots too, as simulate)
        raise QuantaError(f"unknown figure format '{fig_format}' (png, pdf or svg)",
                          field="--fig-format")
    cells = expand(spec)
    if out.exists() and not out.is_dir():
        raise QuantaError(f"output folder {out} is a file", field="--out")
    from quanta.report.outdir import CONFIG, listed_files
    if listed_files(out):   # (its tables would sit among a run's: neither could be told apart)
        raise QuantaError(f"output folder {out}/ holds a `quanta simulate` run's files (its "
                          f"{CONFIG} lists them): use another --out", field="--out")
    made = not out.exists()
    from quanta.executors import refuse_in_a_starting_worker
    refuse_in_a_starting_worker()      # (before the lock: the sweep that started it holds it)
    with writing(out):
        out.mkdir(parents=True, exist_ok=True)
        lock = _lock(out)              # (two sweeps into one folder mixed their tables)
    try:
        return _run_cells(spec, out, cells, made, workers, ray, console, plots, fig_format,
                          on_cell, t0)
    finally:
        lock.close()


@contextmanager
def writing(out: Path):
    """An OSError of writing the sweep's files as the one-line error of --out (a folder of a
    read-only file system, a file where `cells` or a table goes): was a traceback."""
    try:
        yield
    except OSError as e:
        where = f" ({e.filename})" if e.filename else ""
        raise QuantaError(f"cannot write the output folder {out}: {e.strerror or e}{where}",
                          field="--out") from None


LOCK = ".quanta-sweep.lock"


def _lock(out: Path):
    """OUT/.quanta-sweep.lock held (flock) while this sweep runs: a second sweep into the same
    folder is refused, not interleaved with it (its results.csv beside the other's jobs.parquet)."""
    import fcntl
    f = open(out / LOCK, "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise QuantaError(f"output folder {out}/ is in use by another sweep: wait for it to end "
                          f"or use another --out", field="--out") from None
    return f


def _run_cells(spec: SweepSpec, out: Path, cells: list[Cell], made: bool, workers, ray, console,
               plots: bool, fig_format: str, on_cell, t0: float) -> SweepOutcome:
    """run_sweep's work, with the folder made and locked."""
    from quanta.executors import default_workers, one_thread, run_local, run_ray
    store = CellStore(out)
    done: dict[int, dict] = {}
    for c in cells:
        got = store.get(c.key)
        if got is not None and stored_cell_whole(got):
            done[c.index] = got
    todo = [c for c in cells if c.index not in done]
    reused = len(done)
    total = len(cells)

    bar = task = None
    if console is not None and console.is_terminal:     # (elsewhere a bar is blank lines)
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)
        bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("cells"), TimeElapsedColumn(), TextColumn("ETA"),
                       TimeRemainingColumn(), console=console, transient=True)
        task = bar.add_task("sweep", total=total, completed=reused)
        bar.start()
    failure: list[str] = []

    def finished(i: int, data: dict) -> bool:
        """Store a result; False to stop the sweep (a user error in that cell)."""
        cell = todo[i]
        if "error" in data:
            failure.append(f"cell {cell.label}: {data['error']}")
            return False
        with writing(out):
            store.put(cell.key, {"config": cell.config, **data})
        done[cell.index] = data
        if bar is not None:
            bar.advance(task)
        if on_cell is not None:
            on_cell(len(done), total)
        return True

    try:
        if todo:
            if ray is not None:
                payloads = [cell_payload(c, spec, with_paths=True) for c in todo]
                run_ray(run_cell, payloads, ray, finished)
            else:
                n = min(workers or default_workers(), len(todo))
                payloads = [cell_payload(c, spec, pickled=n > 1) for c in todo]
                run_local(run_cell, payloads, n, finished, one_thread)
        if failure:
            raise QuantaError(failure[0])
    except BaseException:
        if made:             # a folder this sweep made and nothing went into: not left behind
            (out / LOCK).unlink(missing_ok=True)
            _remove_empty(out)
        raise
    finally:
        if bar is not None:
            bar.stop()
    rows = [result_row(c, spec, done[c.index]) for c in cells]
    with writing(out):
        agg = write_outputs(out, cells, rows, done)
        # the spec last, with the tables it describes (a sweep stopped by a failing cell leaves
        # the earlier sweep's spec and tables as they were, side by side)
        tmp = out / "sweep.json.tmp"
        tmp.write_text(json.dumps(spec_record(spec), indent=1) + "\n")
        os.replace(tmp, out / "sweep.json")
        figures = []
        if plots:
            from quanta.report.plots import sweep_figures
            figures = sweep_figures(agg, out, fig_format)
    return SweepOutcome(out, cells, rows, agg, len(todo), reused, time.time() - t0, figures)


def _remove_empty(folder: Path) -> None:
    """Remove `folder` and the folders in it, as far as they hold no file."""
    for d in sorted((p for p in folder.rglob("*") if p.is_dir() and not p.is_symlink()),
                    key=lambda p: len(p.parts), reverse=True):
        try:
            d.rmdir()
        except OSError:
            pass
    try:
        folder.rmdir()
    except OSError:
        pass


def write_outputs(out: Path, cells: Sequence[Cell], rows: list[dict], data: dict) -> list[dict]:
    from quanta.report import tables
    agg = tables.aggregate(rows)
    tables.write_tables(out, "results", rows, tables.RESULT_COLUMNS)
    tables.write_tables(out, "aggregate", agg, tables.aggregate_columns())
    jobs = [j for c, r in zip(cells, rows) for j in job_table_rows(c, r, data[c.index])]
    tables.write_tables(out, "jobs", jobs, tables.JOB_TABLE_COLUMNS, csv_too=False)
    return agg


def spec_record(spec: SweepSpec) -> dict:
    d = asdict(replace(spec, policies=()))
    d["policies"] = [p if isinstance(p, str) else policy_label(p) for p in spec.policies]
    d["window"] = None if spec.window is None else str(spec.window)
    d["clusters"] = list(spec.all_clusters())
    d["code_version"] = code_version()
    for k, v in d.items():
        if isinstance(v, tuple):
            d[k] = list(v)
        if isinstance(v, float) and math.isinf(v):
            d[k] = str(v)
    return d
