"""Gavel (OSDI'20): policies as optimisation problems over time fractions X[job, GPU type],
realised by a round-based priority mechanism. `allocations` holds the programmes, `rounds` the
mechanism; this module wires them to the snapshot and registers the policies.

Throughputs T[j,k] are the performance model's steps/s at the job's requested GPU count
(the snapshot's `rates`); a job that may not, or cannot, use a type has T = 0 there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.policies.base import Policy
from quanta.policies.gavel import allocations as alloc
from quanta.policies.gavel.rounds import packed_round, round_assignment
from quanta.policies.gavel.space_sharing import PackedAllocation, packed_max_min
from quanta.policies.registry import register

OBJECTIVES = ("max_min", "ftf", "makespan", "throughput", "cost", "fifo", "hierarchical")


@register("gavel-las", "Gavel heterogeneity-aware max-min fairness (LAS), weighted by job weight")
@register("gavel-las-agnostic", "Gavel max-min fairness ignoring GPU-type speed differences",
          agnostic=True)
@register("gavel-las-packed", "Gavel max-min fairness with space sharing: jobs packed in pairs "
                              "where measured co-location helps", packed=True)
@register("gavel-ftf", "Gavel finish-time fairness (Themis-style): minimise the worst rho",
          objective="ftf")
@register("gavel-makespan", "Gavel minimum makespan: maximise min throughput / remaining work",
          objective="makespan")
@register("gavel-throughput", "Gavel maximum total normalised throughput", objective="throughput")
@register("gavel-cost", "Gavel maximum normalised throughput per dollar, with deadlines as SLOs",
          objective="cost")
@register("gavel-fifo", "Gavel FIFO: arrival order, each job on its fastest free type",
          objective="fifo")
@register("gavel-hierarchical", "Gavel hierarchical max-min fairness (water-filling) across queues",
          objective="hierarchical")
@dataclass
class Gavel(Policy):
    objective: str = "max_min"
    agnostic: bool = False
    interval: float = 360.0          # round length (Gavel: 6 minutes)
    entity: str = "queue"            # hierarchical: group jobs by "queue" or "user"
    packed: bool = False             # max_min with space sharing (pairs of equal-size jobs)

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            from quanta.errors import QuantaError
            raise QuantaError(f"gavel objective '{self.objective}' unknown (known: {', '.join(OBJECTIVES)})")

    # -- the allocation -----------------------------------------------------------------------
    def allocation(self, snap: Snapshot, st: dict | None = None) -> np.ndarray:
        """X for the snapshot's jobs; `st` (the policy state) carries the FTF search's warm start."""
        st = {} if st is None else st
        j = snap.jobs
        T = j.rates
        z = j.req.astype(np.int64)
        N = snap.capacity
        T_alloc = (T > 0).astype(float) if self.agnostic else T
        X_eq = alloc.equal_share(T_alloc, z, N)
        tau_eq = np.maximum((T_alloc * X_eq).sum(axis=1), 1e-12)
        obj = self.objective
        if obj == "max_min" and self.packed:
            return self._packed_allocation(snap, T, z, N, z / (j.weight * tau_eq))
        if obj == "max_min":
            X = alloc.max_min(T_alloc, z, N, z / (j.weight * tau_eq))[0]
            return alloc.spread_like_agnostic(X, T > 0, z, N) if self.agnostic else X
        if obj == "hierarchical":
            return alloc.water_filling(T_alloc, z, N, z / (self._entity_weights(snap) * tau_eq))
        remaining = np.maximum(j.remaining, 1e-9)
        if obj == "makespan":   # Gavel's programme as is: a second stage weighted by 1/remaining
            return alloc.max_min(T, z, N, 1.0 / remaining, refine=False)[0]   # favours short jobs
        if obj == "ftf":
            X_iso = alloc.equal_share(T, z, N)
            tau_iso = np.maximum((T * X_iso).sum(axis=1), 1e-12)
            X, rho = alloc.min_max_ratio(T, z, N, num=remaining, den=j.total / tau_iso,
                                         base=snap.now - j.submit, guess=st.get("rho"))
            st["rho"] = rho
            return X
        if obj == "fifo":
            return alloc.fastest_first(T, z, N, np.lexsort((j.rows, j.submit)))
        best = np.maximum(T.max(axis=1, keepdims=True), 1e-12)
        value = T / best                                      # normalised throughput per pair
        if obj == "throughput":
            return alloc.max_sum(T, z, N, value)
        price = np.array([snap.cluster.gpu_types[t].price_per_hour for t in snap.cluster.types])
        value = value / (z[:, None] * price[None, :])
        deadline = np.array([s.deadline for s in j.specs])
        left = deadline - snap.now
        slo = np.where((deadline > 0) & (left > 0), remaining / np.maximum(left, 1e-9), np.nan)
        X = alloc.max_sum(T, z, N, value, slo) if np.any(~np.isnan(slo)) else None
        return X if X is not None else alloc.max_sum(T, z, N, value)

    def _packed_allocation(self, snap: Snapshot, T: np.ndarray, z: np.ndarray, N: np.ndarray,
                           coef: np.ndarray) -> PackedAllocation:
        j = snap.jobs
        names = [s.job_type for s in j.specs]
        kinds = {name: i for i, name in enumerate(sorted(set(names)))}
        kind = np.array([kinds[nm] for nm in names], dtype=np.int64)
        types = snap.cluster.types

        def pair_rate(a: int, b: int, k: int) -> float:
            return snap.perf.shared_rate(j.specs[a], j.specs[b], types[k], int(z[a]), mode="pack")
        return packed_max_min(T, z, N, coef, kind, pair_rate)

    def _entity_weights(self, snap: Snapshot) -> np.ndarray:
        """Each entity (queue or user) has weight 1, split evenly among its active jobs."""
        names = [getattr(s, self.entity) for s in snap.jobs.specs]
        _, inv, counts = np.unique(np.array(names, dtype=object).astype(str), return_inverse=True,
                                   return_counts=True)
        return 1.0 / counts[inv]

    # -- the round ----------------------------------------------------------------------------
    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        n, K = len(j), len(snap.cluster.types)
        st = snap.state if snap.state else {"recv": {}, "elapsed": {}, "t": None, "X": None, "key": None}
        rows = j.rows
        width = 2 * K if self.packed else K        # packed: time alone, then time packed, per type
        # credit the round that just ended: time held per type (and mode), time active
        if st["t"] is not None:
            dt = snap.now - st["t"]
            recv, el = st["recv"], st["elapsed"]
            run = np.flatnonzero(j.running)
            for i, r in zip(run.tolist(), rows[run].tolist()):
                col = int(j.gtype[i]) + (K if self.packed and j.partner[i] >= 0 else 0)
                recv.setdefault(r, np.zeros(width))[col] += dt
            for r, sub in zip(rows.tolist(), j.submit.tolist()):
                el[r] = el.get(r, 0.0) + min(dt, snap.now - sub)
        key = (tuple(rows.tolist()), tuple(snap.capacity.tolist()))
        if st["key"] != key:                       # recompute X when jobs or capacity change
            st["X"], st["key"] = self.allocation(snap, st), key
            live = set(key[0])
            for d in (st["recv"], st["elapsed"]):
                for r in [r for r in d if r not in live]:
                    del d[r]
        X = st["X"]
        received = np.array([st["recv"].get(r, np.zeros(width)) for r in rows.tolist()]).reshape(n, width)
        elapsed = np.array([st["elapsed"].get(r, 0.0) for r in rows.tolist()])
        st["t"] = snap.now
        if not self.packed:
            gpus, gtype = round_assignment(X, j.rates, j.req, snap.capacity, received, elapsed)
            return Decision(gpus, gtype, state=st)
        return self._packed_round(snap, X, received, elapsed, st)

    def _packed_round(self, snap: Snapshot, P: PackedAllocation, received: np.ndarray,
                      elapsed: np.ndarray, st: dict) -> Decision:
        j = snap.jobs
        n, K = len(j), len(snap.cluster.types)
        pair_tot = np.zeros((n, K))
        pref: dict[tuple[int, int], list[tuple[float, int]]] = {}
        for (a, b, k), tgt in P.pair_time.items():
            pair_tot[P.cls == a, k] += tgt
            pref.setdefault((a, k), []).append((-tgt, b))
        pair_pref = {key: [b for _, b in sorted(v)] for key, v in pref.items()}
        pos = {int(r): i for i, r in enumerate(j.rows.tolist())}
        current_host = np.array([pos.get(int(p), -1) if g else -1
                                 for p, g in zip(j.partner.tolist(), j.is_guest.tolist())], dtype=np.int64)
        gpus, gtype, guest_of = packed_round(P.single, pair_tot, pair_pref, P.cls, j.rates, j.req,
                                             snap.capacity, received[:, :K], received[:, K:],
                                             elapsed, current_host)
        share = {g: (h, "pack") for g, h in guest_of.items()}
        return Decision(gpus, gtype, share=share, state=st)
