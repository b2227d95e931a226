"""Nodes and clusters. A cluster is an ordered tuple of nodes; GPUs get global ids in node order."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from quanta.model.gpu import GpuType, gpu_type


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    gpu_type: str
    gpus: int
    cpus: int = 0             # CPU threads; 0 = not modelled
    mem_gb: float = 0.0       # host memory; 0 = not modelled
    intra_bw_gbps: float = 0.0  # GPU-to-GPU inside the node (NVLink/PCIe), GB/s
    inter_bw_gbps: float = 0.0  # node network, GB/s


@dataclass(frozen=True)
class Cluster:
    """A set of nodes. Derived numpy indexes make the hot paths (placement, snapshots) vectorised."""

    nodes: tuple[NodeSpec, ...]
    name: str = "cluster"
    types: tuple[str, ...] = field(init=False)
    gpu_types: dict[str, GpuType] = field(init=False)
    node_type: np.ndarray = field(init=False)   # type index per node
    node_gpus: np.ndarray = field(init=False)   # GPUs per node
    node_first_gpu: np.ndarray = field(init=False)
    gpu_node: np.ndarray = field(init=False)    # node index per global GPU id
    gpu_type_idx: np.ndarray = field(init=False)
    capacity: np.ndarray = field(init=False)    # GPUs per type
    type_node_max: np.ndarray = field(init=False)  # largest node size per type
    node_bw: np.ndarray = field(init=False)     # node network GB/s (0: not given)

    def __post_init__(self) -> None:
        types: list[str] = []
        for n in self.nodes:
            if n.gpu_type not in types:
                types.append(n.gpu_type)
        set_ = object.__setattr__
        set_(self, "types", tuple(types))
        set_(self, "gpu_types", {t: gpu_type(t) for t in types})
        node_type = np.array([types.index(n.gpu_type) for n in self.nodes], dtype=np.int64)
        node_gpus = np.array([n.gpus for n in self.nodes], dtype=np.int64)
        first = np.concatenate([[0], np.cumsum(node_gpus)[:-1]]).astype(np.int64)
        set_(self, "node_type", node_type)
        set_(self, "node_gpus", node_gpus)
        set_(self, "node_first_gpu", first)
        set_(self, "gpu_node", np.repeat(np.arange(len(self.nodes)), node_gpus))
        set_(self, "gpu_type_idx", np.repeat(node_type, node_gpus))
        set_(self, "capacity", np.bincount(node_type, weights=node_gpus,
                                           minlength=len(types)).astype(np.int64))
        tmax = np.zeros(len(types), dtype=np.int64)
        np.maximum.at(tmax, node_type, node_gpus)
        set_(self, "type_node_max", tmax)
        set_(self, "node_bw", np.array([n.inter_bw_gbps for n in self.nodes], dtype=float))

    @property
    def num_gpus(self) -> int:
        return int(self.node_gpus.sum())

    def type_index(self, name: str) -> int:
        return self.types.index(name)

    def min_nodes(self, type_idx: int, gpus: int) -> int:
        """The fewest nodes of a type that `gpus` GPUs fit on (the consolidated placement)."""
        return -(-gpus // int(self.type_node_max[type_idx]))

    def describe(self) -> str:
        parts = []
        for t_i, t in enumerate(self.types):
            sizes = self.node_gpus[self.node_type == t_i]
            uniq, counts = np.unique(sizes, return_counts=True)
            parts.append(",".join(f"{t}:{c}x{u}" for u, c in zip(uniq, counts)))
        return ",".join(parts)
