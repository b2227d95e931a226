"""User-written YAML specs (cluster files, job specs): read and validate with one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from quanta.errors import QuantaError

M = TypeVar("M", bound=BaseModel)


def read_yaml(path: Path) -> object:
    """The YAML document of a file; an unreadable file or bad YAML is a QuantaError naming the
    file (and line)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise QuantaError(f"cannot read it ({err.strerror})", source=str(path)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None)
        raise QuantaError("not valid YAML" + (f" ({problem})" if problem else ""),
                          source=str(path), line=mark.line + 1 if mark else None) from None


def validated(model: type[M], data: object, source: str = "") -> M:
    """`data` validated by a pydantic model; the first error names its field."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        e = err.errors()[0]
        field = ".".join(str(p) for p in e["loc"]) or None
        raise QuantaError(e["msg"], source=source or None, field=field) from None
