"""The files of a dataset directory, wherever it is: a local folder, or a URL through `fsspec`
(`s3://bucket/data/`, `gs://...`, `file://...`, `memory://...`).

Names are relative to the directory and use `/` (`shard-00000.npy`, `.work/unit-0000001.ids`).
Every write is atomic for a reader (through `staged`): the bytes go to a hidden temporary name
beside the final one (`.NAME.XXXXXXXX.tmp`), which is then renamed into place; a local file is
fsynced first when asked. On an object store the rename is a copy, and an object appears whole or
not at all.
"""

import hashlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from cs336_basics.corpora import files
from cs336_basics.formats import staged


class Store:
    """The files under `root` (a local path or a URL)."""

    def __init__(self, root: str | os.PathLike):
        root = os.fspath(root)
        self.url = files.is_url(root)
        if self.url:
            self.fs, path = files.filesystem(root)  # the optional dependency's error, if missing
            self._root = path.rstrip("/")
            self.root = root.rstrip("/")
        else:
            self.fs = None
            self._root = self.root = root

    def local_path(self) -> str | None:
        """The folder's path on this machine (also for a `file://` URL), else None."""
        if not self.url:
            return self.root
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        return self._root if "file" in protocols else None

    def __str__(self) -> str:
        return self.root

    def path(self, name: str = "") -> str:
        """The full path (or URL) of `name`, for messages and for local use."""
        if not name:
            return self.root
        return f"{self.root}/{name}" if self.url else os.path.join(self.root, name)

    def _p(self, name: str) -> str:
        return f"{self._root}/{name}" if name else self._root

    def size(self, name: str) -> int | None:
        """The size of a file in bytes; None when there is none."""
        try:
            if self.url:
                return self.fs.size(self._p(name)) if self.fs.isfile(self._p(name)) else None
            return os.stat(self.path(name)).st_size if os.path.isfile(self.path(name)) else None
        except (OSError, FileNotFoundError):
            return None

    def is_dir(self, name: str = "") -> bool:
        return self.fs.isdir(self._p(name)) if self.url else os.path.isdir(self.path(name))

    def read_bytes(self, name: str) -> bytes:
        if self.url:
            with self.fs.open(self._p(name), "rb") as f:
                return f.read()
        return Path(self.path(name)).read_bytes()

    def sha256(self, name: str) -> str:
        digest = hashlib.sha256()
        opened = self.fs.open(self._p(name), "rb") if self.url else open(self.path(name), "rb")  # noqa: SIM115
        with opened as f:
            while block := f.read(1 << 22):
                digest.update(block)
        return digest.hexdigest()

    def names(self, folder: str = "") -> list[str]:
        """The names in a folder (files and folders), without the folder; [] when there is none."""
        if not self.is_dir(folder):
            return []
        if self.url:
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self._p(folder), detail=False))
        return sorted(os.listdir(self.path(folder)))

    def make_dirs(self, folder: str = "") -> None:
        if self.url:
            self.fs.makedirs(self._p(folder), exist_ok=True)
        else:
            os.makedirs(self.path(folder), exist_ok=True)

    def remove(self, name: str) -> None:
        """Remove a file, if it is there."""
        try:
            if self.url:
                self.fs.rm(self._p(name))
            else:
                os.unlink(self.path(name))
        except FileNotFoundError:
            pass

    def remove_tree(self, folder: str) -> None:
        """Remove a folder and all it holds, if it is there."""
        if not self.is_dir(folder):
            return
        if self.url:
            self.fs.rm(self._p(folder), recursive=True)
        else:
            shutil.rmtree(self.path(folder), ignore_errors=True)

    def write(self, name: str, chunks: Iterable[bytes], *, fsync: bool = False) -> str:
        """Write the byte strings `chunks` to `name` atomically (see the module docstring); their
        sha256. An OSError (a full disk, a folder that went) names the file; the temporary file
        never stays."""
        digest = hashlib.sha256()
        replacing = staged.replacing_remote(self.fs, self._p(name)) if self.url else staged.replacing(
            self.path(name), fsync=fsync)
        try:
            with replacing as f:
                for chunk in chunks:
                    f.write(chunk)
                    digest.update(chunk)
        except OSError as e:
            raise OSError(e.errno, f"writing {self.path(name)}: {e.strerror or e}") from None
        return digest.hexdigest()
