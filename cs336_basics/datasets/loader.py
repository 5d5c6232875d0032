"""Reading token datasets for training: `TokenDataset` opens a dataset directory (`layout`), a `.npy`
token array (as `encode_file` writes), a Megatron-LM prefix (`PREFIX.idx`, `PREFIX.bin`) or llm.c
shards (`PREFIX_000000.bin`, ...), and sees them alike: one stream of ids, cut into shards, with
document starts where the format records them.

Opening costs what the index costs, not the data: a directory's manifest is read, and each shard's
file is memory-mapped the first time a read touches it; a shard is found by binary search in the
cumulative token counts of the manifest. So a directory of 10,000 shards opens in milliseconds and a
terabyte costs address space, not memory.

`get_batch(batch_size, context_length, rng)` is the one docs/behaviour.md states: with
m = context_length and n tokens, starts i are drawn by `rng.integers(0, n - m, size=batch_size)`
(uniform over [0, n - m - 1], every start in the concatenated stream, across shard edges),
x = ids[i : i + m], y = ids[i + 1 : i + m + 1], as int64 arrays of shape (batch_size, m). Rows that lie inside one shard are gathered by one fancy
index into that shard's map per shard; only rows that cross a shard edge are read one at a time.
"""

import hashlib
import os
from pathlib import Path

import numpy as np

from cs336_basics.datasets import layout
from cs336_basics.formats import llmc, megatron


def _map_npy(path: Path, expected_dtype: np.dtype | None = None) -> np.ndarray:
    """A 1-D integer `.npy` file, memory-mapped, after checking its header against its size."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f".npy version {version} (this reads 1.0 and 2.0)")
            offset = f.tell()
    except (ValueError, EOFError) as e:
        raise ValueError(f"{path}: not a NumPy array file ({e or 'empty'})") from None
    if len(shape) != 1 or dtype.kind not in "ui":
        raise ValueError(f"{path}: holds a {dtype} array of shape {shape}; expected 1-D integer ids")
    if expected_dtype is not None and dtype != expected_dtype:
        raise ValueError(f"{path}: holds {dtype} ids, the manifest says {expected_dtype}")
    size = path.stat().st_size
    if size != offset + shape[0] * dtype.itemsize:
        raise ValueError(f"{path}: {size} bytes, but its header says {shape[0]} {dtype} values "
                         f"({offset + shape[0] * dtype.itemsize} bytes): truncated or overwritten")
    if shape[0] == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape).view(np.ndarray)


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


# Each kind of dataset (`TokenDataset.kind`) in words, for messages.
KIND_NAMES = {"directory": "a dataset directory", "npy": "a .npy token array", "megatron": "a Megatron dataset",
              "llmc": "an llm.c dataset"}


class TokenDataset:
    """A token dataset opened for reading, memory-mapped.

    >>> ds = TokenDataset("data/train/")          # or "train.npy", a Megatron or llm.c prefix
    >>> len(ds), ds.num_documents                 # tokens, documents
    >>> x, y = ds.get_batch(32, 1024, rng=np.random.default_rng(0))
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.manifest: dict | None = None
        self._num_documents: int | None = None
        self._docs_of_shard: list[np.ndarray | None] = []
        self._megatron: megatron.MegatronDataset | None = None
        path = self.path
        if path.is_dir():
            self.kind = "directory"
            self._open_directory()
        elif path.suffix == ".npy" and path.is_file():
            self.kind = "npy"
            array = _map_npy(path)
            self.dtype = array.dtype
            self._set_shards([path.name], [array])
        elif path.suffix in (".idx", ".bin") and path.with_suffix(".idx").is_file():
            self._open_megatron(path.with_suffix(""))
        elif path.suffix == ".bin" and llmc.prefix_of(path) and path.is_file():
            self._open_llmc(llmc.prefix_of(path))
        elif Path(f"{path}.idx").exists():
            self._open_megatron(path)
        elif llmc.shard_path(path, 0).is_file():
            self._open_llmc(str(path))
        else:
            raise FileNotFoundError(
                f"{path}: no token dataset there (expected a dataset directory, a .npy token array, a "
                "Megatron prefix with PREFIX.idx and PREFIX.bin, or llm.c shards PREFIX_000000.bin)"
            )

    # --- opening ----------------------------------------------------------------------------------

    def _set_shards(self, names: list[str], arrays: list, tokens: list[int] | None = None) -> None:
        """The shards' names and arrays (None: mapped on first read), and their token counts when the
        arrays are not there yet."""
        self.shard_names = names
        self._arrays = arrays
        counts = [len(a) for a in arrays] if tokens is None else tokens
        self._offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=self._offsets[1:])
        self._single = arrays[0] if len(arrays) == 1 and arrays[0] is not None else None

    def _open_directory(self) -> None:
        manifest = self.manifest = layout.read_manifest(self.path)
        where = self.path / layout.MANIFEST
        try:
            self.dtype = np.dtype(manifest["dtype"])
            shards = manifest["shards"]
            names = [str(s["name"]) for s in shards]
            tokens = [int(s["tokens"]) for s in shards]
            documents = [int(s["documents"]) for s in shards]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: malformed manifest ({type(e).__name__}: {e})") from None
        if not names:
            raise ValueError(f"{where}: a dataset manifest lists no shards")
        if self.dtype.kind not in "ui" or min(tokens) < 0 or min(documents) < 0:
            raise ValueError(f"{where}: malformed manifest (dtype {self.dtype}, or a negative count)")
        self._set_shards(names, [None] * len(names), tokens)
        self._doc_offsets = np.zeros(len(documents) + 1, dtype=np.int64)
        np.cumsum(documents, out=self._doc_offsets[1:])
        self._docs_of_shard = [None] * len(names)
        self._num_documents = int(self._doc_offsets[-1])

    def _open_megatron(self, prefix: Path) -> None:
        self.kind = "megatron"
        self.path = prefix
        self._megatron = megatron.read(prefix)
        self.dtype = self._megatron.ids.dtype
        self._set_shards([prefix.name + ".bin"], [self._megatron.ids])
        self._num_documents = len(self._megatron.document_indices) - 1

    def _open_llmc(self, prefix: str) -> None:
        self.kind = "llmc"
        self.path = Path(prefix)
        paths = llmc.shard_paths(prefix)
        self.dtype = llmc.IDS_DTYPE
        self._set_shards([p.name for p in paths], [llmc.read_shard(p) for p in paths])

    # --- what it holds ----------------------------------------------------------------------------

    def __len__(self) -> int:
        """The number of tokens."""
        return int(self._offsets[-1])

    @property
    def num_shards(self) -> int:
        return len(self.shard_names)

    @property
    def has_documents(self) -> bool:
        """Whether the format records document starts (a `.npy` and llm.c shards do not)."""
        return self.kind in ("directory", "megatron")

    @property
    def num_documents(self) -> int:
        """The number of documents; a ValueError for formats that record none."""
        if self._num_documents is None:
            raise ValueError(f"{self.path}: {KIND_NAMES[self.kind]} records no document boundaries "
                             "(see `has_documents`)")
        return self._num_documents

    def shard_ids(self, k: int) -> np.ndarray:
        """The ids of shard k, memory-mapped (mapped now if this is the first read of it)."""
        array = self._arrays[k]
        if array is None:
            name = self.shard_names[k]
            path = layout.ids_file(self.path, name)
            if not path.is_file():
                raise FileNotFoundError(f"{path}: a shard the manifest lists is missing")
            array = _map_npy(path, self.dtype)
            expected = int(self._offsets[k + 1] - self._offsets[k])
            if len(array) != expected:
                raise ValueError(f"{path}: {len(array)} tokens, the manifest says {expected}")
            self._arrays[k] = array
            if len(self._arrays) == 1:
                self._single = array
        return array

    def shard_document_starts(self, k: int) -> np.ndarray:
        """The offsets in shard k of the documents that start in it (a dataset directory only)."""
        docs = self._docs_of_shard[k]
        if docs is None:
            path = layout.docs_file(self.path, self.shard_names[k])
            if not path.is_file():
                raise FileNotFoundError(f"{path}: a shard's document starts the manifest lists are missing")
            docs = _map_npy(path, np.dtype(np.int64))
            expected = int(self._doc_offsets[k + 1] - self._doc_offsets[k])
            if len(docs) != expected:
                raise ValueError(f"{path}: {len(docs)} document starts, the manifest says {expected}")
            self._docs_of_shard[k] = docs
        return docs

    def read(self, start: int, stop: int) -> np.ndarray:
        """ids[start:stop] of the whole stream as int64, across shard edges."""
        start, stop = max(0, start), min(len(self), stop)
        out = np.empty(max(0, stop - start), dtype=np.int64)
        k = int(np.searchsorted(self._offsets, start, side="right")) - 1
        at = start
        while at < stop:
            first = int(self._offsets[k])
            take = min(stop, int(self._offsets[k + 1])) - at
            if take > 0:
                out[at - start : at - start + take] = self.shard_ids(k)[at - first : at - first + take]
                at += take
            k += 1
        return out

    def document_start(self, i: int) -> int:
        """The offset in the stream of document i's first token."""
        if not 0 <= i < self.num_documents:
            raise IndexError(f"{self.path}: document {i} of {self.num_documents}")
        if self._megatron is not None:
            sequence = int(self._megatron.document_indices[i])
            if sequence >= len(self._megatron.sequence_pointers):
                return len(self)
            return int(self._megatron.sequence_pointers[sequence]) // self.dtype.itemsize
        k = int(np.searchsorted(self._doc_offsets, i, side="right")) - 1
        return int(self._offsets[k]) + int(self.shard_document_starts(k)[i - int(self._doc_offsets[k])])

    def document(self, i: int) -> np.ndarray:
        """The ids of document i (int64), from its start to the next one's (or the end), across shards."""
        start = self.document_start(i)
        stop = self.document_start(i + 1) if i + 1 < self.num_documents else len(self)
        return self.read(start, stop)

    # --- batches ----------------------------------------------------------------------------------

    def get_batch(self, batch_size: int, context_length: int, rng=None, *, device=None):
        """(x, y), each of shape (batch_size, context_length), y shifted one token after x; starts
        drawn uniformly over [0, len - context_length - 1] by `rng` (a numpy Generator, or a seed).

        int64 NumPy arrays, or torch tensors on `device` when it is given (needs torch).
        """
        if batch_size < 1 or context_length < 1:
            raise ValueError(f"batch_size and context_length must be positive, got {batch_size}, {context_length}")
        n, m = len(self), context_length
        if n < m + 1:
            raise ValueError(f"{self.path}: {n:,} tokens, too few for context_length {m:,} "
                             f"(a batch needs at least {m + 1:,})")
        if not isinstance(rng, np.random.Generator):
            rng = np.random.default_rng(rng)
        starts = rng.integers(0, n - m, size=batch_size)
        window = np.arange(m + 1)
        if self._single is not None:
            rows = self._single[starts[:, None] + window].astype(np.int64)
        else:
            rows = np.empty((batch_size, m + 1), dtype=np.int64)
            shard = np.searchsorted(self._offsets, starts, side="right") - 1
            local = starts - self._offsets[shard]
            inside = local + m + 1 <= self._offsets[shard + 1] - self._offsets[shard]
            for k in np.unique(shard[inside]):
                pick = inside & (shard == k)
                rows[pick] = self.shard_ids(int(k))[local[pick, None] + window]
            for r in np.flatnonzero(~inside):  # rows that cross a shard edge
                rows[r] = self.read(int(starts[r]), int(starts[r]) + m + 1)
        x, y = np.ascontiguousarray(rows[:, :m]), np.ascontiguousarray(rows[:, 1:])
        if device is None:
            return x, y
        try:
            import torch
        except ImportError:
            raise ImportError("get_batch(device=...) returns torch tensors and needs torch, which is not "
                              "installed; leave device out for NumPy arrays") from None
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        if str(device).startswith("cuda"):
            return tx.pin_memory().to(device, non_blocking=True), ty.pin_memory().to(device, non_blocking=True)
        return tx.to(device), ty.to(device)

    # --- checking ---------------------------------------------------------------------------------

    def verify(self) -> None:
        """Check what is on disk against what describes it, reading every byte: a directory's shards
        against the manifest (size, sha256, token and document counts, document starts), a Megatron
        index against itself and its `.bin`, `.npy` and llm.c headers against the files' sizes.

        Raises ValueError naming every bad shard.
        """
        if self.kind == "directory":
            problems = self._verify_directory()
        elif self.kind == "megatron":
            problems = megatron.check(self._megatron, self.path)
        else:
            problems = []  # headers and sizes were checked on opening; these formats hold no checksum
        if problems:
            raise ValueError(f"{self.path}: {len(problems)} problem(s): " + "; ".join(problems))

    def shard_problems(self, k: int) -> list[str]:
        """What is wrong with shard k of a dataset directory against its manifest entry (reads and
        hashes its files): an empty list when nothing is."""
        name, entry = self.shard_names[k], self.manifest["shards"][k]
        bad = []
        files = ((layout.ids_file(self.path, name), "bytes", "sha256"),
                 (layout.docs_file(self.path, name), "docs_bytes", "docs_sha256"))
        for path, size_key, sha_key in files:
            if not path.is_file():
                bad.append(f"{path.name} is missing")
            elif size_key in entry and path.stat().st_size != entry[size_key]:  # the writer records sizes
                bad.append(f"{path.name} has {path.stat().st_size} bytes, the manifest says {entry[size_key]}")
            elif _sha256(path) != entry.get(sha_key):
                bad.append(f"{path.name}'s sha256 differs from the manifest's")
        if not bad:
            try:
                tokens = len(self.shard_ids(k))
                docs = self.shard_document_starts(k)
            except (ValueError, OSError) as e:
                bad.append(str(e).removeprefix(f"{self.path}/"))
            else:
                if len(docs) and (docs[0] < 0 or docs[-1] >= tokens or np.any(np.diff(docs) <= 0)):
                    bad.append("document starts are not increasing within the shard")
                if k == 0 and tokens and (len(docs) == 0 or docs[0] != 0):
                    bad.append("the first document does not start at token 0")
        return bad

    def _verify_directory(self) -> list[str]:
        manifest = self.manifest
        problems = []
        totals = manifest.get("totals", {})
        expected = {"tokens": len(self), "documents": self.num_documents, "shards": self.num_shards}
        if totals != expected:
            problems.append(f"{layout.MANIFEST}: totals {totals} disagree with its shards {expected}")
        for k, name in enumerate(self.shard_names):
            if bad := self.shard_problems(k):
                problems.append(f"{name}: " + ", ".join(bad))
        return problems
