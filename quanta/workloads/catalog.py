"""The job-type catalog: which models a trace job can be, and where their profiles come from.

This first catalog holds Gavel's 26 measured single-GPU job types (ResNet-18/50, Transformer, LM,
Recommendation, A3C, CycleGAN at several batch sizes), measured on V100/P100/K80 alone, in
co-located pairs and at scale factors 2/4/8. Traces without a model draw from it (seeded).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from quanta.perf.gavel_table import gavel_table


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    family: str
    batch_size: int
    source: str
    scale_factors: tuple[int, ...]


def _family_batch(name: str) -> tuple[str, int]:
    family, _, rest = name.partition(" (batch size ")
    return family, int(rest.rstrip(")")) if rest else 0


@lru_cache(maxsize=1)
def catalog() -> dict[str, CatalogEntry]:
    table = gavel_table()
    out = {}
    for name in table.job_types:
        family, batch = _family_batch(name)
        out[name] = CatalogEntry(name, family, batch, "gavel simulation_throughputs.json (MIT)",
                                 tuple(table.scale_factors(name)))
    return out


def drawable_types() -> list[str]:
    """Job types a model-less trace job may be given (sorted: draws are seed-stable)."""
    return sorted(catalog())
