"""The queue layer's admission: which waiting jobs each queue may start, on which GPU type, and
which running jobs are preempted for them (reclaim of lent quota, priority), against the quota
tree and in fair-share and priority order (see quanta.queues.layer, step 2)."""

from __future__ import annotations

import heapq
import math

import numpy as np

from quanta.core.snapshot import Snapshot
from quanta.queues import fairshare as fs
from quanta.queues.plan import Plan
from quanta.queues.reasons import static_reasons
from quanta.queues.spec import Compiled, QueueTree
from quanta.queues.tree_state import TreeState

INF = math.inf


def admit(tree: QueueTree, ckpt: list[tuple[float, float]], overflow: int, snap: Snapshot,
          st: dict, comp: Compiled, leaf: np.ndarray, prio: np.ndarray, users: list[str],
          usage: dict[str, float], uusage: dict[str, float]) -> Plan:
    """Admit the waiting jobs against the quota tree (see quanta.queues.layer, step 2; `ckpt`:
    (checkpoint_s, checkpoint_every) per driver row; `overflow`: most extra waiting jobs per
    queue handed to the inner policy)."""
    jobs, now = snap.jobs, snap.now
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
    ts = TreeState(tree, comp, snap.capacity, U, held.sum(axis=0))
    S_, phys, phys_cap = ts.S, ts.phys, ts.phys_cap
    room, add = ts.room, ts.add
    nomt = comp.nominal_total.tolist()
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

    def reclaimable(grp: np.ndarray, li: int, p: int) -> np.ndarray:
        """Of victims `grp`, those a job of leaf li and priority p may reclaim (protected or
        not): other queues' borrowed jobs not yet taken, of lower priority where the rule says."""
        m = (victim[grp] == 0) & (leaf[grp] != li) & borrowed[grp]
        return m & (prio[grp] < p) if recl_lower else m

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
        if kind == "reclaim":
            m = reclaimable(grp, li, p)
        else:
            m = victim[grp] == 0
            # other queues' borrowers only for a job that would borrow itself (Kueue's
            # borrowWithinCohort; one within its nominal quota takes them back by reclaim, whose
            # rule, `reclaim: never` included, then holds)
            q = leaf_nodes[li]
            borrows = S_[q][k] + a > nomt[q][k] + 1e-9
            m &= prio[grp] < p
            m &= ((lv == li) & within) | ((lv != li) & borrowed[grp] & (bwc and borrows))
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

    def lent_out(i: int, li: int, k: int) -> bool:
        """Whether other queues of li's tree run borrowed GPUs of type k that job i could
        reclaim (protected or not): what a job within its nominal quota waits the grace for."""
        grp = vgroups.get((tops[li], k))
        return grp is not None and pre.reclaim != "never" and \
            bool(reclaimable(grp, li, prio_l[i]).any())

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
    reclaim_failed: dict[tuple[int, int], tuple[float, str]] = {}   # (size, reason)
    # jobs within their queue's nominal quota whose GPUs are lent: why they wait if nothing below
    # admits them (said only then: `reasons` keeps a job out of borrowing and the candidates;
    # they were QuotaExceeded, their queue below its quota)
    lent: dict[int, str] = {}
    lent_load: dict[tuple[int, int], float] = {}     # their GPUs so far, per (queue, type)
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
                failed = reclaim_failed.get((li, k))
                if failed is not None and a >= failed[0]:   # (as a smaller job's reclaim failed)
                    ahead = lent_load.get((li, k), 0.0)   # GPUs of jobs ahead waiting as it does
                    if S_[q][k] + ahead + a <= nom[k] + 1e-9:
                        lent[i] = failed[1]
                        lent_load[(li, k)] = ahead + a
                    deferred[li].append(i)
                    continue
                if grace > 0 and now - waiting_since[i] < grace and lent_out(i, li, k):
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
                    # it fits its nominal quota, but the GPUs are lent: to jobs under their
                    # minimum run time (it waits for them), or for good (reclaim: never, or only
                    # higher-priority borrowers: held, as Resources says)
                    why = "WaitingForReclaim" if blocked < INF else "Resources"
                    reclaim_failed[(li, k)] = (a, why)
                    lent_load[(li, k)] = lent_load.get((li, k), 0.0) + a
                    if blocked < INF:
                        reasons[i] = why
                        wake = min(wake, blocked)
                    else:
                        lent[i] = why
            if not done:
                deferred[li].append(i)
                if starving_l[i]:   # it goes first: nothing behind it takes the room it waits
                    deferred[li].extend(js[pos + 1:])     # for (smaller jobs kept taking it)
                    break
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
            if starving_l[i] and not cand[i]:     # (as in phase 1: it keeps its queue's room)
                ptr[li] = len(js)
                break
    # a job left waiting that outranks protected jobs (under their minimum run time) it could
    # preempt by priority: the layer asks to be woken when the first protection ends (phase 1
    # does so for reclaim; here the earliest end among the protected jobs of lower priority than
    # the highest waiting in the same top-level queue: an early wake costs a decision, a missing
    # one left the job waiting for an unrelated event)
    if pr_ok and protected.any():
        top_max: dict[int, int] = {}
        for li in range(L):
            for i in deferred[li]:
                if adm_k[i] < 0 and not cand[i] and i not in reasons:
                    top_max[tops[li]] = max(top_max.get(tops[li], -(1 << 62)), prio_l[i])
        for (t, _k), grp in vgroups.items():
            if t in top_max:
                held = grp[protected[grp] & (prio[grp] < top_max[t])]
                if held.size:
                    wake = min(wake, float(hold_until[held].min()))
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
    # overflow: other waiting jobs, of the queue's first (class, starving) among them, for the
    # inner policy to choose among (every class at or above the lowest admitted one was offered:
    # a time-sharing policy started a lower class, or a newer job, over a higher or starving
    # one); a running job of a higher class than all of them is kept running, as a protected
    # one is (the inner policy preempted it for them)
    if overflow > 0:
        rest = np.flatnonzero(~running & mapped & ~cand & (victim == 0))
        if rest.size:
            most = budget + np.maximum(room_final, 0.0)
            fitsb = (allowed[rest] & (most[leaf[rest]] >= req[rest, None] - 1e-9)).any(axis=1)
            fitsb &= req[rest] <= most.sum(axis=1)[leaf[rest]] + 1e-9
            ok = fitsb & (prio[rest] >= low[leaf[rest]]) & (low[leaf[rest]] < np.iinfo(np.int64).max)
            ok &= np.array([i not in reasons for i in rest.tolist()], dtype=bool)
            rest = rest[ok]
            if rest.size:
                key = 2 * prio[rest].astype(np.int64) + starving[rest]
                top = np.full(L, np.iinfo(np.int64).min)
                np.maximum.at(top, leaf[rest], key)
                rest = rest[key == top[leaf[rest]]]
                outrank = running & mapped & (victim == 0) & (leaf >= 0)
                at = top[leaf[outrank]]           # (queues with no waiting candidate: none)
                outrank[outrank] = (at > np.iinfo(np.int64).min) & \
                    (2 * prio[outrank].astype(np.int64) > at)
                protected = protected | outrank
            rest = rest[np.argsort(rank[rest], kind="stable")]
            if rest.size and starving[rest].any():
                # of starving jobs, the first only: the room it waits for is kept for it (the
                # inner policy backfilled smaller starving jobs behind it into that room)
                lr = leaf[rest]
                first = np.searchsorted(lr, lr, side="left") == np.arange(len(rest))
                rest = rest[first | ~starving[rest]]
            if overflow >= 0 and rest.size:
                lr = leaf[rest]
                first = np.searchsorted(lr, lr, side="left")
                rest = rest[np.arange(len(rest)) - first < overflow]
            cand[rest] = True
    for i, why in lent.items():        # (after borrowing and the candidates: said, not acted on)
        if adm_k[i] < 0 and not cand[i] and i not in reasons:
            reasons[i] = why
    # why the others wait: against the usage before this decision's admissions
    static_reasons(tree, jobs, reasons, victim, running, leaf, allowed, req,
                   S0, phys0, phys_cap, comp, adm_k, K, L, S_, phys)
    return Plan(leaf, cand, adm_k, must, victim, protected, budget, reasons, rank,
                room_final, wake, F, guest, prio,
                budget.sum(axis=1) + np.maximum(room_final, 0.0).sum(axis=1))


def _checkpoint_s(ckpt: tuple[float, float], rate: float) -> float:
    """Seconds between the job's own checkpoints, if its spec says (checkpoint_s, or
    checkpoint_every steps at its current rate); 0 if not known."""
    secs, steps = ckpt
    if secs:
        return secs
    if steps and rate > 0:
        return steps / rate
    return 0.0
