"""Online refinement: a performance model that learns from observed throughput.

The runtime (and a simulator replaying measurements) reports what a job really achieved on an
allocation with `observe`; later questions about that job on that allocation get the smoothed
measurement (exponential moving average, alpha = 0.5 as Gavel's estimator uses), and the job's
model-predicted answers on *other* allocations of the same GPU type are corrected by the job's
measured/predicted ratio there (a model that is 20% optimistic for this job on one allocation is
likely so on the next). Questions the job has never been measured on fall through to the
underlying model. `provenance` says which it was: MEASURED, or the base model's own.
Observations are kept per job id; rates are steps/s, like every PerfModel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from quanta.model.job import JobSpec
from quanta.perf.base import PerfModel, Provenance, rates_on

ALPHA = 0.5


@dataclass
class _Obs:
    rate: float        # smoothed measured steps/s
    predicted: float   # the base model's answer for the same allocation
    count: int


class OnlineModel:
    def __init__(self, base: PerfModel, alpha: float = ALPHA):
        self.base = base
        self.alpha = alpha
        # (job id, gpu type, gpus, nodes) -> observation
        self._obs: dict[tuple[str, str, int, int], _Obs] = {}
        # (job id, gpu type) -> smoothed measured / predicted ratio
        self._ratio: dict[tuple[str, str], float] = {}

    def observe(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int,
                measured_rate: float) -> None:
        """Record a measured steps/s of `job` alone on that allocation."""
        if measured_rate <= 0 or num_gpus <= 0:
            return
        key = (job.job_id, gpu_type, num_gpus, num_nodes)
        predicted = self.base.rate(job, gpu_type, num_gpus, num_nodes)
        o = self._obs.get(key)
        if o is None:
            self._obs[key] = _Obs(measured_rate, predicted, 1)
        else:
            o.rate = self.alpha * measured_rate + (1 - self.alpha) * o.rate
            o.count += 1
        if predicted > 0:
            r = measured_rate / predicted
            k = (job.job_id, gpu_type)
            old = self._ratio.get(k)
            self._ratio[k] = r if old is None else self.alpha * r + (1 - self.alpha) * old

    def measured(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1) -> float | None:
        o = self._obs.get((job.job_id, gpu_type, num_gpus, num_nodes))
        return None if o is None else o.rate

    def rate(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
             consolidated: bool | None = None) -> float:
        hit = self.measured(job, gpu_type, num_gpus, num_nodes)
        if hit is not None:
            return hit
        base = self.base.rate(job, gpu_type, num_gpus, num_nodes, consolidated)
        return base * self._ratio.get((job.job_id, gpu_type), 1.0)

    @property
    def per_node_rates(self) -> bool:
        return getattr(self.base, "per_node_rates", False)

    def rate_matrix(self, jobs: Sequence[JobSpec], types: Sequence[str],
                    per_node: Sequence[int] | None = None) -> np.ndarray:
        out = rates_on(self.base, jobs, types, per_node)
        if self._ratio:
            for i, job in enumerate(jobs):
                for k, t in enumerate(types):
                    hit = self.measured(job, t, job.num_gpus, 1)
                    if hit is not None:
                        out[i, k] = hit
                    elif (job.job_id, t) in self._ratio:
                        out[i, k] *= self._ratio[(job.job_id, t)]
        return out

    def phase_fractions(self, job: JobSpec):
        """The base model's training phases (measurements are per job, whatever its phase)."""
        fn = getattr(self.base, "phase_fractions", None)
        return None if fn is None else fn(job)

    def provenance(self, job: JobSpec, gpu_type: str) -> Provenance:
        if (job.job_id, gpu_type) in self._ratio:
            return Provenance.MEASURED
        return self.base.provenance(job, gpu_type)

    def shared_rate(self, job: JobSpec, other: JobSpec, gpu_type: str, num_gpus: int,
                    num_nodes: int = 1, consolidated: bool | None = None, mode: str = "pack") -> float:
        """Sharing is not learnt online yet: the base model's answer, corrected by the job's ratio."""
        base = self.base.shared_rate(job, other, gpu_type, num_gpus, num_nodes, consolidated, mode)
        return base * self._ratio.get((job.job_id, gpu_type), 1.0)
