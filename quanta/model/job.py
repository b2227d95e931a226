"""Job specifications (what a user or a trace asks for) and traces (ordered lists of them).

Work is measured in steps (iterations). `duration_s`, when a trace gives it, is the job's run time on
the reference allocation (its requested GPU count of `reference_gpu`, consolidated); the workload
builder turns it into steps through the performance model, so that a job alone on the reference
cluster runs exactly that long.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

REFERENCE_GPU = "v100"
CLASS_NAME = r"[A-Za-z][A-Za-z0-9_.-]{0,63}"    # a priority class name (queues files): not a number


@dataclass(frozen=True, slots=True)
class JobSpec:
    job_id: str
    submit_time: float                 # seconds from the trace start
    num_gpus: int                      # GPUs requested (scale factor)
    job_type: str = ""                 # catalog key (model); "" = unknown, to be drawn
    total_steps: float = 0.0           # work; 0 = derive from duration_s
    duration_s: float = 0.0            # run time on the reference allocation, if the trace has it
    user: str = ""
    queue: str = "default"
    batch_size: int = 0
    weight: float = 1.0
    priority: int = 0                  # a trace may name a class (str) until --queues resolves it
    gpu_types: tuple[str, ...] = ()    # allowed GPU types; () = any
    guaranteed: bool = False           # guaranteed (SLA) or best-effort
    sla: float = 0.0                   # guaranteed throughput floor, fraction of requested-alloc rate
    min_gpus: int = 0                  # elastic range; 0 = num_gpus (rigid)
    max_gpus: int = 0
    deadline: float = 0.0              # absolute seconds; 0 = none
    gpu_fraction: float = 1.0          # share of one GPU requested (openb)
    cpus: float = 0.0                  # CPU threads requested; 0 = not modelled
    mem_gb: float = 0.0                # host memory requested; 0 = not modelled
    plan: str = ""                     # the user's execution plan, if any
    type_drawn: bool = False           # job_type was drawn from the catalog, not given by the trace
    reference_gpu: str = REFERENCE_GPU
    source_line: int = 0               # line of the trace file this job came from (for errors)
    # training phase the job is in now (its epoch, for performance models whose rates change as
    # training advances: PerfModel.phase_fractions); set by the drivers' job tables, 0 in a trace
    phase: int = 0

    @property
    def elastic(self) -> bool:
        return self.min_gpus_eff != self.max_gpus_eff

    @property
    def min_gpus_eff(self) -> int:
        return self.min_gpus or self.num_gpus

    @property
    def max_gpus_eff(self) -> int:
        return self.max_gpus or self.num_gpus

    def with_(self, **changes) -> "JobSpec":
        """A copy with `changes` (as dataclasses.replace, which reads every field through the
        generic machinery: ~1.5x slower, and a workload builds two copies of every job)."""
        if not changes.keys() <= _FIELD_NAMES:
            raise TypeError(f"JobSpec has no field {sorted(changes.keys() - _FIELD_NAMES)[0]!r}")
        new = object.__new__(JobSpec)
        for name, slot in _SLOTS:
            slot.__set__(new, changes[name] if name in changes else slot.__get__(self))
        return new


# the fields' slot descriptors (a frozen dataclass's own setattr refuses; with_ sets them once)
_SLOTS = tuple((f.name, getattr(JobSpec, f.name)) for f in fields(JobSpec))
_FIELD_NAMES = frozenset(name for name, _slot in _SLOTS)


@dataclass
class Trace:
    """Jobs sorted by submit time, with where they came from and what was synthesised."""

    jobs: list[JobSpec]
    name: str = "trace"
    source: str = ""
    format: str = ""
    notes: list[str] = field(default_factory=list)
    origin: float = 0.0      # the file's submit time of the first job (subtracted from every job)

    def __post_init__(self) -> None:
        # ties in the trace's order, as the reference simulators read theirs (a stable sort by
        # time); by job id as text, job "10" went before job "9" at the same instant
        self.jobs.sort(key=lambda j: j.submit_time)

    def __len__(self) -> int:
        return len(self.jobs)
