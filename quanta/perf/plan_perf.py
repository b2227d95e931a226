"""PlanPerf: the PerfModel adapter of Rubick's plan model (quanta.perf.plan): steps/s of a job's
plan on its allocation, the best plan where its own does not fit; docs/perf-plan.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from quanta.model.job import JobSpec
from quanta.perf.base import Provenance
from quanta.perf.plan import (
    DEFAULT_THREADS_PER_GPU,
    HOST_MEM_GB,
    ExecutionPlan,
    PlanModel,
    Resources,
    best_plan,
    consolidated,
    feasible,
    memory_gb,
    parse_plan,
    spread,
)
from quanta.perf.plan_apps import APP_TO_FAMILY

REFERENCE_TYPE = "a800"


class PlanPerf:
    """PerfModel for Rubick's models: steps/s = 1000 / T_iter(ms) of the job's plan (job.plan when it
    fits the allocation, else the best plan) on A800-like GPUs; other GPU types scale by the generic
    speed ratio to the A800. Unknown job types go to `fallback` (TableModel by default)."""

    def __init__(self, models: dict[str, PlanModel] | None = None, fallback=None):
        if models is None:
            from quanta.perf.plan_fit import fitted_models
            models = fitted_models()
        self.models = models
        if fallback is None:
            from quanta.perf.table import TableModel
            fallback = TableModel()
        self.fallback = fallback
        self._cache: dict[tuple, float] = {}

    def family(self, job_type: str) -> str | None:
        fam = APP_TO_FAMILY.get(job_type.lower(), job_type.lower())
        return fam if fam in self.models else None

    def rate(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
             consolidated: bool | None = None) -> float:
        return self.rate_with(job, gpu_type, num_gpus, num_nodes, consolidated)

    def rate_with(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
                  consolidated: bool | None = None, plan: ExecutionPlan | str | None = None,
                  cpus: float = 0.0, mem_gb: float = 0.0, net_gbps: float = 0.0) -> float:
        """Steps/s at `plan` (None: job.plan when it fits, else the best plan) with `cpus` CPU
        threads and `mem_gb` GB of host memory in all (0: the job's request / a whole node's
        memory). 0.0 when the plan does not fit the allocation.

        `net_gbps` (0: not reserved, the nodes' whole NICs): GB/s of node network the job holds
        in all, split over its nodes by GPUs as the occupancy splits it. A job on several nodes
        then gets net_gbps * g_i / n on node i (g_i of its n GPUs there); its inter-node groups
        see min(NIC bandwidth, least such node share) as the network bandwidth, before the
        per-group NIC split (`_nic_share`) of 3D plans, since a ring is as fast as its slowest
        node. A job on one node does not use the network: unchanged."""
        key = (job.job_type, job.plan, job.num_gpus, job.cpus, gpu_type, num_gpus, num_nodes,
               consolidated, plan, cpus, mem_gb) if not net_gbps else \
            (job.job_type, job.plan, job.num_gpus, job.cpus, gpu_type, num_gpus, num_nodes,
             consolidated, plan, cpus, mem_gb, net_gbps)
        hit = self._cache.get(key)
        if hit is None:
            fam = self.family(job.job_type)
            if fam is None:
                hit = self.fallback.rate(job, gpu_type, num_gpus, num_nodes, consolidated)
            elif num_gpus <= 0:
                hit = 0.0
            else:
                model = self.models[fam]
                res = self._resources(job, num_gpus, num_nodes, consolidated, cpus, mem_gb,
                                      net_gbps)
                hit = self._plan_rate(model, job, res, plan) * _speed_ratio(gpu_type)
            self._cache[key] = hit
        return hit

    def best_plan_rate(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
                       consolidated: bool | None = None, cpus: float = 0.0,
                       mem_gb: float = 0.0) -> tuple[ExecutionPlan | None, float]:
        """(the fastest feasible plan, its steps/s) on this allocation; (None, 0.0) if none fits."""
        key = ("best", job.job_type, job.num_gpus, job.cpus, gpu_type, num_gpus, num_nodes,
               consolidated, cpus, mem_gb)
        hit = self._cache.get(key)
        if hit is None:
            fam = self.family(job.job_type)
            if fam is None:
                hit = (None, self.fallback.rate(job, gpu_type, num_gpus, num_nodes, consolidated))
            elif num_gpus <= 0:
                hit = (None, 0.0)
            else:
                model = self.models[fam]
                plan, samples = best_plan(model, self._resources(job, num_gpus, num_nodes,
                                                                 consolidated, cpus, mem_gb))
                hit = (plan, samples / model.spec.batch * _speed_ratio(gpu_type))
            self._cache[key] = hit
        return hit

    def host_memory_gb(self, job: JobSpec, plan: ExecutionPlan | str) -> float:
        """Host memory (GB, whole job) the plan needs: ZeRO-Offload's optimizer states."""
        fam = self.family(job.job_type)
        if fam is None:
            return 0.0
        if isinstance(plan, str):
            plan = parse_plan(plan, job.num_gpus)
        return memory_gb(self.models[fam].spec, plan)[1]

    @staticmethod
    def _resources(job: JobSpec, n: int, k: int, cons: bool | None, cpus: float,
                   mem_gb: float, net_gbps: float = 0.0) -> Resources:
        packed = consolidated(n)
        nodes = packed if (cons or k <= len(packed)) else spread(n, k)
        if not cpus:
            per_gpu = job.cpus / job.num_gpus if job.cpus and job.num_gpus else DEFAULT_THREADS_PER_GPU
            cpus = round(per_gpu * n) or n
        res = Resources(n, nodes, cpu_threads=cpus,
                        host_mem_gb=mem_gb / len(nodes) if mem_gb else HOST_MEM_GB)
        if net_gbps and len(nodes) > 1:      # the least node share of the reserved bandwidth
            res = replace(res, net_cap_gbps=net_gbps * min(nodes) / n)
        return res

    @staticmethod
    def plan_for(model: PlanModel, job: JobSpec, res: Resources,
                 plan: ExecutionPlan | str | None) -> ExecutionPlan | None:
        """The plan a job runs on `res`: `plan` if it fits (None if not), else job.plan if it
        fits, else the best plan (None if no plan fits). A malformed `plan` string raises
        ValueError; a malformed job.plan falls back to the best plan."""
        n = res.gpus
        fits = lambda p: (p is not None and p.num_gpus == n and feasible(model.spec, p, res)  # noqa: E731
                          and (not p.is_3d or model.params_3d is not None))
        if plan is not None:
            if isinstance(plan, str):
                plan = parse_plan(plan, n)
            return plan if fits(plan) else None
        if job.plan:
            try:
                plan = parse_plan(job.plan, n)
            except ValueError:
                plan = None
        if not fits(plan):
            plan, _ = best_plan(model, res)
        return plan

    @staticmethod
    def _plan_rate(model: PlanModel, job: JobSpec, res: Resources,
                   plan: ExecutionPlan | str | None) -> float:
        """Steps/s on the A800 reference at `plan`, or at job.plan / the best plan if None."""
        plan = PlanPerf.plan_for(model, job, res, plan)
        if plan is None:
            return 0.0
        t = float(model.iteration_ms([plan], res)[0])
        return 1000.0 / t if np.isfinite(t) and t > 0 else 0.0

    def provenance(self, job: JobSpec, gpu_type: str) -> Provenance:
        if self.family(job.job_type) is None:
            return self.fallback.provenance(job, gpu_type)
        return Provenance.FITTED

    def rate_matrix(self, jobs: Sequence[JobSpec], types: Sequence[str]) -> np.ndarray:
        out = np.empty((len(jobs), len(types)))
        for i, job in enumerate(jobs):
            for k, t in enumerate(types):
                out[i, k] = self.rate(job, t, job.num_gpus, len(consolidated(job.num_gpus)), True)
        return out

    def shared_rate(self, job: JobSpec, other: JobSpec, gpu_type: str, num_gpus: int,
                    num_nodes: int = 1, consolidated: bool | None = None, mode: str = "pack") -> float:
        if self.family(job.job_type) is None:
            return self.fallback.shared_rate(job, other, gpu_type, num_gpus, num_nodes,
                                             consolidated, mode)
        return 0.0   # Rubick never shares GPUs between jobs

    def best_plan(self, job_type: str, gpus: int, cpu_threads: int = 0):
        fam = self.family(job_type)
        return None if fam is None else best_plan(self.models[fam], Resources(gpus, cpu_threads=cpu_threads))


def _speed_ratio(gpu_type: str) -> float:
    if gpu_type.lower() in (REFERENCE_TYPE, "a800-80gb", "a100-80gb"):
        return 1.0
    try:
        from quanta.model.gpu import gpu_type as lookup
        return lookup(gpu_type).speed / lookup(REFERENCE_TYPE).speed
    except (KeyError, ValueError):
        return 1.0
