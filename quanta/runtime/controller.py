"""The runtime driver: the same DecisionLoop as the simulator, applied to real processes.

Each iteration (`step`) reads what changed (new submissions, cancel/hold requests from the API,
jobs' processes that ended, their reported progress and throughput), asks the policy when the
simulator would (every event for event-driven policies, every round for round-based ones, and at
the policy's wake-up times), and carries out the transitions through a backend: a preempted job is
sent SIGTERM (it checkpoints and exits), a started, migrated or resized job is launched on its new
devices once the processes that held them are gone, and resumes from its checkpoint.

Time is seconds since the service's first start (kept in the store), so policies see one clock
across restarts. Measured throughput goes into the job table (policies see real progress and
rates) and into the online performance model. Everything a user would miss after a crash is in the
store before it matters: a restarted runtime adopts the launchers still running and requeues the
jobs whose processes are gone (they resume from their last checkpoint).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from quanta.core.jobtable import (DONE, KIND_CODES, PENDING, RUNNING, SHARE_MODES, JobTable,
                                  never_fits)
from quanta.core.loop import DecisionLoop, next_round
from quanta.core.mechanism import Kind, Transition
from quanta.core.sharing import tenancy_rate
from quanta.errors import QuantaError
from quanta.job import CHECKPOINT_ERROR, read_json
from quanta.model.cluster import Cluster
from quanta.perf.base import PerfModel, allocation_rate
from quanta.perf.online import OnlineModel
from quanta.placement.occupancy import Occupancy
from quanta.policies.base import Policy
from quanta.runtime import faults
from quanta.runtime.backends.base import Backend, Exit
from quanta.runtime.launching import RuntimeLaunching
from quanta.runtime.procs import ENDED, Proc
from quanta.runtime.progress import RuntimeProgress
from quanta.runtime.queues import RuntimeQueues
from quanta.runtime.recovery import RuntimeRecovery
from quanta.runtime.spec import JobSubmission
from quanta.service import accounting
from quanta.service.store import ACTIVE, JobRecord, Store

MAX_LATENCIES = 10_000
BACKOFF_S, BACKOFF_CAP_S = 1.0, 120.0   # wait before the n-th retry: 1 s, 2 s, 4 s, ... 120 s


class _Recorded:
    """The runtime's policy as the decision loop calls it: the same decisions, the latest one kept
    (with the table rows of its snapshot) for the pending reasons and positions it gives."""

    def __init__(self, policy: Policy):
        self.inner = policy
        self.rows: np.ndarray = np.empty(0, np.int64)
        self.reasons: dict[int, str] = {}
        self.positions: dict[int, tuple[int, float | None]] = {}

    @property
    def interval(self) -> float | None:     # (what the decision loop checks and says)
        return self.inner.interval

    def label(self) -> str:
        return self.inner.label()

    def decide(self, snap):
        dec = self.inner.decide(snap)
        self.rows, self.reasons, self.positions = snap.jobs.rows.copy(), dec.reasons, dec.positions
        return dec


@dataclass
class RuntimeStats:
    decisions: int = 0
    latencies: list[float] = field(default_factory=list)   # seconds per decision (policy + mechanism)


class Runtime(RuntimeRecovery, RuntimeLaunching, RuntimeQueues, RuntimeProgress):
    def __init__(self, store: Store, backend: Backend, cluster: Cluster, policy: Policy,
                 perf: PerfModel, jobs_dir: Path, poll_s: float = 0.25, clock=time.time):
        self.store = store
        self.backend = backend
        self.cluster = cluster
        self.policy = policy
        self.perf = perf if isinstance(perf, OnlineModel) else OnlineModel(perf)
        self.jobs_dir = Path(jobs_dir).resolve()
        self.poll_s = poll_s
        self.clock = clock
        self.epoch = store.epoch()
        self.table = JobTable([], cluster, self.perf)
        self.occ = Occupancy(cluster)
        self.recorded = _Recorded(policy)
        self.loop = DecisionLoop(self.recorded, self.table, self.occ)  # type: ignore[arg-type]
        self.tree = None                         # the queues (QueueTree) under a queue layer
        self.positions: dict[int, tuple[int, float | None]] = {}   # job id -> (position, start)
        self.positions_at = 0.0                  # wall clock of the decision they come from
        self.ids: list[int] = []                 # table row -> store job id
        self.row_of: dict[int, int] = {}
        self.subs: dict[int, JobSubmission] = {}  # row -> submission
        self.held: set[int] = set()
        self.cancelling: set[int] = set()        # cancelled, processes still checkpointing
        self.failures: dict[int, int] = {}
        self.procs: dict[int, Proc] = {}        # rows with live processes
        self.reported: dict[int, float] = {}     # row -> the last step the job itself reported
        self.backoff: dict[int, float] = {}      # row -> time before which a failed job waits
        self.warned: set[int] = set()            # rows whose bad progress.json was logged
        self.store_id = store.store_id()
        self.to_launch: dict[int, Transition] = {}
        self.reasons: dict[int, str] = {}
        self.events: set[str] = set()
        self.next_tick: float | None = None
        self.stats = RuntimeStats()
        self.lock = threading.RLock()
        self._poke = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str = ""
        self.state_lock = None                   # the service's lock on its state folder

    def use_queues(self, tree) -> None:
        """Run the policy under the queues of `tree` (quanta.queues.QueueLayer), before start():
        submissions are checked against the queues, jobs ordered and admitted by them."""
        from quanta.queues.layer import QueueLayer
        self.tree = tree
        self.policy = QueueLayer(self.policy, tree)
        self.recorded = _Recorded(self.policy)
        self.loop = DecisionLoop(self.recorded, self.table, self.occ)  # type: ignore[arg-type]

    # -- clock and lifecycle -----------------------------------------------------------------------
    def now(self) -> float:
        return self.clock() - self.epoch

    def start(self) -> None:
        self.recover()
        self._thread = threading.Thread(target=self._run, name="quanta-runtime", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        self._poke.set()

    def close(self) -> None:
        """Stop the loop; running jobs keep running (a restarted service adopts them)."""
        self._stop.set()
        self._poke.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.backend.shutdown()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self.step()
                    self.error = ""        # (/v1/health: the last step raised nothing)
                except Exception as err:   # noqa: BLE001 - keep serving; the error is reported
                    said = f"{type(err).__name__}: {err}"
                    if said != self.error:     # once while it repeats, not at every poll
                        if isinstance(err, QuantaError):   # a plugin's error, the user's: a line
                            print(f"error: {err}", file=sys.stderr, flush=True)
                        else:
                            traceback.print_exc()
                    self.error = said
                self._poke.wait(self.poll_s)
                self._poke.clear()
        except BaseException as err:       # the loop itself: no job is scheduled any more
            self.error = f"the runtime's loop stopped ({type(err).__name__}: {err})"
            traceback.print_exc()          # (in the service's log; /v1/health says 503)

    def loop_alive(self) -> bool:
        """Whether the loop runs (or was never started, or was stopped by close)."""
        return self._thread is None or self._thread.is_alive() or self._stop.is_set()

    # -- rows ------------------------------------------------------------------------------------
    def _add(self, recs: list[JobRecord]) -> list[int]:
        """Give jobs table rows (one JobTable.extend for all: restarts load every job at once)."""
        if not recs:
            return []
        subs, broken = [], []
        for rec in recs:
            try:
                subs.append(JobSubmission.model_validate(rec.spec))
            except Exception as err:   # noqa: BLE001 - validated when stored, by an older release
                try:                   # (whose rules were looser): taken as it was then
                    sub = JobSubmission.model_construct(**rec.spec)
                    if not (isinstance(sub.command, list) and sub.command):
                        raise ValueError("no command") from err
                    subs.append(sub)
                except Exception as err2:   # noqa: BLE001 - that job fails; the service goes on
                    subs.append(JobSubmission(name="invalid", command=["false"], steps=1))
                    broken.append((rec, " ".join(str(err2).split())[:300]))
        # (the store keeps wall-clock times; the table's clock starts at the epoch, as `now`)
        rows = self.table.extend([sub.to_spec(str(rec.id), rec.submit - self.epoch, rec.user,
                                              self._priority(sub))
                                  for sub, rec in zip(subs, recs)]).tolist()
        t, now = self.table, self.now()
        if self.tree is not None:      # the queue a job belongs to (e.g. "default" -> its user's)
            names = [self.tree.names[q] if (q := self.tree.queue_of(t.specs[row])) >= 0 else
                     rec.queue for row, rec in zip(rows, recs)]
            self.store.update_many([(rec.id, {"queue": nm}) for rec, nm in zip(recs, names)
                                    if nm != rec.queue])
        for row, rec, sub in zip(rows, recs, subs):
            self.ids.append(rec.id)
            self.row_of[rec.id] = row
            self.subs[row] = sub
            self.failures[row] = rec.failures
            self.reported[row] = float(rec.steps_done)
            if rec.state not in ACTIVE:
                t.state[row] = DONE
                t.end[row] = (rec.end_time or rec.submit) - self.epoch
                continue
            t.state[row] = PENDING
            t.prog0[row] = rec.steps_done
            t.att0[row] = rec.attained
            t.t0[row] = t.ta[row] = now
            t.preemptions[row] = rec.preemptions
            if rec.start is not None:
                t.first_start[row] = rec.start - self.epoch
            if rec.held:
                self.held.add(row)
        for rec, err in broken:
            if rec.state in ACTIVE and rec.state != "running":
                row = self.row_of[rec.id]
                self._close(row, "failed", f"its stored spec is no longer valid: {err}", now)
        return rows

    def workdir(self, job_id: int) -> Path:
        return self.jobs_dir / str(job_id)

    def _internal_error(self, row: int, doing: str, err: Exception, now: float) -> None:
        """A bug met while handling one job: logged with its traceback, the job failed with one
        line (never left RUNNING on its devices), the service goes on."""
        traceback.print_exc()
        msg = f"internal error while {doing}: {type(err).__name__}: {err}"
        try:
            self.procs.pop(row, None)
            self._close(row, "failed", " ".join(msg.split())[:500], now)
        except Exception:   # noqa: BLE001 - already reported above
            traceback.print_exc()

    # -- one iteration -----------------------------------------------------------------------------
    def step(self) -> None:
        with self.lock:
            now = self.now()
            self._sync_requests(now)
            lost, back = self.backend.node_changes()
            for node in lost:
                self._node_lost(node, now)
            for node in back:
                self.occ.node_up_again(node)
                self.store.update(None, ("node-up", self.cluster.nodes[node].name))
                self.events.add("recovery")
            for ex in self.backend.poll():
                row = self.row_of.get(int(ex.job_id))
                if row is not None:
                    faults.point("exit-seen")
                    try:
                        self._handle_exit(row, ex, now)
                    except Exception as err:   # noqa: BLE001 - that job fails, not the service
                        self._internal_error(row, "handling the end of its processes", err, now)
                    faults.point("exit-recorded")
            self._read_progress(now)
            for row, until in list(self.backoff.items()):
                if now >= until or self.table.state[row] != PENDING:
                    del self.backoff[row]       # its wait after a failure is over
                    self.events.add("arrival")
            interval = self.policy.interval
            if interval and (self.next_tick is None or now >= self.next_tick):
                self.events.add("tick")
                self.next_tick = next_round(now, 0.0, interval)
            if self.loop.wake_at is not None and now >= self.loop.wake_at:
                self.events.add("wake")
                self.loop.wake_at = None
            decide = ("tick" in self.events) if interval else bool(self.events)
            active = self._active()
            if decide and len(active):
                start = time.perf_counter()
                trs = self.loop.step(now, active, tuple(sorted(self.events)))
                self._apply(trs, now)
                self.stats.latencies.append(time.perf_counter() - start)
                del self.stats.latencies[:-MAX_LATENCIES]
                self.stats.decisions += 1
                self._update_reasons(active)
                if self.loop.state:
                    self._save_policy_state()
            if decide or not len(active):
                self.events.clear()
            self._launch_ready(now)

    def _active(self) -> np.ndarray:
        st = self.table.state
        act = np.flatnonzero((st == PENDING) | (st == RUNNING))
        if self.held or self.cancelling or self.backoff:
            act = act[~np.isin(act, list(self.held | self.cancelling | set(self.backoff)))]
        return act

    # -- requests from the API ---------------------------------------------------------------------
    def _sync_requests(self, now: float) -> None:
        dirty = self.store.dirty_jobs()
        new = [rec for rec in dirty if rec.id not in self.row_of]
        waits = []
        for rec in new:                        # every job gets a row, in id order (see recover)
            if rec.state in ACTIVE:
                self.events.add("arrival")
                if rec.held:
                    waits.append((rec.id, {"reason": "JobHeldUser"}))
                elif self.policy.interval:     # nothing is decided before the next round
                    waits.append((rec.id, {"reason": "NextRound"}))
        self.store.update_many(waits)
        self._add(new)
        for rec in dirty:
            row = self.row_of[rec.id]
            if self.table.state[row] == DONE:
                continue
            if rec.cancel:
                self.cancelling.add(row)
                self._end_or_stop(row, "cancel", now)
            elif rec.held and row not in self.held:
                self.held.add(row)
                self._end_or_stop(row, "hold", now)
            elif not rec.held and row in self.held:
                self.held.discard(row)
                self.reasons.pop(row, None)
                self.store.update(rec.id, reason="NextRound" if self.policy.interval else "")
                self.events.add("arrival")

    def _end_or_stop(self, row: int, why: str, now: float) -> None:
        """Cancel or hold: a waiting job changes at once, a running one after it checkpointed."""
        job_id = self.ids[row]
        if row in self.procs or self.table.state[row] == RUNNING:
            self._stop_running(row, why)
            self.events.add("completion")
            return
        self.to_launch.pop(row, None)
        self.reasons.pop(row, None)
        if why == "cancel":
            self._close(row, "cancelled", "cancelled by its user", now)
        else:
            self.store.update(job_id, state="pending", reason="JobHeldUser")

    def _stop_running(self, row: int, why: str) -> None:
        """Take the job off its GPUs now (in the scheduler's books) and ask its processes to stop."""
        now = self.now()
        self._release(row, now, count=False)       # a hold or a cancel, not a preemption
        proc = self.procs.get(row)
        if proc is not None:
            if proc.stopping == "preempt":   # the policy's preemption, overtaken while the job
                self.table.preemptions[row] -= 1     # checkpointed: it stops held or cancelled
            self._ask_stop(row, why)
        elif why == "cancel":
            self._close(row, "cancelled", "cancelled by its user", now)

    # -- processes ---------------------------------------------------------------------------------
    def _attained(self, row: int, now: float) -> dict:
        """The job's attained service (GPU-seconds held in the scheduler's books) as store
        columns, with the time it is exact at: a restart counts a job still running on from
        there (recovery), and the API shows it growing."""
        return {"attained": float(self.table.attained(np.array([row]), now)[0]),
                "attained_at": self.epoch + now}

    def _ask_stop(self, row: int, why: str) -> None:
        """Ask a job's processes to checkpoint and exit (logged: preempt-to-resume starts here).
        The request is recorded first: a service killed before the job's end is recorded settles
        the job after a restart as what it was becoming (see recover)."""
        self.procs[row].stopping = why
        self.store.update(self.ids[row], ("stopping", why), stopping=why,
                          **self._attained(row, self.now()))
        faults.point("stop-recorded")
        self.backend.stop(str(self.ids[row]))
        faults.point("stop-signalled")

    def _handle_exit(self, row: int, ex: Exit, now: float) -> None:
        t = self.table
        job_id = self.ids[row]
        self.reasons.pop(row, None)           # the reason the store has now is set below
        proc = self.procs.pop(row, Proc(np.empty(0, np.int64)))
        accounting.ended(self.store, job_id, self.epoch + now)
        self._read_one(row, now)
        sub = self.subs[row]
        prog = self._progress(row)
        if "step" in prog:
            self.reported[row] = prog["step"]
        if "checkpoint_step" in prog:
            self.store.update(job_id, checkpoint_step=int(prog["checkpoint_step"]))
        steps = float(self.reported.get(row, 0.0))     # what the job reported, never an estimate
        why = proc.stopping
        # exit 0 is success (as in Slurm and Kubernetes), unless the scheduler asked the job to
        # stop (a job of the SDK checkpoints and exits 0 then) and it had steps left; a job told
        # to stop after it reported its last step is done, however the stop ended its processes
        done_all = sub.steps is not None and steps >= sub.steps
        if done_all if why else ex.returncode == 0:
            if why == "preempt":           # it finished before it stopped: no preemption
                t.preemptions[row] -= 1
            self._close(row, "finished", "", now, steps_done=steps)
            self.events.add("completion")
            return
        if why == "cancel":
            self._close(row, "cancelled", "cancelled by its user", now, steps_done=steps)
            return
        bad = read_json(self.workdir(job_id) / CHECKPOINT_ERROR)
        if bad is not None:        # the job SDK found no usable checkpoint: retrying cannot help
            msg = bad.get("message", "") if isinstance(bad, dict) else ""
            self._close(row, "failed", " ".join(f"no usable checkpoint: {msg}".split())[:500]
                        + " (see quanta logs)", now)
            self.events.add("completion")
            return
        at = self.epoch + now     # (a job that ended while no scheduler ran: its exit time)
        if why in ("preempt", "hold", "move", "node"):
            if why == "node":
                self.store.update(job_id, ("requeued", f"its node was lost at step {int(steps)}"),
                                  at=at, state="pending", reason="NodeFail", steps_done=steps,
                                  **self._attained(row, now), **ENDED)
            elif why == "hold":
                self.store.update(job_id, ("stopped", f"held at step {int(steps)}"), at=at,
                                  state="pending", reason="JobHeldUser", steps_done=steps,
                                  **self._attained(row, now), **ENDED)
            elif why == "preempt" or row not in self.to_launch:
                self.store.update(job_id, ("preempted", f"at step {int(steps)}"), at=at,
                                  state="pending", reason="Preempted", steps_done=steps,
                                  preemptions=int(t.preemptions[row]),
                                  **self._attained(row, now), **ENDED)
            else:
                self.store.update(job_id, steps_done=steps, **self._attained(row, now), **ENDED)
            # no decision for it: the job left the scheduler's books when it was told to stop
            # (its GPUs went to the decision that stopped it, a job moved there launches now).
            # One here, as las takes at every event, preempted the job just launched (it had
            # attained something, those waiting nothing), whose stop made the next decision:
            # with a dozen jobs queued none ever trained a step
            return
        # the job's processes ended on their own without finishing: a failure
        self.failures[row] += 1
        detail = ex.message or f"exit code {ex.returncode}"
        if ex.permanent:           # it could not start, and would not on a retry
            self._close(row, "failed", detail, now, failures=self.failures[row])
        elif self.failures[row] > sub.max_failures:
            self._close(row, "failed", f"{detail}; gave up after {self.failures[row]} failures",
                        now, failures=self.failures[row])
        else:
            self._release(row, now, count=False)     # a failure, not a preemption
            wait = min(BACKOFF_CAP_S, BACKOFF_S * 2 ** (self.failures[row] - 1))
            self.backoff[row] = now + wait
            self.store.update(job_id, ("failure", f"{detail}; requeued from its last checkpoint, "
                                       f"retried in {wait:g} s"), at=at,
                              state="pending", reason="Requeued", failures=self.failures[row],
                              steps_done=steps, **self._attained(row, now), **ENDED)
        self.events.add("failure")

    def _release(self, row: int, now: float, preempted: bool = True, count: bool = True) -> None:
        """Take a job off its GPUs in the scheduler's books (and off its pending launch); back to
        waiting unless it is ending (preempted=False), counted as a preemption only when the
        policy preempted it (count=False for failures, holds, cancels, lost nodes)."""
        self.reasons.pop(row, None)
        if self.table.state[row] == RUNNING:
            self.occ.release(row)
            if preempted:
                self.table.hold(row, now, Kind.PREEMPT.value, -1, np.empty(0, np.int64), 0.0, 0.0)
                if not count:
                    self.table.preemptions[row] -= 1
        self.to_launch.pop(row, None)

    def _close(self, row: int, state: str, message: str, now: float, **cols) -> None:
        t = self.table
        if t.state[row] != DONE:      # off its GPUs and out of the policy's view
            self._release(row, now, preempted=False)
            t.finish(row, now)
        t.end[row] = now
        self.held.discard(row)
        self.cancelling.discard(row)
        self.backoff.pop(row, None)
        self.store.update(self.ids[row], (state, message), at=self.epoch + now, state=state,
                          reason=message, end_time=self.epoch + now, held=False, gpus=0,
                          devices=[], preemptions=int(t.preemptions[row]),
                          **self._attained(row, now), **ENDED, **cols)

    def _node_lost(self, node: int, now: float) -> None:
        """A node is gone: its jobs lose their GPUs now; their processes' ends follow."""
        name = self.cluster.nodes[node].name
        self.store.update(None, ("node-lost", name))
        for row in self.occ.node_down(node):
            self._release(row, now, count=False)
            if row in self.procs:
                self._ask_stop(row, "node")    # ranks on other nodes checkpoint and end
            else:
                self.store.update(self.ids[row], ("requeued", f"its node {name} was lost"),
                                  state="pending", reason="NodeFail", **ENDED)
        self.events.add("failure")

    # -- transitions -------------------------------------------------------------------------------
    def _rate(self, row: int, tr: Transition) -> float:
        specs = self.table.specs
        spans = self.occ.spans
        if spans and tr.partner >= 0 and (row in spans or tr.partner in spans):
            return tenancy_rate(self.perf, specs, self.cluster.types, self.occ, row, tr.gpu_type,
                                len(tr.gpus), tr.nodes, tr.consolidated, tr.mode, tr.plan)
        return allocation_rate(self.perf, specs[row], self.cluster.types[tr.gpu_type], len(tr.gpus),
                               tr.nodes, tr.consolidated, specs[tr.partner] if tr.partner >= 0
                               else None, tr.mode, tr.plan, tr.cpus, tr.mem_gb,
                               parts=tr.parts, fork=tr.fork, net_gbps=tr.net_gbps)

    def _apply(self, trs: list[Transition], now: float) -> None:
        if not trs:
            return
        t = self.table
        rows = np.array([tr.row for tr in trs], dtype=np.int64)
        kind = np.array([KIND_CODES[tr.kind.value] for tr in trs], dtype=np.int64)
        rate = np.array([self._rate(tr.row, tr) if len(tr.gpus) else 0.0 for tr in trs])
        t.apply_transitions(now, rows, kind, np.array([tr.gpu_type for tr in trs], dtype=np.int64),
                            [tr.gpus for tr in trs], rate, np.zeros(len(trs)),
                            np.array([tr.partner for tr in trs], dtype=np.int64),
                            np.array([SHARE_MODES[tr.mode] for tr in trs], dtype=np.int8),
                            np.array([tr.guest for tr in trs], dtype=bool),
                            np.array([tr.consolidated for tr in trs], dtype=bool),
                            plan=[tr.plan for tr in trs],
                            cpus=np.array([tr.cpus for tr in trs], dtype=float),
                            mem_gb=np.array([tr.mem_gb for tr in trs], dtype=float),
                            net_gbps=np.array([tr.net_gbps for tr in trs], dtype=float),
                            fork=np.array([tr.fork[0] if tr.fork else 0.0 for tr in trs]),
                            copies=[tr.copies for tr in trs])
        for tr in trs:
            row = tr.row
            if tr.kind == Kind.RESHARE:
                continue
            if tr.kind == Kind.PREEMPT:
                self.to_launch.pop(row, None)
                self.reasons.pop(row, None)
                if row in self.procs:
                    self._ask_stop(row, "preempt")
                else:                      # placed, not launched yet: counted, so logged too
                    self.store.update(self.ids[row], ("preempted", "before its launch"),
                                      state="pending", reason="Preempted", gpus=0, devices=[],
                                      preemptions=int(t.preemptions[row]))
                continue
            self.to_launch[row] = tr
            # migrate / resize: checkpoint, then relaunch; a job still stopping (preempted, then
            # placed again before its processes ended) keeps the stop it was asked for: a "move"
            # over it lost the preemption's record when the job then finished on its own
            if row in self.procs and not self.procs[row].stopping:
                self._ask_stop(row, "move")

    def _update_reasons(self, active: np.ndarray) -> None:
        """Why each waiting job waits: the policy's own reason (Decision.reasons: a queue layer's
        QuotaExceeded(queue, type), WaitingForReclaim, FairShare, Priority, Resources), else
        Resources (not enough free devices of an allowed type) or Priority (the policy preferred
        others); and where it is in its queue with its estimated start (Decision.positions)."""
        t = self.table
        pending = active[t.state[active] == PENDING]
        rec = self.recorded
        said = {int(rec.rows[i]): r for i, r in rec.reasons.items() if i < len(rec.rows)}
        self._set_positions(rec.rows, rec.positions)
        if not len(pending):
            return
        free = self.occ.up_capacity() - self.occ.busy
        fits = (t.allowed[pending] & (free[None, :] >= t.req[pending, None])).any(axis=1)
        # a job the whole cluster could never hold (admitted by a larger one, before a restart
        # with --cluster changed): Slurm's BadConstraints, not Resources, which free up
        never = never_fits(t, self.policy, pending)
        updates = []
        for row, ok, bad in zip(pending.tolist(), fits.tolist(), never.tolist()):
            reason = "BadConstraints" if bad else said.get(row) or ("Priority" if ok else "Resources")
            if self.reasons.get(row) != reason and row not in self.procs:
                self.reasons[row] = reason
                updates.append((self.ids[row], {"reason": reason}))
        self.store.update_many(updates)
