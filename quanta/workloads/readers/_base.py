"""Shared plumbing for the trace readers: opening files, naming columns, parsing numbers, finishing.

Every problem with a user's file becomes a QuantaError that names the file, the 1-based line (the
header is line 1) and the column at fault. Readers collect one keyword dict per kept job and hand
the list to `build_trace`, which applies `max_jobs` (the earliest jobs by submit time), re-bases
times so the earliest kept job is at 0, and builds the JobSpecs.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from quanta.errors import QuantaError
from quanta.model.job import JobSpec, Trace

_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True)
class Sample:
    """The start of a file, for format detection."""

    path: Path
    first: list[str]            # first non-blank row, split on commas
    header: frozenset[str]      # the same fields, stripped and lower-cased
    tabs: int                   # number of tab-separated fields in the first row (1 = no tab)
    suffix: str                 # lower-case file extension, with the dot
    line: str = ""              # the first non-blank line as it is (no line end)


# the largest count a trace may give (GPUs, batch sizes): well inside int64; and the largest
# number (a time, a duration, an amount): 1e15 s is 30 million years
MAX_WHOLE = 10 ** 15
MAX_NUMBER = 1e15


def sample_file(path: Path) -> Sample:
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:
        line = ""
        for line in f:
            if line.strip():
                break
    line = line.rstrip("\r\n")
    try:
        first = next(csv.reader([line]), []) if line.strip() else []
    except csv.Error:                # (Python 3.10's csv refuses a NUL byte; 3.11 reads it)
        first = line.split(",")
    return Sample(path, first, frozenset(norm(c) for c in first), len(line.split("\t")),
                  path.suffix.lower(), line)


def check_file(path: str | Path) -> Path:
    """The path as a Path; a missing file, a folder or an empty file is a user error."""
    p = Path(path)
    if not p.exists():
        raise QuantaError("no such trace file", source=str(p))
    if not p.is_file():
        raise QuantaError("not a file", source=str(p))
    if p.stat().st_size == 0:
        raise QuantaError("the file is empty", source=str(p))
    return p


def csv_rows(path: Path, delimiter: str = ",", *, quoting: int = csv.QUOTE_MINIMAL
             ) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of every non-blank row (the line it starts on: a quoted field may
    run over lines); QuantaError when there is no row at all, or where a quote is never closed
    (read leniently, that field took every later line and their jobs were lost without a word)
    or text follows a closing quote."""
    seen = False
    ended = 0                           # the line the last row ended on
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f, delimiter=delimiter, quoting=quoting, strict=True)
            for row in reader:
                first, ended = ended + 1, reader.line_num
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                seen = True
                yield first, row
    except UnicodeDecodeError as e:
        raise QuantaError(f"not a text file ({e.reason})", source=str(path),
                          line=_undecodable_line(path)) from None
    except csv.Error as e:
        why = "a quoted field is never closed (its quote opens the row on this line)" \
            if str(e) == "unexpected end of data" else str(e)
        raise QuantaError(f"malformed CSV: {why}", source=str(path), line=ended + 1) from None
    if not seen:
        raise QuantaError("the file is empty", source=str(path))


def _undecodable_line(path: Path) -> int | None:
    """The first line of the file that is not UTF-8 (the decoder reads ahead of the rows)."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return n
    return None


def start(path: str | Path, fmt: str, required: Sequence[str]
          ) -> tuple[Path, Parser, Iterator[tuple[int, list[str]]]]:
    """Open a CSV with a header row: (path, parser with the header indexed, data-row iterator)."""
    p_path = check_file(path)
    parser = Parser(p_path, fmt)
    rows = csv_rows(p_path)
    line, fields = next(rows)
    parser.line = line
    parser.header(fields, required, line)
    return p_path, parser, rows


def parse_rows(path: str | Path, fmt: str, required: Sequence[str],
               parse: Callable[[Parser, list[str], int], dict[str, Any]]
               ) -> tuple[Path, list[dict[str, Any]]]:
    """Read a CSV with a header: `parse(parser, row, index)` turns each data row into JobSpec
    fields (the parser knows the line, for errors); the line is recorded as source_line."""
    p_path, p, it = start(path, fmt, required)
    rows: list[dict[str, Any]] = []
    for line, row in it:
        p.line = line
        p.check_width(row)
        rec = parse(p, row, len(rows))
        rec["source_line"] = line
        rows.append(rec)
    return p_path, rows


def count_note(label: str, values: Sequence[str]) -> str:
    """'label: A 3, B 1' for the distinct values, most common first."""
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    parts = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return f"{label}: " + ", ".join(f"{k or '(empty)'} {n}" for k, n in parts)


# QoS classes that we treat as guaranteed (SLA) jobs: openb's LS (latency-sensitive) and the
# Kubernetes `Guaranteed` class; BE (best-effort) and Burstable are best-effort.
GUARANTEED_QOS = frozenset({"ls", "guaranteed"})


def norm(name: str) -> str:
    return name.strip().lower()


class Parser:
    """Parses the fields of one file, remembering the current line for error messages."""

    def __init__(self, path: Path, fmt: str):
        self.path = str(path)
        self.fmt = fmt
        self.line = 0
        self.index: dict[str, int] = {}
        self.width = 0
        self.header_width = 0     # fields of the header row (0: none; more in a row is an error)
        self.headerless = False   # columns named by the format (`columns`), not by a header row
        self.time_forms: dict[str, tuple[str, int]] = {}   # column (or group) -> first (form, line)

    def error(self, message: str, field: str | None = None, line: int | None = None) -> QuantaError:
        return QuantaError(message, source=self.path, line=self.line if line is None else line,
                           field=field)

    # -- columns -----------------------------------------------------------------------------
    def header(self, fields: Sequence[str], required: Sequence[str], line: int = 1) -> None:
        """Index the header row by lower-case column name; missing required columns are an error."""
        self.index = {}
        for i, name in enumerate(fields):
            first = self.index.setdefault(norm(name), i)
            if first != i and norm(name):
                raise self.error(f"column '{norm(name)}' appears twice (columns {first + 1} and "
                                 f"{i + 1})", field=norm(name), line=line)
        self.header_width = len(fields)
        missing = [c for c in required if c not in self.index]
        if missing:
            found = ", ".join(norm(f) for f in fields)
            raise self.error(f"{self.fmt} trace is missing column(s) {', '.join(missing)} "
                             f"(found: {found})", field=missing[0], line=line)
        self.width = 1 + max(self.index[c] for c in required) if required else 0

    def columns(self, names: Sequence[str]) -> None:
        """Name the columns of a headerless file, in order (a row with more is an error)."""
        self.index = {n: i for i, n in enumerate(names)}
        self.width = self.header_width = len(names)
        self.headerless = True

    def has(self, name: str) -> bool:
        return name in self.index

    def check_width(self, row: list[str]) -> None:
        if self.header_width and len(row) > self.header_width and any(row[self.header_width:]):
            of = f"the {self.fmt} format's columns" if self.headerless else "the header"
            raise self.error(f"row has {len(row)} fields, {of} {self.header_width}")
        if len(row) < self.width:
            missing = next(n for n, i in sorted(self.index.items(), key=lambda kv: kv[1])
                           if i >= len(row))
            raise self.error(f"row has {len(row)} fields, expected {self.width}", field=missing)

    def get(self, row: list[str], name: str) -> str:
        i = self.index[name]
        if i >= len(row):
            raise self.error(f"row has {len(row)} fields, column '{name}' is missing", field=name)
        return row[i].strip()

    def opt(self, row: list[str], name: str) -> str:
        """The field, or '' when the column is absent or the row is short."""
        i = self.index.get(name)
        return row[i].strip() if i is not None and i < len(row) else ""

    # -- values ------------------------------------------------------------------------------
    def number(self, text: str, field: str, *, minimum: float | None = 0.0) -> float:
        try:
            v = float(text)
        except ValueError:
            what = "empty" if not text else f"'{_short(text)}'"
            raise self.error(f"{what} is not a number", field=field) from None
        if not math.isfinite(v) and ("inf" in text.lower() or "nan" in text.lower()):
            raise self.error(f"'{_short(text)}' is not a finite number", field=field)
        if minimum is not None and v < minimum:
            raise self.error(f"{_short(text)} is below the minimum {minimum:g}", field=field)
        if not abs(v) <= MAX_NUMBER:        # (digits past a float's range: inf, not "infinite")
            raise self.error(f"{_short(text)} is above the maximum {MAX_NUMBER:.0e}", field=field)
        return v

    def whole(self, text: str, field: str, *, minimum: int | None = 0) -> int:
        try:
            v = int(text)
        except ValueError:
            f = self.number(text, field, minimum=None)
            if f != int(f):
                raise self.error(f"'{_short(text)}' is not a whole number", field=field) from None
            v = int(f)
        if minimum is not None and v < minimum:
            raise self.error(f"{_short(text)} is below the minimum {minimum}", field=field)
        if abs(v) > MAX_WHOLE:
            raise self.error(f"{_short(text)} is above the maximum {MAX_WHOLE:.0e}", field=field)
        return v

    def date_time(self, text: str, field: str) -> float:
        """Like `time`, trying the date-time form first (the fast path for date-time columns)."""
        try:
            v, form = parse_iso_form(text)
        except ValueError:
            return self.time(text, field)
        self._same_form(field, form, text)
        return v

    def time(self, text: str, field: str, group: str | None = None) -> float:
        """Seconds: a number (epoch or relative seconds) or an ISO date-time string; a column
        keeps the form of its first value (seconds, a date-time, one with a time zone), and so do
        columns of one `group` (times subtracted from each other, e.g. 'start_time/end_time'):
        mixed, the times would be out by decades or hours, without a word."""
        try:
            v = float(text)
        except ValueError:
            v = None
        if v is not None:
            if not math.isfinite(v):
                raise self.error(f"'{text}' is not a finite time", field=field)
            self._same_form(field, SECONDS, text, group)
            return v
        try:
            v, form = parse_iso_form(text)
        except ValueError:
            what = "empty" if not text else f"'{text}'"
            raise self.error(f"{what} is neither seconds nor a date-time", field=field) from None
        self._same_form(field, form, text, group)
        return v

    def _same_form(self, field: str, form: str, text: str, group: str | None = None) -> None:
        first = self.time_forms.get(group or field)
        if first is None:
            self.time_forms[group or field] = (form, self.line)
        elif first[0] != form:
            where = f"the first {group}" if group else "the column's first value"
            raise self.error(f"'{text}' is {form}, but {where} (line {first[1]}) is {first[0]}: "
                             f"give every time {'of a column ' if not group else ''}one way",
                             field=field)


SECONDS, DATE, ZONED = "seconds", "a date-time", "a date-time with a time zone"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parse_iso_form(text: str) -> tuple[float, str]:
    """(seconds since 1970, DATE or ZONED): a naive date-time without time zone or DST
    (differences are wall-clock), an aware one as its timestamp; ValueError if `text` is no ISO
    date-time or is a plain number (the one that is also an ISO date, the basic form 20000101,
    is seconds)."""
    dt = datetime.fromisoformat(text)
    if len(text) == 8 and text.isdigit():
        raise ValueError(f"{text!r} is a number")
    if dt.tzinfo is not None:
        return dt.timestamp(), ZONED
    return (dt - _EPOCH).total_seconds(), DATE


def build_trace(path: Path, fmt: str, rows: list[dict[str, Any]], notes: list[str], *,
                max_jobs: int | None = None, name: str | None = None) -> Trace:
    """Sort by submit time, keep the first `max_jobs`, re-base to 0, make the JobSpecs."""
    if max_jobs is not None and (isinstance(max_jobs, bool) or not isinstance(max_jobs, int)
                                 or max_jobs < 1):
        raise QuantaError(f"max_jobs must be a positive whole number, got {max_jobs!r}",
                          source=str(path))
    if not rows:
        why = f" ({'; '.join(notes)})" if notes else ""
        raise QuantaError(f"no jobs in this {fmt} trace{why}", source=str(path))
    for r in rows:                   # (a NUL or line break in an id corrupts every file naming it)
        jid = r["job_id"]
        if isinstance(jid, str) and _CONTROL.search(jid):
            from quanta.workloads.formats import column_of
            raise QuantaError(f"job id {jid!r} holds a control character", source=str(path),
                              line=r.get("source_line"), field=column_of(fmt, "job_id"))
    _dedupe_ids(rows, notes)
    total = len(rows)
    if max_jobs is not None and max_jobs < total:
        rows.sort(key=lambda r: r["submit_time"])          # (ties in the file's order)
        rows = rows[:max_jobs]
        notes.append(f"kept the first {max_jobs} of {total} jobs by submit time (max_jobs)")
    t0 = min(r["submit_time"] for r in rows)
    for r in rows:
        r["submit_time"] -= t0
        if r.get("deadline"):
            r["deadline"] -= t0
    jobs = [JobSpec(**r) for r in rows]
    return Trace(jobs=jobs, name=name or path.stem, source=str(path), format=fmt, notes=notes,
                 origin=t0)


def _dedupe_ids(rows: list[dict[str, Any]], notes: list[str]) -> None:
    taken = {r["job_id"] for r in rows}
    seen: dict[str, int] = {}
    renamed = 0
    for r in rows:
        jid = r["job_id"]
        n = seen.get(jid, 0)
        if n:                      # the next suffix that no job has (the trace may hold 'a#2')
            n += 1
            while f"{jid}#{n}" in taken:
                n += 1
            r["job_id"] = f"{jid}#{n}"
            taken.add(r["job_id"])
            renamed += 1
        seen[jid] = max(n, 1)
    if renamed:
        notes.append(f"{renamed} repeated job ids made unique with a '#<n>' suffix")


def _short(text: str, most: int = 40) -> str:
    """A field's text as an error quotes it: whole up to `most` characters, else its start, its
    end and its length (a 5,000-digit number was quoted whole)."""
    if len(text) <= most:
        return text
    return f"{text[:16]}...{text[-8:]} ({len(text):,} characters)"
