"""The inner policy under the queue layer: it gets the jobs the admission handed it (per queue
with the queue's GPUs as capacity, or all queues at once with the cluster's), and its decisions
are merged back into one."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import JobsView, Snapshot
from quanta.policies.base import Policy
from quanta.queues.plan import Plan
from quanta.queues.spec import QueueTree


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


def run_inner(inner: Policy, tree: QueueTree, scope: str, snap: Snapshot, st: dict, plan: Plan
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
    usable = tree.compile(snap.cluster.types).usable
    groups: list[tuple[str, np.ndarray, np.ndarray]] = []
    if scope == "queue":
        ci = np.flatnonzero(cand)
        ci = ci[np.argsort(plan.leaf[ci], kind="stable")]
        lc = plan.leaf[ci]
        cuts = np.flatnonzero(np.diff(lc)) + 1
        parts = {int(seg_l[0]): seg for seg, seg_l in zip(np.split(ci, cuts), np.split(lc, cuts))
                 if len(seg)}
        for li in sorted(parts, key=lambda li: (-plan.F[tree.leaves[li]], li)):
            capq = np.minimum(most[li], snap.capacity).astype(np.int64)
            groups.append((tree.names[tree.leaves[li]], np.sort(parts[li]), capq))
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
        d = inner.decide(ssnap)
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
        _drop_exact_conflicts(snap, dec)
    return dec, out_state, wake


def _drop_exact_conflicts(snap: Snapshot, dec: Decision) -> None:
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
