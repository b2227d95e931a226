"""The CUDA paths, run for real: training steps on cuda:0 through the job SDK, an nccl process
group, checkpoints of GPU tensors restored onto the GPU, a preemption (SIGTERM -> checkpoint ->
resume on the GPU) through the local backend, and a job scheduled by the runtime on the GPUs it
detects. Marked `gpu`; skipped where torch.cuda.is_available() is False (CI is CPU-only):

    python -m pytest -q tests/test_gpu.py -m gpu

The first two tests (device-name matching, CUDA_VISIBLE_DEVICES translation) need no GPU and run
everywhere."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quanta.job import Allocation, Job, read_json
from quanta.runtime.backends.base import Launch, Rank
from quanta.runtime.backends.local import LocalBackend, detect_cluster, free_port, gpu_type_of, \
    physical_devices

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable

try:                       # torch is an extra (runtime): without it the GPU tests skip too
    import torch
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:
    torch, HAVE_CUDA = None, False

needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() "
                                "is False)" if torch is not None else "needs torch with CUDA")


# -- no GPU needed -----------------------------------------------------------------------------------
def test_gpu_types_from_device_names():
    assert gpu_type_of("NVIDIA H200") == "h200"
    assert gpu_type_of("NVIDIA A100-SXM4-80GB") == "a100"
    assert gpu_type_of("NVIDIA A10G") == "a10"
    assert gpu_type_of("Tesla V100-SXM2-16GB") == "v100"
    assert gpu_type_of("Quadro RTX 6000") == "rtx6000"
    assert gpu_type_of("NVIDIA L40S") is None


def test_rank_devices_follow_the_schedulers_visible_devices(tmp_path, monkeypatch):
    """Cluster device i is the i-th GPU the scheduler sees, not the machine's GPU i."""
    assert physical_devices("1", "2,3") == "3"
    assert physical_devices("0", "GPU-aaaa,GPU-bbbb") == "GPU-aaaa"
    assert physical_devices("1", None) == "1" and physical_devices("", "2,3") == ""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    backend = LocalBackend()
    backend.launch(Launch("j", tmp_path, [PY, "-c", "pass"], [Rank(0, 0, "1")], "h200", 1))
    spec = read_json(tmp_path / "launch.json")
    assert spec["ranks"][0]["cuda_visible_devices"] == "6"
    end = time.time() + 60
    while not backend.poll():
        assert time.time() < end
        time.sleep(0.05)


# -- on a GPU ------------------------------------------------------------------------------------------
def _gpu_type() -> str:
    return gpu_type_of(torch.cuda.get_device_name(0)) or "v100"


def _first_gpu() -> str:
    """CUDA_VISIBLE_DEVICES for a child process that should use this process's cuda:0."""
    return physical_devices("0", os.environ.get("CUDA_VISIBLE_DEVICES"))


def _train(job: Job, model_name: str, steps: int, net=None, after_step=None) -> list[float]:
    """The example job's loop (quanta.examples.train) on the job's device; the losses."""
    from quanta.examples.train import batch, build, loss_sum
    model = build(model_name, 0)
    net = job.wrap(model) if net is None else net(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    dev = torch.device(job.alloc.device)
    losses = []
    for step in job.steps(model, opt, total_steps=steps):
        x, y = batch(model_name, 0, step, job.alloc.global_batch)
        opt.zero_grad(set_to_none=True)
        loss = loss_sum(model_name, net(x.to(dev)), y.to(dev)) / job.alloc.global_batch
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if after_step:
            after_step(job, step)
    job.model, job.opt = model, opt
    return losses


@pytest.mark.gpu
@needs_cuda
def test_detected_cluster_is_this_machines_gpus():
    from quanta.model.presets import resolve_cluster
    spec = detect_cluster()
    gtype, shape = spec.split(":")
    assert gtype == _gpu_type() and shape == f"1x{torch.cuda.device_count()}", spec
    cluster = resolve_cluster(spec)
    assert cluster.types == (gtype,) and cluster.num_gpus == torch.cuda.device_count()


@pytest.mark.gpu
@needs_cuda
def test_sdk_trains_on_cuda_and_restores_gpu_checkpoints(tmp_path):
    alloc = Allocation.from_env({"QUANTA_JOB_ID": "g", "QUANTA_JOB_DIR": str(tmp_path),
                                 "CUDA_VISIBLE_DEVICES": "0", "QUANTA_GPU_TYPE": _gpu_type(),
                                 "QUANTA_GLOBAL_BATCH": "64", "QUANTA_CHECKPOINT_EVERY": "1000"})
    assert alloc.device == "cuda:0"
    job = Job(alloc)
    losses = _train(job, "mlp", 300)
    assert len(losses) == 300 and sum(losses[-20:]) < 0.5 * sum(losses[:20]), losses[::30]
    model, opt = job.model, job.opt
    assert all(p.is_cuda for p in model.parameters())
    assert all(s["momentum_buffer"].is_cuda for s in opt.state.values())

    # the checkpoint holds host tensors (loadable anywhere) and this GPU's generator state
    man = read_json(tmp_path / "checkpoints" / "manifest.json")
    assert man[-1]["step"] == 300
    raw = torch.load(tmp_path / "checkpoints" / man[-1]["file"], weights_only=False)
    assert all(not t.is_cuda for t in raw["model"].values())
    assert "cuda" in raw["rng"]

    # restore onto the GPU: a fresh model and optimiser get the same weights and momentum there
    from quanta.examples.train import build
    fresh = build("mlp", 1).to("cuda:0")
    fresh_opt = torch.optim.SGD(fresh.parameters(), lr=0.05, momentum=0.9)
    assert Job(alloc).restore(fresh, fresh_opt) == 300
    for a, b in zip(model.parameters(), fresh.parameters()):
        assert b.is_cuda and torch.equal(a, b)
    for p, q in zip(model.parameters(), fresh.parameters()):
        mb = fresh_opt.state[q]["momentum_buffer"]
        assert mb.is_cuda and torch.equal(opt.state[p]["momentum_buffer"], mb)

    # ... and on a CPU slot (a job moved off the GPU)
    cpu_model = build("mlp", 1)
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.05, momentum=0.9)
    assert Job(Allocation("g", tmp_path)).restore(cpu_model, cpu_opt) == 300
    for a, b in zip(model.parameters(), cpu_model.parameters()):
        assert not b.is_cuda and torch.equal(a.cpu(), b)


@pytest.mark.gpu
@needs_cuda
def test_nccl_process_group_of_one_trains_with_ddp(tmp_path):
    """wrap(distributed=True): an nccl group of world size 1, DDP on cuda:0, and a stop request
    agreed over nccl (all_reduce) that checkpoints at the next step boundary."""
    script = """
import json, sys
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from quanta.job import Job
sys.path.insert(0, sys.argv[1])
from test_gpu import _train
job = Job.from_env()
seen = {}
def after(job, step):
    if step == 0:
        seen.update(ddp=True, backend=dist.get_backend(), world=dist.get_world_size())
    if step == 24:
        job.stop_requested = True        # as a SIGTERM would: stop at the next step boundary
losses = _train(job, "lm", 1000, net=lambda m: job.wrap(m, distributed=True), after_step=after)
print(json.dumps({**seen, "steps": len(losses), "first": losses[0], "last": losses[-1]}))
"""
    env = {**os.environ, "QUANTA_JOB_ID": "n", "QUANTA_JOB_DIR": str(tmp_path),
           "CUDA_VISIBLE_DEVICES": _first_gpu(), "QUANTA_GPU_TYPE": _gpu_type(), "RANK": "0",
           "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "QUANTA_GLOBAL_BATCH": "32", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([PY, "-c", script, str(Path(__file__).parent)], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["backend"] == "nccl" and out["world"] == 1, out
    assert out["steps"] == 25 and out["last"] < out["first"], out
    assert read_json(tmp_path / "checkpoints" / "manifest.json")[-1]["step"] == 25
    assert "destroy_process_group" not in r.stderr, r.stderr[-2000:]   # torn down at exit


def _wait_exit(backend, timeout=180.0):
    end = time.time() + timeout
    while time.time() < end:
        got = backend.poll()
        if got:
            return got[0]
        time.sleep(0.05)
    raise AssertionError("the job's processes did not end in time")


def _gpu_launch(backend, workdir: Path, attempt: int, steps=400, sleep=0.01):
    gtype = _gpu_type()
    env = {"QUANTA_JOB_ID": workdir.name, "QUANTA_JOB_DIR": str(workdir),
           "QUANTA_TOTAL_STEPS": str(steps), "QUANTA_GLOBAL_BATCH": "64",
           "QUANTA_CHECKPOINT_EVERY": "50", "QUANTA_GPU_TYPE": gtype, "QUANTA_REPORT_EVERY_S": "0.05",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [PY, "-m", "quanta.examples.train", "--model", "mlp", "--step-sleep", str(sleep)]
    backend.launch(Launch(workdir.name, workdir, cmd, [Rank(0, 0, "0")], gtype, attempt,
                          env=env, grace_s=30))


@pytest.mark.gpu
@needs_cuda
def test_preempted_gpu_job_resumes_from_its_checkpoint_on_the_gpu(tmp_path):
    backend = LocalBackend()
    work, ref = tmp_path / "job", tmp_path / "ref"
    _gpu_launch(backend, work, 1)
    end = time.time() + 120
    while (read_json(work / "progress.json") or {}).get("step", 0) < 120:
        assert time.time() < end and not (work / "exit.json").exists(), \
            (work / "job.log").read_text() if (work / "job.log").exists() else "no log"
        time.sleep(0.05)
    backend.stop(work.name)                                       # SIGTERM -> checkpoint -> exit 0
    ex = _wait_exit(backend)
    assert ex.returncode == 0, (ex, (work / "job.log").read_text())
    man = read_json(work / "checkpoints" / "manifest.json")
    stopped_at = man[-1]["step"]
    assert 120 <= stopped_at < 400, man                           # stopped between checkpoints
    prog = read_json(work / "progress.json")
    assert prog["gpu_type"] == _gpu_type() and prog["step"] == stopped_at
    raw = torch.load(work / "checkpoints" / man[-1]["file"], weights_only=False)
    assert "cuda" in raw["rng"]                                   # the SDK ran on the GPU
    spec = read_json(work / "launch.json")
    assert spec["ranks"][0]["cuda_visible_devices"] == _first_gpu()

    _gpu_launch(backend, work, 2)                                 # resume on the GPU
    _gpu_launch(backend, ref, 1)                                  # and an uninterrupted run
    exits = {e.job_id: e for e in (_wait_exit(backend), _wait_exit(backend))}
    assert exits[work.name].returncode == 0 and exits[ref.name].returncode == 0, exits
    log = (work / "job.log").read_text()
    assert log.count("step 1/400") == 1, log                     # not restarted from scratch
    assert read_json(work / "checkpoints" / "manifest.json")[-1]["step"] == 400
    got = torch.load(work / "checkpoints" / read_json(work / "checkpoints" / "manifest.json")[-1]
                     ["file"], weights_only=False)["model"]
    want = torch.load(ref / "checkpoints" / read_json(ref / "checkpoints" / "manifest.json")[-1]
                      ["file"], weights_only=False)["model"]
    for k in want:          # the same optimisation as without the preemption
        assert torch.allclose(got[k], want[k], atol=1e-5, rtol=1e-4), k


@pytest.mark.gpu
@needs_cuda
def test_runtime_schedules_a_job_on_the_detected_gpu(tmp_path):
    from quanta.model.presets import resolve_cluster
    from quanta.perf.catalog_model import CatalogModel
    from quanta.policies import make_policy
    from quanta.runtime.controller import Runtime
    from quanta.runtime.spec import parse_submission
    from quanta.service.store import Store
    store = Store(tmp_path / "q.db")
    rt = Runtime(store, LocalBackend(), resolve_cluster(detect_cluster()), make_policy("fifo"),
                 CatalogModel(), tmp_path / "jobs", poll_s=0.05)
    rt.recover()
    sub = parse_submission({"name": "cnn", "steps": 300, "batch_size": 64, "checkpoint_every": 100,
                            "command": [PY, "-m", "quanta.examples.train", "--model", "cnn"],
                            "env": {"PYTHONPATH": str(ROOT)}})
    job = store.add_job("u", sub.name, sub.queue, sub.model_dump(), sub.steps, time.time())
    end = time.time() + 180
    while store.job(job).state not in ("finished", "failed", "cancelled"):
        assert time.time() < end, store.events(job)
        rt.step()
        time.sleep(0.05)
    rec = store.job(job)
    assert rec.state == "finished", (rec, store.events(job))
    assert rec.gpu_type == _gpu_type() and rec.steps_done == 300
    assert rec.steps_per_s > 0
    spec = read_json(tmp_path / "jobs" / str(job) / "launch.json")
    assert spec["ranks"][0]["cuda_visible_devices"] == _first_gpu()
