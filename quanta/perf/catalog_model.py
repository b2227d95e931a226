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
from quanta.perf.base import Provenance
from quanta.perf.goodput_data import APPS as GOODPUT_APPS
from quanta.perf.plan import APP_TO_FAMILY
from quanta.perf.table import TableModel


class CatalogModel:
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
            from quanta.perf.plan import PlanPerf
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

    def rate_matrix(self, jobs: Sequence[JobSpec], types: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(jobs), len(types)))
        groups: dict[int, list[int]] = {}
        models = {}
        for i, job in enumerate(jobs):
            m = self.model_for(job)
            models[id(m)] = m
            groups.setdefault(id(m), []).append(i)
        for key, idx in groups.items():
            out[idx] = models[key].rate_matrix([jobs[i] for i in idx], types)
        return out

    def work_steps(self, job: JobSpec) -> float | None:
        """A job's work from the catalog where the catalog knows it (Pollux/Sia applications:
        steps of the initial batch to the target metric); None otherwise."""
        model = self.model_for(job)
        return model.work_steps(job) if model is self.goodput else None

    def provenance(self, job: JobSpec, gpu_type: str) -> Provenance:
        return self.model_for(job).provenance(job, gpu_type)

    def shared_rate(self, job: JobSpec, other: JobSpec, gpu_type: str, num_gpus: int,
                    num_nodes: int = 1, consolidated: bool | None = None, mode: str = "pack") -> float:
        """Pollux/Sia and Rubick jobs never share GPUs (0); table jobs use measured pairs."""
        if self.model_for(job) is not self.table or self.model_for(other) is not self.table:
            return 0.0
        return self.table.shared_rate(job, other, gpu_type, num_gpus, num_nodes, consolidated, mode)
