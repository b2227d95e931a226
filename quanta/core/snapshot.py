"""What a policy sees: a frozen, columnar view of the active jobs and the cluster at one moment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from typing import Any, Sequence

import numpy as np

from quanta.model.cluster import Cluster
from quanta.model.job import JobSpec
from quanta.perf.base import PerfModel

if TYPE_CHECKING:
    from quanta.core.jobtable import JobTable


class cached_property:  # noqa: N801  (a drop-in for functools.cached_property)
    """Computed on first access, then a plain instance attribute. functools.cached_property in
    Python 3.11 takes a lock on every first access, which costs ~1.5 s over the Philly replay's
    150,000 snapshots."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


class JobsView:
    """Active (pending or running) jobs, one entry per array position ("snapshot row").

    Columns are read from the driver's JobTable on first access (a policy pays only for what it
    reads) and are read-only copies: policies cannot change the drivers' state through them.
    """

    def __init__(self, table: "JobTable", rows: np.ndarray, now: float):
        self._t = table
        self._now = now
        self.rows = rows                       # driver row of each job (stable id inside one run)
        self.all_specs: Sequence[JobSpec] = table.specs

    def __len__(self) -> int:
        return len(self.rows)

    @cached_property
    def specs(self) -> tuple[JobSpec, ...]:
        all_specs = self.all_specs
        return tuple(all_specs[r] for r in self.rows.tolist())

    @cached_property
    def submit(self) -> np.ndarray:
        return self._t.submit[self.rows]

    @cached_property
    def req(self) -> np.ndarray:
        """GPUs requested."""
        return self._t.req[self.rows]

    @cached_property
    def weight(self) -> np.ndarray:
        return self._t.weight[self.rows]

    @cached_property
    def allowed(self) -> np.ndarray:
        """(n, K) bool: GPU types the job may use (and can run on)."""
        return self._t.allowed[self.rows]

    @cached_property
    def rates(self) -> np.ndarray:
        """(n, K) steps/s at the requested count, consolidated (0 = not allowed)."""
        return self._t.rates[self.rows]

    @cached_property
    def total(self) -> np.ndarray:
        return self._t.total[self.rows]

    @cached_property
    def progress(self) -> np.ndarray:
        return self._t.progress(self.rows, self._now)

    @cached_property
    def attained(self) -> np.ndarray:
        """GPU-seconds held so far (attained service)."""
        return self._t.attained(self.rows, self._now)

    @cached_property
    def executed(self) -> np.ndarray:
        """Wall seconds held so far."""
        return self._t.executed(self.rows, self._now)

    @cached_property
    def waiting_since(self) -> np.ndarray:
        """When the job last lost (or never had) GPUs."""
        return self._t.waiting_since[self.rows]

    @cached_property
    def gpus(self) -> np.ndarray:
        """GPUs held now."""
        return self._t.gpus[self.rows]

    @cached_property
    def running(self) -> np.ndarray:
        return self.gpus > 0

    @cached_property
    def gtype(self) -> np.ndarray:
        """Type index held now (-1 none)."""
        return self._t.gtype[self.rows]

    @cached_property
    def restarts(self) -> np.ndarray:
        return self._t.restarts[self.rows]

    @cached_property
    def resume_at(self) -> np.ndarray:
        """When a held job's progress (re)starts: the end of its restart delay (after `now` while
        it is still restoring a checkpoint)."""
        return self._t.resume_at[self.rows]

    @cached_property
    def partner(self) -> np.ndarray:
        """Driver row of the job sharing this job's GPUs (-1 none)."""
        return self._t.partner[self.rows]

    @cached_property
    def consolidated(self) -> np.ndarray:
        """The job's placement spans the fewest nodes possible."""
        return self._t.consolidated[self.rows]

    @cached_property
    def is_guest(self) -> np.ndarray:
        """Runs as a guest on GPUs another job owns."""
        return self._t.is_guest[self.rows]

    @cached_property
    def share_mode(self) -> np.ndarray:
        """0 none, 1 packed, 2 time-sliced (core.jobtable.SHARE_MODES)."""
        return self._t.share_mode[self.rows]

    @cached_property
    def plan(self) -> np.ndarray:
        """(n,) object: the execution plan held now (None: the job's own plan, or not running)."""
        return self._t.plan[self.rows]

    @cached_property
    def cpus(self) -> np.ndarray:
        """CPU threads held now (0: not asked for, not modelled)."""
        return self._t.cpus[self.rows]

    @cached_property
    def mem_gb(self) -> np.ndarray:
        """Host memory (GB) held now (0: not asked for, not modelled)."""
        return self._t.mem_gb[self.rows]

    @cached_property
    def net_gbps(self) -> np.ndarray:
        """Node network bandwidth (GB/s) held now (0: not asked for, not modelled)."""
        return self._t.net_gbps[self.rows]

    @property
    def extras_seen(self) -> bool:
        """Whether any job of the run ever held a plan or CPU / memory resources."""
        return self._t.extras_seen

    @property
    def any_mixed(self) -> bool:
        """Some job of the run holds GPUs of several types now (cheap: no column built)."""
        return bool(self._t.mix)

    @cached_property
    def mixed(self) -> np.ndarray:
        """(n,) bool: the job holds GPUs of several types now."""
        mix = self._t.mix
        if not mix:
            return np.zeros(len(self.rows), dtype=bool)
        return np.fromiter((r in mix for r in self.rows.tolist()), dtype=bool, count=len(self.rows))

    @cached_property
    def parts(self) -> np.ndarray:
        """(n, K) GPUs held per type now (one nonzero column unless the job is mixed)."""
        out = np.zeros((len(self.rows), len(self._t.cluster.types)), dtype=np.int64)
        run = np.flatnonzero(self.gpus > 0)
        out[run, self.gtype[run]] = self.gpus[run]
        mix = self._t.mix
        for i in np.flatnonzero(self.mixed).tolist():
            out[i] = mix[int(self.rows[i])]
        return out

    @cached_property
    def copies(self) -> dict[int, np.ndarray]:
        """Snapshot row -> GPUs per node of a forked job's extra copies (Decision.copies), for
        the jobs that have some."""
        held = self._t.copies
        if not held:
            return {}
        return {i: held[r].copy() for i, r in enumerate(self.rows.tolist()) if r in held}

    @cached_property
    def fork_s(self) -> np.ndarray:
        """Seconds between the model averagings of a forked job's copies (0: not forked)."""
        return self._t.fork_s[self.rows]

    @cached_property
    def placement(self) -> tuple[np.ndarray, ...]:
        """Global GPU ids each job holds (empty while it waits)."""
        held, empty = self._t.placement, np.empty(0, dtype=np.int64)
        return tuple(held.get(r, empty).copy() for r in self.rows.tolist())

    @cached_property
    def rate(self) -> np.ndarray:
        """Steps/s the job makes now (0 while waiting or restoring a checkpoint): what an
        introspective policy measures."""
        t = self._t
        return np.where(t.t0[self.rows] <= self._now, t.rate[self.rows], 0.0)

    @property
    def remaining(self) -> np.ndarray:
        return np.maximum(self.total - self.progress, 0.0)

    @property
    def best_rate(self) -> np.ndarray:
        return self.rates.max(axis=1)

    def remaining_time(self) -> np.ndarray:
        """Seconds left at the best allowed type (oracle; for SRTF/SJF-style policies)."""
        return self.remaining / np.maximum(self.best_rate, 1e-12)


@dataclass(frozen=True)
class Snapshot:
    now: float
    cluster: Cluster
    perf: PerfModel
    jobs: JobsView
    capacity: np.ndarray      # GPUs per type on nodes that are up
    node_free: np.ndarray     # free GPUs per node if every running job keeps its GPUs
    node_up: np.ndarray
    state: dict[str, Any] = field(default_factory=dict)   # the policy's own state, from last time
    events: tuple[str, ...] = ()                           # what triggered this decision
    resources: tuple[float, float] = (np.inf, np.inf)  # CPU threads, host GB on up nodes (inf: no limit)
    network: float = np.inf   # node network GB/s on up nodes (inf: no limit)
