"""Baseline queue policies: FIFO, SJF, SRTF (oracle lengths) and LAS (attained service).

Each is a priority order handed to the shared gang-allocating walk (`greedy_fill`).
FIFO and SJF are non-preemptive: running jobs keep their GPUs. SRTF and LAS are preemptive: the
order decides every event, and a running job that falls out of the order is preempted.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.policies.base import Policy
from quanta.policies.greedy import greedy_fill, priority_order
from quanta.policies.registry import register


@dataclass
class QueuePolicy(Policy):
    backfill: bool = True

    preemptive = False

    @abstractmethod
    def keys(self, snap: Snapshot) -> tuple[np.ndarray, ...]:
        """Sort keys for np.lexsort (last = most significant)."""

    def decide(self, snap: Snapshot) -> Decision:
        jobs = snap.jobs
        running = None if self.preemptive else jobs.running
        order = priority_order(self.keys(snap), running)
        return greedy_fill(snap, order, self.backfill, migrate=self.preemptive)


@register("fifo", "first in, first out; non-preemptive, optional backfill")
@dataclass
class Fifo(QueuePolicy):
    def keys(self, snap):
        return (snap.jobs.rows, snap.jobs.submit)


@register("sjf", "shortest job first by total run time (oracle); non-preemptive")
@dataclass
class Sjf(QueuePolicy):
    def keys(self, snap):
        j = snap.jobs
        return (j.rows, j.submit, j.total / np.maximum(j.best_rate, 1e-12))


@register("srtf", "shortest remaining time first (oracle lengths); preemptive")
@dataclass
class Srtf(QueuePolicy):
    preemptive = True

    def keys(self, snap):
        j = snap.jobs
        return (j.rows, j.submit, j.remaining_time())


@register("las", "least attained service (GPU-seconds) first; preemptive at every event")
@dataclass
class Las(QueuePolicy):
    preemptive = True

    def keys(self, snap):
        j = snap.jobs
        return (j.rows, j.submit, j.attained)
