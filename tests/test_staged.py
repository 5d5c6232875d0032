"""Writing files all or none (cs336_basics/formats/staged.py): signals held back while files are
renamed, whatever thread the kernel hands them to, and nothing left behind by a failed write."""

import os
import signal
import threading

import pytest

from cs336_basics.formats.staged import atomic_write_texts, deferred_signals


def test_ctrl_c_during_the_block_arrives_after_it_even_through_another_thread():
    """The kernel may hand a process's signal to any thread that does not block it (numpy's BLAS
    threads block nothing): a signal that another thread receives must wait for the block too."""
    ready, sent = threading.Event(), threading.Event()

    def other():
        ready.wait()
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # the main thread's own
        os.kill(os.getpid(), signal.SIGINT)  # the process's, which any thread may take
        sent.set()

    thread = threading.Thread(target=other)
    thread.start()
    reached_the_end = False
    with pytest.raises(KeyboardInterrupt):
        with deferred_signals():
            ready.set()
            assert sent.wait(10)
            for _ in range(1000):  # give the interpreter every chance to run a handler here
                pass
            reached_the_end = True
    thread.join()
    assert reached_the_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_failed_write_leaves_the_old_files_and_nothing_else(tmp_path):
    (tmp_path / "a.txt").write_text("old a")
    with pytest.raises(UnicodeEncodeError):
        atomic_write_texts({tmp_path / "a.txt": "new a", tmp_path / "b.txt": "\ud800"})
    assert sorted(os.listdir(tmp_path)) == ["a.txt"] and (tmp_path / "a.txt").read_text() == "old a"
    with pytest.raises(UnicodeEncodeError):
        atomic_write_texts({tmp_path / "new" / "deeper" / "c.txt": "\ud800"})
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]  # the folders it made are gone again
    atomic_write_texts({tmp_path / "a.txt": "new a\n", tmp_path / "new" / "b.txt": "b"})
    assert (tmp_path / "a.txt").read_bytes() == b"new a\n" and (tmp_path / "new" / "b.txt").read_text() == "b"
