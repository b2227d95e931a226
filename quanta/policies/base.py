"""The policy contract: a pure function of a snapshot, plus an optional round interval."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.workloads.readers._base import MAX_NUMBER as MAX_S   # (s: no run lasts longer)


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
        if isinstance(value, float):
            shown = f"{value:g}"
        elif isinstance(value, int):     # (as written: 2^63 was 9.22337e+18, 10^400 overflowed)
            digits = str(value)
            shown = digits if len(digits) <= 24 else f"{digits[:12]}... ({len(digits)} digits)"
        else:
            shown = repr(value)
        raise QuantaError(f"{policy}: {name} must be {want}, got {shown}", field="--policy")


INF = float("inf")
MAX_SEED = 2**63 - 1   # a seed is an int64 (the run's tables hold it); 0 or more
MIN_INTERVAL_S = 1e-3  # a round interval under it: no run of any length could end
POWER = "a power from -100 to -0.01 or 0.01 to 100"     # Sia's / Pollux's p


def gpu_type_names(text: str, policy: str, name: str) -> str:
    """A parameter's GPU type names (`a/b/c`) canonical ('A100' -> 'a100'); an unknown name is
    a one-line QuantaError (it was passed over unsaid)."""
    from quanta.errors import QuantaError
    from quanta.model.gpu import gpu_type
    try:
        return "/".join(gpu_type(t).name for t in text.split("/") if t.strip())
    except QuantaError as e:
        raise QuantaError(f"{policy} {name}: {e.bare}", field="--policy") from None


class PolicyError(RuntimeError):
    """A policy returned a decision the cluster cannot hold (a bug in the policy, not user input)."""
