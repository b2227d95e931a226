"""PNG plots (matplotlib, Agg backend): JCT CDF per policy and GPU utilisation over time."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from quanta.report.metrics import job_metrics  # noqa: E402
from quanta.sim.engine import SimResult  # noqa: E402


def plot_jct_cdf(results: Sequence[SimResult], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        m = job_metrics(r)
        jct = np.sort(m.jct[m.finished]) / 3600.0
        if jct.size:
            ax.plot(jct, np.arange(1, jct.size + 1) / jct.size, label=r.policy)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("JCT CDF")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_utilisation(results: Sequence[SimResult], path: Path, points: int = 2000) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        if not len(r.times):
            continue
        util = r.busy.sum(axis=1) / r.cluster.num_gpus
        grid = np.linspace(r.times[0], r.times[-1], points)
        idx = np.clip(np.searchsorted(r.times, grid, side="right") - 1, 0, len(r.times) - 1)
        ax.plot(grid / 3600.0, util[idx], label=r.policy, lw=1)
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("GPUs busy (fraction)")
    ax.set_ylim(0, 1.05)
    ax.set_title("GPU utilisation over time")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
