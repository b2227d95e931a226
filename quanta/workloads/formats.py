"""The registry of trace formats, format detection, and `load_trace`.

Detection looks at the first non-blank line of a file: its column names (CSV headers), or, for the
headerless formats, its tab-separated column count (Gavel) or the shape of its values (PAI task
table). Formats are tried in registry order; the first whose `sniff` accepts the file wins.
Failing that, a header that has most of one format's required columns is read as that format, so
that the error names the missing column rather than saying the format is unknown.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from quanta.errors import QuantaError
from quanta.model.job import Trace
from quanta.workloads.readers import (gavel, helios, itp, normalized, openb, pai, philly, pollux,
                                      rubick, tiresias)
from quanta.workloads.readers._base import Sample, check_file, sample_file

Reader = Callable[..., Trace]


@dataclass(frozen=True)
class ReaderInfo:
    name: str
    read: Reader                           # read(path, *, max_jobs=None) -> Trace
    description: str
    sniff: Callable[[Sample], bool]        # does the start of a file look like this format?
    columns: tuple[str, ...] = ()          # required header columns, if the format has a header
    fields: dict[str, str] = field(default_factory=dict)   # JobSpec field -> the file's column


def _info(module: ModuleType) -> ReaderInfo:
    columns = tuple(getattr(module, "REQUIRED", ()))
    return ReaderInfo(module.FORMAT, module.read, module.DESCRIPTION, module.sniff, columns,
                      dict(getattr(module, "FIELDS", {})))


# Order matters for detection: the most specific header sets first.
FORMATS: dict[str, ReaderInfo] = {m.FORMAT: _info(m) for m in (
    normalized, openb, philly, pollux, rubick, tiresias, helios, itp, pai, gavel)}


def register_format(info: ReaderInfo) -> None:
    """Add (or replace) a format; it is tried last in detection."""
    FORMATS.pop(info.name, None)
    FORMATS[info.name] = info


def column_of(fmt: str, name: str) -> str:
    """The column of a `fmt` file that gave the JobSpec field `name` (an error found after
    reading names the file's own column: tiresias' num_gpu, not num_gpus)."""
    info = FORMATS.get(fmt)
    return info.fields.get(name, name) if info is not None else name


def known_formats() -> str:
    return ", ".join(FORMATS)


def detect_format(path: str | Path) -> str:
    """The name of the format of the file at `path`; QuantaError if none matches."""
    p = check_file(path)
    try:
        sample = sample_file(p)
    except OSError as e:
        raise QuantaError(f"cannot read the file ({e.strerror})", source=str(p)) from None
    if not sample.first:
        raise QuantaError("the file is empty", source=str(p))
    for info in FORMATS.values():
        if info.sniff(sample):
            return info.name
    near = _nearest(sample)
    if near:
        return near  # its reader will name the missing column(s)
    cols = ", ".join(c.strip() for c in sample.first[:12])
    if any((ch < " " and ch != "\t") or ch in "\x7f\ufffd" for ch in cols):   # control bytes,
        # or what was no UTF-8 (sample_file replaces it): a space of another kind is still text
        raise QuantaError("cannot tell the trace format from the first line: it is not text (a "
                          "binary file?)", source=str(p))
    cols = cols if len(cols) <= 120 else cols[:117] + "..."
    raise QuantaError(f"cannot tell the trace format from the first line ({cols}); "
                      f"pass a format explicitly, one of: {known_formats()}", source=str(p))


def _nearest(sample: Sample) -> str | None:
    """The one format whose required header columns are mostly (more than half) present."""
    scores = {info.name: len(set(info.columns) & sample.header) / len(info.columns)
              for info in FORMATS.values() if info.columns}
    best = max(scores.values(), default=0.0)
    winners = [name for name, score in scores.items() if score == best]
    return winners[0] if best > 0.5 and len(winners) == 1 else None


def load_trace(path: str | Path, fmt: str = "auto", *, max_jobs: int | None = None) -> Trace:
    """Read a trace file (or a bundled sample, by name) as a Trace sorted by submit time.

    `fmt` is a format name from FORMATS or "auto" to detect it; `max_jobs` keeps the first N jobs
    by submit time.
    """
    p = Path(path)
    if not p.is_file():     # (a folder named like a sample, an earlier run's --out, hides nothing)
        from quanta.workloads.samples import SAMPLES, sample_path
        if str(path) in SAMPLES:
            p = sample_path(str(path))
            if fmt == "auto":
                fmt = SAMPLES[str(path)][1]
        elif not p.exists():
            raise QuantaError(f"no such trace file, nor a bundled sample ({', '.join(SAMPLES)})",
                              source=str(p))
    name = fmt.strip().lower()
    asked = name != "auto"
    if not asked:
        name = detect_format(p)
    info = FORMATS.get(name)
    if info is None:
        raise QuantaError(f"unknown trace format '{fmt}' (known: {known_formats()}, or auto)",
                          source=str(p))
    # The reader allocates a few objects per row and frees none; pausing the cyclic garbage
    # collector meanwhile avoids repeated full scans (reading Philly's 82k rows ~1.5x faster).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return info.read(p, max_jobs=max_jobs)
    except QuantaError as e:
        other = _looks_like(p) if asked else None
        if other is None or other == name:
            raise
        raise QuantaError(f"{e.bare} (read as '{name}', the format asked for; the file looks "
                          f"like '{other}': give that format, or auto)", source=e.source,
                          line=e.line, field=e.field) from None
    finally:
        if enabled:
            gc.enable()


def _looks_like(p: Path) -> str | None:
    """The format the file would be read as by auto, or None where none would."""
    try:
        return detect_format(p)
    except QuantaError:
        return None
