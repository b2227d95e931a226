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

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

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
    out = list(p)
    if not out:
        raise QuantaError("no policies given", field="policies")
    return out


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
    import numpy as np

    from quanta.report.metrics import JOB_COLUMNS, SUMMARY_COLUMNS, job_rows
    from quanta.report.tables import JOB_TABLE_COLUMNS, METRIC_COLUMNS, frame
    from quanta.report.window import parse_window
    from quanta.runner import SimulationRequest, run_simulations
    win = parse_window(window, field="window")
    req = SimulationRequest(trace=trace, format=format, cluster=cluster,
                            policies=_policies(policies), seed=seed,
                            out=Path(out) if out is not None else None, max_jobs=max_jobs,
                            load_scale=load_scale, restart_delay=restart_delay,
                            drop_impossible=drop_impossible, node_mtbf_h=node_mtbf_h,
                            repair_h=repair_h, until_h=until_h, plots=plots, events=events,
                            world=world, window=win, force=force, fig_format=fig_format,
                            queues=str(queues) if queues is not None else None,
                            command="quanta.simulate(...) from Python: every input below")
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
    if queues is not None:
        import pandas as pd

        from quanta.queues.metrics import queue_columns
        from quanta.queues.sim import write_queue_report
        from quanta.queues.spec import load_queues
        tree = load_queues(queues)
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
    spec = SweepSpec()
    if file is not None:
        from quanta.sweepfile import load_sweep_file
        spec = load_sweep_file(file)
    known = {f.name for f in fields(SweepSpec)}
    bad = sorted(set(options) - known)
    if bad:
        raise QuantaError(f"unknown option '{bad[0]}' (options: "
                          f"{', '.join(sorted(known - {'traces', 'rates', 'clusters'}))})",
                          field=bad[0])
    axes = {"traces": traces, "clusters": clusters, "rates": rates, "seeds": seeds,
            "load_scales": load_scales}
    over: dict[str, Any] = {k: _axis(v) for k, v in axes.items() if v is not None}
    if policies is not None:
        over["policies"] = tuple(_policies(policies))
    if jobs is not None:
        over["jobs"] = int(jobs)
    if window is not None:
        over["window"] = parse_window(window, field="window")
    over.update(options)
    spec = replace(spec, **over)
    if out is None:
        out = Path(tempfile.mkdtemp(prefix="quanta-sweep-"))
    console = None
    if progress:
        from rich.console import Console
        console = Console(stderr=True)
    res = run_sweep(spec, Path(out), workers=workers, ray=ray, console=console)
    return SweepResult(tables.frame(res.rows, tables.RESULT_COLUMNS),
                       tables.frame(res.aggregate, tables.aggregate_columns()), res.out,
                       res.ran, res.reused)


def _axis(v: Any) -> tuple:
    if isinstance(v, (str, int, float)):
        return (v,)
    return tuple(dict.fromkeys(v))
