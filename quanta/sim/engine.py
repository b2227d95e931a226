"""Discrete-event simulator. Events on a heap; completions computed exactly from current rates.

Per batch of simultaneous events the engine updates job states, then (for event-driven policies on
any event, for round-based ones on round ticks) runs the shared DecisionLoop and applies its
transitions: a restarted or moved job pays its restart delay before it progresses again.
"""

from __future__ import annotations

import bisect
import heapq
import time
from typing import Callable, Sequence

import numpy as np

from quanta.core.jobtable import (KIND_CODES, PENDING, PREEMPT_CODE, RUNNING, SHARE_MODES,
                                  START_CODE, UNSCHEDULABLE, JobTable, never_fits)
from quanta.core.loop import DecisionLoop, next_round, on_round
from quanta.core.mechanism import Kind
from quanta.model.cluster import Cluster
from quanta.model.job import JobSpec
from quanta.perf.base import PerfModel, allocation_rate
from quanta.perf.base import is_adaptive
from quanta.placement.occupancy import Occupancy
from quanta.policies.base import Policy, PolicyError
from quanta.sim.faults import FailureModel, NodeOutage
from quanta.sim.partners import PartnersLeft
from quanta.sim.result import RestartCost, SimResult
from quanta.sim.rounds import FailedRounds, ReferenceRounds, RoundClock
from quanta.sim.shapes import odd_shapes, same_shape_moves

COMPLETE, FAIL, RECOVER, TICK, WAKE, PHASE = 0, 1, 2, 4, 5, 6
INF = float("inf")
KIND_OF = {k: KIND_CODES[k.value] for k in Kind}
KIND_NAME = {code: name for name, code in KIND_CODES.items()}
# a round-based policy that starts nothing, round after round, while nothing runs and every job
# has arrived: stalled after this many rounds (a policy that waits for jobs to age waits a round)
STALL_ROUNDS = 10
FEW = 24      # a decision of at most this many GPUs-only transitions: _apply_few (about where
#               the two cost the same: ~20 + 11 us a transition against ~210 + 3 us, Philly)


def _live(event: tuple, version: np.ndarray, state: np.ndarray, wake_ver: int) -> bool:
    """False for an event that lost its meaning (a completion superseded by a rate change)."""
    _, kind, _, obj, ver = event
    if kind == COMPLETE or kind == PHASE:
        return ver == version[obj] and state[obj] == RUNNING
    if kind == WAKE:
        return ver == wake_ver
    return True


class Simulator(ReferenceRounds, PartnersLeft):
    def __init__(self, specs: Sequence[JobSpec], cluster: Cluster, policy: Policy, perf: PerfModel,
                 *, restart: RestartCost | None = None, failures: FailureModel | None = None,
                 outages: Sequence[NodeOutage] = (), until: float | None = None,
                 progress: Callable[[float], None] | None = None, record_events: bool = False,
                 rounds_from_first_arrival: bool = False, impossible_arrivals_decide: bool = False,
                 round_at_zero: bool = True,
                 failed_rounds: FailedRounds | None = None, round_leases: bool = False,
                 round_clock: RoundClock | None = None):
        self.cluster = cluster
        self.policy = policy
        self.perf = perf
        self.table = JobTable(specs, cluster, perf)
        self.occ = Occupancy(cluster)
        self.loop = DecisionLoop(policy, self.table, self.occ)
        self.restart = restart or RestartCost()
        self.failures = failures
        self.outages = tuple(outages)
        self.until = until
        self.progress_cb = progress
        # (time, job row, what, GPU type index (a tuple of them for an allocation over several
        # types), GPUs, nodes, sharing mode) per job event, if asked
        self.event_log: list[tuple[float, int, str, int | tuple[int, ...], int, int, str]] | None = \
            [] if record_events else None
        self.impossible = never_fits(self.table, policy)
        self.restart_s = np.array([self.restart(s) for s in self.table.specs], dtype=float)
        # a world whose jobs tune their own batch as they learn (sia-sim's job agents,
        # worlds/sia_agents.py): asked for a running adaptive job's rate, told when each of its
        # segments of training ends; its jobs are re-rated after every round's training too
        self.agent_rate = getattr(perf, "running_rate", None)
        self.seg_from = np.zeros(len(self.table))   # row -> when its current segment began
        # jobs whose rate changes as they train (goodput jobs' epochs): re-rated at each phase end
        self.phased = bool(self.table.phase_ends) or self.agent_rate is not None
        self.alloc_args: dict[int, tuple] = {}   # row -> its allocation's _rate arguments
        # a performance model that rates the real GPUs per node (sia-sim's measured profiles):
        # asked for a job whose GPUs are not spread whole nodes first (sim/shapes.py)
        self.shape_rate = getattr(perf, "rate_at_shape", None)
        # transitions that `_apply_few` may apply (with the job table's `few_ok`)
        self.few_ok = self.shape_rate is None and not self.phased and \
            not self.restart.same_shape_free
        # round-based policies: rounds at the multiples of the interval (False), or from the first
        # arrival on, the first round at that arrival (Gavel's simulator)
        self.rounds_from_first_arrival = rounds_from_first_arrival
        # a round at time 0 where the first jobs arrive (else the first is one interval in, as
        # in Sia's simulator; World.round_at_zero)
        self.round_at_zero = round_at_zero
        # the arrival of a job that can never run is an event too (Tiresias' simulator runs a
        # scheduling pass at every arrival); by default only arrivals that can run are
        self.impossible_arrivals_decide = impossible_arrivals_decide
        # a reference simulator's round semantics (sim/rounds.py; a replay world's, else off)
        self._init_rounds(failed_rounds, round_leases, round_clock)

    # -------------------------------------------------------------------------------------------
    def _apply(self, now: float, trs: list, version: np.ndarray, push) -> int:
        """Apply one decision's transitions; push their completions; return the change in running."""
        t = self.table
        plain = getattr(trs, "plain", None)
        if plain is not None and len(trs) <= FEW and self.few_ok and t.few_ok():
            return self._apply_few(now, plain, version, push)
        if plain is None:
            (rows_l, kinds_l, types_l, gpus_l, nodes_l, cons_l, plans_l, partner_l, mode_l,
             guest_l, cpus_l, mem_l, parts_l, fork_l, net_l, copies_l) = zip(*trs)
            kind_l = [KIND_OF[k] for k in kinds_l]
            count = np.fromiter(map(len, gpus_l), dtype=np.int64, count=len(trs))
            shared = max(partner_l) >= 0
            extras = t.extras_seen or max(cpus_l) > 0 or max(mem_l) > 0 or max(net_l) > 0 or \
                plans_l.count(None) < len(trs)
            mixed = parts_l.count(None) < len(trs)
        else:           # GPUs only (mechanism.Plain): the columns as built, the rest defaults
            rows_l, kind_l, types_l, gpus_l, count, nodes_l, cons_l = plain
            count = np.array(count, dtype=np.int64)
            n = len(trs)
            plans_l = parts_l = fork_l = copies_l = (None,) * n
            partner_l, mode_l = (-1,) * n, ("",) * n
            cpus_l = mem_l = net_l = (0.0,) * n
            shared, extras, mixed = False, t.extras_seen, False
        rows = np.array(rows_l, dtype=np.int64)
        kind = np.array(kind_l, dtype=np.int64)
        gtype = np.array(types_l, dtype=np.int64)
        cons = np.array(cons_l, dtype=bool)
        on = count > 0
        req_ok = (count == t.req[rows]) & cons & on
        if shared:
            partner = np.array(partner_l, dtype=np.int64)
            req_ok &= partner < 0
        if extras:                         # a plan or resources of its own: ask the model
            req_ok &= np.array([p is None for p in plans_l]) & (np.array(cpus_l) == 0) & \
                (np.array(mem_l) == 0) & (np.array(net_l) == 0)
        if mixed:                          # GPUs of several types: ask the model
            req_ok &= np.array([p is None for p in parts_l])
        shapes = None
        if self.shape_rate is not None:    # GPUs per node where not whole nodes first
            shapes = odd_shapes(self.cluster, gtype, gpus_l)
            if shapes:
                req_ok &= np.array([i not in shapes for i in range(len(trs))])
        rate = np.where(req_ok, t.rates[rows, np.maximum(gtype, 0)], 0.0)
        if self.agent_rate is not None:    # the segments of the jobs that move or stop end now
            for r in rows_l:
                if t.state.item(r) == RUNNING:
                    self._segment_end(r, now)
        plan_now = dict(zip(rows_l, plans_l)) if (shared and extras) or self.phased else None
        spans = self.occ.spans
        for i in (on & ~req_ok).nonzero()[0].tolist():   # other sizes, spread or shared: ask
            p = partner_l[i]
            if spans and p >= 0 and (rows_l[i] in spans or p in spans):
                rate[i] = self._tenancy_rate(rows_l[i], types_l[i], count.item(i), nodes_l[i],
                                             cons_l[i], mode_l[i], plans_l[i], plan_now)
                continue
            pplan = plan_now.get(p, t.plan[p]) if plan_now is not None and p >= 0 else None
            rate[i] = self._rate(rows_l[i], types_l[i], count.item(i), nodes_l[i], cons_l[i],
                                 p, mode_l[i], plans_l[i], cpus_l[i], mem_l[i], pplan,
                                 parts_l[i], fork_l[i], net_l[i],
                                 shapes.get(i) if shapes else None)
        if self.phased:                    # how to re-rate each job when its phase ends
            for i in np.flatnonzero(on).tolist():
                p = partner_l[i]
                self.alloc_args[rows_l[i]] = (
                    types_l[i], count.item(i), nodes_l[i], cons_l[i], p, mode_l[i], plans_l[i],
                    cpus_l[i], mem_l[i], plan_now.get(p, t.plan[p]) if p >= 0 else None,
                    parts_l[i], fork_l[i], net_l[i], shapes.get(i) if shapes else None)
        bad = on & (rate <= 0)
        if np.count_nonzero(bad):
            i = int(np.flatnonzero(bad)[0])
            raise self._cannot_run(rows_l[i], count.item(i), types_l[i])
        resumed = (kind != KIND_CODES["start"]) | ~np.isnan(t.first_start[rows])
        goes_on = None          # transitions that keep what is left of a restore under way
        first = self.restart_s[rows] if self.restart.first_start_as_restart else self.restart.first_start_s
        delay = np.where(on, np.where(resumed, self.restart_s[rows], first), 0.0)
        if self.restart.same_shape_free:
            held = [t.placement.get(r, ()) for r in rows_l]
            free = same_shape_moves(self.cluster, kind, gtype, t.gtype[rows], held, gpus_l)
            # free, but a restore under way goes on (job.py:524-542 leaves rescale_time alone)
            goes_on = free
        if KIND_CODES["reshare"] in kind_l:   # a job restoring keeps its remaining restore time;
            reshare = kind == KIND_CODES["reshare"]     # others: none
            goes_on = reshare if goes_on is None else goes_on | reshare
        if goes_on is not None:
            delay = np.where(goes_on, np.maximum(t.t0[rows] - now, 0.0), delay)
        more = {"plan": list(plans_l), "cpus": np.array(cpus_l, dtype=float),
                "mem_gb": np.array(mem_l, dtype=float),
                "net_gbps": np.array(net_l, dtype=float)} if extras else {}
        if mixed:
            more["fork"] = np.array([f[0] if f else 0.0 for f in fork_l])
            if any(c is not None for c in copies_l):
                more["copies"] = list(copies_l)
        more["mixed"] = mixed
        if shared:
            mode = np.array([SHARE_MODES[m] for m in mode_l], dtype=np.int8)
            t.apply_transitions(now, rows, kind, gtype, list(gpus_l), rate, delay, partner, mode,
                                np.array(guest_l, dtype=bool), cons, count, goes_on=goes_on, **more)
        else:                              # nobody shares: the defaults say so
            t.apply_transitions(now, rows, kind, gtype, list(gpus_l), rate, delay, consolidated=cons,
                                count=count, goes_on=goes_on, **more)
        if self.event_log is not None:
            if t.mix:                      # an allocation over several types: each of them
                mix = t.mix
                types_l = [tuple(np.flatnonzero(mix[r]).tolist()) if r in mix else ty
                           for r, ty in zip(rows_l, types_l)]
            self.event_log.extend((now, r, KIND_NAME[k], ty, c, nd, m) for r, k, ty, c, nd, m in
                                  zip(rows_l, kind_l, types_l, count.tolist(), nodes_l, mode_l))
        version[rows] += 1
        self._push_next(rows, version, push)
        return kind_l.count(KIND_CODES["start"]) - kind_l.count(KIND_CODES["preempt"])

    def _apply_few(self, now: float, plain, version: np.ndarray, push) -> int:
        """`_apply` for a few GPUs-only transitions (mechanism.Plain) where no job is re-rated by
        its shape, phase or agent and every move pays its restart: row by row with Python
        scalars, the same arithmetic (numpy's per-call cost would dominate; the Philly replay's
        decisions move 17 jobs on average, most far fewer)."""
        t = self.table
        rows_l, kind_l, types_l, gpus_l, count_l, nodes_l, cons_l = plain
        req, rates, first_start, restart_s = t.req, t.rates, t.first_start, self.restart_s
        as_restart, first_s = self.restart.first_start_as_restart, float(self.restart.first_start_s)
        rate_l: list[float] = []
        delay_l: list[float] = []
        for r, k, ty, c, nd, cons in zip(rows_l, kind_l, types_l, count_l, nodes_l, cons_l):
            if c <= 0:
                rate_l.append(0.0)
                delay_l.append(0.0)
                continue
            if cons and c == req.item(r):
                rate = rates.item(r, ty)
            else:                          # other sizes or spread: ask
                rate = float(self._rate(r, ty, c, nd, cons, -1, ""))
            rate_l.append(rate)
            resumed = k != START_CODE or first_start.item(r) == first_start.item(r)   # (not NaN)
            delay_l.append(restart_s.item(r) if resumed or as_restart else first_s)
        for r, ty, c, rate in zip(rows_l, types_l, count_l, rate_l):
            if c > 0 and rate <= 0:
                raise self._cannot_run(r, c, ty)
        t.apply_few(now, rows_l, kind_l, types_l, gpus_l, count_l, rate_l, delay_l, cons_l)
        if self.event_log is not None:
            self.event_log.extend((now, r, KIND_NAME[k], ty, c, nd, "") for r, k, ty, c, nd in
                                  zip(rows_l, kind_l, types_l, count_l, nodes_l))
        t0, total, prog0 = t.t0, t.total, t.prog0
        fin, vers = [], []
        for r, rate in zip(rows_l, rate_l):
            v = version.item(r) + 1
            version[r] = v
            vers.append(v)
            fin.append(t0.item(r) + (total.item(r) - prog0.item(r)) / rate if rate > 0 else INF)
        push.completions(rows_l, fin, vers)
        return kind_l.count(START_CODE) - kind_l.count(PREEMPT_CODE)

    def _cannot_run(self, row: int, count: int, gtype: int) -> PolicyError:
        return PolicyError(f"{self.policy.label()} put job {self.table.specs[row].job_id} on "
                           f"{count} {self.cluster.types[gtype]} GPUs, where it cannot run")

    def _push_next(self, rows: np.ndarray, version: np.ndarray, push) -> None:
        """Push each job's next event at its current rate: its completion, or the end of its
        training phase if that comes first (then it is re-rated, see _next_phase)."""
        t = self.table
        fin = t.finish_times(rows)
        if not self.phased:
            # (push's work for each, in one call: run's push_completions)
            push.completions(rows.tolist(), fin.tolist(), version[rows].tolist())
            return
        ph = t.phase_times(rows)
        for r, f, p, v in zip(rows.tolist(), fin.tolist(), ph.tolist(), version[rows].tolist()):
            if p < f:
                push(p, PHASE, r, v)
            elif f < np.inf:
                push(f, COMPLETE, r, v)

    def _set_rate(self, row: int, rate: float, now: float, version: np.ndarray, push) -> None:
        """`row` runs at `rate` from now on, on what it holds; its next event is pushed (unless
        `push` is None: at rate 0 there is none)."""
        self.table.mark(row, now)
        self.table.rate[row] = rate
        version[row] += 1
        if push is not None:
            self._push_next(np.array([row]), version, push)

    def _next_phase(self, row: int, now: float, version: np.ndarray, push) -> None:
        """`row` reached the end of a training phase: the same allocation at the next phase's rate."""
        t = self.table
        if self.agent_rate is not None:
            self._segment_end(row, now)
        t.mark(row, now)
        if t.set_phase(row) or self.agent_rate is not None:
            rate = self._rate(row, *self.alloc_args[row])
            t.rate[row] = rate
            t.min_rate[row] = min(t.min_rate.item(row), rate)
        version[row] += 1
        self._push_next(np.array([row]), version, push)

    def _segment_end(self, row: int, now: float) -> None:
        """A running job's segment of training on one batch ends now (it moves, stops, reaches
        an epoch's end or a round's): its agent learns what it measured, if it trained in it
        (past its restore)."""
        t = self.table
        if self.seg_from.item(row) < now:
            self.perf.segment_end(t.specs[row],
                                  max(self.seg_from.item(row), t.resume_at.item(row)) < now)
            self.seg_from[row] = now

    def _retune(self, now: float, version: np.ndarray, push) -> None:
        """After a round's training each running job's agent picks its batch again from what it
        has learned (sia-simulator job.py:521): a job whose rate changes is re-rated."""
        t = self.table
        for row, args in self.alloc_args.items():
            if t.state.item(row) != RUNNING or t.gpus.item(row) == 0 or not is_adaptive(args[6]):
                continue
            self._segment_end(row, now)
            rate = self._rate(row, *args)
            if rate != t.rate.item(row):
                self._set_rate(row, rate, now, version, push)
                t.min_rate[row] = min(t.min_rate.item(row), rate)

    def _rate(self, row: int, gtype: int, count: int, nodes: int, cons: bool, partner: int,
              mode: str, plan=None, cpus: float = 0.0, mem_gb: float = 0.0, partner_plan=None,
              parts=None, fork=None, net_gbps: float = 0.0, shape=None) -> float:
        specs = self.table.specs
        if self.agent_rate is not None and partner < 0 and parts is None and is_adaptive(plan):
            r = self.agent_rate(specs[row], self.cluster.types[gtype], count, nodes)
            if r is not None:
                return r
        if shape is not None and partner < 0 and parts is None:
            r = self.shape_rate(specs[row], self.cluster.types[gtype], shape, plan)
            if r is not None:
                return r
        return allocation_rate(self.perf, specs[row], self.cluster.types[gtype], count, nodes, cons,
                               specs[partner] if partner >= 0 else None, mode, plan, cpus, mem_gb,
                               partner_plan, parts, fork, net_gbps)

    def run(self) -> SimResult:
        wall0 = time.perf_counter()
        t, occ, loop = self.table, self.occ, self.loop
        n = len(t)
        heap: list[tuple[float, int, int, int, int]] = []
        seq = 0
        version = np.zeros(n, dtype=np.int64)
        fail_rng = self.failures.rng() if self.failures else None

        heappush, heappop = heapq.heappush, heapq.heappop

        def push(when: float, kind: int, obj: int, ver: int = 0) -> None:
            nonlocal seq
            seq += 1
            heappush(heap, (when, kind, seq, obj, ver))

        def push_completions(rows: list[int], when: list[float], vers: list[int]) -> None:
            """push(when, COMPLETE, row, ver) for each row that completes (when < inf)."""
            nonlocal seq
            for r, f, v in zip(rows, when, vers):
                if f < INF:
                    seq += 1
                    heappush(heap, (f, COMPLETE, seq, r, v))
        push.completions = push_completions

        if self.failures:
            for node in range(len(self.cluster.nodes)):
                push(self.failures.next_failure(fail_rng, 0.0), FAIL, node, -1)
        for i, o in enumerate(self.outages):
            push(o.at, FAIL, o.node, i)
        interval = self.policy.interval
        tick_pending = False
        origin = 0.0          # rounds at origin + k * interval
        tick_ver = 0          # a round clock restarted (rounds_from_first_arrival) voids its tick
        wake_ver = 0
        active = np.empty(0, dtype=np.int64)
        ptr = 0
        a_sub = np.zeros(n)
        a_end = np.full(n, np.nan)
        acc, last_t = 0.0, 0.0
        times: list[float] = []
        busy: list[np.ndarray] = []
        shared: list[int] = []
        pend: list[int] = []
        runn: list[int] = []
        n_running = 0
        down_nodes = 0
        events_total = 0
        transitions = 0
        stalled = False
        idle_rounds = 0       # rounds in a row that started nothing while nothing ran
        batches = 0
        submit = t.submit.tolist()     # (Python floats: read one at a time)
        until = np.inf if self.until is None else self.until
        while True:
            next_arr = submit[ptr] if ptr < n else np.inf
            state_of, version_of = t.state.item, version.item
            # completions voided by a later move of their job (_live's test, inlined), first in
            # the queue, before the next arrival: popped here, the active-jobs integral taken to
            # each as the batch below would (nothing else happens at a time holding only these)
            while heap:
                at, kind, _, obj, ver = heap[0]
                if kind != COMPLETE or at >= next_arr or at > until or \
                        (ver == version_of(obj) and state_of(obj) == RUNNING):
                    break
                heappop(heap)
                acc += len(active) * (at - last_t)
                last_t = at
            next_ev = heap[0][0] if heap else np.inf
            now = min(next_arr, next_ev)
            if now == np.inf or now > until:
                break
            acc += len(active) * (now - last_t)
            last_t = now
            kinds: set[str] = set()
            done: list[int] = []      # jobs completed in this batch (leave `active` together)
            while heap and heap[0][0] == now:
                _, kind, _, obj, ver = heappop(heap)
                # (_live and a voided round's tick, inlined: most events popped are completions
                # voided by a later move of their job)
                if kind == COMPLETE or kind == PHASE:
                    if ver != version_of(obj) or state_of(obj) != RUNNING:
                        continue
                elif kind == WAKE:
                    if ver != wake_ver:
                        continue
                elif kind == TICK and ver != tick_ver:
                    continue
                events_total += 1
                if kind == COMPLETE:
                    mate = int(t.partner[obj])
                    mates = (list(occ.tenants(obj)[0]) if occ.spans else [mate]) \
                        if mate >= 0 else ()
                    end = self._end_of(obj, mate, now)
                    occ.release(obj)
                    t.finish(obj, now)
                    t.end[obj] = end
                    if mates:
                        self._left(mates, now, version, push)
                    if self.event_log is not None:
                        self.event_log.append((now, obj, "finish", -1, 0, 0, ""))
                    n_running -= 1
                    a_end[obj] = acc
                    done.append(obj)
                    kinds.add("completion")
                elif kind == FAIL:
                    if not occ.node_up[obj]:
                        continue
                    for row in occ.node_down(obj):
                        if self.agent_rate is not None:
                            self._segment_end(row, now)
                        mate = int(t.partner[row])
                        mates = list(occ.tenants(row)[0]) if occ.spans and mate >= 0 else ()
                        occ.release(row)
                        t.hold(row, now, Kind.PREEMPT.value, -1, np.empty(0, np.int64), 0.0, 0.0)
                        if self.event_log is not None:
                            self.event_log.append((now, row, "node-failure", -1, 0, 0, ""))
                        version[row] += 1
                        n_running -= 1
                        if mates:
                            self._left(mates, now, version, push)
                        elif mate >= 0 and t.gpus[mate] > 0 and t.partner[mate] == row:
                            self._unpair(mate, now, version, push)
                    down_nodes += 1
                    repair = self.failures.repair_s if ver == -1 else self.outages[ver].duration
                    push(now + repair, RECOVER, obj, ver)
                    kinds.add("failure")
                elif kind == RECOVER:
                    occ.node_up_again(obj)
                    down_nodes -= 1
                    if ver == -1 and (ptr < n or len(active)):
                        push(self.failures.next_failure(fail_rng, now), FAIL, obj, -1)
                    kinds.add("recovery")
                elif kind == TICK:
                    tick_pending = False
                    kinds.add("tick")
                elif kind == WAKE:
                    kinds.add("wake")
                elif kind == PHASE:
                    self._next_phase(obj, now, version, push)
            if done:
                keep = np.ones(len(active), dtype=bool)
                keep[active.searchsorted(done)] = False
                active = active[keep]
            if ptr < n and submit[ptr] == now:
                end = bisect.bisect_right(submit, now, ptr)
                new = np.arange(ptr, end)
                ptr = end
                bad = new[self.impossible[new]]
                if bad.size:
                    t.state[bad] = UNSCHEDULABLE
                    new = new[~self.impossible[new]]
                t.state[new] = PENDING
                if self.event_log is not None:
                    self.event_log.extend((now, r, "submit", -1, 0, 0, "") for r in new.tolist())
                a_sub[new] = acc
                self._arrived(new, now, n_running)
                active = np.concatenate([active, new])
                events_total += len(new)
                if new.size or (bad.size and self.impossible_arrivals_decide):
                    kinds.add("arrival")
            if not kinds:
                continue
            if interval and self.rounds_from_first_arrival and \
                    self._round_restarts(now, kinds, n_running, len(active)):
                # nothing runs: the round clock jumps to this arrival (or completion), a round
                # starts now
                origin, tick_ver, tick_pending = now, tick_ver + 1, False
                kinds.add("tick")
            if interval and not tick_pending and "tick" not in kinds and \
                    on_round(now, origin, interval) and (now > 0.0 or self.round_at_zero):
                # a round starts now, and no tick stood for it (nothing was active): it is this
                # round's all the same (the first arrival of a trace at time 0 waited a round)
                kinds.add("tick")
            seen = active
            if "tick" in kinds:
                if self.alone_next_round or self.dropping:   # a reference's rounds
                    if self.dropping:
                        kinds.add("completion")
                    active, gone = self._round_start(now, active, version, push)
                    n_running -= gone
                seen = self._seen(active)
            decide = ("tick" in kinds) if interval else True
            if self.agent_rate is not None and "tick" in kinds:
                self._retune(now, version, push)
            if decide and len(seen):
                trs = loop.step(now, seen, tuple(sorted(kinds)))
                transitions += len(trs)
                if trs:
                    n_running += self._apply(now, trs, version, push)
                if "tick" in kinds and (self.failed_rounds is not None
                                        or self.round_clock is not None):
                    self._round_decided(now, active, version, push)
                if loop.wake_at is not None and loop.wake_at > now:
                    wake_ver += 1
                    push(loop.wake_at, WAKE, -1, wake_ver)
                if not trs and n_running == 0 and ptr == n and down_nodes == 0 and len(active) \
                        and len(seen) == len(active):    # (a late arrival is seen next round)
                    # nothing runs and nothing more will come: a stall, unless a round-based
                    # policy may still decide otherwise as time goes by (Pollux gives a job
                    # nothing in the round it arrives in: its re-allocation factor is 0 at age 0)
                    idle_rounds += 1
                    if not interval or idle_rounds >= STALL_ROUNDS:
                        stalled = True     # (this batch recorded below, then the run ends: a
                        # completion that left the stall was missing from the timeline)
                else:
                    idle_rounds = 0
            if interval and len(active) and not tick_pending:
                push(next_round(now, origin, interval), TICK, -1, tick_ver)
                tick_pending = True
            if len(heap) > 4 * (n_running + len(self.cluster.nodes)) + 1024:
                heap = [e for e in heap if _live(e, version, t.state, wake_ver)]
                heapq.heapify(heap)
            times.append(now)
            busy.append(occ.busy.copy())
            shared.append(int(occ.shared.sum()) if occ.guests else 0)
            pend.append(len(active) - n_running)
            runn.append(n_running)
            batches += 1
            if self.progress_cb and batches % 2000 == 0:
                self.progress_cb(ptr / max(n, 1))
            if stalled or (ptr == n and not len(active)):
                break
        if self.progress_cb:
            self.progress_cb(1.0)
        K = len(self.cluster.types)
        return SimResult(
            policy=self.policy.label(), cluster=self.cluster, table=t,
            times=np.asarray(times), busy=np.asarray(busy).reshape(-1, K),
            pending=np.asarray(pend, dtype=np.int64), running=np.asarray(runn, dtype=np.int64),
            shared=np.asarray(shared, dtype=np.int64),
            active_integral_submit=a_sub, active_integral_end=a_end, events=events_total,
            transitions=transitions,
            decisions=loop.decisions, wall_s=time.perf_counter() - wall0,
            decide_s=loop.decide_seconds, stalled=stalled, horizon=self.until,
            event_log=self.event_log, policy_state=loop.state)
