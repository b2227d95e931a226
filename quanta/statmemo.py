"""Values derived from files, kept in a `__pycache__` folder beside them and reused while the
files' (size, mtime) stay the same: the code version (a hash of the package, quanta/cellstore.py)
and Gavel's throughput table parsed from its JSON (quanta/perf/gavel_table.py).

A file changed within the same timestamp tick as the stat was taken could keep its (size,
mtime); so nothing is kept while one of its files is younger than SETTLE_NS (git's "racily
clean" rule). Where the folder cannot be written (a read-only install) the value is derived
every time.
"""

from __future__ import annotations

import marshal
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

SETTLE_NS = 2_000_000_000

T = TypeVar("T")


def settled(stats: Iterable[os.stat_result], now_ns: int | None = None) -> bool:
    """Whether every file was last changed more than SETTLE_NS ago."""
    now = time.time_ns() if now_ns is None else now_ns
    return all(now - st.st_mtime_ns > SETTLE_NS for st in stats)


def write_whole(path: Path, data: bytes) -> None:
    """`data` into `path` whole (a temporary file, then renamed), its folder made if needed;
    nothing where it cannot be written."""
    try:
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass


def kept(memo: Path, stamp: object, stats: Iterable[os.stat_result], build: Callable[[], T],
         encode: Callable[[object, T], bytes] = lambda stamp, value: marshal.dumps((stamp, value)),
         decode: Callable[[bytes], tuple[object, T]] = marshal.loads) -> T:
    """`build()`, kept in the file `memo` with `stamp` (what the files' stats say of them) and
    read back while the stamp is the same; not kept while a file of `stats` is younger than
    SETTLE_NS, and built again where the memo is missing or unreadable. `encode` / `decode`:
    the memo's format (default: (stamp, value) with marshal)."""
    now = time.time_ns()
    try:
        kept_stamp, value = decode(memo.read_bytes())
        if kept_stamp == stamp:
            return value
    except (OSError, ValueError, EOFError, TypeError, KeyError, AttributeError):
        pass
    value = build()
    if settled(stats, now):
        write_whole(memo, encode(stamp, value))
    return value


def derived(sources: list[Path], name: str, build: Callable[[], T]) -> T:
    """`build()`, a value of the `sources` (plain data: dicts, lists, tuples, numbers, strings),
    kept with marshal in `<first source's folder>/__pycache__/<name>.<python tag>.marshal` and
    read back while every source's (size, mtime) is the same. List the code that builds it among
    the sources: an edit to it makes the kept value stale."""
    stats = [p.stat() for p in sources]
    stamp = tuple((str(p), st.st_size, st.st_mtime_ns) for p, st in zip(sources, stats))
    memo = sources[0].parent / "__pycache__" / f"{name}.{sys.implementation.cache_tag}.marshal"
    return kept(memo, stamp, stats, build)
