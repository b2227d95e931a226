"""User-written YAML specs (cluster files, job specs): read and validate with one-line errors."""

from __future__ import annotations

import os
import re
import stat
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, TypeVar

from quanta.errors import QuantaError

if TYPE_CHECKING:
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")
# yaml and pydantic are imported when a file is read (a simulation on a preset cluster and a
# trace reads none: ~0.1 s of start-up saved)


@cache
def yaml_loader() -> type:
    """YAML's safe loader, but a key given twice in one mapping is an error (not the last wins),
    and numbers are read as YAML 1.2 reads them: `1:30` is text, not YAML 1.1's base-60 number
    90, and `012` is twelve, not YAML 1.1's octal ten (`0o12` is octal; `0x`, `0b` and `_` between
    digits read as before)."""
    import yaml

    class _Loader(yaml.SafeLoader):
        def construct_yaml_int(self, node):
            text = self.construct_scalar(node).replace("_", "")
            sign, digits = (text[0], text[1:]) if text[:1] in "+-" else ("", text)
            base = {"0b": 2, "0o": 8, "0x": 16}.get(digits[:2].lower(), 10)
            return int(sign + (digits[2:] if base != 10 else digits), base)

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
    # YAML 1.1's int and float resolvers, less their base-60 forms
    numbers = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
    _Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in pairs if tag not in numbers]
        for first, pairs in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    for tag, rx, first in (
            ("tag:yaml.org,2002:int", r"^(?:[-+]?0b[0-1_]+|[-+]?0o[0-7_]+|[-+]?[0-9][0-9_]*"
                                      r"|[-+]?0x[0-9a-fA-F_]+)$", "-+0123456789"),
            ("tag:yaml.org,2002:float", r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?"
                                        r"|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?\.(?:inf|Inf|INF)"
                                        r"|\.(?:nan|NaN|NAN))$", "-+0123456789.")):
        _Loader.add_implicit_resolver(tag, re.compile(rx), list(first))
    _Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
    return _Loader


def node_at(root: Any, loc: Sequence[Any]) -> Any:
    """The deepest node of a YAML node tree (`parse_yaml(..., compose=True)`) along `loc`
    (mapping keys, sequence indexes): the value `loc` names, else the mapping or sequence
    where the path stops (for a key that is not there)."""
    import yaml
    node = root
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if str(k.value) == str(part)), None)
            if nxt is None:
                return node
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and \
                0 <= part < len(node.value):
            node = node.value[part]
        else:
            break
    return node


def key_node(root: Any, loc: Sequence[Any]) -> Any:
    """The key node of the mapping entry `loc` names (for errors about a key)."""
    import yaml
    parent = node_at(root, loc[:-1])
    if isinstance(parent, yaml.MappingNode):
        for k, _v in parent.value:
            if str(k.value) == str(loc[-1]):
                return k
    return parent


def line_of(text: str, source: str, field: str) -> int | None:
    """The line (1-based) in YAML `text` of a dotted field path (`nodes.0.count`), or None."""
    loc = [int(p) if p.isdigit() else p for p in field.split(".")]
    node = node_at(parse_yaml(text, source, compose=True), loc)
    return node.start_mark.line + 1 if node is not None else None


MAX_YAML_BYTES = 1 << 24     # a YAML file of ours: a job spec, cluster, sweep, queues or users


def read_text(path: Path, max_bytes: int = MAX_YAML_BYTES) -> str:
    """A file of ours as text: an unreadable file, one that is no regular file (a pipe,
    /dev/zero: reading never ended) or is over `max_bytes`, or text that is not UTF-8 is a
    QuantaError naming the file (and line)."""
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
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise QuantaError(f"not UTF-8 text (byte 0x{data[err.start]:02x})", source=str(path),
                          line=line) from None


def parse_yaml(text: str, source: str, compose: bool = False) -> object:
    """The YAML document of `text` (with `compose`, its node tree: where each value is) by
    `yaml_loader`; bad YAML or a key given twice is a QuantaError naming `source` and line."""
    import yaml
    try:
        return (yaml.compose if compose else yaml.load)(text, Loader=yaml_loader())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None)
        raise QuantaError("not valid YAML" + (f" ({problem})" if problem else ""),
                          source=source, line=mark.line + 1 if mark else None) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as err:   # e.g. a bad date
        raise QuantaError(f"not valid YAML ({err})", source=source) from None


def read_yaml(path: Path, max_bytes: int = MAX_YAML_BYTES) -> object:
    """The YAML document of a file of ours (job specs, clusters, sweeps, users): read_text,
    then parse_yaml."""
    return parse_yaml(read_text(path, max_bytes), str(path))


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
    for the field then, its kinds' words joined ("a valid integer or a valid string"). A field
    missing beside a key the model does not know is most likely that key misspelt: the unknown
    key is named, with the missing field it may mean."""
    e = errors[0]
    if e["type"] == "missing":
        parent = [str(p) for p in e["loc"][:-1]]
        extra = [x for x in errors if x["type"] == "extra_forbidden" and str(x["loc"][-1]).strip()
                 and [str(p) for p in x["loc"][:-1]] == parent]      # (a blank key names nothing)
        if extra:
            import difflib
            missing = [str(x["loc"][-1]) for x in errors if x["type"] == "missing"
                       and [str(p) for p in x["loc"][:-1]] == parent]
            key = str(extra[0]["loc"][-1])
            near = difflib.get_close_matches(key, missing, n=1, cutoff=0.6)
            return parent + [key], f"unknown key{f' (a misspelt {near[0]!r}?)' if near else ''}; " \
                f"missing: {', '.join(missing)}"
    loc = [str(p) for p in e["loc"]]
    same = [x for x in errors if len(x["loc"]) == len(loc) and
            [str(p) for p in x["loc"][:-1]] == loc[:-1]]
    if len(loc) > 1 and len(same) > 1 and len({str(x["loc"][-1]) for x in same}) == len(same):
        words = [error_message(x).removeprefix("Input should be ") for x in same]
        return loc[:-1], "Input should be " + " or ".join(dict.fromkeys(words))
    return loc, error_message(e)
