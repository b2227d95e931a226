"""Starting a job's processes: the launch of every started job once its devices are free, the
job folder claimed for it, a launch that failed. A part of `Runtime`
(quanta/runtime/controller.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import time

import numpy as np

from quanta.core.mechanism import Transition
from quanta.errors import QuantaError
from quanta.job import CHECKPOINT_ERROR, read_json, write_json
from quanta.runtime import faults
from quanta.runtime.backends.base import Exit, Launch, Rank
from quanta.runtime.procs import ENDED, Proc
from quanta.service import accounting
from quanta.service.store import JobRecord

IDENTITY = "identity.json"       # a job folder's owner: this store's id and the job's id


class RuntimeLaunching:
    """Launches of a Runtime's jobs (its attributes: to_launch, procs, ids, subs, store, cluster,
    backend, table, warned, reasons, epoch, store_id, jobs_dir, clock; `_handle_exit`,
    `_attained`, `workdir`)."""

    def _launch_ready(self, now: float) -> None:
        """Launch every started job whose devices are no longer held by stopping processes."""
        if not self.to_launch:
            return
        draining = set()
        for p in self.procs.values():
            draining.update(p.gpus.tolist())
        for row, tr in list(self.to_launch.items()):
            if row in self.procs or draining.intersection(tr.gpus.tolist()):
                continue
            del self.to_launch[row]
            self._launch(row, tr, now)

    def _launch(self, row: int, tr: Transition, now: float) -> None:
        job_id = self.ids[row]
        sub = self.subs[row]
        rec = self.store.job(job_id)
        attempt = (rec.attempt if rec else 0) + 1
        gtype = self.cluster.types[tr.gpu_type]
        c = self.cluster
        ranks = []
        per_node: dict[int, int] = {}
        for g in tr.gpus.tolist():
            node = int(c.gpu_node[g])
            per_node[node] = per_node.get(node, -1) + 1
            device = g - int(c.node_first_gpu[node])
            ranks.append(Rank(node, per_node[node], "" if gtype == "cpu" else str(device)))
        env = dict(sub.env)
        env.update({"QUANTA_JOB_ID": str(job_id), "QUANTA_JOB_DIR": str(self.workdir(job_id)),
                    "QUANTA_TOTAL_STEPS": str(sub.steps or 0), "QUANTA_GLOBAL_BATCH": str(sub.batch_size),
                    "QUANTA_GPU_TYPE": gtype, "QUANTA_CHECKPOINT_EVERY": str(sub.checkpoint_every)})
        if dataclasses.is_dataclass(tr.plan):      # the policy's execution plan, for the job
            plan = dataclasses.asdict(tr.plan)
            env["QUANTA_PLAN"] = json.dumps(plan)
            env["QUANTA_ACCUMULATION"] = str(max(1, int(plan.get("ga_steps", 1))))
        if rec is not None and rec.checkpoint_step > 0:   # the SDK fails clearly if it is gone
            env["QUANTA_CHECKPOINT_STEP"] = str(rec.checkpoint_step)
        token = secrets.token_hex(8)
        launch = Launch(str(job_id), self.workdir(job_id), list(sub.command), ranks, gtype, attempt,
                        cwd=sub.cwd, env=env, grace_s=sub.grace_s, token=token)
        nodes = ",".join(self.cluster.nodes[n].name for n in sorted({r.node for r in ranks}))
        try:
            self._claim_folder(job_id, rec)
            # the launch is recorded before it starts: a restart finds the launcher by its token
            # (or learns that it never started) instead of starting a second one
            self.store.update(job_id, token=token, attempt=attempt, devices=tr.gpus.tolist(),
                              gpu_type=gtype, nodes=nodes, stopping="")
            faults.point("launch-intent")
            handle = self.backend.launch(launch)
        except Exception as err:   # noqa: BLE001 - the job's failure to start, never the service's
            self._launch_failed(row, err, now)
            return
        faults.point("launched")
        self.warned.discard(row)
        self.reasons.pop(row, None)
        accounting.started(self.store, job_id, attempt, gtype, len(tr.gpus), self.epoch + now)
        self.procs[row] = Proc(tr.gpus.copy(), launched_at=self.clock())
        first = np.isnan(self.table.first_start[row]) or rec is None or rec.start is None
        cols = dict(state="running", reason="", gpus=len(tr.gpus), gpu_type=gtype,
                    devices=tr.gpus.tolist(), nodes=nodes, handle=handle, attempt=attempt,
                    **self._attained(row, now))
        if rec is not None and rec.start is None:
            cols["start"] = self.epoch + now
        self.store.update(job_id, ("start" if first else "resume",
                                   f"{len(tr.gpus)} x {gtype} on {cols['nodes']}"), **cols)
        faults.point("started")

    def _claim_folder(self, job_id: int, rec: JobRecord | None) -> None:
        """Make the job's folder this job's: a folder another database's job left there (same id,
        other store) is moved aside to jobs/.orphaned/, never resumed from. A folder without an
        identity counts as this job's only if this job was launched before (an upgrade)."""
        wd = self.workdir(job_id)
        mine = {"store": self.store_id, "job": job_id}
        ident = read_json(wd / IDENTITY)
        if ident == mine:
            (wd / CHECKPOINT_ERROR).unlink(missing_ok=True)
            return
        if wd.exists() and any(wd.iterdir()) and not (ident is None and rec is not None
                                                      and rec.attempt > 0):
            owner = ident.get("store", "unknown") if isinstance(ident, dict) else "unknown"
            dest = self.jobs_dir / ".orphaned" / f"{job_id}-{owner}-{int(time.time() * 1000)}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            wd.rename(dest)
            self.store.update(job_id, ("folder-moved", f"{wd} held another database's job "
                                       f"{job_id} (store {owner}); moved to {dest}"))
        wd.mkdir(parents=True, exist_ok=True)
        (wd / CHECKPOINT_ERROR).unlink(missing_ok=True)
        write_json(wd / IDENTITY, mine)

    def _launch_failed(self, row: int, err: Exception, now: float) -> None:
        """The launch raised (the backend could not start the launcher, or the job's folder is
        unusable): said in the job's events and its log; an error that a retry would repeat
        fails the job, any other is a failure retried after a back-off."""
        from quanta.runtime.launch import is_permanent
        job_id = self.ids[row]
        msg = " ".join(f"could not start: {type(err).__name__}: {err}".split())[:500]
        try:
            from quanta.runtime.accounts import open_private   # never through a planted link
            with os.fdopen(open_private(self.workdir(job_id) / "job.log"), "a",
                           errors="replace") as f:
                f.write(f"quanta: {msg}\n")
        except OSError:
            pass
        self.store.update(job_id, ("launch-error", msg), devices=[], **ENDED)
        self.procs.pop(row, None)
        self.procs[row] = Proc(np.empty(0, np.int64))
        self._handle_exit(row, Exit(str(job_id), 127, msg,
                                    isinstance(err, QuantaError) or is_permanent(err)), now)

