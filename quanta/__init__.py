"""Quanta: one decision core for deep-learning training cluster schedulers.

Python API (docs: quanta/api.py): `quanta.simulate(...)`, `quanta.sweep(...)`; policies as names
or `quanta.Policy` objects. Imported on first use, so `import quanta` stays light.
"""

__version__ = "0.1.0"

__all__ = ["simulate", "sweep", "Policy", "QuantaError", "register", "__version__"]


def __getattr__(name):
    if name in ("simulate", "sweep"):
        from quanta import api
        return getattr(api, name)
    if name == "Policy":
        from quanta.policies.base import Policy
        return Policy
    if name == "register":
        from quanta.policies.registry import register
        return register
    if name == "QuantaError":
        from quanta.errors import QuantaError
        return QuantaError
    raise AttributeError(f"module 'quanta' has no attribute '{name}'")
