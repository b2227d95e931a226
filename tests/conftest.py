import numpy as np
import pytest

from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.perf import TableModel


def homogeneous(nodes: int = 4, gpus: int = 8, gpu: str = "v100") -> Cluster:
    return Cluster(tuple(NodeSpec(f"n{i}", gpu, gpus) for i in range(nodes)))


def random_jobs(n: int, seed: int = 0, gap: float = 60.0, max_gpus: int = 8) -> list[JobSpec]:
    """Jobs of unknown type: one step = one second on the reference allocation."""
    rng = np.random.default_rng(seed)
    sizes = [g for g in (1, 1, 1, 2, 4, 8) if g <= max_gpus]
    out, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(gap))
        d = float(rng.integers(60, 4000))
        out.append(JobSpec(f"j{i:04d}", t, int(rng.choice(sizes)), "", total_steps=d, duration_s=d))
    return out


@pytest.fixture
def perf() -> TableModel:
    return TableModel()
