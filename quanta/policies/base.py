"""The policy contract: a pure function of a snapshot, plus an optional round interval."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot


class Policy(ABC):
    """`decide` reads only the snapshot (no clock, no I/O, no unseeded randomness).

    interval: seconds between rounds; None = decide on every event (arrival, completion,
    failure, recovery, or a wake-up the policy asked for).
    """

    name: ClassVar[str] = ""
    interval: float | None = None

    @abstractmethod
    def decide(self, snap: Snapshot) -> Decision: ...

    def label(self) -> str:
        return self.name


def require(ok: bool, policy: str, name: str, value, want: str) -> None:
    """A parameter value no run can use (`ok` false; NaN fails every comparison): a one-line
    QuantaError naming the policy, the parameter and what it must be."""
    if not ok:
        from quanta.errors import QuantaError
        shown = f"{value:g}" if isinstance(value, (int, float)) else repr(value)
        raise QuantaError(f"{policy}: {name} must be {want}, got {shown}", field="--policy")


INF = float("inf")


class PolicyError(RuntimeError):
    """A policy returned a decision the cluster cannot hold (a bug in the policy, not user input)."""
