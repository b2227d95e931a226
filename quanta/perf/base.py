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


# Optional, for models that know execution plans and CPU / host-memory sensitivity:
#   rate_with(job, gpu_type, num_gpus, num_nodes, consolidated, plan, cpus, mem_gb) -> steps/s
#       at that plan (None: the job's own plan) with `cpus` CPU threads and `mem_gb` GB of host
#       memory in all (0: not modelled, the job's request); 0 where the plan cannot run there;
#   best_plan_rate(job, gpu_type, num_gpus, num_nodes, consolidated, cpus, mem_gb)
#       -> (best plan, steps/s);
#   host_memory_gb(job, plan) -> host memory the plan needs (offloaded optimizer states).
# The helpers below fall back to `rate` for models without them.
def rate_with(perf, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
              consolidated: bool | None = None, plan=None, cpus: float = 0.0,
              mem_gb: float = 0.0) -> float:
    """Steps/s at an execution plan and CPU / host-memory allocation (see above)."""
    fn = getattr(perf, "rate_with", None)
    if fn is None or (plan is None and not cpus and not mem_gb):
        return perf.rate(job, gpu_type, num_gpus, num_nodes, consolidated)
    return fn(job, gpu_type, num_gpus, num_nodes, consolidated, plan, cpus, mem_gb)


def allocation_rate(perf, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
                    consolidated: bool | None = None, partner: JobSpec | None = None,
                    mode: str = "", plan=None, cpus: float = 0.0, mem_gb: float = 0.0) -> float:
    """Steps/s of a job on an allocation as a transition gives it: alone (at its plan, CPUs and
    host memory) or sharing its GPUs with `partner` in `mode`. Both drivers ask this."""
    if partner is not None:
        return perf.shared_rate(job, partner, gpu_type, num_gpus, num_nodes, consolidated, mode)
    return rate_with(perf, job, gpu_type, num_gpus, num_nodes, consolidated, plan, cpus, mem_gb)


def best_plan_rate(perf, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
                   consolidated: bool | None = None, cpus: float = 0.0,
                   mem_gb: float = 0.0) -> tuple[object, float]:
    """(plan, steps/s) of the fastest plan the model knows; (None, rate) for plan-blind models."""
    fn = getattr(perf, "best_plan_rate", None)
    if fn is None:
        return None, rate_with(perf, job, gpu_type, num_gpus, num_nodes, consolidated, None,
                               cpus, mem_gb)
    return fn(job, gpu_type, num_gpus, num_nodes, consolidated, cpus, mem_gb)


def host_memory_gb(perf, job: JobSpec, plan) -> float:
    fn = getattr(perf, "host_memory_gb", None)
    return 0.0 if fn is None or plan is None else float(fn(job, plan))
