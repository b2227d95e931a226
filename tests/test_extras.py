"""Simulator-only users install no torch and no web stack: `pip install quanta` is the simulator,
sweeps and the Python API; `[runtime]`, `[ray]` and `[dev]` add the rest. Checked on the real
CLI with those modules made unimportable in every process (a sitecustomize on PYTHONPATH, so
sweep worker processes too)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "fastapi", "starlette", "uvicorn", "httpx", "ray")

BLOCKER = f'''
import sys

class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HEAVY!r}:
            raise ModuleNotFoundError(f"No module named '{{name}}'", name=name)
        return None

sys.meta_path.insert(0, _Blocked())
'''


def test_extras_split():
    tomllib = pytest.importorskip("tomllib")          # (Python 3.11 on)
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = lambda reqs: {r.split(">")[0].split("=")[0].split("<")[0].strip() for r in reqs}  # noqa
    core = names(meta["dependencies"])
    extras = {k: names(v) for k, v in meta["optional-dependencies"].items()}
    assert not core & {"torch", "fastapi", "uvicorn", "httpx", "ray"}
    assert {"pandas", "pyarrow"} <= core
    assert {"torch", "fastapi", "uvicorn", "httpx"} <= extras["runtime"]
    assert extras["ray"] == {"ray"}
    assert extras["runtime"] | extras["ray"] | {"pytest"} <= extras["dev"]
    assert "torch==2.13.0" in meta["optional-dependencies"]["dev"]


@pytest.fixture
def blocked(tmp_path):
    """run(*python args) with the heavy modules unimportable in that process and its children."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(site)}

    def run(*args):
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300)

    r = run("-c", "import torch")
    assert r.returncode != 0                          # the blocker is in place
    return run


def test_simulate_and_the_api_without_torch_or_web_stack(blocked, tmp_path):
    r = blocked("-m", "quanta.cli", "simulate", "--trace", "synthetic:3:30", "--cluster",
                "v100:2x4", "--policy", "las", "--out", "sim")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "sim" / "jct_cdf.png").exists()
    r = blocked("-c", "import quanta; s = quanta.simulate(trace='synthetic:3:20', "
                      "cluster='v100:2x4', policies='las'); print(int(s.summary['finished'][0]))")
    assert r.returncode == 0 and r.stdout.strip() == "20", r.stderr


def test_sweep_without_torch_or_web_stack_and_one_line_for_the_rest(blocked, tmp_path):
    r = blocked("-m", "quanta.cli", "sweep", "--rate", "3", "--jobs", "20", "--cluster",
                "v100:2x4", "--policy", "las", "--policy", "fifo", "--workers", "2", "--out", "sw",
                "-q")
    assert r.returncode == 0, r.stderr
    assert len((tmp_path / "sw" / "results.csv").read_text().splitlines()) == 3
    for cmd, extra in ((["serve", "--port", "1"], "runtime"), (["queue"], "runtime"),
                       (["sweep", "--rate", "3", "--jobs", "20", "--ray", "auto"], "ray")):
        r = blocked("-m", "quanta.cli", *cmd)
        assert r.returncode == 2, r.stderr
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and f"pip install 'quanta[{extra}]'" in lines[0], r.stderr


def test_packages_are_quanta_alone(tmp_path):
    """The package list pyproject.toml asks setuptools for holds quanta and its subpackages and
    nothing a run leaves beside them (`quanta simulate` writes quanta-out/ in the working folder,
    the service quanta-state/)."""
    tomllib = pytest.importorskip("tomllib")
    setuptools = pytest.importorskip("setuptools")
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    for d in ("quanta/policies", "quanta-out/queues", "quanta-state", "quanta_extra"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "m.py").write_text("")
    found = set(setuptools.find_namespace_packages(str(tmp_path), include=find["include"]))
    assert found == {"quanta", "quanta.policies"}
