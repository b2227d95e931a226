"""The queue layer's accounting and the state it carries from one decision to the next: decayed
usage per queue and user (quanta.queues.fairshare), GPU-seconds and preemptions per queue, when
each job last started, and the per-queue report `quanta queues` shows."""

from __future__ import annotations

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.queues import fairshare as fs
from quanta.queues.plan import Plan
from quanta.queues.spec import Compiled, QueueTree


def account(tree: QueueTree, interval: float | None, leaf_of: list[int], user_of: list[str],
            snap: Snapshot, st: dict, comp: Compiled
            ) -> tuple[dict[str, float], dict[str, float], dict[str, dict]]:
    """Decayed usage per queue and per user, and the per-queue totals, with what was received
    since the last decision (`interval`: the inner policy's round, None if event-driven;
    `leaf_of` / `user_of`: leaf position and user per driver row)."""
    jobs, now = snap.jobs, snap.now
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
    # ran until now, if this decision is for a completion (one that left nothing to run asked
    # none: the next arrival's counted the time between, idle, as theirs); a round-based one is
    # not: until their estimated end
    done_now = interval is None and "completion" in snap.events
    end = now if done_now else np.minimum(now, prev["end"])
    got = g * np.clip(end - t_prev, 0.0, dt)
    if live.any():
        pos = order[at_c[live]]
        got[live] = np.maximum(jobs.attained[pos] - prev["att"][live], 0.0)
    mid = 0.5 ** (dt / (2 * H))
    w = got * comp.speed[k] * mid
    K = len(comp.types)
    L = tree.num_leaves
    lf = np.fromiter((leaf_of[r] for r in rows.tolist()), dtype=np.int64, count=len(rows))
    ok = lf >= 0
    per = np.zeros((L, K))
    np.add.at(per, (lf[ok], k[ok]), got[ok])
    wq = np.bincount(lf[ok], weights=w[ok], minlength=L)
    for li in np.flatnonzero(wq > 0).tolist():
        name = tree.names[tree.leaves[li]]
        usage[name] = usage.get(name, 0.0) + float(wq[li])
    for r, wi, li in zip(rows[ok].tolist(), w[ok].tolist(), lf[ok].tolist()):
        if wi > 0:
            key = fs.user_key(tree.names[tree.leaves[li]], user_of[r])
            uusage[key] = uusage.get(key, 0.0) + wi
    nom = comp.nominal_total[tree.leaves]
    for li in np.flatnonzero(per.sum(axis=1) > 0).tolist():
        name = tree.names[tree.leaves[li]]
        tot = totals.setdefault(name, _new_totals(K))
        borrowed = np.maximum(per[li] / dt - nom[li], 0.0) * dt
        tot["gpu_s"] = (np.asarray(tot["gpu_s"]) + per[li]).tolist()
        tot["borrowed_s"] = (np.asarray(tot["borrowed_s"]) + borrowed).tolist()
    return usage, uusage, totals


def next_state(tree: QueueTree, snap: Snapshot, st: dict, dec: Decision, plan: Plan,
               comp: Compiled, usage: dict, uusage: dict, totals: dict, inner_state: dict) -> dict:
    """The layer's state after this decision (Decision.state)."""
    jobs, now = snap.jobs, snap.now
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
    report = _report(tree, snap, dec, plan, comp, usage, totals)
    return {"t": now, "types": list(comp.types), "usage": usage, "uusage": uusage,
            "since": since, "prev": prev, "totals": totals, "inner": inner_state,
            "report": report}


def _report(tree: QueueTree, snap: Snapshot, dec: Decision, plan: Plan, comp: Compiled,
            usage: dict, totals: dict) -> dict:
    """Per queue, after this decision: GPUs held and borrowed per type, waiting jobs and GPUs,
    fair-share factor (what `quanta queues` shows)."""
    jobs = snap.jobs
    K = len(comp.types)
    N = len(tree.names)
    on = (dec.gpus > 0) & (plan.leaf >= 0)
    use_l = _usage(dec, plan.leaf, on & ~np.isin(np.arange(len(jobs)), list(dec.share)),
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


def _new_totals(K: int) -> dict:
    return {"gpu_s": [0.0] * K, "borrowed_s": [0.0] * K, "reclaims": 0, "priority_preemptions": 0}
