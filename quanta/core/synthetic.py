"""Hand-made cluster states for benchmarks and property tests (not used by the drivers)."""

from __future__ import annotations

import numpy as np

from quanta.core.jobtable import JobTable
from quanta.placement.occupancy import Occupancy


def start_on_fastest(table: JobTable, occ: Occupancy, rows) -> None:
    """Start each of `rows` (in order) on the fastest GPU type it may use that has room for its
    request, consolidated as the occupancy places it; a job with no room anywhere stays pending."""
    for row in rows:
        allowed = np.flatnonzero(table.allowed[row])
        for t in allowed[np.argsort(-table.rates[row, allowed])].tolist():
            got = occ.place(t, int(table.req[row]))
            if got is not None:
                occ.assign(row, got[0])
                table.hold(row, float(row), "start", t, got[0], float(table.rates[row, t]), 0.0)
                break
