"""What a job could be given, and what it is worth, in Sia's and Pollux's configuration
programmes (quanta/policies/config_ilp.py chooses among them): the candidates (job, GPU type,
GPU count, rate), their rates kept between rounds, and the re-allocation penalty."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from quanta.core.snapshot import Snapshot


class RateMemo:
    """A policy's candidates of each job (Sia's, Pollux's), rows of (GPU type, count, rate),
    kept between one policy's rounds while the job's spec (its training phase included), the
    cluster and the performance model are the same objects: the model's rates are a function of
    those alone. Per job, the candidates for one set of allowed types and GPU caps (they change
    as the job scales up).
    Forgotten at the first decision of a run (`of`); never part of the policy's state; none
    for a model that does not declare its rates pure (`pure_rates`, quanta/perf/base.py)."""

    def __init__(self, snap: Snapshot) -> None:
        self.perf, self.cluster = snap.perf, snap.cluster
        self.jobs: dict[int, tuple[object, dict]] = {}
        # the last round's candidates, with the rows and blocks they were made of
        self.last: tuple[list[int], list[np.ndarray], Candidates] | None = None
        # what the last round's candidates were made from, where the policy says (`unchanged`)
        self.inputs: tuple | None = None
        # (job type, batch size, plan, GPU type, count) -> whether such a job runs there at all
        # (the model's rate > 0: it fits), the same for every job of that kind in every phase
        # (unaware Pollux asks it of every type it values as its main one)
        self.fits: dict[tuple, bool] = {}
        # (job type, GPU type index) -> the most replicas its batch allows (sia.replica_cap)
        self.replica_caps: dict[tuple[str, int], int] = {}

    @staticmethod
    def of(policy, snap: Snapshot) -> RateMemo | None:
        if not getattr(snap.perf, "pure_rates", False):
            return None
        m = policy.__dict__.get("_rate_memo")
        if m is None or not snap.state or m.perf is not snap.perf or m.cluster is not snap.cluster:
            m = policy.__dict__["_rate_memo"] = RateMemo(snap)
        return m

    def unchanged(self, inputs: tuple, specs: tuple) -> Candidates | None:
        """The last round's candidates where they were made from equal `inputs` (values that
        decide every job's candidates besides its spec) and the very same `specs`, else None;
        either way `inputs` and `specs` are kept for the next round's question. (Most of Sia's
        rounds: nothing came, left, scaled up or started restoring since the last one.)"""
        last, self.inputs = self.inputs, (inputs, tuple(specs))     # (a tuple: kept as is)
        if last is None or self.last is None or last[0] != inputs or \
                len(last[1]) != len(specs) or not all(map(operator.is_, last[1], specs)):
            return None
        return self.last[2]

    def get(self, row: int, spec, key: tuple) -> np.ndarray | None:
        hit = self.jobs.get(row)
        return hit[1].get(key) if hit is not None and hit[0] is spec else None

    def put(self, row: int, spec, key: tuple, out: np.ndarray) -> None:
        hit = self.jobs.get(row)
        if hit is None or hit[0] is not spec:
            hit = self.jobs[row] = (spec, {})
        hit[1][key] = out


def kept_candidates(memo: RateMemo | None, rows: list[int], blocks: list[np.ndarray]
                    ) -> Candidates:
    """`Candidates.of_blocks(rows, blocks)`: the last round's object where it was made of the
    same rows and the very same blocks (kept rates, nothing re-rated: most rounds)."""
    last = None if memo is None else memo.last
    if last is not None and last[0] == rows and len(last[1]) == len(blocks) and \
            all(a is b for a, b in zip(last[1], blocks)):
        return last[2]
    c = Candidates.of_blocks(rows, blocks)
    if memo is not None:
        memo.last = (rows, blocks, c)
    return c


def kept_rates(memo: RateMemo | None, row: int, spec, key: tuple,
               rate_rows: Callable[..., list[tuple[int, int, float]]], *args) -> np.ndarray:
    """One job's candidates as rows (GPU type, count, rate): kept in `memo` under `key` for this
    job and spec, else `rate_rows(*args)` (then kept, where there is a memo)."""
    out = None if memo is None else memo.get(row, spec, key)
    if out is None:
        out = np.array(rate_rows(*args), dtype=float).reshape(-1, 3)
        if memo is not None:
            memo.put(row, spec, key, out)
    return out


@dataclass(frozen=True)
class Candidates:
    """(job, GPU type, GPU count) triples a job could be given, with the model's rate for each."""

    job: np.ndarray
    gtype: np.ndarray
    count: np.ndarray
    rate: np.ndarray

    @classmethod
    def of_blocks(cls, jobs: list[int], blocks: list[np.ndarray]) -> Candidates:
        """From one block of rows (GPU type, count, rate) per job in `jobs`."""
        a = np.concatenate(blocks) if blocks else np.empty((0, 3))
        job = np.repeat(np.array(jobs, dtype=np.int64), [len(b) for b in blocks])
        return cls(job, a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2])

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
