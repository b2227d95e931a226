"""Synergy's CPU and host-memory sensitivity: how a job's speed depends on the CPUs and host
memory it gets per GPU (data loading, pre-processing, the page cache of its dataset).

`cpu_mem_factor(job_type, cpus_per_gpu, mem_gb_per_gpu)` = throughput at that allocation /
throughput at the GPU-proportional share of Synergy's servers (8 GPUs, 24 CPUs, 500 GB: 3 CPUs
and 62.5 GB per GPU), bilinear between the profiled grid points and clamped at its edges. A model
below 1 at the proportional share wants more CPU or memory; Synergy's scheduler moves CPUs and
memory to the jobs that gain from them. Job types map to the profiled models by family
(ResNet-18 -> res18, Transformer -> transformer, LM -> lstm, ...); unknown families are
insensitive (factor 1).
"""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np

from quanta.paths import PROFILES_DIR

CPUS = np.array([1, 2, 3, 4, 5, 6, 9, 12, 24], dtype=float)
MEM_GB = np.array([20.8, 62.5, 125.0, 187.5, 250.0])
PROPORTIONAL = (3.0, 62.5)     # CPUs and GB per GPU on Synergy's 8-GPU / 24-CPU / 500 GB servers

# Quanta / Gavel / Pollux job families -> Synergy model names
FAMILY = {"resnet-18": "res18", "resnet-50": "res50", "transformer": "transformer", "lm": "lstm",
          "cifar10": "res18", "imagenet": "res50", "deepspeech2": "deepspeech", "bert": "bert",
          "alexnet": "alexnet", "mobilenet": "mobilenet", "shufflenet": "shufflenet",
          "gnmt": "gnmt", "m5": "m5", "vae": "vae", "res18": "res18", "res50": "res50",
          "lstm": "lstm", "deepspeech": "deepspeech"}


@lru_cache(maxsize=1)
def grids() -> dict[str, np.ndarray]:
    """Model name -> 9 x 5 relative-throughput grid (1-GPU profiles)."""
    raw = json.loads((PROFILES_DIR / "synergy" / "model_profiles.json").read_text())["models"]
    out = {}
    for name, m in raw.items():
        if m["gpus"] == 1:
            g = np.asarray(m["tput"], dtype=float)
            if g.shape == (len(CPUS), len(MEM_GB)):
                out[name.rsplit("_", 1)[0]] = g
    return out


def model_of(job_type: str) -> str | None:
    fam = job_type.split(" (")[0].strip().lower()
    return FAMILY.get(fam)


def _interp(grid: np.ndarray, cpus: float, mem: float) -> float:
    c = float(np.clip(cpus, CPUS[0], CPUS[-1]))
    m = float(np.clip(mem, MEM_GB[0], MEM_GB[-1]))
    i = min(int(np.searchsorted(CPUS, c, side="right")) - 1, len(CPUS) - 2)
    k = min(int(np.searchsorted(MEM_GB, m, side="right")) - 1, len(MEM_GB) - 2)
    tc = (c - CPUS[i]) / (CPUS[i + 1] - CPUS[i])
    tm = (m - MEM_GB[k]) / (MEM_GB[k + 1] - MEM_GB[k])
    g = grid
    return float((1 - tc) * (1 - tm) * g[i, k] + tc * (1 - tm) * g[i + 1, k]
                 + (1 - tc) * tm * g[i, k + 1] + tc * tm * g[i + 1, k + 1])


def cpu_mem_factor(job_type: str, cpus_per_gpu: float, mem_gb_per_gpu: float) -> float:
    """Speed at this CPU/memory share relative to the GPU-proportional share (1 = insensitive)."""
    name = model_of(job_type)
    grid = grids().get(name) if name else None
    if grid is None:
        return 1.0
    base = _interp(grid, *PROPORTIONAL)
    return _interp(grid, cpus_per_gpu, mem_gb_per_gpu) / base if base > 0 else 1.0
