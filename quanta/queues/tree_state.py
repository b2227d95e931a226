"""The quota tree's usage while the queue layer admits and trims jobs: what may still be added
where (per leaf and GPU type, through the leaf's cohorts, and on the cluster)."""

from __future__ import annotations

import math

import numpy as np

from quanta.queues.spec import Compiled, QueueTree

INF = math.inf


class TreeState:
    """Usage of the quota tree per type (a leaf's GPUs, a cohort's sum of its children's effective
    usage max(S, reserved)) and of the cluster: what may still be added where."""

    def __init__(self, tree: QueueTree, comp: Compiled, capacity: np.ndarray,
                 usage: np.ndarray | None = None, phys: np.ndarray | None = None):
        """`usage`: GPUs per (leaf, type) held now (default none); `phys`: GPUs per type taken
        on the cluster (default none)."""
        N, K = len(tree.names), len(comp.types)
        self.tree, self.comp = tree, comp
        S = np.zeros((N, K))
        if usage is not None:
            S[tree.leaves] = usage
        for q in tree.bottom_up:        # a parent holds its children's max(S, reserved)
            p = int(tree.parent[q])
            if p >= 0:
                S[p] += np.maximum(S[q], comp.reserved[q])
        self.S = S.tolist()
        self.cap = comp.cap.tolist()
        self.G = comp.reserved.tolist()
        self.phys = [0.0] * K if phys is None else np.asarray(phys, dtype=float).tolist()
        self.phys_cap = capacity.astype(float).tolist()
        self.paths = tree.paths

    def room(self, li: int, k: int) -> float:
        S, cap, G = self.S, self.cap, self.G
        R = INF
        for nd in reversed(self.paths[li]):
            s = S[nd][k]
            c = cap[nd][k] - s
            g = G[nd][k] - s
            g = g if g > 0 else 0.0
            R = c if c < g + R else g + R
        p = self.phys_cap[k] - self.phys[k]
        return R if R < p else p

    def add(self, li: int, k: int, a: float) -> None:
        self.phys[k] += a
        if li < 0:
            return
        d = a
        S, G = self.S, self.G
        for nd in self.paths[li]:
            s = S[nd][k]
            g = G[nd][k]
            e_old = s if s > g else g
            s += d
            S[nd][k] = s
            d = (s if s > g else g) - e_old
            if d == 0:
                break
