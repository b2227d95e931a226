"""The per-job launcher: `python -m quanta.runtime.launch JOB_DIR`.

Reads JOB_DIR/launch.json (command, environment, one entry per rank), starts every rank with the
distributed environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, one thread per
process), forwards SIGTERM to them (they checkpoint and exit), and when they are all gone writes
JOB_DIR/exit.json with the job's return code. If one rank fails, the others are stopped (SIGTERM,
then SIGKILL after the grace period). It runs in its own session, so a scheduler that dies leaves
it running: a restarted scheduler adopts it by its pid and reads exit.json when it ends.

Each rank starts a session of its own, and every signal goes to its whole process group (as Slurm
signals every process of a job step): a rank whose command is a wrapper (`sh -c "python train.py;
..."`) has its training process stopped with it, never left to train on as an orphan beside the
job's next launch. Processes a rank leaves behind in its group when it ends are killed then (no
process outlives its job), or, while the job is being stopped, at the end of the grace period.
A launcher killed outright (SIGKILL, the out-of-memory killer) cannot do that: each rank it
started dies with it (the kernel's parent-death signal), and every process of the launch carries
QUANTA_LAUNCH=<token> in its environment, so that the backend kills what the ranks started
(`kill_leftovers`) before the job is launched again: one copy of a job, never two.

`python -m quanta.runtime.launch JOB_DIR TOKEN`: the token (the scheduler's record of this launch)
is on the command line, so a scheduler that died before recording the launch finds it, and in
exit.json, so an exit.json is never taken for another launch's. A rank that cannot be started
(missing program or folder, NUL byte, bad environment name) ends the launch at once: exit.json
says why, whether trying again could help ("permanent"), and job.log says it too.

`... JOB_DIR TOKEN --as UID:GID:GROUPS` (a service running as root): the ranks run as that account
(uid, groups, HOME), enter their working directory as it, and create files 0600 (umask 077); the
logs are opened without following links and given to the account.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from quanta.job import read_json, write_json

POLL_S = 0.05
MARKER = "QUANTA_LAUNCH"          # in every rank's environment: the launch's token


def rank_env(spec: dict, rank: int, base: dict) -> dict:
    env = dict(base)
    env.update(spec.get("env", {}))
    r = spec["ranks"][rank]
    env.update({"RANK": str(rank), "LOCAL_RANK": str(r.get("local_rank", 0)),
                "WORLD_SIZE": str(len(spec["ranks"])), "MASTER_ADDR": spec.get("master_addr", "127.0.0.1"),
                "MASTER_PORT": str(spec["master_port"]), "OMP_NUM_THREADS": str(r.get("threads", 1)),
                "MKL_NUM_THREADS": str(r.get("threads", 1)),
                "CUDA_VISIBLE_DEVICES": r.get("cuda_visible_devices", "")})
    if spec.get("token"):
        env[MARKER] = str(spec["token"])
    return env


def kill_leftovers(token: str) -> int:
    """SIGKILL every process of the launch `token` still running (its ranks and whatever they
    started carry QUANTA_LAUNCH=token in their environment), once its launcher is gone. Returns
    how many were killed. A process can only be found so by its own launch's token: a job that
    copies another's token into its environment gets its own processes killed, nobody else's."""
    if not token:
        return 0
    want = f"{MARKER}={token}".encode()
    killed = 0
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return 0
    for name in entries:
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                found = want in f.read().split(b"\0")
        except OSError:            # gone, or not ours to read
            continue
        if found and int(name) != os.getpid():
            try:
                os.kill(int(name), signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def die_with_parent(then=None):
    """A preexec_fn: the rank is killed when the launcher that starts it dies (Linux's
    PR_SET_PDEATHSIG; set after any change of account, which clears it), then `then()`."""
    parent = os.getpid()
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl     # (looked up before the fork)
    except (OSError, AttributeError):
        prctl = None

    def preexec() -> None:
        if prctl is not None:
            prctl(1, signal.SIGKILL)          # PR_SET_PDEATHSIG
            if os.getppid() != parent:        # the launcher died before the call
                os.kill(os.getpid(), signal.SIGKILL)
        if then is not None:
            then()
    return preexec


# errors of starting a rank that starting it again would repeat (the program or folder is missing,
# not executable, the arguments or environment malformed); anything else (out of memory or
# processes) may pass, and is retried
PERMANENT = (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError, ValueError,
             TypeError, UnicodeError)


def is_permanent(err: BaseException) -> bool:
    import errno
    return isinstance(err, PERMANENT) or getattr(err, "errno", None) in (errno.ENOEXEC, errno.E2BIG,
                                                                          errno.ENAMETOOLONG)


def as_account(acct, env: dict, cwd: str) -> dict:
    """Popen arguments that start a rank as the account (a launcher started by a root service):
    its uid, primary and supplementary groups (never root's), its HOME/USER/LOGNAME, and the
    working directory entered once it is that account (so its permissions apply)."""
    env.update({"HOME": acct.home, "USER": acct.name, "LOGNAME": acct.name})
    return {"user": acct.uid, "group": acct.gid, "extra_groups": list(acct.groups),
            "preexec_fn": lambda: os.chdir(cwd)}


def job_cwd(given: str, job_dir) -> tuple[str, bool]:
    """The folder a job's ranks start in, and whether its launch makes it: the job's own folder
    (no cwd), a folder inside it (a relative cwd, made by the launch if missing: the job's folder
    is new at its first launch), or the absolute folder given."""
    if not given:
        return str(job_dir), False
    if os.path.isabs(given):
        return given, False
    return os.path.join(str(job_dir), given), True


def enter_check(acct, cwd: str, make: bool = False) -> None:
    """Raise the OSError the account would meet entering cwd (tried in a child that becomes the
    account; `make`: making it first, as the account), so that a folder it may not enter is a
    clear, permanent launch error."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setgroups(list(acct.groups))
            os.setgid(acct.gid)
            os.setuid(acct.uid)
            if make:
                os.makedirs(cwd, mode=0o700, exist_ok=True)
            os.chdir(cwd)
        except OSError as err:
            code = err.errno or 1
        except BaseException:   # noqa: BLE001 - the child only reports
            code = 1
        os._exit(code)
    _pid, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code:
        raise OSError(code, os.strerror(code), cwd)


def private_log(path: Path, acct) -> "object":
    """A log file opened for appending: created 0600, never through a symbolic link (the job may
    plant one), owned by the job's account."""
    from quanta.runtime.accounts import open_private
    fd = open_private(path)
    if acct is not None:
        os.fchown(fd, acct.uid, acct.gid)
    return open(fd, "ab", buffering=0)


def signal_group(p: subprocess.Popen, sig: int) -> None:
    """`sig` to every process of rank `p`'s group (the rank leads it: start_new_session), if any
    is left."""
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(p: subprocess.Popen) -> bool:
    """Whether a process of rank `p`'s group is left."""
    try:
        os.killpg(p.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def main(argv: list[str]) -> int:
    acct = None
    if "--as" in argv:             # the account to run the ranks as (from a root service)
        from quanta.runtime.accounts import Account
        i = argv.index("--as")
        acct = Account.parse(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    job_dir = Path(argv[0])
    token = argv[1] if len(argv) > 1 else ""
    spec = read_json(job_dir / "launch.json")
    if not isinstance(spec, dict) or spec.get("token", "") != token:
        print(f"quanta launch: {job_dir}/launch.json is missing, unreadable or of another launch",
              file=sys.stderr)
        return 2
    grace = float(spec.get("grace_s", 30.0))
    log = private_log(job_dir / "job.log", acct)
    procs: list[subprocess.Popen] = []
    stopping = {"at": None}

    def on_term(signum, frame):
        if stopping["at"] is None:
            stopping["at"] = time.monotonic()
            for p in procs:
                signal_group(p, signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    base = dict(os.environ)
    cwd, make = job_cwd(str(spec.get("cwd") or ""), job_dir)
    for rank in range(len(spec["ranks"])):
        try:
            out = log if rank == 0 else private_log(job_dir / f"rank-{rank}.log", acct)
            env = rank_env(spec, rank, base)
            extra: dict = {"cwd": cwd}
            if acct is not None:
                if rank == 0:
                    enter_check(acct, cwd, make)
                extra = as_account(acct, env, cwd)
            elif rank == 0 and make:
                os.makedirs(cwd, mode=0o700, exist_ok=True)
            extra["preexec_fn"] = die_with_parent(extra.get("preexec_fn"))
            procs.append(subprocess.Popen(spec["command"], env=env, stdout=out,
                                          stderr=subprocess.STDOUT, umask=0o077,
                                          start_new_session=True, **extra))
        except Exception as err:   # noqa: BLE001 - any failure to start is the job's, said once
            message = " ".join(f"could not start rank {rank}: {err}".split())
            log.write(f"quanta: {message}\n".encode(errors="replace"))
            for p in procs:                   # the ranks already started end with it
                signal_group(p, signal.SIGKILL)
                p.wait()
            write_json(job_dir / "exit.json", {"returncode": 127, "ranks": [], "time": time.time(),
                                               "attempt": spec.get("attempt", 0), "token": token,
                                               "message": message, "permanent": is_permanent(err)})
            return 0
    codes: list[int | None] = [None] * len(procs)
    first_failed: int | None = None      # the rank whose failure ended the job
    swept: set[int] = set()              # ended ranks whose groups are done with
    while len(swept) < len(procs):
        for i, p in enumerate(procs):
            if codes[i] is None:
                codes[i] = p.poll()
        failed_now = [i for i, c in enumerate(codes) if c not in (None, 0)]
        if first_failed is None and failed_now:   # a signal death beats its peers' aborts
            first_failed = min(failed_now, key=lambda i: (codes[i] > 0, i))
        failed = bool(failed_now)
        if failed and stopping["at"] is None:
            on_term(signal.SIGTERM, None)     # one rank failed: stop the others
        late = stopping["at"] is not None and time.monotonic() - stopping["at"] > grace
        if late:
            for p in procs:
                signal_group(p, signal.SIGKILL)
        # an ended rank's group: what it left behind is killed, at once where the job was not
        # being stopped; when stopping, its processes have the grace period to checkpoint
        for i in [i for i, c in enumerate(codes) if c is not None and i not in swept]:
            if stopping["at"] is None or late or not group_alive(procs[i]):
                signal_group(procs[i], signal.SIGKILL)
                swept.add(i)
        if len(swept) < len(procs):
            time.sleep(POLL_S)
    # what the ranks detached from their groups (setsid, a daemon) carries the launch's token:
    # killed before the end is reported, so nothing of the job holds its devices after it
    kill_leftovers(token)
    rc = 0 if first_failed is None else codes[first_failed]
    message = ""
    if first_failed is not None:
        how = (f"was killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with code {rc}")
        message = f"rank {first_failed} {how}"
    write_json(job_dir / "exit.json", {"returncode": rc, "ranks": codes, "time": time.time(),
                                       "attempt": spec.get("attempt", 0), "token": token,
                                       "message": message})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
