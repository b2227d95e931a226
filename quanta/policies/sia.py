"""Sia (SOSP'23): per round, one configuration (GPU type, GPU count) per job from an ILP over
normalised goodputs, heterogeneity- and restart-aware.

- configurations per type: single-node powers of two up to the node size, then whole nodes;
- a job may use up to twice the largest GPU count it has run with on any type ("scale up by at
  most 2x", and no more than its application's max batch / smallest per-GPU batch: 64 to 1,024
  for the bundled ones, binding only with `max_gpus` above 64); a job that never ran gets 1 GPU
  (Sia knows no throughput of it before its first run, sia.py offers only the scale-unit
  configuration then), at most `max_gpus`; the largest count
  is shared across GPU types as in the paper's runs (`--share_max_replicas`, run_experiment.sh;
  `share_max=false` keeps one per type, the simulator's default flag); a rigid job (with
  `adaptive=false`, or a spec with min_gpus = max_gpus) only its requested count;
- goodput of each (job, configuration) from the performance model at the job's current training
  phase (for Pollux/Sia applications: throughput x statistical efficiency at the best batch
  size; jobs run with the plan ADAPTIVE_BATCH, i.e. Sia re-tunes their batch size, unless rigid);
  normalised by the job's smallest non-zero goodput, floored at 1e-4, raised to p (default
  -0.5), capped at 3000;
- restart penalty: for a job holding GPUs, every configuration other than its current one is
  scaled by r = max(age - restarts * delta, 0) / (age + delta), none while age < delta; a
  waiting job (new or preempted) is not penalised (sia.py:890-900);
- ILP: binary x_jc, one configuration per job, GPUs per type within capacity; for p < 0
  minimise sum A x + lambda_n * (unallocated jobs), lambda_n = 1.1; for p > 0 maximise it, with
  lambda_n = -1.1 (Sia's simulator_config.py: sign(lambda_n) != sign(p), |lambda_n| > 1 so that
  a job's smallest configuration, A = 1, beats leaving it out); solved exactly
  (quanta/policies/config_ilp.py: the LP relaxation, then a branch and bound bounded by its
  duals, HiGHS' MILP only past the search's limits); `ties` says who picks among optimal
  allocations (Sia's simulator: CBC's MILP, `ties=milp` under sia-sim).
Placement, lease extension (unchanged jobs keep their GPUs) and restart costs are the core's.
Not modelled: hybrid-parallel jobs, whose GPU counts are multiples of a scale unit (GPUs per
pipeline replica; the artifact's gpt_pmp, whose profile is left out: every bundled application
has scale unit 1, quanta/data/profiles/sia_pollux/PROVENANCE.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.errors import QuantaError
from quanta.perf.base import ADAPTIVE_BATCH, rate_with
from quanta.perf.goodput import adaptive_batch_up_to
from quanta.perf.pollux_online import pollux_goodput, record_trained
from quanta.policies.base import INF, MAX_S, POWER, Policy, gpu_type_names, require
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
from quanta.policies.registry import register

# Sia's restart penalty per application (seconds "measured on real physical cluster", by job
# name: sia-simulator/sia.py:21-35 get_restart_penalty); 30 s for the others.
RESTART_PENALTY_S = {"deepspeech2": 25.0, "imagenet": 250.0, "cifar10": 30.0, "bert": 120.0,
                     "yolov3": 45.0}
DEFAULT_PENALTY_S = 30.0


def config_counts(node_size: int, capacity: int) -> list[int]:
    """Sia's configuration set for one GPU type: 1, 2, 4, ... up to a node, then whole nodes."""
    out, n = [], 1
    while n < node_size and n <= capacity:
        out.append(n)
        n *= 2
    m = node_size
    while m <= capacity:
        out.append(m)
        m += node_size
    return out


def power_terms(g: np.ndarray, p: float, decimals: int = -1) -> np.ndarray:
    """Sia's objective terms: normalised goodputs raised to p, capped at 3000; with `decimals`
    >= 0 rounded first, as Sia's simulator does (sia.py:908-913: np.round(S ** p, 2))."""
    a = g ** p
    if decimals >= 0:
        a = np.round(a, decimals)
    return np.minimum(a, 3000.0)


LAMBDA_N = 1.1      # |lambda_n|, Sia's simulator_config.sia_default_lambda_n


def replica_cap(snap: Snapshot, spec, k: int, memo: dict[tuple[str, int], int]) -> int:
    """The most replicas a Pollux/Sia application may use on GPU type k: its max batch over its
    smallest per-GPU batch (Sia's max_replicas, ALGORITHMS.md 4b); no cap for other jobs."""
    key = (spec.job_type, k)
    cap = memo.get(key)
    if cap is None:
        profile = getattr(snap.perf, "goodput_profile", None)
        prof = profile(spec, snap.cluster.types[k]) if profile is not None else None
        cap = memo[key] = max(prof.max_batch // max(prof.min_local, 1), 1) if prof else 1 << 30
    return cap


@register("sia", "Sia: per-round ILP over (GPU type, count) configurations of normalised goodput, "
                 "restart penalty, scale-up at most 2x")
@dataclass
class Sia(Policy):
    interval: float = 60.0
    p: float = -0.5
    lambda_n: float | None = None   # per job left out; none: 1.1 for p < 0, -1.1 for p > 0
    restart_delay: float = 30.0   # delta of the restart penalty
    max_gpus: int = 64
    adaptive: bool = True         # jobs may be given any GPU count (Sia's adaptive jobs)
    share_max: bool = True        # the 2x cap from the largest count on any type (else per type)
    batch_cap: bool = False       # estimate goodput with the batch tuned only up to the job's own
                                  # (requested) batch, as Sia's simulator does (sia-sim pins it)
    pin_restoring: bool = False   # a job still restoring its checkpoint keeps its configuration
                                  # (Sia's simulator: preserve_ckpt_allocs; sia-sim pins it)
    penalty_by_app: bool = False  # restart penalty delta per application (RESTART_PENALTY_S, Sia's
                                  # simulator) instead of `restart_delay` for every job
    first_start_counted: bool = False   # the world charges the first start as a restart; Sia's
                                  # count leaves it out (job.py:537-542): one off the snapshot's
    penalise_waiting: bool = False   # also scale down a waiting job's configurations (Quanta
                                  # before 2026-11-25; Sia penalises only jobs holding GPUs)
    decimals: int = -1            # round each cost term to this many decimals (Sia's simulator: 2)
    learn: bool = False           # know a job only from what it measured where it ran (Sia's
                                  # simulator; sia-sim pins it): see `_learned`
    project_order: str = ""       # with `learn`: GPU types to project from, in order ("t4/a100/rtx")
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

    def __post_init__(self) -> None:
        if self.ties not in TIES:
            raise QuantaError(f"sia: ties must be search or milp, not '{self.ties}'",
                              field="--policy")
        require(0.01 <= abs(self.p) <= 100, "sia", "p", self.p, POWER)   # (0: nothing runs)
        if self.project_order:
            self.project_order = gpu_type_names(self.project_order, "sia", "project_order")
        if self.lambda_n is not None:
            require(0 < self.lambda_n * -np.sign(self.p) < INF, "sia", "lambda_n", self.lambda_n,
                    "a number of the sign opposite to p's (Sia's rule: positive for p < 0, negative "
                    "for p > 0), or none")
        require(0 <= self.restart_delay <= MAX_S, "sia", "restart_delay", self.restart_delay,
                "a number of seconds from 0 to 1e15")
        require(self.max_gpus >= 1, "sia", "max_gpus", self.max_gpus, "1 or more")
        require(-1 <= self.decimals <= 15, "sia", "decimals", self.decimals, "-1 (off) to 15")
        require(0 < self.time_limit <= INF, "sia", "time_limit", self.time_limit,
                "a positive number of seconds, or inf (none)")

    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        n = len(j)
        st = snap.state if snap.state else {"seen": {}}
        seen: dict[tuple[int, int], int] = st["seen"]
        # a GPU count counts as run with once the job has made progress on it (its restore over),
        # as Sia's limit comes from the placements the job has been profiled on
        # (job.py max_profiled_replicas: profile points are added only while it trains)
        ran = j.running & (j.resume_at < snap.now)
        grew = False                  # whether `seen` changed this round
        for i in np.flatnonzero(ran).tolist():
            key = (int(j.rows[i]), -1 if self.share_max else int(j.gtype[i]))
            most = max(seen.get(key, 0), int(j.gpus[i]))
            if seen.get(key) != most:
                seen[key] = most
                grew = True
        pinned = (j.running & (j.resume_at > snap.now) if self.pin_restoring
                  else np.zeros(n, dtype=bool))
        if self.learn:
            record_trained(snap, st, ran)
        rigid = [self._rigid(spec) for spec in j.specs]
        c = self._candidates(snap, seen, pinned, st if self.learn else None, rigid, grew)
        # normalise per job, restart penalty, power
        low = np.full(n, np.inf)
        np.minimum.at(low, c.job, c.rate)
        g = np.maximum(c.rate / low[c.job], 1e-4)
        if self.penalty_by_app:
            delta = np.array([RESTART_PENALTY_S.get(s.job_type.lower(), DEFAULT_PENALTY_S)
                              for s in j.specs])
        else:
            delta = self.restart_delay
        r = restart_factor(snap, delta, grace=True, first_start_counted=self.first_start_counted)
        # only a job that holds GPUs pays for leaving them (sia.py:890-900: the factor applies
        # to jobs with a previous allocation; one waiting, new or preempted, starts unpenalised)
        penalised = ~c.current(snap) & ((j.gpus[c.job] > 0) | self.penalise_waiting)
        g = np.where(penalised, np.maximum(g * r[c.job], 1e-4), g)
        A = power_terms(g, self.p, self.decimals)
        sign = 1.0 if self.p < 0 else -1.0     # p < 0: minimise sum of A; p > 0: maximise it
        lambda_n = sign * LAMBDA_N if self.lambda_n is None else self.lambda_n
        cost = sign * A - lambda_n * sign
        plans = dict.fromkeys([i for i, r in enumerate(rigid) if not r], ADAPTIVE_BATCH)
        # a pinned job's only candidate is chosen (sia.py:1021-1028: a constraint X = 1)
        return decide_configs(snap, c, cost, st, self.time_limit, plans,
                              Warm.of(self, snap, exact=not self.warm_start),
                              fixed=pinned[c.job] if pinned.any() else None,
                              ties=self.ties)

    def _rigid(self, spec) -> bool:
        return not self.adaptive or bool(spec.min_gpus and spec.min_gpus == spec.max_gpus)

    def _learned(self, snap: Snapshot, st: dict, i: int, k: int, counts: list[int]
                 ) -> list[float] | None:
        """Goodputs Sia's policy estimates for job i on type k at each GPU count: from the job's
        own fitted model on k, else projected from the first type (in `project_order`) it has a
        model on, times the ratio of 1-GPU throughputs (--project_throughputs, sia.py
        _compute_goodputs_v2, cluster.py compute_throughput_ratios); None when it has run
        nowhere yet (then only the 1-GPU configuration, worth 1 everywhere: sia.py
        nnz_speedups). The batch is tuned up to the job's requested batch with `batch_cap`."""
        j = snap.jobs
        cl = snap.cluster
        row = int(j.rows[i])
        fits = st.get("fits", {})
        spec = j.specs[i]
        src = k if (row, k) in fits else None
        if src is None:
            order = [cl.type_index(t) for t in self.project_order.split("/") if t
                     and t in cl.types] or list(range(len(cl.types)))
            src = next((t for t in order if (row, t) in fits), None)
            if src is None:
                return None
        prof = snap.perf.goodput_profile(spec, cl.types[src])
        if prof is None:
            return None
        mult = 1.0
        if src != k:
            a_k = snap.perf.atomic_throughput(spec, cl.types[k])
            a_s = snap.perf.atomic_throughput(spec, cl.types[src])
            if not a_k or not a_s:
                return None
            mult = a_k / a_s
        per_node = int(cl.type_node_max[src])
        cnt = np.array(counts, dtype=float)
        nodes = np.ceil(cnt / per_node)
        cap = float(spec.batch_size) if (self.batch_cap and spec.batch_size) else prof.max_batch
        cap = max(min(cap, prof.max_batch), prof.init_batch)
        good = pollux_goodput(fits[(row, src)], prof.init_batch, nodes, cnt, cap, prof.min_local,
                              prof.max_local, st["grad"][row])
        return (good * mult).tolist()

    def _candidates(self, snap: Snapshot, seen: dict, pinned: np.ndarray,
                    learned: dict | None = None, rigid_of: list[bool] | None = None,
                    seen_grew: bool = True) -> Candidates:
        """Every job's candidates (`seen_grew`: whether `seen`, the GPUs each job has run
        with, may differ from what the last call was given; True where not known)."""
        j = snap.jobs
        cl = snap.cluster
        memo = RateMemo.of(self, snap)
        if memo is not None and learned is None:
            # nothing a job's candidates come of changed since the last round (the jobs, their
            # specs, allowed types, requests and pins, the GPUs each has run with, the
            # capacity): that round's candidates (not where they come of what jobs measured)
            kept = memo.unchanged(
                (j.rows.tobytes(), pinned.tobytes(), j.gtype[pinned].tobytes(),
                 j.gpus[pinned].tobytes(), j.allowed.tobytes(), j.req.tobytes(),
                 snap.capacity.tobytes()), j.specs)
            if kept is not None and not seen_grew:
                return kept
        counts = [config_counts(int(cl.type_node_max[k]), int(snap.capacity[k]))
                  for k in range(len(cl.types))]
        rows: list[int] = []                 # per job with candidates: its index, its block
        blocks: list[np.ndarray] = []        # (GPU type, count, rate) per candidate
        allowed_of = j.allowed.tolist()      # (plain lists: this loop runs every round)
        job_rows, reqs = j.rows.tolist(), j.req.tolist()
        shapes: dict[tuple, tuple] = {}      # allowed types -> (them, each one's count choices)
        batch_caps = {} if memo is None else memo.replica_caps     # (job type, type) -> cap
        if rigid_of is None:
            rigid_of = [self._rigid(spec) for spec in j.specs]
        for i, spec in enumerate(j.specs):
            if pinned[i]:
                rows.append(i)
                blocks.append(np.array([[j.gtype[i], j.gpus[i], 1.0]], dtype=float))
                continue
            rigid = rigid_of[i]
            allowed = [k for k, ok in enumerate(allowed_of[i]) if ok]
            row = job_rows[i]
            if self.share_max:
                caps = (min(max(2 * seen.get((row, -1), 0), 1), self.max_gpus),) * len(allowed)
            else:
                caps = tuple(min(max(2 * seen.get((row, k), 0), 1), self.max_gpus)
                             for k in allowed)
            caps = tuple(min(cap, replica_cap(snap, spec, k, batch_caps))
                         for cap, k in zip(caps, allowed))
            if learned is not None and not rigid and snap.perf.goodput_profile(
                    spec, cl.types[allowed[0]]) is not None:
                out = []
                for k, cap in zip(allowed, caps):
                    ok = [c for c in counts[k] if c <= cap]
                    est = self._learned(snap, learned, i, k, ok)
                    if est is None:
                        if 1 in ok:
                            out.append((k, 1, 1.0))
                        continue
                    out.extend((k, c, g) for c, g in zip(ok, est) if g > 0)
                rows.append(i)
                blocks.append(np.array(out, dtype=float).reshape(-1, 3))
                continue
            # the model's rates depend on the job's spec (its phase included) alone: kept per job
            shape = shapes.get(tuple(allowed))
            if shape is None:
                shape = shapes[tuple(allowed)] = (tuple(allowed),
                                                  tuple(len(counts[k]) for k in allowed))
            rows.append(i)
            blocks.append(kept_rates(memo, row, spec, (shape, caps, reqs[i] if rigid else -1),
                                     self._rated, snap, counts, spec, reqs[i] if rigid else None,
                                     allowed, caps))
        return kept_candidates(memo, rows, blocks)

    def _rated(self, snap: Snapshot, counts: list[list[int]], spec, req: int | None,
               allowed: list[int], caps: tuple[int, ...]) -> list[tuple[int, int, float]]:
        """The model's rate of a job on each allowed type at each GPU count Sia would give it:
        `req` alone for a rigid job, else the counts up to the type's cap."""
        cl = snap.cluster
        plan = None if req is not None else (adaptive_batch_up_to(spec.batch_size)
                                             if self.batch_cap else ADAPTIVE_BATCH)
        out = []
        for k, cap in zip(allowed, caps):
            for cnt in counts[k]:
                if (cnt != req) if req is not None else (cnt > cap):
                    continue           # a rigid job runs on what it asked for alone
                rate = rate_with(snap.perf, spec, cl.types[k], cnt, cl.min_nodes(k, cnt), True,
                                 plan)
                if rate > 0:
                    out.append((k, cnt, rate))
        return out
