"""`gavel-sim`: the world of Gavel's simulator (stanford-futuredata/gavel @ c4fa400,
scheduler/scheduler.py), as bench/anchors/gavel.md reads it (items W1-W8 there, with lines).

- Rounds (W1, W3): the first round starts at the first arrival; arrivals wait for the next round
  start; when nothing runs, the clock jumps to the next arrival and a round starts there
  (scheduler.py:1233, 1281-1295, 1350-1360). Here: `rounds_from_first_arrival`, rounds every
  360 s (`--time_per_iteration 360`) from there. Gavel's next round starts when the round's
  longest micro-task ends, a little before 360 s when every lease has a fractional last step.
  Quanta's rounds stay exactly 360 s (every job runs the same whole steps a round), and Gavel's
  clock runs beside them (`GavelClock`): a job arriving after Gavel's next round began, a
  fraction of a second before Quanta's, waits for the round after, as in Gavel; and when the
  last running job finishes after Gavel's round ended (every lease of the round ended early),
  the next round starts then, not at Quanta's next tick.
- Whole steps per round (W2): a micro-task runs int(360 T) steps and its GPUs idle to the end of
  the round (scheduler.py:959-993, 1030-1039). Here: the rate a job runs at is floor(360 T) / 360
  (`WholeSteps`); the speed a policy credits a round's steps with stays T (W6, `credit=progress`).
- No restart and no first-start cost (W4, scheduler.py:1474-1484).
- Throughput (W5): the measured (job type, scale factor, GPU type) rate wherever the job's GPUs
  are (scheduler.py:415-430, 976-986): placement never slows a job down here.
- The policies' mechanism (allocation recomputed at most every 1,920 s, per-type queues, received
  time reset, smoothed priorities, held unallocated GPUs, the agnostic FIFO's stale type, an
  interior-point solution, progress credit, the run's seed for the agnostic type shuffle) is
  `quanta.policies.gavel.gavel_sim_params`, pinned here for each Gavel policy.

- Failed leases (W7, a reference bug; scheduler.py:1316-1333, 2958-2962, 2990-3008, 44): a
  multi-GPU micro-task splits its steps over its workers, `steps // scale_factor` to each but the
  last; with fewer steps left than GPUs a worker gets none and the micro-task fails at the end of
  its round, credited nothing, and after 5 failures in a row (MAX_FAILED_ATTEMPTS) the job is
  dropped: no JCT, out of Gavel's averages. Here: `short_leases` (`FailedRounds`): such a job
  holds its GPUs through the round without progress and leaves, dropped, at the round after its
  fifth. Gavel does not count a pair's failures (scheduler.py:2990): shared jobs are left out.
- A packed pair is one micro-task (scheduler.py:1001-1040, 1296-1316): each job's steps are fixed
  when the round begins, and the pair ends with the later of the two. Here: a job that finishes
  in a pair is recorded as ending when its partner's steps of the round end (`GavelClock`), and
  the partner runs on at the pair's rate to the round's end (`round_leases`), alone from the
  next round.
"""

from __future__ import annotations

import numpy as np

from quanta.sim.engine import RestartCost
from quanta.sim.rounds import FailedRounds
from quanta.worlds import PlacementFree, World, world

ROUND_S = 360.0
# Gavel policy -> (Quanta policy, heterogeneity-agnostic: Gavel shuffles its type order)
GAVEL_POLICIES = {
    "max_min_fairness": ("gavel-las-agnostic", True),
    "max_min_fairness_perf": ("gavel-las", False),
    "max_min_fairness_packed": ("gavel-las-packed", False),
    "fifo": ("gavel-fifo-agnostic", True),
    "fifo_perf": ("gavel-fifo", False),
    "finish_time_fairness_perf": ("gavel-ftf", False),
    "max_sum_throughput_perf": ("gavel-throughput", False),
}


class WholeSteps(PlacementFree):
    """Gavel's simulator's rates: placement-independent (W5), run in whole steps per round (W2).

    `rate` (the job's speed, what a policy credits steps with) is the base model's consolidated
    rate; the rates jobs run at (`rate_matrix`, `shared_rate`, `rate_with`) are floor(round T) /
    round."""

    def __init__(self, base, round_s: float = ROUND_S):
        super().__init__(base)
        self.round_s = round_s

    def _floor(self, r):
        return np.floor(np.asarray(r, dtype=float) * self.round_s) / self.round_s

    def rate_with(self, *args, **kw):
        return float(self._floor(super().rate_with(*args, **kw)))

    def rate_matrix(self, jobs, types):
        return self._floor(super().rate_matrix(jobs, types))

    def shared_rate(self, *args, **kw):
        return float(self._floor(super().shared_rate(*args, **kw)))

    def unrounded_shared_rate(self, *args, **kw):
        """A pair's rate before whole steps: what Gavel's programme reads from its table."""
        return super().shared_rate(*args, **kw)


def short_leases(table, rows: np.ndarray, now: float) -> np.ndarray:
    """Which of `rows` (jobs holding GPUs at a round's start) get a lease Gavel's simulator fails
    (W7): a job alone on its GPUs with at least one but fewer whole steps left than it has GPUs."""
    left = np.rint(table.total[rows] - table.progress(rows, now))
    return (left >= 1) & (left < table.req[rows]) & (table.partner[rows] < 0)


class GavelClock:
    """Gavel's round clock for gavel-sim (sim/rounds.py's RoundClock). A round ends when its
    longest micro-task does (W1), each job's lease `min(int(360 T), steps left) / T` at its rate
    T, alone or in its pair (scheduler.py:1001-1040, 1281-1295): a little under 360 s when every
    lease has a fractional last step. A pair is one micro-task: a job finishing in a pair is
    recorded as ending when the pair does, with the later of its two leases (scheduler.py:
    1296-1316, both jobs' latest timestamp the pair's finish time). A job's rate on an allocation
    (GPU type, count, partner: placement does not matter here, W5) is kept for the run once
    asked (a job alone on the GPUs it asked for: by row and type in an array). One clock per
    run (World.new_round_clock)."""

    def __init__(self) -> None:
        self.table = None
        self.rates: dict[tuple[int, int, int, int], float] = {}
        self.alone = np.empty((0, 0))          # [row, type]: rate alone on its asked GPUs, or NaN
        # this round's jobs (rows) and when their leases end (read only when a job in a pair ends)
        self._rows, self._ends = np.empty(0, dtype=np.int64), np.empty(0)

    def length(self, table, rows: np.ndarray, now: float) -> float:
        if table is not self.table:            # the run's first round
            self.table, self.rates = table, {}
            self.alone = np.full((len(table.total), len(table.cluster.types)), np.nan)
        g, n, p = table.gtype[rows], table.gpus[rows], table.partner[rows]
        T = self.alone[rows, g]
        odd = (p >= 0) | (n != table.req[rows])
        unknown = np.flatnonzero(odd | np.isnan(T)).tolist()
        if unknown:
            perf, types, specs = table.perf, table.cluster.types, table.specs
            for i, key in zip(unknown, zip(rows[unknown].tolist(), g[unknown].tolist(),
                                           n[unknown].tolist(), p[unknown].tolist())):
                r, k, m, q = key
                rate = self.rates.get(key)
                if rate is None:
                    rate = self.rates[key] = float(
                        perf.unrounded_shared_rate(specs[r], specs[q], types[k], m, mode="pack")
                        if q >= 0 else perf.rate(specs[r], types[k], m))
                    if not odd[i]:
                        self.alone[r, k] = rate
                T[i] = rate
        # an allocation Gavel's table has no rate for (a job HadarE forked over GPU types: 0 at
        # its whole count on its first type) is one micro-task at the rate the engine runs it
        # at, and one making no progress ends the round no later (before: a NaN lease, and the
        # reference clock off for the rest of the run)
        T = np.where(T > 0, T, table.rate[rows])
        left = np.rint(table.total[rows] - table.progress(rows, now))
        with np.errstate(divide="ignore", invalid="ignore"):
            lease = np.where(T > 0, np.minimum(np.floor(ROUND_S * T), left) / T, 0.0)
        self._rows, self._ends = rows, now + lease
        return float(lease.max())

    def end_in_pair(self, row: int, mate: int, now: float) -> float:
        at = np.flatnonzero(self._rows == mate)
        return float(self._ends[at[0]]) if at.size else now


def _params(seed: int) -> dict[str, str]:
    from quanta.policies.gavel import gavel_sim_params
    from quanta.policies.registry import spec_text
    out = {}
    for name, agnostic in GAVEL_POLICIES.values():
        p = {"interval": ROUND_S, **gavel_sim_params(agnostic, seed, name == "gavel-las-packed")}
        out[name] = ",".join(f"{k}={spec_text(v)}" for k, v in p.items())
    return out


@world("gavel-sim")
def gavel_sim() -> World:
    return World(
        "gavel-sim", "Gavel's simulator: 360 s rounds from the first arrival, whole steps per "
                     "round, no restart cost, placement-independent throughput, Gavel's mechanism, "
                     "failed short multi-GPU leases, pairs as one micro-task",
        restart=lambda _delay: RestartCost(0.0),
        perf=lambda base: WholeSteps(base),
        policy_params=_params,
        restart_fixed=True,
        rounds_from_first_arrival=True,
        failed_rounds=FailedRounds(short_leases, drop_after=5),   # MAX_FAILED_ATTEMPTS
        round_leases=True,
        new_round_clock=GavelClock,
        # the cluster of Gavel's paper experiments and of every recorded run: 36 V100 + 36 P100 +
        # 36 K80, one GPU a server (--cluster_spec 36:36:36 --num_gpus_per_server 1:1:1); what
        # `quanta reproduce gavel` replays on
        cluster="v100:36x1,p100:36x1,k80:36x1",
        notes=("world gavel-sim: no restart cost; rounds of 360 s from the first arrival; jobs "
               "run floor(360 T) steps a round; throughput independent of placement; Gavel's "
               "policies with Gavel's mechanism (gavel_sim_params); a multi-GPU job with fewer "
               "steps left than GPUs fails its round and is dropped after 5 (no JCT)",))
