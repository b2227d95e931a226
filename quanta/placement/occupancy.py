"""Which job holds which GPU, and consolidating placement of gangs.

`place(type, n)` returns n free GPUs of one type, all or nothing (gang). It consolidates: a single
node if one has room (best fit: the fullest node that still fits); otherwise whole free nodes
first, largest first, and the remainder on the tightest-fitting other node, so the job spans as
few nodes as the free GPUs allow.
"""

from __future__ import annotations

import numpy as np

from quanta.model.cluster import Cluster

FREE = -1


class Occupancy:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.owner = np.full(cluster.num_gpus, FREE, dtype=np.int64)
        self.node_free = cluster.node_gpus.copy()
        self.node_up = np.ones(len(cluster.nodes), dtype=bool)
        self.type_nodes = [np.flatnonzero(cluster.node_type == t) for t in range(len(cluster.types))]
        self.busy = np.zeros(len(cluster.types), dtype=np.int64)   # GPUs held per type
        self.held: dict[int, np.ndarray] = {}                      # job row -> GPU ids

    # -- capacity --------------------------------------------------------------------------------
    def up_capacity(self) -> np.ndarray:
        """GPUs per type on nodes that are up."""
        c = self.cluster
        return np.bincount(c.node_type, weights=c.node_gpus * self.node_up,
                           minlength=len(c.types)).astype(np.int64)

    def free_by_type(self) -> np.ndarray:
        c = self.cluster
        return np.bincount(c.node_type, weights=self.node_free, minlength=len(c.types)).astype(np.int64)

    # -- placing ---------------------------------------------------------------------------------
    def place(self, type_idx: int, n: int) -> np.ndarray | None:
        nodes = self.type_nodes[type_idx]
        free = self.node_free[nodes]
        if n <= 0 or free.sum() < n:
            return None
        fits = free >= n
        if fits.any():
            cand = np.flatnonzero(fits)
            chosen = [(nodes[cand[np.argmin(free[cand])]], n)]
        else:
            chosen = []
            order = np.argsort(-free, kind="stable")
            need = n
            for pos, i in enumerate(order):
                if free[i] == 0 or need == 0:
                    break
                rest = order[pos:]
                tight = rest[(free[rest] >= need)]
                if tight.size:   # the remainder fits on one node: take the tightest one
                    j = tight[np.argmin(free[tight])]
                    chosen.append((nodes[j], need))
                    need = 0
                    break
                take = int(free[i])
                chosen.append((nodes[i], take))
                need -= take
        gpus = []
        for node, k in chosen:
            first = self.cluster.node_first_gpu[node]
            size = self.cluster.node_gpus[node]
            gpus.append(first + np.flatnonzero(self.owner[first:first + size] == FREE)[:k])
        return np.concatenate(gpus)

    def assign(self, row: int, gpus: np.ndarray) -> None:
        if np.any(self.owner[gpus] != FREE):
            raise RuntimeError(f"GPUs {gpus[self.owner[gpus] != FREE]} are not free")
        self.owner[gpus] = row
        nodes = self.cluster.gpu_node[gpus]
        np.subtract.at(self.node_free, nodes, 1)
        self.busy += np.bincount(self.cluster.gpu_type_idx[gpus], minlength=len(self.busy))
        self.held[row] = gpus

    def release(self, row: int) -> np.ndarray:
        gpus = self.held.pop(row)
        self.owner[gpus] = FREE
        nodes = self.cluster.gpu_node[gpus]
        np.add.at(self.node_free, nodes[self.node_up[nodes]], 1)
        self.busy -= np.bincount(self.cluster.gpu_type_idx[gpus], minlength=len(self.busy))
        return gpus

    def nodes_of(self, gpus: np.ndarray) -> int:
        return int(np.unique(self.cluster.gpu_node[gpus]).size)

    def consolidated(self, type_idx: int, gpus: np.ndarray) -> bool:
        per_node = self.cluster.gpus_per_node(type_idx)
        return self.nodes_of(gpus) <= -(-len(gpus) // per_node)

    # -- failures --------------------------------------------------------------------------------
    def node_down(self, node: int) -> list[int]:
        """Mark a node down; return the job rows holding GPUs on it (the caller releases them)."""
        c = self.cluster
        first, size = c.node_first_gpu[node], c.node_gpus[node]
        victims = sorted({int(o) for o in self.owner[first:first + size] if o >= 0})
        self.node_up[node] = False
        self.node_free[node] = 0
        return victims

    def node_up_again(self, node: int) -> None:
        c = self.cluster
        first, size = c.node_first_gpu[node], c.node_gpus[node]
        self.node_up[node] = True
        self.node_free[node] = int(np.sum(self.owner[first:first + size] == FREE))
