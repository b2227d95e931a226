"""The runtime's queues (`quanta serve --queues FILE`): what a submission may ask for, a job's
priority value, the per-queue report and the waiting jobs' positions. A part of `Runtime`
(quanta/runtime/controller.py), kept apart from its process and decision loop."""

from __future__ import annotations

import numpy as np

from quanta.core.jobtable import PENDING, RUNNING
from quanta.errors import QuantaError
from quanta.runtime.spec import JobSubmission

POSITIONS_MAX_AGE_S = 5.0        # positions older than this are recomputed when asked for


class RuntimeQueues:
    """Queue admission and reports of a Runtime (its attributes: tree, policy, loop, table,
    cluster, lock, clock, epoch, ids, positions, positions_at; `use_queues` sets the tree)."""

    def check_submission(self, sub: JobSubmission, user: str) -> None:
        """A submission the queues refuse (an unknown queue, a cohort, a queue that does not
        admit the user, an unknown priority class, a job its queue can never hold): a
        QuantaError naming the field."""
        named = isinstance(sub.priority, str) and sub.priority[:1].isalpha()
        if self.tree is None:
            if named:
                raise QuantaError(f"priority class '{sub.priority}': the service has no queues "
                                  "file (quanta serve --queues FILE); give a number",
                                  field="priority")
            return
        bad = self.tree.admission_error(sub.queue, user)
        if bad is not None:
            raise QuantaError(bad[1], field=bad[0])
        try:
            self.tree.priority_value(sub.priority)
        except KeyError:
            raise QuantaError(f"unknown priority class '{sub.priority}' (classes: "
                              f"{self.tree.class_names()})", field="priority") from None
        never = self.tree.never_fits(sub.to_spec("", 0.0, user), self.cluster.types)
        if never is not None:          # (it was accepted, then pending QuotaExceeded for ever)
            raise QuantaError(never, field="gpus")

    def _priority(self, sub: JobSubmission) -> int:
        """A job's priority value (a class name the queues no longer have: 0)."""
        try:
            return self.tree.priority_value(sub.priority) if self.tree is not None else \
                int(sub.priority)
        except (KeyError, ValueError):
            return 0

    def queue_report(self) -> dict | None:
        """Per queue: GPUs held, nominal and borrowed per type, running and waiting jobs (as they
        are now) and the fair-share factor of the queue layer's latest decision (before the first
        one: as it would be now); None without queues."""
        tree = self.tree
        if tree is None:
            return None
        with self.lock:
            report = (self.loop.state or {}).get("report")
            active = self._active()
            if report is None:
                from quanta.queues.sim import explain_now
                report = explain_now(self.policy, self, self.now(), active)[1].state["report"]
            t = self.table
            N, K = len(tree.names), len(self.cluster.types)
            use, count = np.zeros((N, K)), np.zeros((N, 3), dtype=np.int64)
            for row in active.tolist():
                q = tree.queue_of(t.specs[row])
                if q < 0:
                    continue
                if t.state[row] == RUNNING:
                    use[q, t.gtype[row]] += t.gpus[row]
                    count[q, 0] += 1
                else:
                    count[q, 1:] += (1, t.req[row])
            for q in tree.bottom_up:             # a cohort: the sums of its children
                if tree.parent[q] >= 0:
                    use[tree.parent[q]] += use[q]
                    count[tree.parent[q]] += count[q]
            queues = {}
            for q, name in enumerate(tree.names):
                r = dict(report["queues"][name])
                r.update(usage=use[q].tolist(), running=int(count[q, 0]),
                         pending=int(count[q, 1]), pending_gpus=int(count[q, 2]),
                         borrowed=np.maximum(use[q] - np.asarray(r["nominal"]), 0.0).tolist())
                queues[name] = r
            return {**report, "queues": queues}

    def _set_positions(self, rows: np.ndarray, positions: dict) -> None:
        """Waiting jobs' (position, estimated start as unix time) by job id, from a decision."""
        t = self.table
        self.positions = {self.ids[int(rows[i])]: (int(p), None if e is None else
                                                   self.epoch + float(e))
                          for i, (p, e) in positions.items()
                          if i < len(rows) and t.state[int(rows[i])] == PENDING}
        self.positions_at = self.clock()

    def current_positions(self, max_age_s: float = POSITIONS_MAX_AGE_S) -> dict:
        """Waiting jobs' positions and estimated starts: those of the latest decision, or, when
        that is older than `max_age_s` (rates measured since change the estimates; a round-based
        policy decides rarely), what the queue layer would say now."""
        with self.lock:
            if self.tree is not None and self.clock() - self.positions_at > max_age_s:
                active = self._active()
                if len(active):
                    from quanta.queues.sim import explain_now
                    snap, dec = explain_now(self.policy, self, self.now(), active)
                    self._set_positions(snap.jobs.rows, dec.positions)
            return dict(self.positions)
