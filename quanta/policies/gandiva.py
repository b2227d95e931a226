"""Gandiva (OSDI'18): introspective scheduling with time-slicing, packing, migration, grow-shrink.

Jobs run in arrival order and are never preempted to the queue. When no GPUs are free for a
waiting job, it is time-sliced with a running job of the same size (the GPUs alternate between
the two every quantum; modelled as each getting half the time, less a ~100 ms suspend/resume per
60 s quantum). Introspection, every quantum while pairs exist: a time-sliced pair is tried
packed (both running at once); after a quantum the policy measures both jobs' rates
(snapshot `rate`) against their rates alone and keeps the pack only if the normalised
throughput r_a/alone_a + r_b/alone_b exceeds `pack_threshold` (1.0: what time-slicing gives);
otherwise it reverts to time-slicing and never packs that pair again. When GPUs free up, a
sharing job migrates onto them; a job spread over more nodes than it needs is moved to fewer
(defragmentation). Elastic jobs (max_gpus > num_gpus) grow onto idle GPUs while nothing waits
and shrink back to their request when something does.

Modelled differently from the paper: at most two jobs share a GPU set (the paper oversubscribes
further); affinity-based server choice is left to the core's best-fit consolidating placement.
Costs are the world's, as for every policy: a migration pays the run's restart delay
(`--restart-delay`, 30 s by default; Gandiva reports ~1-2 s [S] for its own migration:
`--restart-delay 2` gives that; on synthetic:8:300, v100:8x8, seed 0, average JCT 24.36 h at
30 s and 24.34 h at 2 s); time-slicing costs the performance model's ~100 ms per 60 s
(quanta/perf/table.py SLICE_OVERHEAD, Gandiva's default quantum) whatever `quantum` is, so a
shorter quantum's extra switches are not charged.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.policies.base import INF, MAX_S, Policy, require
from quanta.policies.registry import register


@register("gandiva", "Gandiva: time-slicing when oversubscribed, packing kept only if measured to help, "
                     "migration, grow-shrink")
@dataclass
class Gandiva(Policy):
    quantum: float = 60.0
    pack: bool = True
    pack_threshold: float = 1.0
    grow: bool = True
    defrag: bool = True

    def __post_init__(self) -> None:
        require(0 < self.quantum <= MAX_S, "gandiva", "quantum", self.quantum, "a positive number of seconds, at most 1e15")
        require(0 <= self.pack_threshold < INF, "gandiva", "pack_threshold", self.pack_threshold,
                "a number, 0 or more")

    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        now = snap.now
        st = snap.state if snap.state else {"trial": {}, "no_pack": set()}
        rows = j.rows
        pos = dict(zip(rows.tolist(), range(len(rows))))     # driver row -> snapshot row
        dec = Decision.empty(snap)
        free = snap.capacity.astype(np.int64).copy()
        req = j.req
        # 1. running owners keep their GPUs (never preempted); elastic ones at their request
        owners = np.flatnonzero(j.running & ~j.is_guest)
        held = j.gpus[owners]
        keep = np.where(held > req[owners], req[owners], held) if self.grow else held
        dec.gpus[owners], dec.gpu_type[owners] = keep, j.gtype[owners]
        np.add.at(free, j.gtype[owners], -keep)
        # 2. sharing jobs migrate to freed GPUs, else keep sharing (mode from introspection)
        hosts_taken: set[int] = set()
        guests = np.flatnonzero(j.is_guest)
        gpus_l, type_l = dec.gpus.tolist(), dec.gpu_type.tolist()     # (a pair on every GPU)
        for i, t, n, mate in zip(guests.tolist(), j.gtype[guests].tolist(), req[guests].tolist(),
                                 j.partner[guests].tolist()):
            if free[t] >= n:
                dec.gpus[i], dec.gpu_type[i] = gpus_l[i], type_l[i] = n, t
                free[t] -= n
                continue
            h = pos.get(mate)
            if h is None or gpus_l[h] != n or type_l[h] != t:
                continue        # its host shrank or left: it waits
            dec.gpus[i], dec.gpu_type[i] = gpus_l[i], type_l[i] = n, t
            dec.share[i] = (h, self._mode(st, snap, i, h))
            hosts_taken.add(h)
        # 3. waiting jobs in arrival order: free GPUs, else time-slice with a same-size job
        waiting = np.flatnonzero(~j.running)
        waiting = waiting[np.lexsort((j.rows[waiting], j.submit[waiting]))]
        still_waiting = 0
        hosts = _Hosts(snap, dec, hosts_taken)
        free_l = free.tolist()
        for i, n, ok in zip(waiting.tolist(), req[waiting].tolist(),
                            j.allowed[waiting].tolist()):
            if n <= max(free_l):
                room = [a and f >= n for a, f in zip(ok, free_l)]
                if any(room):
                    t = int(np.argmax(np.where(room, j.rates[i], -1.0)))
                    dec.gpus[i], dec.gpu_type[i] = n, t
                    free_l[t] -= n
                    hosts.add(i, n, t)          # started now: a host for the jobs after it
                    continue
            h = hosts.take(i, n, ok)
            if h is None:
                still_waiting += 1
                continue
            dec.gpus[i], dec.gpu_type[i] = n, dec.gpu_type[h]
            dec.share[i] = (h, "slice")
            hosts_taken.add(h)
        free[:] = free_l
        # 4. grow elastic owners onto idle GPUs while nothing waits
        if self.grow and still_waiting == 0:
            for i in owners.tolist():
                spec = j.specs[i]
                t = int(dec.gpu_type[i])
                if spec.max_gpus_eff > dec.gpus[i] and i not in hosts_taken and free[t] > 0:
                    extra = min(spec.max_gpus_eff - int(dec.gpus[i]), int(free[t]))
                    dec.gpus[i] += extra
                    free[t] -= extra
        if self.defrag:
            dec.defrag = {i for i in owners.tolist() if not j.consolidated[i] and i not in hosts_taken}
        self._forget(st, set(pos))
        dec.state = st
        dec.wake_at = now + self.quantum if dec.share else None
        return dec

    def _mode(self, st: dict, snap: Snapshot, g: int, h: int) -> str:
        """Introspection for a sharing pair: try packing, measure, keep or revert."""
        j = snap.jobs
        key = (int(j.rows[h]), int(j.rows[g]))
        current = "pack" if j.share_mode[g] == 1 else "slice"
        if not self.pack or key in st["no_pack"]:
            return "slice"
        started = st["trial"].get(key)
        if current == "slice":
            if started is None:
                if not self._can_pack(snap, g, h):   # they do not fit in memory together
                    st["no_pack"].add(key)
                    return "slice"
                st["trial"][key] = snap.now      # try packing from now on
                return "pack"
            return "slice"
        if started is not None and snap.now - started >= self.quantum:
            r_g, r_h = j.rate[g], j.rate[h]
            if r_g > 0 and r_h > 0:              # both measured (not restoring)
                norm = r_g / j.rates[g, j.gtype[g]] + r_h / j.rates[h, j.gtype[h]]
                del st["trial"][key]
                if norm <= self.pack_threshold:
                    st["no_pack"].add(key)
                    return "slice"
        return "pack"

    @staticmethod
    def _can_pack(snap: Snapshot, g: int, h: int) -> bool:
        j = snap.jobs
        t = snap.cluster.types[int(j.gtype[h])]
        n = int(j.req[g])
        a, b = j.specs[g], j.specs[h]
        return snap.perf.shared_rate(a, b, t, n, mode="pack") > 0 and \
            snap.perf.shared_rate(b, a, t, n, mode="pack") > 0

    @staticmethod
    def _forget(st: dict, live: set[int]) -> None:
        for key in [k for k in st["trial"] if k[0] not in live or k[1] not in live]:
            del st["trial"][key]


class _Hosts:
    """The jobs a waiting job may time-slice with, as `Gandiva.decide` walks the queue: running
    owners kept at the GPUs they hold and jobs started by this very decision (jobs submitted
    together, e.g. a hyper-parameter search, slice from the start), not sharing yet. A job of
    n GPUs takes, among those holding n GPUs of a type it may use, with which the performance
    model lets it take turns (Pollux's, Sia's and Rubick's jobs share with no one), the one
    that arrived first (Gandiva time-slices the least loaded GPUs; all unshared ones carry one
    job). Kept per (GPUs, type) in heaps, so a decision costs the queue's length, not its
    square."""

    def __init__(self, snap: Snapshot, dec: Decision, taken: set[int]) -> None:
        j = snap.jobs
        self.snap = snap
        self.heaps: dict[tuple[int, int], list[tuple[float, int, int]]] = {}
        own = np.flatnonzero(j.running & ~j.is_guest & (j.gpus == dec.gpus))
        for h, n, t, at, row in zip(own.tolist(), j.gpus[own].tolist(),
                                    dec.gpu_type[own].tolist(), j.submit[own].tolist(),
                                    j.rows[own].tolist()):
            if h not in taken:
                self.heaps.setdefault((n, t), []).append((at, row, h))
        for heap in self.heaps.values():
            heapq.heapify(heap)

    def add(self, h: int, n: int, t: int) -> None:
        j = self.snap.jobs
        heapq.heappush(self.heaps.setdefault((n, t), []), (float(j.submit[h]), int(j.rows[h]), h))

    def take(self, i: int, n: int, allowed: list[bool]) -> int | None:
        """Job i's host (n GPUs, a type in `allowed`), taken; None if it has none."""
        heaps = [(t, self.heaps.get((n, t))) for t, ok in enumerate(allowed) if ok]
        heaps = [(t, heap) for t, heap in heaps if heap]
        passed: list[tuple[list, tuple]] = []
        found = None
        while heaps:
            t, heap = min(heaps, key=lambda th: th[1][0])
            entry = heapq.heappop(heap)
            if not heap:
                heaps.remove((t, heap))
            if self._slice(i, entry[2], t, n):
                found = entry[2]
                break
            passed.append((self.heaps[n, t], entry))
        for heap, entry in passed:
            heapq.heappush(heap, entry)
        return found

    def _slice(self, i: int, h: int, t: int, n: int) -> bool:
        """Whether jobs i and h can take turns on n GPUs of type t (both progress)."""
        snap = self.snap
        a, b, gpu = snap.jobs.specs[i], snap.jobs.specs[h], snap.cluster.types[t]
        return snap.perf.shared_rate(a, b, gpu, n, mode="slice") > 0 and \
            snap.perf.shared_rate(b, a, gpu, n, mode="slice") > 0
