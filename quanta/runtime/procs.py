"""A job's processes as the runtime knows them (`Runtime.procs`, quanta/runtime/controller.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# the store columns of a job's launch that ended (its handle, token and stop request are no
# longer current)
ENDED = {"handle": "", "token": "", "stopping": ""}


@dataclass
class Proc:
    """A job's processes as the runtime knows them."""
    gpus: np.ndarray                  # devices they hold (global GPU ids)
    stopping: str = ""                # why they were asked to stop: preempt, move, hold, cancel, node
    launched_at: float = 0.0          # wall clock of the launch (0: adopted)
    training: bool = False            # reported progress since the launch
