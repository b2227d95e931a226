"""The job-type catalog: which models a trace job can be, and where their profiles come from.

- Gavel's 26 single-GPU job types (ResNet-18/50, Transformer, LM, Recommendation, A3C, CycleGAN
  at several batch sizes), measured on V100/P100/K80 alone, in co-located pairs and at scale
  factors 2/4/8. Traces without a model draw from these (seeded).
- The Pollux/Sia applications (bert, cifar10, deepspeech2, imagenet, ncf, yolov3): placement
  and scalability profiles on T4, V100, A100, RTX 2080Ti, Quadro RTX 6000, gradient noise.
`quanta catalog` lists every entry with its source.
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


@dataclass(frozen=True)
class CatalogRow:
    name: str
    model: str          # which performance model answers for it
    gpu_types: str      # measured or profiled GPU types
    source: str
    cpu_mem: str = "-"  # Synergy CPU/host-memory sensitivity profile used for it


@lru_cache(maxsize=1)
def job_type_names() -> frozenset[str]:
    """Every name `quanta catalog` lists (a job type some performance model knows)."""
    return frozenset(r.name for r in catalog_rows())


def known_job_type(name: str) -> bool:
    """Whether a job of this type gets a model's profile rather than the generic one: a name of
    the catalog (the profiled applications, lower case, in any case: CatalogModel.model_for)."""
    names = job_type_names()
    return name in names or name.lower() in names


def catalog_rows() -> list[CatalogRow]:
    """Every job type any performance model knows, for `quanta catalog`."""
    from quanta.perf.gavel_table import GAVEL_TYPES
    from quanta.perf.goodput_data import APPS, CLUSTER_OF_TYPE
    from quanta.perf.synergy import grids, model_of

    def sens(name: str) -> str:
        m = model_of(name)
        return f"synergy:{m}" if m in grids() else "-"
    rows = [CatalogRow(e.name, "table (Gavel)", "/".join(GAVEL_TYPES) + f", sf {e.scale_factors}",
                       "stanford-futuredata/gavel simulation_throughputs.json (MIT)", sens(e.name))
            for e in catalog().values()]
    rows += [CatalogRow(app, "goodput (Pollux/Sia)", "/".join(CLUSTER_OF_TYPE),
                        "siasosp23/artifacts sia-simulator traces (AdaptDL, Apache-2.0)", sens(app))
             for app in APPS]
    from quanta.perf.plan_apps import APP_TO_FAMILY
    rows += [CatalogRow(app, "plan (Rubick)", "a800",
                        "AlibabaPAI/reconfigurable-dl-scheduler artifact (Apache-2.0)", "-")
             for app in sorted(APP_TO_FAMILY)]
    return rows
