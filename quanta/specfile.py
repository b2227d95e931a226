"""User-written YAML specs (cluster files, job specs): read and validate with one-line errors."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from quanta.errors import QuantaError

if TYPE_CHECKING:
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")
# yaml and pydantic are imported when a file is read (a simulation on a preset cluster and a
# trace reads none: ~0.1 s of start-up saved)


@cache
def _unique_key_loader() -> type:
    """YAML's safe loader, but a key given twice in one mapping is an error (not the last wins)."""
    import yaml

    class _UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    dup = key in seen
                    seen.add(key)
                except TypeError:          # an unhashable key: yaml's own error follows
                    continue
                if dup:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key '{key}'", key_node.start_mark)
            return super().construct_mapping(node, deep)
    return _UniqueKeyLoader


def read_yaml(path: Path) -> object:
    """The YAML document of a file (job specs, clusters, sweeps, users): an unreadable file, text that is not UTF-8, bad YAML
    or a key given twice is a QuantaError naming the file (and line)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise QuantaError(f"cannot read it ({err.strerror})", source=str(path)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise QuantaError(f"not UTF-8 text (byte 0x{data[err.start]:02x})", source=str(path),
                          line=line) from None
    import yaml
    try:
        return yaml.load(text, Loader=_unique_key_loader())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None)
        raise QuantaError("not valid YAML" + (f" ({problem})" if problem else ""),
                          source=str(path), line=mark.line + 1 if mark else None) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as err:   # e.g. a bad date
        raise QuantaError(f"not valid YAML ({err})", source=str(path)) from None


def validated(model: type[M], data: object, source: str = "") -> M:
    """`data` validated by a pydantic model; the first error names its field."""
    from pydantic import ValidationError
    if data is None:
        raise QuantaError("the file is empty", source=source or None)
    if not isinstance(data, dict):
        raise QuantaError(f"want a mapping of fields (key: value), got {type(data).__name__}",
                          source=source or None)
    try:
        return model.model_validate(data)
    except ValidationError as err:
        e = err.errors()[0]
        field = ".".join(str(p) for p in e["loc"]) or None
        raise QuantaError(error_message(e), source=source or None, field=field) from None


def error_message(e: dict) -> str:
    """A pydantic error's message as a user reads it: no model class names ("a valid
    dictionary or instance of _NodeGroup"), no "Value error, " before a validator's own words."""
    msg = re.sub(r" or instance of \w+", "", e["msg"])
    return msg.removeprefix("Value error, ")
