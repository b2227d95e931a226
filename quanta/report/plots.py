"""Figures for papers (matplotlib, Agg backend; imported only when a run writes figures).

A run (`quanta simulate`): JCT CDF, finish-time-fairness CDF, average JCT per job type (fewer
types with many policies; a log axis where the averages span decades), utilisation per GPU type
over the arrival window (an arrivals-end marker; the drain tail left out), queue length until
the last queue empties; utilisation and queue are exact time averages over 150 bins. A sweep:
average and p99 JCT vs load with 95% confidence bands (stopping at 0).
Every policy keeps one colour (Okabe-Ito, colour-blind safe, its yellow swapped for wine), line
style and marker in every figure, so lines stay apart in greyscale; titles name the trace and the
cluster and wrap when long; the legend sits below the axes, never over the data; sized for a
paper column (3.4 in wide panels, 8 pt text); png, pdf or svg.
"""

from __future__ import annotations

import re
import textwrap
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
           "#882255"]     # Okabe-Ito, its yellow (invisible as a line on white) swapped for wine
LINES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 2)), (0, (6, 2)), (0, (3, 1, 1, 1))]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
HATCHES = ["", "///", "...", "xxx", "\\\\\\", "++", "oo", "OO"]
RC = {"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
      "xtick.labelsize": 7, "ytick.labelsize": 7, "lines.linewidth": 1.3, "lines.markersize": 4,
      "legend.handlelength": 2.6, "legend.columnspacing": 1.2, "legend.handletextpad": 0.5,
      "savefig.dpi": 200, "svg.fonttype": "none", "pdf.fonttype": 42,
      "svg.hashsalt": "quanta"}       # (the SVG's ids: a random salt made every file differ)
WIDTH = 3.4     # inches: one paper column
MARKS = 6       # markers per line
LEGEND_COLUMNS = 4      # at most, in a column-wide figure


def style(i: int) -> dict:
    """Colour, line style and marker of the i-th policy (the same in every figure)."""
    return {"color": COLOURS[i % len(COLOURS)], "linestyle": LINES[i % len(LINES)],
            "marker": MARKERS[i % len(MARKERS)]}


def _markevery(n: int, i: int, count: int) -> tuple[int, int]:
    """About MARKS markers along n points, the i-th of `count` lines offset so that lines that
    coincide do not stack their markers on one another."""
    step = max(1, n // MARKS)
    return ((i * step) // max(1, count)) % step, step


def _wrap(text: str, width_in: float, size: float = 8.0) -> str:
    """`text` with each line broken (at spaces, commas or slashes; a long name anywhere) to fit
    `width_in` inches at `size` points, so that long trace and cluster names wrap, never cut."""
    chars = max(16, int(width_in * 72.0 / (0.6 * size)))
    out = []
    for line in text.split("\n"):
        cur = ""
        for tok in re.findall(r"[^\s,/]*[\s,/]*", line):
            while len(tok) > chars:                  # a name longer than a line
                if cur.strip():
                    out.append(cur.rstrip())
                out.append(tok[:chars])
                cur, tok = "", tok[chars:]
            if len((cur + tok).rstrip()) > chars and cur.strip():
                out.append(cur.rstrip())
                cur = tok
            else:
                cur += tok
        out.append(cur.rstrip())
    return "\n".join(out)


def _figure(height: float, nrows: int = 1, ncols: int = 1, width: float = WIDTH, **kw):
    return plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kw)


def _title(fig, name: str, title: str) -> None:
    fig.suptitle(_wrap(name + (f"\n{title}" if title else ""), fig.get_figwidth()),
                 fontsize=RC["axes.titlesize"])


# no date in a figure's file, so that a seed gives the same bytes (PNG carries none)
_UNDATED = {".svg": {"Date": None}, ".pdf": {"CreationDate": None}}


def _save(fig, path: Path) -> None:
    fig.savefig(path, metadata=_UNDATED.get(path.suffix.lower()))
    plt.close(fig)


def _legend(fig, ax, extra: Sequence = ()) -> None:
    """One legend for the figure, below the axes (never over the data), in as many columns as
    fit the figure's width."""
    handles, labels = ax.get_legend_handles_labels()
    handles, labels = list(handles) + [h for h, _ in extra], list(labels) + [t for _, t in extra]
    if not handles:
        return
    renderer = fig.canvas.get_renderer()
    room = (fig.get_figwidth() - 0.1) * fig.dpi
    most = max(1, round(LEGEND_COLUMNS * fig.get_figwidth() / WIDTH))
    for ncol in range(min(len(labels), most), 0, -1):     # the most columns that fit
        leg = fig.legend(handles, labels, loc="outside lower center", ncol=ncol, frameon=False)
        if ncol == 1 or leg.get_window_extent(renderer).width <= room:
            return
        leg.remove()


def _arrivals_end(ax, b: float):
    return ax.axvline(b / 3600.0, color="grey", lw=0.9, ls=(0, (4, 2)), zorder=1)


def _cdf(ax, values: np.ndarray, i: int, label: str, count: int = 1) -> None:
    v = np.sort(values[np.isfinite(values)])
    if v.size:
        y = np.arange(1, v.size + 1) / v.size
        ax.plot(v, y, label=label, markevery=_markevery(v.size, i, count), **style(i))


def _cdf_figure(results: Sequence[SimResult], path: Path, values, xlabel: str, name: str,
                title: str, at_one: bool = False) -> None:
    """A CDF per policy of `values(JobMetrics)` over the finished jobs, log x axis."""
    with plt.rc_context(RC):
        fig, ax = _figure(2.8 + 0.12 * ((len(results) + 2) // 3))
        for i, r in enumerate(results):
            _cdf(ax, values(job_metrics(r)), i, r.policy, len(results))
        if at_one:
            ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())   # no crowded labels
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(numticks=8))
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of finished jobs")
        ax.set_ylim(0, 1.02)
        _title(fig, name, title)
        ax.grid(True, alpha=0.3)
        _legend(fig, ax)
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


def _type_label(kind: str, jobs: int) -> str:
    short = re.sub(r"\s*\(batch size (\d+)\)", r" bs\1", kind)
    return textwrap.fill(f"{short} ({jobs})", 16, max_lines=2, placeholder="…")


def plot_jct_by_type(results: Sequence[SimResult], path: Path, title: str = "",
                     most: int = 10) -> None:
    """Average JCT per job type (the commonest types: `most`, fewer with many policies so that
    bars stay readable), a bar per policy; a log axis where the averages span decades."""
    if not results:
        return
    P = len(results)
    kinds = [s.job_type or "?" for s in results[0].table.specs]
    names, counts = np.unique(np.array(kinds, dtype=object), return_counts=True)
    shown = max(1, min(most, max(4, 48 // P)))
    order = [str(n) for n in names[np.lexsort((names.astype(str), -counts))][:shown]]
    count = dict(zip(map(str, names), map(int, counts)))
    with plt.rc_context(RC):
        fig, ax = _figure(1.3 + 0.12 * ((P + 2) // 3) + len(order) * max(0.24, 0.065 * P))
        h = 0.84 / P
        y = np.arange(len(order))
        avgs = []
        for i, r in enumerate(results):
            m = job_metrics(r)
            types = np.array([s.job_type or "?" for s in r.table.specs], dtype=object)
            avgs.append([float(np.mean(m.jct[m.finished & (types == k)]) / 3600.0)
                         if np.any(m.finished & (types == k)) else np.nan for k in order])
        pos = np.array([v for a in avgs for v in a if np.isfinite(v) and v > 0])
        log = pos.size > 0 and pos.max() / pos.min() > 30
        for i, (r, avg) in enumerate(zip(results, avgs)):
            st = style(i)
            ax.barh(y + (i - (P - 1) / 2) * h, np.nan_to_num(avg), height=h, label=r.policy,
                    color=st["color"], hatch=HATCHES[i % len(HATCHES)], edgecolor="black",
                    linewidth=0.4)
        ax.set_yticks(y, [_type_label(k, count[k]) for k in order])
        ax.set_ylim(len(order) - 0.5, -0.5)
        if log:
            ax.set_xscale("log")
            ax.set_xlim(pos.min() / 1.5, pos.max() * 1.3)
        ax.set_xlabel("average JCT (h" + (", log scale)" if log else ")"))
        top = f", top {len(order)} of {len(names)}" if len(names) > len(order) else ""
        _title(fig, f"Average JCT per job type{top} (n jobs)", title)
        ax.grid(True, axis="x", alpha=0.3)
        _legend(fig, ax)
        _save(fig, path)


def _arrival_window(results: Sequence[SimResult]) -> tuple[float, float]:
    sub = results[0].table.submit
    return (float(np.min(sub)), float(np.max(sub))) if len(sub) else (0.0, 0.0)


def _binned_mean(times: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Time-weighted mean over each bin between `edges` of the step function that holds
    values[j] from times[j] until times[j + 1] (and the last value after): exact, not sampled,
    so that a short burst neither vanishes nor fills a bin."""
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    cum = np.concatenate([[0.0], np.cumsum(np.diff(t) * v[:-1])])
    j = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, len(t) - 1)
    integral = cum[j] + v[j] * (edges - t[j])
    return np.diff(integral) / np.diff(edges)


def plot_utilisation(results: Sequence[SimResult], path: Path, title: str = "",
                     points: int = 150) -> None:
    """Busy fraction of each GPU type (a panel each) from the first to the last arrival (plus a
    tenth of that window), time-averaged over `points` bins; a marker where arrivals end."""
    res = [r for r in results if len(r.times)]
    if not res:
        return
    cluster = res[0].cluster
    a, b = _arrival_window(res)
    end = b + max(0.1 * (b - a), 1.0)
    edges = np.linspace(a, end, points + 1)
    mid = (edges[:-1] + edges[1:]) / 2 / 3600.0
    K = len(cluster.types)
    with plt.rc_context(RC):
        fig, axes = _figure(1.0 + 0.12 * ((len(res) + 2) // 3) + (1.3 if K <= 3 else 1.0) * K,
                            K, 1, sharex=True, squeeze=False)
        for k, t in enumerate(cluster.types):
            ax = axes[k, 0]
            cap = max(1, int(cluster.capacity[k]))
            for i, r in enumerate(res):
                util = _binned_mean(r.times, r.busy[:, k] / cap, edges)
                ax.plot(mid, util, label=r.policy, markevery=_markevery(points, i, len(res)),
                        **style(i))
            marker = _arrivals_end(ax, b)
            ax.set_ylim(0, 1.05)
            ax.set_xlim(a / 3600.0, end / 3600.0)
            ax.set_ylabel(f"{t} busy frac.\n({cap} GPUs)")
            ax.grid(True, alpha=0.3)
        axes[-1, 0].set_xlabel("time (h)")
        _title(fig, "GPU utilisation per type, arrival window", title)
        _legend(fig, axes[0, 0], [(marker, "arrivals end")])
        _save(fig, path)


def plot_queue(results: Sequence[SimResult], path: Path, title: str = "",
               points: int = 150) -> None:
    """Jobs waiting (submitted, holding no GPU), time-averaged over `points` bins, until the last
    queue empties (at least to the arrivals' end plus a tenth), not through an empty drain tail;
    a marker where arrivals end; a symlog axis where one policy's queue dwarfs another's."""
    res = [r for r in results if len(r.times)]
    if not res:
        return
    a, b = _arrival_window(res)
    empty = b
    for r in res:
        busy = np.nonzero(r.pending > 0)[0]
        if busy.size:
            empty = max(empty, float(r.times[min(busy[-1] + 1, len(r.times) - 1)]))
    last = max(float(r.times[-1]) for r in res)
    end = min(max(empty + 0.05 * (empty - a), b + 0.1 * (b - a)), max(last, b + 1.0))
    end = max(end, a + 1.0)
    edges = np.linspace(a, end, points + 1)
    mid = (edges[:-1] + edges[1:]) / 2 / 3600.0
    with plt.rc_context(RC):
        fig, ax = _figure(2.8 + 0.12 * ((len(res) + 2) // 3))
        peaks = []
        for i, r in enumerate(res):
            q = _binned_mean(r.times, r.pending, edges)
            peaks.append(float(q.max()))
            ax.plot(mid, q, label=r.policy, markevery=_markevery(points, i, len(res)), **style(i))
        marker = _arrivals_end(ax, b)
        pos = [p for p in peaks if p > 0]
        if pos and max(pos) >= 100 and max(pos) / min(pos) > 20:
            ax.set_yscale("symlog", linthresh=1.0)
            ax.set_ylabel("jobs waiting (symlog)")
            ax.set_ylim(0, max(pos) * 1.5)
        else:
            ax.set_ylabel("jobs waiting")
            ax.set_ylim(bottom=0)
        ax.set_xlim(a / 3600.0, end / 3600.0)
        ax.set_xlabel("time (h)")
        _title(fig, "Queue length (time-averaged)", title)
        ax.grid(True, alpha=0.3)
        _legend(fig, ax, [(marker, "arrivals end")])
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
            fig, axes = _figure(2.9 + 0.12 * ((len(policies) + 5) // 6), 1, 2, width=2 * WIDTH)
            loads = sorted({float(r["rate"] if by_rate else r["load_scale"]) for r in rows})
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
                    # a JCT is never negative: the band stops at 0 (few seeds give wide bands)
                    ax.fill_between(x, np.maximum(y - ci, 0.0), y + ci, color=st["color"],
                                    alpha=0.15, lw=0)
                ax.set_ylim(bottom=0)
                if len(loads) <= 8:
                    ax.set_xticks(loads, [f"{v:g}" for v in loads])
                ax.set_xlabel("arrival rate (jobs/h)" if by_rate else "load scale (x)")
                ax.set_ylabel(label)
                ax.grid(True, alpha=0.3)
            seeds = sorted({int(r["seeds"]) for r in rows})
            _title(fig, f"JCT vs load, mean and 95% CI over {'/'.join(map(str, seeds))} seeds",
                   what)
            _legend(fig, axes[0])
            p = out / f"{name}.{fmt}"
            _save(fig, p)
            paths.append(p)
    return paths
