"""The per-job launcher: `python -m quanta.runtime.launch JOB_DIR`.

Reads JOB_DIR/launch.json (command, environment, one entry per rank), starts every rank with the
distributed environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, one thread per
process), forwards SIGTERM to them (they checkpoint and exit), and when they are all gone writes
JOB_DIR/exit.json with the job's return code. If one rank fails, the others are stopped (SIGTERM,
then SIGKILL after the grace period). It runs in its own session, so a scheduler that dies leaves
it running: a restarted scheduler adopts it by its pid and reads exit.json when it ends.

`python -m quanta.runtime.launch JOB_DIR TOKEN`: the token (the scheduler's record of this launch)
is on the command line, so a scheduler that died before recording the launch finds it, and in
exit.json, so an exit.json is never taken for another launch's. A rank that cannot be started
(missing program or folder, NUL byte, bad environment name) ends the launch at once: exit.json
says why, whether trying again could help ("permanent"), and job.log says it too.
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


def rank_env(spec: dict, rank: int, base: dict) -> dict:
    env = dict(base)
    env.update(spec.get("env", {}))
    r = spec["ranks"][rank]
    env.update({"RANK": str(rank), "LOCAL_RANK": str(r.get("local_rank", 0)),
                "WORLD_SIZE": str(len(spec["ranks"])), "MASTER_ADDR": spec.get("master_addr", "127.0.0.1"),
                "MASTER_PORT": str(spec["master_port"]), "OMP_NUM_THREADS": str(r.get("threads", 1)),
                "MKL_NUM_THREADS": str(r.get("threads", 1)),
                "CUDA_VISIBLE_DEVICES": r.get("cuda_visible_devices", "")})
    return env


# errors of starting a rank that starting it again would repeat (the program or folder is missing,
# not executable, the arguments or environment malformed); anything else (out of memory or
# processes) may pass, and is retried
PERMANENT = (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError, ValueError,
             TypeError, UnicodeError)


def is_permanent(err: BaseException) -> bool:
    import errno
    return isinstance(err, PERMANENT) or getattr(err, "errno", None) in (errno.ENOEXEC, errno.E2BIG,
                                                                          errno.ENAMETOOLONG)


def main(argv: list[str]) -> int:
    job_dir = Path(argv[0])
    token = argv[1] if len(argv) > 1 else ""
    spec = read_json(job_dir / "launch.json")
    if not isinstance(spec, dict) or spec.get("token", "") != token:
        print(f"quanta launch: {job_dir}/launch.json is missing, unreadable or of another launch",
              file=sys.stderr)
        return 2
    grace = float(spec.get("grace_s", 30.0))
    log = open(job_dir / "job.log", "ab", buffering=0)
    procs: list[subprocess.Popen] = []
    stopping = {"at": None}

    def on_term(signum, frame):
        if stopping["at"] is None:
            stopping["at"] = time.monotonic()
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    base = dict(os.environ)
    for rank in range(len(spec["ranks"])):
        try:
            out = log if rank == 0 else open(job_dir / f"rank-{rank}.log", "ab", buffering=0)
            procs.append(subprocess.Popen(spec["command"], cwd=spec.get("cwd") or job_dir,
                                          env=rank_env(spec, rank, base), stdout=out,
                                          stderr=subprocess.STDOUT))
        except Exception as err:   # noqa: BLE001 - any failure to start is the job's, said once
            message = " ".join(f"could not start rank {rank}: {err}".split())
            log.write(f"quanta: {message}\n".encode(errors="replace"))
            for p in procs:                   # the ranks already started end with it
                p.kill()
                p.wait()
            write_json(job_dir / "exit.json", {"returncode": 127, "ranks": [], "time": time.time(),
                                               "attempt": spec.get("attempt", 0), "token": token,
                                               "message": message, "permanent": is_permanent(err)})
            return 0
    codes: list[int | None] = [None] * len(procs)
    first_failed: int | None = None      # the rank whose failure ended the job
    while any(c is None for c in codes):
        for i, p in enumerate(procs):
            if codes[i] is None:
                codes[i] = p.poll()
        failed_now = [i for i, c in enumerate(codes) if c not in (None, 0)]
        if first_failed is None and failed_now:   # a signal death beats its peers' aborts
            first_failed = min(failed_now, key=lambda i: (codes[i] > 0, i))
        failed = bool(failed_now)
        if failed and stopping["at"] is None:
            on_term(signal.SIGTERM, None)     # one rank failed: stop the others
        if stopping["at"] is not None and time.monotonic() - stopping["at"] > grace:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        time.sleep(POLL_S)
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
