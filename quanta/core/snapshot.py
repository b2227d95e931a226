"""What a policy sees: a frozen, columnar view of the active jobs and the cluster at one moment."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Sequence

import numpy as np

from quanta.model.cluster import Cluster
from quanta.model.job import JobSpec
from quanta.perf.base import PerfModel


@dataclass(frozen=True)
class JobsView:
    """Active (pending or running) jobs, one entry per array position ("snapshot row")."""

    rows: np.ndarray          # driver row of each job (stable id inside one run)
    all_specs: Sequence[JobSpec]  # every spec of the run, indexed by driver row
    submit: np.ndarray
    req: np.ndarray           # GPUs requested
    weight: np.ndarray
    allowed: np.ndarray       # (n, K) bool: GPU types the job may use
    rates: np.ndarray         # (n, K) steps/s at the requested count, consolidated (0 = not allowed)
    total: np.ndarray         # total steps
    progress: np.ndarray      # steps done
    attained: np.ndarray      # GPU-seconds held so far
    executed: np.ndarray      # wall seconds held so far
    waiting_since: np.ndarray  # when the job last lost (or never had) GPUs
    running: np.ndarray       # bool: holds GPUs now
    gpus: np.ndarray          # GPUs held now
    gtype: np.ndarray         # type index held now (-1 none)
    restarts: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)

    @cached_property
    def specs(self) -> tuple[JobSpec, ...]:
        """Spec of each snapshot row (built on first use: most policies need only the arrays)."""
        all_specs = self.all_specs
        return tuple(all_specs[r] for r in self.rows.tolist())

    @property
    def remaining(self) -> np.ndarray:
        return np.maximum(self.total - self.progress, 0.0)

    @property
    def best_rate(self) -> np.ndarray:
        return self.rates.max(axis=1)

    def remaining_time(self) -> np.ndarray:
        """Seconds left at the best allowed type (oracle; for SRTF/SJF-style policies)."""
        return self.remaining / np.maximum(self.best_rate, 1e-12)


@dataclass(frozen=True)
class Snapshot:
    now: float
    cluster: Cluster
    perf: PerfModel
    jobs: JobsView
    capacity: np.ndarray      # GPUs per type on nodes that are up
    node_free: np.ndarray     # free GPUs per node if every running job keeps its GPUs
    node_up: np.ndarray
    state: dict[str, Any] = field(default_factory=dict)   # the policy's own state, from last time
    events: tuple[str, ...] = ()                           # what triggered this decision
