import os

import numpy as np
import pytest

from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.perf import TableModel


def homogeneous(nodes: int = 4, gpus: int = 8, gpu: str = "v100") -> Cluster:
    return Cluster(tuple(NodeSpec(f"n{i}", gpu, gpus) for i in range(nodes)))


def random_jobs(n: int, seed: int = 0, gap: float = 60.0, max_gpus: int = 8) -> list[JobSpec]:
    """Jobs of unknown type: one step = one second on the reference allocation."""
    rng = np.random.default_rng(seed)
    sizes = [g for g in (1, 1, 1, 2, 4, 8) if g <= max_gpus]
    out, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(gap))
        d = float(rng.integers(60, 4000))
        out.append(JobSpec(f"j{i:04d}", t, int(rng.choice(sizes)), "", total_steps=d, duration_s=d))
    return out


def pytest_collection_modifyitems(config, items):
    """A plain `pytest -q` (the test paths of pyproject.toml, no -m) runs the fast set: the tests
    marked slow are left out, for `pytest -q -m slow` (CI runs both: .ci/run). Paths or tests
    named on the command line run whole, and an -m expression decides for itself."""
    if config.option.markexpr or config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def record_calls(monkeypatch, owner, name: str, note=lambda *a, **k: 1) -> list:
    """Wrap `owner.name` (a function of a module, or a method of a class) so that it still runs
    and each call appends `note(*args, **kwargs)` to the list returned."""
    real = getattr(owner, name)
    calls: list = []

    def recorded(*a, **k):
        calls.append(note(*a, **k))
        return real(*a, **k)

    monkeypatch.setattr(owner, name, recorded)
    return calls


@pytest.fixture
def perf() -> TableModel:
    return TableModel()


class ToyPerf:
    """A transparent performance model for policy tests:
    steps/s = speed[(job type, GPU type)] (default 1) x GPUs ** exponent[job type] (default 0.9)."""

    def __init__(self, speed=None, exponent=None):
        self.speed = speed or {}
        self.exponent = exponent or {}

    def rate(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None):
        return self.speed.get((job.job_type, gpu_type), 1.0) * \
            num_gpus ** self.exponent.get(job.job_type, 0.9)

    def rate_matrix(self, jobs, types):
        return np.array([[self.rate(j, t, j.num_gpus) for t in types] for j in jobs])

    def provenance(self, job, gpu_type):
        return "fitted"

    def shared_rate(self, *args, **kwargs):
        return 0.0


def _jobs_as_root_when_tests_run_as_root() -> None:
    """A service running as root runs each user's jobs as that user's OS account and never as
    root unless told (quanta.runtime.accounts). The tests run as root in containers, with users
    (admin, alice, ...) that have no OS account: they say so as an admin would, in a users.yaml
    ($QUANTA_USERS) that lets jobs run as root from any folder. tests/test_security.py gives its
    services a users.yaml of its own."""
    if os.geteuid() != 0 or os.environ.get("QUANTA_USERS"):
        return
    import atexit
    import shutil
    import tempfile
    folder = tempfile.mkdtemp(prefix="quanta-tests-users-")
    path = os.path.join(folder, "users.yaml")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("default_account: root\nallow_root: true\ncwd_roots: [/]\n")
    os.environ["QUANTA_USERS"] = path
    atexit.register(shutil.rmtree, folder, True)


_jobs_as_root_when_tests_run_as_root()
