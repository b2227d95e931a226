"""What the queue layer's admission decided: the plan the later steps of a decision follow."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass
class Plan:
    """What the admission decided (positions are snapshot rows)."""
    leaf: np.ndarray              # (n,) leaf position, -1: no queue
    cand: np.ndarray              # (n,) bool: handed to the inner policy
    admitted_k: np.ndarray        # (n,) type a waiting job was admitted on (-1 none)
    must: np.ndarray              # (n,) bool: must run (higher class, preemptor, starving)
    victim: np.ndarray            # (n,) 0 none, 1 reclaim, 2 priority
    protected: np.ndarray         # (n,) bool: running and kept so: under its minimum run time,
    #                               or of a higher class than the queue's waiting candidates
    budget: np.ndarray            # (L, K) GPUs per type each queue holds after admission
    reasons: dict[int, str]
    rank: np.ndarray              # (n,) position in the layer's order (lower first)
    room_final: np.ndarray        # (L, K) GPUs each queue could still take
    wake: float                   # when a waiting reclaim may proceed (inf: none)
    F: np.ndarray                 # (N,) fair-share factor per queue
    guest: np.ndarray             # (n,) bool: runs as a guest on another job's GPUs
    prio: np.ndarray              # (n,) priority (class value) of each job
    # (L,) GPUs each queue may hold in all: what the admission gave it (fair share decides who
    # borrows first) and the room nobody's waiting job could use
    total: np.ndarray
    room_after: np.ndarray | None = None   # (L, K) room left in the quotas after the decision
