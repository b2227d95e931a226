"""Figures for papers (matplotlib, Agg backend; imported only when a run writes figures).

A run (`quanta simulate`): JCT CDF, finish-time-fairness CDF, average JCT per job type,
utilisation per GPU type over the arrival window (an arrivals-end marker; the drain tail left
out), queue length over time. A sweep: average and p99 JCT vs load with 95% confidence bands.
Every policy keeps one colour (Okabe-Ito, colour-blind safe), line style and marker in every
figure, so lines stay apart in greyscale; titles name the trace and the cluster; sized for a
paper column (3.4 in wide panels, 8 pt text); png, pdf or svg.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from quanta.report.metrics import job_metrics  # noqa: E402
from quanta.sim.engine import SimResult  # noqa: E402

COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
           "#F0E442"]
LINES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 2)), (0, (6, 2)), (0, (3, 1, 1, 1))]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
HATCHES = ["", "///", "...", "xxx", "\\\\\\", "++", "oo", "--"]
RC = {"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
      "xtick.labelsize": 7, "ytick.labelsize": 7, "lines.linewidth": 1.3, "lines.markersize": 4,
      "savefig.dpi": 200, "svg.fonttype": "none", "pdf.fonttype": 42}
WIDTH = 3.4     # inches: one paper column


def style(i: int) -> dict:
    """Colour, line style and marker of the i-th policy (the same in every figure)."""
    return {"color": COLOURS[i % len(COLOURS)], "linestyle": LINES[i % len(LINES)],
            "marker": MARKERS[i % len(MARKERS)]}


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _legend(ax) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(frameon=False)


def _cdf(ax, values: np.ndarray, i: int, label: str) -> None:
    v = np.sort(values[np.isfinite(values)])
    if v.size:
        y = np.arange(1, v.size + 1) / v.size
        ax.plot(v, y, label=label, markevery=max(1, v.size // 6), **style(i))


def _cdf_figure(results: Sequence[SimResult], path: Path, values, xlabel: str, name: str,
                title: str, at_one: bool = False) -> None:
    """A CDF per policy of `values(JobMetrics)` over the finished jobs, log x axis."""
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(WIDTH, 2.6))
        for i, r in enumerate(results):
            _cdf(ax, values(job_metrics(r)), i, r.policy)
        if at_one:
            ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())   # no crowded labels
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of finished jobs")
        ax.set_title(name + (f"\n{title}" if title else ""))
        ax.grid(True, alpha=0.3)
        _legend(ax)
        _save(fig, path)


def plot_jct_cdf(results: Sequence[SimResult], path: Path, title: str = "") -> None:
    _cdf_figure(results, path, lambda m: m.jct[m.finished] / 3600.0,
                "job completion time (h, log scale)", "JCT CDF", title)


def plot_ftf_cdf(results: Sequence[SimResult], path: Path, title: str = "") -> None:
    def rho(m):
        r = m.rho[m.finished]
        return r[r > 0]
    _cdf_figure(results, path, rho, "finish-time fairness ρ (log; > 1: worse than 1/N)",
                "Finish-time fairness CDF", title, at_one=True)


def plot_jct_by_type(results: Sequence[SimResult], path: Path, title: str = "",
                     most: int = 10) -> None:
    """Average JCT per job type (the `most` commonest types), a bar per policy."""
    if not results:
        return
    kinds = [s.job_type or "?" for s in results[0].table.specs]
    names, counts = np.unique(np.array(kinds, dtype=object), return_counts=True)
    order = [str(n) for n in names[np.lexsort((names.astype(str), -counts))][:most]]
    with plt.rc_context(RC):
        rows = len(order) * max(1, len(results)) ** 0.5
        fig, ax = plt.subplots(figsize=(WIDTH * 1.6, 1.0 + 0.2 * rows))
        h = 0.8 / max(1, len(results))
        y = np.arange(len(order))
        for i, r in enumerate(results):
            m = job_metrics(r)
            types = np.array([s.job_type or "?" for s in r.table.specs], dtype=object)
            avg = [float(np.mean(m.jct[m.finished & (types == k)]) / 3600.0)
                   if np.any(m.finished & (types == k)) else 0.0 for k in order]
            st = style(i)
            ax.barh(y + (i - (len(results) - 1) / 2) * h, avg, height=h, label=r.policy,
                    color=st["color"], hatch=HATCHES[i % len(HATCHES)], edgecolor="black",
                    linewidth=0.4)
        ax.set_yticks(y, [f"{k} ({int(counts[list(names).index(k)])})" for k in order])
        ax.invert_yaxis()
        ax.set_xlabel("average JCT (h)")
        ax.set_title("Average JCT per job type (jobs)" + (f"\n{title}" if title else ""))
        ax.grid(True, axis="x", alpha=0.3)
        _legend(ax)
        _save(fig, path)


def _arrival_window(results: Sequence[SimResult]) -> tuple[float, float]:
    sub = results[0].table.submit
    return (float(np.min(sub)), float(np.max(sub))) if len(sub) else (0.0, 0.0)


def _step_on_grid(times: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    idx = np.clip(np.searchsorted(times, grid, side="right") - 1, 0, len(times) - 1)
    return values[idx]


def plot_utilisation(results: Sequence[SimResult], path: Path, title: str = "",
                     points: int = 1500) -> None:
    """Busy fraction of each GPU type (a panel each) from the first to the last arrival (plus a
    tenth of that window), a marker where arrivals end."""
    res = [r for r in results if len(r.times)]
    if not res:
        return
    cluster = res[0].cluster
    a, b = _arrival_window(res)
    end = b + max(0.1 * (b - a), 1.0)
    grid = np.linspace(a, end, points)
    K = len(cluster.types)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(K, 1, figsize=(WIDTH, 0.6 + 1.4 * K), sharex=True, squeeze=False)
        for k, t in enumerate(cluster.types):
            ax = axes[k, 0]
            cap = max(1, int(cluster.capacity[k]))
            for i, r in enumerate(res):
                util = _step_on_grid(r.times, r.busy[:, k] / cap, grid)
                ax.plot(grid / 3600.0, util, label=r.policy, markevery=points // 6, **style(i))
            ax.axvline(b / 3600.0, color="grey", lw=0.8, ls="--")
            ax.text(b / 3600.0, 1.02, " arrivals end", fontsize=6, color="grey", va="bottom",
                    ha="right")
            ax.set_ylim(0, 1.12)
            ax.set_ylabel(f"{t} busy ({cap} GPUs)")
            ax.grid(True, alpha=0.3)
        axes[-1, 0].set_xlabel("time (h)")
        axes[0, 0].set_title("GPU utilisation per type, arrival window"
                             + (f"\n{title}" if title else ""))
        _legend(axes[0, 0])
        _save(fig, path)


def plot_queue(results: Sequence[SimResult], path: Path, title: str = "",
               points: int = 1500) -> None:
    """Jobs waiting (submitted, holding no GPU) over the whole run; a marker where arrivals end."""
    res = [r for r in results if len(r.times)]
    if not res:
        return
    _a, b = _arrival_window(res)
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(WIDTH, 2.6))
        for i, r in enumerate(res):
            grid = np.linspace(r.times[0], r.times[-1], points)
            ax.plot(grid / 3600.0, _step_on_grid(r.times, r.pending, grid), label=r.policy,
                    markevery=points // 6, **style(i))
        ax.axvline(b / 3600.0, color="grey", lw=0.8, ls="--", label="arrivals end")
        ax.set_xlabel("time (h)")
        ax.set_ylabel("jobs waiting")
        ax.set_title("Queue length" + (f"\n{title}" if title else ""))
        ax.grid(True, alpha=0.3)
        _legend(ax)
        _save(fig, path)


RUN_FIGURES = {"jct_cdf": plot_jct_cdf, "ftf_cdf": plot_ftf_cdf, "jct_by_type": plot_jct_by_type,
               "utilisation": plot_utilisation, "queue": plot_queue}


def run_figures(results: Sequence[SimResult], out: Path, fmt: str = "png",
                title: str = "") -> list[Path]:
    """Every run figure into `out` as `<name>.<fmt>`; the paths written."""
    paths = []
    for name, fn in RUN_FIGURES.items():
        p = out / f"{name}.{fmt}"
        fn(results, p, title=title)
        if p.exists():
            paths.append(p)
    return paths


# ---------------------------------------------------------------------------------------------
# sweeps

def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_")


def sweep_figures(aggregate: Sequence[dict], out: Path, fmt: str = "png") -> list[Path]:
    """Average and p99 JCT vs load (synthetic rate, else load scale) with 95% confidence bands,
    a line per policy; a figure per cluster (and per trace when the load is a load scale).
    Groups with fewer than two loads have no figure."""
    groups: dict[tuple, list[dict]] = {}
    for r in aggregate:
        by_rate = r.get("rate") is not None
        key = (r["cluster"], "synthetic" if by_rate else r["trace"], by_rate)
        groups.setdefault(key, []).append(r)
    drawn = [(k, rows) for k, rows in groups.items()
             if len({(x["rate"] if k[2] else x["load_scale"]) for x in rows}) >= 2]
    paths = []
    for (cluster, trace, by_rate), rows in drawn:
        name = "jct_vs_load" if len(drawn) == 1 else f"jct_vs_load_{_slug(cluster)}_{_slug(trace)}"
        what = ("synthetic Gavel-style arrivals" if by_rate else trace) + f" on {cluster}"
        policies = list(dict.fromkeys(r["policy"] for r in rows))
        with plt.rc_context(RC):
            fig, axes = plt.subplots(1, 2, figsize=(2 * WIDTH, 2.6))
            for ax, metric, label in ((axes[0], "avg_jct_s", "average JCT (h)"),
                                      (axes[1], "p99_jct_s", "p99 JCT (h)")):
                for i, pol in enumerate(policies):
                    mine = sorted((r for r in rows if r["policy"] == pol),
                                  key=lambda r: r["rate"] if by_rate else r["load_scale"])
                    x = np.array([r["rate"] if by_rate else r["load_scale"] for r in mine],
                                 dtype=float)
                    y = np.array([r[f"{metric}_mean"] for r in mine], dtype=float) / 3600.0
                    ci = np.nan_to_num(np.array([r[f"{metric}_ci95"] for r in mine],
                                                dtype=float) / 3600.0)
                    st = style(i)
                    ax.plot(x, y, label=pol, **st)
                    ax.fill_between(x, y - ci, y + ci, color=st["color"], alpha=0.18, lw=0)
                ax.set_xlabel("arrival rate (jobs/h)" if by_rate else "load scale (x)")
                ax.set_ylabel(label)
                ax.grid(True, alpha=0.3)
            seeds = sorted({int(r["seeds"]) for r in rows})
            fig.suptitle(f"JCT vs load, mean and 95% CI over {'/'.join(map(str, seeds))} "
                         f"seeds\n{what}", fontsize=8)
            _legend(axes[0])
            p = out / f"{name}.{fmt}"
            _save(fig, p)
            paths.append(p)
    return paths
