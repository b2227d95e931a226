"""Load benchmark of the scheduler service: many queued jobs (not a timed test).

    python bench/runtime_load.py [--jobs 10000] [--policy fifo] [--cluster cpu:1x1]

Starts `quanta serve` (local backend, a fresh state folder) on 127.0.0.1, submits one job that
holds the only slot (so every other job stays queued), then `--jobs` jobs one after another over
one HTTP connection, and measures:

- submit latency (POST /v1/jobs): p50, p99, max, and the submissions per second;
- `quanta queue` (the CLI, first page: 100 jobs), wall time of the whole command;
- GET /v1/queue (first page of 1,000, the API's default) and GET /metrics latency;
- the service's resident memory (VmRSS) with all the jobs queued, and the policy's decision latency
  (quanta_decision_seconds) as /metrics reports it.

Recorded in docs/runtime.md ("Load").
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from quanta.service.client import wait_until_up

PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--cluster", default="cpu:1x1")
    args = ap.parse_args(argv)
    state = Path(tempfile.mkdtemp(prefix="quanta-load-")) / "state"
    state.mkdir(parents=True)
    if os.geteuid() == 0 and not os.environ.get("QUANTA_USERS"):
        # a root service runs no job as root unless its users file allows it (README): this
        # bench's own state folder says so, as the README's first block does
        (state / "users.yaml").write_text("default_account: root\nallow_root: true\n"
                                          "cwd_roots: [/]\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("QUANTA_FAULT", None)
    serve = subprocess.Popen([PY, "-m", "quanta.cli", "serve", "--port", str(port), "--state",
                              str(state), "--policy", args.policy, "--cluster", args.cluster],
                             env=env, stdout=open(state.parent / "serve.log", "wb"),
                             stderr=subprocess.STDOUT)
    blocker = None
    try:
        if not wait_until_up(url, serve, 120):
            raise SystemExit(f"quanta serve did not come up (see {state.parent}/serve.log)")
        token = (state / "admin.token").read_text().strip()
        http = httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {token}"})
        r = http.post("/v1/jobs", json={"name": "blocker", "steps": 1, "command": [
            PY, "-c", "import time; time.sleep(3600)"]})
        if r.status_code != 201:
            raise SystemExit(f"runtime_load.py: the first job was refused: HTTP {r.status_code} "
                             f"{r.text}")
        blocker = r.json()["id"]
        while http.get(f"/v1/jobs/{blocker}").json()["state"] != "running":
            time.sleep(0.1)
        body = {"name": "queued", "steps": 100, "command": ["true"]}
        lat = []
        t_all = time.perf_counter()
        for i in range(args.jobs):
            t0 = time.perf_counter()
            r = http.post("/v1/jobs", json=body, headers={"Idempotency-Key": f"load-{i}"})
            lat.append(time.perf_counter() - t0)
            if r.status_code != 201:
                raise SystemExit(f"submission {i}: HTTP {r.status_code} {r.text}")
        wall = time.perf_counter() - t_all
        time.sleep(2.0)                        # the runtime has taken them all in
        cli_env = {**env, "QUANTA_URL": url, "QUANTA_TOKEN": token, "COLUMNS": "200"}
        cli = timed(lambda: subprocess.run([PY, "-m", "quanta.cli", "queue"], env=cli_env,
                                           capture_output=True, check=True), 3)
        page = timed(lambda: http.get("/v1/queue").raise_for_status(), 10)
        small = timed(lambda: http.get("/v1/queue", params={"limit": 100}).raise_for_status(), 10)
        metrics = timed(lambda: http.get("/metrics").raise_for_status(), 20)
        text = http.get("/metrics").text
        decision = {ln.split('"')[1]: float(ln.split()[-1]) for ln in text.splitlines()
                    if ln.startswith("quanta_decision_seconds{")}
        first = http.get("/v1/queue", params={"limit": 1})     # (a release without pages:
        total = int(first.headers.get("x-total-count", len(first.json())))   # the whole queue)
        rss = rss_mb(serve.pid)
        ms = 1000.0
        print(f"jobs queued: {total} (policy {args.policy}, cluster {args.cluster})")
        print(f"submit: p50 {pct(lat, .5) * ms:.1f} ms, p99 {pct(lat, .99) * ms:.1f} ms, max "
              f"{max(lat) * ms:.1f} ms; {args.jobs / wall:.0f} submissions/s")
        print(f"quanta queue (first page, 100 jobs): median {statistics.median(cli):.2f} s")
        print(f"GET /v1/queue: first page of 1,000 median {statistics.median(page) * ms:.0f} ms, "
              f"limit=100 median {statistics.median(small) * ms:.0f} ms")
        print(f"GET /metrics: median {statistics.median(metrics) * ms:.1f} ms, "
              f"p99 {pct(metrics, .99) * ms:.1f} ms")
        print(f"service RSS: {rss:.0f} MB; decision latency p50 {decision.get('0.5', 0) * ms:.1f} "
              f"ms, p99 {decision.get('0.99', 0) * ms:.1f} ms")
        return 0
    finally:
        serve.terminate()
        serve.wait(timeout=60)
        if blocker is not None:                 # the blocker's launcher (its own session)
            with sqlite3.connect(state / "quanta.db") as db:
                row = db.execute("SELECT handle FROM jobs WHERE id = ?", (blocker,)).fetchone()
            if row and row[0].isdigit():
                try:
                    os.killpg(int(row[0]), signal.SIGKILL)
                except ProcessLookupError:
                    pass


if __name__ == "__main__":
    sys.exit(main())
