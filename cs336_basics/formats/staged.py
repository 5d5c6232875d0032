"""Output files written beside their final names and renamed into place together at the end, so a
failed or interrupted write leaves the old files (or none), never a partly written one.

The binary token formats (`megatron`, `llmc`) write through this; `gpt2.atomic_write_texts` does
the same for whole texts held in memory.
"""

import os
import signal
from pathlib import Path
from typing import BinaryIO

from cs336_basics.formats.gpt2 import temp_file_beside


class StagedFiles:
    """Temporary files, each standing for a final path until `commit` renames them all.

    `open(path)` returns a binary file to write; `commit()` flushes, syncs and renames every one in
    the order opened (SIGINT and SIGTERM wait until all are renamed); `abort()`, or leaving a `with`
    block by an exception, deletes them.
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
            for f, _, _ in self._files:
                f.flush()
                os.fsync(f.fileno())
                f.close()
            blocked = {signal.SIGINT, signal.SIGTERM}
            has_mask = hasattr(signal, "pthread_sigmask")
            previous = signal.pthread_sigmask(signal.SIG_BLOCK, blocked) if has_mask else None
            try:
                for _, tmp, path in self._files:
                    os.replace(tmp, path)
            finally:
                if previous is not None:
                    signal.pthread_sigmask(signal.SIG_SETMASK, previous)
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
