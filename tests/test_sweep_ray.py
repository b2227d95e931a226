"""The same sweep on a real local 2-node Ray cluster (started here) gives byte-identical tables
to the local process pool; the Python API uses an already connected Ray as it is."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
SWEEP = ["sweep", "--rate", "2,4", "--jobs", "30", "--cluster", "v100:2x4", "--policy", "las",
         "--policy", "fifo:backfill=false", "--seeds", "0-2", "-q"]
FILES = ("results.csv", "results.parquet", "aggregate.csv", "aggregate.parquet", "jobs.parquet")


def quanta(*args):
    return subprocess.run([sys.executable, "-m", "quanta.cli", *args], capture_output=True,
                          text=True, timeout=300, env=ENV)


@pytest.fixture(scope="module")
def ray_cluster():
    import ray
    from ray.cluster_utils import Cluster
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    yield c
    if ray.is_initialized():
        ray.shutdown()
    c.shutdown()


def test_ray_sweep_is_byte_identical_to_the_process_pool(ray_cluster, tmp_path):
    pool = quanta(*SWEEP, "--workers", "2", "--out", str(tmp_path / "pool"))
    assert pool.returncode == 0, pool.stderr
    on_ray = quanta(*SWEEP, "--ray", ray_cluster.address, "--out", str(tmp_path / "ray"))
    assert on_ray.returncode == 0, on_ray.stderr
    for f in FILES:
        assert (tmp_path / "pool" / f).read_bytes() == (tmp_path / "ray" / f).read_bytes(), f


def test_api_sweep_on_a_connected_ray_with_a_policy_object(ray_cluster, tmp_path):
    import ray

    import quanta
    from quanta.policies.baselines import Fifo
    ray.init(address=ray_cluster.address, log_to_driver=False)
    try:
        sw = quanta.sweep(rates=[3], jobs=20, clusters="v100:2x4",
                          policies=[Fifo(backfill=False), "las"], seeds=[0, 1], ray="auto",
                          out=tmp_path / "o", progress=False)
        assert ray.is_initialized()               # left connected: it was not ours
    finally:
        ray.shutdown()
    local = quanta.sweep(rates=[3], jobs=20, clusters="v100:2x4",
                         policies=["fifo:backfill=false", "las"], seeds=[0, 1], workers=1,
                         out=tmp_path / "l", progress=False)
    # (labelled as quanta.simulate labels the object: its class was the label of every setting)
    assert list(sw.results["policy"]) == ["Fifo:backfill=false"] * 2 + ["las"] * 2
    assert list(sw.results["avg_jct_s"]) == list(local.results["avg_jct_s"])
