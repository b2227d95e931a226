"""config.yaml's text without importing PyYAML (~13 ms of a short `quanta simulate`).

`dump(data)` writes what `yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)`
writes, byte for byte, for the plain data a run's config is made of: nested dicts with
identifier keys, lists of scalars or of dicts, None, bools, ints, floats (but those Python
writes with an exponent), and strings that YAML reads back as strings when written bare (or that
are whole numbers, written quoted). For anything else it returns None, and the caller asks PyYAML
(tests/test_plainyaml.py holds the two to the same text).
"""

from __future__ import annotations

import math
import re

WIDTH = 100
_KEY = re.compile(r"[a-z_][a-z0-9_]*")
# characters a bare string may hold (a space only where the string is folded: top level)
_BARE = re.compile(r"[A-Za-z0-9/_][A-Za-z0-9_./:,=+@-]*")
_BARE_SPACED = re.compile(r"[A-Za-z0-9/_][A-Za-z0-9_./:,=+@ -]*")
# words YAML 1.1 reads as booleans or null in some capitalisation: left to PyYAML
_WORDS = {"yes", "no", "true", "false", "on", "off", "null", "y", "n"}
_FLOAT = re.compile(r"-?[0-9]+\.[0-9]+")
_OCTAL = set("01234567")
_CLOCK = set("0123456789:")
_SEXAGESIMAL = re.compile(r"[1-9][0-9]*(:[0-5]?[0-9])+")
# what YAML 1.1's numbers and dates are written with
_NUMBERISH = set("0123456789_.:+-eEtTzZ ")
_BASE_INT = re.compile(r"0b[01_]+|0x[0-9a-fA-F_]+")   # (PyYAML: lower-case b / x only)


class _Unsure(Exception):
    """Outside what `dump` writes exactly."""


def dump(data: dict) -> str | None:
    """`yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)`, or None where
    that is not sure to be the same text."""
    if type(data) is not dict or not data:
        return None
    lines: list[str] = []
    try:
        _mapping(data, 0, lines, "")
    except _Unsure:
        return None
    return "\n".join(lines) + "\n"


def _mapping(d: dict, indent: int, lines: list[str], first: str) -> None:
    """The keys of `d` at `indent`; the first line starts with `first` ("- " in a list)."""
    pad = " " * indent
    for i, (k, v) in enumerate(d.items()):
        if type(k) is not str or not _KEY.fullmatch(k) or k in _WORDS:
            raise _Unsure
        head = (first if i == 0 else pad) + k + ":"
        if type(v) is dict:
            if not v:
                lines.append(head + " {}")
            else:
                lines.append(head)
                _mapping(v, indent + 2, lines, " " * (indent + 2))
        elif type(v) is list:
            if not v:
                lines.append(head + " []")
                continue
            lines.append(head)
            for item in v:                       # a list under a key is not indented
                if type(item) is dict and item:
                    _mapping(item, indent + 2, lines, pad + "- ")
                else:
                    lines.append(pad + "- " + _scalar(item, False))
        else:
            text = _scalar(v, indent == 0)
            if " " in text:
                lines.append(_fold(head, text))
            else:
                lines.append(head + " " + text)


def _scalar(v, spaced: bool) -> str:
    kind = type(v)                     # (subclasses, e.g. enums, are left to PyYAML)
    if v is None:
        return "null"
    if kind is bool:
        return "true" if v else "false"
    if kind is int:
        return str(v)
    if kind is float:
        if not math.isfinite(v):
            return ".nan" if v != v else ".inf" if v > 0 else "-.inf"
        text = repr(v)
        if not _FLOAT.fullmatch(text):
            raise _Unsure
        return text
    if kind is str:
        return _string(v, spaced)
    raise _Unsure


def _string(s: str, spaced: bool) -> str:
    if not s:
        return "''"
    if not (_BARE_SPACED if spaced else _BARE).fullmatch(s) or s.endswith((" ", ":")) \
            or "  " in s or ": " in s or s.lower() in _WORDS:
        raise _Unsure
    if not s[0].isdigit():
        return s
    # a string starting with a digit: bare unless YAML 1.1 reads it as a number or a date
    if s.isdigit():
        if s == "0" or s[0] != "0" or set(s) <= _OCTAL:
            return f"'{s}'"                      # a whole number: quoted
        return s        # a 0, then an 8 or 9: no YAML 1.1 integer (PyYAML writes it bare)
    if set(s) <= _CLOCK:                          # a whole number in base 60 ("2:10"), or not
        return f"'{s}'" if _SEXAGESIMAL.fullmatch(s) else s
    if _BASE_INT.fullmatch(s):                    # YAML 1.1's binary and hex integers
        return f"'{s}'"
    # no number or date holds a letter but e, t or z, or two points
    if s.isalnum() or not set(s) <= _NUMBERISH or s.count(".") >= 2:
        return s
    raise _Unsure


def _fold(head: str, text: str) -> str:
    """`head` and a bare string with single spaces, broken at spaces past the width as PyYAML
    breaks them: a line ends at the first space after its text passes WIDTH columns; the next
    goes on two columns in."""
    out = [head, " "]
    col = len(head) + 1
    for i, word in enumerate(text.split(" ")):
        if i:
            if col > WIDTH:
                out.append("\n  ")
                col = 2
            else:
                out.append(" ")
                col += 1
        out.append(word)
        col += len(word)
    return "".join(out)
