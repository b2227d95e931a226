"""The performance model the simulator uses: each job goes to the model that knows its type.

Rubick's model families (vit, roberta, bert, t5, gpt2, llama7, llama30) -> the plan model;
the Pollux/Sia applications (cifar10, imagenet, ...) -> the goodput model; every other job type
(Gavel's 26 types and unknown ones) -> the measured table, with its documented estimates.
`bert` is in both catalogs (Rubick's BERT pre-training, Pollux's BERT fine-tuning): a job that
carries an execution plan (every Rubick trace row does) goes to the plan model, one without
to the goodput model.
Sub-models are built on first use (fitting the plan model takes seconds).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from quanta.model.job import JobSpec
from quanta.perf.base import ADAPTIVE_BATCH, Provenance, rates_on
from quanta.perf.goodput_data import APPS as GOODPUT_APPS
from quanta.perf.plan_apps import APP_TO_FAMILY
from quanta.perf.synergy import PROPORTIONAL, cpu_mem_factor
from quanta.perf.table import TableModel


class CatalogModel:
    pure_rates = True      # quanta/perf/base.py

    def __init__(self) -> None:
        self.table = TableModel()
        self._goodput = None
        self._plan = None

    @property
    def goodput(self):
        if self._goodput is None:
            from quanta.perf.goodput import GoodputPerf
            self._goodput = GoodputPerf(fallback=self.table)
        return self._goodput

    @property
    def plan(self):
        if self._plan is None:
            from quanta.perf.plan_perf import PlanPerf
            self._plan = PlanPerf(fallback=self.table)
        return self._plan

    def model_for(self, job: JobSpec):
        kind = job.job_type.lower()
        if kind in APP_TO_FAMILY and (job.plan or kind not in GOODPUT_APPS):
            return self.plan
        if kind in GOODPUT_APPS:
            return self.goodput
        return self.table

    def rate(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
             consolidated: bool | None = None) -> float:
        return self.model_for(job).rate(job, gpu_type, num_gpus, num_nodes, consolidated)

    def rate_with(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
                  consolidated: bool | None = None, plan=None, cpus: float = 0.0,
                  mem_gb: float = 0.0, net_gbps: float = 0.0) -> float:
        """Plan model jobs: at that plan, CPU threads and host memory. Other jobs: their rate
        times Synergy's CPU / memory factor relative to Synergy's GPU-proportional share (an
        amount left at 0 counts as that share); a plan is charged for table jobs (gradient accumulation,
        TableModel.rate_with); for goodput jobs the plan ADAPTIVE_BATCH re-tunes the batch size
        (GoodputPerf.rate_with). Network bandwidth (`net_gbps`) only
        for plan model jobs (PlanPerf.rate_with); the other models ignore it."""
        model = self.model_for(job)
        if isinstance(plan, str) and plan.startswith(ADAPTIVE_BATCH) and model is not self._goodput:
            plan = None                    # only goodput jobs re-tune their batch size
        if model is self._plan:
            if net_gbps:
                return model.rate_with(job, gpu_type, num_gpus, num_nodes, consolidated, plan,
                                       cpus, mem_gb, net_gbps)
            return model.rate_with(job, gpu_type, num_gpus, num_nodes, consolidated, plan, cpus,
                                   mem_gb)
        base = model.rate_with(job, gpu_type, num_gpus, num_nodes, consolidated, plan)
        if (not cpus and not mem_gb) or num_gpus <= 0:
            return base
        c = cpus / num_gpus if cpus else PROPORTIONAL[0]
        m = mem_gb / num_gpus if mem_gb else PROPORTIONAL[1]
        return base * cpu_mem_factor(job.job_type, c, m)

    def best_plan_rate(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
                       consolidated: bool | None = None, cpus: float = 0.0, mem_gb: float = 0.0):
        model = self.model_for(job)
        if model is self._plan:
            return model.best_plan_rate(job, gpu_type, num_gpus, num_nodes, consolidated, cpus,
                                        mem_gb)
        return None, self.rate_with(job, gpu_type, num_gpus, num_nodes, consolidated, None, cpus,
                                    mem_gb)

    def host_memory_gb(self, job: JobSpec, plan) -> float:
        model = self.model_for(job)
        return model.host_memory_gb(job, plan) if model is self._plan else 0.0

    per_node_rates = True       # (its goodput model's: perf.base.consolidated_rates)

    def rate_matrix(self, jobs: Sequence[JobSpec], types: Sequence[str],
                    per_node: Sequence[int] | None = None) -> np.ndarray:
        out = np.zeros((len(jobs), len(types)))
        groups: dict[int, list[int]] = {}
        models = {}
        chosen: dict[tuple[str, bool], object] = {}    # what model_for reads of a job -> model
        for i, job in enumerate(jobs):
            kind = (job.job_type, bool(job.plan))
            m = chosen.get(kind)
            if m is None:
                m = chosen[kind] = self.model_for(job)
                models[id(m)] = m
            groups.setdefault(id(m), []).append(i)
        for key, idx in groups.items():
            out[idx] = rates_on(models[key], [jobs[i] for i in idx], types, per_node)
        return out

    def work_steps(self, job: JobSpec) -> float | None:
        """A job's work from the catalog where the catalog knows it (Pollux/Sia applications:
        steps of the initial batch to the target metric); None otherwise."""
        model = self.model_for(job)
        return model.work_steps(job) if model is self._goodput else None

    def phase_fractions(self, job: JobSpec):
        """Where a goodput job's rate changes (its epochs' ends, as fractions of its work); None
        for the other models' jobs, whose rates do not depend on progress."""
        model = self.model_for(job)
        return model.phase_fractions(job) if model is self._goodput else None

    def observe(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1):
        """What a Pollux/Sia job measures on an allocation (GoodputPerf.observe); None for the
        other models' jobs."""
        model = self.model_for(job)
        # (`_goodput`: asking `goodput` would fit its 30 models for a job that has none)
        return model.observe(job, gpu_type, num_gpus, num_nodes) if model is self._goodput else None

    def goodput_profile(self, job: JobSpec, gpu_type: str):
        """The goodput model's per-type profile of a Pollux/Sia job (batch limits, 1-GPU seed
        throughput); None for the other models' jobs or a type it has none for."""
        model = self.model_for(job)
        if model is not self._goodput or not model._profiled(model._app(job), gpu_type):
            return None
        return model.profile(job, gpu_type)

    def atomic_throughput(self, job: JobSpec, gpu_type: str) -> float | None:
        """Samples/s of a Pollux/Sia job's largest 1-GPU batch on a type (its seed profile: what
        Sia projects throughputs across types with); None where unknown."""
        model = self.model_for(job)
        if model is not self._goodput:
            return None
        try:
            return model.catalog[model._app(job)].atomic_throughput(gpu_type)
        except Exception:
            return None

    def provenance(self, job: JobSpec, gpu_type: str) -> Provenance:
        return self.model_for(job).provenance(job, gpu_type)

    def shared_rate(self, job: JobSpec, other: JobSpec, gpu_type: str, num_gpus: int,
                    num_nodes: int = 1, consolidated: bool | None = None, mode: str = "pack",
                    plan=None, other_plan=None) -> float:
        """Pollux/Sia and Rubick jobs never share GPUs (0); table jobs use measured pairs (at
        their plans' micro-batches)."""
        if self.model_for(job) is not self.table or self.model_for(other) is not self.table:
            return 0.0
        return self.table.shared_rate(job, other, gpu_type, num_gpus, num_nodes, consolidated, mode,
                                      plan, other_plan)

    def model_bytes(self, job: JobSpec) -> float:
        """Bytes of the job's parameters (table jobs: by model family; others: the default)."""
        return self.table.model_bytes(job)
