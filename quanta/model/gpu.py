"""GPU types: name, memory, a generic relative speed, and an hourly price.

`speed` is a generic single-GPU training speed relative to a V100 (= 1.0). It is only the fallback
when the performance model has no measurement for a (job type, GPU type) pair; measured tables win.
Sources of the defaults (docs/perf-table.md, `python bench/accuracy_table.py`): P100 0.74 and K80
0.23 are the geometric means of measured/V100 over Gavel's table (83 and 80 points); T4 ~0.45,
RTX 2080Ti ~0.75, A100 ~2.0 of a V100-class GPU are rough values from Sia's 1-GPU seed profiles;
the rest are estimates. Prices are on-demand cloud list prices
per GPU-hour (AWS/GCP, 2023), rounded; G2/G3 (Alibaba internal codes) are unknown and estimated.
"""

from __future__ import annotations

from dataclasses import dataclass

from quanta.errors import QuantaError


@dataclass(frozen=True, slots=True)
class GpuType:
    name: str
    memory_gb: float
    speed: float
    price_per_hour: float
    description: str = ""


GPU_TYPES: dict[str, GpuType] = {g.name: g for g in (
    GpuType("k80", 12, 0.23, 0.90, "NVIDIA K80 (one GK210 die)"),
    GpuType("p100", 16, 0.74, 1.46, "NVIDIA P100 16GB"),
    GpuType("v100", 16, 1.00, 3.06, "NVIDIA V100 16GB"),
    GpuType("v100m16", 16, 1.00, 3.06, "NVIDIA V100 16GB (Alibaba V100M16)"),
    GpuType("v100m32", 32, 1.00, 3.06, "NVIDIA V100 32GB (Alibaba V100M32)"),
    GpuType("t4", 16, 0.45, 0.53, "NVIDIA T4 (AWS g4dn)"),
    GpuType("rtx", 11, 0.75, 0.80, "NVIDIA RTX 2080Ti"),
    GpuType("rtx6000", 24, 0.85, 1.20, "NVIDIA Quadro RTX 6000"),
    GpuType("a10", 24, 0.95, 1.00, "NVIDIA A10"),
    GpuType("a100", 40, 2.00, 4.10, "NVIDIA A100 40GB"),
    GpuType("a800", 80, 2.20, 4.10, "NVIDIA A800 80GB"),
    GpuType("h100", 80, 3.50, 8.00, "NVIDIA H100 80GB"),
    GpuType("h200", 141, 3.80, 10.0, "NVIDIA H200 141GB"),
    GpuType("g2", 16, 0.60, 1.50, "Alibaba internal G2 (undisclosed; speed estimated)"),
    GpuType("g3", 32, 1.20, 3.00, "Alibaba internal G3 (undisclosed; speed estimated)"),
    GpuType("cpu", 0, 0.02, 0.05, "a CPU worker slot (the runtime on machines without GPUs)"),
)}

ALIASES = {"2080ti": "rtx", "rtx2080ti": "rtx", "quadro": "rtx6000", "quad": "rtx6000",
           "aws": "t4", "dgx": "a100", "dgx-ext": "a100", "azure": "v100"}


def gpu_type(name: str) -> GpuType:
    """Look up a GPU type by (case-insensitive) name or alias; unknown names are a user error."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    try:
        return GPU_TYPES[key]
    except KeyError:
        known = ", ".join(sorted(GPU_TYPES))
        raise QuantaError(f"unknown GPU type '{name}' (known: {known})") from None
