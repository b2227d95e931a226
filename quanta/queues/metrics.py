"""Per-queue results of a finished simulation: what each queue's jobs got against its quota.

From the run's job table (exact): jobs, finished, average JCT and wait, GPU-hours received,
preemptions. From the queue layer's state (its accounting at each decision, completed here with
the table's end times for the jobs that ran past the last decision): GPU-hours per GPU type,
GPU-hours on borrowed quota, preemptions made to reclaim lent quota and for priority.
Quota GPU-hours = the queue's nominal GPUs (all types) x the run's makespan (first arrival to last
completion).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from quanta.queues.spec import QueueTree

QUEUE_COLUMNS = ["policy", "queue", "parent", "jobs", "finished", "avg_jct_s", "avg_queue_s",
                 "gpu_hours", "quota_gpu_hours", "received_vs_quota", "borrowed_gpu_hours",
                 "reclaim_preemptions", "priority_preemptions", "preemptions"]


def queue_metrics(res, queues, state: dict | None = None) -> list[dict[str, Any]]:
    """One row per queue (leaves, then cohorts summing their subtree) of a SimResult run under a
    QueueLayer. `queues`: the layer or its QueueTree; `state`: the layer's final state (the
    SimResult's `policy_state`), for per-type, borrowed and reclaim columns (else NaN / 0)."""
    from quanta.report.metrics import job_metrics
    tree: QueueTree = getattr(queues, "tree", queues)
    t = res.table
    m = job_metrics(res)
    K = len(res.cluster.types)
    comp = tree.compile(res.cluster.types)
    N = len(tree.names)
    leaf_of = np.array([tree.queue_of(s) for s in t.specs], dtype=np.int64)
    finished = m.finished
    start = float(np.min(t.submit)) if len(t) else 0.0
    end = float(np.nanmax(t.end)) if finished.any() else start
    span_h = max(end - start, 0.0) / 3600.0
    # per-type and borrowed GPU-seconds from the layer's accounting, plus the tail after its
    # last decision
    per = np.full((N, K), np.nan)
    borrowed = np.full(N, np.nan)
    reclaims = np.zeros(N, dtype=np.int64)
    prio_pre = np.zeros(N, dtype=np.int64)
    if state:
        per[:] = 0.0
        borrowed[:] = 0.0
        for name, tot in state.get("totals", {}).items():
            q = tree.names.index(name) if name in tree.names else -1
            if q < 0:
                continue
            per[q] += np.asarray(tot["gpu_s"], dtype=float)[:K]
            borrowed[q] += float(np.sum(tot["borrowed_s"]))
            reclaims[q] += int(tot["reclaims"])
            prio_pre[q] += int(tot["priority_preemptions"])
        prev, t_last = state.get("prev"), state.get("t")
        if prev is not None and t_last is not None and len(prev["rows"]):
            rows = prev["rows"]
            stop = np.where(np.isnan(t.end[rows]), end, t.end[rows])
            got = prev["gpus"] * np.maximum(stop - t_last, 0.0)
            held = np.zeros((N, K))
            tail = np.zeros((N, K))
            lq = leaf_of[rows]
            ok = lq >= 0
            np.add.at(held, (lq[ok], prev["type"][ok]), prev["gpus"][ok])
            np.add.at(tail, (lq[ok], prev["type"][ok]), got[ok])
            per += tail
            with np.errstate(divide="ignore", invalid="ignore"):
                frac = np.where(held > 0, np.maximum(held - comp.nominal_total, 0.0) / held, 0.0)
            borrowed += (frac * tail).sum(axis=1)
    rows_out: list[dict[str, Any]] = []
    subtree = [[q] for q in range(N)]
    for q in tree.bottom_up:
        p = int(tree.parent[q])
        if p >= 0:
            subtree[p] += subtree[q]
    order = [q for q in tree.leaves] + [q for q in range(N) if q not in tree.leaf_pos]
    for q in order:
        sel = np.isin(leaf_of, subtree[q])
        fin = sel & finished
        gpu_h = float(np.sum(m.gpu_seconds[sel])) / 3600.0
        quota_h = float(comp.nominal_total[q].sum()) * span_h
        leaves = [x for x in subtree[q] if x in tree.leaf_pos]
        row = {
            "policy": res.policy, "queue": tree.names[q],
            "parent": tree.names[tree.parent[q]] if tree.parent[q] >= 0 else "",
            "jobs": int(sel.sum()), "finished": int(fin.sum()),
            "avg_jct_s": float(np.mean(m.jct[fin])) if fin.any() else float("nan"),
            "avg_queue_s": float(np.mean(m.queue[fin])) if fin.any() else float("nan"),
            "gpu_hours": gpu_h, "quota_gpu_hours": quota_h,
            "received_vs_quota": gpu_h / quota_h if quota_h > 0 else float("nan"),
            "borrowed_gpu_hours": float(np.sum(borrowed[leaves])) / 3600.0,
            "reclaim_preemptions": int(reclaims[leaves].sum()),
            "priority_preemptions": int(prio_pre[leaves].sum()),
            "preemptions": int(t.preemptions[sel].sum()),
        }
        for k, ty in enumerate(res.cluster.types):
            row[f"gpu_hours_{ty}"] = float(np.sum(per[leaves, k])) / 3600.0
        rows_out.append(row)
    return rows_out


def queue_columns(rows: list[dict[str, Any]]) -> list[str]:
    """QUEUE_COLUMNS, then the per-type GPU-hours columns of `rows` by name."""
    return QUEUE_COLUMNS + sorted({k for r in rows for k in r if k not in QUEUE_COLUMNS})


def write_queue_metrics(path, rows: list[dict[str, Any]]) -> None:
    """queues.csv: queue_columns(rows)."""
    import csv
    from pathlib import Path
    cols = queue_columns(rows)
    with open(Path(path), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([_fmt(r.get(c, "")) for c in cols])


def _fmt(v) -> str:
    if isinstance(v, float):
        return "" if v != v else f"{v:.6g}"
    return str(v)
