"""Accounting (`quanta sacct`): every launch of a job with its GPU type, GPU count and wall-clock
interval, in the service's database (table `gpu_usage`, created here on first use), and the history
of finished jobs built from it: job, user, queue, how it ended, start, end, elapsed, GPU-hours per
GPU type; totals per user or queue.

The runtime records a launch when its launcher starts (`started`) and its end when the job's
processes are seen to end (`ended`); a launch adopted after a restart keeps its row. Jobs finished
before this table existed are counted from their attained GPU-seconds on their last GPU type.
"""

from __future__ import annotations

from typing import Iterable

from quanta.service.store import TERMINAL, JobRecord, Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS gpu_usage (
    job_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    gpu_type TEXT NOT NULL,
    gpus INTEGER NOT NULL,
    start REAL NOT NULL,             -- wall clock of the launch
    end_time REAL,                   -- wall clock its processes were seen to end (NULL: running)
    PRIMARY KEY (job_id, attempt)
);
"""


def _ready(store: Store) -> None:
    if not getattr(store, "_gpu_usage_ready", False):
        store.conn().executescript(SCHEMA)
        store._gpu_usage_ready = True     # type: ignore[attr-defined]


def started(store: Store, job_id: int, attempt: int, gpu_type: str, gpus: int, at: float) -> None:
    _ready(store)
    with store.tx() as db:
        db.execute("INSERT OR REPLACE INTO gpu_usage(job_id, attempt, gpu_type, gpus, start) "
                   "VALUES (?, ?, ?, ?, ?)", (job_id, attempt, gpu_type, gpus, at))


def ended(store: Store, job_id: int, at: float) -> None:
    _ready(store)
    with store.tx() as db:
        db.execute("UPDATE gpu_usage SET end_time = MAX(start, ?) WHERE job_id = ? AND end_time "
                   "IS NULL", (at, job_id))     # (an exit time read back: never before the start)


def run_seconds(store: Store, job_ids: list[int], now: float) -> dict[int, float]:
    """Wall-clock seconds each job's processes have run, over all its launches (a running one's
    to `now`): Slurm's TIME, which waits, holds and stops leave out."""
    if not job_ids:
        return {}
    _ready(store)
    marks = ",".join("?" * len(job_ids))
    rows = store.conn().execute(
        f"SELECT job_id, SUM(MAX(0, COALESCE(end_time, ?) - start)) FROM gpu_usage "
        f"WHERE job_id IN ({marks}) GROUP BY job_id", (now, *job_ids))
    return {int(j): float(s) for j, s in rows}


def history(store: Store, user: str | None = None, since: float | None = None) -> list[dict]:
    """Finished, failed and cancelled jobs in id order (of `user`; ended at or after `since`), each
    with GPU-hours per GPU type."""
    _ready(store)
    db = store.conn()
    sql = f"SELECT * FROM jobs WHERE state IN ({','.join('?' * len(TERMINAL))})"
    args: list = list(TERMINAL)
    if user is not None:
        sql += " AND user = ?"
        args.append(user)
    if since is not None:
        sql += " AND end_time >= ?"
        args.append(float(since))
    recs = [JobRecord.from_row(r) for r in db.execute(sql + " ORDER BY id", args)]
    used: dict[int, dict[str, float]] = {}
    for job_id, gtype, gpu_s in db.execute(
            "SELECT u.job_id, u.gpu_type, SUM(u.gpus * MAX(0, COALESCE(u.end_time, j.end_time, "
            "u.start) - u.start)) FROM gpu_usage u JOIN jobs j ON j.id = u.job_id "
            f"WHERE j.state IN ({','.join('?' * len(TERMINAL))}) GROUP BY u.job_id, u.gpu_type",
            list(TERMINAL)):
        used.setdefault(int(job_id), {})[gtype] = float(gpu_s) / 3600.0
    out = []
    for r in recs:
        gpu_h = used.get(r.id)
        if gpu_h is None:          # launched before accounting was kept: its attained service
            gpu_h = {r.gpu_type: r.attained / 3600.0} if r.attained > 0 and r.gpu_type else {}
        out.append({"id": r.id, "name": r.name, "user": r.user,
                    "queue": r.queue,
                    "state": r.state, "reason": r.reason, "submit": r.submit, "start": r.start,
                    "end": r.end_time,
                    "elapsed_s": (r.end_time - r.start) if r.start and r.end_time else 0.0,
                    "gpu_hours": {t: round(h, 6) for t, h in sorted(gpu_h.items())},
                    "preemptions": r.preemptions, "failures": r.failures})
    return out


def totals(rows: Iterable[dict], by: str) -> list[dict]:
    """Per user or queue: jobs, how they ended, elapsed hours, GPU-hours per type and in all."""
    groups: dict[str, dict] = {}
    for r in rows:
        g = groups.setdefault(r[by], {by: r[by], "jobs": 0, "finished": 0, "failed": 0,
                                      "cancelled": 0, "elapsed_h": 0.0, "gpu_hours": {},
                                      "gpu_hours_total": 0.0})
        g["jobs"] += 1
        g[r["state"]] = g.get(r["state"], 0) + 1
        g["elapsed_h"] += r["elapsed_s"] / 3600.0
        for t, h in r["gpu_hours"].items():
            g["gpu_hours"][t] = g["gpu_hours"].get(t, 0.0) + h
            g["gpu_hours_total"] += h
    return [groups[k] for k in sorted(groups)]
