"""The performance-model contract shared by the simulator, the runtime and every policy."""

from __future__ import annotations

from enum import Enum
from typing import Protocol, Sequence

import numpy as np

from quanta.model.job import JobSpec


class Provenance(str, Enum):
    MEASURED = "measured"          # read from a measured table or observed at run time
    FITTED = "fitted"              # predicted by a model fitted on measurements of this job type
    BOOTSTRAPPED = "bootstrapped"  # carried over from another GPU type by a measured ratio
    ESTIMATED = "estimated"        # generic GPU speed ratio; no measurement of this job type


class PerfModel(Protocol):
    def rate(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
             consolidated: bool | None = None) -> float:
        """Steps/s of `job` on `num_gpus` GPUs of `gpu_type` over `num_nodes` nodes.

        `consolidated` says whether those nodes are the fewest the GPUs could fit in (None: the
        model decides from num_nodes)."""

    def shared_rate(self, job: JobSpec, other: JobSpec, gpu_type: str, num_gpus: int,
                    num_nodes: int = 1, consolidated: bool | None = None, mode: str = "pack") -> float:
        """Steps/s of `job` while `other` shares its GPUs ("pack": at once; "slice": in turns)."""

    def rate_matrix(self, jobs: Sequence[JobSpec], types: Sequence[str]) -> np.ndarray:
        """(len(jobs), len(types)) steps/s at each job's requested GPU count, consolidated."""

    def provenance(self, job: JobSpec, gpu_type: str) -> Provenance:
        """How sure the model is about `job` on `gpu_type`."""
