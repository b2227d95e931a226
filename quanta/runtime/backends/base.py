"""What the runtime asks of a backend: start a job's processes, stop them gracefully, tell when
they ended, and re-attach to processes a previous scheduler started."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Rank:
    node: int                     # cluster node index
    local_rank: int
    cuda_devices: str = ""        # CUDA_VISIBLE_DEVICES for this rank ("" on CPU slots)


@dataclass(frozen=True)
class Launch:
    job_id: str
    workdir: Path
    command: list[str]
    ranks: list[Rank]
    gpu_type: str
    attempt: int
    cwd: str = ""
    env: dict[str, str] = field(default_factory=dict)
    grace_s: float = 30.0
    token: str = ""               # this launch's identity (recorded before the launch starts)

    def as_json(self, master_port: int, master_addr: str = "127.0.0.1") -> dict:
        return {"job_id": self.job_id, "command": self.command, "cwd": self.cwd, "env": self.env,
                "master_addr": master_addr, "master_port": master_port, "grace_s": self.grace_s,
                "attempt": self.attempt, "token": self.token,
                "ranks": [{"node": r.node, "local_rank": r.local_rank,
                           "cuda_visible_devices": r.cuda_devices} for r in self.ranks]}


@dataclass(frozen=True)
class Exit:
    job_id: str
    returncode: int               # 0: the job's processes ended on their own or after a stop
    message: str = ""
    permanent: bool = False       # the job could not start and would not start if tried again


class Backend(Protocol):
    name: str

    def launch(self, job: Launch) -> str:
        """Start the job; returns a handle the scheduler persists (to adopt it after a restart)."""

    def stop(self, job_id: str) -> None:
        """Ask the job to checkpoint and exit (SIGTERM); force it after its grace period."""

    def adopt(self, job_id: str, workdir: Path, handle: str, grace_s: float,
              token: str = "") -> bool:
        """Re-attach to a job a previous scheduler started; False if it is not running (or,
        given a token, if what runs is not that launch)."""

    def find(self, job_id: str, workdir: Path, token: str, grace_s: float, world: int) -> str:
        """Adopt the launch of that token if it runs although its start was never recorded (the
        scheduler died between starting it and recording it); its handle, or "" if none runs."""

    def poll(self) -> list[Exit]:
        """Jobs whose processes ended since the last poll."""

    def kill_leftovers(self, token: str) -> None:
        """Kill what is still running of the launch `token` once its launcher (or a rank's
        actor) is gone: its processes carry QUANTA_LAUNCH=token (quanta/runtime/launch.py). A
        job requeued then never runs beside its last launch."""

    def node_changes(self) -> tuple[list[int], list[int]]:
        """Cluster nodes lost and nodes back (or replaced) since the last call; the jobs of a lost
        node end (their Exits follow)."""

    def shutdown(self) -> None:
        """Stop watching; running jobs keep running (a restarted scheduler adopts them)."""
