"""Writing files so that a failed or interrupted write leaves the old files (or none), never a
partly written one: the one mechanism this package uses for it, for every file it writes (token
arrays, dataset shards and records, vocabularies, trainer formats).

Each file is written to a hidden temporary file beside its final name (`.NAME.XXXXXXXX.tmp`),
synced, and renamed into place: one file with `replacing` (or `replacing_remote` for an `fsspec`
filesystem, where the rename is a copy and an object appears whole or not at all), several with
`StagedFiles`, renamed one after another with Ctrl-C and SIGTERM held back until the last rename
(`deferred_signals`), so only SIGKILL or a crash between two renames can leave new files beside
old ones (`gpt2.save_vocab_and_merges` makes that detectable); the temporary files such a kill
leaves are removed by the next write of the same files that succeeds (`remove_leftovers`: a
temporary file is locked while it is written, so one that no process holds is a leftover).
Missing folders are created for the write and removed again if it fails (`folders_for`). The
temporary files are ours, not the user's: an OSError raised while one is made, written, synced or
renamed names the final path instead (`final_names`), so no message ever shows a temporary file's
name.

Holding signals back is done with Python-level handlers, not the thread's signal mask: the kernel
hands a signal to any thread that does not block it, and the native threads that libraries start
(numpy's BLAS pool) block nothing, so a mask on the main thread alone lets Ctrl-C through.
"""

import contextlib
import os
import re
import signal
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, Self

try:
    import fcntl
except ImportError:  # Windows: a leftover is known by its name alone
    fcntl = None

_DEFERRED = (signal.SIGINT, signal.SIGTERM)


def _is_temp_for(name: object, path: Path) -> bool:
    """Whether `name` is (or may be) a temporary file standing for `path`: `.NAME.XXXXXXXX.tmp` beside it."""
    if not isinstance(name, (str, os.PathLike)):
        return False
    name = Path(name)
    return name.parent == path.parent and name.name.startswith(f".{path.name}.") and name.name.endswith(".tmp")


@contextlib.contextmanager
def final_names(path: str | os.PathLike) -> Iterator[None]:
    """Re-raise an OSError of the block that names a temporary file of `path` (or no file at all)
    as the same error naming `path`: `[Errno 28] No space left on device: 'out/train.bin'`, never
    `.../.train.bin.lq7nkkyv.tmp`."""
    path = Path(path)
    try:
        yield
    except OSError as e:
        names = (e.filename, e.filename2)
        if e.errno is None or not (any(_is_temp_for(n, path) for n in names) or names == (None, None)):
            raise
        raise type(e)(e.errno, e.strerror, str(path)).with_traceback(e.__traceback__) from None


def temp_file_beside(path: Path) -> tuple[int, str]:
    """Create a hidden temporary file in `path`'s folder, with the permissions a new file would get,
    held (flock) while it is open, so that `remove_leftovers` knows it is being written.

    Returns (file descriptor, temporary path). Renaming it onto `path` replaces `path` atomically.
    An OSError (a missing or read-only folder) names `path`, not the temporary file.
    """
    with final_names(path):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    if fcntl is not None:
        with contextlib.suppress(OSError):  # a filesystem without flock: no worse than before
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    umask = os.umask(0)
    os.umask(umask)
    if hasattr(os, "fchmod"):
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600 files
    return fd, tmp


_TEMP_NAME = re.compile(r"\.(.+)\.[a-z0-9_]{8}\.tmp")  # `.NAME.XXXXXXXX.tmp`, as `temp_file_beside` makes them


def remove_leftovers(folder: str | os.PathLike, is_final: Callable[[str], bool]) -> list[Path]:
    """Remove the temporary files in `folder` that stand for a final name `is_final` accepts and
    that no write holds: what writes killed before their rename left (SIGKILL, a crash). A write
    calls this once it has put its files in place, so a successful run leaves none of an earlier
    run of the same output. Returns what was removed."""
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        match = _TEMP_NAME.fullmatch(name)
        if match is None or not is_final(match.group(1)):
            continue
        path = Path(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: a live write holds it
            path.unlink()
            removed.append(path)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def _open_temp(fd: int) -> BinaryIO:
    return os.fdopen(fd, "wb")  # one place, so that a test can fill the disk


@contextlib.contextmanager
def replacing(path: str | os.PathLike, *, fsync: bool = True, leftovers: bool = False) -> Iterator[BinaryIO]:
    """A binary file to write (and seek in) in place of `path`: renamed onto `path` when the block
    ends without an error (flushed and synced first when `fsync`), deleted otherwise; the file
    that was at `path` stays untouched until then. With `leftovers`, what killed writes of `path`
    left is removed once it is in place (`remove_leftovers`; it reads the folder, so not for the
    many small files of a shard folder, which removes its own)."""
    path = Path(path)
    fd, tmp = temp_file_beside(path)
    try:
        with _open_temp(fd) as f:
            yield f
            with final_names(path):
                if fsync:
                    f.flush()
                    os.fsync(f.fileno())
        with final_names(path):
            os.replace(tmp, path)
        if leftovers:
            remove_leftovers(path.parent, path.name.__eq__)
    finally:
        Path(tmp).unlink(missing_ok=True)


@contextlib.contextmanager
def replacing_remote(fs, path: str) -> Iterator[BinaryIO]:
    """`replacing` for the path `path` of an `fsspec` filesystem `fs`: the temporary object beside
    it is moved onto it when the block ends without an error, and removed in any case."""
    folder, _, base = path.rpartition("/")
    tmp = f"{folder}/.{base}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with fs.open(tmp, "wb") as f:
            yield f
        fs.mv(tmp, path)
    except OSError as e:
        if tmp not in str(e):
            raise
        raise OSError(e.errno, str(e.strerror or e).replace(tmp, path)).with_traceback(e.__traceback__) from None
    finally:
        if fs.exists(tmp):
            fs.rm(tmp)


@contextlib.contextmanager
def folders_for(paths: Iterable[str | os.PathLike]) -> Iterator[None]:
    """Create the missing folders above each path for the block; if the block fails, remove those
    it created that are still empty, so that a failed or interrupted write leaves no empty folder."""
    made: list[Path] = []
    for path in paths:
        missing = []
        folder = Path(path).parent
        while not folder.exists() and folder != folder.parent:
            missing.append(folder)
            folder = folder.parent
        for folder in reversed(missing):
            folder.mkdir(exist_ok=True)
            made.append(folder)
    try:
        yield
    except BaseException:
        for folder in reversed(made):
            with contextlib.suppress(OSError):  # not empty: something else was put there
                folder.rmdir()
        raise


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for the block: one that arrives meanwhile is delivered, to the
    handler that was in place, when the block ends. Outside the main thread (where handlers cannot
    be set, and which signals never interrupt) the block simply runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: arrived.append(signum)) for sig in _DEFERRED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not None:  # None: a handler not set from Python, which cannot be put back
                signal.signal(sig, handler)
        for sig in dict.fromkeys(arrived):
            signal.raise_signal(sig)  # now to the handler in place: KeyboardInterrupt for Ctrl-C


class StagedFiles:
    """Temporary files, each standing for a final path until `commit` renames them all.

    `open(path)` returns a binary file to write; `commit()` flushes, syncs and renames every one in
    the order opened, with Ctrl-C and SIGTERM deferred until all are renamed, then removes what
    killed writes of the same paths left (`remove_leftovers`); `abort()`, or leaving a `with` block
    by an exception, deletes them.
    """

    def __init__(self) -> None:
        self._files: list[tuple[BinaryIO, str, Path]] = []

    def open(self, path: str | os.PathLike) -> BinaryIO:
        path = Path(path)
        fd, tmp = temp_file_beside(path)
        f = os.fdopen(fd, "w+b")
        self._files.append((f, tmp, path))
        return f

    def commit(self) -> None:
        try:
            for f, _, path in self._files:
                with final_names(path):
                    f.flush()
                    os.fsync(f.fileno())
                    f.close()
            with deferred_signals():
                for _, tmp, path in self._files:
                    with final_names(path):
                        os.replace(tmp, path)
            finals: dict[Path, set[str]] = {}
            for _, _, path in self._files:
                finals.setdefault(path.parent, set()).add(path.name)
            for folder, names in finals.items():
                remove_leftovers(folder, names.__contains__)
        finally:
            self.abort()

    def abort(self) -> None:
        """Close and delete the temporary files that were not renamed (all of them before `commit`)."""
        for f, tmp, _ in self._files:
            f.close()
            Path(tmp).unlink(missing_ok=True)
        self._files.clear()

    def __enter__(self) -> "StagedFiles":
        return self

    def __exit__(self, *exc) -> None:
        self.abort()


class StagedWriter:
    """A writer whose files wait in `self._staged` (a `StagedFiles`) until its `close()` puts them
    in place. As a `with` block it closes when the block ends without an error, and aborts otherwise."""

    _staged: StagedFiles

    def close(self) -> object:
        raise NotImplementedError

    def abort(self) -> None:
        """Delete what was written: the files that were there before stay as they were."""
        self._staged.abort()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def atomic_write_texts(files: dict[str | os.PathLike, str]) -> None:
    """Write each text as UTF-8 (with `\\n` line ends) to its path, all or none (see the module
    docstring). Missing folders are created, and removed again if the write fails."""
    with folders_for(files), StagedFiles() as staged:
        for path, text in files.items():
            staged.open(path).write(text.encode("utf-8"))
        staged.commit()
