"""A steady-state window: metrics over jobs A..B-1 by arrival order, as Gavel reports (its
continuous experiments average the JCT of a middle slice of jobs, leaving out the warm-up and the
drain). `--window 200:400` = the 200 jobs whose arrival ranks are 200 to 399 (0-based, half-open
like a Python slice); `200:` = from the 200th on, `:400` = the first 400."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quanta.errors import QuantaError


@dataclass(frozen=True)
class Window:
    lo: int = 0
    hi: int | None = None

    def __str__(self) -> str:
        return f"{self.lo}:{'' if self.hi is None else self.hi}"

    def mask(self, submit: np.ndarray, source: str = "") -> np.ndarray:
        """Boolean mask of the jobs in the window; `submit` in table order (ties by row)."""
        n = len(submit)
        if self.lo >= n:
            raise QuantaError(f"window {self} starts past the last of the run's {n} jobs",
                              source=source or None, field="--window")
        rank = np.empty(n, dtype=np.int64)
        rank[np.argsort(submit, kind="stable")] = np.arange(n)
        hi = n if self.hi is None else self.hi
        return (rank >= self.lo) & (rank < hi)

    def describe(self, n: int) -> str:
        hi = n if self.hi is None else min(self.hi, n)
        return f"steady-state window: metrics over jobs {self.lo}-{hi - 1} by arrival order " \
               f"({hi - self.lo} of {n}); makespan and utilisation from the window's first " \
               f"arrival to its last completion"


def parse_window(text: str | tuple | list | Window | None, field: str = "--window",
                 source: str | None = None, line: int | None = None) -> Window | None:
    """`A:B`, `A:`, `:B` (or a pair) -> Window; None or '' -> None. Bad input is a QuantaError."""
    if text is None or isinstance(text, Window):
        return text
    if isinstance(text, (tuple, list)):
        if len(text) != 2:
            raise QuantaError(f"bad window {list(text)!r}: want [A, B]", source=source, line=line,
                              field=field)
        text = f"{'' if text[0] is None else text[0]}:{'' if text[1] is None else text[1]}"
    s = str(text).strip()
    if not s:
        return None
    lo_s, colon, hi_s = s.partition(":")
    try:
        if not colon:
            raise ValueError
        lo = int(lo_s) if lo_s.strip() else 0
        hi = int(hi_s) if hi_s.strip() else None
    except ValueError:
        raise QuantaError(f"bad window '{s}': want A:B, jobs A to B-1 by arrival order "
                          f"(e.g. 200:400)", source=source, line=line, field=field) from None
    if lo < 0 or (hi is not None and hi <= lo):
        raise QuantaError(f"bad window '{s}': want 0 <= A < B", source=source, line=line,
                          field=field)
    return Window(lo, hi)
