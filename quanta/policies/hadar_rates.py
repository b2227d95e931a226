"""How fast a job runs on the allocations Hadar considers (quanta/policies/hadar.py): a gang on
one GPU type, over more nodes than it needs, over several types (task-level heterogeneity,
`quanta.perf.base.mixed_rate`), or as HadarE's forked copies. A mixin of the Hadar policy, which
holds the `mix` parameter it reads."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from quanta.core.snapshot import Snapshot
from quanta.perf.base import Part, aggregation_seconds, link_gbps, mixed_rate


def spec_of(snap: Snapshot, r: int):
    """The JobSpec of snapshot row r (without building the whole specs column)."""
    j = snap.jobs
    return j.all_specs[int(j.rows[r])]


class AllocationRates:
    """Steps/s of a job on an allocation, from the snapshot's performance model."""

    def mix_rate(self, snap: Snapshot, r: int) -> Callable[[np.ndarray], float] | None:
        """Steps/s of job r on a gang over several types given as GPUs per node (the
        performance model's rule for mixed allocations, quanta.perf.base.mixed_rate)."""
        cl = snap.cluster
        if not self.mix or len(cl.types) < 2:
            return None
        spec = spec_of(snap, r)

        def rate(per_node: np.ndarray) -> float:
            parts = []
            for k in np.unique(cl.node_type[per_node > 0]).tolist():
                on_k = per_node[cl.node_type == k]
                c, nd = int(on_k.sum()), int(np.count_nonzero(on_k))
                parts.append(Part(cl.types[k], c, nd, nd <= cl.min_nodes(k, c)))
            return mixed_rate(snap.perf, spec, parts)
        return rate

    def held_rate(self, snap: Snapshot, r: int, counts: np.ndarray) -> float:
        """Steps/s of job r on the GPUs per type it holds (several types: mixed_rate, forked
        copies averaged every fork_s seconds if it is forked)."""
        cl, j = snap.cluster, snap.jobs
        types = np.flatnonzero(counts)
        if len(types) == 1:
            k = int(types[0])
            if counts[k] == j.req[r]:
                return float(j.rates[r, k])
            return float(snap.perf.rate(spec_of(snap, r), cl.types[k], int(counts[k])))
        parts = [Part(cl.types[k], int(counts[k]), cl.min_nodes(k, int(counts[k])), True)
                 for k in types.tolist()]
        fork = None
        if j.fork_s[r] > 0:
            agg = aggregation_seconds(snap.perf, spec_of(snap, r), len(parts),
                                      link_gbps(cl, np.arange(len(cl.nodes))))
            fork = (float(j.fork_s[r]), agg)
        return float(mixed_rate(snap.perf, spec_of(snap, r), parts, fork))

    def held_rates(self, snap: Snapshot, held: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """held_rate of each row (vectorised for the common case: the requested GPUs of one
        type)."""
        j = snap.jobs
        k = held[rows].argmax(axis=1)
        plain = (held[rows, k] == j.req[rows]) & ((held[rows] > 0).sum(axis=1) == 1)
        out = np.where(plain, j.rates[rows, k], 0.0)
        spread = plain & ~j.consolidated[rows] & (j.rate[rows] > 0)
        if spread.any():                 # over more nodes than it needs: what it makes now
            out[spread] = np.minimum(out[spread], j.rate[rows[spread]])
        for i in np.flatnonzero(~plain).tolist():
            out[i] = self.held_rate(snap, int(rows[i]), held[rows[i]])
        return out

    def spread_rate(self, snap: Snapshot, r: int) -> Callable[[int, int], float]:
        """Steps/s of job r on its requested GPUs of type k over m nodes (the consolidated rate
        when m is the fewest that hold them)."""
        cl, j = snap.cluster, snap.jobs
        z = int(j.req[r])

        def rate(k: int, m: int) -> float:
            if m <= cl.min_nodes(k, z):
                return float(j.rates[r, k])
            return float(snap.perf.rate(spec_of(snap, r), cl.types[k], z, m, False))
        return rate
