"""The local backend: each job is a launcher process on this machine (quanta.runtime.launch) that
starts one process per rank on CPU slots or on this machine's GPUs (CUDA_VISIBLE_DEVICES).
Preemption: SIGTERM to the launcher, which forwards it; the ranks checkpoint and exit; after the
grace period the whole process group is killed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from quanta.job import read_json, write_json
from quanta.runtime.backends.base import Exit, Launch
from quanta.runtime import launch

KILL_MARGIN_S = 5.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:   # a zombie is dead for us
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def is_launcher(pid: int, workdir: Path, token: str = "") -> bool:
    """The pid is still our launcher for that job (not a recycled pid), and of that launch when a
    token is given (a launcher of an older release, without a token, counts when none is)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return (b"quanta.runtime.launch" in args and str(workdir).encode() in args
            and (not token or token.encode() in args))


def find_launcher(workdir: Path, token: str) -> int | None:
    """The pid of the live launcher of that job folder and launch token, if one runs."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            pid = int(entry.name)
            if is_launcher(pid, workdir, token) and pid_alive(pid):
                return pid
    return None


def _last_line(path: Path, limit: int = 4096) -> str:
    """The last non-empty line of a (possibly large) file, read from its end (never through a
    link: the file is in a job's folder)."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " ".join(lines[-1].split())[:300] if lines else ""


@dataclass
class _Proc:
    pid: int
    workdir: Path
    popen: subprocess.Popen | None     # None when adopted from an earlier scheduler
    grace_s: float
    token: str = ""
    stop_at: float | None = None


class LocalBackend:
    name = "local"

    def __init__(self, run_as=None, user_of=None) -> None:
        self.procs: dict[str, _Proc] = {}
        self.run_as = run_as            # quanta.runtime.accounts.RunAs: whose account, where
        self.user_of = user_of          # job id -> its Quanta user

    def launch(self, job: Launch) -> str:
        from quanta.runtime.accounts import PRIVATE_DIR, job_environment, open_private
        workdir = Path(job.workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
        for log in workdir.glob("*.log"):    # a link the job planted where a log goes is not a
            if log.is_symlink():             # log (removed first: an error below is appended
                log.unlink()                 # to job.log)
        acct = None
        if self.run_as is not None:    # the job's account and cwd, checked again now (QuantaError:
            user = self.user_of(job.job_id) if self.user_of else ""   # a permanent launch error)
            acct = self.run_as.account(user)
            self.run_as.check_cwd(job.cwd, acct, workdir)
        if acct is not None:
            os.chown(workdir, acct.uid, acct.gid, follow_symlinks=False)
        os.chmod(workdir, PRIVATE_DIR, follow_symlinks=False)
        (workdir / "exit.json").unlink(missing_ok=True)
        spec = job.as_json(free_port())
        for r in spec["ranks"]:     # the cluster's device indices -> this machine's CUDA devices
            r["cuda_visible_devices"] = physical_devices(r["cuda_visible_devices"],
                                                         os.environ.get("CUDA_VISIBLE_DEVICES"))
        write_json(workdir / "launch.json", spec)
        env = job_environment()     # the service's tokens and fault injection are not the job's
        env.setdefault("OMP_NUM_THREADS", "1")
        log = open_private(workdir / "launcher.log")
        try:
            popen = subprocess.Popen([sys.executable, "-m", "quanta.runtime.launch", str(workdir)]
                                     + ([job.token] if job.token else [])
                                     + (["--as", acct.arg()] if acct is not None else []),
                                     cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        finally:
            os.close(log)
        self.procs[job.job_id] = _Proc(popen.pid, workdir, popen, job.grace_s, job.token)
        return str(popen.pid)

    def stop(self, job_id: str) -> None:
        p = self.procs.get(job_id)
        if p is None or p.stop_at is not None:
            return
        p.stop_at = time.monotonic()
        try:
            os.kill(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def adopt(self, job_id: str, workdir: Path, handle: str, grace_s: float,
              token: str = "") -> bool:
        pid = int(handle) if handle.isdigit() else -1
        workdir = Path(workdir).resolve()
        if pid <= 0 or not (pid_alive(pid) and is_launcher(pid, workdir, token)):
            return False
        self.procs[job_id] = _Proc(pid, workdir, None, grace_s, token)
        return True

    def find(self, job_id: str, workdir: Path, token: str, grace_s: float, world: int) -> str:
        workdir = Path(workdir).resolve()
        pid = find_launcher(workdir, token) if token else None
        if pid is None:
            return ""
        self.procs[job_id] = _Proc(pid, workdir, None, grace_s, token)
        return str(pid)

    def kill_leftovers(self, token: str) -> None:
        launch.kill_leftovers(token)

    def poll(self) -> list[Exit]:
        done: list[Exit] = []
        now = time.monotonic()
        for job_id, p in list(self.procs.items()):
            running = p.popen.poll() is None if p.popen is not None else pid_alive(p.pid)
            if running:
                if p.stop_at is not None and now - p.stop_at > p.grace_s + KILL_MARGIN_S:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                continue
            del self.procs[job_id]
            info = read_json(p.workdir / "exit.json")
            if isinstance(info, dict):
                done.append(Exit(job_id, _int(info.get("returncode"), 1),
                                 str(info.get("message", "")), bool(info.get("permanent"))))
            else:   # the launcher itself died (killed): whatever ranks remain go with it
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                self.kill_leftovers(p.token)
                code = (p.popen.returncode if p.popen is not None else 0) or -9
                why = "was killed" if code < 0 else f"failed with exit code {code}"
                last = _last_line(p.workdir / "launcher.log")
                done.append(Exit(job_id, code, f"the job's launcher {why}"
                                 + (f": {last}" if last else " (see launcher.log)")))
        return done

    def node_changes(self) -> tuple[list[int], list[int]]:
        return [], []

    def shutdown(self) -> None:
        self.procs.clear()


def _int(value, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def physical_devices(devices: str, visible: str | None) -> str:
    """A rank's CUDA_VISIBLE_DEVICES. The cluster numbers this machine's GPUs 0..n-1 as the
    scheduler sees them; when the scheduler itself runs under CUDA_VISIBLE_DEVICES (e.g. "2,3" or
    GPU UUIDs), index i is the i-th entry of that list, not the machine's GPU i."""
    if not devices or visible is None or not visible.strip():
        return devices
    entries = [v.strip() for v in visible.split(",") if v.strip()]
    out = []
    for d in devices.split(","):
        d = d.strip()
        out.append(entries[int(d)] if d.isdigit() and int(d) < len(entries) else d)
    return ",".join(out)


def gpu_type_of(device_name: str) -> str | None:
    """The GPU type of a CUDA device name ("NVIDIA H200", "Tesla V100-SXM2-16GB",
    "NVIDIA A100-SXM4-80GB", "Quadro RTX 6000"), or None if no known type is named in it. A type
    must be a word of the name (or two adjacent words joined), optionally followed by letters
    ("a10g") or preceded by them ("gh200"), never by digits: "a10" is not found in "A100"."""
    import re

    from quanta.model.gpu import GPU_TYPES
    words = re.findall(r"[a-z0-9]+", device_name.lower())
    words += [a + b for a, b in zip(words, words[1:])]
    pattern = {t: re.compile(rf"[a-z]*{re.escape(t)}[a-z]*") for t in GPU_TYPES if t != "cpu"}
    for t in sorted(pattern, key=len, reverse=True):
        if any(pattern[t].fullmatch(w) for w in words):
            return t
    return None


def detect_cluster() -> str:
    """This machine as an inline cluster spec: its CUDA GPUs (those CUDA_VISIBLE_DEVICES
    leaves visible), else one CPU slot per core."""
    try:
        import torch
        n = torch.cuda.device_count()
        if n:
            names = [torch.cuda.get_device_name(i) for i in range(n)]
            types = [gpu_type_of(nm) for nm in names]
            known = types[0] or "v100"
            if types[0] is None or len(set(types)) > 1:
                print(f"quanta: GPUs {', '.join(sorted(set(names)))}: counted as {n} x {known} "
                      "(pass --cluster to say otherwise)", file=sys.stderr, flush=True)
            return f"{known}:1x{n}"
    except Exception:   # noqa: BLE001 - no usable CUDA: CPU slots
        pass
    return f"cpu:1x{max(1, os.cpu_count() or 1)}"
