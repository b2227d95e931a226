"""`sia-sim`: the world of Sia's simulator (siasosp23/artifacts, sia-simulator @ aaf7a0d).

Everything here is read from that code; paths are relative to sia-simulator/.
- Restarts: every change of a job's placement, its first start included, stops it for its
  application's checkpoint-restore time: cifar10 50 s, deepspeech2 25 s, bert 120 s, yolov3 80 s,
  imagenet 250 s, ncf 15 s, others 30 s (applications.py:58-71; job.py `reallocate` and
  `migrate` set `rescale_time` whenever the placement changes, the first time too).
- Throughput: every job runs slower than its profile by its application's calibration slowdown
  ("fitted to real-world data"): cifar10 1.8, imagenet 1.2, yolov3 1.2, bert 1.2,
  deepspeech2 1.2, ncf 1.5 (simulator_config.py SLOWDOWNS; job.py `calibration_factor` =
  1 / slowdown multiplies the goodput in `step`, and Gavel's throughputs in `get_throughputs`).
- Goodput, epochs and completion: the gradient statistics of the current epoch at the batch in
  use, progress counted in M0 steps, a job done at the end of its last epoch (job.py `step`,
  applications.py `get_grad_stats`, `get_progress`). Quanta's goodput model does the same in
  every world (GoodputPerf); the throughput itself is Quanta's fitted model, where Sia's
  simulator interpolates the measured placements (a documented difference).
- NCF under Sia: global batch 32,768 and rigid at 1 GPU (cluster.py:71-73 sets the batch,
  `get_sia_multi_job_info` caps its replicas at 1 and marks it rigid).
- Rounds and policies as in the paper's runs (run_experiment.sh): Sia every 60 s with p = -0.5,
  lambda_n = 1.1 and the 2x cap shared across types (--share_max_replicas); Gavel
  (max_sum_throughput_perf, simulator_config.py `gavel_default_policy`) every 360 s; Pollux
  heterogeneity-unaware every 60 s with p = -1. Quanta's defaults for these policies already
  are these values; they are pinned here so that a change of default does not move the replay.
"""

from __future__ import annotations

from typing import Sequence

from quanta.model.job import JobSpec
from quanta.sim.engine import RestartCost
from quanta.worlds import World, world

RESCALE_S = {"cifar10": 50.0, "deepspeech2": 25.0, "bert": 120.0, "yolov3": 80.0,
             "imagenet": 250.0, "ncf": 15.0}
DEFAULT_RESCALE_S = 30.0
SLOWDOWNS = {"cifar10": 1.8, "imagenet": 1.2, "yolov3": 1.2, "bert": 1.2, "deepspeech2": 1.2,
             "ncf": 1.5}
NCF_BATCH = 32768


class SlowedPerf:
    """A performance model whose rates are the base model's divided by each job type's slowdown
    (1 for types not listed); everything else is the base model's."""

    def __init__(self, base, slowdowns: dict[str, float]):
        self.base = base
        self.slowdowns = dict(slowdowns)

    def _f(self, job: JobSpec) -> float:
        return 1.0 / self.slowdowns.get(job.job_type.lower(), 1.0)

    def rate(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None):
        return self._f(job) * self.base.rate(job, gpu_type, num_gpus, num_nodes, consolidated)

    def rate_with(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None, plan=None,
                  cpus=0.0, mem_gb=0.0, net_gbps=0.0):
        from quanta.perf.base import rate_with
        return self._f(job) * rate_with(self.base, job, gpu_type, num_gpus, num_nodes,
                                        consolidated, plan, cpus, mem_gb, net_gbps)

    def rate_matrix(self, jobs, types):
        import numpy as np
        f = np.array([self._f(j) for j in jobs])
        return self.base.rate_matrix(jobs, types) * f[:, None]

    def shared_rate(self, job, other, gpu_type, num_gpus, num_nodes=1, consolidated=None,
                    mode="pack", **kw):
        return self._f(job) * self.base.shared_rate(job, other, gpu_type, num_gpus, num_nodes,
                                                    consolidated, mode, **kw)

    def __getattr__(self, name):          # provenance, phase_fractions, work_steps, ...
        return getattr(self.base, name)


def _prepare(policy: str, specs: Sequence[JobSpec]) -> list[JobSpec]:
    if policy != "sia":
        return list(specs)
    return [s.with_(batch_size=NCF_BATCH, num_gpus=1, min_gpus=1, max_gpus=1)
            if s.job_type.lower() == "ncf" else s for s in specs]


@world("sia-sim")
def sia_sim() -> World:
    return World(
        "sia-sim", "Sia's simulator: per-application restart delays (first start too) and "
                   "calibration slowdowns, NCF rigid at batch 32768 under Sia, the paper's rounds",
        restart=lambda _delay: RestartCost(DEFAULT_RESCALE_S, RESCALE_S, first_start_as_restart=True),
        perf=lambda base: SlowedPerf(base, SLOWDOWNS),
        policy_params={"sia": "interval=60,p=-0.5,lambda_n=1.1,share_max=true",
                       "pollux": "interval=60,p=-1,aware=false",
                       "gavel-throughput": "interval=360"},
        prepare=_prepare,
        restart_fixed=True,
        notes=("world sia-sim: restart delay per application (cifar10 50 s, deepspeech2 25 s, "
               "bert 120 s, yolov3 80 s, imagenet 250 s, ncf 15 s), charged at the first start "
               "too; throughput divided by Sia's calibration slowdowns (1.2-1.8)",))
