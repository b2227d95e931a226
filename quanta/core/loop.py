"""The decision loop both drivers run: snapshot -> policy.decide -> mechanism -> transitions."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from quanta.core.jobtable import JobTable
from quanta.core.mechanism import Transition, apply
from quanta.core.snapshot import Snapshot
from quanta.errors import QuantaError
from quanta.placement.occupancy import Occupancy
from quanta.policies.base import Policy


def next_round(now: float, origin: float, interval: float) -> float:
    """The first round start after `now` of rounds at origin + k * interval: both drivers' round
    clock (the simulator's ticks, the runtime's next tick). (Where `now` is a
    round start itself, (now - origin) / interval may round to just under its whole number k:
    origin + k * interval would be `now` again, and the clock would stand still.)"""
    k = np.floor((now - origin) / interval) + 1
    at = origin + k * interval
    return at if at > now else origin + (k + 1) * interval


class DecisionLoop:
    def __init__(self, policy: Policy, table: JobTable, occ: Occupancy):
        interval = getattr(policy, "interval", None)    # (a wrapper may not say)
        if interval is not None and not 0 <= interval < np.inf:   # (NaN fails too)
            raise QuantaError(f"policy '{policy.label()}': interval must be a positive number of "
                              f"seconds (0: decide at every event), got {interval:g}",
                              field="--policy")
        self.policy = policy
        self.table = table
        self.occ = occ
        self.state: dict[str, Any] = {}
        self.wake_at: float | None = None
        self.decisions = 0
        self.decide_seconds = 0.0

    def step(self, now: float, active: np.ndarray, events: tuple[str, ...] = ()) -> list[Transition]:
        t = self.table
        snap = Snapshot(now=now, cluster=t.cluster, perf=t.perf, jobs=t.view(active, now),
                        capacity=self.occ.up_capacity(), node_free=self.occ.node_free.copy(),
                        node_up=self.occ.node_up.copy(), state=self.state, events=events,
                        resources=self.occ.up_resources(), network=self.occ.up_network())
        start = time.perf_counter()
        dec = self.policy.decide(snap)
        self.decide_seconds += time.perf_counter() - start
        self.decisions += 1
        if dec.state is not None:
            self.state = dec.state
        self.wake_at = dec.wake_at
        return apply(snap, dec, self.occ)
