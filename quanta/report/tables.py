"""Tidy sweep tables: one row per cell (every input and every metric), the aggregate over seeds
(mean and 95% confidence interval), written as CSV and Parquet with the same bytes for the same
results wherever the cells ran."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from quanta.report.metrics import JOB_COLUMNS, SUMMARY_COLUMNS

# column -> type ("str", "int", "float", "bool"); None values are empty cells / nulls
INPUT_COLUMNS: dict[str, str] = {
    "trace": "str", "rate": "float", "cluster": "str", "policy": "str", "policy_name": "str",
    "params": "str", "seed": "int", "load_scale": "float", "format": "str", "world": "str",
    "max_jobs": "int", "restart_delay": "float", "node_mtbf_h": "float", "repair_h": "float",
    "until_h": "float", "drop_impossible": "bool", "window": "str", "queues": "str",
    "quanta_version": "str",
    "code_version": "str", "cell": "str",
}
METRIC_COLUMNS: dict[str, str] = {
    **{c: ("int" if c in ("jobs", "finished", "preemptions") else "float")
       for c in SUMMARY_COLUMNS if c != "policy"},
    "events": "int", "decisions": "int", "transitions": "int", "stalled": "bool",
}
RESULT_COLUMNS = {**INPUT_COLUMNS, **METRIC_COLUMNS}
# what identifies an aggregate row: every input but the seed and what names a single cell
GROUP_COLUMNS = [c for c in INPUT_COLUMNS if c not in ("seed", "cell")]
JOB_TABLE_COLUMNS: dict[str, str] = {
    **{c: INPUT_COLUMNS[c] for c in ("trace", "rate", "cluster", "policy", "seed", "load_scale",
                                     "cell")},
    "arrival": "int", "in_window": "bool",
    **{c: ("str" if c in ("job_id", "job_type", "gpu_types", "state") else
           "int" if c in ("gpus", "preemptions", "migrations", "reconfigurations") else "float")
       for c in JOB_COLUMNS},
}


def aggregate_columns() -> dict[str, str]:
    cols = {c: INPUT_COLUMNS[c] for c in GROUP_COLUMNS}
    cols["seeds"] = "int"
    cols["seed_list"] = "str"
    for m in METRIC_COLUMNS:
        cols[f"{m}_mean"] = "float"
        cols[f"{m}_ci95"] = "float"
    return cols


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (Student t over the seeds).
    Deviations are taken from the first value, so identical values give exactly (value, 0)."""
    from scipy.stats import t as student_t
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return math.nan, math.nan
    d = v - v[0]
    mean = float(v[0] + d.mean())
    if v.size == 1:
        return mean, math.nan
    sd = float(np.sqrt(np.sum((d - d.mean()) ** 2) / (v.size - 1)))
    return mean, float(student_t.ppf(0.975, v.size - 1) * sd / math.sqrt(v.size))


def aggregate(rows: Sequence[dict]) -> list[dict]:
    """One row per group of cells that differ only in their seed, in first-seen order; each
    group's statistics over its seeds in ascending order (the same bits whatever order the
    seeds were listed in: sums in another order round apart)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[c] for c in GROUP_COLUMNS), []).append(r)
    out = []
    for key, members in groups.items():
        members = sorted(members, key=lambda m: m["seed"])
        row = dict(zip(GROUP_COLUMNS, key))
        row["seeds"] = len(members)
        row["seed_list"] = ",".join(str(m["seed"]) for m in members)
        for m in METRIC_COLUMNS:
            vals = [math.nan if x[m] is None else float(x[m]) for x in members]
            row[f"{m}_mean"], row[f"{m}_ci95"] = mean_ci95(vals)
        out.append(row)
    return out


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)       # shortest exact round trip
    return str(v)


def write_csv(path: Path, rows: Sequence[dict], columns: dict[str, str]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(list(columns))
        for r in rows:
            w.writerow([_cell(r.get(c)) for c in columns])


def _arrow_table(rows: Sequence[dict], columns: dict[str, str]):
    import pyarrow as pa
    types = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}
    arrays = []
    for c, kind in columns.items():
        vals = [r.get(c) for r in rows]
        if kind == "float":
            vals = [None if v is None else float(v) for v in vals]
        elif kind == "int":
            vals = [None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)
                    for v in vals]
        elif kind == "str":
            vals = [None if v is None else str(v) for v in vals]
        arrays.append(pa.array(vals, type=types[kind]))
    return pa.Table.from_arrays(arrays, names=list(columns))


def write_parquet(path: Path, rows: Sequence[dict], columns: dict[str, str]) -> None:
    import pyarrow.parquet as pq
    pq.write_table(_arrow_table(rows, columns), path, compression="zstd")


def write_tables(folder: Path, name: str, rows: Sequence[dict], columns: dict[str, str],
                 csv_too: bool = True) -> None:
    """`<folder>/<name>.parquet` (and `.csv`), each written whole then renamed into place."""
    import os
    folder.mkdir(parents=True, exist_ok=True)
    for ext, writer in (("parquet", write_parquet), ("csv", write_csv)):
        if ext == "csv" and not csv_too:
            continue
        final = folder / f"{name}.{ext}"
        tmp = folder / f".{name}.{ext}.{os.getpid()}.tmp"
        writer(tmp, rows, columns)
        os.replace(tmp, final)


def frame(rows: Sequence[dict], columns: dict[str, str]):
    """A pandas DataFrame with the tables' columns and types (NaN for missing floats)."""
    return _arrow_table(rows, columns).to_pandas()
