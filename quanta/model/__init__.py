"""The vocabulary of Quanta: GPU types, nodes, clusters, job specs and allocations."""

from quanta.model.gpu import GPU_TYPES, GpuType, gpu_type
from quanta.model.cluster import Cluster, NodeSpec
from quanta.model.job import JobSpec, Trace

__all__ = ["GPU_TYPES", "GpuType", "gpu_type", "Cluster", "NodeSpec", "JobSpec", "Trace"]
