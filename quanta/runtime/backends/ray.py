"""The Ray backend: jobs on an existing multi-node Ray cluster.

A Ray node offers GPUs to Quanta by advertising a custom resource named for their type:
`quanta_<type>: N` (e.g. `ray start --resources '{"quanta_v100": 8}'`, or `quanta_cpu` for CPU
worker slots). The cluster the policies see is built from the alive nodes. Each rank of a job is a
detached Ray actor pinned to its node (node affinity, hard) holding one unit of that resource; the
actor runs the job's command as a subprocess with the same environment as the local backend
(RANK, WORLD_SIZE, MASTER_ADDR = rank 0's node address, ...). Preemption: SIGTERM through the
actors (the ranks checkpoint and exit), then the actors are killed after the grace period. Actors
are named `quanta-<job>-<attempt>-<rank>` in the `quanta` namespace, so a restarted scheduler
adopts them. A node that leaves the Ray cluster is reported lost (its jobs are requeued); a new
node offering the same type and count takes a lost node's place.

Job folders (checkpoints, progress, logs) must be on a filesystem every node sees (on one machine,
as in the tests, they are).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from quanta.errors import QuantaError
from quanta.model.cluster import Cluster, NodeSpec
from quanta.runtime.backends.base import Exit, Launch
from quanta.runtime.backends.local import free_port
from quanta.runtime.launch import rank_env

PREFIX = "quanta_"
NAMESPACE = "quanta"
KILL_MARGIN_S = 5.0


def _ray():
    try:
        import ray
    except ImportError:
        raise QuantaError("the Ray backend needs Ray: pip install 'ray>=2.9'") from None
    return ray


def connect(address: str | None):
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address or "auto", namespace=NAMESPACE, log_to_driver=False,
                 ignore_reinit_error=True)
    return ray


def offered(node: dict) -> tuple[str, int] | None:
    """(GPU type, count) a Ray node offers to Quanta, or None."""
    for key, value in node.get("Resources", {}).items():
        if key.startswith(PREFIX) and value >= 1:
            return key[len(PREFIX):], int(value)
    return None


def _rank_actor_class():
    ray = _ray()

    @ray.remote(num_cpus=0, max_concurrency=4)
    class RankActor:
        """One rank of a job: its process on this node."""

        def __init__(self) -> None:
            self.proc: subprocess.Popen | None = None

        def start(self, command: list[str], env: dict, cwd: str, log: str) -> int:
            out = open(log, "ab", buffering=0)
            self.proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            return self.proc.pid

        def wait(self) -> int:
            return self.proc.wait() if self.proc else -1

        def signal(self, sig: int) -> None:
            if self.proc and self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    pass

    return RankActor


@dataclass
class _Job:
    actors: list
    waits: list                      # ObjectRefs of each rank's wait()
    grace_s: float
    codes: list = field(default_factory=list)
    stop_at: float | None = None
    failed: str = ""


class RayBackend:
    name = "ray"

    def __init__(self, address: str | None = None):
        self.ray = connect(address)
        self.Actor = _rank_actor_class()
        nodes = [n for n in self.ray.nodes() if n["Alive"] and offered(n)]
        if not nodes:
            raise QuantaError("no node of the Ray cluster offers GPUs to Quanta (advertise a "
                              "resource such as quanta_v100: 8 or quanta_cpu: 4)")
        nodes.sort(key=lambda n: n["NodeID"])
        self.node_ids = [n["NodeID"] for n in nodes]
        self.node_addr = [n["NodeManagerAddress"] for n in nodes]
        self.offers = [offered(n) for n in nodes]
        self.cluster = Cluster(tuple(NodeSpec(f"ray-{i}-{nid[:8]}", t, c) for i, (nid, (t, c))
                                     in enumerate(zip(self.node_ids, self.offers))), name="ray")
        self.up = [True] * len(nodes)
        self.jobs: dict[str, _Job] = {}

    # -- launching ---------------------------------------------------------------------------------
    def _actor(self, name: str, node: int, gpu_type: str):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        return self.Actor.options(
            name=name, namespace=NAMESPACE, lifetime="detached",
            scheduling_strategy=NodeAffinitySchedulingStrategy(self.node_ids[node], soft=False),
            resources={PREFIX + gpu_type: 1}).remote()

    def launch(self, job: Launch) -> str:
        workdir = Path(job.workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "exit.json").unlink(missing_ok=True)
        spec = job.as_json(free_port(), self.node_addr[job.ranks[0].node])
        base = {k: v for k, v in os.environ.items()      # the service's tokens are not the job's
                if k not in ("QUANTA_TOKEN", "QUANTA_ADMIN_TOKEN")}
        actors, starts = [], []
        key = job.token or str(job.attempt)      # actor names: found again by the launch token
        for rank, r in enumerate(job.ranks):
            a = self._actor(f"quanta-{job.job_id}-{key}-{rank}", r.node, job.gpu_type)
            log = workdir / ("job.log" if rank == 0 else f"rank-{rank}.log")
            starts.append(a.start.remote(spec["command"], rank_env(spec, rank, base),
                                         job.cwd or str(workdir), str(log)))
            actors.append(a)
        self.ray.get(starts)
        self.jobs[job.job_id] = _Job(actors, [a.wait.remote() for a in actors], job.grace_s,
                                     [None] * len(actors))
        return f"{key}:{len(actors)}"

    def adopt(self, job_id: str, workdir: Path, handle: str, grace_s: float,
              token: str = "") -> bool:
        try:
            key, world_s = handle.rsplit(":", 1)
            world = int(world_s)
            if token and key != token:
                return False
            actors = [self.ray.get_actor(f"quanta-{job_id}-{key}-{r}", namespace=NAMESPACE)
                      for r in range(world)]
        except (ValueError, TypeError):
            return False
        self.jobs[job_id] = _Job(actors, [a.wait.remote() for a in actors], grace_s, [None] * world)
        return True

    def find(self, job_id: str, workdir: Path, token: str, grace_s: float, world: int) -> str:
        handle = f"{token}:{world}"
        return handle if token and self.adopt(job_id, workdir, handle, grace_s, token) else ""

    # -- stopping ----------------------------------------------------------------------------------
    def _signal(self, job: _Job, sig: int) -> None:
        for a, c in zip(job.actors, job.codes):
            if c is None:
                a.signal.remote(int(sig))

    def stop(self, job_id: str) -> None:
        job = self.jobs.get(job_id)
        if job is not None and job.stop_at is None:
            job.stop_at = time.monotonic()
            self._signal(job, signal.SIGTERM)

    def poll(self) -> list[Exit]:
        ray = self.ray
        out: list[Exit] = []
        for job_id, job in list(self.jobs.items()):
            pending = [w for w, c in zip(job.waits, job.codes) if c is None]
            ready, _ = ray.wait(pending, num_returns=len(pending), timeout=0)
            for ref in ready:
                i = job.waits.index(ref)
                try:
                    job.codes[i] = int(ray.get(ref))
                except ray.exceptions.RayError:     # the actor or its node died
                    job.codes[i] = -int(signal.SIGKILL)
                    job.failed = job.failed or f"rank {i} was lost with its node or actor"
                if job.codes[i] != 0 and not job.failed:
                    job.failed = f"rank {i} " + (f"exited with code {job.codes[i]}" if job.codes[i] > 0
                                                 else f"was killed by signal {-job.codes[i]}")
            if job.failed and job.stop_at is None:
                self.stop(job_id)                   # one rank failed: stop the others
            if job.stop_at is not None and time.monotonic() - job.stop_at > job.grace_s + KILL_MARGIN_S:
                self._signal(job, signal.SIGKILL)
            if any(c is None for c in job.codes):
                continue
            del self.jobs[job_id]
            for a in job.actors:
                try:
                    ray.kill(a)
                except Exception:   # noqa: BLE001 - already gone with its node
                    pass
            rc = next((c for c in job.codes if c != 0), 0)
            out.append(Exit(job_id, rc, job.failed))
        return out

    def node_changes(self) -> tuple[list[int], list[int]]:
        alive = {n["NodeID"]: n for n in self.ray.nodes() if n["Alive"]}
        lost, back = [], []
        for i, nid in enumerate(self.node_ids):
            if self.up[i] and nid not in alive:
                self.up[i] = False
                lost.append(i)
        known = set(self.node_ids)
        for nid, n in sorted(alive.items()):
            if nid in known or offered(n) is None:
                continue
            slot = next((i for i, up in enumerate(self.up) if not up and self.offers[i] == offered(n)),
                        None)
            if slot is not None:        # a replacement for a lost node of the same shape
                self.node_ids[slot] = nid
                self.node_addr[slot] = n["NodeManagerAddress"]
                self.up[slot] = True
                known.add(nid)
                back.append(slot)
        return lost, back

    def shutdown(self) -> None:
        self.jobs.clear()


def detect_cluster(address: str | None = None) -> Cluster:
    """The cluster a Ray backend on that address would offer the policies."""
    return RayBackend(address).cluster
