"""Which job holds which GPU, and consolidating placement of gangs.

`place(type, n)` returns n free GPUs of one type, all or nothing (gang). It consolidates: a single
node if one has room (best fit: the fullest node that still fits); otherwise whole free nodes
first, largest first, and the remainder on the tightest-fitting other node, so the job spans as
few nodes as the free GPUs allow.

CPU threads, host memory and node network bandwidth: a job may hold some with its GPUs
(`assign(row, gpus, cpus, mem_gb, net_gbps)`), split over its nodes in proportion to its GPUs
there; `place(type, n, cpus_per_gpu, mem_per_gpu, net_per_gpu)` then only uses nodes with room
for that share. A node whose spec gives no CPUs / memory / network bandwidth (0) has no limit. Jobs that hold none take the GPU-only paths unchanged.

Sharing: a GPU holds at most two jobs, its owner and a guest that runs on exactly the owner's
GPUs (packed or time-sliced). A guest adds no busy GPU. When an owner leaves, its guest becomes
the owner of those GPUs. A spanning guest (`assign_span`) runs on some GPUs of one or more owners
and owns the rest of its GPUs (idle ones it took, or those of an owner that left); it is a guest
while it shares any GPU (`spans` lists it while it does).

Placing without a scan, for types whose nodes are all one size, reads the free-GPU index
(placement/free_index.py).
"""

from __future__ import annotations

import numpy as np

from quanta.model.cluster import Cluster
from quanta.placement.free_index import FREE, FreeGpuIndex, bits_of

_BIG = np.iinfo(np.int64).max


class Occupancy(FreeGpuIndex):
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.owner = np.full(cluster.num_gpus, FREE, dtype=np.int64)
        self.node_free = cluster.node_gpus.copy()
        self.node_up = np.ones(len(cluster.nodes), dtype=bool)
        self.down = 0                       # nodes down now
        self.type_nodes = [np.flatnonzero(cluster.node_type == t) for t in range(len(cluster.types))]
        # nodes of a type are usually contiguous: a slice reads their free counts without a copy
        self._type_slice = [slice(int(nd[0]), int(nd[-1]) + 1) if nd.size and nd[-1] - nd[0] + 1 == nd.size
                            else nd for nd in self.type_nodes]
        # GPUs per node of each type whose nodes all have the same number (else 0)
        self._type_size = [int(cluster.node_gpus[nd[0]]) if nd.size and
                           (cluster.node_gpus[nd] == cluster.node_gpus[nd[0]]).all() else 0
                           for nd in self.type_nodes]
        self.busy = np.zeros(len(cluster.types), dtype=np.int64)   # GPUs held per type
        self.shared = np.zeros(len(cluster.types), dtype=np.int64)  # GPUs holding a guest too
        self.guest = np.full(cluster.num_gpus, FREE, dtype=np.int64)
        self.guests: set[int] = set()
        self.spans: set[int] = set()       # guests placed by assign_span (GPU-by-GPU release)
        self.held: dict[int, np.ndarray] = {}                      # job row -> GPU ids
        # job row -> (node, bitmask of its GPUs) pairs of the GPUs `claim` gave it: their release
        # updates the free-GPU index from these (popped with `held`)
        self._marks: dict[int, list[tuple[int, int]]] = {}
        self._up_capacity: np.ndarray | None = None
        # CPU threads, host memory and network GB/s per node (inf where the node spec lacks them)
        cpus = np.array([n.cpus for n in cluster.nodes], dtype=float)
        mem = np.array([n.mem_gb for n in cluster.nodes], dtype=float)
        net = np.array([n.inter_bw_gbps for n in cluster.nodes], dtype=float)
        self.node_cpus = np.where(cpus > 0, cpus, np.inf)
        self.node_mem = np.where(mem > 0, mem, np.inf)
        self.node_net = np.where(net > 0, net, np.inf)
        self._build_index()
        self.cpu_free = self.node_cpus.copy()
        self.mem_free = self.node_mem.copy()
        self.net_free = self.node_net.copy()
        # row -> nodes, cpus, mem, network GB/s held there
        self.res: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._up_res: tuple[float, float] | None = None
        self._up_net: float | None = None

    # -- capacity --------------------------------------------------------------------------------
    def up_capacity(self) -> np.ndarray:
        """GPUs per type on nodes that are up (a copy; recomputed only after failures/repairs)."""
        if self._up_capacity is None:
            c = self.cluster
            self._up_capacity = np.bincount(c.node_type, weights=c.node_gpus * self.node_up,
                                            minlength=len(c.types)).astype(np.int64)
        return self._up_capacity.copy()

    def up_resources(self) -> tuple[float, float]:
        """CPU threads and host memory (GB) on nodes that are up (inf where not modelled)."""
        if self._up_res is None:
            self._up_res = (_up_sum(self.node_cpus, self.node_up),
                            _up_sum(self.node_mem, self.node_up))
        return self._up_res

    def up_network(self) -> float:
        """Node network bandwidth (GB/s) on nodes that are up (inf where not modelled)."""
        if self._up_net is None:
            self._up_net = _up_sum(self.node_net, self.node_up)
        return self._up_net

    def room(self, nodes: np.ndarray | slice, cpus_per_gpu: float, mem_per_gpu: float,
             net_per_gpu: float = 0.0) -> np.ndarray:
        """GPUs each node could still give a job needing this much CPU, memory and network
        bandwidth per GPU."""
        free = self.node_free[nodes]
        if cpus_per_gpu > 0:
            free = np.minimum(free, np.floor(self.cpu_free[nodes] / cpus_per_gpu + 1e-9))
        if mem_per_gpu > 0:
            free = np.minimum(free, np.floor(self.mem_free[nodes] / mem_per_gpu + 1e-9))
        if net_per_gpu > 0:
            free = np.minimum(free, np.floor(self.net_free[nodes] / net_per_gpu + 1e-9))
        return free.astype(np.int64) if free.dtype != np.int64 else free

    def fits(self, gpus: np.ndarray, cpus: float, mem_gb: float, net_gbps: float = 0.0) -> bool:
        """Whether these free GPUs' nodes have room for `cpus`, `mem_gb` and `net_gbps` (split
        by GPUs)."""
        if (self.owner[gpus] != FREE).any():
            return False
        nodes, k = np.unique(self.cluster.gpu_node[gpus], return_counts=True)
        share = k / len(gpus)
        return bool(np.all(self.cpu_free[nodes] + 1e-9 >= cpus * share) and
                    np.all(self.mem_free[nodes] + 1e-9 >= mem_gb * share) and
                    np.all(self.net_free[nodes] + 1e-9 >= net_gbps * share))

    # -- placing ---------------------------------------------------------------------------------
    def place(self, type_idx: int, n: int, cpus_per_gpu: float = 0.0,
              mem_per_gpu: float = 0.0, net_per_gpu: float = 0.0) -> tuple[np.ndarray, int] | None:
        """n free GPUs of one type and the number of nodes they span, or None if too few are free
        (on nodes with room for `cpus_per_gpu` CPU threads, `mem_per_gpu` GB and `net_per_gpu`
        GB/s of network bandwidth per GPU)."""
        levels = self._levels[type_idx]
        if levels is not None and not (cpus_per_gpu or mem_per_gpu or net_per_gpu):
            got = self._place_indexed(type_idx, n, levels) if n > 0 else None
            return None if got is None else (np.array(got[0]), got[1])
        return self._place_scan(type_idx, n, cpus_per_gpu, mem_per_gpu, net_per_gpu)

    def claim(self, row: int, type_idx: int, n: int, most_nodes: int | None = None
              ) -> tuple[np.ndarray, int] | None:
        """`place(type_idx, n)` then `assign(row, gpus)`, in one step: the GPUs and nodes it
        gives job `row`, or None (nothing changes) if too few are free or, with `most_nodes`,
        if `place` would spread them over more nodes than that. Where the free-GPU index
        places, the GPUs it picks are free by construction and the index is updated from the ids
        it read (no check of the owners, no round trip through numpy), and kept for the release."""
        levels = self._levels[type_idx]
        if levels is None or n <= 0:
            got = self.place(type_idx, n)
            if got is None or most_nodes is not None and got[1] > most_nodes:
                return None
            self.assign(row, got[0])
            return got
        got = self._place_indexed(type_idx, n, levels)
        if got is None or most_nodes is not None and got[1] > most_nodes:
            return None
        ids, nodes, marks = got
        gpus = np.array(ids)
        self.owner[gpus] = row
        self.busy[type_idx] += n
        self._mark(marks, -1)
        self.held[row] = gpus
        self._marks[row] = marks         # what `release` gives back to the index
        return gpus, nodes

    def one_gpu_nodes(self, type_idx: int) -> bool:
        """Whether every node of the type holds one GPU (`claim_ones` places its jobs)."""
        return self._type_size[type_idx] == 1

    def claim_ones(self, rows: list[int], type_idx: int) -> list[np.ndarray] | None:
        """`claim(row, type_idx, 1)` for each of `rows` in turn, at once, on a type whose nodes
        hold one GPU each (`one_gpu_nodes`): the free nodes of lowest position, in order, as
        those claims pick them. Returns each row's GPUs (one id), or None (nothing changes) if
        fewer are free. (No marks are kept: a one-GPU node's are (node, 1), which `release`
        works out from the GPU.)"""
        levels = self._levels[type_idx]
        free, k = levels[1], len(rows)
        if free.bit_count() < k or k == 0:
            return None if k else []
        # the k lowest free positions; every free position up to the last of them is taken
        pos = np.flatnonzero(bits_of(free, self._type_bytes[type_idx]))[:k]
        taken = free & ((2 << int(pos[-1])) - 1)
        levels[1] = free ^ taken
        levels[0] |= taken
        nodes = self.type_nodes[type_idx][pos]
        gpus = self.cluster.node_first_gpu[nodes]
        self.owner[gpus] = rows
        self.node_free[nodes] = 0
        self.busy[type_idx] += k
        gfree = self._gfree
        for node in nodes.tolist():
            gfree[node] = 0
        each = list(gpus.reshape(k, 1))
        self.held.update(zip(rows, each))
        return each

    def _place_scan(self, type_idx: int, n: int, cpus_per_gpu: float = 0.0,
                    mem_per_gpu: float = 0.0, net_per_gpu: float = 0.0
                    ) -> tuple[np.ndarray, int] | None:
        """`place` by scanning the type's nodes (any node sizes, CPU / memory / network room)."""
        nodes = self.type_nodes[type_idx]
        if cpus_per_gpu or mem_per_gpu or net_per_gpu:
            free = self.room(self._type_slice[type_idx], cpus_per_gpu, mem_per_gpu, net_per_gpu)
        else:
            free = self.node_free[self._type_slice[type_idx]]
        if n <= 0:
            return None
        fit = np.where(free >= n, free, _BIG)
        best = fit.argmin()
        owner, first_gpu, size = self.owner, self.cluster.node_first_gpu, self.cluster.node_gpus
        if fit[best] != _BIG:                       # one node has room: the fullest such node
            node = nodes.item(best)
            first = first_gpu.item(node)
            seg = owner[first:first + size.item(node)] == FREE
            if n == 1:
                return np.array([first + seg.argmax()]), 1
            return first + np.flatnonzero(seg)[:n], 1
        if free.sum() < n:
            return None
        # whole nodes, most free first, until the remainder fits on one node: take the tightest
        order = (-free).argsort(kind="stable")
        fs = free[order]
        need = n - np.concatenate(([0], fs[:-1].cumsum()))   # still needed before each position
        pos = int((fs >= need).argmax())
        rest = order[pos:]
        last = rest[np.argmin(np.where(free[rest] >= need[pos], free[rest], _BIG))]
        sz = self._type_size[type_idx]
        if sz:                                      # nodes of one size: all at once, in order
            pick = order[:pos + 1].copy()
            pick[pos] = last                        # the whole nodes, then the tightest for the rest
            takes = free[pick]
            takes[pos] = need[pos]
            ids = first_gpu[nodes[pick]][:, None] + np.arange(sz)
            ok = owner[ids] == FREE
            ok &= ok.cumsum(axis=1) <= takes[:, None]
            return ids[ok], pos + 1
        chosen = nodes[order[:pos]].tolist() + [nodes.item(last)]
        takes = free[order[:pos]].tolist() + [int(need[pos])]
        parts = []
        for node, k in zip(chosen, takes):
            first = first_gpu.item(node)
            parts.append(first + np.flatnonzero(owner[first:first + size.item(node)] == FREE)[:k])
        return np.concatenate(parts), len(chosen)

    def place_parts(self, counts: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int]]] | None:
        """A gang over several types: counts[t] free GPUs of each type t, each part placed as
        `place` would (consolidated within its type), all or nothing. Returns the GPUs ordered by
        type and (type, GPUs, nodes) per part, or None if some part does not fit."""
        got: list[tuple[int, np.ndarray, int]] = []
        for t in np.flatnonzero(counts).tolist():    # a node holds one type: parts never collide
            p = self.place(t, int(counts[t]))
            if p is None:
                return None
            got.append((t, p[0], p[1]))
        return np.concatenate([g for _t, g, _n in got]), [(t, len(g), n) for t, g, n in got]

    def free_on_node(self, node: int) -> int:
        """Free GPUs of a node (0 if it is down)."""
        return int(self.node_free[node]) if self.node_up[node] else 0

    def take_on_node(self, node: int, count: int) -> np.ndarray:
        """`count` free GPU ids of one node (the caller assigns them)."""
        first, size = self.cluster.node_first_gpu[node], self.cluster.node_gpus[node]
        ids = np.arange(first, first + size)
        return ids[self.owner[first:first + size] == FREE][:count]

    def assign(self, row: int, gpus: np.ndarray, cpus: float = 0.0, mem_gb: float = 0.0,
               net_gbps: float = 0.0) -> None:
        """Give `gpus` (of one type or several) to job `row`, with `cpus` threads,
        `mem_gb` GB of host memory and `net_gbps` GB/s of node network split over their nodes
        by GPUs."""
        if cpus or mem_gb or net_gbps:
            nodes, k = np.unique(self.cluster.gpu_node[gpus], return_counts=True)
            c, m, b = cpus * k / len(gpus), mem_gb * k / len(gpus), net_gbps * k / len(gpus)
            if np.any(self.cpu_free[nodes] + 1e-9 < c) or np.any(self.mem_free[nodes] + 1e-9 < m) \
                    or np.any(self.net_free[nodes] + 1e-9 < b):
                raise RuntimeError(f"nodes {nodes} lack the CPUs, memory or network for job {row}")
            self.cpu_free[nodes] -= c
            self.mem_free[nodes] -= m
            self.net_free[nodes] -= b
            self.res[row] = (nodes, c, m, b)
        if len(gpus) == 1:                       # scalar fast path: most jobs hold one GPU
            g = int(gpus[0])
            if self.owner.item(g) != FREE:
                raise RuntimeError(f"GPU {g} is not free")
            self.owner[g] = row
            self._count_one(g, -1)
            self.held[row] = gpus
            return
        held = self.owner[gpus]
        if held.min() != FREE or held.max() != FREE:
            raise RuntimeError(f"GPUs {gpus[held != FREE]} are not free")
        self.owner[gpus] = row
        self._count(gpus, -1)
        self.held[row] = gpus

    def assign_all(self, rows: list[int], gpus: list[np.ndarray]) -> None:
        """`assign(row, gpus)` for each pair, GPUs only, at once (an occupancy rebuilt from a
        snapshot: `mechanism.shadow`): one owner write, one busy update, one index update."""
        if not rows:
            return
        ids = np.concatenate(gpus)
        taken = self.owner[ids] != FREE
        if taken.any():
            raise RuntimeError(f"GPUs {ids[taken]} are not free")
        u, k = np.unique(ids, return_counts=True)
        if u.size != ids.size:
            raise RuntimeError(f"GPUs {u[k > 1]} are given twice")
        self.owner[ids] = np.repeat(np.array(rows, dtype=np.int64), [len(g) for g in gpus])
        self.busy += np.bincount(self.cluster.gpu_type_idx[ids], minlength=len(self.busy))
        self._index(ids.tolist(), -1)
        self.held.update(zip(rows, gpus))

    def assign_guest(self, row: int, gpus: np.ndarray) -> None:
        """Put job `row` on GPUs that one other job owns, as its guest."""
        owners = self.owner[gpus]
        if owners.min() < 0 or owners.min() != owners.max() or (self.guest[gpus] != FREE).any():
            raise RuntimeError(f"GPUs {gpus} are not all owned by one job without a guest")
        self.guest[gpus] = row
        self.guests.add(row)
        self.shared[self.cluster.gpu_type_idx.item(gpus[0])] += len(gpus)
        self.held[row] = gpus

    def assign_span(self, row: int, own: np.ndarray, shared: np.ndarray) -> None:
        """Put job `row` on free GPUs `own` (it owns them) and, as their guest, on `shared`: GPUs
        of one or more owners that have no guest."""
        owners = self.owner[shared]
        if shared.size and (owners.min() < 0 or (self.guest[shared] != FREE).any()):
            raise RuntimeError(f"GPUs {shared} are not all owned by jobs without a guest")
        if own.size:
            held = self.owner[own]
            if held.min() != FREE or held.max() != FREE:
                raise RuntimeError(f"GPUs {own[held != FREE]} are not free")
            self.owner[own] = row
            self._count(own, -1)
        self.guest[shared] = row
        self.guests.add(row)
        self.spans.add(row)
        if shared.size:
            self.shared[self.cluster.gpu_type_idx.item(shared[0])] += len(shared)
        self.held[row] = np.sort(np.concatenate([own, shared]))

    def tenants(self, row: int) -> tuple[dict[int, int], int]:
        """The other jobs on `row`'s GPUs, as {job row: GPUs shared with it}, and how many of its
        GPUs it has to itself."""
        gpus = self.held[row]
        out: dict[int, int] = {}
        alone = 0
        for o, g in zip(self.owner[gpus].tolist(), self.guest[gpus].tolist()):
            m = g if o == row else o
            if m == FREE:
                alone += 1
            else:
                out[m] = out.get(m, 0) + 1
        return dict(sorted(out.items())), alone

    def release(self, row: int) -> np.ndarray:
        """Free the job's GPUs; an owner's guest, if any, becomes their owner."""
        gpus = self.held.pop(row)
        marks = self._marks.pop(row, None)
        t = self.cluster.gpu_type_idx.item(gpus[0])
        if self.res:
            got = self.res.pop(row, None)
            if got is not None:
                nodes, c, m, b = got
                self.cpu_free[nodes] += c
                self.mem_free[nodes] += m
                self.net_free[nodes] += b
        if self.spans:
            return self._release_span(row, gpus, t)
        if row in self.guests:
            self.guests.discard(row)
            self.guest[gpus] = FREE
            self.shared[t] -= len(gpus)
            return gpus
        g = self.guest.item(gpus[0])
        if g >= 0:                       # the guest stays and owns the GPUs now
            self.owner[gpus] = g
            self.guest[gpus] = FREE
            self.guests.discard(g)
            self.shared[t] -= len(gpus)
            return gpus
        if marks is not None:            # claimed: one type, the index's marks kept
            self.owner[gpus] = FREE
            self.busy[t] -= len(gpus)
            self._mark(marks, +1)
            return gpus
        if len(gpus) == 1:
            g = int(gpus[0])
            self.owner[g] = FREE
            self._count_one(g, +1)
            return gpus
        self.owner[gpus] = FREE
        self._count(gpus, +1)
        return gpus

    def release_all(self, rows: list[int], guest: list[bool] | None = None) -> None:
        """`release` each of `rows`, guests (flagged by `guest`) before owners; at once where no
        GPU is shared and no job holds CPUs, memory or network (the GPUs go back free together)."""
        if self.guests or self.res or len(rows) < 2:
            if guest is not None:
                rows = [r for r, g in zip(rows, guest) if g] + \
                       [r for r, g in zip(rows, guest) if not g]
            for r in rows:
                self.release(r)
            return
        held, kept = self.held, self._marks
        parts = [held.pop(r) for r in rows]
        gpus = np.concatenate(parts)
        self.owner[gpus] = FREE
        types = self.cluster.gpu_type_idx[gpus]
        self.busy -= np.bincount(types, minlength=len(self.busy))
        if self._all_one_gpu and not self.down:
            if kept:
                for r in rows:
                    kept.pop(r, None)
            self._free_ones(self.cluster.gpu_node[gpus], types)
            return
        # (a node's free count, bitmask and level end where its GPUs freed in any order take
        # them: the GPUs of the jobs without marks are indexed together)
        marks: list[tuple[int, int]] = []
        loose: list[np.ndarray] = []
        for r, g in zip(rows, parts):
            m = kept.pop(r, None)
            if m is None:
                loose.append(g)
            else:
                marks += m
        if loose:
            self._index(np.concatenate(loose).tolist(), +1)
        self._mark(marks, +1)

    def _release_span(self, row: int, gpus: np.ndarray, t: int) -> np.ndarray:
        """`release` when some guest spans: GPU by GPU (a job may own some of its GPUs and be a
        guest on others; an owner's GPUs may be shared with its guest only in part)."""
        as_guest = self.guest[gpus] == row
        mine = gpus[as_guest]
        if mine.size:                               # leaves the GPUs it was a guest on
            self.guest[mine] = FREE
            self.shared[t] -= len(mine)
        self.guests.discard(row)
        self.spans.discard(row)
        own = gpus[~as_guest]
        if not own.size:
            return gpus
        theirs = self.guest[own]
        for g in np.unique(theirs[theirs != FREE]).tolist():   # a guest owns them now
            to_g = own[theirs == g]
            self.owner[to_g] = g
            self.guest[to_g] = FREE
            self.shared[t] -= len(to_g)
            if (self.guest[self.held[g]] == g).any():
                self.spans.add(g)                   # still a guest elsewhere, owner here
            else:
                self.guests.discard(g)
                self.spans.discard(g)
        gone = own[theirs == FREE]
        if gone.size:
            self.owner[gone] = FREE
            self._count(gone, +1)
        return gpus

    def _count_one(self, g: int, sign: int) -> None:
        self.busy[self.cluster.gpu_type_idx.item(g)] -= sign
        self._index([g], sign)

    def _count(self, gpus: np.ndarray, sign: int) -> None:
        c = self.cluster
        t = c.gpu_type_idx.item(gpus[0])
        # one type? (not only the first and the last GPU's: a forked job's own gang comes
        # before its copies, whatever their types, so v100, p100, p100, v100 was all v100)
        if t == c.gpu_type_idx.item(gpus[-1]) and (len(gpus) < 3 or
                                                     (c.gpu_type_idx[gpus] == t).all()):
            self.busy[t] -= sign * len(gpus)
        else:
            np.subtract.at(self.busy, c.gpu_type_idx[gpus], sign)
        self._index(gpus.tolist(), sign)

    def nodes_of(self, gpus: np.ndarray) -> int:
        if len(gpus) <= 1:
            return len(gpus)
        nodes = self.cluster.gpu_node[gpus]
        return 1 if (nodes == nodes[0]).all() else int(np.unique(nodes).size)

    def consolidated(self, type_idx: int, gpus: np.ndarray) -> bool:
        return self.nodes_of(gpus) <= self.cluster.min_nodes(type_idx, len(gpus))

    # -- failures --------------------------------------------------------------------------------
    def node_down(self, node: int) -> list[int]:
        """Mark a node down; return the job rows holding GPUs on it (the caller releases them)."""
        c = self.cluster
        first, size = c.node_first_gpu[node], c.node_gpus[node]
        on_node = np.concatenate([self.guest[first:first + size], self.owner[first:first + size]])
        victims = list(dict.fromkeys(int(o) for o in on_node if o >= 0))   # guests first
        self.node_up[node] = False
        self.down = int(np.count_nonzero(~self.node_up))
        self._set_free(node, 0)
        self._up_capacity = None
        self._up_res = None
        self._up_net = None
        return victims

    def node_up_again(self, node: int) -> None:
        c = self.cluster
        first, size = c.node_first_gpu[node], c.node_gpus[node]
        self.node_up[node] = True
        self.down = int(np.count_nonzero(~self.node_up))
        self._up_capacity = None
        self._up_res = None
        self._up_net = None
        self._set_free(node, int(np.sum(self.owner[first:first + size] == FREE)))


def _up_sum(per_node: np.ndarray, up: np.ndarray) -> float:
    """A node resource summed over the nodes that are up: inf where it is not modelled (every
    node's inf) even with every node down (0 then made Rubick's cost unit 0/0)."""
    if not up.any() and len(per_node) and np.isinf(per_node).all():
        return float("inf")
    return float(per_node[up].sum())
