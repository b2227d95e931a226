"""Queues, quotas, fair share and priorities as a layer over any policy.

`QueueLayer(inner, tree)` is itself a policy: a pure function of the snapshot whose own state
(decayed usage, when each job last started, the inner policy's state) travels in Decision.state.
Each decision:

1. accounts the GPU-seconds every queue and user received since the last decision (weighted by
   GPU speed) into their decayed usage, and derives fair-share factors (quanta.queues.fairshare);
2. admits jobs against the quota tree, in order: first every queue within its own nominal quota
   (reclaiming it from borrowers when they hold it: borrowed jobs of the nearest queues first,
   lowest priority and latest started first, never a job under its minimum run time, after the
   grace), then borrowing of idle quota, queue by queue in fair-share order (lowest decayed usage
   per share first), with preemption of lower-priority jobs of the same queue or of lower-priority
   jobs on borrowed GPUs of the cohort when a job fits no other way. Within a queue jobs go by
   priority class, then a Slurm-like multifactor score (the user's fair-share factor and the
   job's age), then arrival; a job waiting longer than the queue's `starvation_s` goes first;
3. hands the inner policy, per queue (scope "queue"), the queue's running jobs, the jobs just
   admitted and other waiting jobs of the queue's first class among them (starving first; of
   starving ones the first only: the room it waits for is kept for it), with the GPUs per
   type the admission gave the queue as its capacity: the inner policy orders and places the
   queue's jobs within them. With scope "cluster" the inner policy gets every admitted job at
   once, the cluster's capacity, and only places them;
4. merges the inner decisions back, keeps running every job under its minimum run time that the
   inner policy would preempt, starts the jobs that must run (higher classes, preemptors,
   starving jobs), trims any queue over its GPUs (newest starts first), adds the preemptions
   for reclaim and priority, and says why each waiting job waits (Decision.reasons) and where it
   is in its queue (Decision.positions).

The steps live in modules of their own: quanta.queues.accounting (1 and the state handed on),
quanta.queues.admission (2, on the usage book of quanta.queues.tree_state, giving a
quanta.queues.plan.Plan), quanta.queues.inner (3), quanta.queues.enforcement and
quanta.queues.reasons (4).
"""

from __future__ import annotations

import copy
import math

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import JobsView, Snapshot
from quanta.policies.base import Policy
from quanta.queues.accounting import account, next_state
from quanta.queues.admission import admit
from quanta.queues.enforcement import enforce
from quanta.queues.inner import run_inner
from quanta.queues.reasons import explain_waiting
from quanta.queues.spec import QueueTree

INF = math.inf


class QueueLayer(Policy):
    """Queues, quotas, fair share and priorities around `inner` (see the module docstring)."""

    def __init__(self, inner: Policy, tree: QueueTree, scope: str | None = None,
                 overflow: int = 512) -> None:
        self.inner = inner
        self.tree = tree
        self.scope = scope or tree.config.scope
        if self.scope not in ("queue", "cluster"):
            from quanta.errors import QuantaError
            raise QuantaError(f"queue layer scope '{self.scope}' is not queue or cluster")
        self.overflow = int(overflow)      # most extra waiting jobs per queue shown to the inner
        self.name = f"{inner.label()}+queues"
        self.interval = inner.interval
        self._specs_id = None
        self._leaf: list[int] = []         # per driver row: leaf position (-1 none)
        self._prio: list[int] = []
        self._user: list[str] = []
        self._ckpt: list[tuple[float, float]] = []   # (checkpoint_s, checkpoint_every steps)

    def __getattr__(self, name):           # mixes_types and whatever else a driver asks
        if name.startswith("_") or name in ("inner", "tree", "scope", "overflow"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def label(self) -> str:
        return self.name

    # -- per-row facts (cached per driver row: specs never change queue, user or priority) -------
    def _facts(self, jobs: JobsView) -> tuple[np.ndarray, np.ndarray, list[str]]:
        specs = jobs.all_specs
        if self._specs_id != id(specs) or len(self._leaf) > len(specs):
            self._specs_id = id(specs)
            self._leaf, self._prio, self._user, self._ckpt = [], [], [], []
        tree = self.tree
        for s in specs[len(self._leaf):]:
            q = tree.queue_of(s)
            self._leaf.append(tree.leaf_pos[q] if q >= 0 else -1)
            self._prio.append(int(s.priority))
            self._user.append(s.user)
            self._ckpt.append((float(getattr(s, "checkpoint_s", 0.0) or 0.0),
                               float(getattr(s, "checkpoint_every", 0) or 0)))
        rows = jobs.rows.tolist()
        leaf = np.fromiter((self._leaf[r] for r in rows), dtype=np.int64, count=len(rows))
        prio = np.fromiter((self._prio[r] for r in rows), dtype=np.int64, count=len(rows))
        return leaf, prio, [self._user[r] for r in rows]

    # -- the policy ---------------------------------------------------------------------------------
    def decide(self, snap: Snapshot) -> Decision:
        return self._decide(snap, snap.state or {})

    def explain(self, snap: Snapshot) -> Decision:
        """The decision `decide` would take, without touching the inner policy's state (some
        policies update the state they are handed): for `quanta queues` on a live snapshot."""
        return self._decide(snap, copy.deepcopy(snap.state or {}))

    def _decide(self, snap: Snapshot, st: dict) -> Decision:
        tree, jobs, now = self.tree, snap.jobs, snap.now
        comp = tree.compile(snap.cluster.types)
        leaf, prio, users = self._facts(jobs)
        usage, uusage, totals = account(tree, self.interval, self._leaf, self._user, snap, st,
                                        comp)
        plan = admit(tree, self._ckpt, self.overflow, snap, st, comp, leaf, prio, users, usage,
                     uusage)
        dec, inner_state, inner_wake = run_inner(self.inner, tree, self.scope, snap, st, plan)
        enforce(tree, snap, dec, plan, comp)
        explain_waiting(tree, snap, dec, plan, comp)
        wake = min(plan.wake, inner_wake if inner_wake is not None else INF)
        dec.wake_at = wake if now < wake < INF else None
        dec.state = next_state(tree, snap, st, dec, plan, comp, usage, uusage, totals,
                               inner_state)
        return dec
