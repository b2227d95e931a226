"""The performance-model contract shared by the simulator, the runtime and every policy."""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple, Protocol, Sequence

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
        """(len(jobs), len(types)) steps/s at each job's requested GPU count, consolidated.
        (A model whose consolidated rate depends on how many nodes those GPUs fill says
        `per_node_rates = True` and takes `per_node=`: see `consolidated_rates`.)"""

    def provenance(self, job: JobSpec, gpu_type: str) -> Provenance:
        """How sure the model is about `job` on `gpu_type`."""


# A plan meaning "re-tune the job's batch size and gradient accumulation for every allocation"
# (Pollux's agent; Sia's adaptive jobs). Policies that co-adapt batch sizes (sia, pollux) give it
# to every job they run; without it a job trains at its own global batch (JobSpec.batch_size).
ADAPTIVE_BATCH = "adaptive-batch"


def is_adaptive(plan) -> bool:
    """Whether a job's plan is an adaptive batch size (Pollux/Sia goodput jobs)."""
    return isinstance(plan, str) and plan.startswith(ADAPTIVE_BATCH)


# Optional: pure_rates = True on a model whose rates are a function of their arguments alone
# (nothing it learns between calls changes them), so that a policy may keep a job's rates for as
# long as its spec is the same object (Sia's candidates). Absent: False (OnlineModel, which the
# runtime wraps every model in, re-rates a job from its measurements).

# Optional, for models whose rates change as training advances:
#   phase_fractions(job) -> ascending fractions of the job's work at which its rate changes (the
#       ends of its phases, e.g. epochs; the last is 1.0), or None. The drivers keep each job's
#       current phase in JobSpec.phase and re-rate the job when its progress crosses an end.

# Optional, for models that know execution plans and CPU / host-memory sensitivity:
#   rate_with(job, gpu_type, num_gpus, num_nodes, consolidated, plan, cpus, mem_gb[, net_gbps=])
#       -> steps/s at that plan (None: the job's own plan) with `cpus` CPU threads and `mem_gb` GB
#       of host memory in all (0: not modelled, the job's request); 0 where the plan cannot run
#       there; `net_gbps` (keyword, passed only when nonzero): GB/s of node network the job holds
#       in all, split over its nodes by GPUs (models that do not model the network ignore it);
#   best_plan_rate(job, gpu_type, num_gpus, num_nodes, consolidated, cpus, mem_gb)
#       -> (best plan, steps/s);
#   host_memory_gb(job, plan) -> host memory the plan needs (offloaded optimizer states).
# The helpers below fall back to `rate` for models without them.
def rate_with(perf, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
              consolidated: bool | None = None, plan=None, cpus: float = 0.0,
              mem_gb: float = 0.0, net_gbps: float = 0.0) -> float:
    """Steps/s at an execution plan and CPU / host-memory / network allocation (see above)."""
    fn = getattr(perf, "rate_with", None)
    if fn is None or (plan is None and not cpus and not mem_gb and not net_gbps):
        return perf.rate(job, gpu_type, num_gpus, num_nodes, consolidated)
    if net_gbps:
        return fn(job, gpu_type, num_gpus, num_nodes, consolidated, plan, cpus, mem_gb,
                  net_gbps=net_gbps)
    return fn(job, gpu_type, num_gpus, num_nodes, consolidated, plan, cpus, mem_gb)


def allocation_rate(perf, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
                    consolidated: bool | None = None, partner: JobSpec | None = None,
                    mode: str = "", plan=None, cpus: float = 0.0, mem_gb: float = 0.0,
                    partner_plan=None, parts: Sequence[Part] | None = None,
                    fork: tuple[float, float] | None = None, net_gbps: float = 0.0) -> float:
    """Steps/s of a job on an allocation as a transition gives it: alone (at its plan, CPUs,
    host memory and network bandwidth), sharing its GPUs with `partner` in `mode` (each at its own plan), or on GPUs of
    several types (`parts`, see mixed_rate). Both drivers ask this."""
    if parts is not None:
        return mixed_rate(perf, job, parts, fork)
    if partner is not None:
        if plan is None and partner_plan is None:
            return perf.shared_rate(job, partner, gpu_type, num_gpus, num_nodes, consolidated, mode)
        return perf.shared_rate(job, partner, gpu_type, num_gpus, num_nodes, consolidated, mode,
                                plan=plan, other_plan=partner_plan)
    return rate_with(perf, job, gpu_type, num_gpus, num_nodes, consolidated, plan, cpus, mem_gb,
                     net_gbps)


def rates_on(perf, jobs: Sequence[JobSpec], types: Sequence[str],
             per_node: Sequence[int] | None = None) -> np.ndarray:
    """`perf.rate_matrix(jobs, types)`, telling a model that asks for it (`per_node_rates`) the
    GPUs per node of each type (`per_node`, None: the model's own idea of its nodes)."""
    if per_node is not None and getattr(perf, "per_node_rates", False):
        return perf.rate_matrix(jobs, types, per_node=per_node)
    return perf.rate_matrix(jobs, types)


def consolidated_rates(perf, jobs: Sequence[JobSpec], cluster) -> np.ndarray:
    """Each job's steps/s at its requested GPU count on the fewest nodes of `cluster` (its
    largest node of each type): the rates the drivers run a job at when it has what it asked
    for. A model rating multi-node jobs apart (Pollux's goodput model) counts this cluster's
    nodes, not those of the testbed it was fitted on (a 6-GPU job on 4-GPU servers was rated on
    one 8-GPU node, then at its next epoch on the two nodes it held: two speeds for one
    placement, and an ideal run time it could beat)."""
    return rates_on(perf, jobs, cluster.types, [int(x) for x in cluster.type_node_max])


class Part(NamedTuple):
    """The GPUs of one type in a job's allocation over several types."""
    gpu_type: str
    count: int
    nodes: int
    consolidated: bool


def mixed_rate(perf, job: JobSpec, parts: Sequence[Part], fork: tuple[float, float] | None = None
               ) -> float:
    """Steps/s of a job on GPUs of several types.

    Synchronous (fork None; Hadar's task-level heterogeneity): the W workers are one data-parallel
    gang that synchronises every step, so every step waits for the slowest worker: the job runs
    as if all W workers were of its slowest type, over all the nodes it spans, i.e.
        rate = min over parts p of rate(job, type_p, W, nodes, consolidated=False)
    (= the slowest worker's per-GPU rate x W; different types are on different nodes, so the gang
    is spread). [U] the Hadar paper states that a job progresses at the rate its slowest task
    allows; the per-worker rate as 1/W of the all-of-that-type rate is ours.

    Forked (fork = (period_s, aggregation_s); HadarE): each part is an independent copy of the
    job on its own GPUs (its own data-parallel gang at the global batch); the copies average
    their models every period_s seconds, which stops them all for aggregation_s seconds
    (see aggregation_seconds). The work is split by throughput (each copy takes rate_p / sum of
    the remaining steps, so all copies reach every round's end together), so the job progresses at
        rate = sum over parts of rate(job, type_p, count_p, nodes_p, consolidated_p)
               x max(0, 1 - aggregation_s / period_s).   [U: HadarE's mechanics are not public]
    """
    if fork is None:
        w = sum(p.count for p in parts)
        nodes = sum(p.nodes for p in parts)
        return min(perf.rate(job, p.gpu_type, w, nodes, False) for p in parts)
    period, agg = fork
    total = sum(perf.rate(job, p.gpu_type, p.count, p.nodes, p.consolidated) for p in parts)
    return total * max(0.0, 1.0 - agg / period) if len(parts) > 1 else total


DEFAULT_AGG_BW_GBPS = 1.25   # GB/s between copies when the cluster does not say (10 Gb Ethernet) [U]


def link_gbps(cluster, nodes) -> float:
    """GB/s of the slowest network link among `nodes` (0: some node does not say)."""
    bw = [cluster.nodes[i].inter_bw_gbps for i in np.asarray(nodes).tolist()]
    return float(min(bw)) if bw and all(bw) else 0.0


def model_size(perf, job: JobSpec) -> float:
    """Bytes of the job's model, perf.model_bytes(job) (0 where the model does not say)."""
    fn = getattr(perf, "model_bytes", None)
    return float(fn(job)) if fn is not None else 0.0


def aggregation_seconds(perf, job: JobSpec, copies: int, bw_gbps: float = 0.0,
                        size: float | None = None) -> float:
    """Seconds `copies` copies of `job` need to average their models: a ring all-reduce of the
    model's parameters, each copy sending and receiving 2 (c - 1) / c of the model over the
    slowest link (bw_gbps GB/s; 0: DEFAULT_AGG_BW_GBPS). Model size `size` bytes (None:
    model_size; 0: no cost known, 0 s)."""
    if copies <= 1:
        return 0.0
    if size is None:
        size = model_size(perf, job)
    bw = (bw_gbps if bw_gbps > 0 else DEFAULT_AGG_BW_GBPS) * 1e9
    return 2.0 * (copies - 1) / copies * size / bw


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
