"""Encoding a whole corpus into one NumPy token array (`.npy`), in parallel and in bounded memory.

The corpus comes as work units (see `sources`: pieces of `.txt` files cut at safe cuts, runs of
JSON lines or Parquet row groups); workers encode them and send back packed ids, which are appended
in order to a temporary file beside the output. Documents are joined with the tokenizer's first
special token, so the array equals one `encode` of the documents joined by it. The `.npy` header is
written last and the file renamed into place, so an interrupted or failed run leaves no output.
"""

import contextlib
import dataclasses
import hashlib
import os
import tempfile
from array import array
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from itertools import accumulate, count
from pathlib import Path

import numpy as np

from cs336_basics.corpora import executors, sources
from cs336_basics.encode import engines
from cs336_basics.encode.protocol import TokenizerLike
from cs336_basics.formats import staged
from cs336_basics.formats.npy import HEADER_BYTES, npy_header


def choose_dtype(max_id: int, requested: str | None = None) -> np.dtype:
    """uint16 when every id fits, else uint32; a requested dtype too small for `max_id` is an error."""
    if requested is None:
        return np.dtype(np.uint16 if max_id <= np.iinfo(np.uint16).max else np.uint32)
    try:
        dtype = np.dtype(requested)
    except TypeError:
        raise ValueError(f"dtype {requested!r} is not a NumPy dtype; use uint16, uint32, int32 or int64") from None
    if dtype.kind not in "ui" or np.iinfo(dtype).max < max_id:
        raise ValueError(f"dtype {requested} cannot hold token id {max_id}; use uint32 (or leave --dtype out)")
    return dtype


# --- workers ---------------------------------------------------------------------------------------

_worker_tokenizers: dict[str, object] = {}  # in each worker: tokenizers by the digest of their state
_shared: "_SharedCache | None" = None  # in each local worker, when the workers share what they compute


def pack_entries(entries: dict[str, bytes]) -> bytes:
    """Cache entries as bytes (data only, never code): their number (8 bytes), the lengths of the
    keys in UTF-8 and of the values (native unsigned ints: the same machine reads them), then all
    the keys, then all the values."""
    keys = [key.encode("utf-8") for key in entries]
    lengths = array("L", [*map(len, keys), *map(len, entries.values())])
    return len(keys).to_bytes(8, "little") + lengths.tobytes() + b"".join(keys) + b"".join(entries.values())


def unpack_entries(data: bytes) -> dict[str, bytes]:
    """The entries written by `pack_entries`."""
    n = int.from_bytes(data[:8], "little")
    lengths = array("L")
    lengths.frombytes(data[8 : 8 + 2 * n * lengths.itemsize])
    ends = list(accumulate(lengths, initial=8 + 2 * n * lengths.itemsize))
    pieces = map(data.__getitem__, map(slice, ends, ends[1:]))
    keys = [piece.decode("utf-8") for _, piece in zip(range(n), pieces)]
    return dict(zip(keys, pieces))


class _SharedCache:
    """What the local workers of one `encode_files` run compute, shared among them through files.

    Each worker appends, after each unit, the cache entries it computed (see
    `EncodeCache.take_learned`) to its own file in `folder`, as records `length (8 bytes) + entries`
    (see `pack_entries`); before each unit it reads the records the others have completed since
    it last looked, and keeps them. A word met by two workers is then mostly encoded once. The
    entries are pure functions of the key, so whichever worker computed one, the ids are the same.
    """

    def __init__(self, folder: str, name: str | None = None):
        self.folder = Path(folder)
        self.name = name or f"{os.getpid()}.cache"
        self.own = open(self.folder / self.name, "ab")  # noqa: SIM115 (open for the worker's life)
        self.read_to: dict[str, int] = {}

    def absorb(self, cache) -> None:
        for name in os.listdir(self.folder):
            if name == self.name:
                continue
            start = self.read_to.get(name, 0)
            with open(self.folder / name, "rb") as f:
                f.seek(start)
                data = f.read()
            end = 0
            while end + 8 <= len(data):
                size = int.from_bytes(data[end : end + 8], "little")
                if end + 8 + size > len(data):
                    break  # a record still being written
                cache.learn(unpack_entries(data[end + 8 : end + 8 + size]))
                end += 8 + size
            self.read_to[name] = start + end

    def publish(self, cache) -> None:
        learned = cache.take_learned()
        if learned:
            record = pack_entries(learned)
            try:
                self.own.write(len(record).to_bytes(8, "little") + record)
                self.own.flush()
            except OSError as e:  # a full disk: say which file
                raise OSError(e.errno, e.strerror, str(self.folder / self.name)) from None


def init_worker(key: str, state: tuple, share_folder: str | None = None, engine: "engines.Choice | None" = None) -> None:
    """In a local worker, at its start: build (or find) the tokenizer, warm the engine up, and join
    the workers' shared cache in `share_folder` (see `_SharedCache`)."""
    global _shared
    tokenizer = _tokenizer_for(key, state)
    if engine is not None and engine.engine == "tiktoken":
        engines.warm_up(engine)
        return  # tiktoken has no cache to share
    if share_folder is not None:
        # Sharing only saves work. A worker that starts as the run fails finds the folder removed
        # (or the disk full): it goes on without sharing rather than fail in its initializer, which
        # Python reports with a traceback of its own.
        try:
            _shared = _SharedCache(share_folder)
        except OSError:
            return
        tokenizer.cache.start_learning()


def _tokenizer_for(key: str, state: tuple):
    tokenizer = _worker_tokenizers.get(key)
    if tokenizer is None:
        cls, vocab, merges, special_tokens, options = state
        tokenizer = cls(vocab, merges, special_tokens, **options)
        _worker_tokenizers.clear()  # one at a time: a long-lived worker must not collect them
        _worker_tokenizers[key] = tokenizer
    return tokenizer


def encode_unit(
    tokenizer, unit: sources.WorkUnit, dtype: str, engine: "engines.Choice | None" = None
) -> tuple[int, bool, bytes]:
    """(bytes read, whether any document was read, the ids of the unit packed as `dtype`).

    Records are joined with the first special token; a separator before the unit, if one is
    needed, is the caller's to write (see `encode_files`). `engine` (see `engines.choose`) is
    the Python engine when None; the ids are the same with either. With BPE-dropout (`engine.dropout`)
    the k-th text of the unit draws from the stream `(*engine.seed, engine.unit, k)`.
    """
    if engine is not None and engine.engine == "tiktoken":
        return _encode_unit_tiktoken(tokenizer, unit, dtype, engine)
    separator = tokenizer.encode_packed(tokenizer.special_tokens[0]) if tokenizer.special_tokens else b""
    encode = tokenizer.encode_packed
    if engine is not None and engine.dropout:
        numbers = count()

        def encode(text: str) -> bytes:
            return tokenizer.encode_packed(text, dropout=engine.dropout, seed=(*engine.seed, engine.unit, next(numbers)))
    ids: list[bytes] = []
    consumed = 0
    documents = 0
    for n, text, starts_document in sources.read_unit(unit):
        consumed += n
        if starts_document:
            if documents:
                ids.append(separator)
            documents += 1
        elif text and not documents:
            documents = 1
        if text:
            ids.append(encode(text))
    if unit.format == "txt" and unit.new_document:  # a text file is a document, even an empty one
        documents = max(documents, 1)
    data = b"".join(ids)
    if np.dtype(dtype) != np.dtype(tokenizer.packed_dtype):
        data = np.frombuffer(data, dtype=tokenizer.packed_dtype).astype(dtype).tobytes()
    return consumed, documents > 0, data


def _encode_unit_tiktoken(tokenizer: TokenizerLike, unit: sources.WorkUnit, dtype: str, engine: "engines.Choice"):
    """`encode_unit` through tiktoken: the unit's texts are encoded together (see `engines`)."""
    texts: list[str] = []
    separators: list[bool] = []  # before each text: whether a separator goes there
    consumed = 0
    documents = 0
    for n, text, starts_document in sources.read_unit(unit):
        consumed += n
        separate = False
        if starts_document:
            separate = documents > 0
            documents += 1
        elif text and not documents:
            documents = 1
        if text or separate:
            texts.append(text)
            separators.append(separate)
    arrays = []
    if any(separators):
        separator = np.array([engine.special_ids[tokenizer.special_tokens[0]]], np.uint32)
    for separate, ids in zip(separators, engines.encode_texts(engine, tokenizer, texts)):
        if separate and tokenizer.special_tokens:
            arrays.append(separator)
        arrays.append(ids)
    data = np.concatenate(arrays).astype(dtype, copy=False).tobytes() if arrays else b""
    return consumed, documents > 0, data


def _in_worker(encode: Callable, key: str, state: tuple | None, work, dtype: str, engine: "engines.Choice | None"):
    """`encode(tokenizer, work, dtype, engine)` in a worker: with the tokenizer rebuilt from `state`
    when given (any executor), else the local workers' one found by `key`, which takes in what the
    other local workers computed before and shares what it computed after (the Python engine)."""
    if state is not None:
        return encode(_tokenizer_for(key, state), work, dtype, engine)
    tokenizer = _worker_tokenizers[key]
    if _shared is None or engine is not None and engine.engine == "tiktoken":
        return encode(tokenizer, work, dtype, engine)
    _shared.absorb(tokenizer.cache)
    result = encode(tokenizer, work, dtype, engine)
    _shared.publish(tokenizer.cache)
    return result


def encode_unit_in_worker(key: str, state: tuple | None, unit: sources.WorkUnit, dtype: str,
                          engine: "engines.Choice | None" = None) -> tuple[int, bool, bytes]:
    """`encode_unit` in a worker (see `_in_worker`): the tokenizer found by `key`, or built from `state`."""
    return _in_worker(encode_unit, key, state, unit, dtype, engine)


def encode_documents(tokenizer: TokenizerLike, documents: Sequence[str], dtype: str, engine: "engines.Choice | None" = None) -> bytes:
    """The ids of `documents` joined by the first special token (without special tokens: each
    document's ids, one after another, as for JSON records), packed as `dtype`: the ids of a `.txt`
    of them joined so. `engine` is as for `encode_unit`."""
    texts = [tokenizer.special_tokens[0].join(documents)] if tokenizer.special_tokens else list(documents)
    if engine is not None and engine.engine == "tiktoken":
        arrays = engines.encode_texts(engine, tokenizer, texts)
        return np.concatenate(arrays).astype(dtype, copy=False).tobytes() if arrays else b""
    data = b"".join(tokenizer.encode_packed(text) for text in texts)
    if np.dtype(dtype) != np.dtype(tokenizer.packed_dtype):
        data = np.frombuffer(data, dtype=tokenizer.packed_dtype).astype(dtype).tobytes()
    return data


def encode_documents_in_worker(key: str, state: tuple | None, documents: list[str], dtype: str,
                               engine: "engines.Choice | None" = None) -> bytes:
    """`encode_documents` in a worker (see `_in_worker`)."""
    return _in_worker(encode_documents, key, state, documents, dtype, engine)


def light_choice(engine: "engines.Choice") -> "engines.Choice":
    """The choice without its ranks, for local workers, which got them when they started."""
    return dataclasses.replace(engine, ranks=None, differing=None) if engine.engine == "tiktoken" else engine


def for_unit(engine: "engines.Choice", number: int) -> "engines.Choice":
    """The choice for work unit `number`: with BPE-dropout, its random stream is the unit's own, so
    the ids depend on the seed and the units, not on which worker encodes which unit."""
    return dataclasses.replace(engine, unit=number) if engine.dropout else engine


def tokenizer_state(tokenizer: TokenizerLike) -> tuple[str, tuple]:
    """(a digest, what a worker needs to rebuild the tokenizer): its class and plain data, which a
    worker turns into a tokenizer once and then finds by the digest. (Passing the class keeps this
    module from importing `bpe`, which imports it.)"""
    options = {"pattern": tokenizer.pattern} if hasattr(tokenizer, "pattern") else {}
    if hasattr(tokenizer, "cache_size"):
        options["cache_size"] = tokenizer.cache_size
    # A tokenizer.json's added-token flags and post-processor (see `formats.definition`), when it has them.
    if getattr(tokenizer, "added_tokens", None):
        options["added_tokens"] = tokenizer.added_tokens
    if getattr(tokenizer, "post_processor", None) is not None:
        options["post_processor"] = tokenizer.post_processor
    state = (type(tokenizer), tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens, options)
    digest = hashlib.sha256(repr((sorted(tokenizer.vocab.items()), *state[2:])).encode()).hexdigest()
    return digest, state


def encode_files(
    tokenizer,
    units: Sequence[sources.WorkUnit],
    output_path: str | os.PathLike,
    *,
    num_workers: int = 1,
    executor: Executor | None = None,
    dtype: str | None = None,
    on_progress: Callable[[int], None] | None = None,
    engine: "str | engines.Choice" = "python",
    append_separator: bool = False,
) -> int:
    """Encode the work units, in order, into one 1-D array at `output_path`; return the number of tokens.
    With `append_separator` a separator ends the array unless it is empty or ends with one already.

    Documents are joined with the first special token, so the array equals `encode` of the
    documents joined by it. Units run in `num_workers` local processes or on `executor`; at most a
    few per worker are in flight, and their ids are written as they arrive. `on_progress(bytes_done)`
    is called after each unit. An output that is one of the input files is refused (see
    `sources.refuse_output_among_inputs`). `engine` is "python", "tiktoken", "auto" or a `Choice`
    made by `engines.choose`; the ids are the same with each.
    """
    sources.refuse_output_among_inputs(output_path, units)
    engine = engines.choose(tokenizer, engine)
    out_dtype = choose_dtype(max(tokenizer.vocab), dtype)
    output_path = Path(output_path)
    with staged.folders_for([output_path]):
        return _encode_into(tokenizer, units, output_path, num_workers, executor, out_dtype, on_progress, engine,
                            append_separator)


@contextlib.contextmanager
def local_workers(tokenizer: TokenizerLike, num_workers: int, engine: "engines.Choice", share_dir: str | os.PathLike | None, *,
                  initializer: Callable = None, initargs: tuple = ()) -> Iterator[tuple[Executor, str]]:
    """`num_workers` local processes that encode with `tokenizer`: yields (the executor, the key
    that finds the tokenizer in them). Forked, they find this tokenizer and need not build it
    again, and they share what they encode through files in a temporary folder in `share_dir`.
    `initializer` (default `init_worker`) gets `initargs` and then (key, state, folder, engine).
    If the block fails the workers are stopped at once; otherwise they finish and shut down."""
    key, state = tokenizer_state(tokenizer)
    share = tempfile.TemporaryDirectory(prefix=".encode-cache-", dir=share_dir)
    _worker_tokenizers.clear()
    _worker_tokenizers[key] = tokenizer
    try:
        with executors.local_pool(num_workers, initializer=initializer or init_worker,
                                  initargs=(*initargs, key, state, share.name, engine)) as pool:
            yield pool, key
    finally:
        share.cleanup()
        _worker_tokenizers.clear()


def _encode_into(tokenizer: TokenizerLike, units, output_path: Path, num_workers, executor, out_dtype, on_progress, engine,
                 append_separator: bool = False) -> int:
    separator = b""
    if tokenizer.special_tokens:
        separator = np.array(tokenizer.encode(tokenizer.special_tokens[0]), dtype=out_dtype).tobytes()
    count = 0
    done = 0
    wrote_a_document = False
    last = b""  # the last id written, as bytes
    # The ids go after room for the header, which is written once their number is known.
    with staged.replacing(output_path, leftovers=True) as out:
        with contextlib.ExitStack() as workers:
            out.write(b"\0" * HEADER_BYTES)
            if executor is None and num_workers <= 1:
                results = (encode_unit(tokenizer, u, out_dtype.str, for_unit(engine, i)) for i, u in enumerate(units))
            else:
                if executor is None:
                    # The local workers' shared cache lives beside the output.
                    executor, key = workers.enter_context(
                        local_workers(tokenizer, num_workers, engine, output_path.parent))
                    args = ((key, None, u, out_dtype.str, for_unit(light_choice(engine), i)) for i, u in enumerate(units))
                else:
                    key, state = tokenizer_state(tokenizer)
                    args = ((key, state, u, out_dtype.str, for_unit(engine, i)) for i, u in enumerate(units))
                width = executors.executor_width(executor, num_workers)
                results = executors.run_ordered(executor, encode_unit_in_worker, args, max_in_flight=2 * width)
            for unit, (consumed, has_documents, data) in zip(units, results):
                if has_documents and unit.new_document and wrote_a_document:
                    out.write(separator)
                    count += len(separator) // out_dtype.itemsize
                    last = separator
                wrote_a_document = wrote_a_document or has_documents
                out.write(data)
                count += len(data) // out_dtype.itemsize
                last = data[-len(separator):] if data and separator else last
                done += consumed
                if on_progress:
                    on_progress(done)
        if append_separator and count and separator and last != separator:
            out.write(separator)  # the last document ends with it, as every other does
            count += len(separator) // out_dtype.itemsize
        out.seek(0)
        out.write(npy_header(out_dtype, count))
    return count


def _encode_texts_in_worker(key: str, texts: list[str], first: int = 0, dropout: float = 0.0,
                            seed: tuple[int, ...] = ()) -> list[bytes]:
    tokenizer = _worker_tokenizers[key]
    if dropout:
        return [tokenizer.encode_packed(text, dropout=dropout, seed=(*seed, first + i)) for i, text in enumerate(texts)]
    return [tokenizer.encode_packed(text) for text in texts]


def encode_batch_in_processes(tokenizer: TokenizerLike, texts: list[str], num_workers: int, dropout: float = 0.0,
                              seed: tuple[int, ...] = ()) -> list[list[int]]:
    """`tokenizer.encode` of each text, by `num_workers` local processes (the Python engine), in
    order. The texts go in batches of about equal length, a few per worker, at most two per
    worker in flight; ids come back packed. With `dropout`, text i draws from the stream `(*seed, i)`."""
    key, state = tokenizer_state(tokenizer)
    total = sum(map(len, texts))
    target = max(total // (4 * num_workers), 1)
    batches: list[list[str]] = [[]]
    size = 0
    for text in texts:
        if size >= target:
            batches.append([])
            size = 0
        batches[-1].append(text)
        size += len(text)
    _worker_tokenizers.clear()
    _worker_tokenizers[key] = tokenizer  # forked workers find it; others build it from `state`
    with executors.local_pool(num_workers, initializer=init_worker, initargs=(key, state)) as pool:
        firsts = accumulate(map(len, batches), initial=0)
        results = executors.run_ordered(pool, _encode_texts_in_worker,
                                        ((key, batch, first, dropout, seed) for batch, first in zip(batches, firsts)),
                                        max_in_flight=2 * num_workers)
        typecode = "H" if np.dtype(tokenizer.packed_dtype).itemsize == 2 else "I"
        return [array(typecode, packed).tolist() for packed_list in results for packed in packed_list]
