"""A policy that decides on another performance model than the one its jobs run on.

`DecideOn(policy, perf)` hands `policy` every snapshot with `perf` as the performance model and
`perf`'s rates at each job's request as `jobs.rates`, so that what the policy predicts (its curves,
SLA floors, speedups) all comes from `perf`, while the driver runs the jobs on its own model (e.g.
quanta.perf.plan_measured.MeasuredPlanPerf: the artifact's measured times where it has them).
Deciding and running on the same model hides the model's error; this shows it. Everything else
(interval, label, state) is the wrapped policy's.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.policies.base import Policy


class DecideOn(Policy):
    def __init__(self, inner: Policy, perf) -> None:
        self.inner = inner
        self.perf = perf
        self.name = inner.name
        self.interval = inner.interval
        self._rates: np.ndarray | None = None
        self._key: tuple | None = None

    def __getattr__(self, name):           # mixes_types and whatever else a driver asks
        if name in ("inner", "perf", "_rates", "_key"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def label(self) -> str:
        return self.inner.label()

    def request_rates(self, snap: Snapshot) -> np.ndarray:
        """(all jobs of the driver, K) steps/s at each request under `perf` (recomputed when the
        driver's job list grows)."""
        specs = snap.jobs.all_specs
        key = (len(specs), tuple(snap.cluster.types))
        if self._rates is None or self._key != key:
            from quanta.perf.base import consolidated_rates
            self._rates = np.asarray(consolidated_rates(self.perf, list(specs), snap.cluster),
                                     dtype=float)
            self._key = key
        return self._rates

    def decide(self, snap: Snapshot) -> Decision:
        jobs = copy.copy(snap.jobs)
        jobs.__dict__["rates"] = self.request_rates(snap)[snap.jobs.rows] * snap.jobs.allowed
        return self.inner.decide(dataclasses.replace(snap, perf=self.perf, jobs=jobs))
