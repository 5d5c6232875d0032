"""`corpora/executors.py` on executors the test drives by hand: the order of results, how many
tasks are in flight, what is cancelled when the caller stops or a task fails, and which failures
become `WorkerError`. (The processes of this machine and Dask are exercised by the corpus tests.)"""

import socket
import threading
import time
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool

import pytest

from cs336_basics.corpora import executors
from cs336_basics.errors import WorkerError


class Manual(Executor):
    """Runs nothing: each task's future waits for the test to complete it."""

    def __init__(self, refuse_at: int | None = None, refusal: Exception | None = None):
        self.futures: list[Future] = []
        self.refuse_at, self.refusal = refuse_at, refusal

    def submit(self, fn, *args):
        if len(self.futures) == self.refuse_at:
            raise self.refusal
        future: Future = Future()
        self.futures.append(future)
        return future


class Synchronous(Executor):
    """Runs each task as it is submitted, and counts the submissions."""

    def __init__(self):
        self.submitted = 0

    def submit(self, fn, *args):
        self.submitted += 1
        future: Future = Future()
        future.set_result(fn(*args))
        return future


def test_the_first_tasks_go_at_once_and_then_one_more_after_each_result():
    executor = Synchronous()
    results = executors.run_ordered(executor, pow, [(2, k) for k in range(10)], max_in_flight=3)
    assert executor.submitted == 3  # before the first result is asked for
    seen = []
    for result in results:
        seen.append(result)
        # Submitted and not yet yielded: never more than max_in_flight.
        assert executor.submitted == min(len(seen) + 2, 10)
    assert seen == [2**k for k in range(10)]


def test_the_results_come_in_the_order_given_whatever_order_the_tasks_end_in():
    executor = Manual()
    results = executors.run_ordered(executor, pow, [(2, k) for k in range(3)], max_in_flight=3)
    for i in (2, 0, 1):
        executor.futures[i].set_result(i)
    assert list(results) == [0, 1, 2]


def test_a_caller_that_stops_early_cancels_the_tasks_left():
    executor = Manual()
    results = executors.run_ordered(executor, pow, [(2, k) for k in range(10)], max_in_flight=3)
    executor.futures[0].set_result("first")
    assert next(results) == "first"
    results.close()
    assert len(executor.futures) == 3  # the next task goes only when the next result is asked for
    assert all(f.cancelled() for f in executor.futures[1:])


def test_a_task_s_own_error_comes_through_as_raised_and_cancels_the_rest():
    executor = Manual()
    results = executors.run_ordered(executor, pow, [(2, k) for k in range(10)], max_in_flight=3)
    executor.futures[0].set_exception(ValueError("record 7 is not JSON"))
    with pytest.raises(ValueError, match="record 7 is not JSON"):
        next(results)
    assert len(executor.futures) == 3 and all(f.cancelled() for f in executor.futures[1:])


@pytest.mark.parametrize("refusal, message", [
    (RuntimeError("cannot schedule new futures after shutdown"),
     "the executor cannot take work: cannot schedule new futures after shutdown"),
    (BrokenProcessPool("gone"), r"a worker process died \(gone\); nothing was written"),
])
def test_an_executor_that_refuses_a_task_is_a_worker_error_and_what_went_is_cancelled(refusal, message):
    executor = Manual(refuse_at=2, refusal=refusal)
    with pytest.raises(WorkerError, match=message):
        executors.run_ordered(executor, pow, [(2, k) for k in range(10)], max_in_flight=5)
    assert len(executor.futures) == 2 and all(f.cancelled() for f in executor.futures)
    # Refused later, after a result: the same error, and the tasks in flight are cancelled.
    executor = Manual(refuse_at=3, refusal=refusal)
    results = executors.run_ordered(executor, pow, [(2, k) for k in range(10)], max_in_flight=3)
    executor.futures[0].set_result(0)
    assert next(results) == 0
    with pytest.raises(WorkerError, match=message):
        next(results)
    assert all(f.cancelled() for f in executor.futures[1:])


def _failed(error: BaseException) -> Future:
    future: Future = Future()
    future.set_exception(error)
    return future


class KilledWorker(Exception):
    __module__ = "distributed.scheduler"  # as Dask's errors are


@pytest.mark.parametrize("error, message", [
    (BrokenProcessPool("x"), "a worker process died"),
    (KilledWorker("task 3"), "the Dask cluster failed a task: KilledWorker: task 3; nothing was written"),
])
def test_a_dead_worker_or_a_failed_cluster_is_a_worker_error(error, message):
    with pytest.raises(WorkerError, match=message):
        executors.result_of(_failed(error), None)


def test_a_cancelled_task_is_a_worker_error():
    future: Future = Future()
    future.cancel()
    with pytest.raises(WorkerError, match="the executor cancelled a task"):
        executors.result_of(future, None)


def test_other_errors_come_through_unchanged():
    for error in (ValueError("bad"), KeyError("k"), MemoryError()):
        with pytest.raises(type(error)) as raised:
            executors.result_of(_failed(error), lambda: None)
        assert raised.value is error


def test_while_waiting_on_wait_is_called_about_ten_times_a_second():
    future: Future = Future()
    calls = []
    threading.Timer(0.45, future.set_result, ["done"]).start()
    assert executors.result_of(future, lambda: calls.append(1)) == "done"
    assert 2 <= len(calls) <= 6


def test_run_ordered_calls_on_wait_while_it_waits_and_without_it_waits_as_long_as_it_takes():
    executor = Manual()
    calls = []
    results = executors.run_ordered(executor, pow, [(2, 0)], max_in_flight=1, on_wait=lambda: calls.append(1))
    threading.Timer(0.35, executor.futures[0].set_result, ["late"]).start()
    assert list(results) == ["late"] and len(calls) >= 2
    future: Future = Future()
    threading.Timer(0.25, future.set_result, ["later"]).start()
    assert executors.result_of(future, None) == "later"


def test_a_task_that_raises_timeout_error_itself_is_not_waited_on_again():
    calls = []
    with pytest.raises(TimeoutError):
        executors.result_of(_failed(TimeoutError("the task's own")), lambda: calls.append(1))
    assert calls == []


class _Client:
    def __init__(self, threads):
        self.threads = threads

    def nthreads(self):
        if self.threads is None:
            raise OSError("the scheduler is gone")
        return self.threads


class _Width:
    def __init__(self, max_workers=None, client=None):
        if max_workers is not None:
            self._max_workers = max_workers
        if client is not None:
            self._client = client


@pytest.mark.parametrize("executor, default, width", [
    (_Width(max_workers=3), 8, 3),  # local processes say how many
    (_Width(client=_Client({"a": 2, "b": 3})), 8, 5),  # a Dask cluster: its threads, summed
    (_Width(client=_Client(None)), 4, 4),  # a cluster that cannot answer: the default
    (_Width(), 4, 4),
    (_Width(), 0, 1),  # never less than one
    (_Width(client=_Client({})), 0, 1),
])
def test_the_width_of_an_executor(executor, default, width):
    assert executors.executor_width(executor, default) == width


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_closed_port_is_known_at_once_and_other_addresses_are_left_to_dask():
    port = _closed_port()
    assert isinstance(executors._connection_refused(f"tcp://127.0.0.1:{port}"), ConnectionRefusedError)
    assert isinstance(executors._connection_refused(f"127.0.0.1:{port}"), ConnectionRefusedError)  # no scheme
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        assert executors._connection_refused(f"tcp://127.0.0.1:{listening.getsockname()[1]}") is None
    for address in (f"inproc://127.0.0.1:{port}", "tcp://127.0.0.1", f"tcp://:{port}", "tcp://127.0.0.1:port"):
        assert executors._connection_refused(address) is None


def test_a_closed_port_on_an_ipv6_address_in_brackets():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
            port = s.getsockname()[1]
    except OSError:
        pytest.skip("no IPv6 loopback here")
    assert isinstance(executors._connection_refused(f"tcp://[::1]:{port}"), ConnectionRefusedError)


def test_dask_executor_without_dask_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"pip install 'cs336-basics\[dask\]'"):
        with executors.dask_executor("tcp://127.0.0.1:1"):
            pass


def test_local_workers_are_forked_where_fork_exists():
    import multiprocessing

    expected = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    assert executors.process_context().get_start_method() == expected
    pool = executors.local_executor(1)
    try:
        assert executors.executor_width(pool, 4) == 1
    finally:
        pool.shutdown()


def _write_slowly(path: str) -> None:
    with open(path, "wb") as f:
        f.write(b"begun")
        f.flush()
        time.sleep(60)


def _stop_once_writing(executor, path) -> None:
    """`stop_now` once the running task has begun writing `path`: it returns within seconds, its
    workers dead."""
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    processes = list(executor._processes.values())
    started = time.monotonic()
    executors.stop_now(executor)
    assert time.monotonic() - started < 10
    assert processes and not any(p.is_alive() for p in processes)


def test_stop_now_ends_the_running_workers_before_it_returns(tmp_path):
    # A worker still writing after the caller has cleaned up would leave a temporary file behind it.
    executor = executors.local_executor(1)
    future = executor.submit(_write_slowly, str(tmp_path / "part.tmp"))
    queued = [executor.submit(_write_slowly, str(tmp_path / f"never-{i}.tmp")) for i in range(4)]
    _stop_once_writing(executor, tmp_path / "part.tmp")
    assert future.done()
    assert queued[-1].cancelled()  # a task no worker had taken is cancelled, not left to break
    assert not list(tmp_path.glob("never-*"))



def _ignore_sigterm_and_write_slowly(path: str) -> None:
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _write_slowly(path)


def test_stop_now_ends_workers_that_sigterm_does_not_end(tmp_path):
    # A worker busy where SIGTERM is held back, or whose handler does not end it, must not keep
    # the caller waiting: after a second it is killed.
    executor = executors.local_executor(1)
    executor.submit(_ignore_sigterm_and_write_slowly, str(tmp_path / "part.tmp"))
    _stop_once_writing(executor, tmp_path / "part.tmp")


def _send_half_a_result_and_wait(path: str) -> None:
    """In a worker: write the start of a result message on the pool's result pipe (as a worker
    stopped while sending a large result leaves it), say so in `path`, and wait to be stopped."""
    import os
    import struct
    import sys

    frame = sys._getframe()
    while frame.f_code.co_name != "_process_worker":  # concurrent.futures' loop, which holds the pipe
        frame = frame.f_back
    writer = frame.f_locals["result_queue"]._writer
    os.write(writer.fileno(), struct.pack("!i", 1000) + b"only ten b")  # a header for 1,000 bytes, then 10
    _write_slowly(path)


def test_stop_now_ends_the_pools_thread_when_a_worker_dies_halfway_through_a_result(tmp_path):
    # Its manager thread waits for the rest of the message; the interpreter's exit waits for that thread:
    # `bpe` hung for ever after SIGTERM (or Ctrl-C) reached it while a worker sent a result.
    executor = executors.local_executor(1)
    results = executor._result_queue
    executor.submit(_send_half_a_result_and_wait, str(tmp_path / "part.tmp"))
    manager = executor._executor_manager_thread
    try:
        _stop_once_writing(executor, tmp_path / "part.tmp")
        assert not manager.is_alive(), "the pool's manager thread still waits for the rest of a result"
    finally:
        results._writer.close()  # without the fix, so that this process can still exit
        manager.join()
