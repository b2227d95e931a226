"""User-written YAML specs (cluster files, job specs): read and validate with one-line errors."""

from __future__ import annotations

import os
import re
import stat
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


MAX_YAML_BYTES = 1 << 24     # a YAML file of ours: a job spec, cluster, sweep, queues or users


def read_yaml(path: Path, max_bytes: int = MAX_YAML_BYTES) -> object:
    """The YAML document of a file (job specs, clusters, sweeps, users): an unreadable file,
    one that is no regular file (a pipe, /dev/zero: reading never ended) or is over `max_bytes`,
    text that is not UTF-8, bad YAML or a key given twice is a QuantaError naming the file (and
    line)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)     # (a FIFO: no wait for a writer)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):     # (a folder: IsADirectoryError above)
                raise QuantaError("cannot read it: not a regular file", source=str(path))
            data = f.read(max_bytes + 1)
    except OSError as err:
        raise QuantaError(f"cannot read it ({err.strerror})", source=str(path)) from None
    if len(data) > max_bytes:
        raise QuantaError(f"larger than {_size(max_bytes)}: not a file of this kind",
                          source=str(path))
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


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


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
        loc, msg = first_error(err.errors())
        if isinstance(err.errors()[0].get("input"), bool) and "valid string" in msg:
            msg += " (YAML reads yes/no, on/off, true/false as true or false: quote the text)"
        raise QuantaError(msg, source=source or None, field=".".join(loc) or None) from None


def error_message(e: dict) -> str:
    """A pydantic error's message as a user reads it: no model class names ("a valid
    dictionary or instance of _NodeGroup"), no "Value error, " before a validator's own words."""
    msg = re.sub(r" or instance of \w+", "", e["msg"])
    return msg.removeprefix("Value error, ")


def first_error(errors: list[dict]) -> tuple[list[str], str]:
    """(field path, message) of pydantic's first error. A field of several kinds (int | str)
    fails once per kind, each under the kind's tag (`priority.int`, `priority.str`): one message
    for the field then, its kinds' words joined ("a valid integer or a valid string")."""
    e = errors[0]
    loc = [str(p) for p in e["loc"]]
    same = [x for x in errors if len(x["loc"]) == len(loc) and
            [str(p) for p in x["loc"][:-1]] == loc[:-1]]
    if len(loc) > 1 and len(same) > 1 and len({str(x["loc"][-1]) for x in same}) == len(same):
        words = [error_message(x).removeprefix("Input should be ") for x in same]
        return loc[:-1], "Input should be " + " or ".join(dict.fromkeys(words))
    return loc, error_message(e)
