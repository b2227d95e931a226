"""Silence C-level stdout around a solver call: some HiGHS MILP solves print internal debug lines
(`HighsMipSolverData::transformNewIntegerFeasibleSolution ...`) straight to file descriptor 1,
which would break `--quiet` and machine-read output."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager


@contextmanager
def silent_stdout():
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):   # no real descriptor (e.g. captured)
        yield
        return
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)
