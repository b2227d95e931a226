"""Gavel's measured throughput table (steps/s per job type, scale factor and GPU type)."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from quanta.paths import PROFILES_DIR
from quanta.statmemo import derived

GAVEL_TYPES = ("v100", "p100", "k80")


@dataclass(frozen=True)
class GavelTable:
    alone: dict[tuple[str, int, str], float]           # (job type, sf, gpu) -> steps/s, consolidated
    unconsolidated: dict[tuple[str, int, str], float]  # same, spread over servers
    pairs: dict[tuple[str, str, str], tuple[float, float]]  # (a, b, gpu) -> (rate a, rate b), sf=1

    @property
    def job_types(self) -> list[str]:
        return sorted({k[0] for k in self.alone if k[1] == 1})

    def scale_factors(self, job_type: str) -> list[int]:
        return sorted({k[1] for k in self.alone if k[0] == job_type})


@lru_cache(maxsize=None)
def _key(text: str) -> tuple[str, int]:
    """A key of Gavel's table, "('ResNet-18 (batch size 16)', 1)": (job type, scale factor).
    Some 80 distinct keys recur in 2,500 places, so each is parsed once."""
    job_type, sf = ast.literal_eval(text)
    return job_type, int(sf)


@lru_cache(maxsize=1)
def gavel_table() -> GavelTable:
    """The table, parsed once per installed copy of its JSON (9 ms of a 0.2 s run) and kept
    beside it (quanta/statmemo.py: 0.5 ms to read back)."""
    path = PROFILES_DIR / "gavel" / "simulation_throughputs.json"
    return GavelTable(*derived([path, Path(__file__)], "gavel-table", lambda: _parse(path)))


def _parse(path: Path) -> tuple[dict, dict, dict]:
    raw = json.loads(path.read_text())
    alone: dict[tuple[str, int, str], float] = {}
    uncons: dict[tuple[str, int, str], float] = {}
    pairs: dict[tuple[str, str, str], tuple[float, float]] = {}
    for section, rows in raw.items():
        gpu, _, kind = section.partition("_")
        for key, entries in rows.items():
            job_type, sf = _key(key)
            rate = float(entries.get("null", 0.0))
            (uncons if kind == "unconsolidated" else alone)[(job_type, sf, gpu)] = rate
            if kind or sf != 1:
                continue
            for other_key, val in entries.items():
                if other_key == "null":
                    continue
                other = _key(other_key)[0]
                pairs[(job_type, other, gpu)] = (float(val[0]), float(val[1]))
    return alone, uncons, pairs
