"""Performance models: how fast a job runs on an allocation. Policies ask; they hold no numbers."""

from quanta.perf.base import PerfModel, Provenance
from quanta.perf.table import TableModel

__all__ = ["PerfModel", "Provenance", "TableModel"]
