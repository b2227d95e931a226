"""Where sweep cells and `quanta reproduce`'s runs go: local worker processes (one thread each)
or tasks on a Ray cluster. Both call `fn(payload)` for every payload and hand each result to
`on_result(index, result)` in this process as it arrives; `on_result` returning False stops the
run (the rest is cancelled). Ray is the distributed engine: no scheduler of workers is written
here."""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Sequence

from quanta.errors import QuantaError

OnResult = Callable[[int, Any], bool]


def default_workers() -> int:
    """Local worker processes by default: one per core this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def one_thread() -> None:
    """A worker's initializer: numpy's BLAS and OpenMP on one thread (several workers share the
    cores; oversubscribed threads are many times slower)."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"


PARENT_POLL_S = 0.5


def _worker_start(initializer: Callable[[], None] | None, parent: int) -> None:
    """A worker's start: `initializer`, and a watch that ends the worker once the process that
    started it is gone (a sweep killed with `kill` or `kill -9` left its workers idle for ever,
    holding the sweep's standard output open)."""
    import threading
    if initializer is not None:
        initializer()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)
    threading.Thread(target=watch, name="quanta-parent-watch", daemon=True).start()


def refuse_in_a_starting_worker() -> None:
    """In a new worker importing the script that started the pool (spawn does), which asks for
    workers again: one line and an exit (multiprocessing's own check would end it with a
    traceback; a sweep's lock on its folder, taken first, with the wrong reason)."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SystemExit("error: a script that runs Quanta in several worker processes must call "
                         "it under `if __name__ == \"__main__\":` (each worker imports the script)")


def run_local(fn: Callable, payloads: Sequence, workers: int, on_result: OnResult,
              initializer: Callable[[], None] | None = None) -> None:
    """`workers` = 1: in this process, in order. Else a process pool of fresh interpreters
    (spawn: safe beside threads, the same on every OS), at most `workers` cells in flight."""
    if workers <= 1:
        for i, p in enumerate(payloads):
            if on_result(i, fn(p)) is False:
                return
        return
    refuse_in_a_starting_worker()
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_start,
                               initargs=(initializer, os.getpid()))
    futures: dict = {}
    given: set = set()                   # futures whose result went to on_result
    try:
        futures = {pool.submit(fn, p): i for i, p in enumerate(payloads)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in sorted(done, key=futures.__getitem__):
                try:
                    res = f.result()
                except BrokenProcessPool:
                    raise QuantaError("a worker process ended abruptly (killed, out of memory, or "
                                      "started by a script without `if __name__ == \"__main__\":`)"
                                      ) from None
                given.add(f)
                if on_result(futures[f], res) is False:
                    return
    except BaseException:
        # stopped (Ctrl-C): the payloads in flight run to their end all the same, so their
        # results are given too (a sweep keeps those cells) before the stop goes on
        pool.shutdown(wait=True, cancel_futures=True)
        for f in sorted(futures, key=futures.__getitem__):
            if f not in given and f.done() and not f.cancelled() and f.exception() is None:
                try:
                    on_result(futures[f], f.result())
                except Exception:   # noqa: BLE001 - the stop that is under way wins
                    break
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def unreachable(address: str, timeout_s: float = 5.0) -> str | None:
    """Why nothing answers at a Ray address HOST:PORT (or ray://HOST:PORT), None where something
    does or the address is another kind ('auto', a session folder): Ray itself retries an
    address no one answers at for minutes."""
    import socket
    hostport = address.removeprefix("ray://")
    host, colon, port = hostport.rpartition(":")
    if not colon or not host or not port.isdigit():
        return None
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as err:
        return err.strerror or str(err) or type(err).__name__
    return None


def run_ray(fn: Callable, payloads: Sequence, address: str, on_result: OnResult) -> None:
    """Every payload as a Ray task of one CPU on the cluster at `address` ('auto': the running
    one; a Ray already connected in this process is used as it is)."""
    try:
        import ray
    except ImportError:
        raise QuantaError("--ray needs Ray: pip install 'quanta[ray]'", field="--ray") from None
    started = False
    if not ray.is_initialized():
        why = unreachable(address)
        if why:
            raise QuantaError(f"cannot connect to a Ray cluster at '{address}': {why}",
                              field="--ray")
        try:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        except (ConnectionError, ValueError, RuntimeError) as err:
            raise QuantaError(f"cannot connect to a Ray cluster at '{address}': "
                              f"{' '.join(str(err).split())[:200]}", field="--ray") from None
        started = True
    try:
        task = ray.remote(num_cpus=1)(fn)
        refs = {task.remote(p): i for i, p in enumerate(payloads)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for r in done:
                if on_result(refs[r], ray.get(r)) is False:
                    for left in pending:
                        ray.cancel(left)
                    return
    finally:
        if started:
            ray.shutdown()
