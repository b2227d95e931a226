"""Choose one configuration per job by integer programming (shared by Sia and Pollux).

Candidates are (job, GPU type, GPU count) triples with a cost each; the programme picks at most
one per job, within each type's GPUs, minimising total cost (a job left out costs 0, so a
negative cost means "worth admitting"). The LP relaxation is solved first and kept when it is
integral (then it is the ILP optimum); otherwise HiGHS' MILP, to a 1e-4 relative gap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.solver_output import silent_stdout


class Warm:
    """A configuration programme kept in HiGHS between one policy's rounds. From one round to
    the next usually only the costs change (ages, goodputs): the LP relaxation is then solved
    again from the last basis, which is optimal as it is in most rounds. One per policy object,
    forgotten at the first decision of a run (`Warm.of`), so a run never depends on an earlier
    one."""

    def __init__(self) -> None:
        self.lp = None
        self.key: tuple | None = None

    @staticmethod
    def of(policy, snap: Snapshot) -> Warm:
        w = policy.__dict__.get("_warm")
        if w is None or not snap.state:          # a new run: nothing kept from another
            w = policy.__dict__["_warm"] = Warm()
        return w


def _matrix(n_jobs: int, cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray, K: int):
    """Rows: one configuration per job at most (n_jobs), then each type's GPUs (K)."""
    from quanta import highs
    m = len(cand_j)
    return highs.csc(np.concatenate([cand_j, n_jobs + cand_t]), np.tile(np.arange(m), 2),
                     np.concatenate([np.ones(m), cand_n.astype(float)]), (n_jobs + K, m))


def choose_configs(n_jobs: int, cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray,
                   cost: np.ndarray, capacity: np.ndarray, time_limit: float = 10.0,
                   warm: Warm | None = None) -> np.ndarray | None:
    """Indexes of the chosen candidates, or None if the solver found nothing. With `warm`, the
    LP relaxation of a programme with the same rows and columns as the last one is re-solved
    from its basis (only the costs changed)."""
    m = len(cand_j)
    if m == 0:
        return np.empty(0, dtype=np.int64)
    from quanta import highs
    key = (n_jobs, cand_j.tobytes(), cand_t.tobytes(), cand_n.tobytes(), capacity.tobytes())
    if warm is not None and warm.lp is not None and warm.key == key:
        res = warm.lp.resolve(cost=cost)
    else:
        A = _matrix(n_jobs, cand_j, cand_t, cand_n, len(capacity))
        lp = warm.lp if warm is not None and warm.lp is not None else \
            highs.LP() if warm is not None else highs.solver("configs")
        res = lp.solve(cost, A, np.concatenate([np.ones(n_jobs), capacity.astype(float)]),
                       np.zeros(m), np.ones(m))
        if warm is not None:
            warm.lp, warm.key = lp, key
    x = res.x if res.status == 0 else None
    if x is None or np.any(np.abs(x - np.round(x)) > 1e-7):      # fractional: the ILP
        # (scipy's milp: HiGHS' MIP through highspy directly is no faster on these, ~25 ms)
        from scipy.optimize import (  # (imported when first needed)
            LinearConstraint,
            milp,
        )
        from scipy.sparse import coo_matrix
        per_job = coo_matrix((np.ones(m), (cand_j, np.arange(m))), shape=(n_jobs, m)).tocsr()
        per_type = coo_matrix((cand_n.astype(float), (cand_t, np.arange(m))),
                              shape=(len(capacity), m)).tocsr()
        cons = [LinearConstraint(per_job, -np.inf, 1.0),
                LinearConstraint(per_type, -np.inf, capacity.astype(float))]
        with silent_stdout():
            x = milp(cost, integrality=np.ones(m), bounds=(0, 1), constraints=cons,
                     options={"mip_rel_gap": 1e-4, "time_limit": time_limit}).x
    if x is None:
        return None
    return np.flatnonzero(x > 0.5)


@dataclass(frozen=True)
class Candidates:
    """(job, GPU type, GPU count) triples a job could be given, with the model's rate for each."""

    job: np.ndarray
    gtype: np.ndarray
    count: np.ndarray
    rate: np.ndarray

    @classmethod
    def of(cls, rows: list[tuple[int, int, int, float]]) -> Candidates:
        a = np.array(rows, dtype=float).reshape(-1, 4)
        return cls(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2].astype(np.int64),
                   a[:, 3])

    def __len__(self) -> int:
        return len(self.job)

    def current(self, snap: Snapshot) -> np.ndarray:
        """The candidates equal to what each job holds now."""
        j = snap.jobs
        return (self.gtype == j.gtype[self.job]) & (self.count == j.gpus[self.job])


def restart_factor(snap: Snapshot, delta: float | np.ndarray, grace: bool,
                   first_start_counted: bool = False) -> np.ndarray:
    """Pollux/Sia re-allocation penalty per job: max(age - restarts * delta, 0) / (age + delta);
    with `grace`, none while the job is younger than delta (Sia). With `first_start_counted`
    the world charged each job's first start as a restart, which Pollux's and Sia's own count
    leaves out (sia-simulator job.py:537-542: `num_restarts` is 0 at the first start), so one
    is taken off the snapshot's count."""
    j = snap.jobs
    age = snap.now - j.submit
    restarts = np.maximum(j.restarts - 1, 0) if first_start_counted else j.restarts
    r = np.maximum(age - restarts * delta, 0.0) / (age + delta)
    return np.where(age < delta, 1.0, r) if grace else r


def decide_configs(snap: Snapshot, cands: Candidates, cost: np.ndarray, state: dict,
                   time_limit: float, plans: dict[int, object] | None = None,
                   warm: Warm | None = None) -> Decision:
    """Solve the programme and turn the chosen candidates into a decision (if the solver finds
    nothing, everything keeps what it holds); `plans` (snapshot row -> plan) go with the rows
    that get GPUs."""
    j = snap.jobs
    chosen = choose_configs(len(j), cands.job, cands.gtype, cands.count, cost, snap.capacity,
                            time_limit, warm)
    if chosen is None:
        held = {i: j.plan[i] for i in np.flatnonzero(j.running).tolist() if j.plan[i] is not None}
        return Decision(j.gpus.copy(), j.gtype.copy(), plans=held, state=state)
    dec = Decision.empty(snap)
    dec.state = state
    dec.gpus[cands.job[chosen]] = cands.count[chosen]
    dec.gpu_type[cands.job[chosen]] = cands.gtype[chosen]
    if plans:
        dec.plans = {i: plans[i] for i in cands.job[chosen].tolist() if i in plans}
    return dec
