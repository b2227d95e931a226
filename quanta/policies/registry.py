"""Policies by name. `make_policy("las:backfill=false")` builds one with parameters.

A policy module registers itself with `@register("name", "one-line description", **defaults)`;
adding a policy touches its own module and its line in `BUILT_IN` below, which names the module
that registers each built-in policy, so that a run imports only the policies it uses (all of
them cost ~20 ms a process; the listing and an unknown name import them all).
A user's own policy needs no edit here: `make_policy("my_pkg.my_mod:MyPolicy:k=v")` imports it,
and installed packages name theirs in the `quanta.policies` entry-point group
(`quanta/policies/plugins.py`).
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import typing
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from types import UnionType
from typing import Any, Callable

from quanta.errors import QuantaError
from quanta.policies.base import Policy


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    description: str
    cls: type[Policy]
    defaults: dict[str, Any]
    origin: str = ""            # "" = built in; else where a plugin came from


# built-in policy name -> its module under quanta.policies (tests/test_policies_baselines.py
# checks that each module registers exactly its names)
BUILT_IN: dict[str, str] = {
    "fifo": "baselines", "sjf": "baselines", "srtf": "baselines", "las": "baselines",
    "gandiva": "gandiva",
    "gavel-las": "gavel", "gavel-las-agnostic": "gavel", "gavel-las-packed": "gavel",
    "gavel-ftf": "gavel", "gavel-makespan": "gavel", "gavel-throughput": "gavel",
    "gavel-cost": "gavel", "gavel-fifo": "gavel", "gavel-fifo-agnostic": "gavel",
    "gavel-hierarchical": "gavel",
    "hadar": "hadar", "hadare": "hadare",
    "pollux": "pollux", "sia": "sia",
    "rubick": "rubick",
    "sjf-bsbf": "sjf_bsbf", "sjf-ffs": "sjf_bsbf",
    "synergy": "synergy",
    "tiresias-las": "tiresias", "tiresias-gittins": "tiresias",
}


class Registry(MutableMapping):
    """Policies by name: the registered ones, a built-in one's module imported on first lookup
    (iterating imports every built-in module)."""

    def __init__(self) -> None:
        self._infos: dict[str, PolicyInfo] = {}

    def _import(self, names) -> None:
        for module in dict.fromkeys(BUILT_IN[n] for n in names if n in BUILT_IN):
            importlib.import_module(f"quanta.policies.{module}")

    def __getitem__(self, name: str) -> PolicyInfo:
        if name not in self._infos:
            self._import([name])
        return self._infos[name]

    def __contains__(self, name: object) -> bool:
        return name in self._infos or name in BUILT_IN

    def __iter__(self) -> Iterator[str]:
        self._import(BUILT_IN)
        return iter(list(self._infos))

    def __len__(self) -> int:
        self._import(BUILT_IN)
        return len(self._infos)

    def __setitem__(self, name: str, info: PolicyInfo) -> None:
        self._infos[name] = info

    def __delitem__(self, name: str) -> None:
        del self._infos[name]


POLICIES = Registry()


def register(name: str, description: str, **defaults: Any) -> Callable[[type[Policy]], type[Policy]]:
    """Register a policy class under `name`. Registering the same name again from the same module
    (a notebook cell run twice, `importlib.reload`) replaces the entry; from another module it is
    an error naming both."""
    def wrap(cls: type[Policy]) -> type[Policy]:
        old = POLICIES.get(name)     # a built-in name: its module first, so a clash is seen here
        if old is not None and old.cls.__module__ != cls.__module__:
            raise QuantaError(f"policy '{name}' registered twice: by {old.cls.__module__}."
                              f"{old.cls.__qualname__} and by {cls.__module__}.{cls.__qualname__}")
        POLICIES[name] = PolicyInfo(name, description, cls, defaults,
                                    old.origin if old is not None else _origin(cls))
        return cls
    return wrap


def _origin(cls: type) -> str:
    return "" if cls.__module__.startswith("quanta.policies.") else cls.__module__


_SCALARS = {"bool": bool, "int": int, "float": float, "str": str}


def parameters(cls: type) -> list[dataclasses.Field]:
    """A policy class's parameters: its dataclass fields set at construction, less its private
    ones (`_memo`: a cache); [] for a class that is no dataclass."""
    if not dataclasses.is_dataclass(cls):
        return []
    return [f for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]


def _from_python_only(f: dataclasses.Field) -> bool:
    """A parameter `name:key=value` cannot give: a function (hadar's `price`)."""
    return "Callable" in str(f.type)


def policy_parameters(name: str) -> list[tuple[str, str, str]]:
    """(key, kind, default as `key=value` writes it) of each parameter of policy `name` (a
    registered name or a plugin's `module:Class`); a function's kind is 'from Python only'."""
    info = policy_info(name)
    hints = field_types(info.cls)
    out = []
    for f in parameters(info.cls):
        value = info.defaults[f.name] if f.name in info.defaults else field_default(f)
        kind = hints.get(f.name, f.type)
        kind = "from Python only" if _from_python_only(f) else \
            getattr(kind, "__name__", None) if isinstance(kind, type) else str(kind)
        given = f.name in info.defaults or f.default is not dataclasses.MISSING or \
            f.default_factory is not dataclasses.MISSING
        out.append((f.name, str(kind).replace("typing.", ""),
                    spec_text(value) if given else "(none)"))
    return out


def field_default(f: dataclasses.Field) -> Any:
    """A parameter's default (None where it has none)."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def spec_text(value: Any) -> str:
    """A value as `key=value` gives it: true/false, a/b/c, a number short but exact (360, 2.5,
    1234567.8), text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "/".join(spec_text(v) for v in value)
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    if isinstance(value, enum.Enum):
        return value.name
    if value is None:
        return "none"             # (what an Optional parameter reads as None)
    return str(value) if not callable(value) else getattr(value, "__name__", "a function")


def field_types(cls: type) -> dict[str, Any]:
    """A policy class's annotations as types (`typing.get_type_hints`), or {} where they cannot
    be resolved (a name its module does not define): the fields' text is read then."""
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001  (any error of the class's own annotations)
        return {}


def _bad(spec: str, field_name: str, wants: str, value: str) -> QuantaError:
    return QuantaError(f"policy '{spec}': parameter '{field_name}' wants {wants}, got '{value}'",
                       field="--policy")


def _convert(value: str, typ: Any, field_name: str, spec: str) -> Any:
    """`value` as the field's type: bool, int, float, str; a tuple of numbers (a/b/c); X | None
    and Optional[X] ('none' is None); Literal[...] (one of its values); an Enum (a member's name
    or value). `typ` is a type, or the annotation's text where it could not be resolved."""
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if origin is typing.Union or origin is UnionType:        # X | None, Optional[X], X | Y
        others = [a for a in args if a is not type(None)]
        if len(others) < len(args) and value.strip().lower() in ("none", "null"):
            return None
        err: QuantaError | None = None
        for a in others:                               # the first member that reads it
            try:
                return _convert(value, a, field_name, spec)
            except QuantaError as e:
                err = err or e
        raise err or _bad(spec, field_name, "none", value)
    if origin is typing.Literal:
        for a in args:
            if str(a) == value or (isinstance(a, str) and a.lower() == value.lower()):
                return a
        raise _bad(spec, field_name, "one of " + ", ".join(str(a) for a in args), value)
    if isinstance(typ, type) and issubclass(typ, enum.Enum):
        for m in typ:
            if value in (m.name, str(m.value)):
                return m
        low = value.lower()
        for m in typ:
            if low in (m.name.lower(), str(m.value).lower()):
                return m
        raise _bad(spec, field_name, "one of " + ", ".join(m.name for m in typ), value)
    text = str(typ).removeprefix("typing.")
    if origin in (tuple, list) or typ in (tuple, list) or text.startswith(("tuple", "list")):
        # a/b/c: a tuple (of numbers unless it says str), a list (of text unless it says int
        # or float); a list was list("a/b") (its characters), a list[int] the text itself
        kind = list if origin is list or typ is list or text.startswith("list") else tuple
        each = args[0] if args else (float if kind is tuple else str)
        if each not in (int, float, str):
            raise QuantaError(f"policy '{spec}': parameter '{field_name}' ({text}) cannot be "
                              f"given as text", field="--policy")
        if not value.strip():
            return kind()
        try:
            items = [each(v.strip()) for v in value.split("/")]
        except ValueError:
            items = []
        if not items or any(v != v or v == "" for v in items):
            raise _bad(spec, field_name, ("numbers" if each is not str else "words") +
                       " separated by '/'", value)
        return kind(items)
    if isinstance(typ, str):                           # unresolved text: its first scalar
        typ = _SCALARS.get(typ.split("|")[0].strip(), str)
    t = typ if isinstance(typ, type) else str
    if t is bool:
        low = value.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise _bad(spec, field_name, "true/false", value)
    try:
        got = t(value)
    except (TypeError, ValueError):
        raise _bad(spec, field_name, t.__name__, value) from None
    if got != got:                                        # NaN: no parameter means it
        raise _bad(spec, field_name, "a number", value)
    return got


def param_items(params: str) -> list[str]:
    """The `key=value` items of a spec's parameters (`a=1, b=2`), blanks left out."""
    return [p.strip() for p in params.split(",") if p.strip()]


def split_spec(spec: str) -> tuple[str, str]:
    """(name, parameters) of `name[:k=v,...]` or of a plugin's `module:Class[:k=v,...]`."""
    spec = spec.strip()
    name, _, params = spec.partition(":")
    if name not in POLICIES:
        from quanta.policies.plugins import is_import_spec
        if is_import_spec(spec):
            attr, _, params = params.partition(":")
            name = f"{name}:{attr}"
    return name, params


def policy_info(name: str) -> PolicyInfo:
    """The registered policy `name`, a plugin `module:Class`, or an installed entry point."""
    info = POLICIES.get(name)
    if info is not None:
        return info
    from quanta.policies import plugins
    info = plugins.find(name)
    if info is None:
        known = ", ".join(sorted(set(POLICIES) | set(plugins.entry_point_names())))
        raise QuantaError(f"unknown policy '{name}' (known: {known}; or a plugin "
                          f"module.path:ClassName)", field="--policy")
    return info


def make_policy(spec: str) -> Policy:
    """Build a policy from `name`, `name:key=value,key=value` or `module.path:Class[:k=v,...]`."""
    name, params = split_spec(spec)
    info = policy_info(name)
    kwargs = dict(info.defaults)
    fields = {f.name: f for f in parameters(info.cls)}
    hints = field_types(info.cls) if fields else {}
    given: set[str] = set()
    canonical: list[str] = []        # the label's parameters: `key=value`, no spaces
    for item in param_items(params):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()      # (`backfill = false` as `backfill=false`)
        if key in given:
            raise QuantaError(f"policy '{spec}': parameter '{key}' is given twice",
                              field="--policy")
        given.add(key)
        if not eq and key in fields:
            raise QuantaError(f"policy '{spec}': parameter '{key}' wants a value ({key}=VALUE)",
                              field="--policy")
        if not eq or key not in fields:
            allowed = ", ".join(sorted(fields)) or "none"
            raise QuantaError(f"policy '{spec}': unknown parameter '{key}' (parameters: "
                              f"{allowed})", field="--policy")
        if _from_python_only(fields[key]):
            raise QuantaError(f"policy '{spec}': parameter '{key}' is a function: give it from "
                              f"Python (quanta.simulate(policies=[...]))", field="--policy")
        kwargs[key] = _convert(value, hints.get(key, fields[key].type), key, spec)
        canonical.append(f"{key}={value}")
    try:
        policy = info.cls(**kwargs)
    except TypeError as err:          # a plugin class whose constructor wants something else
        raise QuantaError(f"policy '{spec}': cannot build {info.cls.__qualname__} ({err})",
                          field="--policy") from None
    except ValueError as err:         # its own check of a value (hadar's horizon, ...)
        raise QuantaError(f"policy '{spec}': {err}", field="--policy") from None
    except QuantaError:
        raise
    except Exception as err:          # a plugin's constructor failing: its error, one line
        from quanta.policies.plugins import exception_line
        raise QuantaError(f"policy '{spec}': building it raised {exception_line(err)}",
                          field="--policy") from None
    policy.name = f"{name}:{','.join(canonical)}" if canonical else name   # type: ignore[misc]
    return policy
