"""SJF-BSBF (Luo et al.): shortest job first, with GPU sharing decided by its benefit; and the
baseline SJF-FFS (first-fit sharing).

Jobs go in SJF order (remaining time alone, oracle lengths; a running job's at its current rate).
A job takes idle GPUs if there are enough (the type where it runs fastest). Otherwise it may run
packed with running jobs that share with nobody (at most two jobs per GPU) and fit in GPU memory
with it (performance model: measured pair, or the memory rule). Jobs started earlier in the same
pass count as running: they can host a later job (their remaining time alone at the type they got).
- sjf-bsbf: with a running job b only if sharing now lowers the pair's average JCT. With e =
  remaining time alone, xi = slowdown factor when packed (alone rate / packed rate), e^ = xi * e:
    t_seq = e_b + e_a / 2                                  (a waits until b ends)
    t_con = e_a / 2 + (1 - 1/(2 xi_a)) e^_b   if e^_a >= e^_b
            e_b / 2 + (1 - 1/(2 xi_b)) e^_a   otherwise
  b is beneficial iff t_con < t_seq; beneficial jobs are taken lowest t_con first (best benefit
  first). With s = the solo slowdown of the longer job after the shorter ends (1 unless it keeps
  an accumulated micro-batch), t_con = (e^_short + e^_short + s (e_long - e^_short / xi_long)) / 2.
- sjf-ffs: running jobs in arrival order, whenever the pair fits in memory (no benefit test).
Partners (`span`, default true, as the authors' code `bsbf_alloc_res` / `merge_alloc_res`): the job
takes every idle GPU of a type and fills the rest with GPUs of beneficial running jobs of any GPU
count on that type, best first, the last one's GPUs only as many as needed (Decision.span). The
GPU types are tried fastest first for the job. Each pair is tested on its own (the reference's
pairwise test); the drivers charge the guest its slowest worker (core.sharing.tenancy_rate: the
lowest of its rate alone and its pair rate with each host) and each host its pair rate.
A host may have several guests on different GPUs (each GPU holds at most two jobs); a guest
hosts nobody while it is a guest [ours: the reference may let a guest's own GPUs host]. A host that
keeps an accumulated micro-batch (a former guest) is tested at that plan. `span=false`: one host of
exactly the job's GPU count that shares with nobody, all of its GPUs (this module before spanning).
Measured (docs/results.md, SJF-BSBF): spanning costs 23-59% average JCT against span=false on
the Philly sample and openb on 16 G2 GPUs (6% better on 24). A long multi-GPU job passes every
guest's pairwise test (its remaining time is long), takes up to one guest per GPU, and its gang
runs at its slowest worker; the pairwise test never sees that.
Preemption (`preempt`, default false = the paper's preemption-free SJF-BSBF, the reference's
`sjf-bsbf-no-preempt`; `preempt=true` = the reference's plain `sjf-bsbf` / `sjf-ffs`,
`jobs_placement(is_preempt=True)`): running and waiting jobs are ordered together; a waiting job
that cannot start (idle GPUs or sharing) preempts running jobs that come after it in that order,
last first, skipping those with 100 steps or fewer left, one at a time until it starts (those
already preempted stay preempted). A preempted job is waiting again and may start later in the
same pass (on the same GPUs: the mechanism then keeps it running). A preempted host's guest keeps
running on those GPUs as their owner (no restart).
Decisions come at events (arrivals, completions); the authors' loop decides every
`schedule_interval` seconds (run.py's flag default 10 s; their run.sh runs 60 s), which
bench/repro_sjf_bsbf.py's reference part replays by setting the policy's `interval` to 60 s.
Gradient accumulation (`accumulate`, off by default, as the authors' scheduler: nothing in
Lai-JX/Scheduler @ 615f7a4 picks a sub-batch, `--gradient_accumulation_steps` is only a workload
script's flag; the paper's concept [P] is on with accumulate=true; both drivers charge the plan:
the performance model's rate_with / shared_rate(..., plan, other_plan)): the waiting job may run its global batch B
as k micro-batches of B/k (quanta.perf.table: memory and speed of the micro-batch are the measured
ones of the same model at batch B/k). Only when the pair does not fit at the full batch, every k
the model knows is tried; those whose pair fits are scored with the slowed rates and the lowest
t_con is kept, so a memory-short pair is formed only if the accumulated pair still beats waiting.
The guest keeps its micro-batch after its partner leaves (no restart to switch back), so its solo
rate then is the accumulated one: the generalised t_con above. The choice travels as
Decision.plans[guest] = ExecutionPlan(dp=GPUs, ga_steps=k). Only the guest accumulates: the host is
running, and changing its micro-batch would restart it. A spanning guest has one k for all its
hosts: the full batch with hosts it fits beside, else the k > 1 whose fill has the lowest worst
t_con (sjf-ffs: the smallest k that fills). [U] selection rule: the paper states the concept, not
how b is chosen.
`fraction_cap` (off by default): the requests' GPU fractions (JobSpec.gpu_fraction, openb) of a
pair must add up to at most one GPU, whole-GPU requests counting 1: only fractional pods share, as
in the openb cluster itself.

Speed: running jobs that could host are kept in groups of identical jobs (GPU type, GPU count,
plan and everything the performance model reads of the spec; a model that answers per job id,
OnlineModel, makes every job its own group), each sorted by remaining time. Within a group
t_con rises with the host's remaining time and the beneficial hosts are those above a threshold
(the pair's JCT difference is piecewise linear in e_b), so a group's best host is found by bisection
and the groups are visited in the order of an exact lower bound of their best t_con.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.model.job import JobSpec
from quanta.perf.base import allocation_rate, rate_with
from quanta.perf.online import OnlineModel
from quanta.perf.plan import ExecutionPlan
from quanta.perf.table import micro_type, table_for
from quanta.policies.base import Policy
from quanta.policies.registry import register
from quanta.policies.sjf_bsbf_pool import (
    SCREEN_ROWS,
    HostPool,
    ShareOptions,
    pair_times,
    spec_key,
)

PREEMPT_MIN_STEPS = 100.0   # the reference never preempts a job with this many iterations or fewer left


@register("sjf-bsbf", "SJF with best-sharing-benefit-first GPU sharing (share only if the pair's "
                      "average JCT drops; a job spans idle GPUs and beneficial running jobs of any "
                      "size, span=false: one of its size; accumulate=true: gradient accumulation "
                      "when memory is short; preempt=true: the reference's preemptive variant)")
@register("sjf-ffs", "SJF with first-fit GPU sharing (share whenever memory fits; span and preempt "
                     "as sjf-bsbf)", benefit=False)
@dataclass
class SjfSharing(Policy):
    benefit: bool = True
    accumulate: bool = False       # try sub-batches with gradient accumulation for the guest
    fraction_cap: bool = False     # a pair's requested GPU fractions must add up to <= 1
    span: bool = True              # idle GPUs + running jobs of any size (False: one of its size)
    preempt: bool = False          # the reference's preemptive variant (False: the paper's)

    def decide(self, snap: Snapshot) -> Decision:
        return _Pass(self, snap).run()

    # -- pair quantities ------------------------------------------------------------------------
    def _options(self, snap: Snapshot, a: JobSpec, b: JobSpec, gpu: str, na: int, nb: int,
                 plan_b=None) -> Iterator[tuple[int, float, float, float]]:
        """Ways `a` (na GPUs) can run packed beside `b` (nb GPUs, at its plan) on `gpu`, as (k,
        a's packed rate, b's packed rate, a's rate alone with that k): the full batch (k = 1) if
        the pair fits in memory, else every accumulation k > 1 that makes it fit."""
        if plan_b is None:
            ra = snap.perf.shared_rate(a, b, gpu, na, mode="pack")
            rb = snap.perf.shared_rate(b, a, gpu, nb, mode="pack")
        else:                                                  # b keeps a micro-batch
            try:
                ra = allocation_rate(snap.perf, a, gpu, na, partner=b, mode="pack",
                                     partner_plan=plan_b)
                rb = allocation_rate(snap.perf, b, gpu, nb, partner=a, mode="pack", plan=plan_b)
            except TypeError:                                  # a model that knows no plans
                ra = snap.perf.shared_rate(a, b, gpu, na, mode="pack")
                rb = snap.perf.shared_rate(b, a, gpu, nb, mode="pack")
        if ra > 0 and rb > 0:
            yield 1, ra, rb, snap.perf.rate(a, gpu, na)
            return                                             # fits: no accumulation
        yield from self._accumulated(snap, a, b, gpu, na, nb, plan_b=plan_b)

    def _accumulated(self, snap: Snapshot, a: JobSpec, b: JobSpec, gpu: str, na: int, nb: int,
                     only: int = 0, plan_b=None) -> Iterator[tuple[int, float, float, float]]:
        table = table_for(snap.perf, a, b) if self.accumulate else None
        if table is None:
            return
        kb, micro_b = micro_type(table, b, plan_b)
        for k, micro in table.accumulation_steps(a.job_type)[1:]:
            if only and k != only:
                continue
            fit_a = table.pack_slowdown(micro, micro_b, gpu)
            fit_b = table.pack_slowdown(micro_b, micro, gpu)
            if fit_a <= 0 or fit_b <= 0:
                continue                                       # still does not fit
            solo = table.accumulated_rate(a, k, micro, gpu, na)
            rate_b = table.rate(b, gpu, nb) if kb == 1 else \
                table.accumulated_rate(b, kb, micro_b, gpu, nb)
            yield k, solo * fit_a, rate_b * fit_b, solo

    def accumulation_ks(self, snap: Snapshot, a: JobSpec) -> list[int]:
        table = table_for(snap.perf, a) if self.accumulate else None
        return [k for k, _m in table.accumulation_steps(a.job_type)[1:]] if table else []


WAITING, KEPT = 0, 1


class _Pass:
    """One decision: the state of the pass over the jobs in SJF order."""

    def __init__(self, pol: SjfSharing, snap: Snapshot):
        self.pol, self.snap = pol, snap
        j = self.j = snap.jobs
        self.dec = Decision.empty(snap)
        self.dec.guests_inherit = True               # a preempted host's guest stays (no restart)
        self.free = snap.capacity.astype(np.int64).copy()
        self.types = snap.cluster.types
        self.remaining = j.remaining
        run = j.running
        self.alone_time = self.remaining / np.maximum(np.where(run, j.rate, j.best_rate), 1e-12)
        # a model that answers per job id (OnlineModel) makes every job a group of its own, and
        # its answers change as it learns: pair quantities are then kept for this pass only
        self.per_job = isinstance(snap.perf, OnlineModel)
        self.pool = HostPool(pol.benefit, self.per_job)
        if self.per_job:
            self.pairs: dict[tuple, list] = {}
        else:
            if getattr(pol, "_pairs_perf", None) is not snap.perf:
                pol._pairs_perf, pol._pairs = snap.perf, {}
            self.pairs = pol._pairs
        self.state = np.where(run, KEPT, WAITING)
        self.hosts_of: dict[int, dict[int, int]] = {}   # guest -> {host: GPUs shared}
        self.guests_on: dict[int, dict[int, int]] = {}  # host -> {guest: GPUs shared}
        self.own: dict[int, int] = {}                   # guest -> GPUs it owns (spanning)
        self.tables: dict[tuple, tuple] = {}     # (job kind, groups, k) -> (rows, n, options)
        self.akeys: dict[int, tuple] = {}

    # -- the pass ---------------------------------------------------------------------------------
    def run(self) -> Decision:
        j, dec = self.j, self.dec
        self._held()
        order = np.lexsort((j.rows, j.submit, self.alone_time))
        if self.pol.preempt:
            self._preemptive(order)
        else:
            for a in order[self.state[order] == WAITING].tolist():
                self._place(a)
        dec.order = order
        return dec

    def _held(self) -> None:
        """Running jobs keep their GPUs, plans and partners; running jobs that are no guest and
        have GPUs no guest uses are the hosts."""
        j, dec = self.j, self.dec
        run = np.flatnonzero(j.running)
        held_plan = getattr(j, "plan", None)         # plans held now (cores that track them)
        dec.gpus[run], dec.gpu_type[run] = j.gpus[run], j.gtype[run]
        if held_plan is not None:
            for i in run.tolist():
                if held_plan[i] is not None:
                    dec.plans[i] = held_plan[i]      # and its plan (no reconfiguration)
        guests = run[j.is_guest[run]]
        if guests.size:
            for g, parts in self._layouts(run, guests).items():
                self.hosts_of[g] = parts
                self.own[g] = int(j.gpus[g]) - sum(parts.values())
                for h, c in parts.items():
                    self.guests_on.setdefault(h, {})[g] = c
            pos = {int(r): i for i, r in enumerate(j.rows.tolist())}
            for g, parts in self.hosts_of.items():
                p = pos.get(int(j.partner[g]))
                self._set_share(g, p if p in parts else min(parts))
        for i in run.tolist():
            t = int(j.gtype[i])
            if i in self.hosts_of:
                self.free[t] -= self.own[i]
                continue
            self.free[t] -= int(j.gpus[i])
            self._host(i, float(self.alone_time[i]))

    def _layouts(self, run: np.ndarray, guests: np.ndarray) -> dict[int, dict[int, int]]:
        """{guest: {host: GPUs shared}} of the running guests whose hosts are running (a guest
        whose hosts left owns its GPUs)."""
        j = self.j
        out: dict[int, dict[int, int]] = {}
        if not self.pol.span:                        # whole same-size pairs: by partner
            pos = {int(r): i for i, r in enumerate(j.rows.tolist())}
            for g in guests.tolist():
                h = pos.get(int(j.partner[g]))
                if h is not None and j.running[h] and not j.is_guest[h] and \
                        int(j.rows[g]) == int(j.partner[h]):
                    out[g] = {h: int(j.gpus[g])}
            return out
        place = j.placement
        owner = np.full(self.snap.cluster.num_gpus, -1, dtype=np.int64)
        for i in run[~j.is_guest[run]].tolist():
            owner[place[i]] = i
        for g in guests.tolist():
            o = owner[place[g]]
            o = o[o >= 0]
            if o.size:
                hs, counts = np.unique(o, return_counts=True)
                out[g] = dict(zip(hs.tolist(), counts.tolist()))
        return out

    def _set_share(self, g: int, primary: int) -> None:
        """Write guest g's sharing into the decision (the plain form for one whole same-size
        host that has no other guest)."""
        parts = self.hosts_of[g]
        self.dec.share[g] = (primary, "pack")
        if len(parts) == 1 and self.own[g] == 0 and parts[primary] == int(self.dec.gpus[primary]) \
                == int(self.dec.gpus[g]):
            self.dec.span.pop(g, None)
        else:
            self.dec.span[g] = dict(parts)

    def _host(self, h: int, e: float | None = None) -> None:
        """Running job h (no guest) may host with the GPUs no guest uses (span=false: only if it
        has no guest); e: its remaining time alone (default: at the type it holds)."""
        j = self.j
        t, n = int(self.dec.gpu_type[h]), int(self.dec.gpus[h])
        used = self.guests_on.get(h)
        avail = n - (sum(used.values()) if used else 0)
        if avail <= 0 or (used and not self.pol.span):
            return
        if e is None:
            e = float(self.remaining[h] / max(float(j.rates[h, t]), 1e-12))
        self.pool.add(h, t, n, j.specs[h], e, float(j.submit[h]), avail, self.dec.plans.get(h))

    def _preemptive(self, order: np.ndarray) -> None:
        """The reference's `jobs_placement(is_preempt=True)`."""
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        kept = [r for r in order.tolist() if self.state[r] == KEPT]   # by rank
        for idx, a in enumerate(order.tolist()):
            if self.state[a] == KEPT or self._place(a):
                continue
            i = len(kept) - 1
            while i >= 0 and rank[kept[i]] > idx:
                v = kept[i]
                if self.remaining[v] <= PREEMPT_MIN_STEPS:
                    i -= 1
                    continue
                del kept[i]
                i -= 1
                self._evict(v)
                if self._place(a):
                    break

    def _evict(self, v: int) -> None:
        """Preempt running job v in this pass: its GPUs are free again, those it shared stay with
        the other job (a host's guest becomes their owner; a guest's hosts run without it)."""
        dec, pool = self.dec, self.pool
        t, n = int(dec.gpu_type[v]), int(dec.gpus[v])
        self.state[v] = WAITING
        dec.gpus[v], dec.gpu_type[v] = 0, -1
        dec.plans.pop(v, None)
        pool.remove(v)
        if v in self.hosts_of:                       # a guest: its hosts may host again
            parts = self.hosts_of.pop(v)
            self.free[t] += self.own.pop(v)
            dec.share.pop(v, None)
            dec.span.pop(v, None)
            for h in parts:
                self.guests_on[h].pop(v)
                if self.state[h] == KEPT:
                    pool.remove(h)
                    self._host(h)
            return
        guests = self.guests_on.pop(v, {})
        self.free[t] += n - sum(guests.values())
        for g, c in guests.items():                  # a host: its guests own what they shared
            parts = self.hosts_of[g]
            del parts[v]
            self.own[g] += c
            if parts:
                p = dec.share[g][0]
                self._set_share(g, p if p in parts else min(parts))
                continue
            del self.hosts_of[g]
            self.own.pop(g)
            dec.share.pop(g, None)
            dec.span.pop(g, None)
            if not self.j.running[g]:
                dec.plans.pop(g, None)               # starts alone now: at its full batch
            self._host(g)

    # -- placing one job ------------------------------------------------------------------------
    def _place(self, a: int) -> bool:
        j, dec = self.j, self.dec
        req = int(j.req[a])
        room = j.allowed[a] & (self.free >= req)
        if room.any():
            t = int(np.argmax(np.where(room, j.rates[a], -1.0)))
            dec.gpus[a], dec.gpu_type[a] = req, t
            self.free[t] -= req
            self.state[a] = KEPT
            self._host(a)                            # it may host a later job of this pass
            return True
        got = self._spanning(a) if self.pol.span else self._single(a)
        if got is None:
            return False
        t, parts, k = got
        dec.gpus[a], dec.gpu_type[a] = req, t
        own = req - sum(parts.values())
        self.free[t] -= own
        self.hosts_of[a], self.own[a] = parts, own
        for h, c in parts.items():
            self.guests_on.setdefault(h, {})[a] = c
            self.pool.take(h, c)
        self._set_share(a, next(iter(parts)))
        if k > 1:
            dec.plans[a] = ExecutionPlan(dp=req, ga_steps=k)
        self.state[a] = KEPT
        return True

    def _akey(self, a: int) -> tuple:
        key = self.akeys.get(a)
        if key is None:
            key = self.akeys[a] = spec_key(self.j.specs[a], self.per_job)
        return key

    def _table(self, a: int, where: tuple, gids: list[int], k: int | None) -> ShareOptions:
        """Option rows of job a's kind against the groups `gids` (named by `where`; groups are only
        ever added): k None = each host's own options (one host of a's size), else the options at
        k (spanning)."""
        j = self.j
        tkey = (self._akey(a), where, k)
        got = self.tables.get(tkey)
        if got is not None and got[1] == len(gids):
            return got[2]
        rows, done = (got[0], got[1]) if got is not None else ([], 0)
        pol, snap = self.pol, self.snap
        spec_a, na = j.specs[a], int(j.req[a])
        allowed = j.allowed[a]
        alone: dict[int, float] = {}
        for gid in gids[done:]:
            grp = self.pool.groups[gid]
            if not allowed[grp.t]:
                continue
            if pol.fraction_cap and spec_a.gpu_fraction + grp.spec.gpu_fraction > 1.0 + 1e-9:
                continue
            ckey = (tkey[0], k, grp.key)
            pairs = self.pairs.get(ckey)
            if pairs is None:
                pairs = []
                b, nb, gpu, pb = grp.spec, grp.n, self.types[grp.t], grp.plan
                if k is None:
                    opts_ = pol._options(snap, spec_a, b, gpu, na, nb, pb)
                elif k == 1:
                    opts_ = (o for o in pol._options(snap, spec_a, b, gpu, na, nb, pb) if o[0] == 1)
                else:
                    opts_ = pol._accumulated(snap, spec_a, b, gpu, na, nb, only=k, plan_b=pb)
                alone_b = None
                for kord, (kk, ra, rb, solo_a) in enumerate(opts_):
                    if alone_b is None:
                        alone_b = snap.perf.rate(b, gpu, nb) if pb is None else \
                            rate_with(snap.perf, b, gpu, nb, plan=pb)
                        if grp.t not in alone:
                            alone[grp.t] = snap.perf.rate(spec_a, gpu, na)
                    alone_a = alone[grp.t]
                    pairs.append((kk, kord, alone_a / ra, alone_b / rb, alone_a / solo_a))
                self.pairs[ckey] = pairs
            rows.extend((gid,) + o for o in pairs)
        opts = ShareOptions(rows, len(gids))
        self.tables[tkey] = (rows, len(gids), opts)
        return opts

    def _single(self, a: int) -> tuple[int, dict[int, int], int] | None:
        """One host of a's GPU count (span=false): the lowest t_con (sjf-ffs: the earliest host)."""
        req = int(self.j.req[a])
        gids = self.pool.by_n.get(req)
        if not gids:
            return None
        opts = self._table(a, ("n", req), gids, None)
        for _key, h, k in self._ranked(a, opts):
            return int(self.pool.where[h][0].t), {h: req}, k
        return None

    def _spanning(self, a: int) -> tuple[int, dict[int, int], int] | None:
        """Every idle GPU of a type plus GPUs of running jobs of any size on it, best first."""
        j = self.j
        req = int(j.req[a])
        allowed = np.flatnonzero(j.allowed[a])
        for t in allowed[np.argsort(-j.rates[a, allowed], kind="stable")].tolist():
            free = int(self.free[t])
            if free + self.pool.gpus_of_t.get(t, 0) < req:
                continue
            gids = self.pool.by_t.get(t)
            if not gids:
                continue
            got = self._fill(a, t, gids, 1, req - free)
            if got is None:
                best = None
                for k in self.pol.accumulation_ks(self.snap, j.specs[a]):
                    f = self._fill(a, t, gids, k, req - free)
                    if f is not None and (best is None or f[1] < best[1]):
                        best = f
                        if not self.pol.benefit:
                            break
                got = best
            if got is not None:
                parts, _worst, k = got
                return t, parts, k
        return None

    def _fill(self, a: int, t: int, gids: list[int], k: int, need: int
              ) -> tuple[dict[int, int], float, int] | None:
        opts = self._table(a, ("t", t), gids, k)
        parts: dict[int, int] = {}
        worst = -np.inf
        avail = self.pool.avail
        for key, h, _k in self._ranked(a, opts):
            c = min(avail[h], need)
            parts[h] = c
            worst = key[0]
            need -= c
            if need == 0:
                return parts, worst, k
        return None

    # -- hosts in order ---------------------------------------------------------------------------
    def _ranked(self, a: int, opts: ShareOptions) -> Iterator[tuple[tuple, int, int]]:
        """The hosts job a may share with, best first, as ((t_con, submit, row, option), host, k)
        (sjf-ffs: ((submit, row, option), host, k), arrival order)."""
        if not len(opts.gid):
            return
        if not self.pol.benefit:
            yield from self._ranked_ffs(opts)
            return
        e_a = float(self.alone_time[a])
        pool = self.pool
        n = len(opts.gid)
        if n >= SCREEN_ROWS:
            # the groups whose last host is beneficial, by a lower bound of their best t_con:
            # t_con at max(first host, benefit threshold) (t_con rises with e_b)
            thr = e_a * opts.ustar
            e_l = pool.last_e[opts.gid]
            live = np.flatnonzero((e_l < np.inf) & ((e_l >= thr * (1.0 - 1e-9)) | ~opts.mono))
            e = np.maximum(pool.first_e[opts.gid[live]], thr[live])
            lb = np.where(e <= opts.xab[live] * e_a, e * opts.a1[live] + e_a * opts.b1[live],
                          e * 0.5 + e_a * opts.b2[live])
            lb = np.where(opts.mono[live] & ~np.isnan(lb), lb * (1.0 - 1e-9) - 1e-9, -np.inf)
            srt = np.argsort(lb, kind="stable")
            cand = live[srt].tolist()
            lbs = lb[srt].tolist()
        else:
            cand = list(range(n))
            lbs = [-np.inf] * n
        heap: list = []
        nxt = 0
        while True:
            while nxt < len(cand) and (not heap or lbs[nxt] <= heap[0][0][0]):
                self._resolve(e_a, opts, cand[nxt], heap)
                nxt += 1
            if not heap:
                return
            key, cursor = heapq.heappop(heap)
            yield key, key[2], opts.k[cursor[0]]
            self._advance(e_a, opts, cursor, heap)

    def _resolve(self, e_a: float, opts: ShareOptions, q: int, heap: list) -> None:
        """Push option row q's first beneficial host (exact) with a cursor to the next ones."""
        items = self.pool.groups[int(opts.gid[q])].items
        if not items:
            return
        xa, xb, sa = float(opts.xa[q]), float(opts.xb[q]), float(opts.sa[q])
        if not opts.mono[q]:                         # no shortcut: every beneficial host, sorted
            good = []
            for e, sub, row in items:
                t_seq, t_con = pair_times(e_a, e, xa, xb, sa)
                if t_con < t_seq:
                    good.append((t_con, sub, row))
            good.sort()
            if good:
                t_con, sub, row = good[0]
                heapq.heappush(heap, ((t_con, sub, row, opts.kord[q]), (q, 0, good)))
            return
        t_seq, t_con = pair_times(e_a, items[0][0], xa, xb, sa)
        if t_con < t_seq:
            lo = 0
        else:
            t_seq, t_con = pair_times(e_a, items[-1][0], xa, xb, sa)
            if not t_con < t_seq:
                return
            lo, hi = 0, len(items) - 1             # items[lo] not beneficial, items[hi] is
            while hi - lo > 1:
                mid = (lo + hi) // 2
                ts, tc = pair_times(e_a, items[mid][0], xa, xb, sa)
                if tc < ts:
                    hi = mid
                else:
                    lo = mid
            lo = hi
            t_seq, t_con = pair_times(e_a, items[lo][0], xa, xb, sa)
        _e, sub, row = items[lo]
        heapq.heappush(heap, ((t_con, sub, row, opts.kord[q]), (q, lo, None)))

    def _advance(self, e_a: float, opts: ShareOptions, cursor: tuple, heap: list) -> None:
        q, i, good = cursor
        if good is not None:
            if i + 1 < len(good):
                t_con, sub, row = good[i + 1]
                heapq.heappush(heap, ((t_con, sub, row, opts.kord[q]), (q, i + 1, good)))
            return
        items = self.pool.groups[int(opts.gid[q])].items
        if i + 1 >= len(items):
            return
        e, sub, row = items[i + 1]
        t_seq, t_con = pair_times(e_a, e, float(opts.xa[q]), float(opts.xb[q]), float(opts.sa[q]))
        if t_con < t_seq:
            heapq.heappush(heap, ((t_con, sub, row, opts.kord[q]), (q, i + 1, None)))

    def _ranked_ffs(self, opts: ShareOptions) -> Iterator[tuple[tuple, int, int]]:
        """First fit: hosts in arrival order, each with its group's first option."""
        groups = self.pool.groups
        heap = []
        seen = set()
        for q in range(len(opts.gid)):
            gid = int(opts.gid[q])
            if gid in seen or not groups[gid].items:
                continue                             # a group's first option only
            seen.add(gid)
            sub, row = groups[gid].items[0]
            heap.append(((sub, row, opts.kord[q]), q, 0))
        heapq.heapify(heap)
        while heap:
            key, q, i = heapq.heappop(heap)
            yield key, key[1], opts.k[q]
            items = groups[int(opts.gid[q])].items
            if i + 1 < len(items):
                sub, row = items[i + 1]
                heapq.heappush(heap, ((sub, row, opts.kord[q]), q, i + 1))
