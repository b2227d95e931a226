"""Queues, quotas, fair share and priorities as a layer over any policy.

`QueueLayer(inner, tree)` is itself a policy: a pure function of the snapshot whose own state
(decayed usage, when each job last started, the inner policy's state) travels in Decision.state.
Each decision:

1. accounts the GPU-seconds every queue and user received since the last decision (weighted by
   GPU speed) into their decayed usage, and derives fair-share factors (quanta.queues.fairshare);
2. admits jobs against the quota tree, in order: first every queue within its own nominal quota
   (reclaiming it from borrowers when they hold it: borrowed jobs of the nearest queues first,
   lowest priority and latest started first, never a job under its minimum run time, after the
   grace), then borrowing of idle quota, queue by queue in fair-share order (lowest decayed usage
   per share first), with preemption of lower-priority jobs of the same queue or of lower-priority
   jobs on borrowed GPUs of the cohort when a job fits no other way. Within a queue jobs go by
   priority class, then a Slurm-like multifactor score (the user's fair-share factor and the
   job's age), then arrival; a job waiting longer than the queue's `starvation_s` goes first;
3. hands the inner policy, per queue (scope "queue"), the queue's running jobs, the jobs just
   admitted and the other waiting jobs of the lowest admitted priority class, with the GPUs per
   type the admission gave the queue as its capacity: the inner policy orders and places the
   queue's jobs within them. With scope "cluster" the inner policy gets every admitted job at
   once, the cluster's capacity, and only places them;
4. merges the inner decisions back, keeps running every job under its minimum run time that the
   inner policy would preempt, starts the jobs that must run (higher classes, preemptors,
   starving jobs), trims any queue over its GPUs (newest starts first), adds the preemptions
   for reclaim and priority, and says why each waiting job waits (Decision.reasons) and where it
   is in its queue (Decision.positions).
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
import math
from typing import Any

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import JobsView, Snapshot
from quanta.policies.base import Policy
from quanta.queues import fairshare as fs
from quanta.queues.spec import Compiled, QueueTree

INF = math.inf
HORIZON_S = 365 * 86400.0        # estimated starts further away than this are not given
_ROWWISE = None                  # names of JobsView columns that are per-row arrays (filled lazily)


def subview(jobs: JobsView, idx: np.ndarray, **override: Any) -> JobsView:
    """The jobs at positions `idx` of `jobs` as a JobsView of their own: columns already read are
    sliced (so overrides made by an outer wrapper survive), the rest read lazily from the table;
    `override` replaces columns (e.g. allowed types)."""
    v = JobsView.__new__(JobsView)
    v._t, v._now = jobs._t, jobs._now
    v.rows = jobs.rows[idx]
    v.all_specs = jobs.all_specs
    n = len(jobs.rows)
    il = None
    for name, val in jobs.__dict__.items():
        if name in ("_t", "_now", "rows", "all_specs") or name in override:
            continue
        if isinstance(val, np.ndarray) and val.shape[:1] == (n,):
            v.__dict__[name] = val[idx]
        elif isinstance(val, tuple) and len(val) == n:
            il = idx.tolist() if il is None else il
            v.__dict__[name] = tuple(val[i] for i in il)
    v.__dict__.update(override)
    return v


@dataclasses.dataclass
class _Plan:
    """What the admission decided (positions are snapshot rows)."""
    leaf: np.ndarray              # (n,) leaf position, -1: no queue
    cand: np.ndarray              # (n,) bool: handed to the inner policy
    admitted_k: np.ndarray        # (n,) type a waiting job was admitted on (-1 none)
    must: np.ndarray              # (n,) bool: must run (higher class, preemptor, starving)
    victim: np.ndarray            # (n,) 0 none, 1 reclaim, 2 priority
    protected: np.ndarray         # (n,) bool: running and under its minimum run time
    budget: np.ndarray            # (L, K) GPUs per type each queue holds after admission
    reasons: dict[int, str]
    rank: np.ndarray              # (n,) position in the layer's order (lower first)
    room_final: np.ndarray        # (L, K) GPUs each queue could still take
    wake: float                   # when a waiting reclaim may proceed (inf: none)
    F: np.ndarray                 # (N,) fair-share factor per queue
    guest: np.ndarray             # (n,) bool: runs as a guest on another job's GPUs
    prio: np.ndarray              # (n,) priority (class value) of each job
    # (L,) GPUs each queue may hold in all: what the admission gave it (fair share decides who
    # borrows first) and the room nobody's waiting job could use
    total: np.ndarray
    room_after: np.ndarray | None = None   # (L, K) room left in the quotas after the decision


class QueueLayer(Policy):
    """Queues, quotas, fair share and priorities around `inner` (see the module docstring)."""

    def __init__(self, inner: Policy, tree: QueueTree, scope: str | None = None,
                 overflow: int = 512) -> None:
        self.inner = inner
        self.tree = tree
        self.scope = scope or tree.config.scope
        if self.scope not in ("queue", "cluster"):
            from quanta.errors import QuantaError
            raise QuantaError(f"queue layer scope '{self.scope}' is not queue or cluster")
        self.overflow = int(overflow)      # most extra waiting jobs per queue shown to the inner
        self.name = f"{inner.label()}+queues"
        self.interval = inner.interval
        self._specs_id = None
        self._leaf: list[int] = []         # per driver row: leaf position (-1 none)
        self._prio: list[int] = []
        self._user: list[str] = []
        self._ckpt: list[tuple[float, float]] = []   # (checkpoint_s, checkpoint_every steps)

    def __getattr__(self, name):           # mixes_types and whatever else a driver asks
        if name.startswith("_") or name in ("inner", "tree", "scope", "overflow"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def label(self) -> str:
        return self.name

    # -- per-row facts (cached per driver row: specs never change queue, user or priority) -------
    def _facts(self, jobs: JobsView) -> tuple[np.ndarray, np.ndarray, list[str]]:
        specs = jobs.all_specs
        if self._specs_id != id(specs) or len(self._leaf) > len(specs):
            self._specs_id = id(specs)
            self._leaf, self._prio, self._user, self._ckpt = [], [], [], []
        tree = self.tree
        for s in specs[len(self._leaf):]:
            q = tree.queue_of(s)
            self._leaf.append(tree.leaf_pos[q] if q >= 0 else -1)
            self._prio.append(int(s.priority))
            self._user.append(s.user)
            self._ckpt.append((float(getattr(s, "checkpoint_s", 0.0) or 0.0),
                               float(getattr(s, "checkpoint_every", 0) or 0)))
        rows = jobs.rows.tolist()
        leaf = np.fromiter((self._leaf[r] for r in rows), dtype=np.int64, count=len(rows))
        prio = np.fromiter((self._prio[r] for r in rows), dtype=np.int64, count=len(rows))
        return leaf, prio, [self._user[r] for r in rows]

    # -- the policy ---------------------------------------------------------------------------------
    def decide(self, snap: Snapshot) -> Decision:
        return self._decide(snap, snap.state or {})

    def explain(self, snap: Snapshot) -> Decision:
        """The decision `decide` would take, without touching the inner policy's state (some
        policies update the state they are handed): for `quanta queues` on a live snapshot."""
        return self._decide(snap, copy.deepcopy(snap.state or {}))

    def _decide(self, snap: Snapshot, st: dict) -> Decision:
        tree, jobs, now = self.tree, snap.jobs, snap.now
        comp = tree.compile(snap.cluster.types)
        leaf, prio, users = self._facts(jobs)
        usage, uusage, totals = self._account(snap, st, comp)
        plan = self._admit(snap, st, comp, leaf, prio, users, usage, uusage)
        dec, inner_state, inner_wake = self._run_inner(snap, st, plan)
        self._enforce(snap, dec, plan, comp)
        self._explain_waiting(snap, dec, plan, comp)
        wake = min(plan.wake, inner_wake if inner_wake is not None else INF)
        dec.wake_at = wake if now < wake < INF else None
        dec.state = self._next_state(snap, st, dec, plan, comp, usage, uusage, totals, inner_state)
        return dec

    # -- 1. accounting ------------------------------------------------------------------------------
    def _account(self, snap: Snapshot, st: dict, comp: Compiled
                 ) -> tuple[dict[str, float], dict[str, float], dict[str, dict]]:
        tree, jobs, now = self.tree, snap.jobs, snap.now
        H = tree.config.fairshare.half_life_h * 3600.0
        t_prev = st.get("t")
        usage = dict(st.get("usage", {}))
        uusage = dict(st.get("uusage", {}))
        totals = {q: {"gpu_s": list(v["gpu_s"]), "borrowed_s": list(v["borrowed_s"]),
                      "reclaims": v["reclaims"], "priority_preemptions": v["priority_preemptions"]}
                  for q, v in st.get("totals", {}).items()}
        prev = st.get("prev")
        if t_prev is None or now <= t_prev:
            return usage, uusage, totals
        dt = now - t_prev
        usage = fs.decay(usage, dt, H)
        uusage = fs.decay(uusage, dt, H)
        if prev is None or not len(prev["rows"]) or st.get("types") != list(comp.types):
            return usage, uusage, totals
        rows, g, k = prev["rows"], prev["gpus"], prev["type"]
        order = np.argsort(jobs.rows, kind="stable")
        srt = jobs.rows[order]
        at = np.searchsorted(srt, rows)
        at_c = np.minimum(at, max(len(srt) - 1, 0))
        live = (at < len(srt)) & (srt[at_c] == rows) if len(srt) else np.zeros(len(rows), bool)
        # jobs that ended since: an event-driven policy is asked at every completion, so they
        # ran until now; a round-based one is not: until their estimated end
        end = now if self.interval is None else np.minimum(now, prev["end"])
        got = g * np.clip(end - t_prev, 0.0, dt)
        if live.any():
            pos = order[at_c[live]]
            got[live] = np.maximum(jobs.attained[pos] - prev["att"][live], 0.0)
        mid = 0.5 ** (dt / (2 * H))
        w = got * comp.speed[k] * mid
        K = len(comp.types)
        L = tree.num_leaves
        lf = np.fromiter((self._leaf[r] for r in rows.tolist()), dtype=np.int64, count=len(rows))
        ok = lf >= 0
        per = np.zeros((L, K))
        np.add.at(per, (lf[ok], k[ok]), got[ok])
        wq = np.bincount(lf[ok], weights=w[ok], minlength=L)
        for li in np.flatnonzero(wq > 0).tolist():
            name = tree.names[tree.leaves[li]]
            usage[name] = usage.get(name, 0.0) + float(wq[li])
        for r, wi, li in zip(rows[ok].tolist(), w[ok].tolist(), lf[ok].tolist()):
            if wi > 0:
                key = fs.user_key(tree.names[tree.leaves[li]], self._user[r])
                uusage[key] = uusage.get(key, 0.0) + wi
        nom = comp.nominal_total[tree.leaves]
        for li in np.flatnonzero(per.sum(axis=1) > 0).tolist():
            name = tree.names[tree.leaves[li]]
            tot = totals.setdefault(name, _new_totals(K))
            borrowed = np.maximum(per[li] / dt - nom[li], 0.0) * dt
            tot["gpu_s"] = (np.asarray(tot["gpu_s"]) + per[li]).tolist()
            tot["borrowed_s"] = (np.asarray(tot["borrowed_s"]) + borrowed).tolist()
        return usage, uusage, totals

    # -- 2. admission -------------------------------------------------------------------------------
    def _admit(self, snap: Snapshot, st: dict, comp: Compiled, leaf: np.ndarray, prio: np.ndarray,
               users: list[str], usage: dict[str, float], uusage: dict[str, float]) -> _Plan:
        tree, jobs, now = self.tree, snap.jobs, snap.now
        cfg = tree.config
        n, K, L = len(jobs), len(comp.types), tree.num_leaves
        running = jobs.running
        guest = jobs.is_guest if running.any() else np.zeros(n, dtype=bool)
        mapped = leaf >= 0
        lf0 = np.where(mapped, leaf, 0)
        allowed = jobs.allowed & comp.usable[lf0] & mapped[:, None]
        req = jobs.req
        # fair share: queues (classic factor) and users within each queue
        F, UE, S = fs.classic(tree, usage)
        total_u = float(sum(usage.values()))
        shares = {u: m.shares for u, m in cfg.users.items()}
        ufac = np.ones(n)
        by_leaf_users: dict[int, set[str]] = {}
        for li, u in zip(leaf.tolist(), users):
            if li >= 0:
                by_leaf_users.setdefault(li, set()).add(u)
        for li, us in by_leaf_users.items():
            q = tree.leaves[li]
            name = tree.names[q]
            f = fs.user_factors(name, sorted(us), shares, uusage, total_u, float(UE[q]), float(S[q]))
            sel = np.flatnonzero(leaf == li)
            ufac[sel] = [f[users[i]] for i in sel.tolist()]
        age = np.maximum(now - jobs.submit, 0.0)
        fsc = cfg.fairshare
        score = fsc.weight_fairshare * ufac + fsc.weight_age * np.minimum(
            age / (fsc.max_age_h * 3600.0), 1.0)
        starv = np.where(mapped, tree.starvation[tree.leaves_arr[lf0]], INF)
        starving = ~running & (jobs.waiting_since <= now - starv)
        # the layer's order: queue, priority class, starving first, score, arrival, row
        rank_order = np.lexsort((jobs.rows, jobs.submit, -score, ~starving, -prio, leaf))
        rank = np.empty(n, dtype=np.int64)
        rank[rank_order] = np.arange(n)
        # protection: minimum run time since the job's last (re)start, its checkpoint interval
        since_st = st.get("since", {})
        protected = np.zeros(n, dtype=bool)
        run_idx = np.flatnonzero(running)
        if run_idx.size:
            minrt = np.where(mapped, tree.min_runtime[tree.leaves_arr[lf0]],
                             cfg.preemption.min_runtime_s)
            resume = jobs.resume_at
            rate = jobs.rate
            ckpt = self._ckpt
            hold_until = np.zeros(n)
            start_t = np.zeros(n)
            for i, r in zip(run_idx.tolist(), jobs.rows[run_idx].tolist()):
                since = since_st.get(r)
                if since is None:
                    since = min(now, float(resume[i]))
                start_t[i] = since
                need = float(minrt[i])
                ck = _checkpoint_s(ckpt[r], float(rate[i]))
                if ck > need:
                    need = ck
                hold_until[i] = since + need
            protected = running & (hold_until > now)
        else:
            hold_until = np.zeros(n)
            start_t = np.zeros(n)
        # tree state: S per node (a leaf's usage; a cohort's the sum of its children's effective
        # usage, E = max(S, reserved)), physical use per type
        parts = jobs.parts if run_idx.size else np.zeros((n, K), dtype=np.int64)
        held = np.where((running & ~guest)[:, None], parts, 0)
        U = np.zeros((L, K))
        ok_run = mapped & running & ~guest
        np.add.at(U, leaf[ok_run], held[ok_run])
        ts = _TreeState(tree, comp, snap.capacity, U, held.sum(axis=0))
        S_, phys, cap, G, phys_cap = ts.S, ts.phys, ts.cap, ts.G, ts.phys_cap
        room, add = ts.room, ts.add
        nomt = comp.nominal_total.tolist()
        paths = tree.paths
        tops = tree.leaf_top

        flv = comp.flavor_order
        cand = np.zeros(n, dtype=bool)
        cand[run_idx] = True
        adm_k = np.full(n, -1, dtype=np.int64)
        must = np.zeros(n, dtype=bool)
        victim = np.zeros(n, dtype=np.int8)
        reasons: dict[int, str] = {}
        wake = INF
        pre = cfg.preemption
        rows_d = jobs.rows
        gt = jobs.gtype
        mixed = jobs.mixed if run_idx.size else np.zeros(n, dtype=bool)
        # running jobs as possible victims: per leaf, a job is "borrowed" when it sits beyond the
        # queue's nominal quota of its type, counting its jobs by priority (high first) then by
        # start (first started first)
        borrowed = np.zeros(n, dtype=bool)
        vict_ok = running & ~guest & ~mixed & mapped
        vi = np.flatnonzero(vict_ok)
        if vi.size:
            o = vi[np.lexsort((start_t[vi], -prio[vi], gt[vi], leaf[vi]))]
            lk = leaf[o] * K + gt[o]
            g_o = jobs.gpus[o].astype(float)
            cum = np.cumsum(g_o)
            starts = np.r_[0, np.flatnonzero(np.diff(lk)) + 1]
            base = np.repeat(cum[starts] - g_o[starts], np.diff(np.r_[starts, len(o)]))
            cum_in = cum - base
            nom_lk = np.array(nomt)[tree.leaves_arr[leaf[o]], gt[o]]
            borrowed[o] = cum_in > nom_lk + 1e-9
        # victims: eligible running jobs in the base preemption order (lowest priority, then the
        # latest started, then the highest row first), split by (top-level queue, type)
        close = tree.closeness()
        vorder = vi[np.lexsort((-rows_d[vi], -start_t[vi], prio[vi]))] if vi.size else vi
        top_arr = np.array(tops, dtype=np.int64)
        vgroups: dict[tuple[int, int], np.ndarray] = {}
        if vorder.size:
            gkey = top_arr[leaf[vorder]] * K + gt[vorder]
            srt = np.argsort(gkey, kind="stable")
            gk = gkey[srt]
            cuts = np.flatnonzero(np.diff(gk)) + 1
            for seg in np.split(srt, cuts):
                vgroups[(int(gkey[seg[0]]) // K, int(gkey[seg[0]]) % K)] = vorder[seg]
        gpus_l = jobs.gpus.tolist()
        prio_l = prio.tolist()
        leaf_l = leaf.tolist()
        recl_lower = pre.reclaim == "lower_priority"
        within = pre.within_queue != "never"
        bwc = pre.borrow_within_cohort != "never"

        def try_preempt(i: int, li: int, k: int, a: float, kind: str) -> tuple[bool, float]:
            """Preempt running jobs so that job i (leaf li) fits a GPUs of type k. kind:
            'reclaim' (borrowed jobs of other queues of its tree), 'priority' (lower-priority
            jobs of its queue, lower-priority borrowed jobs of its tree). Returns (done, earliest
            time a protected job that would have been taken may be)."""
            grp = vgroups.get((tops[li], k))
            if grp is None or (kind == "reclaim" and pre.reclaim == "never"):
                return False, INF
            p = prio_l[i]
            lv = leaf[grp]
            m = victim[grp] == 0
            if kind == "reclaim":
                m &= (lv != li) & borrowed[grp]
                if recl_lower:
                    m &= prio[grp] < p
            else:
                m &= prio[grp] < p
                m &= ((lv == li) & within) | ((lv != li) & borrowed[grp] & bwc)
            pr = m & protected[grp]
            blocked = float(hold_until[grp[pr]].min()) if pr.any() else INF
            m &= ~protected[grp]
            c = grp[m]
            if not c.size:
                return False, blocked
            if float(jobs.gpus[c].sum()) + room(li, k) < a - 1e-9:
                return False, blocked
            # borrowed jobs of other queues first (the nearest queues first), then the queue's own
            own = leaf[c] == li
            c = c[np.lexsort((-close[li, leaf[c]], own))]
            taken = []
            for v in c.tolist():
                add(leaf_l[v], k, -gpus_l[v])
                taken.append(v)
                if room(li, k) >= a - 1e-9:
                    break
            if room(li, k) < a - 1e-9:
                for v in taken:
                    add(leaf_l[v], k, gpus_l[v])
                return False, blocked
            for v in reversed(taken[:-1]):      # give back the ones not needed after all
                add(leaf_l[v], k, gpus_l[v])
                if room(li, k) >= a - 1e-9:
                    taken.remove(v)
                else:
                    add(leaf_l[v], k, -gpus_l[v])
            for v in taken:
                victim[v] = 1 if kind == "reclaim" else 2
                cand[v] = False
            return True, blocked

        def admit(i: int, li: int, k: int, a: float) -> None:
            add(li, k, a)
            cand[i] = True
            adm_k[i] = k

        # waiting jobs per leaf, in the layer's order
        wait = np.flatnonzero(~running & mapped)
        wait = wait[np.argsort(rank[wait], kind="stable")]
        wl = leaf[wait]
        bounds = np.searchsorted(wl, np.arange(L + 1))
        S0 = [row[:] for row in S_]
        phys0 = phys[:]
        req_l = req.tolist()
        allowed_l = allowed.tolist()
        starving_l = starving.tolist()
        deferred: list[list[int]] = [[] for _ in range(L)]
        grace = pre.reclaim_grace_s
        waiting_since = jobs.waiting_since.tolist()
        leaf_nodes = tree.leaves
        # phase 1: each queue within its own nominal quota (fair-share order among queues)
        qorder = sorted(range(L), key=lambda li: (-F[leaf_nodes[li]], li))
        reclaim_failed: dict[tuple[int, int], float] = {}
        for li in qorder:
            js = wait[bounds[li]:bounds[li + 1]].tolist()
            if not js:
                continue
            q = leaf_nodes[li]
            kl = flv[li]
            nom = nomt[q]
            suf = np.minimum.accumulate(req[js][::-1])[::-1].tolist()
            for pos, i in enumerate(js):
                head = max((nom[k] - S_[q][k] for k in kl), default=0.0)
                if head < suf[pos]:
                    deferred[li].extend(js[pos:])
                    break
                a = float(req_l[i])
                row_ok = allowed_l[i]
                ks = [k for k in kl if row_ok[k]]
                done = False
                entitled = -1
                for k in ks:
                    if S_[q][k] + a <= nom[k] + 1e-9:
                        if room(li, k) >= a - 1e-9:
                            admit(i, li, k, a)
                            done = True
                            break
                        if entitled < 0:
                            entitled = k
                if not done and entitled >= 0:
                    k = entitled
                    if a >= reclaim_failed.get((li, k), INF):
                        deferred[li].append(i)
                        continue
                    if grace > 0 and now - waiting_since[i] < grace:
                        reasons[i] = "WaitingForReclaim"
                        wake = min(wake, waiting_since[i] + grace)
                        deferred[li].append(i)
                        continue
                    ok, blocked = try_preempt(i, li, k, a, "reclaim")
                    if ok:
                        admit(i, li, k, a)
                        must[i] = True
                        done = True
                    else:
                        reclaim_failed[(li, k)] = a
                        if blocked < INF:
                            reasons[i] = "WaitingForReclaim"
                            wake = min(wake, blocked)
                if not done:
                    deferred[li].append(i)
                elif starving_l[i]:
                    must[i] = True
        # phase 2: borrowing, one job at a time from the queue with the lowest fair-share key:
        # (decayed usage + what its borrowed GPUs would add over one mean lifetime) / share
        tau = (cfg.fairshare.half_life_h * 3600.0) / math.log(2.0)
        speed = comp.speed.tolist()
        heap = []
        ptr = [0] * L
        Uleaf = np.array([usage.get(tree.names[q], 0.0) for q in leaf_nodes])
        Sleaf = S[leaf_nodes]

        def borrowed_w(li: int) -> float:
            q = leaf_nodes[li]
            return sum(max(S_[q][k] - nomt[q][k], 0.0) * speed[k] for k in range(K))

        def key(li: int) -> float:
            return (float(Uleaf[li]) + tau * borrowed_w(li)) / max(float(Sleaf[li]), 1e-12)

        for li in range(L):
            if deferred[li]:
                heapq.heappush(heap, (key(li), li))
        pr_ok = pre.within_queue != "never" or pre.borrow_within_cohort != "never"
        fail_prio: dict[tuple[int, int], tuple[float, int]] = {}
        # lowest priority among the running jobs preemption could take, per top-level queue
        vmin: dict[int, int] = {}
        for (t, _k), grp in vgroups.items():
            ps = prio[grp][~protected[grp]]
            if ps.size:
                vmin[t] = min(vmin.get(t, 1 << 62), int(ps.min()))
        suf_req: list[list[float]] = []
        suf_pri: list[list[int]] = []
        for li in range(L):
            js = deferred[li]
            if js:
                suf_req.append(np.minimum.accumulate(req[js][::-1])[::-1].tolist())
                suf_pri.append(np.maximum.accumulate(prio[js][::-1])[::-1].tolist())
            else:
                suf_req.append([])
                suf_pri.append([])
        while heap:
            _kv, li = heapq.heappop(heap)
            js = deferred[li]
            q = leaf_nodes[li]
            kl = flv[li]
            lowv = vmin.get(tops[li])
            can_pre = pr_ok and lowv is not None
            rooms = [room(li, k) for k in kl]     # constant until this queue admits a job
            mr = max(rooms, default=0.0)
            sr, sp = suf_req[li], suf_pri[li]
            while ptr[li] < len(js):
                at = ptr[li]
                if sr[at] > mr + 1e-9 and (not can_pre or sp[at] <= lowv):
                    ptr[li] = len(js)          # nothing further of this queue can fit
                    break
                i = js[at]
                ptr[li] += 1
                if i in reasons:                   # waiting for reclaim: keeps its place
                    continue
                a = float(req_l[i])
                row_ok = allowed_l[i]
                if a <= mr + 1e-9:
                    got = next((k for k, rk in zip(kl, rooms) if row_ok[k] and rk >= a - 1e-9), -1)
                    if got >= 0:
                        admit(i, li, got, a)
                        if starving_l[i]:
                            must[i] = True
                        heapq.heappush(heap, (key(li), li))
                        break
                if can_pre and prio_l[i] > lowv:
                    for k in kl:
                        if not row_ok[k]:
                            continue
                        last = fail_prio.get((li, k))
                        if last is not None and a >= last[0] and prio_l[i] <= last[1]:
                            continue
                        ok, _blocked = try_preempt(i, li, k, a, "priority")
                        if ok:
                            admit(i, li, k, a)
                            must[i] = True
                            break
                        fail_prio[(li, k)] = (a, prio_l[i])
                    if cand[i]:
                        heapq.heappush(heap, (key(li), li))
                        break
        # budgets: what each queue holds after admission
        Sf = np.array(S_)
        budget = Sf[leaf_nodes].copy()
        room_final = np.minimum(tree.rooms(comp, Sf), snap.capacity - np.asarray(phys))
        # must run: jobs admitted in a higher class than the lowest class admitted in their queue
        adm = np.flatnonzero(adm_k >= 0)
        low = np.full(L, np.iinfo(np.int64).max)
        kept = np.flatnonzero(running & mapped & (victim == 0))
        for arr in (adm, kept):
            if arr.size:
                np.minimum.at(low, leaf[arr], prio[arr])
        if adm.size:
            must[adm] |= prio[adm] > low[leaf[adm]]
        # overflow: other waiting jobs of the lowest admitted class, for the inner policy to
        # choose among
        if self.overflow > 0:
            rest = np.flatnonzero(~running & mapped & ~cand & (victim == 0))
            if rest.size:
                most = budget + np.maximum(room_final, 0.0)
                fitsb = (allowed[rest] & (most[leaf[rest]] >= req[rest, None] - 1e-9)).any(axis=1)
                fitsb &= req[rest] <= most.sum(axis=1)[leaf[rest]] + 1e-9
                ok = fitsb & (prio[rest] >= low[leaf[rest]]) & (low[leaf[rest]] < np.iinfo(np.int64).max)
                ok &= np.array([i not in reasons for i in rest.tolist()], dtype=bool)
                rest = rest[ok]
                rest = rest[np.argsort(rank[rest], kind="stable")]
                if self.overflow >= 0 and rest.size:
                    lr = leaf[rest]
                    first = np.searchsorted(lr, lr, side="left")
                    rest = rest[np.arange(len(rest)) - first < self.overflow]
                cand[rest] = True
        # why the others wait: against the usage before this decision's admissions
        self._static_reasons(jobs, reasons, cand, victim, running, mapped, leaf, allowed, req,
                             S0, phys0, cap, G, phys_cap, paths, comp, adm_k, K, L, S_, phys)
        return _Plan(leaf, cand, adm_k, must, victim, protected, budget, reasons, rank,
                     room_final, wake, F, guest, prio,
                     budget.sum(axis=1) + np.maximum(room_final, 0.0).sum(axis=1))

    def _static_reasons(self, jobs, reasons, cand, victim, running, mapped, leaf, allowed, req,
                        S0, phys0, cap, G, phys_cap, paths, comp, adm_k, K, L, S_f,
                        phys_f) -> None:
        """Why the waiting jobs the admission did not take wait: there is room for them in their
        queue's quota but jobs ahead took their turn (Priority); the quotas have room but the
        cluster has not (Resources); there was room to borrow before this decision and other
        queues, ahead by fair share, borrowed it (FairShare); else their queue is at its quota, or
        its cohort has nothing to lend (QuotaExceeded(queue, type))."""
        tree = self.tree
        idx = np.flatnonzero(~running & (adm_k < 0) & (victim == 0))
        if reasons:
            idx = idx[np.fromiter((i not in reasons for i in idx.tolist()), dtype=bool,
                                  count=len(idx))]
        if not idx.size:
            return
        S0a, Sfa = np.asarray(S0), np.asarray(S_f)
        tree_room0 = tree.rooms(comp, S0a)
        room0 = np.minimum(tree_room0, np.asarray(phys_cap) - np.asarray(phys0))
        tree_room_f = tree.rooms(comp, Sfa)
        room_f = np.minimum(tree_room_f, np.asarray(phys_cap) - np.asarray(phys_f))
        # types other queues of the same tree borrowed in this decision
        a = np.flatnonzero(adm_k >= 0)
        borrowed_by_others = np.zeros((L, K), dtype=bool)
        if a.size:
            tops = np.array(tree.leaf_top)
            nom = np.asarray(comp.nominal_total)[tree.leaves_arr]
            S_leaf = Sfa[tree.leaves_arr]
            borrowing = S_leaf > nom + 1e-9                      # (L, K) over nominal now
            got = np.zeros((L, K), dtype=bool)
            got[leaf[a], adm_k[a]] = True
            lend = got & borrowing
            for li in range(L):
                others = (tops == tops[li]) & (np.arange(L) != li)
                borrowed_by_others[li] = lend[others].any(axis=0)
        names, types = tree.names, comp.types
        lf = leaf[idx]
        un = idx[lf < 0]
        for i in un.tolist():
            reasons[i] = f"NoQueue({jobs.specs[i].queue})"
        idx, lf = idx[lf >= 0], lf[lf >= 0]
        ok = allowed[idx]
        r = req[idx].astype(float)[:, None]
        none = ~ok.any(axis=1)
        for i, li in zip(idx[none].tolist(), lf[none].tolist()):
            want = [t for t in types if not jobs.specs[i].gpu_types or t in jobs.specs[i].gpu_types]
            reasons[i] = f"QuotaExceeded({names[tree.leaves[li]]}, {want[0] if want else types[0]})"
        idx, lf, ok, r = idx[~none], lf[~none], ok[~none], r[~none]
        fit0 = (ok & (room0[lf] >= r - 1e-9)).any(axis=1)
        fitf = (ok & (room_f[lf] >= r - 1e-9)).any(axis=1)
        phys = (ok & (tree_room_f[lf] >= r - 1e-9)).any(axis=1)
        lent = (ok & borrowed_by_others[lf]).any(axis=1)
        kbest = np.argmax(np.where(ok, tree_room_f[lf], -INF), axis=1)
        for i, li, f0, ff, ph, le, k in zip(idx.tolist(), lf.tolist(), fit0.tolist(),
                                            fitf.tolist(), phys.tolist(), lent.tolist(),
                                            kbest.tolist()):
            if ff:
                reasons[i] = "Priority"
            elif ph:
                reasons[i] = "Resources"
            elif f0 and le:
                reasons[i] = "FairShare"
            else:
                reasons[i] = f"QuotaExceeded({names[tree.leaves[li]]}, {types[k]})"

    # -- 3. the inner policy --------------------------------------------------------------------------
    def _run_inner(self, snap: Snapshot, st: dict, plan: _Plan
                   ) -> tuple[Decision, dict, float | None]:
        """The inner policy's decision on the candidates: per queue with the queue's GPUs as
        capacity (scope queue), or once for all queues with their GPUs together (scope cluster)."""
        jobs = snap.jobs
        n = len(jobs)
        inner_st = st.get("inner", {})
        out_state = dict(inner_st)
        dec = Decision.empty(snap)
        running = jobs.running
        # running jobs of no queue keep what they hold
        keep = np.flatnonzero(running & (plan.leaf < 0))
        dec.gpus[keep] = jobs.gpus[keep]
        dec.gpu_type[keep] = jobs.gtype[keep]
        node_free = snap.node_free
        vic = np.flatnonzero(plan.victim > 0)
        if vic.size:
            node_free = node_free.copy()
            gpu_node = snap.cluster.gpu_node
            for i in vic.tolist():
                np.add.at(node_free, gpu_node[jobs.placement[i]], 1)
        cand = plan.cand & (plan.leaf >= 0)
        most = np.floor(plan.budget + np.maximum(plan.room_final, 0.0) + 1e-9)
        usable = self.tree.compile(snap.cluster.types).usable
        groups: list[tuple[str, np.ndarray, np.ndarray]] = []
        if self.scope == "queue":
            ci = np.flatnonzero(cand)
            ci = ci[np.argsort(plan.leaf[ci], kind="stable")]
            lc = plan.leaf[ci]
            cuts = np.flatnonzero(np.diff(lc)) + 1
            parts = {int(seg_l[0]): seg for seg, seg_l in zip(np.split(ci, cuts), np.split(lc, cuts))
                     if len(seg)}
            for li in sorted(parts, key=lambda li: (-plan.F[self.tree.leaves[li]], li)):
                capq = np.minimum(most[li], snap.capacity).astype(np.int64)
                groups.append((self.tree.names[self.tree.leaves[li]], np.sort(parts[li]), capq))
        else:
            idx = np.flatnonzero(cand)
            if idx.size:
                capq = snap.capacity.copy()
                groups.append(("*", idx, capq))
        wake: float | None = None
        orders: list[np.ndarray] = []
        tot_cap = max(int(snap.capacity.sum()), 1)
        res = snap.resources
        for key, idx, capq in groups:
            allowed = jobs.allowed[idx] & usable[plan.leaf[idx]]
            run = running[idx]
            if run.any():      # a running job may keep its type
                r = np.flatnonzero(run)
                allowed[r, jobs.gtype[idx[r]]] = True
            sub = subview(jobs, idx, allowed=allowed, rates=jobs.rates[idx] * allowed)
            share = float(capq.sum()) / tot_cap
            ssnap = dataclasses.replace(snap, jobs=sub, capacity=capq, node_free=node_free,
                                        state=inner_st.get(key) or {},
                                        resources=(res[0] * share, res[1] * share),
                                        network=snap.network * share)
            d = self.inner.decide(ssnap)
            if d.state is not None:
                out_state[key] = d.state
            if d.wake_at is not None:
                wake = d.wake_at if wake is None else min(wake, d.wake_at)
            dec.gpus[idx] = d.gpus
            dec.gpu_type[idx] = np.where(d.gpus > 0, d.gpu_type, -1)
            orders.append(idx[np.asarray(d.order, dtype=np.int64)] if d.order is not None else
                          None)
            _merge_extras(dec, d, idx, n)
        if any(o is not None for o in orders):
            # the inner policies' orders (a group without one: its rows in order), then the rest
            merged = np.concatenate([o if o is not None else idx for o, (_k, idx, _c) in
                                     zip(orders, groups)])
            rest = np.ones(n, dtype=bool)
            rest[merged] = False
            dec.order = np.concatenate([merged, np.flatnonzero(rest)]).astype(np.int64)
        # else: the mechanism's own order (biggest first, then by row), as without the layer
        if dec.exact and len(groups) > 1:
            self._drop_exact_conflicts(snap, dec)
        return dec, out_state, wake

    def _drop_exact_conflicts(self, snap: Snapshot, dec: Decision) -> None:
        """Exact GPUs asked by one queue's policy that another queue's job keeps or asks for too:
        those jobs are placed by the mechanism instead."""
        jobs = snap.jobs
        owner: dict[int, int] = {}
        for i in np.flatnonzero(jobs.running & (dec.gpus > 0)).tolist():
            if i in dec.exact:
                continue
            for gid in jobs.placement[i].tolist():
                owner[gid] = i
        for r in sorted(dec.exact):
            ids = np.asarray(dec.exact[r]).tolist()
            if any(owner.get(g, r) != r for g in ids):
                del dec.exact[r]
                continue
            for g in ids:
                owner[g] = r

    # -- 4. enforcement ---------------------------------------------------------------------------------
    def _enforce(self, snap: Snapshot, dec: Decision, plan: _Plan, comp: Compiled) -> None:
        """The layer's preemptions; running jobs under their minimum run time kept; jobs that
        must run started; every queue within its GPUs per type (the inner policy's latest
        choices dropped first) and the cluster within its capacity; then (scope cluster) the
        GPUs so freed offered to the queues' other candidates, in the layer's order."""
        jobs = snap.jobs
        n, K = len(jobs), len(comp.types)
        running = jobs.running
        gpus, gt = dec.gpus, dec.gpu_type
        v = np.flatnonzero(plan.victim > 0)
        if v.size:
            self._drop(dec, v.tolist())
        mixed_now = jobs.mixed if running.any() else np.zeros(n, dtype=bool)
        moved = (gpus != jobs.gpus) | (gt != jobs.gtype)
        for d in (dec.share, dec.span, dec.exact, dec.mixed):
            if d:
                moved[list(d)] = True
        keep = np.flatnonzero(plan.protected & moved & (plan.victim == 0) &
                              (jobs.partner < 0) & ~plan.guest & ~mixed_now)
        if keep.size:
            kl = keep.tolist()
            self._drop(dec, kl)             # forget what the inner policy asked for them
            gpus[keep] = jobs.gpus[keep]
            gt[keep] = jobs.gtype[keep]
            plan_now = jobs.plan
            for r in kl:
                if plan_now[r] is not None:
                    dec.plans[r] = plan_now[r]
            for name, col in (("cpus", jobs.cpus), ("mem_gb", jobs.mem_gb),
                              ("net_gbps", jobs.net_gbps)):
                arr = getattr(dec, name)
                if arr is not None:
                    arr[keep] = col[keep]
                elif col[keep].any():
                    arr = np.zeros(n)
                    arr[keep] = col[keep]
                    setattr(dec, name, arr)
        force = np.flatnonzero(plan.must & (gpus == 0) & (plan.admitted_k >= 0))
        if force.size:
            gpus[force] = jobs.req[force]
            gt[force] = plan.admitted_k[force]
        guest = np.zeros(n, dtype=bool)
        if dec.share:
            guest[list(dec.share)] = True
        # a job that shares another's GPUs now and is to hold GPUs of its own needs room
        now_guest = plan.guest
        fixed = running & (gpus == jobs.gpus) & (gt == jobs.gtype) & ~guest & ~now_guest
        fixed[keep] = True
        for r in dec.mixed:
            fixed[r] = False
        # the quota tree with what stays as it is, then the inner policy's other choices in its
        # own order (jobs that must run first): each kept if its queue, cohorts and the cluster
        # have room for it on that type and its queue stays within its total
        ts = _TreeState(self.tree, comp, snap.capacity)
        parts_now = jobs.parts if running.any() else None
        tot = np.zeros(len(plan.total))
        for i in np.flatnonzero(fixed).tolist():
            li = int(plan.leaf[i])
            held = parts_now[i] if parts_now is not None and jobs.mixed[i] else None
            if held is None:
                ts.add(li, int(gt[i]), float(gpus[i]))
            else:
                for k in np.flatnonzero(held).tolist():
                    ts.add(li, k, float(held[k]))
            if li >= 0:
                tot[li] += float(gpus[i])
        if dec.order is not None:
            inner_rank = np.empty(n, dtype=np.int64)
            inner_rank[dec.order] = np.arange(n)
        else:
            inner_rank = np.arange(n)
        prop = np.flatnonzero((gpus > 0) & ~fixed & ~guest)
        prop = prop[np.lexsort((inner_rank[prop], ~plan.must[prop]))]
        trimmed = np.zeros(K)
        drop = []
        total = plan.total
        for i in prop.tolist():
            li = int(plan.leaf[i])
            g = float(gpus[i])
            mix = dec.mixed.get(i)
            want = {int(k): float(c) for k, c in enumerate(mix) if c} if mix is not None \
                else {int(gt[i]): g}
            if li < 0:
                continue
            ok = plan.must[i] or tot[li] + g <= total[li] + 1e-9
            if ok:
                ok = all(ts.room(li, k) >= c - 1e-9 for k, c in want.items())
            if ok:
                for k, c in want.items():
                    ts.add(li, k, c)
                tot[li] += g
            else:
                drop.append(i)
                for k, c in want.items():
                    trimmed[k] += c
        if drop:
            self._drop(dec, drop)
        # the GPUs so freed, to the other candidates in the layer's order
        if trimmed.any():
            wait = np.flatnonzero(plan.cand & (gpus == 0) & (plan.victim == 0) & (plan.leaf >= 0))
            wait = wait[np.lexsort((plan.rank[wait], ~plan.must[wait]))]
            if wait.size:
                free = trimmed.tolist()
                reqs = jobs.req[wait].tolist()
                smin = np.minimum.accumulate(jobs.req[wait][::-1])[::-1].tolist()
                ok_rows = (jobs.allowed[wait] & ts.comp.usable[plan.leaf[wait]]).tolist()
                rates = jobs.rates[wait].tolist()
                leaf_w = plan.leaf[wait].tolist()
                fmax = max(free)
                for j, i in enumerate(wait.tolist()):
                    if fmax < smin[j]:
                        break
                    r = reqs[j]
                    li = leaf_w[j]
                    if fmax < r or tot[li] + r > total[li] + 1e-9:
                        continue
                    best, bk = -1.0, -1
                    for k in range(K):
                        if ok_rows[j][k] and free[k] >= r and rates[j][k] > best and \
                                ts.room(li, k) >= r - 1e-9:
                            best, bk = rates[j][k], k
                    if bk >= 0:
                        gpus[i], gt[i] = r, bk
                        ts.add(li, bk, float(r))
                        tot[li] += r
                        free[bk] -= r
                        fmax = max(free)
        plan.room_after = ts.tree.rooms(ts.comp, np.asarray(ts.S))

    @staticmethod
    def _totals(dec: Decision, on: np.ndarray, K: int) -> np.ndarray:
        """GPUs per type the decision holds (rows in `on`)."""
        sel = on & (dec.gpu_type >= 0)
        tot = np.bincount(dec.gpu_type[sel], weights=dec.gpus[sel], minlength=K)
        for r, c in dec.mixed.items():
            if on[r]:
                tot[dec.gpu_type[r]] -= dec.gpus[r]
                tot = tot + c
        return tot

    @staticmethod
    def _usage(dec: Decision, leaf: np.ndarray, on: np.ndarray, K: int, comp: Compiled) -> np.ndarray:
        L = comp.usable.shape[0]
        u = np.zeros((L, K))
        sel = np.flatnonzero(on & (dec.gpu_type >= 0) & (leaf >= 0))
        np.add.at(u, (leaf[sel], dec.gpu_type[sel]), dec.gpus[sel])
        for r, c in dec.mixed.items():
            if on[r] and leaf[r] >= 0:
                u[leaf[r], dec.gpu_type[r]] -= dec.gpus[r]
                u[leaf[r]] += c
        return u

    @staticmethod
    def _drop(dec: Decision, rows: list[int]) -> None:
        """Targets of `rows` to nothing, with everything that named them (their guests too)."""
        todo = list(rows)
        while todo:
            r = todo.pop()
            dec.gpus[r] = 0
            dec.gpu_type[r] = -1
            for name in _PER_ROW:            # exact, plans, mixed, fork, share, span, sets ...
                d = getattr(dec, name)
                if isinstance(d, dict):
                    d.pop(r, None)
                elif isinstance(d, set):
                    d.discard(r)
            for arr in (dec.cpus, dec.mem_gb, dec.net_gbps):
                if arr is not None:
                    arr[r] = 0
            if dec.share:
                todo.extend(g for g, (h, _m) in dec.share.items() if h == r)
            if dec.span:
                todo.extend(g for g, hs in dec.span.items() if r in hs)

    # -- reasons and positions ------------------------------------------------------------------------
    def _explain_waiting(self, snap: Snapshot, dec: Decision, plan: _Plan, comp: Compiled) -> None:
        jobs = snap.jobs
        K = len(comp.types)
        waits = np.flatnonzero(dec.gpus == 0)
        if not waits.size:
            return
        reasons = dec.reasons
        on = dec.gpus > 0
        free = snap.capacity - self._totals(dec, on & ~np.isin(np.arange(len(jobs)), list(dec.share)), K)
        vic = plan.victim[waits]
        for i in waits[vic == 1].tolist():
            reasons[i] = "Preempted(Reclaim)"
        for i in waits[vic == 2].tolist():
            reasons[i] = "Preempted(Priority)"
        w = waits[vic == 0]
        if plan.reasons:
            known = np.fromiter((i in plan.reasons for i in w.tolist()), dtype=bool, count=len(w))
            for i in w[known].tolist():
                reasons[i] = plan.reasons[i]
            w = w[~known]
        if w.size:
            # candidates the policy left waiting: room in the quotas and the cluster (the policy
            # preferred others), in the quotas only (Resources), or none (QuotaExceeded)
            lf = plan.leaf[w]
            lf0 = np.maximum(lf, 0)
            r = jobs.req[w][:, None]
            room = plan.room_after if plan.room_after is not None else plan.room_final
            ok = jobs.allowed[w] & comp.usable[lf0] & (lf >= 0)[:, None]
            quota_ok = ok & (room[lf0] >= r - 1e-9)
            both = (quota_ok & (free[None, :] >= r)).any(axis=1)
            kbest = np.argmax(np.where(ok, room[lf0], -INF), axis=1)
            names, types, leaves = self.tree.names, comp.types, self.tree.leaves
            for i, li, b, q, k in zip(w.tolist(), lf.tolist(), both.tolist(),
                                      quota_ok.any(axis=1).tolist(), kbest.tolist()):
                reasons[i] = "Priority" if b or li < 0 else "Resources" if q else \
                    f"QuotaExceeded({names[leaves[li]]}, {types[k]})"
        # positions: rank among the jobs of the same queue that wait after this decision
        w = waits[plan.leaf[waits] >= 0]
        if not w.size:
            return
        o = w[np.lexsort((plan.rank[w], plan.leaf[w]))]
        lo = plan.leaf[o]
        first = np.searchsorted(lo, lo, side="left")
        pos = np.arange(len(o)) - first + 1
        est = self._estimates(snap, dec, plan, o, lo, K)
        dec.positions.update(zip(o.tolist(), zip(pos.tolist(), est)))

    def _estimates(self, snap: Snapshot, dec: Decision, plan: _Plan, o: np.ndarray,
                   lo: np.ndarray, K: int) -> list[float | None]:
        """When each waiting job (in queue order) could start if nothing else arrived: its queue's
        running jobs end at their current rates and free their GPUs, in order, until the jobs
        ahead of it and itself fit (None where that is not known or too far)."""
        jobs, now = snap.jobs, snap.now
        on = np.flatnonzero(dec.gpus > 0)
        if not on.size:
            return [None] * len(o)
        k_on = np.maximum(dec.gpu_type[on], 0)
        rate = jobs.rates[on, k_on] * dec.gpus[on] / np.maximum(jobs.req[on], 1)
        # a job kept where it runs: the rate it makes now (the runtime's measured throughput)
        cur = jobs.rate[on]
        kept = (jobs.gpus[on] == dec.gpus[on]) & (jobs.gtype[on] == dec.gpu_type[on]) & (cur > 0)
        rate = np.where(kept, cur, rate)
        with np.errstate(divide="ignore", invalid="ignore"):
            left = np.where(rate > 0, jobs.remaining[on] / rate, np.inf)
        ends = now + np.maximum(jobs.resume_at[on] - now, 0.0) + left
        out: list[float | None] = [None] * len(o)
        lf_on = plan.leaf[on]
        req = jobs.req[o].astype(float)
        cuts = np.r_[0, np.flatnonzero(np.diff(lo)) + 1, len(o)]
        for a, b in zip(cuts[:-1], cuts[1:]):
            li = int(lo[a])
            if li < 0:
                continue
            mine = lf_on == li
            e = ends[mine]
            g = dec.gpus[on][mine].astype(float)
            srt = np.argsort(e, kind="stable")
            e, g = e[srt], np.cumsum(g[srt])
            head = float(max(plan.room_final[li].max(), 0.0))
            need = np.cumsum(req[a:b]) - head
            at = np.searchsorted(g, need, side="left")
            for j, (nd, x) in enumerate(zip(need.tolist(), at.tolist())):
                if nd <= 0 or x >= len(e):
                    continue
                t = float(e[x])
                if t < INF and t - now <= HORIZON_S:
                    out[a + j] = t
        return out

    # -- state --------------------------------------------------------------------------------------------
    def _next_state(self, snap: Snapshot, st: dict, dec: Decision, plan: _Plan, comp: Compiled,
                    usage: dict, uusage: dict, totals: dict, inner_state: dict) -> dict:
        jobs, now, tree = snap.jobs, snap.now, self.tree
        K = len(comp.types)
        since = dict(st.get("since", {}))
        on = dec.gpus > 0
        changed = on & ((jobs.gpus != dec.gpus) | (jobs.gtype != dec.gpu_type))
        rows = jobs.rows
        for r in rows[changed].tolist():
            since[r] = now
        for r in rows[~on & jobs.running].tolist():
            since.pop(r, None)
        live = set(rows[on].tolist())
        if len(since) > 2 * len(live) + 64:
            since = {r: t for r, t in since.items() if r in live}
        idx = np.flatnonzero(on)
        k = np.maximum(dec.gpu_type[idx], 0)
        rate = jobs.rates[idx, k] * dec.gpus[idx] / np.maximum(jobs.req[idx], 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            left = np.where(rate > 0, jobs.remaining[idx] / rate, np.inf)
        prev = {"rows": rows[idx].copy(), "gpus": dec.gpus[idx].astype(float), "type": k,
                "att": jobs.attained[idx].astype(float),
                "end": now + np.maximum(jobs.resume_at[idx] - now, 0.0) + left}
        for i in np.flatnonzero(plan.victim > 0).tolist():
            name = tree.names[tree.leaves[int(plan.leaf[i])]]
            tot = totals.setdefault(name, _new_totals(K))
            tot["reclaims" if plan.victim[i] == 1 else "priority_preemptions"] += 1
        report = self._report(snap, dec, plan, comp, usage, totals)
        return {"t": now, "types": list(comp.types), "usage": usage, "uusage": uusage,
                "since": since, "prev": prev, "totals": totals, "inner": inner_state,
                "report": report}

    def _report(self, snap: Snapshot, dec: Decision, plan: _Plan, comp: Compiled,
                usage: dict, totals: dict) -> dict:
        """Per queue, after this decision: GPUs held and borrowed per type, waiting jobs and GPUs,
        fair-share factor (what `quanta queues` shows)."""
        tree, jobs = self.tree, snap.jobs
        K = len(comp.types)
        N = len(tree.names)
        on = (dec.gpus > 0) & (plan.leaf >= 0)
        use_l = self._usage(dec, plan.leaf, on & ~np.isin(np.arange(len(jobs)), list(dec.share)),
                            K, comp)
        use = np.zeros((N, K))
        use[tree.leaves] = use_l
        for q in tree.bottom_up:
            p = int(tree.parent[q])
            if p >= 0:
                use[p] += use[q]
        wait = (dec.gpus == 0) & (plan.leaf >= 0)
        pend = np.zeros(N, dtype=np.int64)
        pend_g = np.zeros(N, dtype=np.int64)
        runn = np.zeros(N, dtype=np.int64)
        lv = tree.leaves_arr
        np.add.at(pend, lv[plan.leaf[wait]], 1)
        np.add.at(pend_g, lv[plan.leaf[wait]], jobs.req[wait])
        np.add.at(runn, lv[plan.leaf[on]], 1)
        for q in tree.bottom_up:
            p = int(tree.parent[q])
            if p >= 0:
                pend[p] += pend[q]
                pend_g[p] += pend_g[q]
                runn[p] += runn[q]
        F = plan.F
        u_node = fs.node_usage(tree, usage)
        out = {}
        for q, name in enumerate(tree.names):
            out[name] = {
                "parent": tree.names[tree.parent[q]] if tree.parent[q] >= 0 else "",
                "leaf": q in tree.leaf_pos, "weight": float(tree.weight[q]),
                "nominal": comp.nominal_total[q].tolist(),
                "usage": use[q].tolist(),
                "borrowed": np.maximum(use[q] - comp.nominal_total[q], 0.0).tolist(),
                "running": int(runn[q]), "pending": int(pend[q]), "pending_gpus": int(pend_g[q]),
                "fairshare": float(F[q]), "decayed_usage": float(u_node[q]),
            }
        return {"t": snap.now, "types": list(comp.types), "queues": out}


class _TreeState:
    """Usage of the quota tree per type (a leaf's GPUs, a cohort's sum of its children's effective
    usage max(S, reserved)) and of the cluster: what may still be added where."""

    def __init__(self, tree: QueueTree, comp: Compiled, capacity: np.ndarray,
                 usage: np.ndarray | None = None, phys: np.ndarray | None = None):
        """`usage`: GPUs per (leaf, type) held now (default none); `phys`: GPUs per type taken
        on the cluster (default none)."""
        N, K = len(tree.names), len(comp.types)
        self.tree, self.comp = tree, comp
        S = np.zeros((N, K))
        if usage is not None:
            S[tree.leaves] = usage
        for q in tree.bottom_up:        # a parent holds its children's max(S, reserved)
            p = int(tree.parent[q])
            if p >= 0:
                S[p] += np.maximum(S[q], comp.reserved[q])
        self.S = S.tolist()
        self.cap = comp.cap.tolist()
        self.G = comp.reserved.tolist()
        self.phys = [0.0] * K if phys is None else np.asarray(phys, dtype=float).tolist()
        self.phys_cap = capacity.astype(float).tolist()
        self.paths = tree.paths

    def room(self, li: int, k: int) -> float:
        S, cap, G = self.S, self.cap, self.G
        R = INF
        for nd in reversed(self.paths[li]):
            s = S[nd][k]
            c = cap[nd][k] - s
            g = G[nd][k] - s
            g = g if g > 0 else 0.0
            R = c if c < g + R else g + R
        p = self.phys_cap[k] - self.phys[k]
        return R if R < p else p

    def add(self, li: int, k: int, a: float) -> None:
        self.phys[k] += a
        if li < 0:
            return
        d = a
        S, G = self.S, self.G
        for nd in self.paths[li]:
            s = S[nd][k]
            g = G[nd][k]
            e_old = s if s > g else g
            s += d
            S[nd][k] = s
            d = (s if s > g else g) - e_old
            if d == 0:
                break

    def rooms(self) -> np.ndarray:
        S = np.asarray(self.S)
        return np.minimum(self.tree.rooms(self.comp, S),
                          np.asarray(self.phys_cap) - np.asarray(self.phys))


def _merge_extras(dec: Decision, d: Decision, idx: np.ndarray, n: int) -> None:
    """Everything but the targets of a sub-decision `d` (rows = positions in idx) into `dec`."""
    m = idx.tolist()
    for r, ids in d.exact.items():
        dec.exact[m[r]] = ids
    for r, p in d.plans.items():
        dec.plans[m[r]] = p
    for r, c in d.mixed.items():
        dec.mixed[m[r]] = c
    for r, f in d.fork.items():
        dec.fork[m[r]] = f
    for g, (h, mode) in d.share.items():
        dec.share[m[g]] = (m[h], mode)
    for g, hs in getattr(d, "span", {}).items():
        dec.span[m[g]] = {m[h]: c for h, c in hs.items()}
    dec.consolidate.update(m[r] for r in d.consolidate)
    dec.defrag.update(m[r] for r in d.defrag)
    for name in ("cpus", "mem_gb", "net_gbps"):
        arr = getattr(d, name)
        if arr is not None:
            full = getattr(dec, name)
            if full is None:
                full = np.zeros(n)
                setattr(dec, name, full)
            full[idx] = arr
    # fields this module does not know (added to Decision later): a flag holds if any inner
    # decision sets it; rows of a per-row mapping or set are mapped back; anything else is kept
    for f in dataclasses.fields(Decision):
        if f.name in _KNOWN:
            continue
        v = getattr(d, f.name)
        if isinstance(v, bool):
            setattr(dec, f.name, getattr(dec, f.name) or v)
        elif isinstance(v, dict):
            getattr(dec, f.name).update({m[r] if isinstance(r, (int, np.integer)) else r: x
                                         for r, x in v.items()})
        elif isinstance(v, set):
            getattr(dec, f.name).update(m[r] if isinstance(r, (int, np.integer)) else r for r in v)
        elif v is not None and getattr(dec, f.name) is None:
            setattr(dec, f.name, v)


_KNOWN = {"gpus", "gpu_type", "order", "exact", "plans", "cpus", "mem_gb", "net_gbps",
          "consolidate", "defrag", "mixed", "fork", "share", "span", "wake_at", "state",
          "reasons", "positions"}
_PER_ROW = [f.name for f in dataclasses.fields(Decision) if f.name not in
            ("gpus", "gpu_type", "order", "cpus", "mem_gb", "net_gbps", "wake_at", "state",
             "reasons", "positions")]


def _new_totals(K: int) -> dict:
    return {"gpu_s": [0.0] * K, "borrowed_s": [0.0] * K, "reclaims": 0, "priority_preemptions": 0}


def _checkpoint_s(ckpt: tuple[float, float], rate: float) -> float:
    """Seconds between the job's own checkpoints, if its spec says (checkpoint_s, or
    checkpoint_every steps at its current rate); 0 if not known."""
    secs, steps = ckpt
    if secs:
        return secs
    if steps and rate > 0:
        return steps / rate
    return 0.0
