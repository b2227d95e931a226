"""One round of Rubick (quanta/policies/rubick.py is the policy, its docstring the algorithm): the
greedy over (job, option) moves on the jobs' resource-sensitivity curves, SLAs of guaranteed jobs
first, then the steepest marginal gain funded by the cheapest shrinks, and the artifact's
node-by-node behaviours where the policy asks for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.perf.base import rate_with
from quanta.policies.rubick import EPS, Options

if TYPE_CHECKING:
    from quanta.policies.rubick import Rubick


class Round:
    """One round's greedy over (job, option) moves; see the module docstring."""

    def __init__(self, pol: Rubick, snap: Snapshot, opts: list[Options], k_of, norm, unit):
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
        norm = np.where(norm > 0, norm, 1.0)
        for i, o in enumerate(opts):
            L = len(o.g)
            self.G[i, :L], self.C[i, :L], self.M[i, :L] = o.g, o.c, o.m
            self.V[i, :L] = o.rate / norm[i]
            if o.floor >= 0:
                self.floor_at[i] = o.floor
                self.floor_v[i] = self.V[i, o.floor] * (1 - 1e-9)
        if pol.fill_node:                   # (a): the artifact's two placement paths
            self.one_node = self._artifact_paths(opts)
        self.unit = np.array([1.0, unit[0], unit[1]])
        self.modelled = np.flatnonzero(np.isfinite(self.unit)).tolist()   # resources costed
        # the current allocation of running jobs: an extra option (their plan and resources)
        run = np.flatnonzero(j.running)
        cl = snap.cluster
        for i in run.tolist():
            g, c, m, plan = int(j.gpus[i]), float(j.cpus[i]), float(j.mem_gb[i]), j.plan[i]
            nodes = len(set(cl.gpu_node[j.placement[i]].tolist()))
            r = rate_with(snap.perf, j.specs[i], cl.types[int(j.gtype[i])], g, nodes,
                          bool(j.consolidated[i]), plan, c, m)
            self.G[i, O - 1], self.C[i, O - 1], self.M[i, O - 1] = g, c, m
            self.V[i, O - 1] = r / norm[i]
            self.plans[i][O - 1] = plan
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
        self._moved: list[int] = []     # rows moved, in order (see shrink_table)
        self.R = np.stack([self.G, self.C, self.M], axis=2)   # (job, option, resource)
        self.options = np.arange(O)                           # option indexes
        self.finite = np.isfinite(self.V)
        self.sla_ok = self.finite & (self.V >= self.floor_v[:, None])   # at or above the floor
        # the same with "nothing" as a last option (a shrink's: allowed where there is no floor)
        self.R_or_none = np.concatenate([self.R, np.zeros((n, 1, 3))], axis=1)
        self.V_or_none = np.concatenate([np.where(self.finite, self.V, 0.0), np.zeros((n, 1))], axis=1)
        self.sla_ok_or_none = np.concatenate([self.sla_ok, (self.floor_at < 0)[:, None]], axis=1)
        if pol.release_3d > 0:
            self.release_large_3d(sum(s.guaranteed for s in j.specs))
        # never a victim: a running job restarted max_restarts times, or any running job when
        # running jobs are not shrunk for others (R1, the artifact)
        self.pinned = self.was_running & (self.frozen | (not pol.shrink_running))
        self._shrink: dict[tuple[bool, bool, bool], _Shrinks] = {}

    # -- helpers ---------------------------------------------------------------------------------
    def held(self, i: int) -> np.ndarray:
        """(GPUs, CPUs, GB) that job i holds or is given now (a row of R: read, never written)."""
        a = self.at[i]
        return np.zeros(3) if a < 0 else self.R[i, a]

    def value(self, i: int) -> float:
        return 0.0 if self.at[i] < 0 else float(self.V[i, self.at[i]])

    def cost(self, delta: np.ndarray) -> np.ndarray:
        """Dominant normalised cost of a resource change (last axis: GPUs, CPUs, memory; resources
        the cluster does not model cost nothing)."""
        out = np.full(delta.shape[:-1], EPS)
        for r in self.modelled:
            np.maximum(out, np.maximum(delta[..., r], 0.0) / self.unit[r], out=out)
        return out

    def short(self, i: int, need: np.ndarray) -> tuple[float, float, float]:
        """How much of `need` (GPUs of job i's type, CPUs, memory) the free resources lack
        (<= 0: none)."""
        g, c, m = need.tolist()
        return g - float(self.free_g[self.k_of[i]]), c - self.free_c, m - self.free_m

    def move(self, i: int, o: int) -> None:
        d = (self.R[i, o] if o >= 0 else np.zeros(3)) - self.held(i)
        self.free_g[self.k_of[i]] -= d[0]
        self.free_c -= d[1]
        self.free_m -= d[2]
        self.at[i] = o
        self._moved.append(i)

    def _fits(self, i: int, o: int) -> bool:
        need = self.R[i, o] - self.held(i)
        return all(x <= EPS for x in self.short(i, need))

    def may_change(self, i: int) -> bool:
        return not (self.frozen[i] and self.was_running[i])

    def shrink_table(self, pattern: tuple[bool, bool, bool]) -> _Shrinks:
        """Every job's cheapest way to free some of the resources flagged in `pattern` (GPUs,
        CPUs, memory short), kept per pattern and brought up to date with the jobs moved since."""
        t = self._shrink.get(pattern)
        if t is None:
            t = self._shrink[pattern] = _Shrinks(self, pattern)
        else:
            t.refresh()
        return t

    def _shrink_rows(self, rows: np.ndarray, a: np.ndarray, short: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """The cheapest shrink of each of `rows` from its option `a` (>= 0), vectorised over
        `rows` x options: candidates are the other options at or above the job's SLA floor (and
        nothing at all when it has no floor) that free some short resource and take none; the
        best has the lowest loss per freed unit (rounded to 1e-9), then the smaller step, then the
        lower option index with "nothing" last. (loss per freed unit, option; -1 = down to
        nothing), or (inf, -2) where no option frees a short resource."""
        m, O = rows.size, self.V.shape[1]
        held = self.R[rows, a]                                                         # (m, 3)
        res = self.R_or_none[rows]                                                     # (m, O+1, 3)
        cand = self.sla_ok_or_none[rows]
        cand[np.arange(m), a] = False
        freed = held[:, None, :] - res
        cand &= ((freed > EPS) & short).any(axis=2) & ~(res > held[:, None, :] + EPS).any(axis=2)
        size = self.cost(freed)
        ratio = (self.V[rows, a][:, None] - self.V_or_none[rows]) / size
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
        Victim: the lowest loss per freed unit over all jobs, or over the jobs of i's GPU type
        where GPUs are short (ties: the lower row)."""
        undo: list[tuple[int, int]] = []
        while True:
            s = self.short(i, need)
            pattern = (s[0] > EPS, s[1] > EPS, s[2] > EPS)     # what is short
            if not any(pattern):
                break
            table = self.shrink_table(pattern)
            v, loss = table.victim(int(self.k_of[i]) if s[0] > 0 else -1, i)
            if not loss < limit:
                for vv, oo in reversed(undo):
                    self.move(vv, oo)
                    self.shrunk[vv] = False
                return False
            undo.append((v, int(self.at[v])))
            self.move(v, int(table.opt[v]))
            self.shrunk[v] = True
        return True

    # -- the artifact's node-by-node behaviours ((a) fill_node, (b) release_3d) ----------------------
    def _artifact_paths(self, opts: list[Options]) -> np.ndarray:
        """(a) [C: morphling.py:111, 130]: per job, whether the artifact places it data-parallel on
        one node (every model but its 3D ones); a job of a 3D model keeps only the options on the
        artifact's GPU counts for it (quanta/perf/plan_shapes.py), its SLA floor moved to the
        cheapest of those that meets it."""
        from quanta.perf.plan_shapes import artifact_3d_gpus
        one = np.ones(self.n, dtype=bool)
        for i, spec in enumerate(self.snap.jobs.specs):
            counts = artifact_3d_gpus(spec.job_type)
            if counts is None:
                continue
            one[i] = False
            L = len(opts[i].g)
            self.V[i, :L] = np.where(np.isin(self.G[i, :L], counts), self.V[i, :L], -np.inf)
            if self.floor_at[i] >= 0:
                meet = np.flatnonzero(np.isfinite(self.V[i, :L]) & (self.V[i, :L] >= self.floor_v[i]))
                self.floor_at[i] = meet[0] if meet.size else -1
        return one

    def release_large_3d(self, n_guaranteed: int) -> None:
        """(b) [C: morphling.py:65-73]: a running job on a 3D plan holding >= `release_3d` GPUs gives
        them all back before anything is decided, unless it restarted 7 times or more while at most
        12 guaranteed jobs are active; it is then placed again like a pending job (keeping its
        option again is no change: it keeps its GPUs). Not left alone for `max_restarts`: the
        artifact re-places it regardless."""
        j = self.snap.jobs
        for i in np.flatnonzero(self.was_running & (j.gpus >= self.pol.release_3d)).tolist():
            if getattr(j.plan[i], "is_3d", False) and (j.restarts[i] < 7 or n_guaranteed > 12):
                self.move(i, -1)
                self.frozen[i] = False

    def node_free(self) -> np.ndarray:
        """(nodes, 3): free GPUs, CPU threads and host GB per node, given what jobs hold now (a
        running job's CPUs and memory counted on its nodes in proportion to its GPUs there)."""
        snap, j, cl = self.snap, self.snap.jobs, self.snap.cluster
        up = np.asarray(snap.node_up, dtype=bool)
        free = np.zeros((len(cl.nodes), 3))
        free[:, 0] = np.where(up, cl.node_gpus, 0)
        for r, u in ((1, "cpus"), (2, "mem_gb")):
            free[:, r] = ([float(getattr(nd, u)) if up[x] else 0.0 for x, nd in enumerate(cl.nodes)]
                          if np.isfinite(self.unit[r]) else np.inf)
        for i in np.flatnonzero(self.at >= 0).tolist():
            cnt = np.bincount(cl.gpu_node[j.placement[i]], minlength=len(cl.nodes)).astype(float)
            free -= self.R[i, self.at[i]][None, :] * (cnt / max(cnt.sum(), 1.0))[:, None]
        return free

    def value_within(self, i: int, g: int) -> float:
        """The best value of job i on at most g GPUs (0: none); the artifact's res_matrix[g]."""
        ok = self.finite[i] & (self.G[i] <= g)
        return float(self.V[i, ok].max()) if ok.any() else 0.0

    def best_within(self, i: int, budget: np.ndarray) -> int:
        """Job i's best option (cheapest of the best) within `budget` (GPUs, CPUs, GB) and at or
        above its SLA floor; -1 if none."""
        ok = self.finite[i] & np.all(self.R[i] <= budget[None, :] + EPS, axis=1) & \
            (self.V[i] >= self.floor_v[i]) & (self.G[i] > 0)
        if not ok.any():
            return -1
        v = np.where(ok, self.V[i], -np.inf)
        return int(np.argmax(v >= v.max() * (1 - 1e-12)))

    def fill(self, guaranteed: np.ndarray) -> None:
        """(a) [C: morphling.py:75-89 schedule_job, 127-160, alloc_per_node 212-319]: jobs are taken
        guaranteed first, then by the value one more GPU would add, lowest first (job_list, lines
        51-63; one more GPU capped at a node, job_res_slope lines 339-362). A job on the one-node
        path (`_artifact_paths`) holding nothing is offered all the free GPUs (CPUs, memory) of
        the node with the most free GPUs (lines 131-136, 222-229) and takes the best option within
        them (line 314); one running on one node is offered its own plus that node's free ones
        (lines 224-226) and grows if that gains at least `min_gain` [U: the artifact has no such
        bar]. A guaranteed job starts only where that option meets its SLA (sla_admit; lines
        309-313). A job of a 3D model holding nothing gets the first of the artifact's GPU counts
        for it that fits (`_fill_span`; lines 161-173, 389-454); it grows later in the
        steepest-gain pass (the artifact's 3D scale-up, lines 100-123). Jobs on the one-node path
        grow no further this round (`run`)."""
        j, cl = self.snap.jobs, self.snap.cluster
        free = self.node_free()
        # the order is taken on what jobs held at the start of the round, before (b) [C: lines
        # 46-63 before 65-73]; a 3D-model job's gain is 0 (its res_matrix is -1 at every count in
        # the artifact: it comes first, by submission)
        was = self.cur >= 0
        more = np.array([0.0 if not self.one_node[i] else
                         abs(self.value_within(i, min(int(self.G[i, self.cur[i]]) + 1 if was[i] else 1,
                                                      int(cl.type_node_max[self.k_of[i]])))
                             - (self.V[i, self.cur[i]] if was[i] else 0.0)) for i in range(self.n)])
        held = self.at >= 0
        order = np.lexsort((j.rows, j.submit, more, ~guaranteed))
        for i in order.tolist():
            if not self.may_change(i) or (held[i] and not self.one_node[i]):
                continue
            mine = np.flatnonzero(cl.node_type == self.k_of[i])
            if held[i]:
                where = np.unique(cl.gpu_node[j.placement[i]])
                if self.at[i] != self.cur[i] or where.size != 1:
                    continue
                n = int(where[0])
                o = self.best_within(i, free[n] + self.held(i))
                if o < 0 or not self.V[i, o] > self.value(i) * (1 + self.pol.min_gain) + 1e-9:
                    continue
                take = {n: self.R[i, o] - self.held(i)}
            else:
                by_free = mine[np.argsort(-free[mine, 0], kind="stable")]
                if self.one_node[i]:
                    o = self.best_within(i, free[by_free[0]])
                    take = {int(by_free[0]): self.R[i, o]} if o >= 0 else {}
                else:
                    o, take = self._fill_span(i, free, by_free)
                if o < 0:
                    continue
            self.move(i, o)
            self.raised[i] = True
            for n, d in take.items():
                free[n] -= d

    def _fill_span(self, i: int, free: np.ndarray, by_free: np.ndarray) -> tuple[int, dict]:
        """(a) for a job of a 3D model: the first of the artifact's GPU counts for it, in its order,
        whose best option (at or above the SLA floor) fits the free GPUs of its fewest nodes, most
        free first; (option, {node: (GPUs, CPUs, GB) taken}) or (-1, {})."""
        from quanta.perf.plan_shapes import artifact_3d_gpus
        cl = self.snap.cluster
        ok = self.finite[i] & (self.V[i] >= self.floor_v[i])
        for g in artifact_3d_gpus(self.snap.jobs.specs[i].job_type):
            at = np.flatnonzero(ok & (self.G[i] == g))
            if not at.size:
                continue
            o = int(at[np.argmax(self.V[i, at])])
            nodes = by_free[:cl.min_nodes(int(self.k_of[i]), g)]
            left, take = float(g), {}
            for n in nodes.tolist():
                k = min(left, free[n, 0])
                take[n] = self.R[i, o] * (k / g)
                left -= k
            if left <= EPS and all(np.all(free[n] >= t - EPS) for n, t in take.items()):
                return o, take
        return -1, {}

    # -- the round ---------------------------------------------------------------------------------
    def run(self) -> Decision:
        j = self.snap.jobs
        guaranteed = np.array([s.guaranteed for s in j.specs], dtype=bool)
        order = np.lexsort((j.rows, j.submit, ~guaranteed))
        if self.pol.fill_node:                  # (a) the artifact's node-by-node start first
            self.fill(guaranteed)
        # 1. SLAs of guaranteed jobs, oldest first
        for i in order.tolist():
            f = int(self.floor_at[i])
            if f < 0 or self.value(i) >= self.floor_v[i] and self.at[i] >= 0:
                continue
            need = self.R[i, f] - self.held(i)
            if self.fund(i, need, np.inf):
                self.move(i, f)
                self.raised[i] = True
        # 2. steepest marginal gain (a job's best move depends on its own option only: its
        # successive moves are found a step at a time for every job at once, _Chains)
        grows = ~self.one_node if self.pol.fill_node else np.ones(self.n, dtype=bool)  # (a)
        rows = np.flatnonzero(~(self.frozen & self.was_running) & ~self.shrunk & grows)
        chains = _Chains(self._best_moves, self.n, self.V.shape[1], rows, self.at[rows])
        slope = np.zeros(self.n)
        best_o = np.full(self.n, -1, dtype=np.int64)
        col = self.at[rows] + 1
        slope[rows], best_o[rows] = chains.value[rows, col], chains.to[rows, col]
        for _ in range(8 * self.n + 16):
            bi = int(np.argmax(slope))
            best, bo = float(slope[bi]), int(best_o[bi])
            if best <= 0:
                break
            need = self.R[bi, bo] - self.held(bi)
            before = len(self._moved)
            if self.fund(bi, need, best):
                victims = self._moved[before:]     # (each moved down: not back where it was)
                self.move(bi, bo)
                self.raised[bi] = True
                slope[bi], best_o[bi] = chains.get(bi, bo)    # (a move found: on its chain)
                slope[victims] = 0.0
            else:
                slope[bi] = 0.0
        return self._decision(order)

    def _best_moves(self, rows: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row's steepest move from option `a` (-1: none held): (value gained per unit of
        dominant cost, option); (0, -1) where no option gains (a running job kept as it is must
        gain `min_gain`)."""
        has = a >= 0
        a0 = np.maximum(a, 0)
        V = self.V[rows]
        v0 = np.where(has, V[np.arange(rows.size), a0], 0.0)
        kept = self.was_running[rows] & (a == self.cur[rows])
        need_gain = np.where(kept, self.pol.min_gain * v0, 0.0)
        ok = self.sla_ok[rows] & (self.options != a[:, None]) & \
            (V > (v0 + np.maximum(need_gain, 1e-9))[:, None])
        held = np.where(has[:, None], self.R[rows, a0], 0.0)                          # (m, 3)
        delta = self.R[rows] - held[:, None, :]                                       # (m, O, 3)
        slope = np.where(ok, (V - v0[:, None]) / self.cost(delta), -np.inf)
        o = np.argmax(slope, axis=1)
        found = ok.any(axis=1)
        return (np.where(found, slope[np.arange(rows.size), o], 0.0),
                np.where(found, o, -1))

    def _decision(self, order: np.ndarray) -> Decision:
        snap = self.snap
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
                return self._noted(dec)
            for i in miss.tolist():       # keeps what it holds if that still fits, or waits
                back = int(self.cur[i]) if self.at[i] != self.cur[i] else -1
                self.move(i, -1)
                if back >= 0 and self._fits(i, back):
                    self.move(i, back)
        dec.gpus[~placed] = 0
        dec.gpu_type[~placed] = -1
        dec.cpus[~placed] = 0.0
        dec.mem_gb[~placed] = 0.0
        return self._noted(dec)

    def _noted(self, dec: Decision) -> Decision:
        """R2: the decision says which scale-out caps cut this round's curves (Decision.state
        "notes" -> "scale_cap": one line per model family; empty when none did)."""
        if self.pol.scale_cap != "none":
            dec.state = {"notes": {"scale_cap": sorted({o.note for o in self.opts if o.note})}}
        return dec


class _Chains:
    """A search's answer for each job at each option it may hold, (value, option it goes to:
    >= 0, or a negative code of the search's), kept by (job, option + 1), found a chain step at a
    time: the options the jobs of one step go to are marked and found together, for every job at
    once, when one of them is asked for (the greedy moves a job, or shrinks a victim, to just
    such an option; each step gains value, or frees a short resource, so a chain ends). An
    option on no chain is found when asked for (`find`)."""

    UNKNOWN, MARKED = -3, -4

    def __init__(self, search, n: int, O: int, rows: np.ndarray, a: np.ndarray):
        self.search = search                 # (rows, options) -> (values, options gone to)
        self.value = np.zeros((n, O + 1))
        self.to = np.full((n, O + 1), self.UNKNOWN, dtype=np.int64)
        self.next = rows, a                  # the next step's jobs and their options
        self._step()

    def find(self, rows: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x, o = self.search(rows, a)
        self.value[rows, a + 1], self.to[rows, a + 1] = x, o
        return x, o

    def _step(self) -> None:
        rows, a = self.next
        _, o = self.find(rows, a)
        go = o >= 0
        rows, o = rows[go], o[go]
        keep = self.to[rows, o + 1] == self.UNKNOWN
        self.next = rows[keep], o[keep]
        self.to[self.next[0], self.next[1] + 1] = self.MARKED

    def get(self, i: int, a: int) -> tuple[float, int] | None:
        """Job i's answer at option a (None: on no chain, not found yet)."""
        if self.to[i, a + 1] == self.MARKED:
            self._step()
        t = int(self.to[i, a + 1])
        return None if t == self.UNKNOWN else (float(self.value[i, a + 1]), t)


class _Shrinks:
    """For one shortage pattern (GPUs, CPUs, memory short): each job's cheapest shrink at the
    option it holds, (loss per freed unit, option; -1 = down to nothing, -2 = none: a job holding
    nothing, raised this round or pinned is never a victim), and the cheapest victim per group
    of jobs (a GPU type's, or all: -1). A job's cheapest shrink depends on its option only (and
    on its raised flag, set only with a move), so the table is brought up to date for the jobs
    moved since (`refresh`), each job's shrink at each option found once, those at the options
    victims would shrink to found ahead (`_Chains`)."""

    def __init__(self, rnd: Round, pattern: tuple[bool, bool, bool]):
        self.rnd = rnd
        n, O = rnd.V.shape
        self.seen = len(rnd._moved)                        # moves taken into account
        self.ratio = np.full(n, np.inf)
        self.opt = np.full(n, -2, dtype=np.int64)
        self.groups: dict[int, np.ndarray | None] = {}    # group -> its rows (None: all)
        self.cheapest: dict[int, tuple[int, float] | None] = {}   # group -> (row, loss); None: stale
        short = np.array(pattern)
        rows = np.flatnonzero((rnd.at >= 0) & ~rnd.raised & ~rnd.pinned)
        a = rnd.at[rows]
        self.found = _Chains(lambda r, o: rnd._shrink_rows(r, o, short), n, O, rows, a)
        self.ratio[rows], self.opt[rows] = self.found.value[rows, a + 1], self.found.to[rows, a + 1]

    def refresh(self) -> None:
        """Bring the table up to date with the jobs moved since (a few: one at a time)."""
        rnd = self.rnd
        if self.seen == len(rnd._moved):
            return
        rows = dict.fromkeys(rnd._moved[self.seen:])
        self.seen = len(rnd._moved)
        at, raised, pinned = rnd.at, rnd.raised, rnd.pinned
        new = []
        for r in rows:
            a = int(at[r])
            if a < 0 or raised[r] or pinned[r]:
                self._put(r, np.inf, -2)
                continue
            got = self.found.get(r, a)
            if got is None:
                new.append(r)
            else:
                self._put(r, *got)
        if new:
            x, o = self.found.find(np.array(new, dtype=np.int64), at[new])
            for r, x1, o1 in zip(new, x.tolist(), o.tolist()):
                self._put(r, x1, o1)

    def _put(self, r: int, x: float, o: int) -> None:
        """Job r's cheapest shrink is now (x, o): the cheapest victim of its groups follows."""
        self.ratio[r], self.opt[r] = x, o
        for g in (int(self.rnd.k_of[r]), -1):
            c = self.cheapest.get(g)
            if c is None:
                continue
            if x < c[1] or x == c[1] and r < c[0]:
                self.cheapest[g] = (r, x)
            elif r == c[0] and x > c[1]:
                self.cheapest[g] = None          # the cheapest got dearer: search again

    def _argmin(self, g: int) -> tuple[int, float]:
        rows = self.groups.get(g)
        if g not in self.groups:
            rows = self.groups[g] = None if g < 0 else np.flatnonzero(self.rnd.k_of == g)
        if rows is None:
            v = int(np.argmin(self.ratio))
        else:
            v = int(rows[np.argmin(self.ratio[rows])])
        return v, float(self.ratio[v])

    def victim(self, g: int, i: int) -> tuple[int, float]:
        """The cheapest victim of group g (a GPU type; -1: every job) other than job i:
        (row, loss per freed unit; inf: none)."""
        c = self.cheapest.get(g)
        if c is None:
            c = self.cheapest[g] = self._argmin(g)
        if c[0] != i:
            return c
        keep = self.ratio[i]
        self.ratio[i] = np.inf                  # (never its own victim)
        try:
            return self._argmin(g)
        finally:
            self.ratio[i] = keep
