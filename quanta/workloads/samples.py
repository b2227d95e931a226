"""Small samples of real public traces bundled with the package (see data/traces/PROVENANCE.md)."""

from __future__ import annotations

from pathlib import Path

from quanta.errors import QuantaError
from quanta.paths import TRACES_DIR

# name -> (file name under quanta/data/traces, format, description)
SAMPLES: dict[str, tuple[str, str, str]] = {
    "philly": ("philly_sample.csv", "normalized",
               "Philly 2017: 2,000 consecutive jobs (29.5 h of a busy period), 1-32 GPUs, 9 VCs"),
    "tiresias-60": ("tiresias_60_job.csv", "tiresias",
                    "Tiresias' 60-job example: 10 CNN models, 1-8 GPUs, 2-30 min jobs over 30 min"),
    "sia-philly-1": ("sia_philly_workload-1.csv", "pollux",
                     "Sia's Philly-derived workload 1: 160 jobs over 7.7 h, 5 applications, "
                     "4-16 GPUs, no durations"),
    "sia-philly-2": ("sia_philly_workload-2.csv", "pollux",
                     "Sia's Philly-derived workload 2: 160 jobs over 8 h, Pollux/Sia applications"),
    "sia-saturn-1": ("sia_saturn_workload-1.csv", "pollux",
                     "Sia's Saturn (Helios-derived) workload 1: 160 jobs over 8 h, Pollux/Sia applications"),
    "gavel-small": ("gavel_small_test.trace", "gavel",
                    "Gavel physical-cluster small_test: 20 jobs at time 0, new 10-column layout"),
    "gavel-msr": ("gavel_msr_0e4a51_300.trace", "gavel",
                  "Gavel's Philly replay of VC 0e4a51, first 300 jobs (21 days), old 7 columns"),
    "openb": ("openb_pod_list_sample.csv", "openb",
              "Alibaba openb pod list, first 1,000 pods (805 GPU pods, 120 days): GPU sharing"),
    "rubick-base": ("rubick_workload-base.csv", "rubick",
                    "Rubick's Base workload: 406 LLM/vision jobs over 13.2 h with execution plans"),
}

# Bundled files that are not job traces (cluster descriptions).
OPENB_NODES = "openb_node_list_gpu_node.csv"


def sample_path(name: str) -> Path:
    """Path of a bundled sample, by SAMPLES name or by its file name (e.g. OPENB_NODES)."""
    entry = SAMPLES.get(name)
    filename = entry[0] if entry else name
    path = TRACES_DIR / filename
    if "/" in filename or "\\" in filename or not path.is_file():
        known = ", ".join(SAMPLES)
        raise QuantaError(f"no bundled trace '{name}' (known: {known})")
    return path
