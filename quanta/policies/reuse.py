"""A round that reads only the jobs and the cluster gives the same decision for the same inputs:
the last round's answer again, when a round's inputs are byte for byte the last round's. Used by
the round-based policies whose rounds read neither the clock, progress, attained service nor
waiting times (Rubick, Synergy): most of their rounds change nothing (a run of month-long jobs in
60 s rounds asked the same question 100,000 times)."""

from __future__ import annotations

import copy

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot

LAST_ROUND = ("last round",)      # a policy memo's key of the last round's (inputs, decision)


def round_inputs(snap: Snapshot) -> tuple:
    """What such a round reads (the policy's own decision and the mechanism's dry run): the run's
    performance model and cluster and the rows' specs (compared by identity), then the jobs'
    columns and the cluster's state as bytes (`req` is the specs', `running` is gpus > 0). Not the
    clock, progress, attained service, waiting times or restore ends."""
    j = snap.jobs
    cols = (j.rows, j.submit, j.allowed, j.rates, j.gpus, j.gtype, j.restarts, j.consolidated,
            j.partner, j.is_guest, j.share_mode, j.parts, j.cpus, j.mem_gb, j.net_gbps,
            snap.capacity, np.asarray(snap.node_up))
    return ((snap.perf, snap.cluster) + j.specs,        # (a job's spec changes with its phase)
            tuple(c.tobytes() for c in cols) + tuple(c.shape for c in cols),
            (tuple(j.plan.tolist()), tuple(p.tobytes() for p in j.placement), j.extras_seen,
             tuple(snap.resources), snap.network))


def same_inputs(a: tuple, b: tuple) -> bool:
    return len(a[0]) == len(b[0]) and all(x is y for x, y in zip(a[0], b[0])) and \
        a[1] == b[1] and a[2] == b[2]


def last_decision(memo: dict, inputs: tuple) -> Decision | None:
    """The last round's decision (a copy: a wrapper may edit what it gets) if `inputs` are its."""
    last = memo.get(LAST_ROUND)
    if last is not None and same_inputs(last[0], inputs):
        return copy.deepcopy(last[1])
    return None


def keep_decision(memo: dict, inputs: tuple, dec: Decision) -> None:
    memo[LAST_ROUND] = (inputs, copy.deepcopy(dec))
