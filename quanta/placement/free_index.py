"""The free-GPU index of `Occupancy` (placement/occupancy.py): `place` without scanning, for
types whose nodes are all one size.

Per such type, levels[k] is a bitmask (a Python int) of the type's nodes, by position in
type_nodes, that have k free GPUs (a down node has 0); per node, a bitmask of its free GPUs.
Kept by every change of a GPU's free state (Occupancy._count, _count_one) and of a node's state.
It gives `place` the same answer as the scan, in a few integer operations (most jobs of a big
trace are placed this way: ~1.3 M placements in the Philly replay).
"""

from __future__ import annotations

import numpy as np

FREE = -1       # the owner (and guest) of a free GPU in Occupancy's arrays


def bits_of(mask: int, nbytes: int) -> np.ndarray:
    """The bits of a nonnegative int below 8 * nbytes, lowest first (0 or 1 each)."""
    return np.unpackbits(np.frombuffer(mask.to_bytes(nbytes, "little"), dtype=np.uint8),
                         bitorder="little")


class FreeGpuIndex:
    """Occupancy's part that keeps the index (a mixin: the state is Occupancy's)."""

    def _build_index(self) -> None:
        """The index of an empty cluster (Occupancy's constructor: every GPU free, every node up):
        each node's GPUs all free, each uniform type's nodes all at the level of their size."""
        c = self.cluster
        pos = np.zeros(len(c.nodes), dtype=np.int64)
        for nd in self.type_nodes:
            pos[nd] = np.arange(nd.size)
        self._node_pos = pos.tolist()
        self._node_pos_a = pos
        self._type_nodes_l = [nd.tolist() for nd in self.type_nodes]
        self._levels: list[list[int] | None] = [
            [0] * sz + [(1 << len(nd)) - 1] if sz else None
            for sz, nd in zip(self._type_size, self._type_nodes_l)]
        self._type_bytes = [(len(nd) + 7) // 8 for nd in self._type_nodes_l]
        self._all_one_gpu = all(sz == 1 for sz in self._type_size)   # every node holds one GPU
        self._first_l = c.node_first_gpu.tolist()
        self._gpu_node_l = c.gpu_node.tolist()
        self._node_type_l = c.node_type.tolist()
        self._gfree = [(1 << g) - 1 for g in c.node_gpus.tolist()]

    def _set_free(self, node: int, new: int) -> None:
        """Set a node's free GPU count, moving it between its type's levels."""
        lv = self._levels[self._node_type_l[node]]
        if lv is not None:
            b = 1 << self._node_pos[node]
            lv[self.node_free.item(node)] ^= b
            lv[new] |= b
        self.node_free[node] = new

    def _index(self, gpus: list[int], sign: int) -> None:
        """GPUs that became free (sign +1) or taken (-1): the free counts of their nodes (a down
        node's stays 0) and the index."""
        gn, first = self._gpu_node_l, self._first_l
        marks: dict[int, int] = {}
        for g in gpus:
            node = gn[g]
            marks[node] = marks.get(node, 0) | 1 << (g - first[node])
        self._mark(marks.items(), sign)

    def _mark(self, marks, sign: int) -> None:
        """`_index` for GPUs given as (node, bitmask of its GPUs) pairs (a node may come again)."""
        gf = self._gfree
        levels, node_type, pos, node_free, down = \
            self._levels, self._node_type_l, self._node_pos, self.node_free, self.down
        for node, m in marks:
            gf[node] = gf[node] | m if sign > 0 else gf[node] & ~m
            if down and not self.node_up.item(node):
                continue
            old = node_free.item(node)               # _set_free, inlined (every transition)
            new = old + sign * m.bit_count()
            lv = levels[node_type[node]]
            if lv is not None:
                b = 1 << pos[node]
                lv[old] ^= b
                lv[new] |= b
            node_free[node] = new

    def _take(self, node: int, k: int, ids: list[int], marks: list[tuple[int, int]]) -> None:
        """The node's first k free GPUs: appended to `ids`, and (node, their bitmask) to `marks`."""
        gf, first, taken = self._gfree[node], self._first_l[node], 0
        for _ in range(k):
            b = gf & -gf
            ids.append(first + b.bit_length() - 1)
            gf ^= b
            taken |= b
        marks.append((node, taken))

    def _place_indexed(self, type_idx: int, n: int, levels: list[int]
                       ) -> tuple[list[int], int, list[tuple[int, int]]] | None:
        """`place` from the index: the fullest node with room for n (lowest position among
        equals); else whole nodes, most free first (lowest position among equals), until the
        rest fits on one node, then the tightest such node among those not taken. Returns the
        GPU ids (a list), the number of nodes and, per node, the bitmask of its GPUs taken."""
        sz = len(levels) - 1
        nodes = self._type_nodes_l[type_idx]
        ids: list[int] = []
        marks: list[tuple[int, int]] = []
        for k in range(n, sz + 1):
            m = levels[k]
            if m:
                self._take(nodes[(m & -m).bit_length() - 1], n, ids, marks)
                return ids, 1, marks
        if sum(k * levels[k].bit_count() for k in range(1, sz + 1)) < n:
            return None
        need, whole = n, []
        for k in range(min(n, sz + 1) - 1, 0, -1):    # no node has n free: levels below n
            m = levels[k]
            while m:
                b = m & -m
                m ^= b
                if k >= need:                         # the rest fits here: the tightest node
                    p = b.bit_length() - 1
                    for k2 in range(need, k):
                        if levels[k2]:
                            p = (levels[k2] & -levels[k2]).bit_length() - 1
                            break
                    for node in whole:
                        self._take(node, self.node_free.item(node), ids, marks)
                    self._take(nodes[p], need, ids, marks)
                    return ids, len(whole) + 1, marks
                whole.append(nodes[b.bit_length() - 1])
                need -= k
        return None                                   # not reached: enough GPUs are free

    def _free_ones(self, nodes: np.ndarray, types: np.ndarray) -> None:
        """`_mark` of GPUs that became free on distinct nodes that hold one GPU each, every node
        up: at once."""
        self.node_free[nodes] = 1
        gfree = self._gfree
        for node in nodes.tolist():
            gfree[node] = 1
        pos = self._node_pos_a[nodes]
        for t in range(len(self._levels)):
            at = pos[types == t]
            if at.size:
                mask = sum(map((1).__lshift__, at.tolist()))     # (distinct positions)
                levels = self._levels[t]
                levels[0] ^= mask
                levels[1] |= mask
