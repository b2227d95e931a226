"""Node failures: seeded exponential times between failures per node, fixed repair time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FailureModel:
    mtbf_s: float          # mean time between failures of one node
    repair_s: float        # time a failed node stays down
    seed: int = 0

    def rng(self) -> np.random.Generator:
        return np.random.default_rng([self.seed, 0xFA11])

    def next_failure(self, rng: np.random.Generator, now: float) -> float:
        return now + float(rng.exponential(self.mtbf_s))


@dataclass(frozen=True)
class NodeOutage:
    """A scripted outage: `node` (index) goes down at `at` for `duration` seconds."""

    node: int
    at: float
    duration: float
