"""The job-side SDK: what a training script uses to run under Quanta.

    from quanta.job import Job
    job = Job.from_env()                       # the allocation the scheduler gave this process
    model, opt = ..., ...
    ddp = job.wrap(model)                      # DistributedDataParallel when world_size > 1
    for step in job.steps(model, opt):         # restores the last checkpoint, then yields steps
        for micro in range(job.alloc.accumulation):
            x, y = batch_for(step, job.alloc.micro_slice(micro))
            ...
        opt.step()
        job.report(step + 1)                   # progress and throughput, to the scheduler
    # leaving the loop: finished, or stopped by the scheduler (checkpointed first)

The allocation comes from environment variables the backend sets (QUANTA_*, plus the usual
RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT). A SIGTERM asks the job to stop: `steps()` saves a
checkpoint at the next step boundary and ends, and the process exits 0; the scheduler restarts it
later, possibly on other devices, another count or another plan, and `steps()` resumes from that
checkpoint. The global batch size is fixed by the job; `local_batch` and `accumulation` follow the
allocation, so the optimisation is the same whatever the allocation.

Checkpoints are atomic (written to a temporary file, fsynced, renamed) and carry the model, the
optimiser, every RNG state and the step, with a SHA-256 in a manifest and beside each file
(`step-N.pt.sha256`): a corrupt or truncated file is detected, the previous checkpoint is used; a
corrupt or missing manifest is recovered from the checkpoint files themselves (each verified by its
own digest file, or by loading it); and if no checkpoint is usable although the job had one (or
the scheduler recorded one: QUANTA_CHECKPOINT_STEP), the job fails with a clear message
(`checkpoint-error.json` in the job folder tells the scheduler) instead of silently starting over.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import math
import os
import random
import re
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

KEEP_CHECKPOINTS = 2
EXIT_CORRUPT = 3          # exit status of a job whose checkpoints are all unusable
RELEASE_S = 0.2           # at exit, the GIL left to gloo's threads first (_destroy_process_group)
CHECKPOINT_ERROR = "checkpoint-error.json"   # in the job folder: why no checkpoint was usable
_CKPT_NAME = re.compile(r"step-(\d{9,})\.pt")


class CheckpointError(RuntimeError):
    """No usable checkpoint although the job has saved one."""


def _env_int(env: dict, name: str, default: int) -> int:
    value = env.get(name, "")
    return int(value) if value.strip() else default


@dataclass(frozen=True)
class Allocation:
    job_id: str
    workdir: Path
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    device: str = "cpu"               # "cpu" or "cuda:<local index>"
    gpu_type: str = "cpu"
    total_steps: int = 0              # 0: the script decides
    global_batch: int = 0             # 0: the script decides
    accumulation: int = 1             # gradient accumulation steps per optimiser step
    plan: dict = field(default_factory=dict)
    checkpoint_every: int = 100       # steps between periodic checkpoints
    report_every_s: float = 1.0
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    checkpoint_step: int = 0          # the last checkpoint the scheduler knows of (0: none)

    @classmethod
    def from_env(cls, env: dict | None = None) -> "Allocation":
        env = dict(os.environ if env is None else env)
        workdir = Path(env.get("QUANTA_JOB_DIR", "."))
        visible = env.get("CUDA_VISIBLE_DEVICES", "")
        gpu_type = env.get("QUANTA_GPU_TYPE", "cpu")
        local_rank = _env_int(env, "LOCAL_RANK", 0)
        devices = [d for d in visible.split(",") if d.strip()]
        device = "cpu" if not devices or gpu_type == "cpu" else \
            "cuda:0" if len(devices) == 1 else f"cuda:{local_rank}"
        return cls(job_id=env.get("QUANTA_JOB_ID", "local"), workdir=workdir,
                   rank=_env_int(env, "RANK", 0), local_rank=local_rank,
                   world_size=_env_int(env, "WORLD_SIZE", 1), device=device, gpu_type=gpu_type,
                   total_steps=_env_int(env, "QUANTA_TOTAL_STEPS", 0),
                   global_batch=_env_int(env, "QUANTA_GLOBAL_BATCH", 0),
                   accumulation=max(1, _env_int(env, "QUANTA_ACCUMULATION", 1)),
                   plan=json.loads(env.get("QUANTA_PLAN", "") or "{}"),
                   checkpoint_every=max(1, _env_int(env, "QUANTA_CHECKPOINT_EVERY", 100)),
                   report_every_s=float(env.get("QUANTA_REPORT_EVERY_S", "") or 1.0),
                   master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
                   master_port=_env_int(env, "MASTER_PORT", 29500),
                   checkpoint_step=_env_int(env, "QUANTA_CHECKPOINT_STEP", 0))

    @property
    def micro_batches(self) -> int:
        """Micro-batches per optimiser step across the whole job."""
        return self.world_size * self.accumulation

    def micro_slice(self, micro: int) -> slice:
        """This rank's rows of the global batch in accumulation step `micro`: the global batch is
        cut into world_size x accumulation nearly equal parts (the first parts one row larger)."""
        parts, idx = self.micro_batches, micro * self.world_size + self.rank
        base, extra = divmod(self.global_batch, parts)
        start = idx * base + min(idx, extra)
        return slice(start, start + base + (1 if idx < extra else 0))


def _atomic_write(path: Path, data: bytes) -> None:
    """Write a new file (0600, created by os.open with O_EXCL: never through a link planted
    under the temporary name) and rename it over `path`."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _to_cpu(obj: Any) -> Any:
    """A state dict (nested dicts, lists, tuples) with every tensor copied to host memory."""
    if hasattr(obj, "is_cuda") and hasattr(obj, "cpu"):
        return obj.cpu() if obj.is_cuda else obj
    if isinstance(obj, dict):
        return type(obj)((k, _to_cpu(v)) for k, v in obj.items())
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):      # a named tuple
        return type(obj)(*(_to_cpu(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def _destroy_process_group() -> None:
    """The process group torn down at exit, while the interpreter still runs. A gloo worker
    thread drops its reference to each collective's work after the collective completes, and
    the work's thread-local state holds a Python object: the last reference dropped there needs
    the GIL. If the main thread has gone on into the interpreter's finalisation by then, the
    worker is made to exit while destroying it and the rank aborts (SIGABRT, "terminate called
    without an active exception", after its last checkpoint: 6 of 82 runs of a two-rank CPU
    job here; gdb on the core: ProcessGroupGloo::runLoop -> ~AsyncWork -> gil_scoped_acquire ->
    PyThread_exit_thread -> std::terminate). So the main thread first sleeps (the GIL free) for
    a moment: 0 of 60 runs abort (tests/test_job_sdk.py)."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        time.sleep(RELEASE_S)
        dist.destroy_process_group()


def write_json(path: Path, obj: Any) -> None:
    _atomic_write(Path(path), json.dumps(obj).encode())


def read_json(path: Path) -> Any | None:
    """A JSON file written by write_json, or None if absent, unreadable or a symbolic link (a
    job may plant one in its folder, and a service running as root reads these files)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def _cuda_usable() -> bool:
    import torch
    return torch.cuda.is_available()


class Job:
    """One process of a job: allocation, stop signal, checkpoints, progress reports."""

    def __init__(self, alloc: Allocation):
        if alloc.device.startswith("cuda") and not _cuda_usable():
            # a declared cluster's GPUs on a machine without them (serve --cluster v100:2x4 on a
            # laptop, to try queues): the job runs, on the CPU, and its log says so
            print(f"quanta.job: allocated {alloc.gpu_type} GPU(s) {alloc.device}, but CUDA is not "
                  "usable on this machine: running on the CPU", file=sys.stderr, flush=True)
            alloc = replace(alloc, device="cpu")
        self.alloc = alloc
        self.dir = Path(alloc.workdir)
        self.ckpt_dir = self.dir / "checkpoints"
        self.stop_requested = False
        self._last_report = 0.0
        self._rate_mark: tuple[float, int] | None = None
        self._rate = 0.0
        self._dist = False
        self._saved_step = 0          # the last checkpoint this process saved or restored
        if alloc.rank == 0:
            self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        signal.signal(signal.SIGTERM, self._on_term)

    @classmethod
    def from_env(cls) -> "Job":
        return cls(Allocation.from_env())

    def _on_term(self, signum, frame) -> None:
        self.stop_requested = True

    # -- distributed -------------------------------------------------------------------------
    @property
    def on_gpu(self) -> bool:
        return self.alloc.device.startswith("cuda")

    def init_distributed(self, force: bool = False) -> None:
        """Join the job's process group (gloo on CPU, nccl on GPUs) when world_size > 1 (or
        `force`: a group of one process, e.g. to run the nccl path on a single GPU)."""
        a = self.alloc
        if (a.world_size <= 1 and not force) or self._dist:
            return
        import torch
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", a.master_addr)
        os.environ.setdefault("MASTER_PORT", str(a.master_port))
        if self.on_gpu:
            # nccl binds a process to the current device: make it this rank's device before the
            # group exists (otherwise every rank's communicator and barrier use cuda:0)
            torch.cuda.set_device(torch.device(a.device))
            dist.init_process_group("nccl", rank=a.rank, world_size=a.world_size)
        else:
            dist.init_process_group("gloo", rank=a.rank, world_size=a.world_size)
        # a clean exit tears the group down before the interpreter does: else ProcessGroupNCCL
        # warns of a leak, and gloo's threads can abort a rank that finished its work
        # (_destroy_process_group)
        atexit.register(_destroy_process_group)
        self._dist = True

    def wrap(self, model, distributed: bool | None = None):
        """The model on this process's device, in DistributedDataParallel when distributed
        (default: when world_size > 1; True forces a process group even for one process)."""
        import torch
        model = model.to(torch.device(self.alloc.device))
        if not (self.alloc.world_size > 1 if distributed is None else distributed):
            return model
        self.init_distributed(force=True)
        from torch.nn.parallel import DistributedDataParallel
        ids = [torch.device(self.alloc.device).index] if self.on_gpu else None
        return DistributedDataParallel(model, device_ids=ids)

    def _agree_stop(self) -> bool:
        """Every rank stops at the same step: the stop request of any rank counts."""
        if not self._dist:
            return self.stop_requested
        import torch
        import torch.distributed as dist
        # nccl reduces device tensors only: a CPU tensor there raises at the first step
        flag = torch.tensor([1 if self.stop_requested else 0],
                            device=torch.device(self.alloc.device) if self.on_gpu else None)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    # -- checkpoints ---------------------------------------------------------------------------
    def save(self, model, optimizer, step: int) -> None:
        """Atomic checkpoint of model, optimiser, RNG states and step (rank 0 writes)."""
        if self.alloc.rank != 0:
            return
        import io

        import numpy as np
        import torch
        module = getattr(model, "module", model)
        rng = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
               "python": random.getstate()}
        if self.on_gpu:   # the generator of this process's GPU (dropout, randn on the device)
            rng["cuda"] = torch.cuda.get_rng_state(torch.device(self.alloc.device))
        # tensors are written as CPU tensors: the checkpoint loads anywhere (a CPU slot, another
        # GPU index, a machine without CUDA); restore puts them back on the model's devices
        state = {"step": step, "model": _to_cpu(module.state_dict()),
                 "optimizer": _to_cpu(optimizer.state_dict()), "rng": rng,
                 "world_size": self.alloc.world_size, "global_batch": self.alloc.global_batch}
        buf = io.BytesIO()
        torch.save(state, buf)
        data = buf.getvalue()
        name = f"step-{step:09d}.pt"
        digest = hashlib.sha256(data).hexdigest()
        _atomic_write(self.ckpt_dir / name, data)
        # the file's own digest beside it: the file stays verifiable without the manifest
        _atomic_write(self.ckpt_dir / f"{name}.sha256", digest.encode())
        manifest = self._manifest() or []
        entries = [e for e in manifest if e["file"] != name]
        entries.append({"file": name, "step": step, "sha256": digest})
        entries.sort(key=lambda e: e["step"])
        for old in entries[:-KEEP_CHECKPOINTS]:
            (self.ckpt_dir / old["file"]).unlink(missing_ok=True)
            (self.ckpt_dir / f"{old['file']}.sha256").unlink(missing_ok=True)
        write_json(self.ckpt_dir / "manifest.json", entries[-KEEP_CHECKPOINTS:])
        self._saved_step = step

    def _manifest(self) -> list[dict] | None:
        """The manifest's entries; None when it is missing or unreadable (not a list of entries
        naming a checkpoint file of this folder, a step and a digest)."""
        entries = read_json(self.ckpt_dir / "manifest.json")
        if not isinstance(entries, list) or not entries:
            return None
        for e in entries:
            if not (isinstance(e, dict) and isinstance(e.get("file"), str)
                    and _CKPT_NAME.fullmatch(e["file"]) and isinstance(e.get("step"), int)
                    and isinstance(e.get("sha256"), str)):
                return None
        return entries

    def _files(self) -> list[dict]:
        """The checkpoint files themselves, oldest first, each with the digest written beside it
        (None if that is gone: the file is then verified by loading it)."""
        out = []
        for path in self.ckpt_dir.glob("step-*.pt"):
            m = _CKPT_NAME.fullmatch(path.name)
            if m:
                try:
                    digest = (self.ckpt_dir / f"{path.name}.sha256").read_text().strip() or None
                except OSError:
                    digest = None
                out.append({"file": path.name, "step": int(m.group(1)), "sha256": digest})
        return sorted(out, key=lambda e: e["step"])

    def _fail(self, message: str) -> "CheckpointError":
        """The error of a job without a usable checkpoint, also left for the scheduler."""
        if self.alloc.rank == 0:
            try:
                write_json(self.dir / CHECKPOINT_ERROR, {"message": message, "time": time.time()})
            except OSError:
                pass
        return CheckpointError(message)

    def restore(self, model, optimizer) -> int:
        """Load the newest usable checkpoint; returns the step to continue from (0 if none).
        A checkpoint whose bytes do not match its digest is skipped with a warning; a missing or
        unreadable manifest is recovered from the checkpoint files (each checked against the
        digest beside it, or by loading it); when the job had checkpoints (or the scheduler
        recorded one) but none is usable, CheckpointError: never a silent restart from step 0."""
        import io

        import numpy as np
        import torch
        entries = self._manifest()
        manifest_path = self.ckpt_dir / "manifest.json"
        if entries is None:
            entries = self._files()
            if manifest_path.exists() or entries:
                print(f"quanta: checkpoint manifest {manifest_path} is "
                      f"{'unreadable' if manifest_path.exists() else 'missing'}; recovering from "
                      f"the {len(entries)} checkpoint file(s) themselves", file=sys.stderr,
                      flush=True)
        for entry in reversed(entries):
            path = self.ckpt_dir / entry["file"]
            try:
                data = path.read_bytes()
                if entry["sha256"] is not None and \
                        hashlib.sha256(data).hexdigest() != entry["sha256"]:
                    raise ValueError("its SHA-256 does not match its recorded digest")
                # map_location: a checkpoint of GPU tensors (older ones were saved so) must not
                # be loaded onto the device it was saved from, which may be absent or another job's
                state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
                if int(state["step"]) != entry["step"]:
                    raise ValueError(f"it holds step {state['step']}, not {entry['step']}")
            except Exception as err:   # noqa: BLE001 - any failure means: not usable
                print(f"quanta: checkpoint {path} is corrupt ({err}); trying an older one",
                      file=sys.stderr, flush=True)
                continue
            module = getattr(model, "module", model)
            module.load_state_dict(state["model"])        # copies into the model's devices
            optimizer.load_state_dict(state["optimizer"])  # moves its state to the parameters'
            torch.set_rng_state(state["rng"]["torch"])
            if self.on_gpu and "cuda" in state["rng"]:
                torch.cuda.set_rng_state(state["rng"]["cuda"], torch.device(self.alloc.device))
            np.random.set_state(state["rng"]["numpy"])
            random.setstate(state["rng"]["python"])
            self._saved_step = int(state["step"])
            return int(state["step"])
        if entries:
            raise self._fail(f"every checkpoint of job {self.alloc.job_id} in {self.ckpt_dir} "
                             f"is corrupt ({len(entries)} tried)")
        if manifest_path.exists():
            raise self._fail(f"the checkpoint manifest of job {self.alloc.job_id} "
                             f"({manifest_path}) is unreadable and no checkpoint file is left")
        if self.alloc.checkpoint_step > 0:
            raise self._fail(f"job {self.alloc.job_id} saved a checkpoint at step "
                             f"{self.alloc.checkpoint_step}, but {self.ckpt_dir} holds none")
        return 0

    # -- progress ------------------------------------------------------------------------------
    def report(self, step: int, force: bool = False) -> None:
        """Progress (steps done) and measured throughput (steps/s), at most every report_every_s.
        A step that is not a finite number >= 0 is not reported (a warning says so)."""
        if self.alloc.rank != 0:
            return
        try:
            value = float(step)
        except (TypeError, ValueError, OverflowError):
            value = float("nan")
        if isinstance(step, (bool, str)) or not math.isfinite(value) or value < 0:
            print(f"quanta: job.report({step!r}) ignored: a step is a finite number >= 0",
                  file=sys.stderr, flush=True)
            return
        step = int(value) if value.is_integer() else value
        now = time.time()
        if self._rate_mark is None:
            self._rate_mark = (now, step)
        t0, s0 = self._rate_mark
        if now - t0 >= self.alloc.report_every_s and step > s0:
            inst = (step - s0) / (now - t0)
            self._rate = inst if self._rate == 0 else 0.5 * inst + 0.5 * self._rate
            self._rate_mark = (now, step)
        if force and self._rate == 0 and step > s0 and now > t0:
            self._rate = (step - s0) / (now - t0)
        if force or now - self._last_report >= self.alloc.report_every_s:
            self._last_report = now
            write_json(self.dir / "progress.json",
                       {"step": step, "total_steps": self.alloc.total_steps,
                        "steps_per_s": self._rate, "time": now,
                        "world_size": self.alloc.world_size, "gpu_type": self.alloc.gpu_type,
                        "checkpoint_step": self._saved_step})

    # -- the loop ------------------------------------------------------------------------------
    def steps(self, model, optimizer, total_steps: int | None = None) -> Iterator[int]:
        """Restore, then yield step numbers until done or asked to stop (checkpointing first)."""
        total = total_steps or self.alloc.total_steps
        if total <= 0:
            raise ValueError("the job has no total steps: set QUANTA_TOTAL_STEPS or pass total_steps")
        try:
            step = self.restore(model, optimizer)
        except CheckpointError as err:
            print(f"quanta: {err}", file=sys.stderr, flush=True)
            sys.exit(EXIT_CORRUPT)
        self.report(step, force=True)
        while step < total:
            if self._agree_stop():
                self.save(model, optimizer, step)
                self.report(step, force=True)
                return
            yield step
            step += 1
            self.report(step)
            if step % self.alloc.checkpoint_every == 0 and step < total:
                self.save(model, optimizer, step)
        self.save(model, optimizer, step)
        self.report(step, force=True)
