"""A job submission: what `quanta submit job.yaml` sends and `POST /v1/jobs` accepts.

    name: mlp-demo
    command: [python, -m, quanta.examples.train, --model, mlp]
    gpus: 2                  # workers (GPUs, or CPU slots on a machine without GPUs)
    steps: 2000              # total optimiser steps (optional: the job ends when its command exits)
    batch_size: 64           # global batch, kept whatever the allocation
    gpu_type: [v100, a100]   # optional: allowed types
    queue: default
    priority: high           # optional: a number, or a class of the queues file
    model: imagenet          # optional: a job type of `quanta catalog`, for the performance
                             # model's priors (without it: the name, if a catalog type)

Validated by pydantic (unknown fields are errors); `quanta schema` prints the JSON Schema.
Names that reach metrics, terminals and file names (name, queue, GPU types, environment variable
names) are plain words; no string may hold a NUL byte; every number is bounded. A spec file must
be UTF-8 YAML without duplicate keys.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from quanta.errors import QuantaError
from quanta.model.job import CLASS_NAME, JobSpec
from quanta.specfile import read_yaml, validated

WORD = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"      # names shown in metrics labels and terminals
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# what the scheduler sets in a job's environment (a job's own value was replaced, unsaid)
SET_BY_SCHEDULER = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                    "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
MAX_ARGS, MAX_ENV, MAX_TEXT = 4096, 1024, 65536
MAX_SPEC_BYTES = 1 << 20     # a job spec, as a file or as the body of a request


def _no_nul(value: str, what: str) -> str:
    """A string a process can be given: no NUL byte, valid Unicode (no lone surrogate)."""
    if "\0" in value:
        raise ValueError(f"{what} holds a NUL byte")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode text") from None
    return value


# the work a job of unknown length (no `steps`) counts as for the policies: very long
UNKNOWN_STEPS = 1e9


class JobSubmission(BaseModel):
    # strict: a number is a number and a text a text (`steps: true` ran one step, `gpus: true`
    # one GPU, `batch_size: "64"` passed); a whole number still fits a float field
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=64, pattern=WORD)
    command: list[str] = Field(min_length=1, max_length=MAX_ARGS,
                               description="program and arguments")
    steps: int | None = Field(None, ge=1, le=2**53, description="total optimiser steps (optional: "
                              "without it, the job ends when its command exits; progress is "
                              "shown when the job SDK reports it)")
    gpus: int = Field(1, ge=1, le=4096, description="workers: GPUs, or CPU slots without GPUs")
    batch_size: int = Field(64, ge=1, le=2**31, description="global batch size")
    gpu_type: list[str] = Field(default_factory=list, max_length=64,
                                description="allowed GPU types; empty = any")
    queue: str = Field("default", min_length=1, max_length=64, pattern=WORD)
    priority: int | str = Field(0, description="a number (higher first), or a priority class "
                                "name of the service's queues file (quanta serve --queues)")
    model: str = Field("", max_length=200, description="catalog job type (performance-model priors)")
    weight: float = Field(1.0, gt=0, le=1e6, allow_inf_nan=False)
    min_gpus: int = Field(0, ge=0, le=4096)
    max_gpus: int = Field(0, ge=0, le=4096)
    cwd: str = Field("", max_length=4096,
                     description="working directory of the command (default: the job's own)")
    env: dict[str, str] = Field(default_factory=dict, max_length=MAX_ENV)
    checkpoint_every: int = Field(100, ge=1, le=2**53, description="steps between checkpoints")
    grace_s: float = Field(30.0, gt=0, le=3600, description="seconds to checkpoint when stopped")
    max_failures: int = Field(3, ge=0, le=100,
                              description="restarts after crashes before the job fails")

    @field_validator("gpu_type", mode="before")
    @classmethod
    def _one_or_many(cls, v):
        return [v] if isinstance(v, str) else v

    @field_validator("gpu_type")
    @classmethod
    def _type_names(cls, v: list[str]) -> list[str]:
        for t in v:
            if not re.fullmatch(WORD, t) or len(t) > 32:
                raise ValueError(f"{t[:40]!r} is not a GPU type name (letters, digits, _ . -)")
        return v

    @field_validator("priority")
    @classmethod
    def _priority(cls, v: int | str) -> int | str:
        if isinstance(v, str) and not re.fullmatch(CLASS_NAME, v) and \
                not re.fullmatch(r"[+-]?\d{1,10}", v):
            raise ValueError(f"{v[:40]!r} is neither a whole number nor a priority class name")
        if isinstance(v, int) and abs(v) > 10**9:
            raise ValueError("at most 10^9 in absolute value")
        return v

    @field_validator("command")
    @classmethod
    def _args(cls, v: list[str]) -> list[str]:
        if not v[0]:
            raise ValueError("the program (first item) is empty")
        for i, a in enumerate(v):
            _no_nul(a, f"argument {i}")
            if len(a) > MAX_TEXT:
                raise ValueError(f"argument {i} is longer than {MAX_TEXT} characters")
        return v

    @field_validator("cwd")
    @classmethod
    def _text(cls, v: str) -> str:
        return _no_nul(v, "it")

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        """A name of `quanta catalog` (a typo left the job on the generic profile, unsaid)."""
        from quanta.workloads.catalog import job_type_names, known_job_type
        if v and not known_job_type(_no_nul(v, "it")):
            def key(name: str) -> str:          # ResNet-50 (batch size 64) -> resnet50
                return re.sub(r"[^a-z0-9]", "", name.partition(" (batch size ")[0].lower())
            by_key: dict[str, str] = {}
            for n in sorted(job_type_names()):
                by_key.setdefault(key(n), n)
            near = difflib.get_close_matches(key(v), by_key, n=1, cutoff=0.75)
            hint = f"; did you mean {by_key[near[0]]!r}?" if near else ""
            raise ValueError(f"{v[:80]!r} is not a job type of `quanta catalog`{hint} (leave it "
                             "out for the generic profile)")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for k, val in v.items():
            if not ENV_NAME.fullmatch(k) or len(k) > 256 or not k.isascii():
                raise ValueError(f"{k[:40]!r} is not an environment variable name "
                                 "(letters, digits, _; not starting with a digit)")
            if k in SET_BY_SCHEDULER or k.startswith("QUANTA_"):
                raise ValueError(f"{k} is set by the scheduler for each rank (the GPUs, the "
                                 "threads and the rendezvous it gives the job)")
            _no_nul(val, f"the value of {k}")
            if len(val) > MAX_TEXT:
                raise ValueError(f"the value of {k} is longer than {MAX_TEXT} characters")
        return v

    def to_spec(self, job_id: str, submit: float, user: str, priority: int = 0) -> JobSpec:
        """The job for the policies; `priority` is the value of the job's priority (the runtime
        resolves class names against its queues file)."""
        return JobSpec(job_id=job_id, submit_time=submit, num_gpus=self.gpus, priority=priority,
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
    sub = parse_submission(read_yaml(path, MAX_SPEC_BYTES), str(path))
    # (an absolute cwd stays itself)
    cwd = str((path.parent / sub.cwd if sub.cwd else path.parent).resolve())
    try:
        cwd.encode()
    except UnicodeEncodeError:      # a folder's name of bytes that are no UTF-8 (a traceback)
        raise QuantaError(f"the spec's folder {cwd.encode(errors='surrogateescape')!r} is not "
                          f"valid Unicode text: give cwd, or move the spec", source=str(path),
                          field="cwd") from None
    return sub.model_copy(update={"cwd": cwd})
