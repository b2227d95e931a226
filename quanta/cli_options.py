"""Command-line values converted without pydantic.

typer 0.29 converts every option's value through a pydantic TypeAdapter: a `quanta simulate`
process imports pydantic and builds ~20 adapters for its options before it reads a trace
(0.10-0.14 s of a 0.6 s Gavel replay). Quanta's options are plain text, integers, numbers with
bounds, paths and lists of those; `install` gives such parameters a converter that does here
what the adapter would (the same values, the same one-line errors: tests/test_cli_options.py
compares the two on many inputs). Any other parameter, and any other typer, keeps typer's own.
One difference, deliberate: an empty path is an error here (typer reads it as the working folder:
`serve --state ''` took the folder it ran in).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

try:                                  # typer 0.29's coercion contract (pyproject pins 0.29.x)
    from typer._click.exceptions import BadParameter
    from typer._coercion import PassThroughRuntimeParam, RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_path
except ImportError:                   # another typer: its own conversion everywhere
    RuntimeParam = None

# what pydantic (lax mode) takes as an integer written as text: ASCII digits, Python-style
# underscores between them, an optional sign, and zeros only after a decimal point ("5.00").
# (Not its quirk after leading zeros: it reads "0-5" as -5 and "0__3" as 3; here both are
# errors, as they read.)
_INT = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?")
_PLAIN = (str, int, float, Path)


def _bound(v: float) -> str:
    """A bound as pydantic's message writes it: 0.0 as 0, 0.5 as 0.5."""
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _number(kind: type, value: Any) -> int | float:
    """`value` as an int or float, or ValueError with pydantic's message."""
    if kind is int:
        if isinstance(value, int):                       # (bool included: True is 1)
            return int(value)
        if isinstance(value, float):
            if value.is_integer():
                return int(value)
            raise ValueError("Input should be a valid integer, got a number with a fractional "
                             "part")
        s = str(value).strip()
        if not _INT.fullmatch(s):
            raise ValueError("Input should be a valid integer, unable to parse string as an "
                             "integer")
        return int(s.split(".")[0])
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value)
    s = text.strip()
    try:
        # pydantic takes single underscores anywhere inside ("1_.5", "1e_5"), but none with
        # spaces around the text, at its ends or doubled; then Python's float() grammar
        if not s.isascii() or "_" in s and (s != text or "__" in s or s[0] == "_"
                                            or s[-1] == "_"):
            raise ValueError
        return float(s.replace("_", ""))
    except ValueError:
        raise ValueError("Input should be a valid number, unable to parse string as a "
                         "number") from None


if RuntimeParam is not None:
    @dataclass(frozen=True)
    class _Plain(RuntimeParam):
        """A str, int, float or Path parameter, or a list of one of those."""

        kind: type
        many: bool

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if self.many:
                items = value if isinstance(value, (list, tuple)) else [value]
                return [self._one(v, param, ctx) for v in items]
            return self._one(value, param, ctx)

        def _one(self, value: Any, param: Any, ctx: Any) -> Any:
            kind, info = self.kind, self.parameter_info
            if kind is str:
                return value if isinstance(value, str) else str(value)
            if not isinstance(value, (str, Path) if kind is Path else (str, int, float)):
                # not from a command line (a program's default of another type): typer's own
                return build_runtime_param(param.type_descriptor)._coerce_value(value, param,
                                                                                ctx)
            if kind is Path:
                if isinstance(value, str) and not value.strip():   # (Path("") is the working
                    raise BadParameter("is empty: name a file or folder", ctx=ctx,   # folder)
                                       param=param)
                return coerce_cli_path(value if isinstance(value, Path) else Path(value), info,
                                       path_type=Path, param=param, ctx=ctx)
            try:
                v = _number(kind, value)
            except ValueError as e:
                raise BadParameter(str(e), ctx=ctx, param=param) from None
            # (the upper bound first, as pydantic: NaN fails both and is told the upper one)
            if info.max is not None and not v <= info.max:
                raise BadParameter(f"Input should be less than or equal to {_bound(info.max)}",
                                   ctx=ctx, param=param)
            if info.min is not None and not v >= info.min:
                raise BadParameter(f"Input should be greater than or equal to "
                                   f"{_bound(info.min)}", ctx=ctx, param=param)
            return v


def converter(param: Any) -> Any:
    """The pydantic-free converter for a typer parameter, or None where typer's own stays (a
    type other than str/int/float/Path or a list of one, a custom parser or click type,
    clamping, a dash for stdin). A Path's checks (exists=, readable and the rest) are typer's
    own, handed the path."""
    if RuntimeParam is None:
        return None
    d = getattr(param, "type_descriptor", None)
    if d is None or d.file_annotation is not None:
        return None
    info, ann = d.parameter_info, d.annotation
    many = get_origin(ann) is list
    kind = get_args(ann)[0] if many else ann
    if kind not in _PLAIN or info.parser is not None \
            or getattr(info, "click_type", None) is not None or info.clamp \
            or getattr(info, "path_type", None) not in (None, Path):
        return None
    if kind is Path and info.allow_dash:      # ("-" is compared as text there)
        return None
    return _Plain(parameter_info=info, annotation=ann, kind=kind, many=many)


def bool_flag(opt: Any) -> Any:
    """typer 0.29 coerces even an absent --help flag through a pydantic TypeAdapter, importing
    pydantic for `quanta --help` or `--version`; the flag is a plain bool, so it gets typer's
    own pass-through coercion instead (the same values: None or True)."""
    if RuntimeParam is not None and opt is not None \
            and getattr(opt, "_runtime_param", False) is None:
        opt._runtime_param = PassThroughRuntimeParam(
            parameter_info=opt.type_descriptor.parameter_info, annotation=bool)
    return opt


def install(command: Any, ctx: Any) -> Any:
    """Give each of `command`'s parameters that `converter` covers its pydantic-free converter,
    and its --help flag `bool_flag`'s (once: typer keeps them on the parameter; `ctx`: the
    context the command runs under, whose help option names it inherits)."""
    if command is None:
        return command
    bool_flag(command.get_help_option(ctx))
    for p in getattr(command, "params", ()):
        if getattr(p, "_runtime_param", False) is None:
            conv = converter(p)
            if conv is not None:
                p._runtime_param = conv
    return command
