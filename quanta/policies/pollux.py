"""Pollux (OSDI'21): co-adaptive cluster scheduling for goodput.

Every round (60 s) each job gets a GPU count (and type) maximising the cluster fitness
FITNESS_p = (mean_j SPEEDUP_j^p)^(1/p), p = -1 by default (fairness; p = 1 is plain efficiency):
- SPEEDUP_j(A) = goodput(A) / goodput(1 GPU of the job's best type), goodput from the
  performance model, which picks the best batch size and accumulation steps for the allocation
  (Pollux's per-job agent: quanta/perf/goodput.py);
- re-allocation penalty: an allocation other than the current one has its speedup multiplied by
  REALLOC = max(age - restarts * delta, 0) / (age + delta), delta = 30 s (Pollux's simulator);
- a job may use up to twice the largest GPU count it has trained on (1 GPU before it ran:
  nothing is profiled yet), as Pollux's simulator caps replicas at max(2 x the largest profiled
  so far, 1), and at most `max_gpus`; a count counts once the job made progress on it (its
  checkpoint restored), as profile points are added only while a job trains;
- batch size and accumulation re-tuned for every allocation (jobs run with the plan
  ADAPTIVE_BATCH); goodputs at each job's current training phase.
Search: exact, by the integer programme shared with Sia (quanta/policies/config_ilp.py) over
every GPU count within those limits, instead of the paper's genetic algorithm (NSGA-II); with
p < 0 a job without GPUs makes the fitness 0, so admission (lambda = 100 per job) comes first.
On a heterogeneous cluster Pollux (like Sia's `pollux_unaware` baseline) does not tell GPU
types apart: it models every type as the cluster's most common one (`aware=true` lifts that).
Left out by default: Pollux's "at most one distributed job per node" constraint and its exact
node-level replica matrix (placement is the core's consolidating placement).

The Pollux that Sia's simulator runs as its baseline (sia-simulator @ aaf7a0d; --world sia-sim
turns each of these on; bench/anchors/sia.md section 13 has each one's measured effect):
- `learn`: the policy knows a job only from what it measured where it trained: Pollux's own
  throughput fit of those points (one model for all GPU types: the unaware simulator merges the
  profiles, job.py:392-412), the gradient statistics of its latest step, the batch limits of the
  modelled type; a job that has not trained yet is worth r / fair-share GPUs
  (pollux_unaware.py:253-255);
- `fair_share`: a speedup is relative to the job's goodput at its fair share (one node,
  ceil(GPUs / jobs) replicas), one node's worth of GPUs = 1, and the power mean is over
  speedup + 1e-3 with every job in it (a job without GPUs counts 1e-3) (pollux_unaware.py:249-260,
  319-341);
- `type_cap`: a job has at most as many GPUs as the smallest GPU type
  (multi_simulator_unaware.py:36-41: 16 on Sia's cluster);
- `first_start_counted`: the world charges a job's first start as a restart, so the snapshot's
  restart count includes it; Pollux's does not (job.py:537-542), so one is taken off;
- `search=ga`: Pollux's genetic algorithm over virtual nodes instead of the exact programme
  (quanta/policies/pollux_ga.py; `population`, `generations`, `seed`);
- `carry=position`: each round's search starts from the previous round's Pareto front with its
  rows handed to this round's jobs by position among the jobs of both rounds, as the reference
  does although it re-sorts its jobs by attained service every round, so that two jobs that
  swapped places start from each other's allocations (pollux_unaware.py:65-85, 140-143);
  `carry=job` (default) gives each job its own row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.errors import QuantaError
from quanta.perf.base import ADAPTIVE_BATCH, rate_with
from quanta.perf.pollux_online import MERGED, pollux_goodput, record_trained
from quanta.policies.base import INF, MAX_S, MAX_SEED, POWER, Policy, require
from quanta.policies.config_candidates import (
    Candidates,
    RateMemo,
    kept_candidates,
    kept_rates,
    restart_factor,
)
from quanta.policies.config_ilp import (
    TIES,
    Warm,
    decide_configs,
)
from quanta.policies.pollux_ga import (
    FLOOR,
    MAX_NODES,
    Problem,
    VirtualNodes,
    keep_one_type,
    nsga2,
)
from quanta.policies.registry import register

ADMIT = 100.0


@register("pollux", "Pollux: goodput-aware GPU counts and batch sizes each round, fitness = power "
                    "mean of speedups (p = -1), re-allocation penalty; exact ILP search")
@dataclass
class Pollux(Policy):
    interval: float = 60.0
    p: float = -1.0
    restart_delay: float = 30.0
    max_gpus: int = 64
    aware: bool = False      # Pollux is heterogeneity-unaware: every type looks like the main one
    # seconds HiGHS' MILP may take (where the exact search and the rounded relaxation give no
    # answer); inf: no limit. A limit reached makes the answer depend on the machine's speed,
    # so that runs are no longer repeatable bit for bit (10 s before 2026-12-07)
    time_limit: float = INF
    # the configuration programme is re-solved from the last round's basis, its answer taken
    # where it is certainly a fresh solve's (config_ilp._certified: the results are the fresh
    # solves'); warm_start=true takes it wherever (faster still; where optima tie it may pick
    # another of them)
    warm_start: bool = False
    # who picks among optimal allocations that tie (config_ilp.py): "search", Quanta's exact
    # search, in its order; "milp", HiGHS' MILP, as before 2026-11-26 (sia-sim pins it)
    ties: str = "search"
    # -- the reference's semantics (Sia's simulator's Pollux; --world sia-sim turns them on) ------
    learn: bool = False           # know a job only from the points it trained on (online fit)
    fair_share: bool = False      # speedups relative to the fair share, Pollux's 1e-3 floor
    type_cap: bool = False        # at most the smallest GPU type's GPUs per job
    first_start_counted: bool = False   # the snapshot's restart count includes the first start
    search: str = "ilp"           # "ilp" (exact) or "ga" (Pollux's genetic algorithm)
    seed: int = 0                 # the genetic algorithm's random stream
    population: int = 100
    generations: int = 100
    # how the previous round's front seeds this round's search: "job" (each job's row from its
    # own row) or "position" (the reference's pairing by position among the jobs of both
    # rounds, which re-sorts its jobs by attained service every round)
    carry: str = "job"

    def __post_init__(self) -> None:
        if self.search not in ("ilp", "ga"):
            raise QuantaError(f"pollux: search must be ilp or ga, not '{self.search}'",
                              field="--policy")
        if self.ties not in TIES:
            raise QuantaError(f"pollux: ties must be search or milp, not '{self.ties}'",
                              field="--policy")
        if self.carry not in ("job", "position"):
            raise QuantaError(f"pollux: carry must be job or position, not '{self.carry}'",
                              field="--policy")
        if self.learn and self.aware:
            raise QuantaError("pollux: learn=true is the heterogeneity-unaware Pollux of Sia's "
                              "simulator (one learned model for every GPU type); use aware=false",
                              field="--policy")
        # (speedup ** p: past 100 it overflows to inf, which no solver takes; near 0 every
        # configuration is worth 1 and none is chosen: nothing runs)
        require(0.01 <= abs(self.p) <= 100, "pollux", "p", self.p, POWER)
        require(0 <= self.restart_delay <= MAX_S, "pollux", "restart_delay", self.restart_delay,
                "a number of seconds from 0 to 1e15")
        require(self.max_gpus >= 1, "pollux", "max_gpus", self.max_gpus, "1 or more")
        require(0 < self.time_limit <= INF, "pollux", "time_limit", self.time_limit,
                "a positive number of seconds, or inf (none)")
        require(0 <= self.seed <= MAX_SEED, "pollux", "seed", self.seed,
                "0 to 2^63 - 1")
        require(self.population >= 1, "pollux", "population", self.population, "1 or more")
        require(self.generations >= 0, "pollux", "generations", self.generations, "0 or more")

    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        n = len(j)
        cl = snap.cluster
        st = snap.state if snap.state else {"seen": {}}
        seen: dict[int, int] = st.setdefault("seen", {})
        # a GPU count counts once the job has made progress on it (its restore over): Pollux's
        # limit comes from its profiled placements (job.py max_profiled_replicas), and profile
        # points are added only while a job trains
        trained = j.running & (j.resume_at < snap.now)
        for i in np.flatnonzero(trained).tolist():
            r = int(j.rows[i])
            seen[r] = max(seen.get(r, 0), int(j.gpus[i]))
        if self.learn:
            nodes = None
            if self.search == "ga":     # its placement may span more nodes than it needs
                nodes = np.array([len(np.unique(cl.gpu_node[g])) for g in j.placement])
            record_trained(snap, st, trained, merge_types=True, nodes=nodes)
        main = int(np.argmax(cl.capacity))           # the type an unaware Pollux models
        cap = np.array([self._cap(snap, seen.get(int(j.rows[i]), 0)) for i in range(n)],
                       dtype=np.int64)
        if self.search == "ga":
            return self._decide_ga(snap, st, main, cap)
        c = self._candidates(snap, st, main, cap)
        realloc = restart_factor(snap, self.restart_delay, grace=False,
                                 first_start_counted=self.first_start_counted)
        if self.fair_share:
            base = self._fair_goodputs(snap, st, main)
            speedup = c.rate / np.maximum(base[c.job], 1e-300) * self._scale(snap)
            speedup = np.where(c.current(snap), speedup, speedup * realloc[c.job])
            if self.p < 0:
                cost = (speedup + FLOOR) ** self.p - FLOOR ** self.p
            elif self.p > 0:
                cost = -((speedup + FLOOR) ** self.p - FLOOR ** self.p)
            else:
                cost = -(np.log(np.maximum(speedup, FLOOR)) - np.log(FLOOR))
        else:
            base = np.zeros(n)
            np.maximum.at(base, c.job, np.where(c.count == 1, c.rate, 0.0))   # best 1-GPU goodput
            speedup = c.rate / np.maximum(base[c.job], 1e-12)
            speedup = np.maximum(np.where(c.current(snap), speedup, speedup * realloc[c.job]),
                                 1e-4)
            term = speedup ** self.p
            cost = (term if self.p < 0 else -term) - ADMIT
        return decide_configs(snap, c, cost, st, self.time_limit,
                              dict.fromkeys(range(n), ADAPTIVE_BATCH),
                              Warm.of(self, snap, exact=not self.warm_start),
                              ties=self.ties)

    def _candidates(self, snap: Snapshot, st: dict, main: int, cap: np.ndarray) -> Candidates:
        """Every job's (GPU type, count) up to its cap and the type's GPUs, with the goodput the
        policy expects there (as if on the main type unless `aware`); the model's rates kept
        between rounds per job (`RateMemo`), the learned ones computed each round."""
        j = snap.jobs
        cl = snap.cluster
        memo = None if self.learn else RateMemo.of(self, snap)
        if memo is not None:
            # nothing a job's candidates come of changed since the last round (the jobs, their
            # specs, allowed types and caps, the capacity; `main` is the cluster's, fixed per
            # memo): that round's candidates
            kept = memo.unchanged((j.rows.tobytes(), j.allowed.tobytes(), cap.tobytes(),
                                   snap.capacity.tobytes()), j.specs)
            if kept is not None:
                return kept
        rows: list[int] = []
        blocks: list[np.ndarray] = []
        fits: dict[tuple, bool] = {}        # (learn: this round's; else the memo's)
        for i, spec in enumerate(j.specs):
            allowed = np.flatnonzero(j.allowed[i]).tolist()
            tops = tuple(min(int(cap[i]), int(snap.capacity[k])) for k in allowed)
            if self.learn:
                counts = np.arange(1, int(cap[i]) + 1)
                good = self._goodputs(snap, st, i, main, counts,
                                      [cl.min_nodes(main, int(c)) for c in counts]).tolist()
                out = np.array([(k, cnt, g) for k, top in zip(allowed, tops)
                                for cnt, g in zip(counts.tolist(), good)
                                if cnt <= top and g > 0 and _runs_on(snap, spec, k, cnt, fits)],
                               dtype=float).reshape(-1, 3)
            else:
                out = kept_rates(memo, int(j.rows[i]), spec, (tuple(allowed), tops),
                                 self._rated, snap, main, spec, allowed, tops,
                                 fits if memo is None else memo.fits)
            rows.append(i)
            blocks.append(out)
        return kept_candidates(memo, rows, blocks)

    def _rated(self, snap: Snapshot, main: int, spec, allowed: list[int],
               tops: tuple[int, ...], fits: dict) -> list[tuple[int, int, float]]:
        """The model's rate of a job on each allowed type (as if on `main` unless `aware`) at
        each GPU count up to the type's top. Unaware, a count the job cannot run at on the type
        itself is left out too (`_runs_on`; before, such a choice stopped the run: a ResNet-50 on
        2 K80s of gavel-108, synthetic:3:300); with `learn` the same (`_candidates`; before, it
        stopped `pollux:search=ilp` under sia-sim on synthetic:5:39, v100:1x8,k80:2x4)."""
        cl = snap.cluster
        out = []
        for k, top in zip(allowed, tops):
            seen_as = k if self.aware else main
            for cnt in range(1, top + 1):
                rate = rate_with(snap.perf, spec, cl.types[seen_as], cnt,
                                 cl.min_nodes(seen_as, cnt), True, ADAPTIVE_BATCH)
                if rate <= 0:
                    continue
                if seen_as != k and not _runs_on(snap, spec, k, cnt, fits):
                    continue
                out.append((k, cnt, rate))
        return out

    # -- what the policy believes -------------------------------------------------------------
    def _cap(self, snap: Snapshot, most: int) -> int:
        cap = min(max(2 * most, 1), self.max_gpus)
        if self.type_cap:
            cap = min(cap, int(np.min(snap.cluster.capacity)))
        return cap

    def _goodputs(self, snap: Snapshot, st: dict, i: int, main: int, counts, nodes) -> np.ndarray:
        """Goodput the policy expects of job i at each (GPU count, node count), as if on the
        modelled type: its learned model with `learn` (a job that never trained: r, the
        reference's r / fair share up to the fair-share divisor), else the performance model."""
        j = snap.jobs
        cl = snap.cluster
        spec = j.specs[i]
        counts = np.asarray(counts, dtype=float)
        nodes = np.asarray(nodes, dtype=float)
        if self.learn:
            row = int(j.rows[i])
            fit = st.get("fits", {}).get((row, MERGED))
            grad = st.get("grad", {}).get(row)
            prof = snap.perf.goodput_profile(spec, cl.types[main])
            if fit is None or grad is None or prof is None:
                return counts.copy()
            return pollux_goodput(fit, prof.init_batch, nodes, counts, prof.max_batch,
                                  prof.min_local, prof.max_local, grad)
        return np.array([rate_with(snap.perf, spec, cl.types[main], int(c), int(nd),
                                   int(nd) <= cl.min_nodes(main, int(c)), ADAPTIVE_BATCH)
                         for c, nd in zip(counts.tolist(), nodes.tolist())])

    def _fair_goodputs(self, snap: Snapshot, st: dict, main: int) -> np.ndarray:
        """Each job's goodput at its fair share: ceil(GPUs / jobs) replicas on one node
        (pollux_unaware.py:247-260); for a job the policy knows nothing of, its r is divided by
        that count."""
        n = len(snap.jobs)
        fair = float(np.ceil(snap.capacity.sum() / max(n, 1)))
        out = np.empty(n)
        for i in range(n):
            out[i] = float(self._goodputs(snap, st, i, main, [fair], [1.0])[0])
        return out

    def _scale(self, snap: Snapshot) -> float:
        """One node's worth of GPUs has speedup 1: the dominant share x the virtual nodes
        (pollux_unaware.py:321-324) = 1 / the smallest node's GPUs."""
        return 1.0 / float(np.min(snap.cluster.node_gpus))

    # -- Pollux's genetic algorithm over virtual nodes --------------------------------------------
    def _decide_ga(self, snap: Snapshot, st: dict, main: int, cap: np.ndarray) -> Decision:
        j = snap.jobs
        n = len(j)
        cl = snap.cluster
        dec = Decision.empty(snap)
        dec.state = st
        if n == 0:
            return dec
        rng = st.get("rng")
        if rng is None:
            rng = st["rng"] = np.random.default_rng(self.seed)
        vn = VirtualNodes(cl, snap.node_up)
        N = len(vn)
        order = ga_order(j)
        rows = j.rows[order].astype(np.int64)
        cap_o = cap[order]
        held = j.placement
        stored: dict[int, np.ndarray] = st.get("vnodes", {})
        base = np.zeros((n, N), dtype=np.int64)
        for a, i in enumerate(order.tolist()):
            base[a] = self._vnode_row(vn, held[i], stored.get(int(rows[a])))
        # speedup tables over (virtual nodes used, replicas)
        total = int(vn.res.sum())
        fair = float(np.ceil(total / n))
        R = int(cap_o.max())
        table = np.zeros((n, MAX_NODES + 1, R + 1))
        for a, i in enumerate(order.tolist()):
            c = int(cap_o[a])
            rr, nn = np.meshgrid(np.arange(1, c + 1), np.arange(1, MAX_NODES + 1))
            ok = nn <= rr
            rr, nn = rr[ok], nn[ok]
            good = self._goodputs(snap, st, i, main, rr, nn)
            fair_g = float(self._goodputs(snap, st, i, main, [fair], [1.0])[0])
            table[a, nn, rr] = good / max(fair_g, 1e-300)
        restarts = np.maximum(j.restarts - (1 if self.first_start_counted else 0), 0)[order]
        age = (snap.now - j.submit)[order]
        d = self.restart_delay
        factor = np.maximum(age - restarts * d, 0.0) / (age + d)
        usable = j.allowed[order][:, vn.type]          # (a type a job may not use: no replicas)
        prob = Problem(table, base, cap_o, vn.res, factor, self.p, N / max(total, 1),
                       None if usable.all() else usable)
        # start from the previous round's Pareto front, the jobs carried over (else the
        # current allocation)
        prev = st.get("front")
        if prev is not None:
            prev_rows, prev_x = prev
            init = np.zeros((len(prev_x), n, N), dtype=np.int64)
            src, dst = _carried(prev_rows, rows, self.carry)
            init[:, dst] = prev_x[:, src]
        else:
            init = base[None].copy()
        X, F = nsga2(rng, prob, init, self.population, self.generations)
        st["front"] = (rows, X)
        best = X[int(np.argmin(F[:, 0]))]
        # a job on virtual nodes of several types keeps its majority type's; the rest idles
        alloc = np.array([keep_one_type(best[a], vn.type, cl.types) for a in range(n)])
        # and one left with a count it cannot run at on that type keeps the most replicas it
        # runs at there, from its first virtual nodes (the search values every type as the
        # main one: a ResNet-50 at batch 128 given 2 K80s stopped the run), or none
        fits: dict[tuple, bool] = {}
        for a, i in enumerate(order.tolist()):
            cnt = int(alloc[a].sum())
            k = int(vn.type[np.argmax(alloc[a] > 0)])
            if cnt and not _runs_on(snap, j.specs[i], k, cnt, fits):
                keep = next((c for c in range(cnt - 1, 0, -1)
                             if _runs_on(snap, j.specs[i], k, c, fits)), 0)
                alloc[a] = np.minimum(alloc[a], np.maximum(keep - (np.cumsum(alloc[a])
                                                                   - alloc[a]), 0))
        st["vnodes"] = {int(rows[a]): alloc[a] for a in range(n) if alloc[a].any()}
        self._to_gpus(snap, vn, order, alloc, dec)
        return dec

    @staticmethod
    def _vnode_row(vn: VirtualNodes, gpus: np.ndarray, stored: np.ndarray | None) -> np.ndarray:
        """A job's replicas per virtual node now: the policy's own last choice if the job still
        holds exactly that many GPUs on each node, else counted from its GPUs."""
        counted = np.bincount(vn.gpu_vnode[gpus], minlength=len(vn)) if len(gpus) else \
            np.zeros(len(vn), dtype=np.int64)
        if stored is not None and len(stored) == len(vn):
            per_node = np.bincount(vn.node, weights=stored, minlength=vn.node.max() + 1)
            now = np.bincount(vn.node, weights=counted, minlength=vn.node.max() + 1)
            if np.array_equal(per_node, now):
                return stored.astype(np.int64)
        return counted.astype(np.int64)

    @staticmethod
    def _to_gpus(snap: Snapshot, vn: VirtualNodes, order: np.ndarray, alloc: np.ndarray,
                 dec: Decision) -> None:
        """Exact GPUs for the chosen replicas, node by node: a job keeps the GPUs it holds on a
        node up to its new count there (moving between the virtual halves of one node is no
        move: Sia's simulator sees the same nodes), the rest come from that node's other GPUs."""
        cl = snap.cluster
        j = snap.jobs
        held = j.placement
        n_nodes = len(cl.node_gpus)
        want = np.zeros((len(order), n_nodes), dtype=np.int64)
        for a in range(len(order)):
            np.add.at(want[a], vn.node, alloc[a])
        taken = np.zeros(cl.num_gpus, dtype=bool)
        got: list[list[int]] = [[] for _ in range(len(order))]
        for a, i in enumerate(order.tolist()):
            for nd in np.flatnonzero(want[a]).tolist():
                mine = [g for g in held[i].tolist() if cl.gpu_node[g] == nd][:want[a, nd]]
                got[a].extend(mine)
                taken[mine] = True
        for a in range(len(order)):
            for nd in np.flatnonzero(want[a]).tolist():
                need = int(want[a, nd]) - sum(1 for g in got[a] if cl.gpu_node[g] == nd)
                if need <= 0:
                    continue
                lo = int(cl.node_first_gpu[nd])
                free = [g for g in range(lo, lo + int(cl.node_gpus[nd])) if not taken[g]][:need]
                got[a].extend(free)
                taken[free] = True
        for a, i in enumerate(order.tolist()):
            if not got[a]:
                continue
            gpus = np.array(sorted(got[a]), dtype=np.int64)
            dec.gpus[i] = len(gpus)
            dec.gpu_type[i] = int(cl.gpu_type_idx[gpus[0]])
            dec.exact[i] = gpus
            dec.plans[i] = ADAPTIVE_BATCH


def ga_order(jobs) -> np.ndarray:
    """The snapshot's jobs in the order Pollux's search takes them: least attained service
    first, then oldest (pollux_unaware.py:140-143)."""
    return np.lexsort((jobs.rows, jobs.submit, jobs.attained))


def _carried(prev_rows: np.ndarray, rows: np.ndarray, carry: str) -> tuple[np.ndarray, np.ndarray]:
    """(rows of the previous front, rows of this round's) that seed each other: by job, or as
    the reference pairs them (pollux_unaware.py:65-85 `_adapt_prev_states`): the jobs of both
    rounds in the previous round's order against the same jobs in this round's order. Its jobs
    are sorted by attained service every round (lines 140-143), so wherever two of them swapped
    places, each starts the search from the other's allocations. (Pollux's own policy sorts by
    creation time, where the two orders agree.)"""
    before = {r: a for a, r in enumerate(prev_rows.tolist())}
    dst = [a for a, r in enumerate(rows.tolist()) if r in before]
    if carry == "position":
        now = set(rows.tolist())
        src = [a for a, r in enumerate(prev_rows.tolist()) if r in now]
    else:
        src = [before[r] for r in rows.tolist() if r in before]
    return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)


def _runs_on(snap: Snapshot, spec, k: int, cnt: int, fits: dict) -> bool:
    """Whether a job runs on `cnt` GPUs of type index `k` at all (the model's rate there > 0: it
    fits). Unaware, Pollux values every type as its main one, so a count the job cannot run at
    on the type itself is left out of its choices: a job that cannot start there would fail (a
    ResNet-50 at batch 128 runs on 1 K80 but not on 2). `fits` keeps the answers per kind of job
    (job type, batch size, plan), type and count."""
    key = (spec.job_type, spec.batch_size, spec.plan, k, cnt)
    ok = fits.get(key)
    if ok is None:
        cl = snap.cluster
        ok = fits[key] = snap.perf.rate(spec, cl.types[k], cnt, cl.min_nodes(k, cnt), True) > 0
    return ok
