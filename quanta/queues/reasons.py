"""Pending reasons and positions: why each waiting job waits (Decision.reasons: Priority,
Resources, FairShare, QuotaExceeded(queue, type), NoQueue(queue), WaitingForReclaim,
Preempted(Reclaim|Priority)) and where it is in its queue, with when it could start
(Decision.positions)."""

from __future__ import annotations

import math

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.queues.plan import Plan
from quanta.queues.spec import Compiled, QueueTree

INF = math.inf
HORIZON_S = 365 * 86400.0        # estimated starts further away than this are not given


def static_reasons(tree, jobs, reasons, victim, running, leaf, allowed, req,
                   S0, phys0, phys_cap, comp, adm_k, K, L, S_f, phys_f) -> None:
    """Why the waiting jobs the admission did not take wait: there is room for them in their
    queue's quota but jobs ahead took their turn (Priority); the quotas have room but the
    cluster has not (Resources); there was room to borrow before this decision and other
    queues, ahead by fair share, borrowed it (FairShare); else their queue is at its quota, or
    its cohort has nothing to lend (QuotaExceeded(queue, type))."""
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


def explain_waiting(tree: QueueTree, snap: Snapshot, dec: Decision, plan: Plan,
                    comp: Compiled) -> None:
    """Why each job left waiting waits (Decision.reasons) and where it is in its queue, with
    an estimated start (Decision.positions)."""
    jobs = snap.jobs
    K = len(comp.types)
    waits = np.flatnonzero(dec.gpus == 0)
    if not waits.size:
        return
    reasons = dec.reasons
    on = dec.gpus > 0
    free = snap.capacity - _totals(dec, on & ~np.isin(np.arange(len(jobs)), list(dec.share)), K)
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
        names, types, leaves = tree.names, comp.types, tree.leaves
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
    est = _estimates(snap, dec, plan, o, lo)
    dec.positions.update(zip(o.tolist(), zip(pos.tolist(), est)))


def _estimates(snap: Snapshot, dec: Decision, plan: Plan, o: np.ndarray,
               lo: np.ndarray) -> list[float | None]:
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
        # the room admission left, with what it gave jobs the policy left waiting (a job
        # admitted behind this one but not started took the room from its estimate)
        room = plan.room_final[li].astype(float)
        idle = np.flatnonzero((plan.leaf == li) & (plan.admitted_k >= 0) & (dec.gpus == 0))
        if idle.size:
            np.add.at(room, plan.admitted_k[idle], jobs.req[idle].astype(float))
        head = float(max(room.max(), 0.0))
        need = np.cumsum(req[a:b]) - head
        at = np.searchsorted(g, need, side="left")
        for j, (nd, x) in enumerate(zip(need.tolist(), at.tolist())):
            if nd <= 0 or x >= len(e):
                continue
            t = float(e[x])
            if t < INF and t - now <= HORIZON_S:
                out[a + j] = t
    return out


def _totals(dec: Decision, on: np.ndarray, K: int) -> np.ndarray:
    """GPUs per type the decision holds (rows in `on`)."""
    sel = on & (dec.gpu_type >= 0)
    tot = np.bincount(dec.gpu_type[sel], weights=dec.gpus[sel], minlength=K)
    for r, c in dec.mixed.items():
        if on[r]:
            tot[dec.gpu_type[r]] -= dec.gpus[r]
            tot = tot + c
    return tot
