"""Pollux/Sia goodput model: GOODPUT = THROUGHPUT x statistical EFFICIENCY (ALGORITHMS.md 4a, 4b).

- THROUGHPUT (samples/s) = global batch / T_iter, with T_iter from `goodput_fit` fitted per
  (application, GPU type) on the bundled Sia/Pollux profiles -> provenance "fitted".
- A GPU type without a placement profile but with a 1-GPU seed profile gets the model of a
  profiled type scaled by the ratio of 1-GPU ("atomic") throughputs (largest local batch / its
  step time) -> provenance "bootstrapped" (Sia).
- EFFICIENCY(M) = gain / r with r = M / M0, gain = (var + sqr) / (var / r + sqr), where sqr/var
  are the gradient statistics of the current epoch at batch M (interpolated between the
  application's validation runs, as Sia's simulator does). It is 1 at M = M0 and falls as M grows.
  The statistics change from epoch to epoch, so a job's goodput does too (`GoodputPerf`).
- `best_config` re-picks (atomic local batch m, accumulation steps s) for an allocation as the
  Pollux agent does: 50 global batches on a geometric grid from max(M0, K * min_local) to the max
  batch, s = ceil(local / m_max) - 1 (at least 1 on a single GPU beyond M0), m = ceil(local/(s+1)).
  When K * min_local exceeds the max batch the grid is that one batch (the job cannot shrink its
  per-GPU batch further); the answer is then its goodput, never a silent 0. `fixed_config`
  splits the user's own batch instead (jobs whose scheduler does not tune batch sizes).

`GoodputPerf` exposes this as a PerfModel; see its docstring for the unit of `rate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from math import ceil
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np

from quanta.errors import QuantaError
from quanta.model.gpu import gpu_type as gpu_spec
from quanta.model.job import JobSpec
from quanta.perf.base import ADAPTIVE_BATCH, Provenance, is_adaptive, rates_on
from quanta.perf.goodput_data import (APPS, GPUS_PER_NODE, MAX_LOCAL_OVERRIDE, SIA_POLLUX_DIR,
                                      canonical_type, load_samples, load_validation,
                                      profiled_types, seed_atomic, validation_batches)
from quanta.perf.goodput_fit import ThroughputParams, fit_throughput, iteration_time

__all__ = ["ThroughputParams", "iteration_time", "fit_throughput", "GradientNoise", "efficiency",
           "AppProfile", "GoodputModel", "GoodputCatalog", "BestConfig", "build_app_model",
           "load_goodput_catalog", "bootstrap", "GoodputPerf"]

GRID_POINTS = 50
_EPS = 1e-8


def efficiency(noise_sqr, noise_var, init_batch, global_batch):
    """Pollux's statistical efficiency of global batch M relative to M0 (vectorised)."""
    sqr = np.asarray(noise_sqr, dtype=float)
    var = np.asarray(noise_var, dtype=float)
    r = np.asarray(global_batch, dtype=float) / float(init_batch)
    denom = var / r + sqr
    gain = np.where(denom > 0, (var + sqr) / np.where(denom > 0, denom, 1.0), 1.0)
    return gain / r


@dataclass(frozen=True)
class GradientNoise:
    """Gradient statistics per epoch and per validated global batch size.

    `batches[b]` are the global batches the application has a validation run at (ascending; the
    first is M0); `sqr[b, e]`, `var[b, e]` that run's statistics during epoch e. `ends[e]` is the
    fraction of training done at the end of epoch e, from the epoch boundaries common to every run
    (the least progress any run reports at that epoch, in M0 steps, over the same at the last
    epoch). Statistics of epoch e hold for progress in [ends[e-1], ends[e]). At a batch between two
    validated ones they are interpolated linearly, as Sia's simulator does
    (applications.py get_grad_stats; clipped to the validated range)."""
    ends: np.ndarray
    sqr: np.ndarray
    var: np.ndarray
    batches: np.ndarray = field(default_factory=lambda: np.ones(1))

    def __post_init__(self) -> None:
        if np.ndim(self.sqr) == 1:      # one run (M0) only
            object.__setattr__(self, "sqr", np.asarray(self.sqr, float)[None, :])
            object.__setattr__(self, "var", np.asarray(self.var, float)[None, :])

    @classmethod
    def from_validation(cls, progress, grad_sqr, grad_var) -> "GradientNoise":
        progress = np.asarray(progress, dtype=float)
        return cls(progress / progress[-1], np.asarray(grad_sqr, float),
                   np.asarray(grad_var, float))

    @classmethod
    def from_runs(cls, runs: dict[int, dict[str, np.ndarray]]) -> tuple["GradientNoise", float]:
        """From validation runs {global batch: {progress, grad_sqr, grad_var}}; returns the noise
        and the work to the end of the last common epoch (M0 steps)."""
        batches = np.array(sorted(runs), dtype=float)
        epochs = min(len(r["progress"]) for r in runs.values())
        prog = np.array([runs[b]["progress"][:epochs] for b in sorted(runs)])
        ends = prog.min(axis=0)
        sqr = np.array([runs[b]["grad_sqr"][:epochs] for b in sorted(runs)], dtype=float)
        var = np.array([runs[b]["grad_var"][:epochs] for b in sorted(runs)], dtype=float)
        return cls(ends / ends[-1], sqr, var, batches), float(ends[-1])

    @property
    def epochs(self) -> int:
        return len(self.ends)

    def epoch_of(self, progress):
        """Epoch index at `progress` (fraction of training done)."""
        return np.clip(np.searchsorted(self.ends, progress, side="right"), 0, len(self.ends) - 1)

    def at_epoch(self, epoch, batch=None):
        """(sqr, var) during `epoch` at global batch `batch` (None: the first run's, M0)."""
        e = np.asarray(epoch)
        if batch is None or len(self.batches) == 1:
            return self.sqr[0, e], self.var[0, e]
        bs = self.batches
        b = np.clip(np.asarray(batch, dtype=float), bs[0], bs[-1])
        j = np.clip(np.searchsorted(bs, b, side="right") - 1, 0, len(bs) - 2)
        w = (b - bs[j]) / (bs[j + 1] - bs[j])
        sqr = (1.0 - w) * self.sqr[j, e] + w * self.sqr[j + 1, e]
        var = (1.0 - w) * self.var[j, e] + w * self.var[j + 1, e]
        return sqr, var

    def at(self, progress, batch=None):
        """(sqr, var) at `progress` (fraction of training done, scalar or array)."""
        return self.at_epoch(self.epoch_of(progress), batch)

    def noise_scale(self, progress=0.0):
        sqr, var = self.at(progress)
        return var / sqr


@dataclass(frozen=True)
class AppProfile:
    """The throughput model of one application on one GPU type."""
    app: str
    gpu_type: str
    params: ThroughputParams
    init_batch: int           # M0
    max_batch: int
    min_local: int
    max_local: int            # atomic (per-GPU, per-step) batch limit on this type
    provenance: Provenance
    source: str               # which profile it was fitted on, or what it was bootstrapped from
    gpus_per_node: int = 8
    max_profiled_replicas: int = 0
    scale: float = 1.0        # bootstrapped: the atomic-throughput ratio applied

    def throughput(self, num_nodes, num_replicas, local_bsz, accum=0):
        """Samples/s: global batch K * m * (s + 1) over T_iter (vectorised)."""
        k, m, s = (np.asarray(v, dtype=float) for v in (num_replicas, local_bsz, accum))
        return k * m * (s + 1) / iteration_time(self.params, num_nodes, k, m, s)


class BestConfig(NamedTuple):
    local_bsz: int      # atomic batch per GPU per step (m); global batch = K * m * (s + 1)
    accum_steps: int    # s
    goodput: float      # useful samples/s (throughput x efficiency)


@dataclass
class GoodputModel:
    """Goodput of one application on every GPU type it is profiled (or bootstrappable) on."""
    app: str
    init_batch: int
    max_batch: int
    noise: GradientNoise
    profiles: dict[str, AppProfile]
    seed: dict[str, tuple[float, float]] = field(default_factory=dict)
    work: float = 0.0   # M0 steps to the end of training: the last epoch boundary common to every
                        # validation run (Sia's completion: applications.py get_progress)
    _boot: dict[str, AppProfile] = field(default_factory=dict, repr=False)

    # -- per-type profile ------------------------------------------------------------------
    def profile(self, gpu_type: str) -> AppProfile:
        t = canonical_type(gpu_type)
        hit = self.profiles.get(t) or self._boot.get(t)
        if hit is None:
            sources = [s for s in self.profiles if s in self.seed]
            if t not in self.seed or not sources:
                raise QuantaError(
                    f"goodput model: application '{self.app}' has no profile on GPU type '{t}' "
                    f"and cannot be bootstrapped to it (profiled: {sorted(self.profiles)}; "
                    f"1-GPU seed profiles: {sorted(self.seed)})")
            # Smallest extrapolation: the profiled type whose 1-GPU throughput is closest.
            target = self.atomic_throughput(t)
            src = min(sorted(sources),
                      key=lambda s: abs(np.log(self.atomic_throughput(s) / target)))
            hit = self._boot[t] = self.bootstrap(src, t)
        return hit

    def provenance(self, gpu_type: str) -> Provenance:
        return self.profile(gpu_type).provenance

    def atomic_throughput(self, gpu_type: str) -> float:
        """Samples/s of the largest 1-GPU batch in the seed profile (Sia's bootstrap basis)."""
        t = canonical_type(gpu_type)
        if t not in self.seed:
            raise QuantaError(f"goodput model: no 1-GPU seed profile of '{self.app}' on '{t}'")
        m, step = self.seed[t]
        return m / step

    def bootstrap(self, from_type: str, to_type: str) -> AppProfile:
        """The fitted model of `from_type` carried to `to_type`: every time term divided by the
        atomic-throughput ratio, so throughput (and goodput, at the same configuration and the
        same batch limits) is exactly ratio x that of `from_type`."""
        src = canonical_type(from_type)
        dst = canonical_type(to_type)
        base = self.profiles.get(src)
        if base is None:
            raise QuantaError(f"goodput model: cannot bootstrap '{self.app}' from '{src}': "
                              f"no fitted profile there (fitted: {sorted(self.profiles)})")
        ratio = self.atomic_throughput(dst) / self.atomic_throughput(src)
        return AppProfile(self.app, dst, base.params.scaled(ratio), base.init_batch,
                          base.max_batch, base.min_local, base.max_local,
                          Provenance.BOOTSTRAPPED,
                          f"bootstrapped from {src} x {ratio:.4f} (1-GPU seed throughput ratio)",
                          GPUS_PER_NODE.get(dst, base.gpus_per_node),
                          base.max_profiled_replicas, ratio)

    # -- throughput, efficiency, goodput -----------------------------------------------------
    def throughput(self, gpu_type, num_nodes, num_replicas, local_bsz, accum=0):
        return self.profile(gpu_type).throughput(num_nodes, num_replicas, local_bsz, accum)

    def efficiency(self, global_batch, progress=0.0, epoch=None):
        """Statistical efficiency of `global_batch` at `progress` (or during `epoch`), from the
        gradient statistics of that batch (interpolated between validation runs)."""
        e = self.noise.epoch_of(progress) if epoch is None else epoch
        sqr, var = self.noise.at_epoch(e, global_batch)
        return efficiency(sqr, var, self.init_batch, global_batch)

    def goodput(self, gpu_type, num_nodes, num_replicas, local_bsz, accum=0, progress=0.0,
                epoch=None):
        m = np.asarray(num_replicas, float) * np.asarray(local_bsz, float) * (np.asarray(accum) + 1)
        return (self.throughput(gpu_type, num_nodes, num_replicas, local_bsz, accum)
                * self.efficiency(m, progress, epoch))

    def candidates(self, gpu_type: str, num_replicas: int, max_batch: int | None = None,
                   max_local: int | None = None):
        """The Pollux grid for K replicas: (atomic m, s, global batch) arrays. `max_batch` (a
        scheduler's own cap, below the application's largest batch): the grid runs from
        max(M0, K * min_local) to that cap, either way round, as Pollux's `optimize` does
        (goodput.py np.geomspace(min_batch_size, max_batch_size)). `max_local`: the largest
        atomic batch, if not the type's (Sia's simulator: the placement's)."""
        p = self.profile(gpu_type)
        k = int(num_replicas)
        lo = max(p.init_batch, k * p.min_local)
        hi = max(p.max_batch, lo) if max_batch is None else min(max_batch, p.max_batch)
        batch = np.geomspace(lo, hi, GRID_POINTS)
        local = batch / k
        s = np.ceil(local / (max_local or p.max_local) - _EPS) - 1
        if k == 1:
            s = np.where(local > p.init_batch + _EPS, np.maximum(s, 1), s)
        s = s.astype(int)
        m = np.ceil(local / (s + 1) - _EPS).astype(int)
        return m, s, k * m * (s + 1)

    def best_config(self, gpu_type: str, num_nodes: int, num_replicas: int,
                    progress: float = 0.0, noise: tuple[float, float] | None = None,
                    epoch: int | None = None, max_batch: int | None = None,
                    max_local: int | None = None) -> BestConfig:
        """Goodput-maximising (m, s) on K = num_replicas GPUs over num_nodes nodes, at `progress`
        (or during `epoch`), each candidate batch at its own gradient statistics. `noise`
        overrides the (sqr, var) statistics for every candidate. `max_batch`: tune only up to
        that global batch (see `candidates`); an atomic batch outside the type's
        [min_local, max_local] is then worth 0, as in Pollux's `optimize`. `max_local`: the
        largest atomic batch, if not the type's (see `candidates`)."""
        if num_replicas < 1:
            raise ValueError("best_config needs at least one replica")
        p = self.profile(gpu_type)
        m, s, batch = self.candidates(gpu_type, num_replicas, max_batch, max_local)
        if noise is not None:
            sqr, var = noise
        else:
            sqr, var = self.noise.at_epoch(self.noise.epoch_of(progress) if epoch is None
                                           else epoch, batch)
        good = (p.throughput(num_nodes, num_replicas, m, s)
                * efficiency(sqr, var, p.init_batch, batch))
        if max_batch is not None:
            good = np.where((m >= p.min_local) & (m <= (max_local or p.max_local)), good, 0.0)
        i = int(np.argmax(good))
        return BestConfig(int(m[i]), int(s[i]), float(good[i]))

    def fixed_config(self, gpu_type: str, num_nodes: int, num_replicas: int, batch: int,
                     progress: float = 0.0, epoch: int | None = None) -> BestConfig:
        """(m, s) and goodput of the user's own global batch on K replicas, not re-tuned (the
        split Sia's simulator gives a job whose batch-size tuning is off, job.py
        update_local_bsz): local = ceil(batch / K); s = ceil(local / max atomic batch) - 1, at
        least 1 on one GPU beyond M0; m = ceil(local / (s + 1)), at most max batch / (K (s + 1))."""
        p = self.profile(gpu_type)
        k = int(num_replicas)
        m, s = split_batch(batch, k, p.max_local, p.init_batch, p.max_batch)
        good = float(self.goodput(gpu_type, num_nodes, k, m, s, progress, epoch))
        return BestConfig(m, s, good)


def split_batch(batch: int, k: int, max_local: int, init_batch: int, max_batch: int, *,
                always_step: bool = False, atomic_cap: int | None = None) -> tuple[int, int]:
    """(atomic batch m, accumulation steps s) of a global batch kept on k replicas, as Sia's
    simulator splits it (job.py:366-385 update_local_bsz): local = ceil(batch / k);
    s = ceil(local / max_local) - 1, at least 1 on one GPU beyond the initial batch (or whatever
    the batch, `always_step`: its Gavel baseline's estimate, gavel.py:531-532); m = ceil(local /
    (s + 1)), at most `atomic_cap` (its memory cap) and max_batch / (k (s + 1))."""
    local = ceil(batch / k - _EPS)
    s = ceil(local / max_local - _EPS) - 1
    if k == 1 and (always_step or batch > init_batch):
        s = max(1, s)
    m = ceil(local / (s + 1) - _EPS)
    if atomic_cap is not None:
        m = min(m, atomic_cap)
    return max(1, min(m, int(max_batch / (k * (s + 1))))), s


class Observation(NamedTuple):
    """What a job measures training on an allocation (what Sia's and Pollux's agents report to
    the scheduler, sia-simulator job.py update_params): its atomic batch and accumulation steps,
    the optimiser-step and synchronisation times, and the gradient statistics at its batch."""
    local_bsz: int
    accum_steps: int
    step_time: float
    sync_time: float
    grad_sqr: float
    grad_var: float


def _observe(model: "GoodputModel", gpu_type: str, num_nodes: int, num_replicas: int,
             epoch: int) -> Observation:
    p = model.profile(gpu_type)
    best = model.best_config(gpu_type, num_nodes, num_replicas, epoch=epoch)
    m, s = best.local_bsz, best.accum_steps
    step = float(iteration_time(p.params, num_nodes, num_replicas, m, 0))
    grad = float(p.params.alpha_c + p.params.beta_c * m)
    sqr, var = model.noise.at_epoch(epoch, num_replicas * m * (s + 1))
    return Observation(m, s, step, max(step - grad, 0.0), float(sqr), float(var))


@dataclass
class GoodputCatalog:
    models: dict[str, GoodputModel]

    def __getitem__(self, app: str) -> GoodputModel:
        try:
            return self.models[app]
        except KeyError:
            raise QuantaError(f"goodput model: unknown application '{app}' "
                              f"(known: {sorted(self.models)})") from None

    def __contains__(self, app: str) -> bool:
        return app in self.models

    @property
    def apps(self) -> list[str]:
        return sorted(self.models)

    def bootstrap(self, app: str, from_type: str, to_type: str) -> AppProfile:
        return self[app].bootstrap(from_type, to_type)


def build_app_model(app: str, types: Sequence[str] | None = None,
                    data_dir: Path = SIA_POLLUX_DIR) -> GoodputModel:
    """Fit `app` on its placement profiles (all profiled types, or only `types`)."""
    batches = validation_batches(app, data_dir)
    m0, max_batch = batches[0], batches[-1]
    noise, work = GradientNoise.from_runs({b: load_validation(app, b, data_dir) for b in batches})
    wanted = profiled_types(app, data_dir) if types is None else [canonical_type(t) for t in types]
    profiles = {}
    for t in wanted:
        smp = load_samples(app, t, data_dir)
        params = fit_throughput(smp.num_nodes, smp.num_replicas, smp.local_bsz,
                                smp.step_time, smp.sync_time, smp.per_node)
        max_local = MAX_LOCAL_OVERRIDE.get((app, t), int(smp.local_bsz.max()))
        profiles[t] = AppProfile(app, t, params, m0, max_batch, int(smp.local_bsz.min()),
                                 max_local, Provenance.FITTED,
                                 f"fitted on {len(smp)} samples of sia_pollux/{app} ({t})",
                                 GPUS_PER_NODE.get(t, 8), int(smp.num_replicas.max()))
    return GoodputModel(app, m0, max_batch, noise, profiles, seed_atomic(app, data_dir), work=work)


@lru_cache(maxsize=1)
def load_goodput_catalog() -> GoodputCatalog:
    """Goodput models of every bundled application (fitted once per process)."""
    return GoodputCatalog({app: build_app_model(app) for app in APPS})


def bootstrap(app: str, from_type: str, to_type: str) -> AppProfile:
    return load_goodput_catalog().bootstrap(app, from_type, to_type)


def adaptive_batch_up_to(max_batch: int | None) -> str:
    """The plan ADAPTIVE_BATCH with the batch tuned only up to `max_batch` (None: no cap, the
    plain ADAPTIVE_BATCH). For a scheduler's *estimates* (Sia's simulator tunes its policy's
    goodput up to the job's requested batch, job.py get_speedup_fn), not for execution."""
    return ADAPTIVE_BATCH if max_batch is None else f"{ADAPTIVE_BATCH}<={int(max_batch)}"


def adaptive_cap(plan) -> int | None:
    """The batch cap of an adaptive plan (None: none)."""
    _, sep, cap = plan.partition("<=")
    return int(cap) if sep else None


ESTIMATE_FROM = "v100"   # the profiled type unprofiled GPU types are estimated from


class GoodputPerf:
    """PerfModel over the goodput catalog, for jobs whose `job_type` is a Pollux/Sia application.

    Unit of `rate`: steps of the job's initial global batch M0 per second of *useful* progress,
    i.e. goodput / M0 (Sia's simulator counts progress the same way: gain / iteration time). On
    one GPU at M0 this is the plain steps/s; a larger batch counts only as far as it helps
    statistically.
    - Progress: statistical efficiency uses the gradient statistics of the epoch the job is in
      (`JobSpec.phase`, kept by the drivers; `phase_fractions` gives the epoch ends) at the global
      batch in use, so a job is re-rated as it trains (early epochs have little gradient noise, so
      big batches help little; later ones more).
    - Batch size: by default a job trains at its own global batch (`JobSpec.batch_size`, else M0)
      split over its GPUs (`fixed_config`); with the plan ADAPTIVE_BATCH (policies that co-adapt
      batch sizes: sia, pollux) the batch and accumulation are re-tuned for each allocation
      (`best_config`), as Pollux's agent does.
    Jobs of other types go to `fallback` (default: TableModel()).
    `shared_rate` is 0.0 whenever a Pollux/Sia job is involved: Pollux and Sia never share a GPU
    between jobs, so such a job makes no progress on a shared GPU (other pairs: fallback).
    `num_nodes > 1` (or consolidated=False) selects the inter-node synchronisation model;
    `rate_matrix` places each job's GPUs on the fewest nodes of the profiled cluster of that type
    (T4 and RTX 6000: 4 per node; V100, A100, RTX 2080Ti: 8).
    A known application on a GPU type that is neither profiled nor bootstrappable (no 1-GPU seed
    profile, e.g. K80) is estimated from its V100 answer by the generic GPU speed ratio and
    reported as ESTIMATED. Answers are cached: a repeated query is a dict lookup.
    """

    def __init__(self, catalog: GoodputCatalog | None = None, fallback=None):
        self.catalog = catalog if catalog is not None else load_goodput_catalog()
        if fallback is None:
            from quanta.perf.table import TableModel
            fallback = TableModel()
        self.fallback = fallback
        self._cache: dict[tuple, float] = {}

    def _app(self, job: JobSpec) -> str | None:
        t = job.job_type
        if t in self.catalog:
            return t
        low = t.lower()
        return low if low in self.catalog else None

    def rate(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
             consolidated: bool | None = None) -> float:
        """At the job's own batch (see the class docstring)."""
        return self.rate_with(job, gpu_type, num_gpus, num_nodes, consolidated)

    def rate_with(self, job: JobSpec, gpu_type: str, num_gpus: int, num_nodes: int = 1,
                  consolidated: bool | None = None, plan=None, cpus: float = 0.0,
                  mem_gb: float = 0.0, net_gbps: float = 0.0) -> float:
        """At the job's own batch, or re-tuned for the allocation with plan ADAPTIVE_BATCH. CPU
        threads, host memory and network are not modelled here."""
        app = self._app(job)
        if app is None:
            fb = getattr(self.fallback, "rate_with", None)
            if fb is None or plan is None or is_adaptive(plan):
                return self.fallback.rate(job, gpu_type, num_gpus, num_nodes, consolidated)
            return fb(job, gpu_type, num_gpus, num_nodes, consolidated, plan)
        multi = num_nodes > 1 or consolidated is False
        adaptive = is_adaptive(plan)
        batch = 0 if adaptive else (job.batch_size or self.catalog[app].init_batch)
        cap = adaptive_cap(plan) if adaptive else None
        key = (app, gpu_type, num_gpus, multi, job.phase, batch, cap)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._rate(app, gpu_type, num_gpus, multi, job.phase, batch,
                                                cap)
        return hit

    def _rate(self, app: str, gpu_type: str, num_gpus: int, multi: bool, phase: int,
              batch: int, cap: int | None = None) -> float:
        if num_gpus <= 0:
            return 0.0
        model = self.catalog[app]
        nodes = 2 if (multi and num_gpus > 1) else 1
        if not self._profiled(app, gpu_type):
            # neither profiled nor bootstrappable (e.g. K80): the V100 answer scaled by the
            # generic GPU speed ratio, reported as ESTIMATED (never a silent 0)
            ratio = gpu_spec(gpu_type).speed / gpu_spec(ESTIMATE_FROM).speed
            return ratio * self._rate(app, ESTIMATE_FROM, num_gpus, multi, phase, batch, cap)
        epoch = min(phase, model.noise.epochs - 1)
        if batch:
            best = model.fixed_config(gpu_type, nodes, num_gpus, batch, epoch=epoch)
        else:
            best = model.best_config(gpu_type, nodes, num_gpus, epoch=epoch,
                                     max_batch=None if cap is None
                                     else max(cap, model.init_batch))
        return best.goodput / model.init_batch

    def observe(self, job: JobSpec, gpu_type: str, num_gpus: int,
                num_nodes: int = 1) -> Observation | None:
        """What the job measures training on this allocation at its current epoch, with the batch
        re-tuned (ADAPTIVE_BATCH); None for jobs of other types or types with no model."""
        app = self._app(job)
        if app is None or num_gpus <= 0 or not self._profiled(app, gpu_type):
            return None
        model = self.catalog[app]
        nodes = 2 if num_nodes > 1 and num_gpus > 1 else 1
        return _observe(model, gpu_type, nodes, num_gpus, min(job.phase, model.noise.epochs - 1))

    def phase_fractions(self, job: JobSpec) -> np.ndarray | None:
        """Ends of the job's epochs as fractions of its work (rates change at each)."""
        app = self._app(job)
        if app is None:
            fn = getattr(self.fallback, "phase_fractions", None)
            return None if fn is None else fn(job)
        return self.catalog[app].noise.ends

    def _profiled(self, app: str, gpu_type: str) -> bool:
        try:
            self.catalog[app].profile(gpu_type)
            return True
        except QuantaError:
            return False

    def work_steps(self, job: JobSpec) -> float | None:
        """Work to the target metric in `rate`'s unit (M0 steps), from the app's validation
        profile (Pollux/Sia's end of training); None for job types it does not know."""
        app = self._app(job)
        return None if app is None else self.catalog[app].work

    def provenance(self, job: JobSpec, gpu_type: str) -> Provenance:
        app = self._app(job)
        if app is None:
            return self.fallback.provenance(job, gpu_type)
        if not self._profiled(app, gpu_type):
            return Provenance.ESTIMATED
        return self.catalog[app].provenance(gpu_type)

    def profile(self, job: JobSpec, gpu_type: str) -> AppProfile:
        app = self._app(job)
        if app is None:
            raise QuantaError(f"goodput model: '{job.job_type}' is not a Pollux/Sia application")
        return self.catalog[app].profile(gpu_type)

    per_node_rates = True       # (a job over two nodes is rated apart: see rate_matrix)

    def rate_matrix(self, jobs: Sequence[JobSpec], types: Sequence[str],
                    per_node: Sequence[int] | None = None) -> np.ndarray:
        """`per_node`: GPUs per node of each type (perf.base.consolidated_rates), else those of
        the testbeds the model was fitted on."""
        out = np.empty((len(jobs), len(types)))
        other = [i for i, j in enumerate(jobs) if self._app(j) is None]
        if other:
            out[other] = rates_on(self.fallback, [jobs[i] for i in other], types, per_node)
        mine = set(range(len(jobs))) - set(other)
        for k, t in enumerate(types):
            per_node_k = per_node[k] if per_node is not None else \
                GPUS_PER_NODE.get(canonical_type(t), 8)
            for i in mine:
                n = jobs[i].num_gpus
                out[i, k] = self.rate(jobs[i], t, n, max(1, ceil(n / per_node_k)), True)
        return out

    def shared_rate(self, job: JobSpec, other: JobSpec, gpu_type: str, num_gpus: int,
                    num_nodes: int = 1, consolidated: bool | None = None,
                    mode: str = "pack") -> float:
        if self._app(job) is not None or self._app(other) is not None:
            return 0.0
        return self.fallback.shared_rate(job, other, gpu_type, num_gpus, num_nodes,
                                         consolidated, mode)
