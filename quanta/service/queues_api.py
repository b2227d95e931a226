"""The service's queue endpoints (an APIRouter the app includes):

    GET /v1/queues       the queue layer's report (`quanta serve --queues FILE`): per queue, its
                         quota per GPU type (nominal, most it may hold, lendable), GPUs held and
                         borrowed, running and waiting jobs, fair-share factor; 404 without queues
    GET /v1/positions    waiting jobs' position in their queue and estimated start (unix time or
                         null), for job ids in (after, upto]: what `quanta queue` adds to its page
    GET /v1/sacct        finished jobs (quanta sacct): how each ended, start, end, elapsed,
                         GPU-hours per GPU type; filters user, queue, since; totals by user or
                         queue

A plain user sees only their own jobs; the queues report (aggregates) is everyone's.
"""

from __future__ import annotations

import math
from typing import Callable, Literal

from fastapi import APIRouter, Depends, HTTPException, Query

from quanta.service import accounting

MAX_ID = 2**62


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def queues_view(runtime) -> dict:
    """GET /v1/queues: the layer's latest report with each queue's quota per type."""
    tree = runtime.tree
    if tree is None:
        raise HTTPException(404, "this service runs without queues (quanta serve --queues FILE)")
    report = runtime.queue_report()
    comp = tree.compile(runtime.cluster.types)
    queues = {}
    for q, name in enumerate(tree.names):
        r = dict(report["queues"].get(name, {}))
        r["quota"] = {t: {"nominal": float(comp.nominal_total[q, k]),
                          "max": _finite(comp.cap[q, k]),
                          "lendable": _finite(comp.nominal_total[q, k] - comp.reserved[q, k])}
                      for k, t in enumerate(comp.types)
                      if comp.nominal_total[q, k] or (q in tree.leaf_pos and
                                                      comp.usable[tree.leaf_pos[q], k])}
        r["users"] = list(tree.users[q]) or ["*"]
        queues[name] = r
    return {"name": tree.name, "source": tree.source, "policy": runtime.policy.label(),
            "t": report.get("t"), "types": list(comp.types), "queues": queues,
            "priority_classes": dict(tree.config.priority_classes)}


def router(store, runtime, caller: Callable) -> APIRouter:
    api = APIRouter(prefix="/v1")

    @api.get("/queues")
    def get_queues(me=Depends(caller)) -> dict:
        return queues_view(runtime)

    @api.get("/positions")
    def positions(after: int = Query(0, ge=0, le=MAX_ID),
                  upto: int = Query(MAX_ID, ge=0, le=MAX_ID), me=Depends(caller)) -> dict:
        got = {j: p for j, p in runtime.current_positions().items() if after < j <= upto}
        with runtime.lock:
            if not me.admin:
                t, row_of = runtime.table, runtime.row_of
                got = {j: p for j, p in got.items() if t.specs[row_of[j]].user == me.user}
        return {"queues": runtime.tree is not None,
                "positions": {str(j): {"position": p, "est_start": e}
                              for j, (p, e) in sorted(got.items())}}

    @api.get("/sacct")
    def sacct(user: str | None = Query(None, max_length=64),
              queue: str | None = Query(None, max_length=64),
              since: float | None = Query(None, ge=0, le=1e12),
              by: Literal["user", "queue"] | None = Query(None),
              me=Depends(caller)) -> dict:
        if user is not None and user != me.user and not me.admin:   # (it was ignored: the
            raise HTTPException(403, "only an admin may see another user's jobs")  # caller's own)
        who = user if me.admin else me.user
        rows = accounting.history(store, who, since)
        if queue is not None:
            rows = [r for r in rows if r["queue"] == queue]
        return {"jobs": rows, "totals": accounting.totals(rows, by) if by else []}

    return api
