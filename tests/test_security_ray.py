"""The security model on the Ray backend (docs/runtime.md, "Security model"): a root `quanta serve`
with `--backend ray` on a real Ray cluster started by the test (its nodes run as root, with Ray's
token authentication) runs each user's ranks as that user's OS account, as the local backend does;
a job gets neither the service's nor Ray's token, so it cannot reach the Ray cluster; a node that
does not know the account (or does not run as root) refuses the launch for good, saying why."""

import os
import secrets
import subprocess
import sys

import pytest

from test_security import alice_cannot_reach_bob, os_users  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow


# A Ray cluster in a child process: Ray reads RAY_AUTH_MODE once per process, and this one may
# have used Ray already. It prints its address, and shuts down when its stdin closes.
HOLD_CLUSTER = """
import sys
from ray.cluster_utils import Cluster
c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "resources": {"quanta_cpu": 2}})
c.wait_for_nodes()
print(c.address, flush=True)
sys.stdin.read()
c.shutdown()
"""


@pytest.fixture
def ray_with_token(monkeypatch):
    """A one-node Ray cluster offering 2 CPU slots to Quanta, started with RAY_AUTH_MODE=token;
    the service (a child of this process) inherits the token, the jobs must not."""
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", secrets.token_hex(16))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_CLUSTER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        addr = holder.stdout.readline().strip()
        assert addr, "the Ray cluster did not start"
        yield addr
    finally:
        holder.stdin.close()
        holder.wait(timeout=120)


def test_ray_jobs_run_as_their_users_accounts_and_cannot_reach_ray(os_users, ray_with_token):
    addr = ray_with_token
    connect = f"{sys.executable} -c \"import ray; ray.init(address='{addr}')\""
    alice_cannot_reach_bob(os_users, args=["--backend", "ray", "--ray-address", addr],
                           cluster="auto", env={"OMP_NUM_THREADS": "1"},
                           more_tries={"RAY-TOKEN-IN-ENV": "env | grep -q RAY_AUTH_TOKEN",
                                       "CONNECTED-TO-RAY": connect})


def test_a_node_refuses_an_account_it_does_not_know_by_that_uid():
    from quanta.runtime.backends.ray import node_account
    if os.geteuid() != 0:
        with pytest.raises(PermissionError, match="not root"):
            node_account(("root", 0, 0, [], "/root"))
        return
    with pytest.raises(PermissionError, match="uid 4242 on the service's machine but uid 0"):
        node_account(("root", 4242, 0, [], "/root"))
    with pytest.raises(PermissionError, match="but unknown on Ray node"):
        node_account(("no-such-account-q", 4242, 4242, [], "/"))
    assert node_account(("root", 0, 0, [0], "/root")).uid == 0
