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

Accounts: when the service runs as root, the ranks of user U's jobs run as U's OS account (the
same users file and rule as the local backend, quanta.runtime.accounts): the actor starts the rank
with that uid, its groups and HOME, umask 077, its logs owned by it. The service resolves the
account; each node checks that it runs as root and that the account has the same uid there (the
nodes share their accounts, as a Slurm cluster's do), else the launch fails for good, saying so.
A job must not reach the Ray cluster itself (it would run code as the nodes' account): Ray's token
authentication (RAY_AUTH_MODE=token) keeps it out; the token never enters a job's environment.
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
from quanta.runtime.backends import local
from quanta.runtime.backends.base import Exit, Launch
from quanta.runtime.backends.local import free_port
from quanta.runtime.launch import job_cwd, rank_env

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
    """Ray, connected: to the cluster at `address`; without one, to a Ray running on this
    machine (`ray start`, or $RAY_ADDRESS), else to one started here that offers this machine's
    devices as the local backend counts them (it stops with this process)."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    if address:
        check_address(address)
    opts = dict(namespace=NAMESPACE, log_to_driver=False, ignore_reinit_error=True)
    try:
        try:
            ray.init(address=address or "auto", **opts)
        except ConnectionError:              # ("auto": no Ray runs here)
            if address:
                raise
            ray.init(resources=local_offer(), include_dashboard=False, **opts)
    except QuantaError:
        raise
    except Exception as e:                   # noqa: BLE001 - Ray's reasons, on one line
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise QuantaError(f"cannot {'connect to' if address else 'start or join'} Ray: {first}",
                          field="--ray-address") from None
    return ray


def check_address(address: str) -> None:
    """A clear error at once where nothing answers at `address` (Ray retries for minutes)."""
    from quanta.executors import unreachable
    why = unreachable(address)
    if why:
        raise QuantaError(f"cannot connect to a Ray cluster at '{address}': {why}",
                          field="--ray-address")


def local_offer() -> dict[str, float]:
    """The resources a Ray started by Quanta on this machine offers it: its CUDA GPUs, else one
    CPU slot per core (quanta_<type>: count, as `ray start --resources` would)."""
    gpu_type, shape = local.detect_cluster().split(":")
    return {PREFIX + gpu_type: float(shape.split("x")[1])}


def token_auth() -> bool:
    """Whether this process talks to Ray with token authentication on (RAY_AUTH_MODE=token)."""
    try:
        from ray._private.authentication.authentication_utils import is_token_auth_enabled
    except ImportError:          # a Ray without token authentication (before 2.52)
        return False
    return bool(is_token_auth_enabled())


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

        def start(self, command: list[str], env: dict, cwd: str, log: str,
                  account: tuple | None = None, check_cwd: bool = False,
                  make_cwd: bool = False) -> int:
            from quanta.runtime.launch import as_account, enter_check, private_log
            acct = node_account(account) if account is not None else None
            out = private_log(Path(log), acct)
            extra: dict = {"cwd": cwd}
            if acct is not None:
                if check_cwd:
                    enter_check(acct, cwd, make_cwd)
                extra = as_account(acct, env, cwd)
            elif make_cwd:
                os.makedirs(cwd, mode=0o700, exist_ok=True)
            self.proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True, umask=0o077, **extra)
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


def node_account(account: tuple):
    """The job's Account (name, uid, gid, groups, home) on this node: PermissionError unless this
    node runs as root and knows the account by the same uid."""
    import pwd
    import socket

    from quanta.runtime.accounts import ROOT_UID, Account
    acct = Account(*account[:3], tuple(account[3]), account[4])
    here = socket.gethostname()
    if os.geteuid() != ROOT_UID:
        raise PermissionError(f"Ray node {here} runs as uid {os.geteuid()}, not root: it cannot "
                              f"start a job as account '{acct.name}'")
    try:
        uid = pwd.getpwnam(acct.name).pw_uid
    except KeyError:
        uid = None
    if uid != acct.uid:
        raise PermissionError(f"account '{acct.name}' is uid {acct.uid} on the service's machine "
                              f"but {'unknown' if uid is None else f'uid {uid}'} on Ray node {here}")
    return acct


@dataclass
class _Job:
    actors: list
    waits: list                      # ObjectRefs of each rank's wait()
    grace_s: float
    codes: list = field(default_factory=list)
    stop_at: float | None = None
    failed: str = ""
    token: str = ""                  # the launch's (its ranks carry it: QUANTA_LAUNCH)
    nodes: list = field(default_factory=list)     # each rank's node (empty: adopted)


class RayBackend:
    name = "ray"

    def __init__(self, address: str | None = None, run_as=None, user_of=None):
        self.run_as = run_as            # quanta.runtime.accounts.RunAs: whose account, where
        self.user_of = user_of          # job id -> its Quanta user
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
        from quanta.runtime.accounts import PRIVATE_DIR, job_environment
        workdir = Path(job.workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
        for log in workdir.glob("*.log"):    # a link the job planted where a log goes
            if log.is_symlink():
                log.unlink()
        acct = None
        if self.run_as is not None:    # the job's account and cwd (QuantaError: for good)
            acct = self.run_as.account(self.user_of(job.job_id) if self.user_of else "")
            self.run_as.check_cwd(job.cwd, acct, workdir)
        if acct is not None:
            os.chown(workdir, acct.uid, acct.gid, follow_symlinks=False)
        os.chmod(workdir, PRIVATE_DIR, follow_symlinks=False)
        (workdir / "exit.json").unlink(missing_ok=True)
        spec = job.as_json(free_port(), self.node_addr[job.ranks[0].node])
        cwd, make = job_cwd(job.cwd, workdir)
        base = job_environment()        # the service's and Ray's tokens are not the job's
        account = None if acct is None else (acct.name, acct.uid, acct.gid, list(acct.groups),
                                             acct.home)
        actors, starts = [], []
        key = job.token or str(job.attempt)      # actor names: found again by the launch token
        try:
            for rank, r in enumerate(job.ranks):
                a = self._actor(f"quanta-{job.job_id}-{key}-{rank}", r.node, job.gpu_type)
                actors.append(a)
                log = workdir / ("job.log" if rank == 0 else f"rank-{rank}.log")
                starts.append(a.start.remote(spec["command"], rank_env(spec, rank, base), cwd,
                                             str(log), account, rank == 0, make and rank == 0))
            self.ray.get(starts)
        except Exception as err:
            try:                         # detached: the started ranks and their actors would
                self.ray.get([a.signal.remote(int(signal.SIGKILL)) for a in actors],  # outlive it
                             timeout=30)
            except Exception:   # noqa: BLE001 - an actor already gone
                pass
            for a in actors:
                try:
                    self.ray.kill(a)
                except Exception:   # noqa: BLE001 - already gone
                    pass
            cause = getattr(err, "cause", None)      # the rank's own error (PermissionError, ...)
            raise cause if isinstance(cause, Exception) else err from None
        self.jobs[job.job_id] = _Job(actors, [a.wait.remote() for a in actors], job.grace_s,
                                     [None] * len(actors), token=job.token,
                                     nodes=[r.node for r in job.ranks])
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
                    if job.nodes:
                        self.kill_leftovers(job.token, [job.nodes[i]])
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

    def kill_leftovers(self, token: str, nodes: list[int] | None = None) -> None:
        """On each of `nodes` still alive (default: every node), a task pinned to it kills what
        is left of the launch `token` (a rank whose actor was killed goes on in a session of its
        own); a rank whose node is gone went with it."""
        if not token:
            return
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from quanta.runtime.launch import kill_leftovers
        alive = {n["NodeID"] for n in self.ray.nodes() if n["Alive"]}
        ids = [self.node_ids[k] for k in (range(len(self.node_ids)) if nodes is None else nodes)]
        task = self.ray.remote(num_cpus=0)(kill_leftovers)
        refs = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False))
                .remote(token) for nid in ids if nid in alive]
        try:
            self.ray.get(refs, timeout=30)
        except Exception:   # noqa: BLE001 - a node went meanwhile
            pass

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
