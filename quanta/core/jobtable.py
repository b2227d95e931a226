"""Columnar job state shared by both drivers.

Every job of a run has one row. Dynamic quantities are kept lazily as (value at a mark, rate since
the mark), so nothing is stepped: progress(now) = prog0 + rate * max(0, now - t0), where t0 may lie
in the future while a job restarts from a checkpoint.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from quanta.core.snapshot import JobsView
from quanta.model.cluster import Cluster
from quanta.model.job import JobSpec
from quanta.perf.base import PerfModel, consolidated_rates

FUTURE, PENDING, RUNNING, DONE, UNSCHEDULABLE, DROPPED = 0, 1, 2, 3, 4, 5
KIND_CODES = {"start": 0, "preempt": 1, "migrate": 2, "resize": 3, "reshare": 4, "reconfigure": 5}
# the lowest code of a kind that a migration or reconfiguration counter counts
_COUNTED_FROM = min(KIND_CODES[k] for k in ("migrate", "resize", "reconfigure"))
# each kind's code by name, for the hot paths' comparisons
START_CODE, PREEMPT_CODE, MIGRATE_CODE, RESIZE_CODE, RECONFIGURE_CODE = (
    KIND_CODES[k] for k in ("start", "preempt", "migrate", "resize", "reconfigure"))
SHARE_MODES = {"": 0, "pack": 1, "slice": 2}   # how a job shares its GPUs with its partner
STATE_NAMES = {FUTURE: "future", PENDING: "pending", RUNNING: "running", DONE: "finished",
               UNSCHEDULABLE: "unschedulable", DROPPED: "dropped"}


class JobTable:
    def __init__(self, specs: Sequence[JobSpec], cluster: Cluster, perf: PerfModel):
        n, k = len(specs), len(cluster.types)
        self.specs = list(specs)
        self.cluster = cluster
        self.perf = perf
        self.index = {s.job_id: i for i, s in enumerate(self.specs)}
        if len(self.index) != n:
            seen: set[str] = set()
            dup = next(s.job_id for s in self.specs if s.job_id in seen or seen.add(s.job_id))
            raise ValueError(f"duplicate job id '{dup}'")
        self.submit = np.array([s.submit_time for s in specs], dtype=float)
        self.req = np.array([s.num_gpus for s in specs], dtype=np.int64)
        self.total = np.array([s.total_steps for s in specs], dtype=float)
        self.weight = np.array([s.weight for s in specs], dtype=float)
        self.allowed = np.ones((n, k), dtype=bool)
        for i, s in enumerate(specs):
            if s.gpu_types:
                self.allowed[i] = [t in s.gpu_types for t in cluster.types]
        # steps/s at the requested count, consolidated, per GPU type (0 where not allowed);
        # a type where the job cannot run (measured 0: out of memory) is not allowed
        self.rates = consolidated_rates(perf, self.specs, cluster) * self.allowed
        self.allowed &= self.rates > 0
        self.state = np.zeros(n, dtype=np.int8)
        self.prog0 = np.zeros(n)
        self.t0 = np.zeros(n)
        # when the held allocation's progress (re)starts, the end of its restart delay: t0 when
        # the allocation began; t0 itself moves on whenever the accumulators are folded (`mark`)
        self.resume_at = np.zeros(n)
        self.rate = np.zeros(n)
        self.att0 = np.zeros(n)       # GPU-seconds held (attained service) at ta
        self.run0 = np.zeros(n)       # wall seconds held at ta
        self.ta = np.zeros(n)
        self.gpus = np.zeros(n, dtype=np.int64)       # GPUs held now
        self.gtype = np.full(n, -1, dtype=np.int64)   # type index held now
        self.types_used = np.zeros(n, dtype=np.int64)  # bitmask of type indexes ever held
        self.waiting_since = self.submit.copy()        # last time the job lost (or never had) GPUs
        self.first_start = np.full(n, np.nan)
        self.end = np.full(n, np.nan)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.migrations = np.zeros(n, dtype=np.int64)
        self.reconfigs = np.zeros(n, dtype=np.int64)
        self.restarts = np.zeros(n, dtype=np.int64)
        self.placement: dict[int, np.ndarray] = {}   # job row -> global GPU ids held
        self.partner = np.full(n, -1, dtype=np.int64)   # the job sharing its GPUs (-1 none)
        self.share_mode = np.zeros(n, dtype=np.int8)     # SHARE_MODES value
        self.is_guest = np.zeros(n, dtype=bool)          # runs on GPUs another job owns
        self.consolidated = np.ones(n, dtype=bool)       # its placement spans the fewest nodes
        self.sharing_seen = False                        # any job ever shared (skip resets if not)
        # execution plan and CPU threads / host memory held (policies that choose them, e.g.
        # Rubick, Synergy); None / 0 = the job's own plan, resources not modelled
        self.plan = np.full(n, None, dtype=object)
        self.cpus = np.zeros(n)
        self.mem_gb = np.zeros(n)
        self.net_gbps = np.zeros(n)                      # node network GB/s held
        # allocations over several GPU types (task-level heterogeneity, forked copies): GPUs per
        # type held, and seconds between the copies' model averagings (0: synchronous workers)
        self.mix: dict[int, np.ndarray] = {}
        # forked jobs' extra copies: GPUs per node (a job with copies is in `mix` too)
        self.copies: dict[int, np.ndarray] = {}
        self.fork_s = np.zeros(n)
        self.mixed_seen = False                          # any job ever held several types
        self.min_rate = np.full(n, np.inf)               # lowest rate it ever ran at (SLA checks)
        self.extras_seen = False                         # any plan or resources ever held
        # training phases (epochs) of jobs whose rates change as they train
        # (PerfModel.phase_fractions): ends of each phase in steps, and the progress at which the
        # current phase ends (inf: no phases, or the last one)
        self.phase_ends: dict[int, np.ndarray] = {}
        self.next_phase_at = np.full(n, np.inf)
        fn = getattr(perf, "phase_fractions", None)
        if fn is not None:
            for i, spec in enumerate(self.specs):
                f = fn(spec)
                if f is not None and len(f) > 1 and self.total[i] > 0:
                    ends = np.asarray(f, dtype=float) * self.total[i]
                    self.phase_ends[i] = ends
                    k = min(int(spec.phase), len(ends) - 1)
                    self.next_phase_at[i] = ends[k] if k < len(ends) - 1 else np.inf

    def __len__(self) -> int:
        return len(self.specs)

    def extend(self, specs: Sequence[JobSpec]) -> np.ndarray:
        """Add jobs (the runtime's submissions); returns their rows. Every per-job column grows with
        the defaults a fresh table gives, so columns added later need no code here."""
        n = len(self.specs)
        fresh = JobTable(specs, self.cluster, self.perf)
        dup = next((s.job_id for s in fresh.specs if s.job_id in self.index), None)
        if dup is not None:
            raise ValueError(f"duplicate job id '{dup}'")
        for name, col in list(vars(self).items()):
            if isinstance(col, np.ndarray) and col.shape[:1] == (n,):
                setattr(self, name, np.concatenate([col, getattr(fresh, name)]))
        self.specs.extend(fresh.specs)
        self.index.update({s.job_id: n + i for i, s in enumerate(fresh.specs)})
        self.phase_ends.update({n + i: e for i, e in fresh.phase_ends.items()})
        return np.arange(n, n + len(fresh.specs))

    def never_fits(self, across_types: bool = False, rows: np.ndarray | None = None
                   ) -> np.ndarray:
        """Jobs (of `rows`, default all) no allowed GPU type of the whole cluster could ever hold
        (across_types: for a policy that may mix types, jobs that all allowed types together
        could not hold)."""
        cap = self.cluster.capacity
        allowed, req = (self.allowed, self.req) if rows is None else \
            (self.allowed[rows], self.req[rows])
        if across_types:
            return ~((allowed @ cap >= req) & (req > 0))
        fits = allowed & (cap[None, :] >= req[:, None]) & (req[:, None] > 0)
        return ~fits.any(axis=1)

    # -- lazy quantities -------------------------------------------------------------------------
    def progress(self, rows: np.ndarray, now: float) -> np.ndarray:
        return self.prog0[rows] + self.rate[rows] * np.maximum(0.0, now - self.t0[rows])

    def attained(self, rows: np.ndarray, now: float) -> np.ndarray:
        return self.att0[rows] + self.gpus[rows] * (now - self.ta[rows])

    def executed(self, rows: np.ndarray, now: float) -> np.ndarray:
        return self.run0[rows] + (self.gpus[rows] > 0) * (now - self.ta[rows])

    # -- state changes (called by the drivers) ----------------------------------------------------
    def mark(self, row: int, now: float) -> None:
        """Fold the lazy accumulators into their base values at `now`."""
        t0 = self.t0.item(row)
        if now > t0:
            self.prog0[row] = self.prog0.item(row) + self.rate.item(row) * (now - t0)
            self.t0[row] = now
        dt = now - self.ta.item(row)
        g = self.gpus.item(row)
        if g:
            self.att0[row] = self.att0.item(row) + g * dt
            self.run0[row] = self.run0.item(row) + dt
        self.ta[row] = now

    # -- views and transitions --------------------------------------------------------------------
    def view(self, rows: np.ndarray, now: float) -> JobsView:
        return JobsView(self, rows, now)

    def hold(self, row: int, now: float, kind: str, gtype: int, gpus: np.ndarray,
             rate: float, delay: float) -> None:
        """Bookkeeping of one transition (kind: start/preempt/migrate/resize)."""
        self.apply_transitions(now, np.array([row]), np.array([KIND_CODES[kind]]), np.array([gtype]),
                               [gpus], np.array([rate], dtype=float), np.array([delay], dtype=float))

    def apply_transitions(self, now: float, rows: np.ndarray, kind: np.ndarray, gtype: np.ndarray,
                          gpus: list[np.ndarray], rate: np.ndarray, delay: np.ndarray,
                          partner: np.ndarray | None = None, mode: np.ndarray | None = None,
                          guest: np.ndarray | None = None, consolidated: np.ndarray | None = None,
                          count: np.ndarray | None = None, plan: list | None = None,
                          cpus: np.ndarray | None = None, mem_gb: np.ndarray | None = None,
                          fork: np.ndarray | None = None, mixed: bool = True,
                          net_gbps: np.ndarray | None = None, copies: list | None = None,
                          goes_on: np.ndarray | None = None) -> None:
        """Bookkeeping of one decision's transitions at once (rows are distinct).

        kind: KIND_CODES values; a job that gets GPUs progresses at `rate` after `delay` seconds;
        partner/mode/guest describe GPU sharing after the transition (default: none);
        plan/cpus/mem_gb/net_gbps the execution plan and resources held afterwards (default: none).
        GPUs of several types (ordered by type, as the mechanism gives them) are a mixed
        allocation: `gtype` is one of its types, `mix` keeps GPUs per type and `fork` the seconds
        between its copies' model averagings (default 0: synchronous workers). `mixed=False`
        promises that no transition spans several types (the simulator knows; skips the check).
        `goes_on` (bool per row): the delay is what is left of a restore already under way, not a
        new restart (not counted in `restarts`).
        """
        if count is None:
            count = np.fromiter((len(g) for g in gpus), dtype=np.int64, count=len(gpus))
        # fold the lazy accumulators at `now` with the allocation held until now
        self.prog0[rows] += self.rate[rows] * np.maximum(now - self.t0[rows], 0.0)
        dt = now - self.ta[rows]
        held = self.gpus[rows]
        self.att0[rows] += held * dt
        self.run0[rows] += (held > 0) * dt
        self.ta[rows] = now
        r_pre = rows[kind == KIND_CODES["preempt"]]
        if r_pre.size:
            self.preemptions[r_pre] += 1
            self.waiting_since[r_pre] = now
        if np.count_nonzero(kind >= _COUNTED_FROM):   # starts and preemptions only: nothing to count
            self.migrations[rows[kind == KIND_CODES["migrate"]]] += 1
            self.reconfigs[rows[(kind == KIND_CODES["resize"]) | (kind == KIND_CODES["reconfigure"])]] += 1
        on = count > 0
        r_on = rows[on]
        self.min_rate[r_on] = np.minimum(self.min_rate[r_on], rate[on])
        fresh = r_on[np.isnan(self.first_start[r_on])]
        if fresh.size:
            self.first_start[fresh] = now
        paid = delay > 0 if goes_on is None else (delay > 0) & ~goes_on
        self.restarts[rows[on & paid]] += 1
        self.types_used[r_on] |= np.left_shift(1, gtype[on])
        self.state[rows] = PENDING
        self.state[r_on] = RUNNING
        self.t0[rows] = self.resume_at[rows] = now + np.where(on, delay, 0.0)
        self.rate[rows] = np.where(on, rate, 0.0)
        self.gpus[rows] = count
        self.gtype[rows] = np.where(on, gtype, -1)
        if partner is not None:
            self.sharing_seen = True
            self.partner[rows] = np.where(on, partner, -1)
            self.share_mode[rows] = 0 if mode is None else np.where(on, mode, 0)
            self.is_guest[rows] = False if guest is None else guest & on
        elif self.sharing_seen:
            self.partner[rows] = -1
            self.share_mode[rows] = 0
            self.is_guest[rows] = False
        if plan is not None or cpus is not None or mem_gb is not None or net_gbps is not None:
            self.extras_seen = True
            self.plan[rows] = None
            if plan is not None:
                for r, p, o in zip(rows.tolist(), plan, on.tolist()):
                    if o:
                        self.plan[r] = p
            self.cpus[rows] = 0.0 if cpus is None else np.where(on, cpus, 0.0)
            self.mem_gb[rows] = 0.0 if mem_gb is None else np.where(on, mem_gb, 0.0)
            self.net_gbps[rows] = 0.0 if net_gbps is None else np.where(on, net_gbps, 0.0)
        elif self.extras_seen:
            self.plan[rows] = None
            self.cpus[rows] = 0.0
            self.mem_gb[rows] = 0.0
            self.net_gbps[rows] = 0.0
        self.consolidated[rows] = True if consolidated is None else consolidated
        if fork is not None or self.mixed_seen:
            self.fork_s[rows] = 0.0 if fork is None else np.where(on, fork, 0.0)
        placement = self.placement
        gti, mix = self.cluster.gpu_type_idx, self.mix
        if not (mixed or mix):             # the common case: one type per job, none mixed before
            if r_on.size == rows.size:
                placement.update(zip(rows.tolist(), gpus))
                return
            for r, g, o in zip(rows.tolist(), gpus, on.tolist()):
                if o:
                    placement[r] = g
                else:
                    placement.pop(r, None)
            return
        cps = self.copies
        for i, (r, g, o) in enumerate(zip(rows.tolist(), gpus, on.tolist())):
            if mix:
                mix.pop(r, None)
            cps.pop(r, None)
            cp = copies[i] if copies is not None and o else None
            if cp is not None:
                cps[r] = np.asarray(cp, dtype=np.int64)
            if o:
                placement[r] = g
                if len(g) > 1 and (cp is not None or gti.item(g[0]) != gti.item(g[-1])):
                    held = np.bincount(gti[g], minlength=len(self.cluster.types))
                    mix[r] = held
                    self.mixed_seen = True
                    self.types_used[r] |= int(np.left_shift(1, np.flatnonzero(held)).sum())
            else:
                placement.pop(r, None)

    def apply_few(self, now: float, rows: list[int], kinds: list[int], gtypes: list[int],
                  gpus: list[np.ndarray], counts: list[int], rates: list[float],
                  delays: list[float], consolidated: list[bool]) -> None:
        """`apply_transitions` for a few transitions that hold GPUs only (nothing shared,
        planned, mixed or forked, now or before: `few_ok`), row by row with Python scalars: a
        decision moving a few jobs would spend its time in numpy's per-call cost. The same
        arithmetic in the same order, so the same state bit for bit
        (tests/test_engine.py::test_apply_few_is_apply_transitions)."""
        prog0, rate, t0, ta, att0, run0, held = \
            self.prog0, self.rate, self.t0, self.ta, self.att0, self.run0, self.gpus
        first_start, placement = self.first_start, self.placement
        for r, k, ty, g, c, new_rate, delay, cons in zip(rows, kinds, gtypes, gpus, counts, rates,
                                                         delays, consolidated):
            prog0[r] = prog0.item(r) + rate.item(r) * max(now - t0.item(r), 0.0)
            dt = now - ta.item(r)
            h = held.item(r)
            att0[r] = att0.item(r) + h * dt
            run0[r] = run0.item(r) + (h > 0) * dt
            ta[r] = now
            if k == PREEMPT_CODE:
                self.preemptions[r] += 1
                self.waiting_since[r] = now
            elif k == MIGRATE_CODE:
                self.migrations[r] += 1
            elif k == RESIZE_CODE or k == RECONFIGURE_CODE:
                self.reconfigs[r] += 1
            if c > 0:
                self.min_rate[r] = min(self.min_rate.item(r), new_rate)
                if first_start.item(r) != first_start.item(r):     # NaN: never started
                    first_start[r] = now
                if delay > 0:
                    self.restarts[r] += 1
                self.types_used[r] |= 1 << ty
                self.state[r] = RUNNING
                t0[r] = self.resume_at[r] = now + delay
                rate[r] = new_rate
                self.gtype[r] = ty
                placement[r] = g
            else:
                self.state[r] = PENDING
                t0[r] = self.resume_at[r] = now + 0.0
                rate[r] = 0.0
                self.gtype[r] = -1
                placement.pop(r, None)
            held[r] = c
            self.consolidated[r] = cons

    def few_ok(self) -> bool:
        """Whether `apply_few` may stand for `apply_transitions` (for GPUs-only transitions)."""
        return not (self.sharing_seen or self.extras_seen or self.mixed_seen or self.mix)

    def finish_times(self, rows: np.ndarray) -> np.ndarray:
        """When each job completes at its current rate (inf: not progressing)."""
        r = self.rate[rows]
        on = r > 0
        go = rows[on]
        out = np.empty(len(rows))
        out.fill(np.inf)
        out[on] = self.t0[go] + (self.total[go] - self.prog0[go]) / r[on]
        return out

    def phase_times(self, rows: np.ndarray) -> np.ndarray:
        """When each job's progress reaches the end of its current phase at its current rate
        (inf: no phase end ahead, or not progressing)."""
        r = self.rate[rows]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(r > 0, self.t0[rows] + (self.next_phase_at[rows] - self.prog0[rows]) / r,
                            np.inf)

    def set_phase(self, row: int, progress: float | None = None) -> bool:
        """Move the job to the phase its progress (default: its progress so far, prog0) is in, or
        past the phase whose end it has reached: its spec says the new phase and its rates at the
        requested count are the model's for it. Returns whether the phase changed. The caller
        re-rates the job's current allocation."""
        ends = self.phase_ends.get(row)
        if ends is None:
            return False
        p = float(self.prog0[row] if progress is None else progress)
        old = int(self.specs[row].phase)
        new = int(np.searchsorted(ends, p, side="right"))
        if self.next_phase_at[row] < np.inf and p >= self.next_phase_at[row] * (1 - 1e-12):
            new = max(new, old + 1)        # reached the end of its phase (up to rounding)
        new = min(new, len(ends) - 1)
        self.next_phase_at[row] = ends[new] if new < len(ends) - 1 else np.inf
        if new == old:
            return False
        spec = self.specs[row] = self.specs[row].with_(phase=new)
        self.rates[row] = consolidated_rates(self.perf, [spec], self.cluster)[0] * self.allowed[row]
        return True

    def finish(self, row: int, now: float) -> None:
        self._release(row, now)
        self.prog0[row] = self.total[row]
        self.state[row] = DONE
        self.end[row] = now

    def drop(self, row: int, now: float) -> None:
        """The job leaves without finishing (a reference that gives up on it: gavel-sim's failed
        leases): no end, no JCT; its progress stays what it was."""
        self._release(row, now)
        self.state[row] = DROPPED

    def _release(self, row: int, now: float) -> None:
        """Fold the accumulators at `now` and clear everything the job held."""
        self.mark(row, now)
        self.rate[row] = 0.0
        self.gpus[row] = 0
        self.gtype[row] = -1
        self.placement.pop(row, None)
        self.mix.pop(row, None)
        self.copies.pop(row, None)
        self.fork_s[row] = 0.0
        self.partner[row] = -1
        self.share_mode[row] = 0
        self.is_guest[row] = False
        self.plan[row] = None
        self.cpus[row] = 0.0
        self.mem_gb[row] = 0.0
        self.net_gbps[row] = 0.0


def mixes_types(policy) -> bool:
    """Whether `policy` gives one job GPUs of several types (it says so: `mixes_types`)."""
    return bool(getattr(policy, "mixes_types", False))


def never_fits(table: JobTable, policy, rows: np.ndarray | None = None) -> np.ndarray:
    """The jobs of `table` (of `rows`, default all) that `policy` could never run on the whole
    cluster; the simulator's and the runtime's."""
    return table.never_fits(mixes_types(policy), rows)
