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


def _ray_running_here() -> bool:
    from ray._private import services, utils
    return bool(services.find_gcs_addresses() or utils.read_ray_address())


def test_serve_with_the_ray_backend_and_no_address_starts_a_local_ray(tmp_path):
    """`--ray-address` left out and no Ray running here: `quanta serve` starts one offering this
    machine's CPU slots (as its help says; it stopped with 'Could not find any running Ray
    instance', blamed on --state, and left a database behind), runs a job on it, and the Ray goes
    when the service does."""
    import os
    from test_service import Service
    if _ray_running_here():
        pytest.skip("a Ray already runs on this machine: the service would join it")
    s = Service(tmp_path / "state", cluster="auto", args=["--backend", "ray"]).start()
    try:
        slots = os.cpu_count() or 1
        nodes = s.req("GET", "/v1/cluster").json()["nodes"]
        assert [(n["gpu_type"], n["gpus"]) for n in nodes] == [("cpu", slots)], nodes
        one = s.submit(steps=30, checkpoint_every=10)
        assert s.wait(one, lambda j: j["state"] == "finished", timeout=180)["steps_done"] == 30
        # stopped mid-run, the Ray goes with it; started again (a new Ray), the job resumes
        # from its checkpoint and runs once
        two = s.submit(command=[PY, "-m", "quanta.examples.train", "--step-sleep", "0.05"],
                       steps=400, checkpoint_every=10)
        s.wait(two, lambda j: j["state"] == "running" and j["steps_done"] >= 20, timeout=180)
        s.stop()
        s.restart()
        assert s.wait(two, lambda j: j["state"] == "finished", timeout=300)["steps_done"] == 400
        assert "resume" in s.kinds(two), s.kinds(two)
        log = (s.state / "jobs" / str(two) / "job.log").read_text()
        assert log.count("step 1/400") == 1 and log.count("step 400/400") == 1, log[-2000:]
    finally:
        s.stop()
    end = time.time() + 60
    while _ray_running_here() and time.time() < end:
        time.sleep(0.5)
    assert not _ray_running_here(), "the Ray the service started outlived it"


def test_a_ray_that_cannot_start_is_one_line_naming_the_flag(monkeypatch, tmp_path):
    from quanta.errors import QuantaError
    from quanta.runtime.backends import ray as ray_backend

    def init(**_kw):
        raise RuntimeError("no room\nfor a raylet (details on the next lines)")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(QuantaError) as err:
        ray_backend.connect(None)
    assert str(err.value) == "field '--ray-address': cannot start or join Ray: no room"
