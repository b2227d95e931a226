"""The GPU counts Rubick's artifact (AlibabaPAI/reconfigurable-dl-scheduler @ 80e8524) places its
3D-parallel models on: `gpu_to_placements` of sched/models/llama7.py:85-93 and
sched/models/llama30.py:75-80, the only models its policy sends through the 3D pass
(morphling.py:111 and 130 name llama7, llama30 and t5_3B; no t5_3B job is in its workloads). Every
other model is placed data-parallel on one node there. Used by quanta/policies/rubick.py
(`fill_node`)."""

from __future__ import annotations

# in the artifact's order: its first placement of a job takes the first count that fits
# (morphling.py:409-453), its scale-up pass then the largest (lines 400-407)
ARTIFACT_3D_GPUS: dict[str, tuple[int, ...]] = {
    "llama7": (16, 64, 32, 8, 4, 2, 1),
    "llama30": (48, 40, 32, 24),
}


def artifact_3d_gpus(job_type: str) -> tuple[int, ...] | None:
    """The GPU counts the artifact places a job of this model on, in its order of trial, or None:
    one node, data-parallel."""
    return ARTIFACT_3D_GPUS.get(job_type)
