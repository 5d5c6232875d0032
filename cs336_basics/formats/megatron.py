"""Megatron-LM's indexed dataset (`PREFIX.bin` and `PREFIX.idx`), the format Megatron-LM, NeMo and
GPT-NeoX train from: its writer and its reader, from one definition of the layout.

`PREFIX.bin` holds the ids of every sequence back to back. `PREFIX.idx` (little-endian) holds:

    HEADER              the 9 bytes b"MMIDIDX\\x00\\x00"
    uint64              VERSION = 1
    uint8               the ids' dtype, as a code of DTYPE_CODES
    uint64              S, the number of sequences
    uint64              D, the number of document indices
    int32[S]            each sequence's length in tokens
    int64[S]            each sequence's offset in PREFIX.bin, in bytes
    int64[D]            document indices: 0, then the index of the sequence after each document's last

We write one sequence per document (so D = documents + 1 and the document indices are 0..S), as
Megatron-LM's own preprocessing does for text without sentence splitting. A document starts at its
first token and runs to the next one's start, so the separator after it is its last token, as with
Megatron-LM's `--append-eod`.

The writer streams: ids arrive in chunks, with the offsets where documents start, and go straight
to a temporary `.bin`; only the sequence lengths (4 bytes a document) are held until the end, when
the `.idx` is written and both files are renamed into place.
"""

import os
import struct
from array import array
from pathlib import Path
from typing import NamedTuple

import numpy as np

from cs336_basics.formats.staged import StagedFiles, StagedWriter

HEADER = b"MMIDIDX\x00\x00"
VERSION = 1
_VERSION = struct.Struct("<Q")
_DTYPE_CODE = struct.Struct("<B")
_COUNT = struct.Struct("<Q")
# Sizes of the index's fixed part and of its arrays' elements, read and written with the same values.
FIXED_BYTES = len(HEADER) + _VERSION.size + _DTYPE_CODE.size + 2 * _COUNT.size
LENGTH_DTYPE = np.dtype("<i4")
POINTER_DTYPE = np.dtype("<i8")
DOC_INDEX_DTYPE = np.dtype("<i8")

DTYPE_CODES = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.int8),
    3: np.dtype("<i2"),
    4: np.dtype("<i4"),
    5: np.dtype("<i8"),
    6: np.dtype("<f8"),
    7: np.dtype("<f4"),
    8: np.dtype("<u2"),
}
_CODE_OF = {dtype: code for code, dtype in DTYPE_CODES.items()}


def paths(prefix: str | os.PathLike) -> tuple[Path, Path]:
    """(`PREFIX.bin`, `PREFIX.idx`)."""
    prefix = str(prefix)
    return Path(prefix + ".bin"), Path(prefix + ".idx")


def ids_dtype(max_id: int) -> np.dtype:
    """The dtype Megatron-LM would choose for ids up to `max_id`: uint16 when they fit, else int32
    (the format has no uint32)."""
    if max_id <= np.iinfo(np.uint16).max:
        return np.dtype("<u2")
    if max_id <= np.iinfo(np.int32).max:
        return np.dtype("<i4")
    raise ValueError(f"token id {max_id} does not fit the Megatron format's widest integer ids (int32)")


class MegatronWriter(StagedWriter):
    """Write `PREFIX.bin` and `PREFIX.idx`, one sequence per document, streaming.

    >>> with MegatronWriter("out/train", np.uint16) as w:
    ...     w.add_document([5, 6, 0])
    ...     w.add(np.array([7, 8, 0, 9]), starts=[0, 3])   # two documents; the second is still open
    ...     w.add(np.array([9, 0]), starts=[])             # ... and continues here

    Nothing appears at PREFIX until the `with` block ends without an error (or `close()` is called);
    an error leaves the files that were there before.
    """

    def __init__(self, prefix: str | os.PathLike, dtype: np.dtype | str | type = np.uint16) -> None:
        self.dtype = np.dtype(dtype).newbyteorder("<")
        if self.dtype not in _CODE_OF or self.dtype.kind not in "ui":
            known = ", ".join(str(d) for d in DTYPE_CODES.values() if d.kind in "ui")
            raise ValueError(f"the Megatron format holds integer ids as one of {known}, not {np.dtype(dtype)}")
        self.bin_path, self.idx_path = paths(prefix)
        self._staged = StagedFiles()
        self._bin = self._staged.open(self.bin_path)
        self._lengths = array("q")  # lengths of finished documents: 8 bytes each, whatever the calls
        self._open: int | None = None  # tokens so far of the document still open, if any
        self._info = np.iinfo(self.dtype)

    def add_document(self, ids) -> None:
        """Append one whole document."""
        self.add(ids, starts=[0])
        self._end_open()

    def add(self, ids, starts) -> None:
        """Append `ids`; `starts` are the offsets in `ids` where documents start (increasing). Ids
        before the first start continue the document still open, which `close` ends."""
        ids = np.asarray(ids)
        starts = np.asarray(starts, dtype=np.int64).reshape(-1)
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "ui"):
            raise ValueError(f"{self.bin_path}: ids must be a 1-D integer array, got {ids.dtype} of shape {ids.shape}")
        if starts.size and (starts[0] < 0 or starts[-1] >= len(ids) or np.any(np.diff(starts) <= 0)):
            raise ValueError(f"{self.bin_path}: document starts must increase within [0, {len(ids)}): {starts[:10]}...")
        if len(ids) and (ids.min() < self._info.min or ids.max() > self._info.max):
            bad = ids.max() if ids.max() > self._info.max else ids.min()
            raise ValueError(f"{self.bin_path}: token id {bad} does not fit the dataset's {self.dtype}")
        first = int(starts[0]) if starts.size else len(ids)
        if first and self._open is None:
            raise ValueError(f"{self.bin_path}: {first} ids come before any document starts")
        self._bin.write(ids.astype(self.dtype, copy=False).tobytes())
        if self._open is not None:
            self._open += first
        if starts.size:
            self._end_open()
            self._lengths.frombytes(np.diff(starts).astype(np.int64).tobytes())
            self._open = len(ids) - int(starts[-1])

    def _end_open(self) -> None:
        if self._open is not None:
            self._lengths.append(self._open)
            self._open = None

    def close(self) -> None:
        """End the open document, write the index and rename both files into place."""
        self._end_open()
        lengths = np.frombuffer(self._lengths, dtype=np.int64) if self._lengths else np.zeros(0, dtype=np.int64)
        if len(lengths) and lengths.max() > np.iinfo(LENGTH_DTYPE).max:
            raise ValueError(f"{self.idx_path}: a document of {lengths.max()} tokens is too long for the format")
        pointers = np.zeros(len(lengths), dtype=POINTER_DTYPE)
        np.cumsum(lengths[:-1] * self.dtype.itemsize, out=pointers[1:])
        idx = self._staged.open(self.idx_path)
        idx.write(HEADER)
        idx.write(_VERSION.pack(VERSION))
        idx.write(_DTYPE_CODE.pack(_CODE_OF[self.dtype]))
        idx.write(_COUNT.pack(len(lengths)))
        idx.write(_COUNT.pack(len(lengths) + 1))
        idx.write(lengths.astype(LENGTH_DTYPE).tobytes())
        idx.write(pointers.tobytes())
        idx.write(np.arange(len(lengths) + 1, dtype=DOC_INDEX_DTYPE).tobytes())
        self._staged.commit()  # .bin first, then .idx: the reader checks that they agree


class MegatronDataset(NamedTuple):
    """An indexed dataset, memory-mapped: `ids` is the whole `.bin` as one array."""

    ids: np.ndarray
    sequence_lengths: np.ndarray
    sequence_pointers: np.ndarray
    document_indices: np.ndarray


def _memmap(path: Path, dtype: np.dtype, offset: int, count: int) -> np.ndarray:
    if count == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(count,))


def read(prefix: str | os.PathLike) -> MegatronDataset:
    """Open `PREFIX.idx` and `PREFIX.bin`, memory-mapped; only the index's header is read now.

    Raises FileNotFoundError naming a missing file, and ValueError naming the file whose header or
    size does not match the layout (a different format, a newer version, a truncated file, or a
    `.bin` that is not the one the `.idx` describes).
    """
    bin_path, idx_path = paths(prefix)
    for path in (idx_path, bin_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file (a Megatron dataset is PREFIX.bin and PREFIX.idx)")
    with open(idx_path, "rb") as f:
        fixed = f.read(FIXED_BYTES)
    if len(fixed) < FIXED_BYTES or not fixed.startswith(HEADER):
        raise ValueError(f"{idx_path}: not a Megatron index (it does not start with {HEADER!r})")
    at = len(HEADER)
    (version,) = _VERSION.unpack_from(fixed, at)
    at += _VERSION.size
    (code,) = _DTYPE_CODE.unpack_from(fixed, at)
    at += _DTYPE_CODE.size
    (sequences,) = _COUNT.unpack_from(fixed, at)
    (documents,) = _COUNT.unpack_from(fixed, at + _COUNT.size)
    if version != VERSION:
        raise ValueError(f"{idx_path}: Megatron index version {version}; this package reads version {VERSION}")
    if code not in DTYPE_CODES:
        raise ValueError(f"{idx_path}: unknown dtype code {code}")
    dtype = DTYPE_CODES[code]
    per_sequence = LENGTH_DTYPE.itemsize + POINTER_DTYPE.itemsize
    expected = FIXED_BYTES + sequences * per_sequence + documents * DOC_INDEX_DTYPE.itemsize
    size = idx_path.stat().st_size
    if size < expected:
        raise ValueError(f"{idx_path}: {size} bytes, the header's counts ({sequences} sequences, {documents} "
                         f"document indices) need {expected}: truncated")
    lengths = _memmap(idx_path, LENGTH_DTYPE, FIXED_BYTES, sequences)
    at = FIXED_BYTES + sequences * LENGTH_DTYPE.itemsize
    pointers = _memmap(idx_path, POINTER_DTYPE, at, sequences)
    doc_indices = _memmap(idx_path, DOC_INDEX_DTYPE, at + sequences * POINTER_DTYPE.itemsize, documents)
    bin_size = bin_path.stat().st_size
    end = int(pointers[-1]) + int(lengths[-1]) * dtype.itemsize if sequences else 0
    if bin_size != end or bin_size % dtype.itemsize:
        raise ValueError(f"{bin_path}: {bin_size} bytes, but {idx_path.name} describes {end}: "
                         "the two files are not from the same write")
    ids = _memmap(bin_path, dtype, 0, bin_size // dtype.itemsize)
    return MegatronDataset(ids, lengths, pointers, doc_indices)


def check(dataset: MegatronDataset, prefix: str | os.PathLike) -> list[str]:
    """Every way the index disagrees with itself or with the `.bin` (reads the whole index): a list
    of problems, empty when there is none. Sequences must lie back to back from offset 0."""
    bin_path, idx_path = paths(prefix)
    problems = []
    lengths = np.asarray(dataset.sequence_lengths, dtype=np.int64)
    pointers = np.asarray(dataset.sequence_pointers)
    docs = np.asarray(dataset.document_indices)
    itemsize = dataset.ids.dtype.itemsize
    if np.any(lengths < 0):
        problems.append(f"{idx_path}: negative sequence lengths")
    expected = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1] * itemsize, out=expected[1:])
    if not np.array_equal(pointers, expected):
        problems.append(f"{idx_path}: sequences are not stored back to back from the start of {bin_path.name}")
    if len(docs) == 0 or docs[0] != 0 or docs[-1] != len(lengths) or np.any(np.diff(docs) < 0):
        problems.append(f"{idx_path}: document indices do not run from 0 up to the {len(lengths)} sequences")
    return problems
