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


def on_round(now: float, origin: float, interval: float) -> bool:
    """Whether `now` is a round start of rounds at origin + k * interval (as next_round gives
    them: the same float)."""
    return origin + round((now - origin) / interval) * interval == now


class DecisionLoop:
    def __init__(self, policy: Policy, table: JobTable, occ: Occupancy):
        interval = getattr(policy, "interval", None)    # (a wrapper may not say)
        if interval is not None and not isinstance(interval, (int, float, np.number)) or \
                isinstance(interval, (bool, np.bool_)):
            raise QuantaError(f"policy '{policy.label()}': interval must be a number of seconds, "
                              f"got {interval!r}", field="--policy")
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
        else:
            bad = _fields_problem(dec, snap)
        if bad is not None:
            raise QuantaError(f"policy '{label}' {bad}", field="--policy")
        return dec


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _int_array(a, shape: tuple | None = None, lo: int = 0, hi: float = np.inf) -> bool:
    """Integers (an array, list or tuple; of `shape`, else one row) each in [lo, hi)."""
    if not isinstance(a, (np.ndarray, list, tuple)):
        return False
    a = np.asarray(a)
    return (a.dtype.kind in "iu" or a.size == 0) and \
        (a.shape == shape if shape is not None else a.ndim == 1) and \
        (not a.size or (int(a.min()) >= lo and int(a.max()) < hi))


def _fields_problem(dec: Decision, snap: Snapshot) -> str | None:
    """What is wrong with a plugin decision's other fields (rows, GPU ids, nodes out of range,
    values of the wrong kind, NaN), which the mechanism indexes with as Quanta's policies give
    them; None if nothing."""
    n, K = len(snap.jobs), len(snap.capacity)
    c = snap.cluster

    def rows(keys) -> bool:
        return all(_is_int(r) and 0 <= r < n for r in keys)

    if dec.order is not None and not (_int_array(dec.order, hi=n) and
                                      len(np.unique(np.asarray(dec.order))) == len(dec.order)):
        return f"gave an order that is not distinct snapshot rows (integers 0 to {n - 1})"
    for name in ("exact", "plans", "mixed", "fork", "copies", "share", "span", "reasons",
                 "positions", "consolidate", "defrag"):
        got = getattr(dec, name)
        if not isinstance(got, (dict, set, frozenset)) or not rows(got):
            return f"gave {name} whose keys are not snapshot rows (integers 0 to {n - 1})"
    for r, ids in dec.exact.items():
        if not _int_array(ids, hi=c.num_gpus) or len(np.unique(np.asarray(ids))) != len(ids):
            return f"gave exact GPUs for row {r} that are not distinct GPU ids (0 to " \
                   f"{c.num_gpus - 1})"
    for r, per_type in dec.mixed.items():
        if not _int_array(per_type, shape=(K,)):
            return f"gave mixed GPUs for row {r} that are not {K} counts >= 0, one per type"
    for r, per_node in dec.copies.items():
        if not _int_array(per_node, shape=(len(c.nodes),)):
            return f"gave copies for row {r} that are not {len(c.nodes)} counts >= 0, one per node"
    for r, every in dec.fork.items():
        if not (isinstance(every, (int, float, np.number)) and 0 < every < np.inf):
            return f"gave a fork interval for row {r} that is not a number of seconds > 0"
    for r, how in dec.share.items():
        if not (isinstance(how, tuple) and len(how) == 2 and rows(how[:1])):
            return f"gave a share for row {r} that is not (host row, mode)"
    for r, hosts in dec.span.items():
        if not (isinstance(hosts, dict) and rows(hosts) and
                all(_is_int(g) and g >= 0 for g in hosts.values())):
            return f"gave a span for row {r} that is not {{host row: GPUs}}"
    for name in ("cpus", "mem_gb", "net_gbps"):
        got = getattr(dec, name)
        if got is not None and not (isinstance(got, np.ndarray) and got.shape == (n,) and
                                    got.dtype.kind in "iuf" and np.isfinite(got).all()):
            return f"gave {name} that is not {n} finite numbers, one per job"
    w = dec.wake_at
    if w is not None and not (isinstance(w, (int, float, np.number)) and
                              not isinstance(w, (bool, np.bool_)) and np.isfinite(w)):
        return f"asked to wake at {w!r}, not a time in seconds"
    return None
