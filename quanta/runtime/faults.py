"""Fault injection for the crash tests: `QUANTA_FAULT=POINT` (or `POINT@N`, the N-th time the
point is reached) makes the service kill itself with SIGKILL (as `kill -9` would) at that named
point of its work. Unset (always, outside tests), `point()` costs one dictionary lookup.

Points, in the order a job meets them:

    submit-stored     POST /v1/jobs committed the job, the answer not yet sent
    request-stored    a cancel/hold/release request committed, the answer not yet sent
    launch-intent     the launch (devices, token) recorded, the launcher not yet started
    launched          the launcher started, its start not yet recorded
    started           the start recorded
    stop-recorded     a stop (preempt, move, hold, cancel) recorded, the job not yet signalled
    stop-signalled    the job signalled to checkpoint and stop
    exit-seen         the job's processes ended, their end not yet recorded
    exit-recorded     the end recorded (finished, pending again, failed, cancelled)
"""

from __future__ import annotations

import os
import signal
import sys

ENV = "QUANTA_FAULT"
_hits: dict[str, int] = {}


def _target() -> tuple[str, int] | None:
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    name, _, nth = value.partition("@")
    return name, int(nth) if nth.isdigit() else 1


_TARGET = _target()


def point(name: str) -> None:
    """Die here (SIGKILL) if QUANTA_FAULT names this point (and this is its N-th hit)."""
    if _TARGET is None or _TARGET[0] != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] == _TARGET[1]:
        print(f"quanta: fault injection: SIGKILL at '{name}'", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
