"""Running work on an executor: this machine's processes by default, or any
`concurrent.futures.Executor`, such as a Dask cluster's (`client.get_executor()`).

Results come back in the order the work was given, with a bounded number of tasks in flight, so a
caller can write each result as it arrives and never holds them all. A worker that dies or an
executor that breaks becomes `WorkerError`; errors raised by the work itself (a bad record, a file
that has gone) come through as they were raised.

How many workers a corpus gets by default (`default_num_workers`), and the one way the package
starts, stops and reports its workers: an executor (`local_pool` for a
block, which stops it at once by `stop_now` when the block fails), or plain processes fed through a queue (`start_processes`,
`stop_processes`), and `worker_died` for the error when one dies.
"""

import concurrent.futures
import contextlib
import multiprocessing
import os
import socket
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import islice
from multiprocessing.process import BaseProcess

from cs336_basics.errors import WorkerError, missing_extra


# Below this many bytes of input one process is faster than starting workers.
PARALLEL_MIN_BYTES = 4 << 20


def default_num_workers(input_bytes: int) -> int:
    """How many local workers a corpus of `input_bytes` gets by default: all the cores this process
    may use, or 1 for a small corpus (below `PARALLEL_MIN_BYTES`)."""
    if input_bytes < PARALLEL_MIN_BYTES:
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def process_context():
    """The multiprocessing context for workers: fork where there is one (cheap, shares memory), else spawn."""
    return multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def local_executor(num_workers: int, *, initializer=None, initargs=()) -> ProcessPoolExecutor:
    """`num_workers` processes of this machine."""
    return ProcessPoolExecutor(num_workers, mp_context=process_context(), initializer=initializer, initargs=initargs)


@contextlib.contextmanager
def local_pool(num_workers: int, *, initializer=None, initargs=()) -> Iterator[ProcessPoolExecutor]:
    """`local_executor`'s processes for the block: they finish their work and shut down when it
    ends, or are stopped at once (`stop_now`) when it fails, Ctrl-C and SIGTERM included."""
    pool = local_executor(num_workers, initializer=initializer, initargs=initargs)
    try:
        yield pool
    except BaseException:
        stop_now(pool)
        raise
    pool.shutdown()


def own_pool(executor: Executor | None, num_workers: int, *, initializer=None, initargs=()):
    """A context giving `executor` as it is when one is given, else a `local_pool` of `num_workers`."""
    if executor is not None:
        return contextlib.nullcontext(executor)
    return local_pool(num_workers, initializer=initializer, initargs=initargs)


def start_processes(target: Callable, args: tuple, count: int) -> list[BaseProcess]:
    """`count` daemon processes (of `process_context()`) running `target(*args)`, started."""
    ctx = process_context()
    processes = [ctx.Process(target=target, args=args, daemon=True) for _ in range(count)]
    for process in processes:
        process.start()
    return processes


def stop_processes(processes: Iterable[BaseProcess]) -> None:
    """Terminate the processes still running; they have all ended when this returns (one that
    SIGTERM has not ended after a second is killed)."""
    processes = list(processes)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=1)
        if process.is_alive():  # a forked worker keeps its parent's SIGTERM handler, which may not end it
            process.kill()
            process.join()


def worker_died(who: str = "a worker process", why: str = "killed, or out of memory?", *, during: str = "",
                kept: str = "nothing was written") -> WorkerError:
    """The error for a worker that died: "WHO died (WHY)DURING; KEPT"."""
    return WorkerError(f"{who} died ({why}){during}; {kept}")


def stop_now(executor: ProcessPoolExecutor) -> None:
    """Shut a local executor down without waiting for the tasks that are running: its workers are
    terminated, and have ended when this returns (so nothing they were writing changes after)."""
    terminate = getattr(executor, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    # Taken before `shutdown`, which forgets them (it sets `_processes` to None).
    processes = list((getattr(executor, "_processes", None) or {}).values())
    manager = getattr(executor, "_executor_manager_thread", None)
    results = getattr(executor, "_result_queue", None)
    executor.shutdown(wait=False, cancel_futures=True)
    stop_processes(processes)
    if results is not None:
        # A worker stopped while it sent a result leaves half a message, which the manager thread
        # would wait for for ever, and the interpreter's exit for it: with the workers gone, this
        # process holds the last write end, and closing it ends that wait.
        results._writer.close()
    if manager is not None:
        # It cancels the tasks not yet taken and fails those that were running; a limit, as it
        # may wait on a pipe that no worker reads any more.
        manager.join(timeout=5)


def executor_width(executor: Executor, default: int) -> int:
    """How many tasks the executor runs at once, when it says so (local processes, Dask), else `default`."""
    width = getattr(executor, "_max_workers", None)
    client = getattr(executor, "_client", None)
    if width is None and client is not None:
        with contextlib.suppress(Exception):
            width = sum(client.nthreads().values())
    return max(int(width or default), 1)


def run_ordered(
    executor: Executor,
    fn: Callable,
    args: Iterable[tuple],
    *,
    max_in_flight: int,
    on_wait: Callable[[], None] | None = None,
) -> Iterator:
    """Yield `fn(*a)` for each `a` of `args`, in order, run on `executor` with at most
    `max_in_flight` tasks submitted and not yet yielded. The first tasks are submitted at once,
    before the first result is asked for, so the caller can do other work while they run.
    `on_wait()` is called about ten times a second while waiting. On any error, or when the caller
    stops early, the tasks left are cancelled."""
    args = iter(args)
    futures: deque[Future] = deque()
    try:
        for a in islice(args, max_in_flight):
            futures.append(_submit(executor, fn, a))
    except BaseException:
        _cancel(futures)
        raise
    return _in_order(executor, fn, args, futures, on_wait)


def _in_order(executor: Executor, fn: Callable, args: Iterator[tuple], futures: deque, on_wait) -> Iterator:
    """The results of `futures`, in order, submitting one more task of `args` after each."""
    try:
        while futures:
            yield result_of(futures.popleft(), on_wait)
            for a in islice(args, 1):
                futures.append(_submit(executor, fn, a))
    finally:
        _cancel(futures)


def _cancel(futures: deque) -> None:
    for future in futures:
        future.cancel()


def _submit(executor: Executor, fn: Callable, args: tuple) -> Future:
    try:
        return executor.submit(fn, *args)
    except BrokenProcessPool as e:
        raise worker_died(why=str(e)) from None
    except RuntimeError as e:  # e.g. "cannot schedule new futures after shutdown"
        raise WorkerError(f"the executor cannot take work: {e}") from None


def result_of(future: Future, on_wait: Callable[[], None] | None = None):
    """The future's result, waited for (calling `on_wait()` about ten times a second meanwhile);
    a worker's death or the executor's failure as `WorkerError`, the task's own error as raised."""
    while True:
        try:
            return future.result(timeout=0.1 if on_wait else None)
        except concurrent.futures.TimeoutError:
            if future.done():  # the task itself raised TimeoutError
                raise
            on_wait()
        except BrokenProcessPool:
            raise worker_died() from None
        except concurrent.futures.CancelledError:
            raise WorkerError("the executor cancelled a task (was it shut down, or did it lose its workers?); "
                              "nothing was written") from None
        except Exception as e:
            if type(e).__module__.split(".")[0] == "distributed":  # KilledWorker, lost connections...
                raise WorkerError(f"the Dask cluster failed a task: {type(e).__name__}: {e}; nothing was written") from None
            raise


@contextlib.contextmanager
def dask_executor(address: str, *, timeout: float | None = None):
    """An executor on the Dask cluster whose scheduler is at `address` (e.g. tcp://scheduler:8786);
    `timeout` seconds to connect (default: Dask's `distributed.comm.timeouts.connect`)."""
    try:
        from distributed import Client
    except ImportError:
        raise missing_extra("dask", "--dask-scheduler", package="Dask's distributed") from None
    refused = _connection_refused(address)
    if refused is not None:
        raise WorkerError(f"cannot reach the Dask scheduler at {address}: {refused.strerror or refused}")
    try:
        options = {} if timeout is None else {"timeout": timeout}
        client = Client(address, set_as_default=False, **options)
    except (OSError, TimeoutError, ValueError) as e:
        raise WorkerError(f"cannot reach the Dask scheduler at {address}: {e}") from None
    try:
        yield client.get_executor()
    finally:
        client.close()


def _connection_refused(address: str) -> OSError | None:
    """The error of a TCP address where nothing listens: known at once, where Dask would retry
    until its connect timeout (30 s by default). None when the address answers, is not TCP, or
    fails in another way (left to Dask to judge)."""
    scheme, _, rest = address.rpartition("://")
    host, _, port = rest.rpartition(":")
    if scheme not in ("", "tcp") or not host or not port.isdigit():
        return None
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except ConnectionRefusedError as e:
        return e
    except OSError:
        return None
    return None
