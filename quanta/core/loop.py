"""The decision loop both drivers run: snapshot -> policy.decide -> mechanism -> transitions."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from quanta.core.decision import Decision
from quanta.core.jobtable import JobTable
from quanta.core.mechanism import Transition, apply
from quanta.core.snapshot import Snapshot
from quanta.errors import QuantaError
from quanta.placement.occupancy import Occupancy
from quanta.policies.base import MAX_S, MIN_INTERVAL_S, Policy, PolicyError


def next_round(now: float, origin: float, interval: float) -> float:
    """The first round start after `now` of rounds at origin + k * interval: both drivers' round
    clock (the simulator's ticks, the runtime's next tick). (Where `now` is a
    round start itself, (now - origin) / interval may round to just under its whole number k:
    origin + k * interval would be `now` again, and the clock would stand still.)"""
    k = np.floor((now - origin) / interval) + 1
    at = origin + k * interval
    if at <= now:
        at = origin + (k + 1) * interval
    if not at > now:       # an interval under the clock's resolution at `now`: it cannot move
        raise QuantaError(f"a round interval of {interval:g} s is below the clock's resolution at "
                          f"{now:g} s: rounds could never move on", field="--policy")
    return at


class DecisionLoop:
    def __init__(self, policy: Policy, table: JobTable, occ: Occupancy):
        interval = getattr(policy, "interval", None)    # (a wrapper may not say)
        if interval is not None and not (interval == 0 or MIN_INTERVAL_S <= interval <= MAX_S):
            raise QuantaError(f"policy '{policy.label()}': interval must be {MIN_INTERVAL_S:g} to "
                              f"{MAX_S:g} seconds (0: decide at every event), got {interval:g}",
                              field="--policy")      # (NaN fails too)
        self.policy = policy
        self.table = table
        self.occ = occ
        self.state: dict[str, Any] = {}
        self.wake_at: float | None = None
        self.decisions = 0
        self.decide_seconds = 0.0
        # a policy from outside Quanta (a plugin): what it raises, and a decision the cluster
        # cannot hold, are one line naming it (the user's code, not Quanta's bug); wrappers (the
        # queue layer, the runtime's recorder) name what they wrap `inner`
        inner = policy
        for _ in range(8):                 # (a few levels; a policy of its own may say `inner`)
            nxt = getattr(inner, "inner", None)
            if nxt is None or nxt is inner:
                break
            inner = nxt
        self.user_policy = not type(inner).__module__.startswith("quanta.")

    def step(self, now: float, active: np.ndarray, events: tuple[str, ...] = ()) -> list[Transition]:
        t = self.table
        snap = Snapshot(now=now, cluster=t.cluster, perf=t.perf, jobs=t.view(active, now),
                        capacity=self.occ.up_capacity(), node_free=self.occ.node_free.copy(),
                        node_up=self.occ.node_up.copy(), state=self.state, events=events,
                        resources=self.occ.up_resources(), network=self.occ.up_network())
        start = time.perf_counter()
        dec = self._user_decide(snap) if self.user_policy else self.policy.decide(snap)
        self.decide_seconds += time.perf_counter() - start
        self.decisions += 1
        if dec.state is not None:
            self.state = dec.state
        self.wake_at = dec.wake_at
        if not self.user_policy:
            return apply(snap, dec, self.occ)
        try:
            return apply(snap, dec, self.occ)
        except PolicyError as err:
            raise QuantaError(f"policy '{self.policy.label()}' made a decision the cluster "
                              f"cannot hold: {err}", field="--policy") from None

    def _user_decide(self, snap: Snapshot) -> Decision:
        """A plugin policy's decision, checked where the mechanism trusts Quanta's own policies
        (its type, its arrays' shapes and kinds, no negative count, no type the cluster lacks):
        what it raises, and what fails a check, one line naming it."""
        label = self.policy.label()
        try:
            dec = self.policy.decide(snap)
        except Exception as err:   # noqa: BLE001 - the user's code
            import traceback
            frame = traceback.extract_tb(err.__traceback__)[-1]
            raise QuantaError(f"policy '{label}' raised {type(err).__name__}: {err} (at "
                              f"{frame.filename}:{frame.lineno})", field="--policy") from err
        n = len(snap.jobs)
        bad = None
        if not isinstance(dec, Decision):
            bad = f"returned {type(dec).__name__}, not a Decision"
        elif not (isinstance(dec.gpus, np.ndarray) and isinstance(dec.gpu_type, np.ndarray)
                  and dec.gpus.shape == (n,) and dec.gpu_type.shape == (n,)):
            bad = f"gave GPU counts and types of shapes {np.shape(dec.gpus)} and " \
                  f"{np.shape(dec.gpu_type)} for {n} jobs"
        elif dec.gpus.dtype.kind not in "iu" or dec.gpu_type.dtype.kind not in "iu":
            bad = "gave GPU counts or types that are not integers"
        elif n and (dec.gpus.min() < 0 or ((dec.gpus > 0) & ((dec.gpu_type < 0) | (
                dec.gpu_type >= len(snap.capacity)))).any()):
            bad = "gave a negative GPU count, or GPUs of a type the cluster does not have"
        if bad is not None:
            raise QuantaError(f"policy '{label}' {bad}", field="--policy")
        return dec
