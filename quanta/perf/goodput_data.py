"""Readers for the bundled Sia/Pollux profiles (quanta/data/profiles/sia_pollux, see PROVENANCE.md).

Per application directory:
- `placements-<cluster>.csv`: placement (GPUs per node as digits: `44` = 2 nodes x 4 GPUs),
  local_bsz, step_time (whole optimiser step, s), sync_time (its synchronisation part, s);
- `scalability-<cluster>.csv`: num_nodes, num_replicas, local_bsz, step_time, sync_time;
- `validation-<batch>.csv`: per epoch progress, iteration, metric, grad_sqr, grad_var;
- `seed/<app>.csv`: 1-GPU profiles on every GPU type (gpu_type, local_bsz, placement, ...).
Column order differs between files; everything is read by header name.

Cluster -> GPU type: aws = T4 (4 per node), azure = V100 (8), dgx-ext = A100 (8; Sia's default
A100 cluster; the smaller `dgx` set is not bundled), quad = Quadro RTX 6000 (4), rtx = RTX
2080Ti (8). The artifact's files without a cluster suffix are byte-identical to the aws ones
(the Pollux testbed) and are not bundled.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quanta.errors import QuantaError
from quanta.model.gpu import gpu_type as lookup_gpu
from quanta.paths import PROFILES_DIR

SIA_POLLUX_DIR = PROFILES_DIR / "sia_pollux"
APPS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
CLUSTER_OF_TYPE = {"t4": "aws", "v100": "azure", "a100": "dgx-ext", "rtx6000": "quad", "rtx": "rtx"}
GPUS_PER_NODE = {"t4": 4, "v100": 8, "a100": 8, "rtx6000": 4, "rtx": 8}
# Sia's artifact caps deepspeech2's per-GPU batch on the RTX 2080Ti at 57 (applications.py),
# although its profile lists 80: kept, as the memory limit of that 11 GB card.
MAX_LOCAL_OVERRIDE = {("deepspeech2", "rtx"): 57}


@dataclass(frozen=True)
class Samples:
    """Measured (num_nodes, num_replicas, local_bsz) -> (step_time, sync_time), one row each;
    `per_node` = GPUs on the busiest node (placements: the largest digit; scalability rows, which
    give no placement: ceil(replicas / nodes))."""
    num_nodes: np.ndarray
    num_replicas: np.ndarray
    local_bsz: np.ndarray
    step_time: np.ndarray
    sync_time: np.ndarray
    from_placements: np.ndarray   # bool: row from placements-*.csv (else scalability-*.csv)
    per_node: np.ndarray

    def __len__(self) -> int:
        return len(self.step_time)

    def subset(self, mask) -> "Samples":
        return Samples(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def canonical_type(name: str) -> str:
    return lookup_gpu(name).name


def profiled_types(app: str, data_dir: Path = SIA_POLLUX_DIR) -> list[str]:
    return [t for t, c in CLUSTER_OF_TYPE.items()
            if (data_dir / app / f"placements-{c}.csv").exists()]


def load_samples(app: str, gpu: str, data_dir: Path = SIA_POLLUX_DIR) -> Samples:
    """All placement rows, plus the scalability rows whose (nodes, replicas, local_bsz) the
    placements do not already cover (as Sia's simulator seeds its profiles)."""
    cluster = CLUSTER_OF_TYPE.get(canonical_type(gpu))
    path = data_dir / app / f"placements-{cluster}.csv"
    if cluster is None or not path.exists():
        raise QuantaError(f"no placement profile for application '{app}' on GPU type '{gpu}'",
                          source=str(path))
    rows, seen = [], set()
    for r in _read_csv(path):
        digits = str(r["placement"]).split(".")[0]
        key = (len(digits), sum(int(d) for d in digits), float(r["local_bsz"]))
        rows.append((*key, float(r["step_time"]), float(r["sync_time"]), True,
                     max(int(d) for d in digits)))
        seen.add(key)
    scal = data_dir / app / f"scalability-{cluster}.csv"
    if scal.exists():
        for r in _read_csv(scal):
            key = (int(float(r["num_nodes"])), int(float(r["num_replicas"])), float(r["local_bsz"]))
            if key not in seen:
                rows.append((*key, float(r["step_time"]), float(r["sync_time"]), False,
                             -(-key[1] // key[0])))
    cols = list(zip(*rows))
    return Samples(np.array(cols[0], float), np.array(cols[1], float), np.array(cols[2], float),
                   np.array(cols[3], float), np.array(cols[4], float), np.array(cols[5], bool),
                   np.array(cols[6], float))


def validation_batches(app: str, data_dir: Path = SIA_POLLUX_DIR) -> list[int]:
    """Global batch sizes with a validation profile: the smallest is M0, the largest max batch."""
    out = sorted(int(p.stem.split("-")[-1]) for p in (data_dir / app).glob("validation-*.csv"))
    if not out:
        raise QuantaError(f"no validation profile for application '{app}'",
                          source=str(data_dir / app))
    return out


def load_validation(app: str, batch: int, data_dir: Path = SIA_POLLUX_DIR) -> dict[str, np.ndarray]:
    rows = _read_csv(data_dir / app / f"validation-{batch}.csv")
    return {k: np.array([float(r[k]) for r in rows]) for k in ("progress", "grad_sqr", "grad_var")}


def seed_atomic(app: str, data_dir: Path = SIA_POLLUX_DIR) -> dict[str, tuple[float, float]]:
    """Per GPU type, the 1-GPU ("atomic") profile point Sia bootstraps from: (largest local
    batch measured on one GPU, its step time)."""
    path = data_dir / "seed" / f"{app}.csv"
    if not path.exists():
        return {}
    best: dict[str, list[tuple[float, float]]] = {}
    for r in _read_csv(path):
        if str(r["placement"]).split(".")[0] != "1":
            continue
        t = canonical_type(r["gpu_type"])
        best.setdefault(t, []).append((float(r["local_bsz"]), float(r["step_time"])))
    out = {}
    for t, pts in best.items():
        m = max(p[0] for p in pts)
        out[t] = (m, float(np.mean([p[1] for p in pts if p[0] == m])))
    return out
