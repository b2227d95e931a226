"""Assemble and run the service: store, backend, runtime loop and HTTP API."""

from __future__ import annotations

import errno
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from quanta.errors import QuantaError
from quanta.model.presets import resolve_cluster
from quanta.perf.catalog_model import CatalogModel
from quanta.policies import make_policy
from quanta.runtime.accounts import RunAs, check_state_folder, open_private, secure_state
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
    users_file: Path | None = None      # the users file (None: $QUANTA_USERS, else STATE/users.yaml)
    queues: Path | None = None          # a queues file (docs/queues.md): the policy under its quotas


def build(cfg: ServiceConfig):
    """(store, runtime, app, admin token path) for a configuration."""
    if cfg.backend not in BACKENDS:       # (before the state folder is made or Ray started)
        raise QuantaError(f"unknown backend '{cfg.backend}' (known: {', '.join(BACKENDS)})",
                          field="--backend")
    if cfg.backend == "ray" and cfg.cluster != "auto":
        raise QuantaError("with the Ray backend the cluster is what the Ray nodes offer "
                          "(leave --cluster auto)", field="--cluster")
    if cfg.backend != "ray" and cfg.ray_address:   # (ignored: the jobs ran here)
        raise QuantaError("is the address of the Ray backend's cluster: give --backend ray too",
                          field="--ray-address")
    if cfg.backend == "ray" and cfg.ray_address:   # (a Ray address no one answers at: before
        from quanta.runtime.backends.ray import check_address   # the state folder is made)
        check_address(cfg.ray_address)
    policy = make_policy(cfg.policy)
    tree = None
    if cfg.queues is not None:
        from quanta.queues.spec import load_queues
        tree = load_queues(cfg.queues)         # a bad file: one line, before anything is written
    if cfg.backend == "local" and cfg.cluster != "auto":
        resolve_cluster(cfg.cluster)           # (the same: it made the state folder first)
    state = Path(cfg.state_dir)
    check_state_folder(state)       # (before anything in it is read, made or made private)
    run_as = RunAs.load(state, users_file=cfg.users_file)
    # 0700 (0711 when jobs run as other accounts: they reach their own folder, nothing else)
    secure_state(state, shared=run_as.privileged)
    lock = lock_state(state)
    if run_as.accounts and not run_as.privileged:
        print(f"quanta serve: {run_as.source} maps users to OS accounts, but jobs run as this "
              "service's own account (it runs unprivileged): every token is a shell as that "
              "account (docs/runtime.md, Security model)", file=sys.stderr, flush=True)
    # the backend before the store: a Ray that cannot be reached or started leaves no database
    # (`store` is read only once jobs run)
    user_of = lambda job_id: store.job(int(job_id)).user      # noqa: E731
    if cfg.backend == "local":
        from quanta.runtime.backends.local import LocalBackend, detect_cluster
        backend = LocalBackend(run_as, user_of)
        cluster = resolve_cluster(detect_cluster() if cfg.cluster == "auto" else cfg.cluster)
        if cfg.cluster != "auto" and any(t != "cpu" for t in cluster.types) and \
                detect_cluster().startswith("cpu:"):
            print(f"quanta serve: cluster {cfg.cluster} has GPUs and this machine has none: jobs "
                  "are scheduled as on that cluster and run on the CPU (the job SDK falls back)",
                  file=sys.stderr, flush=True)
    elif cfg.backend == "ray":
        from quanta.runtime.backends.ray import RayBackend, token_auth
        backend = RayBackend(cfg.ray_address or None, run_as, user_of)
        if run_as.privileged and not token_auth():
            print("quanta serve: the Ray cluster runs without token authentication: a job can "
                  "reach it and run code as the Ray nodes' account, whatever account it runs as "
                  "(start Ray with RAY_AUTH_MODE=token; docs/runtime.md, Security model)",
                  file=sys.stderr, flush=True)
        cluster = backend.cluster
    store = Store(state / "quanta.db")
    runtime = Runtime(store, backend, cluster, policy, CatalogModel(), state / "jobs", cfg.poll_s)
    runtime.state_lock = lock          # held for the life of the process
    if tree is not None:
        runtime.use_queues(tree)
    token_path = bootstrap_admin(store, state)
    return store, runtime, create_app(store, runtime, state, run_as), token_path


def lock_state(state: Path):
    """One service per state folder: an exclusive lock, released when the process ends (even by
    kill -9)."""
    import fcntl
    f = open(open_private(state / "serve.lock", os.O_RDWR | os.O_APPEND), "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        raise QuantaError(f"another quanta serve uses this state folder (pid {f.read().strip()})",
                          source=str(state)) from None
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()
    return f


def check_port(host: str, port: int) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as err:             # a name that is no address here, or a port in use
            address = isinstance(err, socket.gaierror) or err.errno == errno.EADDRNOTAVAIL
            raise QuantaError(f"cannot listen on {host}:{port} ({err.strerror})",
                              field="--host" if address else "--port") from None
