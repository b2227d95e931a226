"""Cluster presets of the papers' evaluations, and parsing of `--cluster PRESET|FILE|SPEC`."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable

from quanta.errors import QuantaError
from quanta.specfile import line_of, parse_yaml, read_text, validated
from quanta.model.cluster import Cluster, NodeSpec
from quanta.model.gpu import gpu_type
from quanta.paths import TRACES_DIR


# the most nodes, GPUs per node and GPUs a cluster may have (a typo of 99999999x99999999 made
# one Python object per node until memory ran out; 1,000,000 nodes of 1,000 GPUs, arrays per GPU
# past 24 GB; 10,000,000 GPUs take ~0.8 GB)
MAX_NODES = 1_000_000
MAX_GPUS_PER_NODE = 4096
MAX_GPUS = 10_000_000


def _group(prefix: str, gpu: str, nodes: int, gpus: int, **kw) -> list[NodeSpec]:
    return [NodeSpec(f"{prefix}{i:03d}", gpu, gpus, **kw) for i in range(nodes)]


def _sizes_ok(nodes: int, gpus: int, before: tuple[int, int]) -> str | None:
    """Why a group of `nodes` nodes of `gpus` GPUs cannot follow `before` (nodes, GPUs) in a
    cluster (None: it can)."""
    if nodes + before[0] > MAX_NODES:
        return f"{nodes + before[0]:,} nodes is more than the {MAX_NODES:,} a cluster may have"
    if gpus > MAX_GPUS_PER_NODE:
        return f"{gpus} GPUs per node is more than {MAX_GPUS_PER_NODE}"
    if nodes * gpus + before[1] > MAX_GPUS:
        return f"{nodes * gpus + before[1]:,} GPUs is more than the {MAX_GPUS:,} a cluster may have"
    return None


def _openb() -> Cluster:
    path = TRACES_DIR / "openb_node_list_gpu_node.csv"
    nodes = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if int(row["gpu"]) > 0:
                nodes.append(NodeSpec(row["sn"], gpu_type(row["model"]).name, int(row["gpu"]),
                                      cpus=int(row["cpu_milli"]) // 1000,
                                      mem_gb=int(row["memory_mib"]) / 1024))
    return Cluster(tuple(nodes), name="openb")


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    build: Callable[[], Cluster]


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("gavel-108", "Gavel's simulated cluster: 36 V100 + 36 P100 + 36 K80, 4 GPUs per server",
           lambda: Cluster(tuple(_group("v100-", "v100", 9, 4) + _group("p100-", "p100", 9, 4)
                                 + _group("k80-", "k80", 9, 4)), name="gavel-108")),
    Preset("sia-64", "Sia's default: 6x4 T4 (aws) + 3x8 RTX 2080Ti + 2x8 A100 (dgx-ext)",
           lambda: Cluster(tuple(_group("aws-", "t4", 6, 4, cpus=48, mem_gb=192, inter_bw_gbps=6.25)
                                 + _group("rtx-", "rtx", 3, 8, cpus=64, mem_gb=256, inter_bw_gbps=5.0)
                                 + _group("dgx-", "a100", 2, 8, cpus=256, mem_gb=1024,
                                          intra_bw_gbps=600, inter_bw_gbps=25.0)), name="sia-64")),
    Preset("sia-phoebe-44", "Sia's physical cluster: 3x8 RTX 2080Ti + 2x8 A100 + 1x4 Quadro RTX 6000",
           lambda: Cluster(tuple(_group("rtx-", "rtx", 3, 8) + _group("dgx-", "a100", 2, 8)
                                 + _group("quad-", "rtx6000", 1, 4)), name="sia-phoebe-44")),
    Preset("pollux-64", "Pollux's testbed: 16 x 4 T4 (AWS g4dn.12xlarge)",
           lambda: Cluster(tuple(_group("aws-", "t4", 16, 4, cpus=48, mem_gb=192,
                                        inter_bw_gbps=6.25)), name="pollux-64")),
    Preset("rubick-64", "Rubick's testbed: 8 nodes x 8 A800-80GB, 96 CPUs, 1600 GB RAM, "
                        "NVLink 400 GB/s, 100 Gb/s network",
           lambda: Cluster(tuple(_group("a800-", "a800", 8, 8, cpus=96, mem_gb=1600,
                                        intra_bw_gbps=400, inter_bw_gbps=12.5)), name="rubick-64")),
    Preset("philly-512", "64 x 8 V100 (the Philly replay benchmark's cluster)",
           lambda: Cluster(tuple(_group("v100-", "v100", 64, 8)), name="philly-512")),
    Preset("openb", "Alibaba openb 2023 GPU nodes (1,212 nodes, 6,212 GPUs, 7 GPU types)", _openb),
)}

_INLINE = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*:\s*(\d+)\s*[xX]\s*(\d+)\s*$")


def parse_inline(spec: str) -> Cluster:
    nodes: list[NodeSpec] = []
    total = 0                           # GPUs so far
    for part in spec.split(","):
        m = _INLINE.match(part)
        if not m:
            raise QuantaError(f"bad cluster spec '{spec}': '{part.strip()}' is not TYPE:NODESxGPUS "
                              f"(e.g. v100:64x8,k80:16x4)", field="--cluster")
        try:
            gpu = gpu_type(m.group(1)).name
        except QuantaError as e:
            raise QuantaError(e.bare, field="--cluster") from None
        count, per = int(m.group(2)), int(m.group(3))
        if count <= 0 or per <= 0:
            raise QuantaError(f"bad cluster spec '{spec}': node and GPU counts must be positive",
                              field="--cluster")
        why = _sizes_ok(count, per, (len(nodes), total))
        if why:
            raise QuantaError(f"bad cluster spec '{spec}': {why}", field="--cluster")
        total += count * per
        nodes += _group(f"{gpu}-{len(nodes)}-", gpu, count, per)
    return Cluster(tuple(nodes), name=spec)


@cache
def _cluster_file_model() -> type:
    """The schema of a cluster file (pydantic imported only when a file is read)."""
    from pydantic import BaseModel, ConfigDict, Field

    class _NodeGroup(BaseModel):
        model_config = ConfigDict(extra="forbid")
        gpu_type: str
        count: int = Field(1, gt=0, strict=True)      # (strict: `count: true` is not 1)
        gpus: int = Field(gt=0, strict=True)
        cpus: int = Field(0, ge=0, strict=True)
        mem_gb: float = Field(0.0, ge=0, allow_inf_nan=False)
        intra_bw_gbps: float = Field(0.0, ge=0, allow_inf_nan=False)
        inter_bw_gbps: float = Field(0.0, ge=0, allow_inf_nan=False)
        name: str | None = None

    class _ClusterFile(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str | None = None
        nodes: list[_NodeGroup] = Field(min_length=1)
    return _ClusterFile


def load_cluster_file(path: Path) -> Cluster:
    """A cluster YAML file; a mistake is one line naming the file, the line and the field."""
    text = read_text(path)
    try:
        return _cluster_of(parse_yaml(text, str(path)), path)
    except QuantaError as e:
        if e.source != str(path) or e.line is not None or not e.field:
            raise
        raise QuantaError(e.bare, source=e.source, line=line_of(text, e.source, e.field),
                          field=e.field) from None


def _cluster_of(data: object, path: Path) -> Cluster:
    spec = validated(_cluster_file_model(), data, str(path))
    nodes: list[NodeSpec] = []
    total = 0                           # GPUs so far
    for gi, g in enumerate(spec.nodes):
        try:
            gpu = gpu_type(g.gpu_type).name
        except QuantaError as e:
            raise QuantaError(e.bare, source=str(path), field=f"nodes.{gi}.gpu_type") from None
        why = _sizes_ok(g.count, g.gpus, (len(nodes), total))
        if why:
            raise QuantaError(why, source=str(path), field=f"nodes.{gi}")
        total += g.count * g.gpus
        prefix = (g.name or f"{gpu}-g{gi}-")
        nodes += _group(prefix, gpu, g.count, g.gpus, cpus=g.cpus, mem_gb=g.mem_gb,
                        intra_bw_gbps=g.intra_bw_gbps, inter_bw_gbps=g.inter_bw_gbps)
    return Cluster(tuple(nodes), name=spec.name or path.stem)


def resolve_cluster(arg: str) -> Cluster:
    """A preset name, a YAML file, or an inline TYPE:NODESxGPUS spec."""
    if arg in PRESETS:
        return PRESETS[arg].build()
    p = Path(arg)
    if p.suffix.lower() in (".yaml", ".yml") or p.is_file():
        if not p.is_file():
            raise QuantaError("is a folder, not a cluster file" if p.is_dir() else
                              "cluster file not found", source=arg)
        return load_cluster_file(p)
    if ":" in arg:
        return parse_inline(arg)
    raise QuantaError(f"unknown cluster '{arg}': not a preset ({', '.join(PRESETS)}), "
                      f"a YAML file or a TYPE:NODESxGPUS spec", field="--cluster")
