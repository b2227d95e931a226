"""A job submission: what `quanta submit job.yaml` sends and `POST /v1/jobs` accepts.

    name: mlp-demo
    command: [python, -m, quanta.examples.train, --model, mlp]
    gpus: 2                  # workers (GPUs, or CPU slots on a machine without GPUs)
    steps: 2000              # total optimiser steps (optional: the job ends when its command exits)
    batch_size: 64           # global batch, kept whatever the allocation
    gpu_type: [v100, a100]   # optional: allowed types
    queue: default
    model: resnet50          # optional: catalog job type, for the performance model's priors

Validated by pydantic (unknown fields are errors); `quanta submit --schema` prints the JSON Schema.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from quanta.errors import QuantaError
from quanta.model.job import JobSpec
from quanta.specfile import read_yaml, validated


# the work a job of unknown length (no `steps`) counts as for the policies: very long
UNKNOWN_STEPS = 1e9


class JobSubmission(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    command: list[str] = Field(min_length=1, description="program and arguments")
    steps: int | None = Field(None, ge=1, le=2**53, description="total optimiser steps (optional: "
                              "without it, the job ends when its command exits; progress is "
                              "shown when the job SDK reports it)")
    gpus: int = Field(1, ge=1, le=4096, description="workers: GPUs, or CPU slots without GPUs")
    batch_size: int = Field(64, ge=1, description="global batch size")
    gpu_type: list[str] = Field(default_factory=list, description="allowed GPU types; empty = any")
    queue: str = Field("default", min_length=1, max_length=64)
    model: str = Field("", description="catalog job type (performance-model priors)")
    weight: float = Field(1.0, gt=0)
    min_gpus: int = Field(0, ge=0)
    max_gpus: int = Field(0, ge=0)
    cwd: str = Field("", description="working directory of the command (default: the job's own)")
    env: dict[str, str] = Field(default_factory=dict)
    checkpoint_every: int = Field(100, ge=1, description="steps between checkpoints")
    grace_s: float = Field(30.0, gt=0, le=3600, description="seconds to checkpoint when stopped")
    max_failures: int = Field(3, ge=0, description="restarts after crashes before the job fails")

    @field_validator("gpu_type", mode="before")
    @classmethod
    def _one_or_many(cls, v):
        return [v] if isinstance(v, str) else v

    def to_spec(self, job_id: str, submit: float, user: str) -> JobSpec:
        return JobSpec(job_id=job_id, submit_time=submit, num_gpus=self.gpus,
                       job_type=self.model or self.name,
                       total_steps=float(self.steps or UNKNOWN_STEPS), user=user,
                       queue=self.queue, batch_size=self.batch_size, weight=self.weight,
                       gpu_types=tuple(t.lower() for t in self.gpu_type),
                       min_gpus=self.min_gpus, max_gpus=self.max_gpus)


def parse_submission(data: object, source: str = "") -> JobSubmission:
    if not isinstance(data, dict):
        raise QuantaError("a job spec is a mapping of fields (name, command, steps, ...)",
                          source=source or None)
    return validated(JobSubmission, data, source)


def load_submission(path: Path) -> JobSubmission:
    """A job spec from a YAML file; relative `cwd` is taken from the file's folder."""
    path = Path(path)
    sub = parse_submission(read_yaml(path), str(path))
    cwd = path.parent / sub.cwd if sub.cwd else path.parent   # (an absolute cwd stays itself)
    return sub.model_copy(update={"cwd": str(cwd.resolve())})
