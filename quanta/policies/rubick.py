"""Rubick (arXiv 2408.08586; MLSys'25 artifact "Morphling"): execution plans and GPUs, CPU threads
and host memory chosen together from each job's resource-sensitivity curve, with throughput
guarantees (SLAs) for guaranteed jobs. ALGORITHMS.md section 5. Tags: [C] = as the artifact
(AlibabaPAI/reconfigurable-dl-scheduler @ 80e8524, sched/morphling_sched/policy/morphling.py)
does it; [U] = reconstructed here, not confirmed against the paper or the artifact.

Per round (60 s [C]):
1. Curve per job [C, performance_model.py]: for every GPU count g (1..8, then whole nodes up to
   `max_gpus` [C: 1..64], plus the requested count) and CPU threads per GPU c (`cpu_options` [U]:
   the artifact's grid is c <= 64/g on one node, 8 across nodes), the best plan's throughput
   Rmax(g, c) from the performance model (`best_plan_rate`), and the host memory that plan needs
   (`host_memory_gb`: ZeRO-Offload's optimizer states). Options are ordered by their dominant
   share cost max(g, c_total / CPUs-per-GPU, mem / memory-per-GPU of the nodes) [U: the artifact
   walks GPUs and CPUs separately]; one that gains < 1% over a cheaper option is dropped [C: the
   curve is made monotone the same way]. Values are normalised by the throughput of the job's
   request (its GPUs, plan and CPUs) [C: slope = dRmax / (T_orig * dGPU)].
2. SLA [C]: a guaranteed job (JobSpec.guaranteed) must run at least at sla x T_orig (sla 0 = 1.0:
   the throughput of its requested resources and plan). Guaranteed jobs below it, oldest first,
   get the cheapest option that meets it, taking resources from best-effort jobs (down to zero)
   and from guaranteed jobs above their own SLA option, lowest loss per freed unit first [C: the
   artifact takes from co-located jobs with the lowest slope]. A guaranteed job that cannot be
   given its SLA waits.
3. Marginal gain [C, scale-up pass + take-from-victims]: repeatedly, the job whose move to another
   option has the steepest slope (gain / dominant cost) gets it, from free resources or by taking
   from victims whose loss per freed unit is lower than the requester's gain per unit, never
   below a guaranteed victim's SLA, never from a job restarted `max_restarts` times or more
   [C: < 5 restarts]. Moves are global over the cluster [U: the artifact works node by node, most
   free GPUs first]. Each job's cheapest shrink is kept in numpy tables, one per
   pattern of short resources, refreshed only for jobs that moved: a victim is one argmin. A job raised this round is not a victim and a victim does not grow again in
   the same round [U: guarantees the round ends].
4. A running job is reconfigured only for a relative gain of at least `min_gain` [U: the artifact
   relies on its restart limit alone; a 260 s restart per move is not free].
5. The plan of a job is the argmax plan of its option [C]; CPU threads and host memory follow
   from the option (CPU from the curve, memory from the plan's offload needs) [C]. Every change
   of plan, GPUs or resources is a checkpoint-restart keeping the global batch (the simulator
   charges the restart delay; the plan model keeps the global batch by construction) [C: 260 s].
6. The decision is tried through the real placement (`mechanism.dry_run`): a job that would not
   be placed (nodes without room for its GPUs, CPUs or memory) keeps what it holds, or waits if
   it held nothing [U].
Homogeneous clusters as in the paper; on several GPU types each job uses its fastest allowed type
[U]. Rubick does not share GPUs and needs no job lengths.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.perf.base import best_plan_rate, host_memory_gb, rate_with
from quanta.policies.base import Policy
from quanta.policies.registry import register

EPS = 1e-9


@dataclass
class Options:
    """A job's curve: options (GPUs, CPU threads, host GB, plan, steps/s), cheapest first."""
    g: np.ndarray
    c: np.ndarray
    m: np.ndarray
    rate: np.ndarray
    plans: list
    floor: int = -1          # the cheapest option meeting the SLA (-1: none asked)


def curve_options(snap: Snapshot, i: int, k: int, counts: list[int], cpu_options, sla_rate: float,
                  unit: tuple[float, float]) -> Options:
    """Rubick's resource-sensitivity curve of snapshot row i on GPU type k, made monotone."""
    spec, cl = snap.jobs.specs[i], snap.cluster
    gname, node_g = cl.types[k], int(cl.type_node_max[k])
    node_c, node_m = unit[0] * node_g, unit[1] * node_g
    rows = []
    for g in counts:
        nodes = cl.min_nodes(k, g)
        for cpg in (cpu_options if np.isfinite(node_c) else (0.0,)):
            c = float(cpg * g)
            if cpg * min(g, node_g) > node_c + EPS:   # more than a node holds for its GPUs there
                continue
            plan, r = best_plan_rate(snap.perf, spec, gname, g, nodes, True, c)
            if r <= 0:
                continue
            m = host_memory_gb(snap.perf, spec, plan)
            if m / nodes > node_m + EPS:
                continue
            rows.append((max(g, c / unit[0], m / unit[1]), g, c, m, r, plan))
    rows.sort(key=lambda x: (x[0], x[1], x[2]))
    keep, best = [], 0.0
    for row in rows:
        if row[4] > best * 1.01:
            keep.append(row)
            best = row[4]
    floor = -1
    if sla_rate > 0:
        meet = [row for row in rows if row[4] >= sla_rate * (1 - 1e-9)]
        if meet:
            f = meet[0]
            if f not in keep:
                keep.append(f)
                keep.sort(key=lambda x: (x[0], x[1], x[2]))
            floor = keep.index(f)
    return Options(np.array([r[1] for r in keep], dtype=np.int64), np.array([r[2] for r in keep]),
                   np.array([r[3] for r in keep]), np.array([r[4] for r in keep]),
                   [r[5] for r in keep], floor)


@register("rubick", "Rubick: execution plans and GPUs / CPUs / memory by resource-sensitivity "
                    "curves, SLA for guaranteed jobs, best-effort jobs shrink to zero")
@dataclass
class Rubick(Policy):
    interval: float = 60.0
    min_gain: float = 0.1           # [U] relative gain a running job's reconfiguration must bring
    max_restarts: int = 5           # [C] jobs restarted this often are left alone
    max_gpus: int = 64              # [C] the curve's GPU range
    cpu_options: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0)  # [U] threads per GPU
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        n = len(j)
        cl = snap.cluster
        k_of = np.where(j.allowed.any(axis=1), np.argmax(j.rates, axis=1), 0)
        t_orig = j.rates[np.arange(n), k_of]
        cap_c, cap_m = snap.resources
        G = cl.num_gpus
        unit = (cap_c / G if np.isfinite(cap_c) else np.inf, cap_m / G if np.isfinite(cap_m) else np.inf)
        opts = [self._options(snap, i, int(k_of[i]), float(t_orig[i]), unit) for i in range(n)]
        return Round(self, snap, opts, k_of, t_orig, unit).run()

    def _options(self, snap: Snapshot, i: int, k: int, t_orig: float, unit) -> Options:
        spec = snap.jobs.specs[i]
        sla = (spec.sla or 1.0) * t_orig if spec.guaranteed else 0.0
        cap = int(snap.cluster.capacity[k])
        key = (spec.job_type, spec.plan, spec.num_gpus, spec.cpus, k, sla, cap, unit)
        hit = self._memo.get(key)
        if hit is None:
            node_g = int(snap.cluster.type_node_max[k])
            top = min(self.max_gpus, cap)
            counts = sorted(set(range(1, min(node_g, top) + 1)) | set(range(node_g, top + 1, node_g))
                            | ({spec.num_gpus} if spec.num_gpus <= cap else set()))
            hit = curve_options(snap, i, k, counts, self.cpu_options, sla, unit)
            self._memo[key] = hit
        return hit


class Round:
    """One round's greedy over (job, option) moves; see the module docstring."""

    def __init__(self, pol: Rubick, snap: Snapshot, opts: list[Options], k_of, t_orig, unit):
        self.pol, self.snap, self.opts, self.k_of = pol, snap, opts, k_of
        j = snap.jobs
        n = len(j)
        self.n = n
        O = max([len(o.g) for o in opts] + [1]) + 1      # + the current allocation, if off-curve
        self.G = np.zeros((n, O))
        self.C = np.zeros((n, O))
        self.M = np.zeros((n, O))
        self.V = np.full((n, O), -np.inf)                 # value: rate / T_orig (-inf: no option)
        self.plans = [list(o.plans) + [None] * (O - len(o.plans)) for o in opts]
        self.at = np.full(n, -1, dtype=np.int64)          # option held / targeted (-1: none)
        self.floor_v = np.zeros(n)
        self.floor_at = np.full(n, -1, dtype=np.int64)
        norm = np.where(t_orig > 0, t_orig, 1.0)
        for i, o in enumerate(opts):
            L = len(o.g)
            self.G[i, :L], self.C[i, :L], self.M[i, :L] = o.g, o.c, o.m
            self.V[i, :L] = o.rate / norm[i]
            if o.floor >= 0:
                self.floor_at[i] = o.floor
                self.floor_v[i] = self.V[i, o.floor] * (1 - 1e-9)
        self.unit = np.array([1.0, unit[0], unit[1]])
        # the current allocation of running jobs: an extra option (their plan and resources)
        run = np.flatnonzero(j.running)
        cl = snap.cluster
        for i in run.tolist():
            g, c, m, plan = int(j.gpus[i]), float(j.cpus[i]), float(j.mem_gb[i]), j.plan[i]
            nodes = len(np.unique(cl.gpu_node[j.placement[i]]))
            r = rate_with(snap.perf, j.specs[i], cl.types[int(j.gtype[i])], g, nodes,
                          bool(j.consolidated[i]), plan, c, m)
            self.G[i, O - 1], self.C[i, O - 1], self.M[i, O - 1] = g, c, m
            self.V[i, O - 1] = r / norm[i]
            self.plans[i][O - 1] = plan
            self.k_of[i] = int(j.gtype[i]) if int(j.gtype[i]) >= 0 else self.k_of[i]
            self.at[i] = O - 1
        self.cur = self.at.copy()
        self.was_running = j.running.copy()
        self.frozen = j.restarts >= pol.max_restarts
        K = len(cl.types)
        self.free_g = snap.capacity.astype(float) - np.bincount(
            self.k_of[run], weights=j.gpus[run], minlength=K)
        self.free_c = snap.resources[0] - float(j.cpus[run].sum())
        self.free_m = snap.resources[1] - float(j.mem_gb[run].sum())
        self.raised = np.zeros(n, dtype=bool)
        self.shrunk = np.zeros(n, dtype=bool)
        self.R = np.stack([self.G, self.C, self.M], axis=2)   # (job, option, resource)
        self.finite = np.isfinite(self.V)
        self.pinned = self.frozen & self.was_running
        self._shrink: dict = {}

    # -- helpers ---------------------------------------------------------------------------------
    def held(self, i: int) -> np.ndarray:
        a = self.at[i]
        return np.zeros(3) if a < 0 else np.array([self.G[i, a], self.C[i, a], self.M[i, a]])

    def value(self, i: int) -> float:
        return 0.0 if self.at[i] < 0 else float(self.V[i, self.at[i]])

    def cost(self, delta: np.ndarray) -> np.ndarray:
        """Dominant normalised cost of a resource change (rows: GPUs, CPUs, memory; resources the
        cluster does not model cost nothing)."""
        u = self.unit.reshape((3,) + (1,) * (delta.ndim - 1))
        finite = np.isfinite(u)
        parts = np.where(finite, np.maximum(delta, 0.0) / np.where(finite, u, 1.0), 0.0)
        return np.maximum(parts.max(axis=0), EPS)

    def short(self, i: int, need: np.ndarray) -> np.ndarray:
        free = np.array([self.free_g[self.k_of[i]], self.free_c, self.free_m])
        return need - free

    def move(self, i: int, o: int) -> None:
        d = (np.array([self.G[i, o], self.C[i, o], self.M[i, o]]) if o >= 0 else np.zeros(3)) - self.held(i)
        self.free_g[self.k_of[i]] -= d[0]
        self.free_c -= d[1]
        self.free_m -= d[2]
        self.at[i] = o

    def _fits(self, i: int, o: int) -> bool:
        need = np.array([self.G[i, o], self.C[i, o], self.M[i, o]]) - self.held(i)
        return bool(np.all(self.short(i, need) <= EPS))

    def may_change(self, i: int) -> bool:
        return not (self.frozen[i] and self.was_running[i])

    def shrink_table(self, pattern: tuple[bool, bool, bool]) -> tuple[np.ndarray, np.ndarray]:
        """Every job's cheapest way to free some of the resources flagged in `pattern` (GPUs,
        CPUs, memory short): (loss per freed unit, option; -1 = down to nothing, -2 = none) per job.
        Kept per pattern and recomputed only for the jobs whose option or `raised` flag changed
        since (a job's best shrink depends on nothing else)."""
        t = self._shrink.get(pattern)
        if t is None:
            t = self._shrink[pattern] = [np.full(self.n, np.inf), np.full(self.n, -2, dtype=np.int64),
                                         np.full(self.n, -3, dtype=np.int64), self.raised.copy()]
        ratio, opt, at_c, raised_c = t
        rows = np.flatnonzero((self.at != at_c) | (self.raised != raised_c))
        if rows.size:
            ratio[rows], opt[rows] = self._shrink_rows(rows, np.array(pattern))
            at_c[rows], raised_c[rows] = self.at[rows], self.raised[rows]
        return ratio, opt

    def _shrink_rows(self, rows: np.ndarray, short: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised over `rows` x options: candidates are the other options at or above the
        job's SLA floor (and nothing at all when it has no floor) that free some short resource and
        take none; the best has the lowest loss per freed unit (rounded to 1e-9), then the
        smaller step, then the lower option index with "nothing" last."""
        m, O = rows.size, self.V.shape[1]
        a = self.at[rows]
        has = a >= 0
        held = np.where(has[:, None], self.R[rows, np.maximum(a, 0)], 0.0)           # (m, 3)
        res = np.concatenate([self.R[rows], np.zeros((m, 1, 3))], axis=1)             # (m, O+1, 3)
        v = np.concatenate([np.where(self.finite[rows], self.V[rows], 0.0), np.zeros((m, 1))], axis=1)
        cand = np.concatenate([self.finite[rows] & (np.arange(O) != a[:, None])
                               & (self.V[rows] >= self.floor_v[rows, None]),
                               (self.floor_at[rows] < 0)[:, None]], axis=1)
        cand &= (has & ~self.raised[rows] & ~self.pinned[rows])[:, None]
        freed = held[:, None, :] - res
        cand &= ((freed > EPS) & short).any(axis=2) & ~(res > held[:, None, :] + EPS).any(axis=2)
        size = self.cost(np.moveaxis(freed, 2, 0))
        v0 = np.where(has, self.V[rows, np.maximum(a, 0)], 0.0)
        ratio = (v0[:, None] - v) / size
        key = np.where(cand, np.round(ratio, 9), np.inf)
        tie = cand & (key == key.min(axis=1, keepdims=True))
        step = np.where(tie, size, np.inf)
        pick = np.argmax(tie & (step == step.min(axis=1, keepdims=True)), axis=1)
        found = cand.any(axis=1)
        out_r = np.where(found, ratio[np.arange(m), pick], np.inf)
        out_o = np.where(found, np.where(pick == O, -1, pick), -2)
        return out_r, out_o

    def fund(self, i: int, need: np.ndarray, limit: float) -> bool:
        """Take resources from victims (loss per unit < limit) until `need` fits; undo if not.
        Victim: the lowest loss per freed unit over all jobs (ties: the lower row)."""
        undo: list[tuple[int, int]] = []
        k = int(self.k_of[i])
        while np.any((s := self.short(i, need)) > EPS):
            ratio, opt = self.shrink_table(tuple((s > EPS).tolist()))
            r = ratio.copy()
            r[i] = np.inf
            if s[0] > 0:
                r[self.k_of != k] = np.inf
            v = int(np.argmin(r))
            if not r[v] < limit:
                for vv, oo in reversed(undo):
                    self.move(vv, oo)
                    self.shrunk[vv] = False
                return False
            undo.append((v, int(self.at[v])))
            self.move(v, int(opt[v]))
            self.shrunk[v] = True
        return True

    # -- the round ---------------------------------------------------------------------------------
    def run(self) -> Decision:
        j = self.snap.jobs
        guaranteed = np.array([s.guaranteed for s in j.specs], dtype=bool)
        order = np.lexsort((j.rows, j.submit, ~guaranteed))
        # 1. SLAs of guaranteed jobs, oldest first
        for i in order.tolist():
            f = int(self.floor_at[i])
            if f < 0 or self.value(i) >= self.floor_v[i] and self.at[i] >= 0:
                continue
            need = np.array([self.G[i, f], self.C[i, f], self.M[i, f]]) - self.held(i)
            if self.fund(i, need, np.inf):
                self.move(i, f)
                self.raised[i] = True
        # 2. steepest marginal gain (a job's best move depends on its own state only: cached)
        slope = np.zeros(self.n)
        best_o = np.full(self.n, -1, dtype=np.int64)
        for i in range(self.n):
            if self.may_change(i) and not self.shrunk[i]:
                slope[i], best_o[i] = self._best_move(i)
        for _ in range(8 * self.n + 16):
            bi = int(np.argmax(slope))
            best, bo = float(slope[bi]), int(best_o[bi])
            if best <= 0:
                break
            need = np.array([self.G[bi, bo], self.C[bi, bo], self.M[bi, bo]]) - self.held(bi)
            before = self.at.copy()
            if self.fund(bi, need, best):
                self.move(bi, bo)
                self.raised[bi] = True
                slope[bi], best_o[bi] = self._best_move(bi)
                slope[(self.at != before) & self.shrunk] = 0.0
            else:
                slope[bi] = 0.0
        return self._decision(order)

    def _best_move(self, i: int) -> tuple[float, int]:
        a = self.at[i]
        v0 = self.value(i)
        V = self.V[i]
        ok = np.isfinite(V) & (np.arange(len(V)) != a)
        changed = a != self.cur[i]
        need_gain = self.pol.min_gain * v0 if (self.was_running[i] and not changed) else 0.0
        ok &= (V > v0 + max(need_gain, 1e-9)) & (V >= self.floor_v[i])
        if not ok.any():
            return 0.0, -1
        held = self.held(i)
        delta = np.vstack([self.G[i], self.C[i], self.M[i]]) - held[:, None]
        slope = np.where(ok, (V - v0) / self.cost(delta), -np.inf)
        o = int(np.argmax(slope))
        return float(slope[o]), o

    def _decision(self, order: np.ndarray) -> Decision:
        snap, j = self.snap, self.snap.jobs
        from quanta.core.mechanism import dry_run
        n = self.n
        for _ in range(4):
            dec = Decision.empty(snap)
            dec.order = order
            dec.cpus = np.zeros(n)
            dec.mem_gb = np.zeros(n)
            for i in np.flatnonzero(self.at >= 0).tolist():
                a = self.at[i]
                dec.gpus[i] = int(self.G[i, a])
                dec.gpu_type[i] = int(self.k_of[i])
                dec.cpus[i], dec.mem_gb[i] = self.C[i, a], self.M[i, a]
                dec.plans[i] = self.plans[i][a]
                dec.consolidate.add(i)    # the curves assume the fewest nodes: that, or wait
            placed = dry_run(snap, dec)
            miss = np.flatnonzero((self.at >= 0) & ~placed)
            if miss.size == 0:
                return dec
            for i in miss.tolist():       # keeps what it holds if that still fits, or waits
                back = int(self.cur[i]) if self.at[i] != self.cur[i] else -1
                self.move(i, -1)
                if back >= 0 and self._fits(i, back):
                    self.move(i, back)
        dec.gpus[~placed] = 0
        dec.gpu_type[~placed] = -1
        dec.cpus[~placed] = 0.0
        dec.mem_gb[~placed] = 0.0
        return dec
