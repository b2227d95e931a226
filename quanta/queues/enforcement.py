"""The queue layer's enforcement of the inner policy's decision: the layer's preemptions, the
minimum run time, the jobs that must run, every queue within its GPUs per type and the cluster
within its capacity."""

from __future__ import annotations

import dataclasses

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.queues.plan import Plan
from quanta.queues.spec import Compiled, QueueTree
from quanta.queues.tree_state import TreeState


def enforce(tree: QueueTree, snap: Snapshot, dec: Decision, plan: Plan, comp: Compiled) -> None:
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
        _drop(dec, v.tolist())
    mixed_now = jobs.mixed if running.any() else np.zeros(n, dtype=bool)
    moved = (gpus != jobs.gpus) | (gt != jobs.gtype)
    for d in (dec.share, dec.span, dec.exact, dec.mixed):
        if d:
            moved[list(d)] = True
    keep = np.flatnonzero(plan.protected & moved & (plan.victim == 0) &
                          (jobs.partner < 0) & ~plan.guest & ~mixed_now)
    if keep.size:
        kl = keep.tolist()
        _drop(dec, kl)             # forget what the inner policy asked for them
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
    # a spanning guest's own GPUs (idle ones beside its hosts', as the mechanism counts them)
    # take room like any job's: uncounted, queues that each decided within their own room
    # (scope: queue) asked the cluster for more GPUs than it has
    own = np.zeros(n)
    for r, hosts in dec.span.items():
        own[r] = max(float(gpus[r]) - sum(hosts.values()), 0.0)
    # a job that shares another's GPUs now and is to hold GPUs of its own needs room
    now_guest = plan.guest
    fixed = running & (gpus == jobs.gpus) & (gt == jobs.gtype) & ~guest & ~now_guest
    fixed[keep] = True
    for r in dec.mixed:
        fixed[r] = False
    # the quota tree with what stays as it is, then the inner policy's other choices in its
    # own order (jobs that must run first): each kept if its queue, cohorts and the cluster
    # have room for it on that type and its queue stays within its total
    ts = TreeState(tree, comp, snap.capacity)
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
    prop = np.flatnonzero(((gpus > 0) & ~fixed & ~guest) | (own > 0))
    prop = prop[np.lexsort((inner_rank[prop], ~plan.must[prop]))]
    trimmed = np.zeros(K)
    drop = []
    total = plan.total
    for i in prop.tolist():
        li = int(plan.leaf[i])
        g = float(own[i] if guest[i] else gpus[i])
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
        _drop(dec, drop)
    # the GPUs so freed, to the other candidates in the layer's order; a job whose own choice
    # was dropped may take any type the cluster has free (its queue's room allowing): its
    # first type over quota kept a 2-GPU job off a second type with room, on an idle cluster
    if trimmed.any() or drop:
        wait = np.flatnonzero(plan.cand & (gpus == 0) & (plan.victim == 0) & (plan.leaf >= 0))
        wait = wait[np.lexsort((plan.rank[wait], ~plan.must[wait]))]
        if wait.size:
            held = ~guest & (gpus > 0)
            used = np.bincount(gt[held], weights=gpus[held], minlength=K)
            spans = np.flatnonzero(guest & (own > 0) & (gpus > 0))     # (dropped: gpus 0)
            used += np.bincount(gt[spans], weights=own[spans], minlength=K)
            for r, mix in dec.mixed.items():          # (GPUs of several types)
                if held[r]:
                    used[int(gt[r])] -= gpus[r]
                    used += np.asarray(mix, dtype=float)[:K]
            cfree = np.maximum(snap.capacity - used, 0.0).tolist()
            free = np.minimum(trimmed, cfree).tolist()
            refused = set(drop)
            reqs = jobs.req[wait].tolist()
            smin = np.minimum.accumulate(jobs.req[wait][::-1])[::-1].tolist()
            ok_rows = (jobs.allowed[wait] & ts.comp.usable[plan.leaf[wait]]).tolist()
            rates = jobs.rates[wait].tolist()
            leaf_w = plan.leaf[wait].tolist()
            for j, i in enumerate(wait.tolist()):
                if max(cfree) < smin[j]:        # (no job left fits anywhere)
                    break
                pool = cfree if i in refused else free
                r = reqs[j]
                li = leaf_w[j]
                if max(pool) < r or tot[li] + r > total[li] + 1e-9:
                    continue
                best, bk = -1.0, -1
                for k in range(K):
                    if ok_rows[j][k] and pool[k] >= r and rates[j][k] > best and \
                            ts.room(li, k) >= r - 1e-9:
                        best, bk = rates[j][k], k
                if bk >= 0:
                    gpus[i], gt[i] = r, bk
                    ts.add(li, bk, float(r))
                    tot[li] += r
                    cfree[bk] -= r
                    free[bk] = min(free[bk] - r if pool is free else free[bk], cfree[bk])
    plan.room_after = ts.tree.rooms(ts.comp, np.asarray(ts.S))


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


_PER_ROW = [f.name for f in dataclasses.fields(Decision) if f.name not in
            ("gpus", "gpu_type", "order", "cpus", "mem_gb", "net_gbps", "wake_at", "state",
             "reasons", "positions")]
