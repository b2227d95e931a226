"""What a policy returns: a target allocation for every job of the snapshot."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quanta.core.snapshot import Snapshot


@dataclass
class Decision:
    gpus: np.ndarray                 # target GPU count per snapshot row (0 = queue / preempt)
    gpu_type: np.ndarray             # target type index per snapshot row (-1 when gpus == 0)
    order: np.ndarray | None = None  # placement priority (snapshot rows); default: biggest first
    exact: dict[int, np.ndarray] = field(default_factory=dict)  # row -> exact global GPU ids
    plans: dict[int, Any] = field(default_factory=dict)         # row -> execution plan
    cpus: np.ndarray | None = None    # CPU threads per snapshot row (None / 0: not asked for)
    mem_gb: np.ndarray | None = None  # host memory (GB) per snapshot row (None / 0: not asked for)
    # node network bandwidth (GB/s) per snapshot row, split over its nodes by GPUs (None / 0: not
    # asked for)
    net_gbps: np.ndarray | None = None
    consolidate: set[int] = field(default_factory=set)  # rows placed only on the fewest nodes
    defrag: set[int] = field(default_factory=set)  # running rows to move if that spans fewer nodes
    # row -> GPUs per type index, shape (K,): one job on GPUs of several types (gpus[row] = their
    # sum, gpu_type[row] one of them). Synchronous workers (the slowest sets the pace) unless forked:
    mixed: dict[int, np.ndarray] = field(default_factory=dict)
    # mixed row -> seconds between model averagings: its parts are independent copies (HadarE)
    fork: dict[int, float] = field(default_factory=dict)
    # forked row (in `mixed` and `fork`) -> GPUs per node (cluster node order) of its extra
    # copies: every node with GPUs here holds one more copy of the job, on that node only, beside
    # its own gang (mixed[row] minus the copies' GPUs, per type). Copies may be of the own gang's
    # type (HadarE forks per node, not per type)
    copies: dict[int, np.ndarray] = field(default_factory=dict)
    # guest row -> (host row, "pack" | "slice"): the guest runs on exactly the host's GPUs
    share: dict[int, tuple[int, str]] = field(default_factory=dict)
    # guest row (also in `share`, naming one of its hosts) -> {host row: GPUs of that host it
    # runs on}: a guest spanning GPUs of several hosts of any size and/or idle GPUs (gpus[row]
    # minus the hosts' GPUs, of the same type, which it owns). A host has at most one guest.
    span: dict[int, dict[int, int]] = field(default_factory=dict)
    # a guest whose hosts leave their GPUs in this decision (preempted, moved) keeps running there
    # as their owner, without a restart, where the decision asks for exactly that (SJF-BSBF);
    # False: such a guest is placed anew, as before
    guests_inherit: bool = False
    wake_at: float | None = None     # ask to be called again at this time (e.g. a threshold)
    state: dict[str, Any] | None = None  # the policy's state to hand back next time
    # why each job this decision leaves waiting waits (snapshot row -> the REASON column, e.g.
    # "QuotaExceeded(team-a, v100)", "WaitingForReclaim", "FairShare", "Priority", "Resources");
    # optional: a driver shows its own reason for rows not in it (quanta.queues fills it)
    reasons: dict[int, str] = field(default_factory=dict)
    # waiting row -> (position in its queue, 1 = next; estimated start time or None)
    positions: dict[int, tuple[int, float | None]] = field(default_factory=dict)

    @classmethod
    def empty(cls, snap: Snapshot) -> "Decision":
        n = len(snap.jobs)
        gpu_type = np.empty(n, dtype=np.int64)
        gpu_type.fill(-1)
        return cls(np.zeros(n, dtype=np.int64), gpu_type)
