"""Queues, quotas, fair share and priorities for any policy (docs/queues.md).

    from quanta.queues import load_queues, with_queues
    policy = with_queues(make_policy("las"), "quanta/examples/queues/teams.yaml")

`QueueLayer(inner, tree)` wraps a policy: it admits jobs against a tree of queues (cohorts and
teams with nominal quotas per GPU type, borrowing and lending limits), reclaims lent GPUs,
orders queues and users by decayed fair share and jobs by priority class, protects a minimum
run time, and lets the inner policy order and place each queue's jobs within what it admitted.
"""

from __future__ import annotations

from pathlib import Path

from quanta.policies.base import Policy
from quanta.queues.layer import QueueLayer
from quanta.queues.metrics import QUEUE_COLUMNS, queue_metrics
from quanta.queues.spec import QueueTree, load_queues, parse_queues

__all__ = ["QueueLayer", "QueueTree", "load_queues", "parse_queues", "with_queues",
           "queue_metrics", "QUEUE_COLUMNS"]


def with_queues(policy: Policy, queues: str | Path | QueueTree, **kwargs) -> QueueLayer:
    """`policy` under the queues of a file (or an already loaded tree)."""
    tree = queues if isinstance(queues, QueueTree) else load_queues(queues)
    return QueueLayer(policy, tree, **kwargs)
