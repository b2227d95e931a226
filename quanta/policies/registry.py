"""Policies by name. `make_policy("las:backfill=false")` builds one with parameters.

A policy module registers itself with `@register("name", "one-line description", **defaults)`;
adding a policy touches its own module and one import line in quanta/policies/__init__.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from quanta.errors import QuantaError
from quanta.policies.base import Policy


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    description: str
    cls: type[Policy]
    defaults: dict[str, Any]


POLICIES: dict[str, PolicyInfo] = {}


def register(name: str, description: str, **defaults: Any) -> Callable[[type[Policy]], type[Policy]]:
    def wrap(cls: type[Policy]) -> type[Policy]:
        if name in POLICIES:
            raise RuntimeError(f"policy '{name}' registered twice")
        POLICIES[name] = PolicyInfo(name, description, cls, defaults)
        return cls
    return wrap


def _convert(value: str, typ: Any, field_name: str, spec: str) -> Any:
    if str(typ).startswith("tuple"):   # a list of numbers: a/b/c
        try:
            return tuple(float(v) for v in value.split("/") if v)
        except ValueError:
            raise QuantaError(f"policy '{spec}': parameter '{field_name}' wants numbers separated "
                              f"by '/', got '{value}'") from None
    t = typ if isinstance(typ, type) else {"bool": bool, "int": int, "float": float,
                                          "str": str}.get(str(typ).split("|")[0].strip(), str)
    if t is bool:
        low = value.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise QuantaError(f"policy '{spec}': parameter '{field_name}' wants true/false, got '{value}'")
    try:
        return t(value)
    except ValueError:
        raise QuantaError(f"policy '{spec}': parameter '{field_name}' wants {t.__name__}, "
                          f"got '{value}'") from None


def make_policy(spec: str) -> Policy:
    """Build a policy from `name` or `name:key=value,key=value`."""
    name, _, params = spec.strip().partition(":")
    info = POLICIES.get(name)
    if info is None:
        known = ", ".join(sorted(POLICIES))
        raise QuantaError(f"unknown policy '{name}' (known: {known})")
    kwargs = dict(info.defaults)
    fields = {f.name: f for f in dataclasses.fields(info.cls)} if dataclasses.is_dataclass(info.cls) else {}
    for item in filter(None, (p.strip() for p in params.split(","))):
        key, eq, value = item.partition("=")
        if not eq or key not in fields:
            allowed = ", ".join(sorted(fields)) or "none"
            raise QuantaError(f"policy '{spec}': unknown parameter '{key}' (parameters: {allowed})")
        kwargs[key] = _convert(value, fields[key].type, key, spec)
    policy = info.cls(**kwargs)
    policy.name = spec.strip() if params else name   # type: ignore[misc]
    return policy
