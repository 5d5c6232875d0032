"""llm.c's token shards, the format llm.c and modded-nanogpt train from: writer and reader, from one
definition of the layout.

A shard is a header of HEADER_INTS little-endian int32s (MAGIC, VERSION, the number of tokens, then
zeros) followed by the ids as little-endian uint16, so no id may exceed 65535. A corpus is several
shards named as llm.c names them, `PREFIX_000000.bin`, `PREFIX_000001.bin`..., each of at most
`shard_tokens` tokens (llm.c's own scripts use 10**8); the ids run on from one shard to the next, so
a document may be cut between two. The format records no document boundaries: a trainer finds them
at the separator token.

llm.c's loader refuses (asserts on) a shard of fewer than B*T+1 tokens (batch size times sequence
length, plus one), so a small last shard stops training. When the writer knows the total, it
balances: the N = ceil(total / shard_tokens) shards hold total/N tokens each, give or take one, so
none holds fewer than half of `shard_tokens` unless the whole corpus does (`balanced_shard_tokens`).
"""

import os
import re
from pathlib import Path

import numpy as np

from cs336_basics.formats.staged import StagedFiles, StagedWriter, remove_leftovers

MAGIC = 20240520
VERSION = 1
HEADER_INTS = 256
HEADER_DTYPE = np.dtype("<i4")
HEADER_BYTES = HEADER_INTS * HEADER_DTYPE.itemsize
IDS_DTYPE = np.dtype("<u2")
DEFAULT_SHARD_TOKENS = 10**8
MAX_SHARD_TOKENS = int(np.iinfo(HEADER_DTYPE).max)


def shard_path(prefix: str | os.PathLike, index: int) -> Path:
    """`PREFIX_000000.bin` for index 0."""
    return Path(f"{prefix}_{index:06d}.bin")


def check_shard_tokens(shard_tokens: int) -> None:
    """ValueError unless a shard of `shard_tokens` tokens can be written (its header counts them in
    an int32): callers check before any work."""
    if isinstance(shard_tokens, bool) or not isinstance(shard_tokens, int) or not 1 <= shard_tokens <= MAX_SHARD_TOKENS:
        raise ValueError(f"llm.c shards hold 1 to {MAX_SHARD_TOKENS:,} tokens (the header counts them in an int32), "
                         f"not {shard_tokens!r}: choose a smaller shard size (llm.c's own is {DEFAULT_SHARD_TOKENS:,})")


def shard_paths_there(prefix: str | os.PathLike) -> list[Path]:
    """Every file there now named as a shard of `prefix` (`PREFIX_NNNNNN.bin`, gaps or not), sorted."""
    prefix = Path(prefix)
    name = re.compile(re.escape(prefix.name) + r"_\d{6}\.bin")
    folder = prefix.parent
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if name.fullmatch(p.name))


def balanced_shard_tokens(total_tokens: int, shard_tokens: int) -> int:
    """The tokens per shard (the last may hold fewer, by less than the number of shards) that cut
    `total_tokens` into as few shards of at most `shard_tokens` as possible, all about equal."""
    shards = max(-(-total_tokens // shard_tokens), 1)
    return max(-(-total_tokens // shards), 1)


def header(tokens: int) -> bytes:
    values = np.zeros(HEADER_INTS, dtype=HEADER_DTYPE)
    values[:3] = MAGIC, VERSION, tokens
    return values.tobytes()


class LlmcWriter(StagedWriter):
    """Write ids into llm.c shards of at most `shard_tokens` tokens each, streaming. Given
    `total_tokens` (the number of ids that will be added), the shards are balanced (see the module
    docstring): 3,007,532 tokens at `shard_tokens=1_000_000` make four shards of about 751,883,
    not three full ones and one of 7,532.

    >>> with LlmcWriter("out/train", shard_tokens=10**8) as w:
    ...     w.add(np.array([5, 6, 50256]))

    The shards are written to temporary files and renamed into place when the `with` block ends
    without an error (or at `close()`); shards of an earlier write to the same prefix numbered past
    the new last one are then deleted, so the prefix never mixes two writes' shards, and so are the
    temporary files of killed writes to the prefix. An id above 65535 is refused (naming it) and
    leaves the files that were there before.
    """

    def __init__(self, prefix: str | os.PathLike, *, shard_tokens: int = DEFAULT_SHARD_TOKENS,
                 total_tokens: int | None = None) -> None:
        check_shard_tokens(shard_tokens)
        self.prefix = str(prefix)
        if total_tokens is not None:
            shard_tokens = balanced_shard_tokens(total_tokens, shard_tokens)
        self.shard_tokens = shard_tokens
        self.paths: list[Path] = []
        self._staged = StagedFiles()
        self._file = None
        self._in_shard = 0

    def add(self, ids) -> None:
        """Append ids (any 1-D integer array or sequence)."""
        ids = np.asarray(ids)
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "ui"):
            raise ValueError(f"{self.prefix}: ids must be a 1-D integer array, got {ids.dtype} of shape {ids.shape}")
        if ids.size and (ids.max() > np.iinfo(IDS_DTYPE).max or ids.min() < 0):
            bad = int(ids.max()) if ids.max() > np.iinfo(IDS_DTYPE).max else int(ids.min())
            raise ValueError(f"{self.prefix}: token id {bad} does not fit llm.c's uint16 shards (ids 0 to 65535); "
                             "use a vocabulary of at most 65536 tokens, or the Megatron format")
        at = 0
        while at < len(ids):
            if self._file is None or self._in_shard == self.shard_tokens:
                self._next_shard()
            take = min(len(ids) - at, self.shard_tokens - self._in_shard)
            self._file.write(ids[at : at + take].astype(IDS_DTYPE, copy=False).tobytes())
            self._in_shard += take
            at += take

    def _next_shard(self) -> None:
        self._finish_shard()
        path = shard_path(self.prefix, len(self.paths))
        self._file = self._staged.open(path)
        self._file.write(header(0))  # the count is filled in when the shard is full
        self.paths.append(path)
        self._in_shard = 0

    def _finish_shard(self) -> None:
        if self._file is not None:
            self._file.seek(0)
            self._file.write(header(self._in_shard))
            self._file.seek(0, os.SEEK_END)

    def close(self) -> list[Path]:
        """Rename the shards into place (an empty corpus gives one empty shard); return their paths."""
        if self._file is None:
            self._next_shard()
        self._finish_shard()
        self._staged.commit()
        stale = len(self.paths)
        while shard_path(self.prefix, stale).is_file():
            shard_path(self.prefix, stale).unlink()
            stale += 1
        prefix = Path(self.prefix)  # and what killed writes of more shards than this one left
        remove_leftovers(prefix.parent, re.compile(re.escape(prefix.name) + r"_\d{6}\.bin").fullmatch)
        return self.paths


def read_shard(path: str | os.PathLike) -> np.ndarray:
    """The ids of one shard, memory-mapped; the header is checked against the layout and the file's size."""
    path = Path(path)
    with open(path, "rb") as f:
        raw = f.read(HEADER_BYTES)
    if len(raw) < HEADER_BYTES:
        raise ValueError(f"{path}: {len(raw)} bytes, shorter than an llm.c shard's header")
    magic, version, tokens = np.frombuffer(raw, dtype=HEADER_DTYPE, count=3)
    if magic != MAGIC:
        raise ValueError(f"{path}: not an llm.c shard (magic {magic}, expected {MAGIC})")
    if version != VERSION:
        raise ValueError(f"{path}: llm.c shard version {version}; this package reads version {VERSION}")
    size = path.stat().st_size
    if size != HEADER_BYTES + int(tokens) * IDS_DTYPE.itemsize:
        raise ValueError(f"{path}: {size} bytes, but its header says {tokens} tokens "
                         f"({HEADER_BYTES + int(tokens) * IDS_DTYPE.itemsize} bytes)")
    if tokens == 0:
        return np.zeros(0, dtype=IDS_DTYPE)
    return np.memmap(path, dtype=IDS_DTYPE, mode="r", offset=HEADER_BYTES, shape=(int(tokens),))


def shard_paths(prefix: str | os.PathLike) -> list[Path]:
    """The shards at `prefix`, in order: `PREFIX_000000.bin` and those numbered on from it without a gap."""
    found = []
    while shard_path(prefix, len(found)).is_file():
        found.append(shard_path(prefix, len(found)))
    if not found:
        raise FileNotFoundError(f"{shard_path(prefix, 0)}: no such file (llm.c shards are PREFIX_000000.bin, ...)")
    return found


def read(prefix: str | os.PathLike) -> list[np.ndarray]:
    """The ids of every shard at `prefix`, each memory-mapped."""
    return [read_shard(path) for path in shard_paths(prefix)]


_SHARD_NAME = re.compile(r"_(\d{6})\.bin$")


def prefix_of(path: str | os.PathLike) -> str | None:
    """The prefix of a shard's path (`data/train` for `data/train_000003.bin`), or None if it is not one."""
    match = _SHARD_NAME.search(str(path))
    return str(path)[: match.start()] if match else None
