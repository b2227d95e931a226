"""Durable state: every job, its allocation and its events in SQLite (WAL).

One connection per thread; every change is one transaction, so a crash (even `kill -9`) leaves the
last committed state: a submitted job is never lost, a running job's record names its launcher (to
adopt it) and its last reported step (it resumes from its last checkpoint).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterable

from quanta.errors import QuantaError

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user TEXT NOT NULL,
    name TEXT NOT NULL,
    queue TEXT NOT NULL,
    spec TEXT NOT NULL,              -- the validated submission, JSON
    state TEXT NOT NULL,             -- pending | running | finished | failed | cancelled
    reason TEXT NOT NULL DEFAULT '', -- why pending, or how it ended
    held INTEGER NOT NULL DEFAULT 0,
    cancel INTEGER NOT NULL DEFAULT 0,
    submit REAL NOT NULL,
    start REAL,                      -- first start
    end_time REAL,
    gpus INTEGER NOT NULL DEFAULT 0,
    gpu_type TEXT NOT NULL DEFAULT '',
    devices TEXT NOT NULL DEFAULT '[]',  -- global GPU ids held
    nodes TEXT NOT NULL DEFAULT '',
    handle TEXT NOT NULL DEFAULT '', -- the backend's handle of the running launcher
    attempt INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    steps_done REAL NOT NULL DEFAULT 0,
    total_steps REAL NOT NULL,
    steps_per_s REAL NOT NULL DEFAULT 0,
    attained REAL NOT NULL DEFAULT 0,    -- GPU-seconds held so far
    preemptions INTEGER NOT NULL DEFAULT 0,
    dirty INTEGER NOT NULL DEFAULT 1     -- changed by the API since the runtime last looked
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE INDEX IF NOT EXISTS jobs_dirty ON jobs(dirty);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER,
    time REAL NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS events_job ON events(job_id);
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY,
    token_sha256 TEXT UNIQUE NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

# columns added after the first release: (name, declaration); a database of an older release gains
# them at open (ALTER TABLE ... ADD COLUMN), so an upgraded service keeps its jobs
ADDED_COLUMNS = (
    # why the job's processes were asked to stop (preempt, move, hold, cancel, node; '' = not
    # stopping): recorded before the job is signalled, so a restart knows what the job was becoming
    ("stopping", "TEXT NOT NULL DEFAULT ''"),
    # the current launch's token ('' = none in flight): recorded before the launcher starts, so a
    # restart finds (adopts) a launcher it started but had not recorded instead of starting another
    ("token", "TEXT NOT NULL DEFAULT ''"),
    # the last checkpoint the job reported: a job whose checkpoints have vanished fails clearly
    ("checkpoint_step", "INTEGER NOT NULL DEFAULT 0"),
    # the client's idempotency key of the submission, and the digest of what it submitted
    ("idem_key", "TEXT"),
    ("spec_sha", "TEXT NOT NULL DEFAULT ''"),
    # when `attained` was exact (wall clock; NULL: unknown): a job running then has held its
    # GPUs since, so a restart (and the API) counts its attained service on from there
    ("attained_at", "REAL"),
)
INDEXES = """
CREATE UNIQUE INDEX IF NOT EXISTS jobs_idem ON jobs(user, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_user ON jobs(user, id);
CREATE INDEX IF NOT EXISTS events_kind ON events(kind);
CREATE INDEX IF NOT EXISTS jobs_state_queue ON jobs(state, queue);   -- /metrics, index only
CREATE INDEX IF NOT EXISTS jobs_started ON jobs(start, submit) WHERE start IS NOT NULL;
"""

ACTIVE = ("pending", "running")
TERMINAL = ("finished", "failed", "cancelled")


@dataclass
class JobRecord:
    id: int
    user: str
    name: str
    queue: str
    spec: dict
    state: str
    reason: str
    held: bool
    cancel: bool
    submit: float
    start: float | None
    end_time: float | None
    gpus: int
    gpu_type: str
    devices: list
    nodes: str
    handle: str
    attempt: int
    failures: int
    steps_done: float
    total_steps: float
    steps_per_s: float
    attained: float
    preemptions: int
    dirty: bool
    stopping: str = ""
    token: str = ""
    checkpoint_step: int = 0
    idem_key: str | None = None
    spec_sha: str = ""
    attained_at: float | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "JobRecord":
        d = {k: row[k] for k in row.keys() if k in _FIELDS}
        d["spec"] = json.loads(d["spec"])
        d["devices"] = json.loads(d["devices"])
        d["held"], d["cancel"], d["dirty"] = bool(d["held"]), bool(d["cancel"]), bool(d["dirty"])
        return cls(**d)

    def attained_now(self, now: float) -> float:
        """GPU-seconds held up to `now` (wall clock): a job running when its count was stored
        has held its GPUs since (its count goes on from `attained_at`)."""
        if self.state == "running" and not self.stopping and self.attained_at is not None:
            return self.attained + self.gpus * max(0.0, now - self.attained_at)
        return self.attained

    def public(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        for k in ("dirty", "handle", "cancel", "token", "idem_key", "spec_sha", "attained_at"):
            d.pop(k)
        d["attained"] = self.attained_now(time.time())
        return d


_FIELDS = {f.name for f in fields(JobRecord)}


class IdempotencyConflict(ValueError):
    """An idempotency key used again with another job spec."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Store:
    def __init__(self, path: Path | str):
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # the database is 0600 from its creation; SQLite gives its -wal and -shm files its mode
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        for suffix in ("", "-wal", "-shm"):
            if os.path.isfile(self.path + suffix) and not os.path.islink(self.path + suffix):
                os.chmod(self.path + suffix, 0o600)
        self._local = threading.local()
        try:
            db = self.conn()
            db.executescript(SCHEMA)
            have = {r[1] for r in db.execute("PRAGMA table_info(jobs)")}
            for name, decl in ADDED_COLUMNS:
                if name not in have:
                    try:
                        db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {decl}")
                    except sqlite3.OperationalError as err:  # another process added it meanwhile
                        if "duplicate column" not in str(err):
                            raise
            db.executescript(INDEXES)
        except sqlite3.DatabaseError as err:      # another file, or a damaged database
            raise QuantaError(f"not a Quanta database, or a damaged one ({err}): move it away "
                              f"to start afresh", source=self.path) from None

    def conn(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=30000")
            self._local.db = db
        return db

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the database file and empty it (at a clean stop, so
        that quanta.db alone holds the whole state: a copy of it is a backup)."""
        try:
            self.conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:       # (busy: the log stays, and SQLite replays it at the next open)
            pass

    class _Tx:
        def __init__(self, db: sqlite3.Connection):
            self.db = db

        def __enter__(self) -> sqlite3.Connection:
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type, exc, tb) -> bool:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")
            return False

    def tx(self) -> "_Tx":
        return Store._Tx(self.conn())

    # -- meta ------------------------------------------------------------------------------------
    def meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self.tx() as db:
            db.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE "
                       "SET value = excluded.value", (key, value))

    def epoch(self) -> float:
        """Wall-clock time of the service's first start: the runtime's time zero."""
        value = self.meta("epoch")
        if value is None:
            value = repr(time.time())
            with self.tx() as db:
                db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('epoch', ?)", (value,))
            value = self.meta("epoch")
        return float(value)

    def store_id(self) -> str:
        """This database's identity (random, made once): job folders carry it, so a job folder
        left by another database is never taken for this job's."""
        value = self.meta("store_id")
        if value is None:
            with self.tx() as db:
                db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('store_id', ?)",
                           (secrets.token_hex(8),))
            value = self.meta("store_id")
        return str(value)

    # -- users -----------------------------------------------------------------------------------
    def add_user(self, name: str, admin: bool = False, token: str | None = None) -> str:
        token = token or secrets.token_urlsafe(24)
        with self.tx() as db:
            db.execute("INSERT INTO users(name, token_sha256, admin) VALUES (?, ?, ?) "
                       "ON CONFLICT(name) DO UPDATE SET token_sha256 = excluded.token_sha256, "
                       "admin = excluded.admin", (name, token_hash(token), int(admin)))
        return token

    def user(self, name: str) -> tuple[str, bool] | None:
        row = self.conn().execute("SELECT name, admin FROM users WHERE name = ?", (name,)).fetchone()
        return (row[0], bool(row[1])) if row else None

    def user_for(self, token: str) -> tuple[str, bool] | None:
        row = self.conn().execute("SELECT name, admin FROM users WHERE token_sha256 = ?",
                                  (token_hash(token),)).fetchone()
        return (row[0], bool(row[1])) if row else None

    def users(self) -> list[tuple[str, bool]]:
        return [(r[0], bool(r[1])) for r in self.conn().execute("SELECT name, admin FROM users")]

    # -- jobs ------------------------------------------------------------------------------------
    def add_job(self, user: str, name: str, queue: str, spec: dict, total_steps: float,
                submit: float) -> int:
        return self.add_job_once(user, name, queue, spec, total_steps, submit)[0]

    def add_job_once(self, user: str, name: str, queue: str, spec: dict, total_steps: float,
                     submit: float, idem_key: str | None = None) -> tuple[int, bool]:
        """(job id, created). With an idempotency key, a second submission of the same user with
        the same key is the first one's job (created False), in the same transaction as the
        check; the same key with another spec is an IdempotencyConflict."""
        text = json.dumps(spec, sort_keys=True)
        sha = hashlib.sha256(text.encode()).hexdigest()
        with self.tx() as db:
            if idem_key is not None:
                row = db.execute("SELECT id, spec_sha FROM jobs WHERE user = ? AND idem_key = ?",
                                 (user, idem_key)).fetchone()
                if row is not None:
                    if row[1] != sha:
                        raise IdempotencyConflict(
                            f"idempotency key '{idem_key}' was used for job {row[0]} with "
                            "another job spec")
                    return int(row[0]), False
            cur = db.execute("INSERT INTO jobs(user, name, queue, spec, state, submit, total_steps, "
                             "idem_key, spec_sha) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
                             (user, name, queue, json.dumps(spec), submit, total_steps, idem_key,
                              sha))
            job_id = int(cur.lastrowid)
            db.execute("INSERT INTO events(job_id, time, kind, detail) VALUES (?, ?, 'submit', ?)",
                       (job_id, submit, f"by {user}"))
        return job_id, True

    def job(self, job_id: int) -> JobRecord | None:
        row = self.conn().execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return JobRecord.from_row(row) if row else None

    @staticmethod
    def _where(user: str | None, states: Iterable[str] | None) -> tuple[str, list]:
        sql, args = " WHERE 1", []
        if user is not None:
            sql += " AND user = ?"
            args.append(user)
        if states is not None:
            states = list(states)
            sql += f" AND state IN ({','.join('?' * len(states))})"
            args += states
        return sql, args

    def jobs(self, user: str | None = None, states: Iterable[str] | None = None,
             limit: int | None = None, after: int = 0, newest: bool = False) -> list[JobRecord]:
        """Jobs in id order: those with an id above `after`, at most `limit` (newest=True: the
        newest `limit`, still in id order)."""
        where, args = self._where(user, states)
        sql = "SELECT * FROM jobs" + where
        if after:
            sql += " AND id > ?"
            args.append(int(after))
        sql += " ORDER BY id" + (" DESC" if newest else "")
        if limit:
            sql += f" LIMIT {int(limit)}"
        recs = [JobRecord.from_row(r) for r in self.conn().execute(sql, args)]
        return recs[::-1] if newest else recs

    def count_jobs(self, user: str | None = None, states: Iterable[str] | None = None) -> int:
        where, args = self._where(user, states)
        return int(self.conn().execute("SELECT COUNT(*) FROM jobs" + where, args).fetchone()[0])

    def dirty_jobs(self) -> list[JobRecord]:
        with self.tx() as db:
            rows = db.execute("SELECT * FROM jobs WHERE dirty = 1 ORDER BY id").fetchall()
            db.execute("UPDATE jobs SET dirty = 0 WHERE dirty = 1")
        return [JobRecord.from_row(r) for r in rows]

    def request(self, job_id: int, **flags: bool) -> None:
        """A user's request (cancel, held) for the runtime to carry out."""
        sets = ", ".join(f"{k} = ?" for k in flags)
        with self.tx() as db:
            db.execute(f"UPDATE jobs SET {sets}, dirty = 1 WHERE id = ?",
                       [int(v) for v in flags.values()] + [job_id])
            for k, v in flags.items():
                kind = {"cancel": "cancel-request", "held": "hold" if v else "release"}[k]
                db.execute("INSERT INTO events(job_id, time, kind) VALUES (?, ?, ?)",
                           (job_id, time.time(), kind))

    def update(self, job_id: int, event: tuple[str, str] | None = None, at: float | None = None,
               **cols: Any) -> None:
        """Change a job's columns (and log an event) in one transaction."""
        for k in ("devices",):
            if k in cols:
                cols[k] = json.dumps(cols[k])
        with self.tx() as db:
            if cols:
                db.execute(f"UPDATE jobs SET {', '.join(f'{k} = ?' for k in cols)} WHERE id = ?",
                           list(cols.values()) + [job_id])
            if event is not None:
                db.execute("INSERT INTO events(job_id, time, kind, detail) VALUES (?, ?, ?, ?)",
                           (job_id, time.time() if at is None else at, event[0], event[1]))

    def update_many(self, rows: list[tuple[int, dict]]) -> None:
        """Progress of many jobs in one transaction."""
        if not rows:
            return
        with self.tx() as db:
            for job_id, cols in rows:
                db.execute(f"UPDATE jobs SET {', '.join(f'{k} = ?' for k in cols)} WHERE id = ?",
                           list(cols.values()) + [job_id])

    def events(self, job_id: int | None = None) -> list[dict]:
        sql = "SELECT * FROM events" + (" WHERE job_id = ?" if job_id is not None else "")
        args = (job_id,) if job_id is not None else ()
        return [dict(r) for r in self.conn().execute(sql + " ORDER BY seq", args)]

    def count_events(self, kind: str) -> int:
        return int(self.conn().execute("SELECT COUNT(*) FROM events WHERE kind = ?",
                                       (kind,)).fetchone()[0])
