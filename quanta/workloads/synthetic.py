"""Seeded synthetic workloads: Gavel-style Poisson arrivals over the catalog's job types.

Gavel's generator (as described in its artifact): job type uniform over its 26 types; run time
60 * 10**U(1.5, 3) s with probability 0.8, else 60 * 10**U(3, 4) s; scale factor from the Philly
distribution (1: 83%, 2: 3%, 4: 3%, 8: 10%, 16: 1%, capped) when multi-GPU jobs are on.
"""

from __future__ import annotations

import numpy as np

from quanta.model.job import JobSpec, Trace
from quanta.workloads.catalog import drawable_types


def gavel_duration(rng: np.random.Generator) -> float:
    if rng.random() >= 0.8:
        return 60.0 * 10 ** rng.uniform(3, 4)
    return 60.0 * 10 ** rng.uniform(1.5, 3)


def philly_scale_factor(rng: np.random.Generator, max_sf: int = 8) -> int:
    r = rng.random()
    sf = 1 if r < 0.83 else 2 if r < 0.86 else 4 if r < 0.89 else 8 if r < 0.99 else 16
    return min(sf, max_sf)


def gavel_poisson(num_jobs: int, jobs_per_hour: float, *, seed: int = 0, multi_gpu: bool = True,
                  max_scale_factor: int = 8) -> Trace:
    rng = np.random.default_rng([seed, 0x6A7E1])
    types = drawable_types()
    t = 0.0
    jobs = []
    for i in range(num_jobs):
        if i:
            t += rng.exponential(3600.0 / jobs_per_hour)
        jt = types[int(rng.integers(len(types)))]
        sf = philly_scale_factor(rng, max_scale_factor) if multi_gpu else 1
        jobs.append(JobSpec(f"syn-{i:06d}", t, sf, jt, duration_s=gavel_duration(rng)))
    return Trace(jobs, name=f"gavel-poisson-{jobs_per_hour:g}ph", source="synthetic",
                 format="synthetic",
                 notes=[f"synthetic Gavel-style workload: {num_jobs} jobs, Poisson arrivals at "
                        f"{jobs_per_hour:g} jobs/hour, seed {seed}"])
