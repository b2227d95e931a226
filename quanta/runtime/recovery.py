"""A restarted runtime takes over: the store's jobs loaded into the table, the launchers still
running adopted, the jobs whose processes ended unwatched settled, the policy's state restored.
A part of `Runtime` (quanta/runtime/controller.py)."""

from __future__ import annotations

import base64
import math
import pickle

import numpy as np

from quanta.core.jobtable import DONE, KIND_CODES
from quanta.core.mechanism import Kind, Transition
from quanta.job import read_json
from quanta.runtime.backends.base import Exit
from quanta.runtime.procs import ENDED, Proc
from quanta.service.store import ACTIVE, JobRecord

POLICY_STATE = "policy_state"    # store meta key: (policy label, Decision.state, wake_at)


class RuntimeRecovery:
    """Recovery of a Runtime after a restart (its attributes: store, table, occ, backend, subs,
    procs, cancelling, cluster, loop, policy, lock, events; `_add`, `_close`, `_release`,
    `_stop_running`, `_ask_stop`, `_handle_exit`, `_rate`, `_internal_error`, `workdir`)."""

    def recover(self) -> None:
        """Load the store's jobs (every one, in id order: the table rows are then the same as before
        a restart, so the policy's persisted state still refers to the right jobs); adopt the
        launchers still running (also one started but not recorded as started: found by its
        launch token), and settle the jobs whose processes ended while no scheduler watched as
        what they were becoming (a stop request is recorded before the job is signalled)."""
        with self.lock:
            now = self.now()
            recs = self.store.jobs()
            for rec, row in zip(recs, self._add(recs)):
                if rec.state not in ACTIVE or self.table.state[row] == DONE:
                    continue
                try:
                    self._recover_one(rec, row, now)
                except Exception as err:   # noqa: BLE001 - one job's trouble never stops the service
                    self._internal_error(row, "recovering it after a restart", err, now)
            self.store.dirty_jobs()        # everything is loaded
            self._load_policy_state()
            self.events.add("arrival")

    def _recover_one(self, rec: JobRecord, row: int, now: float) -> None:
        if rec.cancel:
            self.cancelling.add(row)
        if rec.state != "running" and not rec.token:     # waiting, no launch in flight
            if rec.cancel:
                self._close(row, "cancelled", "cancelled by its user", now)
            return
        # what the job was becoming: its recorded stop request, else the user's pending request
        why = rec.stopping or ("cancel" if rec.cancel else "hold" if rec.held else "")
        gpus = np.asarray(rec.devices, dtype=np.int64)
        grace = self.subs[row].grace_s
        wd = self.workdir(rec.id)
        handle = ""
        if not self._devices_here(rec, gpus):
            # started with a larger cluster than this one (--cluster changed): its devices are
            # gone, so it goes back to waiting as on a lost node, its processes stopped first
            gone = f"its devices {rec.devices} ({rec.gpu_type}) are not in cluster {self.cluster.name}"
            if rec.state == "running" and rec.handle and \
                    self.backend.adopt(str(rec.id), wd, rec.handle, grace, token=rec.token):
                self._held_meanwhile(rec, row, now)
                self.procs[row] = Proc(np.empty(0, np.int64))
                self.store.update(rec.id, ("adopt", f"launcher {rec.handle}; {gone}: stopped"),
                                  state="running", handle=rec.handle, reason="")
                self._ask_stop(row, why if why in ("cancel", "hold") else "node")
                return
            gpus = np.empty(0, np.int64)
            self.store.update(rec.id, ("requeued", gone))
            if why not in ("cancel", "hold"):
                why = "node"
        if gpus.size and np.all(self.occ.owner[gpus] == -1):
            if rec.state == "running" and rec.handle and \
                    self.backend.adopt(str(rec.id), wd, rec.handle, grace, token=rec.token):
                handle = rec.handle
            elif rec.token and hasattr(self.backend, "find"):
                handle = self.backend.find(str(rec.id), wd, rec.token, grace, len(gpus))
        if handle:
            self._held_meanwhile(rec, row, now)
            t_idx = self.cluster.types.index(rec.gpu_type)
            self.occ.assign(row, gpus)
            nodes = self.occ.nodes_of(gpus)
            rate = self._rate(row, Transition(row, Kind.START, t_idx, gpus, nodes,
                                              nodes <= self.cluster.min_nodes(t_idx, len(gpus))))
            self.table.apply_transitions(now, np.array([row]), np.array([KIND_CODES["start"]]),
                                         np.array([t_idx]), [gpus], np.array([rate]),
                                         np.array([0.0]))
            self.procs[row] = Proc(gpus, training=True)
            unrecorded = rec.state != "running"
            self.store.update(rec.id, ("adopt", f"launcher {handle}" + (
                " (its start had not been recorded)" if unrecorded else "")), devices=rec.devices,
                state="running", handle=handle, reason="")
            if why in ("cancel", "hold"):
                self._stop_running(row, why)
            elif why:                # preempt, move, node: the job goes back to waiting
                self._release(row, now)
                self._ask_stop(row, "preempt" if why == "move" else why)
            return
        if rec.token:                  # its launcher is gone: so is the rest (never two copies)
            self.backend.kill_leftovers(rec.token)
        done = read_json(wd / "exit.json")
        if not isinstance(done, dict) or done.get("token", "") != rec.token:
            done = None                      # none, or another launch's
        if rec.state != "running" and done is None:
            # the launch was recorded but its launcher never started: nothing ran
            self.store.update(rec.id, devices=[], gpus=0, **ENDED)
            if rec.cancel:
                self._close(row, "cancelled", "cancelled by its user", now)
            return
        if rec.state != "running":            # it started (unrecorded) and ended unwatched
            self.store.update(rec.id, ("adopt", "a launch whose start had not been recorded; "
                                       "it ended while no scheduler ran"))
        self.procs[row] = Proc(gpus, stopping=why)
        if why == "preempt":          # the policy's preemption, not yet in the stored count
            self.table.preemptions[row] += 1
        try:
            code = int(done["returncode"]) if done else -9
        except (KeyError, TypeError, ValueError, OverflowError):
            code = 1
        ended = self._ended_at(done, rec, now)
        self._held_meanwhile(rec, row, ended)
        self._handle_exit(row, Exit(str(rec.id), code, str(done.get("message", "")) if done else
                                    "its processes were gone after a scheduler restart",
                                    bool(done.get("permanent")) if done else False), ended)

    def _held_meanwhile(self, rec: JobRecord, row: int, until: float) -> None:
        """A job the store says was running (and not yet asked to stop) held its GPUs from when
        its attained service was stored until `until` (now, for a launcher adopted; its exit, for
        one that ended while no scheduler ran): counted, as the policy's clock goes on across
        restarts (before, what it held since its last progress report was lost)."""
        if rec.state == "running" and not rec.stopping and rec.attained_at is not None:
            since = rec.attained_at - self.epoch
            self.table.att0[row] += rec.gpus * max(0.0, until - since)

    def _ended_at(self, done: dict | None, rec: JobRecord, now: float) -> float:
        """When a job that ended while no scheduler ran ended, on the service's clock: its
        launcher's exit time (exit.json), not the restart's, so that its run time, GPU-hours and
        attained service leave out the time it was already gone (never after `now`, nor before
        its first start)."""
        try:
            at = float(done["time"]) - self.epoch if done else now
        except (KeyError, TypeError, ValueError, OverflowError):
            return now
        if not math.isfinite(at):
            return now
        return min(now, max(at, rec.start - self.epoch if rec.start is not None else at))

    def _devices_here(self, rec: JobRecord, gpus: np.ndarray) -> bool:
        """Whether a job's recorded devices are GPUs of its recorded type in this cluster."""
        if not gpus.size:
            return True
        c = self.cluster
        return rec.gpu_type in c.types and int(gpus.min()) >= 0 and \
            int(gpus.max()) < c.num_gpus and \
            bool(np.all(c.gpu_type_idx[gpus] == c.types.index(rec.gpu_type)))

    def _load_policy_state(self) -> None:
        blob = self.store.meta(POLICY_STATE)
        if not blob:
            return
        try:
            label, state, wake_at = pickle.loads(base64.b64decode(blob))
        except Exception:   # noqa: BLE001 - an unreadable state: the policy starts afresh
            return
        if label == self.policy.label():      # another policy's state means nothing to this one
            self.loop.state, self.loop.wake_at = state, wake_at

    def _save_policy_state(self) -> None:
        data = (self.policy.label(), self.loop.state, self.loop.wake_at)
        self.store.set_meta(POLICY_STATE, base64.b64encode(pickle.dumps(data)).decode())

