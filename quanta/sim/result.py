"""What a simulation is given about restarts (`RestartCost`) and what it returns (`SimResult`);
the engine (sim/engine.py) runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from quanta.core.jobtable import JobTable
from quanta.model.cluster import Cluster
from quanta.model.job import JobSpec

DEFAULT_RESTART_S = 30.0   # Pollux's simulator charges 30 s per restart


@dataclass(frozen=True)
class RestartCost:
    """Seconds a job spends restoring a checkpoint before it progresses again, per job type."""

    default: float = DEFAULT_RESTART_S
    per_type: Mapping[str, float] = field(default_factory=dict)
    first_start_s: float = 0.0   # seconds a job's first start pays (process start-up, runtime)
    first_start_as_restart: bool = False   # the first start pays the job's restart delay instead
    # a move to other GPUs of the same type with the same GPUs per node is free (Sia's simulator:
    # job.py:524-542 restarts a job only when its per-node counts change; sim/shapes.py)
    same_shape_free: bool = False

    def __call__(self, spec: JobSpec) -> float:
        return float(self.per_type.get(spec.job_type, self.default))


@dataclass
class SimResult:
    policy: str
    cluster: Cluster
    table: JobTable
    times: np.ndarray           # timeline: batch times
    busy: np.ndarray            # (m, K) GPUs held per type after each batch
    pending: np.ndarray         # jobs waiting after each batch
    running: np.ndarray
    shared: np.ndarray          # GPUs holding a second (guest) job after each batch
    active_integral_submit: np.ndarray   # ∫ active jobs dt at each job's submit (for FTF)
    active_integral_end: np.ndarray
    events: int = 0             # processed events (arrivals, completions, ticks, faults, wake-ups)
    transitions: int = 0        # starts, preemptions, migrations, resizes applied
    decisions: int = 0
    wall_s: float = 0.0
    decide_s: float = 0.0
    stalled: bool = False
    horizon: float | None = None
    event_log: list | None = None
    policy_state: dict | None = None    # the policy's state after its last decision (Decision.state)
