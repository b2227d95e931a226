"""The Ray backend on a real local multi-node Ray cluster (ray.cluster_utils.Cluster): jobs placed
on nodes by affinity, DDP across actors, a node removed mid-run and replaced."""

import sys
import time

import pytest
import ray
from ray.cluster_utils import Cluster as RayCluster

from quanta.perf.catalog_model import CatalogModel
from quanta.policies import make_policy
from quanta.runtime.backends.ray import RayBackend
from quanta.runtime.controller import Runtime
from quanta.runtime.spec import parse_submission
from quanta.service.store import Store

PY = sys.executable
pytestmark = pytest.mark.slow


@pytest.fixture
def ray_cluster():
    c = RayCluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"quanta_cpu": 1}})
    big = c.add_node(num_cpus=1, resources={"quanta_cpu": 2})
    c.wait_for_nodes()
    ray.init(address=c.address, namespace="quanta", log_to_driver=False)
    yield c, big
    ray.shutdown()
    c.shutdown()


def submit(store, name, steps, gpus, sleep):
    sub = parse_submission({"name": name, "steps": steps, "gpus": gpus, "checkpoint_every": 10,
                            "grace_s": 10,
                            "command": [PY, "-m", "quanta.examples.train", "--step-sleep", str(sleep)]})
    return store.add_job("alice", sub.name, sub.queue, sub.model_dump(), sub.steps, time.time())


def run_until(rt, store, cond, timeout=120.0):
    end = time.time() + timeout
    while time.time() < end:
        rt.step()
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out: {[(j.id, j.state, j.reason, j.steps_done) for j in store.jobs()]}"
                         f" {store.events()} {[(n['NodeID'][:8], n['Alive'], n['Resources']) for n in ray.nodes()]}")


def test_ray_backend_places_runs_survives_node_loss(ray_cluster, tmp_path):
    rc, big = ray_cluster
    backend = RayBackend()
    assert backend.cluster.describe() == "cpu:1x1,cpu:1x2"
    store = Store(tmp_path / "q.db")
    rt = Runtime(store, backend, backend.cluster, make_policy("fifo"), CatalogModel(), tmp_path / "jobs")
    rt.recover()
    ddp = submit(store, "ddp", 400, 2, 0.03)
    small = submit(store, "small", 40, 1, 0.02)
    job = lambda i: store.job(i)  # noqa: E731
    run_until(rt, store, lambda: job(ddp).state == "running" and job(ddp).steps_done >= 15)
    two_slot = next(i for i, n in enumerate(backend.cluster.nodes) if n.gpus == 2)
    assert job(ddp).nodes == backend.cluster.nodes[two_slot].name     # both ranks on that node
    rc.remove_node(big)                                                # the node dies mid-run
    run_until(rt, store, lambda: job(ddp).state == "pending" and
              "requeued" in [e["kind"] for e in store.events(ddp)])
    stopped_at = job(ddp).steps_done
    run_until(rt, store, lambda: job(small).state == "finished")
    time.sleep(1.0)
    rt.step()
    assert job(ddp).state == "pending"          # two workers no longer fit anywhere
    rc.add_node(num_cpus=1, resources={"quanta_cpu": 2})                # a replacement
    run_until(rt, store, lambda: job(ddp).state == "finished", timeout=180)
    kinds = [e["kind"] for e in store.events(ddp)]
    assert kinds[:2] == ["submit", "start"] and "requeued" in kinds and kinds[-1] == "finished"
    assert "resume" in kinds and job(ddp).steps_done == 400 and stopped_at >= 10
    log = (tmp_path / "jobs" / str(ddp) / "job.log").read_text()
    assert log.count("step 1/400") == 1          # resumed from a checkpoint, not from scratch
    assert [e["kind"] for e in store.events(None)].count("node-up") == 1


def test_a_rank_whose_actor_is_killed_does_not_train_beside_its_next_launch(ray_cluster, tmp_path):
    """(kill -9 of a one-worker job's rank actor left the rank training in a session of its own;
    the job was requeued and ran twice at once.) The backend kills what the lost rank left on its
    node before the job is launched again."""
    import os
    import signal
    backend = RayBackend()
    store = Store(tmp_path / "q.db")
    rt = Runtime(store, backend, backend.cluster, make_policy("fifo"), CatalogModel(), tmp_path / "jobs")
    rt.recover()
    one = submit(store, "one", 300, 1, 0.03)
    job = lambda: store.job(one)  # noqa: E731
    run_until(rt, store, lambda: job().state == "running" and job().steps_done >= 20)
    actor = ray.get(backend.jobs[str(one)].actors[0].__ray_call__.remote(lambda self: os.getpid()))
    os.kill(actor, signal.SIGKILL)
    run_until(rt, store, lambda: job().state == "finished", timeout=180)
    kinds = [e["kind"] for e in store.events(one)]
    assert "requeued" in kinds or "failure" in kinds, kinds
    log = (tmp_path / "jobs" / str(one) / "job.log").read_text()
    assert log.count("step 300/300") == 1, "the lost rank trained on beside the next launch"


def test_a_relative_cwd_is_made_inside_the_jobs_folder(ray_cluster, tmp_path):
    """(A relative cwd was taken from the Ray actor's own folder, and never existed.)"""
    backend = RayBackend()
    store = Store(tmp_path / "q.db")
    rt = Runtime(store, backend, backend.cluster, make_policy("fifo"), CatalogModel(), tmp_path / "jobs")
    rt.recover()
    sub = parse_submission({"name": "pwd", "command": ["/bin/sh", "-c", "pwd"], "cwd": "sub/dir"})
    j = store.add_job("alice", sub.name, sub.queue, sub.model_dump(), 0, time.time())
    run_until(rt, store, lambda: store.job(j).state in ("finished", "failed"))
    assert store.job(j).state == "finished", store.events(j)
    folder = (tmp_path / "jobs" / str(j) / "sub" / "dir").resolve()
    assert (tmp_path / "jobs" / str(j) / "job.log").read_text() == f"{folder}\n"
