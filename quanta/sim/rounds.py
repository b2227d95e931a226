"""A reference simulator's round semantics, run by the simulator beside its own rounds.

A replay world (worlds/gavel_sim.py) may ask for three things that Quanta's own world does not
have, all for round-based policies:
- failed rounds (`FailedRounds`): after a round's decision, jobs that hold their GPUs through the
  round with no progress, dropped (state `dropped`, no JCT) after so many in a row;
- leases fixed for a round (`round_leases`): a job whose partner leaves its GPUs mid-round keeps
  the pair's rate to the round's end, alone from the next round;
- the reference's own round clock (`RoundClock`): the length of each of its rounds from the jobs'
  leases. An arrival after the reference's next round began but before Quanta's tick joins the
  round after; when the last running job finishes after the reference's round ended, the next
  round starts then; a job finishing in a pair is recorded as ending with the pair. Quanta's
  rounds stay exactly `interval` long (every job runs the same whole steps a round).

`ReferenceRounds` is the Simulator's part that keeps this state (a mixin, as the runtime's
controller keeps its parts); every hook is off unless the world sets it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

import numpy as np

from quanta.core.jobtable import RUNNING

if TYPE_CHECKING:
    from quanta.core.jobtable import JobTable


@dataclass(frozen=True)
class FailedRounds:
    """Rounds in which a job holds GPUs but makes no progress (gavel-sim: a multi-GPU lease with
    fewer steps left than GPUs fails). After each round's decision `fails(table, rows, now)` says
    which of the jobs holding GPUs (driver rows) fail this round: they keep their GPUs to its end
    and progress by nothing. A job whose `drop_after`-th failure in a row that is leaves at the
    next round without finishing; a round it runs without failing resets its count."""

    fails: Callable[[JobTable, np.ndarray, float], np.ndarray]
    drop_after: int = 5


class RoundClock(Protocol):
    """A reference's round clock (gavel-sim's GavelClock)."""

    def length(self, table: JobTable, rows: np.ndarray, now: float) -> float:
        """The length of the reference's round that starts now, from the leases of `rows` (the
        jobs holding GPUs after the round's decision)."""

    def end_in_pair(self, row: int, mate: int, now: float) -> float:
        """When the reference records the end of job `row`, which finishes now beside `mate`."""


class ReferenceRounds:
    """The Simulator's reference-round state: see the module's docstring."""

    def _init_rounds(self, failed_rounds: FailedRounds | None, round_leases: bool,
                     round_clock: RoundClock | None) -> None:
        self.failed_rounds = failed_rounds
        self.round_leases = round_leases
        self.round_clock = round_clock
        self.fail_count = np.zeros(len(self.table), dtype=np.int64)
        self.stalled: dict[int, float] = {}   # row -> its rate, while a failed round holds it at 0
        self.dropping: list[int] = []         # failed their last allowed round: leave next round
        self.alone_next_round: dict[int, float] = {}   # row -> its rate alone (round_leases)
        self.ref_next = np.inf                # the reference's next round start (round_clock)
        self.late: list[int] = []             # arrived after it: not seen at Quanta's next tick

    # -- at events --------------------------------------------------------------------------
    def _end_of(self, row: int, mate: int, now: float) -> float:
        """When a job finishing now is recorded as ending (beside `mate`, or alone: -1)."""
        if mate < 0 or self.round_clock is None:
            return now
        return max(now, self.round_clock.end_in_pair(row, mate, now))

    def _arrived(self, new: np.ndarray, now: float, n_running: int) -> None:
        if now > self.ref_next and n_running:   # the reference's next round began before
            self.late.extend(new.tolist())

    def _round_restarts(self, now: float, kinds: set, n_running: int, n_active: int) -> bool:
        """Nothing runs and a round starts now: at an arrival (the reference's round clock
        jumps to it), or, with the reference's clock, at a completion after its round ended."""
        if n_running or "tick" in kinds:
            return False
        if "arrival" in kinds or ("completion" in kinds and now >= self.ref_next and n_active):
            if self.round_clock is not None:
                self.ref_next, self.late = now, []
            return True
        return False

    def _lease_rate(self, row: int, rate: float, plain: bool) -> float:
        """`row`'s partner left its GPUs: the rate it runs at until the next round (`rate`, alone,
        unless its lease is fixed for the round; then alone from the next round on, at the
        table's rate at its request where the allocation is `plain`)."""
        if not (self.round_leases and self.policy.interval):
            return rate
        t = self.table
        self.alone_next_round[row] = t.rates.item(row, int(t.gtype[row])) if plain else rate
        return t.rate.item(row)

    # -- at a round's start -----------------------------------------------------------------
    def _round_start(self, now: float, active: np.ndarray, version, push) -> tuple[np.ndarray, int]:
        """Before a round's decision: leases of the round past end (jobs left alone by their
        partner run at their own rate), jobs past their last failed round leave. Returns the
        active jobs and how many that held GPUs left."""
        t = self.table
        for r, rate in self.alone_next_round.items():
            if t.state.item(r) == RUNNING and t.partner.item(r) < 0:
                self._set_rate(r, rate, now, version, push)
        self.alone_next_round.clear()
        gone = 0
        if self.dropping:
            for r in self.dropping:
                if t.state.item(r) == RUNNING:
                    self.occ.release(r)
                    gone += 1
                t.drop(r, now)
                self.stalled.pop(r, None)
                version[r] += 1
                if self.event_log is not None:
                    self.event_log.append((now, r, "drop", -1, 0, 0, ""))
            active = np.setdiff1d(active, self.dropping)
            self.dropping = []
        return active, gone

    def _seen(self, active: np.ndarray) -> np.ndarray:
        """The jobs a round's decision sees: not those that arrived after the reference's round
        began (they are seen at the next one)."""
        if not self.late:
            return active
        late = np.asarray(self.late, dtype=active.dtype)
        self.late = []
        if not len(active):
            return active
        at = np.minimum(active.searchsorted(late), len(active) - 1)    # `active` is sorted
        keep = np.ones(len(active), dtype=bool)
        keep[at[active[at] == late]] = False
        return active[keep]

    def _round_decided(self, now: float, active: np.ndarray, version, push) -> None:
        """After a round's decision: failed rounds, and the reference's clock."""
        t = self.table
        held = active[t.state[active] == RUNNING]
        if self.failed_rounds is not None:
            self.dropping = self._fail(now, held, version, push)
        if self.round_clock is not None:
            start = now if self.ref_next == np.inf else self.ref_next
            self.ref_next = start + self.round_clock.length(t, held, now) if held.size else np.inf

    def _fail(self, now: float, held: np.ndarray, version, push) -> list[int]:
        """The jobs whose round fails progress by nothing until the next round; a job that held
        GPUs through a failed round and runs this one without failing gets its rate back.
        Returns the jobs to drop at the next round."""
        t, rule = self.table, self.failed_rounds
        failed = rule.fails(t, held, now)
        drop = []
        for r in held[failed].tolist():
            if t.rate.item(r) > 0:          # running at its rate (not already stalled): stall it
                self.stalled[r] = t.rate.item(r)
                self._set_rate(r, 0.0, now, version, None)   # (its completion is off)
            self.fail_count[r] += 1
            if self.fail_count.item(r) >= rule.drop_after:
                drop.append(r)
        ran = held[~failed]
        self.fail_count[ran] = 0
        if self.stalled:
            for r in ran.tolist():
                rate = self.stalled.pop(r, None)
                if rate is not None and t.rate.item(r) == 0.0:   # kept its GPUs: runs again
                    self._set_rate(r, rate, now, version, push)
        return drop
