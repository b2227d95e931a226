"""Assemble and run the service: store, backend, runtime loop and HTTP API."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quanta.errors import QuantaError
from quanta.model.presets import resolve_cluster
from quanta.perf.catalog_model import CatalogModel
from quanta.policies import make_policy
from quanta.runtime.controller import Runtime
from quanta.service.app import bootstrap_admin, create_app
from quanta.service.store import Store

DEFAULT_PORT = 8472
BACKENDS = ("local", "ray")


@dataclass
class ServiceConfig:
    state_dir: Path = Path("quanta-state")
    policy: str = "fifo"
    cluster: str = "auto"
    backend: str = "local"
    poll_s: float = 0.25
    ray_address: str = ""


def make_backend(cfg: ServiceConfig, cluster):
    if cfg.backend == "local":
        from quanta.runtime.backends.local import LocalBackend
        return LocalBackend()
    if cfg.backend == "ray":
        from quanta.runtime.backends.ray import RayBackend
        return RayBackend(cluster, address=cfg.ray_address or None)
    raise QuantaError(f"unknown backend '{cfg.backend}' (known: {', '.join(BACKENDS)})",
                      field="backend")


def build(cfg: ServiceConfig):
    """(store, runtime, app, admin token path) for a configuration."""
    state = Path(cfg.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    spec = cfg.cluster
    if spec == "auto":
        if cfg.backend == "ray":
            from quanta.runtime.backends.ray import detect_cluster
            spec = detect_cluster(cfg.ray_address or None)
        else:
            from quanta.runtime.backends.local import detect_cluster
            spec = detect_cluster()
    cluster = resolve_cluster(spec)
    policy = make_policy(cfg.policy)
    store = Store(state / "quanta.db")
    backend = make_backend(cfg, cluster)
    runtime = Runtime(store, backend, cluster, policy, CatalogModel(), state / "jobs", cfg.poll_s)
    token_path = bootstrap_admin(store, state)
    return store, runtime, create_app(store, runtime, state), token_path
