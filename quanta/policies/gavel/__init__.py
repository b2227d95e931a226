"""Gavel (OSDI'20): policies as optimisation problems over time fractions X[job, GPU type],
realised by a round-based priority mechanism. `allocations` holds the programmes, `rounds` the
mechanism; this module wires them to the snapshot and registers the policies.

Throughputs T[j,k] are the performance model's steps/s at the job's requested GPU count
(the snapshot's `rates`); a job that may not, or cannot, use a type has T = 0 there.

The programmes are Gavel's (stanford-futuredata/gavel @ c4fa400, scheduler/policies/): max-min
fairness weights job j by z_j / (w_j * its throughput under the proportional share), finish-time
fairness compares with the job's accumulated isolated time, max throughput sums raw steps/s.
How the allocation is turned into rounds has parameters, each defaulting to Quanta's own
mechanism; GAVEL_SIM lists the values that make the policy behave as Gavel's simulator does
(bench/anchors/gavel.md explains each, with file:line):

- recompute_every: X is recomputed when the job set changes, but at most every this many seconds
  (0: at every change). Gavel: 1,920 s (scheduler.py:67, used at 2366-2389); meanwhile a new job
  has no share and a finished job's share is not redistributed.
- reset_received: the time each job received on each type restarts from 0 when X is recomputed,
  and what it fell short of its share goes into a per-type deficit that breaks priority ties
  (Gavel: scheduler.py:2265-2311). Quanta (False): time received since the job arrived.
- priority: "share" (X / (time received / time active), X * 1e9 before a first run; Quanta) or
  "smoothed" (X / (half a round + time received): Gavel's fraction, scheduler.py:2420-2463, whose
  half-round start value is set at 501-502 and 2303-2304) or "cluster" (Sia's simulator's Gavel
  baseline, sia-simulator gavel.py:111-125, 249-274, 505-510: X / (the job's time on the type /
  every job's time on the type), a job's time starting at half a round on every type when it
  arrives, which adds as much to each type's total; each round credits a whole round to the job
  and to its type's total, whatever the job's size; never reset; no deficits).
- queues: "global" (one list over all types; Quanta) or "per_type" (one list per type, taken in
  `type_order`; Gavel: scheduler.py:783-808, enable_global_queue=False).
- type_order: "fastest" (by GPU speed: V100, P100, K80, Gavel's fixed order at scheduler.py:871)
  or "shuffle" (a new seeded random order every round: Gavel does so for the policies whose name
  has neither Perf nor Packing, i.e. the heterogeneity-agnostic ones, scheduler.py:879-881).
  Read only with queues=per_type (and programme=pairs): one list over all types has no order.
- backfill: idle GPUs go to waiting jobs that have no share of that type (Gavel: every policy but
  FIFO, scheduler.py:810-850). Never for FIFO.
- hold_unallocated: a job that arrived after X was computed still takes its place at the end of
  the lists, and the GPUs it takes idle for the round (Gavel: scheduler.py:936-938). Only matters
  with recompute_every > 0.
- fifo_stale_type (agnostic FIFO): reproduce Gavel's FIFO picking the last type of its list
  rather than the random one it drew (policies/fifo.py:137-163).
- seed: the random type order and agnostic FIFO's random type (Gavel: random.Random(seed + 5)
  and random.Random(seed), scheduler.py:327-328, fifo.py:17-19).
- solution: which of the many optimal allocations: "vertex" (HiGHS, then the most throughput
  among the optima; Quanta) or "central" (the middle of the optimal set, as the interior-point
  solver ECOS that Gavel runs returns it: every job some time on every type; central.py) or
  "ecos" (Gavel's programme as cvxpy hands it to ECOS, solved by ECOS: Gavel's own X; ecos.py).
  With "central" or "ecos" every entry of X is a positive priority, as in Gavel.
- programme (packed only): "classes" (Quanta: space_sharing.packed_max_min over classes of jobs,
  rounds.packed_round) or "pairs" (Gavel's max_min_fairness_packed: one variable per job and per
  pair of jobs of equal GPU count, max_min_fairness.py:274-358, and pairs as entries of their own
  in the per-type lists, scheduler.py:766-855, 2197-2251: `Gavel._pairs_decide`). With "pairs",
  solution "central"/"ecos" takes HiGHS's interior point (no crossover), "vertex" the vertex.
- decimals: X rounded to this many decimals before the round, or -1: not rounded (Sia's
  simulator's Gavel baseline rounds to 5: policies/max_sum_throughput.py:90; an entry below 5e-6
  then has no share and is only backfilled).
- tie_types: type names separated by "/" (one list over all types): entries equal in priority,
  deficit and X go type by type in this order (types not named follow in cluster order), then by
  arrival, as Sia's simulator's stable sort of a list built type by type leaves them (gavel.py:
  293-305, its types in simulator_config's order); "" (Quanta): by arrival, then type.
- workers: which GPUs of its type a job of the round gets: "" (Quanta's mechanism: consolidated
  where the free GPUs allow, a job keeping its type and count keeps its GPUs) or "gavel" (Gavel's
  worker assignment, server by server, a kept job losing its GPUs to a larger one: workers.py;
  Sia's simulator's Gavel baseline, gavel.py:332-428).
- credit: the time a round credits to a job that ran: "held" (the round's length; Quanta) or
  "progress" (the steps it made divided by its rate on that type: the time its steps took, which
  is Gavel's micro-task time when a round is a whole number of steps, scheduler.py:1308-1310 and
  959-993; ties between jobs are broken by these differences).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.errors import QuantaError
from quanta.policies.base import INF, MAX_SEED, Policy, gpu_type_names, require
from quanta.policies.gavel import allocations as alloc
from quanta.policies.gavel import central, ecos
from quanta.policies.gavel.pairs import PairEntries
from quanta.policies.gavel.rounds import BIG, packed_round, priority_round
from quanta.policies.gavel.workers import gavel_workers
from quanta.policies.registry import register

if TYPE_CHECKING:      # (space sharing is imported by the packed policy's runs only)
    from quanta.policies.gavel.space_sharing import PackedAllocation

OBJECTIVES = ("max_min", "ftf", "makespan", "throughput", "cost", "fifo", "hierarchical")
PRIORITIES = ("share", "smoothed", "cluster")
QUEUES = ("global", "per_type")
TYPE_ORDERS = ("fastest", "shuffle")
SOLUTIONS = ("vertex", "central", "ecos")
CREDITS = ("held", "progress")
RATE_UNITS = ("progress", "iterations")
PROGRAMMES = ("classes", "pairs")
COST_OF = ("job", "gpu")          # cost objective: what a job's time costs (see Gavel.cost_of)
ENTITIES = ("queue", "user")       # what the hierarchical objective groups jobs by (JobSpec fields)

# The parameters that make these policies behave as Gavel's simulator does (stanford-futuredata/
# gavel @ c4fa400, scheduler/scheduler.py); "shuffle" is for the heterogeneity-agnostic policies
# (Gavel's max_min_fairness and fifo), the others keep "fastest". Seed: Gavel's --seed.
GAVEL_SIM = {"recompute_every": 1920.0, "reset_received": True, "priority": "smoothed",
             "queues": "per_type", "type_order": "fastest", "backfill": True,
             "hold_unallocated": True, "fifo_stale_type": True, "solution": "ecos",
             "credit": "progress"}


def _sorted_set(rows: np.ndarray) -> np.ndarray:
    """`np.unique(rows)` of an integer array: sorted, each value once. (np.unique without flags
    asks numpy.ma whether the array is masked, an ~8 ms import in a short run.)"""
    out = np.sort(rows)
    if len(out) > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def gavel_sim_params(agnostic: bool, seed: int = 0, packed: bool = False) -> dict:
    """GAVEL_SIM for one policy: the type order Gavel's simulator uses for it, and its seed; for
    the packed policy, Gavel's job-pair programme with pairs as list entries (P8)."""
    out = {**GAVEL_SIM, "type_order": "shuffle" if agnostic else "fastest", "seed": seed}
    if packed:
        out["programme"] = "pairs"
    return out


@register("gavel-las", "Gavel heterogeneity-aware max-min fairness (LAS), weighted by job weight")
@register("gavel-las-agnostic", "Gavel max-min fairness ignoring GPU-type speed differences",
          agnostic=True)
@register("gavel-las-packed", "Gavel max-min fairness with space sharing: jobs packed in pairs "
                              "where measured co-location helps", packed=True)
@register("gavel-ftf", "Gavel finish-time fairness (Themis-style): minimise the worst rho",
          objective="ftf")
@register("gavel-makespan", "Gavel minimum makespan: maximise min throughput / remaining work",
          objective="makespan")
@register("gavel-throughput", "Gavel maximum total throughput (raw steps/s, as Gavel sums them; "
                              "normalised=true: each job's relative to its best type)",
          objective="throughput")
@register("gavel-cost", "Gavel maximum throughput per dollar (steps/s per dollar of the job's "
                        "GPUs; cost_of=gpu: per one GPU's price, as Gavel), with deadlines as SLOs",
          objective="cost")
@register("gavel-fifo", "Gavel FIFO: arrival order, each job on its fastest free type",
          objective="fifo")
@register("gavel-fifo-agnostic", "Gavel FIFO ignoring GPU types: arrival order, a random free type "
                                 "per job, kept until the job ends", objective="fifo", agnostic=True)
@register("gavel-hierarchical", "Gavel hierarchical max-min fairness (water-filling) across queues",
          objective="hierarchical")
@dataclass
class Gavel(PairEntries, Policy):
    objective: str = "max_min"
    agnostic: bool = False
    interval: float = 360.0          # round length (Gavel: 6 minutes)
    entity: str = "queue"            # hierarchical: group jobs by "queue" or "user" (ENTITIES)
    packed: bool = False             # max_min with space sharing (pairs of equal-size jobs)
    normalised: bool = False         # throughput/cost: each job's T relative to its best type
                                     # (Gavel: raw steps/s, max_sum_throughput.py:60-63)
    pack_multi_gpu: bool = False     # packed: pair multi-GPU jobs too (Gavel measured no such pair)
    # throughput objective: the jobs' rates as "progress" per second (Quanta) or "iterations" per
    # second (the perf model's `iteration_rate`; Sia's simulator's Gavel baseline, gavel.py:515-546)
    rate_units: str = "progress"
    # cost objective: a job's throughput per dollar of the GPUs it holds, "job" (z_j GPUs at the
    # type's price: what the job costs) or "gpu" (one GPU's price, whatever the job's GPU count:
    # Gavel's ThroughputNormalizedByCostSum, max_sum_throughput.py:56-62, T / c_k)
    cost_of: str = "job"
    # packed: "classes" (Quanta: a programme over classes of jobs, its own pair round) or "pairs"
    # (Gavel's max_min_fairness_packed: one variable per job and per pair of jobs, pairs as their
    # own entries in Gavel's per-type lists; `_pairs_decide`)
    programme: str = "classes"
    # the mechanism (module docstring; GAVEL_SIM gives Gavel's simulator's values)
    recompute_every: float = 0.0
    reset_received: bool = False
    priority: str = "share"
    queues: str = "global"
    type_order: str = "fastest"
    backfill: bool = True
    hold_unallocated: bool = False
    fifo_stale_type: bool = False
    seed: int = 0
    solution: str = "vertex"
    decimals: int = -1
    tie_types: str = ""
    credit: str = "held"
    workers: str = ""

    def __post_init__(self) -> None:
        for name, value, known in (("objective", self.objective, OBJECTIVES),
                                   ("priority", self.priority, PRIORITIES),
                                   ("queues", self.queues, QUEUES),
                                   ("type_order", self.type_order, TYPE_ORDERS),
                                   ("solution", self.solution, SOLUTIONS),
                                   ("credit", self.credit, CREDITS),
                                   ("rate_units", self.rate_units, RATE_UNITS),
                                   ("cost_of", self.cost_of, COST_OF),
                                   ("programme", self.programme, PROGRAMMES),
                                   ("workers", self.workers, ("", "gavel")),
                                   ("entity", self.entity, ENTITIES)):
            if value not in known:
                raise QuantaError(f"gavel {name} '{value}' unknown (known: "
                                  f"{', '.join(k or repr(k) for k in known)})", field="--policy")
        if self.packed and self.objective != "max_min":      # (an AttributeError deep inside)
            raise QuantaError(f"gavel packed=true is max-min fairness with space sharing: it "
                              f"needs objective max_min, not '{self.objective}'", field="--policy")
        if self.tie_types:
            self.tie_types = gpu_type_names(self.tie_types, "gavel", "tie_types")
        require(0 <= self.recompute_every < INF, "gavel", "recompute_every", self.recompute_every,
                "a number of seconds, 0 or more")
        require(-1 <= self.decimals <= 15, "gavel", "decimals", self.decimals, "-1 (off) to 15")
        require(0 <= self.seed <= MAX_SEED, "gavel", "seed", self.seed,
                "0 to 2^63 - 1")

    # -- the allocation -----------------------------------------------------------------------
    def allocation(self, snap: Snapshot, st: dict | None = None) -> np.ndarray:
        """X for the snapshot's jobs; `st` (the policy state) carries what Gavel's policies keep
        from one computation to the next (FTF's isolated time, agnostic FIFO's types)."""
        st = {} if st is None else st
        j = snap.jobs
        n = len(j)
        N = snap.capacity
        T = np.where(N[None, :] > 0, j.rates, 0.0)   # a type with no GPU up offers nothing
        z = j.req.astype(np.int64)
        T_alloc = (T > 0).astype(float) if self.agnostic else T
        obj = self.objective
        if obj in ("max_min", "hierarchical"):
            # Gavel's max-min weight: z_j / (w_j * tau_j under the proportional share)
            tau_prop = np.maximum(T_alloc @ alloc.proportional_share(N, n), 1e-12)
            if obj == "hierarchical":
                return alloc.water_filling(T_alloc, z, N, z / (self._entity_weights(snap) * tau_prop))
            coef = z / (j.weight * tau_prop)
            if self.packed:
                # no time on a type with fewer GPUs than the job's gang: its packed rounds have
                # no backfill, so a job whose share was all there waited on an idle cluster
                # (the plain rounds backfill it; unchanged there)
                return self._packed_allocation(snap, np.where(z[:, None] <= N[None, :], T, 0.0),
                                               z, N, coef)
            if self.solution == "central":
                return central.central_max_min(T_alloc, z, N, coef)[0]
            if self.solution == "ecos":
                return ecos.ecos_max_min(T_alloc, z, N, j.weight, tau_prop, snap.cluster.types)
            X = alloc.max_min(T_alloc, z, N, coef)[0]
            return alloc.spread_like_agnostic(X, T > 0, z, N) if self.agnostic else X
        remaining = np.maximum(j.remaining, 1e-9)
        if obj == "makespan":   # Gavel's programme as is: a second stage weighted by 1/remaining
            return alloc.max_min(T, z, N, 1.0 / remaining, refine=False)[0]   # favours short jobs
        if obj == "ftf":
            return self._ftf_allocation(snap, T, z, N, remaining, st)
        if obj == "fifo":
            if self.agnostic:
                rng = st.setdefault("fifo_rng", random.Random(self.seed))
                X, st["fifo_held"] = alloc.fifo_base(T, z, N, j.rows, list(snap.cluster.types),
                                                     st.get("fifo_held", {}), rng,
                                                     stale_type=self.fifo_stale_type)
                return X
            return alloc.fastest_first(T, z, N, np.lexsort((j.rows, j.submit)))
        if self.rate_units == "iterations":
            T = self._iteration_rates(snap, T, z)
        # Gavel sums raw steps/s (max_sum_throughput.py:60-63); normalised: relative to best type
        value = T / np.maximum(T.max(axis=1, keepdims=True), 1e-12) if self.normalised else T
        if obj == "throughput":
            if self.solution == "central":
                return central.central_max_sum(T, z, N, value)
            if self.solution == "ecos":
                return ecos.ecos_max_sum(T, z, N, value, snap.cluster.types)
            return alloc.max_sum(T, z, N, value)
        price = np.array([snap.cluster.gpu_types[t].price_per_hour for t in snap.cluster.types])
        value = value / ((z[:, None] if self.cost_of == "job" else 1) * price[None, :])
        deadline = np.array([s.deadline for s in j.specs])
        left = deadline - snap.now
        slo = np.where((deadline > 0) & (left > 0), remaining / np.maximum(left, 1e-9), np.nan)
        X = alloc.max_sum(T, z, N, value, slo) if np.any(~np.isnan(slo)) else None
        return X if X is not None else alloc.max_sum(T, z, N, value)

    @staticmethod
    def _iteration_rates(snap: Snapshot, T: np.ndarray, z: np.ndarray) -> np.ndarray:
        """T in iterations per second at each job's own batch (`iteration_rate` of the
        performance model; T itself where it has no answer)."""
        rate = getattr(snap.perf, "iteration_rate", None)
        if rate is None:
            return T
        out = T.copy()
        types = snap.cluster.types
        for i, spec in enumerate(snap.jobs.specs):
            for k in np.flatnonzero(T[i] > 0).tolist():
                r = rate(spec, types[k], int(z[i]))
                if r:
                    out[i, k] = r
        return out

    def _ftf_allocation(self, snap: Snapshot, T: np.ndarray, z: np.ndarray, N: np.ndarray,
                        remaining: np.ndarray, st: dict) -> np.ndarray:
        """Gavel's finish-time fairness (finish_time_fairness.py:53-120): minimise the worst
        rho_j = (age_j + remaining_j / tau_j) / (isolated time so far + remaining_j / tau_iso_j),
        where the isolated time so far accumulates, at each computation, the progress made since
        the last one at the isolated throughput of that time (lines 81-92), and tau_iso is the
        throughput under Gavel's isolated share (isolated.py:41-46)."""
        j = snap.jobs
        tau_iso = np.maximum((T * alloc.isolated_share(z, N)).sum(axis=1), 1e-12)
        cum = st.setdefault("ftf_iso", {})
        prev = st.get("ftf_prev", {})
        rows = j.rows.tolist()
        for i, r in enumerate(rows):
            if r in prev:
                rem0, iso0 = prev[r]
                cum[r] = cum.get(r, 0.0) + (rem0 - remaining[i]) / iso0
        st["ftf_prev"] = {r: (remaining[i], tau_iso[i]) for i, r in enumerate(rows)}
        for r in [r for r in cum if r not in st["ftf_prev"]]:
            del cum[r]
        iso_time = np.array([cum.get(r, 0.0) for r in rows]) + remaining / tau_iso
        if self.solution == "central":
            return central.central_min_max_ratio(T, z, N, remaining, iso_time, snap.now - j.submit)[0]
        if self.solution == "ecos":    # Gavel falls back to the isolated share if ECOS fails
            X = ecos.ecos_min_max_ratio(T, z, N, remaining, iso_time, snap.now - j.submit,
                                        snap.cluster.types)
            return alloc.isolated_share(z, N) if X is None else X
        X, rho = alloc.min_max_ratio(T, z, N, num=remaining, den=iso_time,
                                     base=snap.now - j.submit, guess=st.get("rho"))
        st["rho"] = rho
        return X

    def _packed_allocation(self, snap: Snapshot, T: np.ndarray, z: np.ndarray, N: np.ndarray,
                           coef: np.ndarray) -> PackedAllocation:
        j = snap.jobs
        names = [s.job_type for s in j.specs]
        kinds = {name: i for i, name in enumerate(sorted(set(names)))}
        kind = np.array([kinds[nm] for nm in names], dtype=np.int64)
        types = snap.cluster.types

        def pair_rate(a: int, b: int, k: int) -> float:
            if z[a] > 1 and not self.pack_multi_gpu:   # Gavel's table: 0 for every such pair
                return 0.0
            return snap.perf.shared_rate(j.specs[a], j.specs[b], types[k], int(z[a]), mode="pack")
        from quanta.policies.gavel.space_sharing import packed_max_min
        return packed_max_min(T, z, N, coef, kind, pair_rate)

    def _entity_weights(self, snap: Snapshot) -> np.ndarray:
        """Each entity (queue or user) has weight 1, split evenly among its active jobs."""
        names = [getattr(s, self.entity) for s in snap.jobs.specs]
        _, inv, counts = np.unique(np.array(names, dtype=object).astype(str), return_inverse=True,
                                   return_counts=True)
        return 1.0 / counts[inv]

    # -- the round ----------------------------------------------------------------------------
    def _type_order(self, snap: Snapshot, st: dict) -> np.ndarray:
        """Type indexes, fastest first (ties: cluster order); shuffled each round if asked."""
        types = snap.cluster.types
        order = sorted(range(len(types)), key=lambda k: -snap.cluster.gpu_types[types[k]].speed)
        if self.type_order == "shuffle":      # Gavel: a fresh list shuffled by one RNG per round
            rng = st.setdefault("type_rng", random.Random(self.seed + 5))
            rng.shuffle(order)
        return np.array(order, dtype=np.int64)

    def _state(self, snap: Snapshot, K: int, width: int) -> dict:
        """The policy's state, per driver row in arrays (rows index them directly): time received
        per type (and mode) and time active since the last reset, deficits, the allocation X (and
        which rows it covers), each row's progress at the last decision and its rate per type."""
        rows = snap.jobs.rows
        st = snap.state
        if not st or st.get("v") != 2:        # (a state of another layout: start afresh)
            st = {"v": 2, "t": None, "key": None, "reset_t": None}
        need = max(len(getattr(snap.jobs, "all_specs", ())), int(rows.max()) + 1 if len(rows) else 0)
        have = len(st["elapsed"]) if "elapsed" in st else -1
        if need > have:                       # first call, or a table that grew (runtime)
            size = max(need, 2 * have, 0)

            def grown(a, shape, fill=0.0):
                out = np.full(shape, fill, dtype=a.dtype if a is not None else float)
                if a is not None:
                    out[:len(a)] = a
                return out
            st["recv"] = grown(st.get("recv"), (size, width))
            st["elapsed"] = grown(st.get("elapsed"), size)
            st["deficit"] = grown(st.get("deficit"), (size, K))
            st["X"] = grown(st.get("X"), (size, K))
            st["in_X"] = grown(st.get("in_X"), size, False) if "in_X" in st else \
                np.zeros(size, dtype=bool)
            st["progress"] = grown(st.get("progress"), size)
            st["rate"] = grown(st.get("rate"), (size, K), np.nan)
            st["job_time"] = grown(st.get("job_time"), (size, K))
            st["seen"] = grown(st.get("seen"), size, False) if "seen" in st else \
                np.zeros(size, dtype=bool)
        if "type_time" not in st:
            st["type_time"] = np.zeros(K)
        return st

    def decide(self, snap: Snapshot) -> Decision:
        if self.packed and self.programme == "pairs":
            return self._pairs_decide(snap)
        j = snap.jobs
        K = len(snap.cluster.types)
        width = 2 * K if self.packed else K        # packed: time alone, then time packed, per type
        st = self._state(snap, K, width)
        rows = j.rows
        recv, el, Xs = st["recv"], st["elapsed"], st["X"]
        # credit the round that just ended: time held per type (and mode), time active
        by_progress = self.credit == "progress" and not self.packed
        if st["t"] is not None:
            dt = snap.now - st["t"]
            run = np.flatnonzero(j.running)
            if len(run):
                rr = rows[run]
                col = j.gtype[run].astype(np.int64)
                if self.packed:
                    col = col + np.where(j.partner[run] >= 0, K, 0)
                got = np.full(len(run), dt)
                if by_progress:   # the time its steps took at its rate: Gavel's execution time
                    rate = st["rate"][rr, col]
                    for m in np.flatnonzero(np.isnan(rate)).tolist():
                        i = int(run[m])
                        rate[m] = st["rate"][rr[m], col[m]] = snap.perf.rate(
                            j.specs[i], snap.cluster.types[col[m]], int(j.req[i]))
                    pos = rate > 0
                    got[pos] = (j.progress[run[pos]] - st["progress"][rr[pos]]) / rate[pos]
                recv[rr, col] += got
            el[rows] += np.minimum(dt, snap.now - j.submit)
        # recompute X when jobs or capacity changed, at most every recompute_every seconds (Gavel
        # counts a reset at time 0 as none: scheduler.py:2371-2374)
        key = (rows.tobytes(), snap.capacity.tobytes())
        last = st["reset_t"]
        every = 0.0 if self.packed else self.recompute_every   # packed: at every change
        # a round in which nothing ran forces it (Gavel, once every job has arrived:
        # scheduler.py:1274-1279; a policy cannot tell whether more will come)
        idle = not j.running.any()
        # the rows whose per-row state (received time, time active, deficit, X, progress) may
        # be nonzero: those of every decision since the allocation was last computed, this
        # one's included (None: any row, as in a state that does not say). Only theirs are
        # cleared below, so that a decision costs what its active jobs do, not what every job of
        # a long trace does.
        touched = st.get("touched")
        if touched is not None:
            touched = _sorted_set(np.concatenate((touched, rows)))
        some = slice(None) if touched is None else touched
        if st["key"] != key and (every <= 0 or not last or idle or snap.now - last >= every):
            if self.reset_received:        # Gavel's _reset_time_run_so_far
                since = snap.now - (last or 0.0)
                st["deficit"][rows] = st["deficit"][rows] + Xs[rows] * since - recv[rows, :K]
                recv[some] = 0.0
                el[some] = 0.0
            A = self.allocation(snap, st)
            if self.decimals >= 0 and not self.packed:
                A = np.clip(np.round(A, self.decimals), 0.0, 1.0)
            st["key"], st["reset_t"] = key, snap.now
            Xs[some] = 0.0
            st["in_X"][some] = False
            if self.packed:
                st["A"] = A
            else:
                Xs[rows] = A
                st["in_X"][rows] = True
            if touched is None:
                dead = np.ones(len(el), dtype=bool)
                dead[rows] = False
            else:
                dead = np.setdiff1d(touched, rows, assume_unique=True)
            recv[dead] = 0.0
            el[dead] = 0.0
            st["deficit"][dead] = 0.0
            st["touched"] = _sorted_set(rows)
        elif touched is not None:
            st["touched"] = touched
        st["t"] = snap.now
        if by_progress:
            st["progress"][some] = 0.0
            st["progress"][rows] = j.progress
        received = recv[rows]
        elapsed = el[rows]
        if self.packed:
            return self._packed_round(snap, st["A"], received, elapsed, st)
        X = Xs[rows]
        if self.priority == "cluster":       # Sia's simulator: X / (job's time / type's time)
            prio = self._cluster_priority(st, rows, X)
        elif self.priority == "smoothed":      # Gavel: X / (half a round + time received)
            prio = X / (0.5 * self.interval + received)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(elapsed[:, None] > 0, received / elapsed[:, None], 0.0)
                prio = np.where(share > 0, X / share, X * BIG)
        if self.priority == "cluster":       # (its deficits are commented out: gavel.py:470-477)
            deficit = np.zeros_like(X)
        elif self.reset_received:
            deficit = st["deficit"][rows]
        else:
            deficit = X * elapsed[:, None] - received
        fifo = self.objective == "fifo"
        picked: list[int] | None = [] if self.workers == "gavel" else None
        gpus, gtype = priority_round(
            X, j.rates, j.req, snap.capacity, prio, deficit, rows,
            type_order=self._type_order(snap, st) if self.queues == "per_type" else None,
            backfill=self.backfill and not fifo,
            eps=1e-6 if self.solution == "vertex" else 0.0,
            allocated=st["in_X"][rows] if self.hold_unallocated else None,
            tie_types=self._tie_types(snap) if self.tie_types else None, picked=picked)
        if self.priority == "cluster":      # the round is credited as it is decided
            on = gpus > 0
            st["job_time"][rows[on], gtype[on]] += self.interval
            np.add.at(st["type_time"], gtype[on], self.interval)
        dec = Decision(gpus, gtype, state=st)
        if picked is not None:
            dec.exact = gavel_workers(snap, gpus, gtype, picked)
        return dec

    def _cluster_priority(self, st: dict, rows: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Sia's simulator's priorities (gavel.py:111-125, 249-274): a job seen for the first
        time starts at half a round on every type, and adds as much to each type's total."""
        new = rows[~st["seen"][rows]]
        if len(new):
            st["seen"][new] = True
            st["job_time"][new] = 0.5 * self.interval
            st["type_time"] += 0.5 * self.interval * len(new)
        return X * st["type_time"][None, :] / st["job_time"][rows]

    def _tie_types(self, snap: Snapshot) -> np.ndarray:
        types = list(snap.cluster.types)
        named = [types.index(t) for t in self.tie_types.split("/") if t in types]
        return np.array(named + [k for k in range(len(types)) if k not in named], dtype=np.int64)

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
