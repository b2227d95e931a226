"""Scheduling policies, one module per system, registered by name in `registry.POLICIES`."""

from quanta.policies import baselines, gandiva, gavel, hadar, hadare, pollux, sia, sjf_bsbf, tiresias  # noqa: F401
from quanta.policies import rubick, synergy  # noqa: F401
from quanta.policies.base import Policy, PolicyError
from quanta.policies.registry import POLICIES, make_policy

__all__ = ["Policy", "PolicyError", "POLICIES", "make_policy"]
