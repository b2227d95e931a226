"""Scheduling policies, one module per system, registered by name in `registry.POLICIES` (each
module imported when a policy of it is first looked up: registry.BUILT_IN)."""

from quanta.policies.base import Policy, PolicyError
from quanta.policies.registry import POLICIES, make_policy

__all__ = ["Policy", "PolicyError", "POLICIES", "make_policy"]
