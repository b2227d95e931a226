"""A user's own policies, without editing Quanta.

- `module.path:ClassName[:k=v,...]`: the class is imported from a module on the Python path (or in
  the current folder), e.g. `--policy my_pkg.my_mod:MyPolicy:threshold=2`.
- Installed packages name theirs in the `quanta.policies` entry-point group, e.g. in their
  pyproject.toml: `[project.entry-points."quanta.policies"] my-policy = "my_pkg.my_mod:MyPolicy"`;
  then `--policy my-policy[:k=v]` works like a built-in name.

A plugin class subclasses `quanta.policies.Policy`; a dataclass gets its fields as parameters.
Its description (`quanta policies`) is the first line of its docstring.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import traceback
from functools import lru_cache

from quanta.errors import QuantaError
from quanta.policies.base import Policy
from quanta.policies.registry import PolicyInfo

GROUP = "quanta.policies"
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_IMPORT_SPEC = re.compile(rf"^\s*({_DOTTED}):({_DOTTED})\s*(?::(.*))?$", re.S)


def is_import_spec(spec: str) -> bool:
    """`module.path:Attr[:params]` (an attribute, not `key=value` parameters, after the colon)."""
    return _IMPORT_SPEC.match(spec) is not None


def find(name: str) -> PolicyInfo | None:
    """The plugin policy called `name` (`module:Attr` or an entry point's name), else None."""
    if ":" in name:
        module, _, attr = name.partition(":")
        return _info(name, load_attr(module, attr, name), module)
    ep = _entry_points().get(name)
    if ep is None:
        return None
    try:
        obj = ep.load()
    except Exception as err:  # noqa: BLE001  (a broken plugin: one line, not a traceback)
        raise QuantaError(f"policy '{name}': entry point '{ep.value}' ({GROUP}) failed to load: "
                          f"{exception_line(err)}", field="--policy") from None
    return _info(name, obj, ep.value.partition(":")[0])


def entry_point_names() -> list[str]:
    return sorted(_entry_points())


def entry_point_infos() -> list[PolicyInfo]:
    """Every installed plugin that loads (for `quanta policies`); a broken one is listed as such."""
    out = []
    for name in entry_point_names():
        try:
            info = find(name)
        except QuantaError as err:
            out.append(PolicyInfo(name, f"(does not load: {err.bare})", Policy, {}, GROUP))
            continue
        if info is not None:
            out.append(info)
    return out


@lru_cache(maxsize=1)
def _entry_points() -> dict:
    from importlib.metadata import entry_points
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def load_attr(module: str, attr: str, spec: str):
    """`module.attr` imported; a module that is not on the path is looked for in the current
    folder too (as `python -m` would)."""
    try:
        mod = _import(module)
    except ModuleNotFoundError as err:
        if err.name is None or not module.startswith(err.name):   # a missing import inside it
            raise QuantaError(f"policy '{spec}': importing '{module}' failed: "
                              f"{exception_line(err)}",
                              field="--policy") from None
        raise QuantaError(f"policy '{spec}': no module '{module}' on the Python path or in the "
                          f"current folder", field="--policy") from None
    except Exception as err:  # noqa: BLE001
        raise QuantaError(f"policy '{spec}': importing '{module}' failed: "
                          f"{exception_line(err)}",
                          field="--policy") from None
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise QuantaError(f"policy '{spec}': module '{module}' has no '{attr}'",
                              field="--policy")
        obj = getattr(obj, part)
    return obj


def _import(module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        cwd = os.getcwd()
        if err.name != module.split(".")[0] or cwd in sys.path or "" in sys.path:
            raise
        sys.path.append(cwd)
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError:
            sys.path.remove(cwd)
            raise


def _info(name: str, obj, module: str) -> PolicyInfo:
    if not (isinstance(obj, type) and issubclass(obj, Policy)):
        raise QuantaError(f"policy '{name}': {obj!r} is not a subclass of quanta.policies.Policy",
                          field="--policy")
    doc = (obj.__doc__ or "").strip().splitlines()
    desc = doc[0] if doc and not doc[0].startswith(obj.__name__ + "(") else "(plugin)"
    return PolicyInfo(name, desc, obj, {}, module)


def exception_line(err: BaseException) -> str:
    """`Type: message (file:line)` of an exception raised in a user's module."""
    where = ""
    tb = traceback.extract_tb(err.__traceback__)
    if isinstance(err, SyntaxError) and err.filename:
        where = f" ({err.filename}:{err.lineno})"
    elif tb:
        where = f" ({tb[-1].filename}:{tb[-1].lineno})"
    msg = " ".join(str(err).split())
    return f"{type(err).__name__}: {msg}{where}"
