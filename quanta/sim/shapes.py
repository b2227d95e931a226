"""A job's GPUs per node, for worlds whose performance model rates the real placement.

The engine gives a performance model a job's GPU count and node count; a model that also rates
GPUs per node (`rate_at_shape(job, gpu_type, shape, plan)`: sia-sim's measured profiles, where
4 T4s as 2 + 2 step 1.8x slower than on one node) is asked for the jobs whose GPUs are not laid
out whole nodes first, the layout count and nodes stand for. A world may also make a move to
other GPUs of the same type with the same GPUs per node free (`RestartCost.same_shape_free`:
Sia's simulator restarts a job only when its per-node counts change, job.py:524-542).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from quanta.core.jobtable import KIND_CODES
from quanta.model.cluster import Cluster

_MIGRATE = KIND_CODES["migrate"]


def per_node(cluster: Cluster, gpus: np.ndarray) -> tuple[int, ...]:
    """GPUs per node, in node order (the order in which Gavel's and Sia's assignments list
    them)."""
    return tuple(np.unique(cluster.gpu_node[np.asarray(gpus, dtype=np.int64)],
                           return_counts=True)[1].tolist())


def odd_shapes(cluster: Cluster, gtype: np.ndarray, gpus: Sequence[np.ndarray]
               ) -> dict[int, tuple[int, ...]]:
    """Transition index -> GPUs per node, for the transitions whose GPUs are not whole nodes
    first (every node full but one)."""
    out: dict[int, tuple[int, ...]] = {}
    node_max = cluster.type_node_max
    for i, g in enumerate(gpus):
        if len(g) < 2:
            continue
        shape = per_node(cluster, g)
        if len(shape) < 2:
            continue
        full = int(node_max[int(gtype[i])])
        if sum(1 for c in shape if c != full) > 1:
            out[i] = shape
    return out


def same_shape_moves(cluster: Cluster, kind: np.ndarray, new_type: np.ndarray,
                     old_type: np.ndarray, old_gpus: Sequence[np.ndarray],
                     new_gpus: Sequence[np.ndarray]) -> np.ndarray:
    """Which transitions move a job to other GPUs of its type with the same GPUs per node."""
    out = np.zeros(len(kind), dtype=bool)
    for i in np.flatnonzero((kind == _MIGRATE) & (new_type == old_type)).tolist():
        out[i] = per_node(cluster, old_gpus[i]) == per_node(cluster, new_gpus[i])
    return out
