"""The README's "Run real jobs" block, command by command as a user types it, from a folder laid
out as the repository root (the example job specs at their relative paths), against a real
`quanta serve` on 127.0.0.1. Only the port differs: $QUANTA_URL, which both the service and the
CLI read, points at a free one."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
from quanta.service.client import wait_until_up

ROOT = Path(__file__).resolve().parents[1]


def readme_blocks() -> tuple[list[str], list[str]]:
    """(the root step's block, the service block) of the README's "Run real jobs"."""
    text = (ROOT / "README.md").read_text()
    sec = re.search(r"## Run real jobs\n(.*?)\n## ", text, re.S).group(1)
    root, block = re.findall(r"```bash\n(.*?)```", sec, re.S)[:2]

    def lines(b):
        return [ln for ln in (x.split("#", 1)[0].strip() for x in b.splitlines()) if ln]
    return lines(root), lines(block)


def test_readme_run_real_jobs_block_verbatim(tmp_path):
    import socket
    with socket.socket() as sock:                  # a free port on 127.0.0.1
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root_step, lines = readme_blocks()
    assert root_step[0].startswith("mkdir -p quanta-state") and "users.yaml" in root_step[0]
    assert lines[0].startswith("quanta serve") and lines[0].endswith("&")
    assert "quanta submit quanta/examples/jobs/mlp.yaml" in lines
    (tmp_path / "quanta").symlink_to(ROOT / "quanta")          # the repository's relative paths
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "QUANTA_URL": url, "OMP_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("QUANTA_TOKEN", None)
    if os.geteuid() == 0:             # as the README says to, where you are root: its first block
        env.pop("QUANTA_USERS", None)              # (not the test suite's own users file)
        for line in root_step:
            subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, check=True)
    serve = subprocess.Popen(["bash", "-c", "exec " + lines[0].rstrip("&").strip()], cwd=tmp_path,
                             env=env, stdout=open(tmp_path / "serve.log", "wb"),
                             stderr=subprocess.STDOUT)
    try:
        assert wait_until_up(url, serve), (tmp_path / "serve.log").read_text()
        token = (tmp_path / "quanta-state" / "admin.token").read_text().strip()

        def job(i):
            return httpx.get(f"{url}/v1/jobs/{i}", headers={"Authorization": f"Bearer {token}"},
                             timeout=10).json()

        for line in lines[1:]:
            if line.startswith("quanta status"):
                # an example job trains for real before we look (with the spec's folder joined
                # twice, every example job failed at once)
                end = time.time() + 120                 # (job 2 is cancelled by now)
                while job(1)["steps_done"] < 1:
                    assert job(1)["state"] not in ("failed", "cancelled"), job(1)
                    assert time.time() < end, job(1)
                    time.sleep(0.5)
            r = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True,
                               text=True, timeout=120)
            assert r.returncode == 0, (line, r.stdout, r.stderr)
            assert "Traceback" not in r.stderr
        end = time.time() + 60                      # a cancel stops the job's workers first
        while job(2)["state"] != "cancelled":
            assert time.time() < end, job(2)
            time.sleep(0.5)
        assert job(1)["state"] != "failed", job(1)
    finally:
        serve.terminate()
        serve.wait(timeout=30)
