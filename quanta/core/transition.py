"""A decision's transitions: what the mechanism (core/mechanism.py) hands the drivers, one
`Transition` per job that starts, stops, moves, resizes, re-shares or is reconfigured."""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

import numpy as np

from quanta.core.jobtable import KIND_CODES, MIGRATE_CODE, RESIZE_CODE, START_CODE
from quanta.perf.base import Part


class Kind(str, Enum):
    START = "start"        # pending -> running
    PREEMPT = "preempt"    # running -> pending
    MIGRATE = "migrate"    # same GPU count, other GPUs (or other type)
    RESIZE = "resize"      # other GPU count
    RESHARE = "reshare"    # same GPUs; the job sharing them changed (no restart)
    RECONFIGURE = "reconfigure"  # same GPUs; other execution plan or CPU / memory / network (restart)


class Transition(NamedTuple):
    row: int                  # driver row
    kind: Kind
    gpu_type: int             # new type index (-1 on preempt)
    gpus: np.ndarray          # new global GPU ids (empty on preempt)
    nodes: int
    consolidated: bool
    plan: object = None
    partner: int = -1         # driver row of the job sharing these GPUs afterwards
    mode: str = ""            # "pack" | "slice" when shared
    guest: bool = False       # runs on GPUs its partner owns
    cpus: float = 0.0         # CPU threads held afterwards (0: not asked for)
    mem_gb: float = 0.0       # host memory held afterwards (0: not asked for)
    parts: tuple[Part, ...] | None = None  # GPUs of several types: one Part per type (else None)
    fork: tuple[float, float] | None = None  # forked copies: (s between averagings, s per averaging)
    net_gbps: float = 0.0     # node network GB/s held afterwards (0: not asked for)
    copies: np.ndarray | None = None  # GPUs per node of a forked job's extra copies (else None)


class Plain(NamedTuple):
    """The columns of a decision's transitions when they all hold GPUs only (no sharing, plan,
    CPUs, memory, network, parts of several types, fork or copies: those fields at Transition's
    defaults), in the transitions' order: what a driver reads of them without unzipping them."""
    rows: list[int]             # driver rows
    kinds: list[int]            # jobtable.KIND_CODES
    gpu_type: list[int]         # -1 on preempt
    gpus: list[np.ndarray]
    count: list[int]            # len of each gpus
    nodes: list[int]
    consolidated: list[bool]


class Transitions(list):
    """A decision's transitions (a list of Transition), with their columns (`plain`) where the
    mechanism built them as such."""
    plain: Plain | None = None


# a Transition's fields after `consolidated` when it holds GPUs only (Transition's defaults)
PLAIN_REST = tuple(Transition._field_defaults[f] for f in Transition._fields[6:])
NO_GPUS = np.empty(0, dtype=np.int64)      # every preemption's GPUs (shared: read-only)
NO_GPUS.setflags(write=False)
KIND_OF_CODE = [Kind.START] * (max(KIND_CODES.values()) + 1)
for _k in Kind:
    KIND_OF_CODE[KIND_CODES[_k.value]] = _k


def transition_kind(was: int, g: int) -> Kind:
    """A placed job's transition: it held `was` GPUs and gets `g` (other GPUs, or new ones)."""
    return KIND_OF_CODE[kind_code(was, g)]


def kind_code(was: int, g: int) -> int:
    """`transition_kind` as its jobtable.KIND_CODES code."""
    return START_CODE if was == 0 else RESIZE_CODE if g != was else MIGRATE_CODE
