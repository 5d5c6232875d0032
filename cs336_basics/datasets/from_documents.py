"""Writing a dataset directory (see `layout`) from any Python iterable of documents: a list, a
generator, a Hugging Face `datasets` dataset.

The result is what `writer.write_dataset` writes for a `.txt` of the same documents joined by the
first special token: the shards, concatenated, hold the same ids and the same document starts (each
document ends at its separator), and a corpus that fits one shard gives the same shard files byte
for byte. Without special tokens each document is encoded on its own, as a JSON record would be.

The work. This process reads the iterable and cuts it into batches of whole documents of about
`piece_size` characters; each batch is one part (see `writer`): a worker encodes it and writes its
ids to `DIR/.work/`. At most two batches per worker are in flight, so memory stays flat on an
endless stream. A shard closes once its batches hold `shard_size` bytes of ids by the planning
estimate (`writer.BYTES_PER_TOKEN` bytes of text per token), or when the stream ends; a worker
assembles it exactly as for files. The shards depend only on the documents and the settings.

Resume. We cannot replay an iterable, and cannot tell whether a second one holds the same
documents without reading them. So a directory holding a dataset (finished or not) written from
an iterable is refused unless `resume=True` (or `overwrite=True`, which writes it anew; with both,
a dataset of the same settings is resumed and one of other settings written anew). With
`resume=True` the caller passes the same documents from the start. The shards the earlier run
finished are kept up to the first whose files no longer match their record (size and sha256);
for each kept shard the documents it holds are read again (not encoded) and their sha256 checked
against the shard's record (`text_sha256`): documents that differ are an error (they are not the
same documents; nothing is changed). The rest is written from there on. A run that had reached the end of its
documents before its last shard was full (that shard is marked `final`) resumes only if the
documents end there too. (A last batch cut short by the end of the documents would hold more of
them in a longer run: its sha256 tells.)
"""

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor

import numpy as np

from cs336_basics.corpora import sources
from cs336_basics.datasets import layout, writer
from cs336_basics.datasets.directory import DatasetDirectory, Written
from cs336_basics.datasets.shard_folder import WORK
from cs336_basics.datasets.shards import Shards, encode_documents_part, write_shards
from cs336_basics.encode import engines
from cs336_basics.encode.protocol import TokenizerLike
from cs336_basics.encode.token_arrays import choose_dtype, encode_documents

SOURCE = "iterable"  # the head's `source` for a dataset written from an iterable


class Batch:
    """Documents read together: their text (surrogates fixed), how many, their UTF-8 bytes, and
    the sha256 of their text (each document's length in bytes, then its bytes)."""

    __slots__ = ("documents", "count", "size", "digest")

    def __init__(self, documents: list[str], size: int, digest: bytes):
        self.documents = documents
        self.count = len(documents)
        self.size = size
        self.digest = digest


def batches(documents: Iterable, batch_chars: int, text_field: str = "text") -> Iterator[Batch]:
    """The documents in batches of about `batch_chars` characters. A document is a str, or a
    mapping (a row of a `datasets` dataset) whose `text_field` holds one; anything else is a
    TypeError (a mapping without the field a ValueError) naming the document's position."""
    batch: list[str] = []
    chars = size = 0
    sha = hashlib.sha256()
    for i, document in enumerate(documents):
        document = sources.document_text(document, i, text_field)
        data = document.encode("utf-8")
        sha.update(len(data).to_bytes(8, "little"))
        sha.update(data)
        batch.append(document)
        chars += len(document)
        size += len(data)
        if chars >= batch_chars:
            yield Batch(batch, size, sha.digest())
            batch, chars, size, sha = [], 0, 0, hashlib.sha256()
    if batch:
        yield Batch(batch, size, sha.digest())


def _text_sha256(digests: list[bytes]) -> str:
    return hashlib.sha256(b"".join(digests)).hexdigest()


def write_dataset_from_documents(
    tokenizer,
    documents: Iterable,
    directory: str | os.PathLike,
    *,
    shard_size: int = writer.DEFAULT_SHARD_SIZE,
    piece_size: int | None = None,
    num_workers: int = 1,
    executor: Executor | None = None,
    dtype: str | None = None,
    overwrite: bool = False,
    resume: bool = False,
    text_field: str = "text",
    on_progress: Callable[[int], None] | None = None,
    engine: "str | engines.Choice" = "python",
    append_separator: bool = False,
) -> Written:
    """Encode `documents` (any iterable of str, or of mappings whose `text_field` holds one) into
    the dataset directory `directory`; see the module docstring for what is written and for
    `resume`. `piece_size` is the characters per batch (default: as for files). With
    `append_separator` the last document ends with the separator even when it does not end so.

    `num_workers` local processes (1: this process) or `executor` encode the batches, with
    `engine` (the ids are the same with each). `on_progress(utf8_bytes_done)` is called after each
    batch, counting the documents a resume skips. Returns `writer.Written` (its `input_bytes`: the
    documents' UTF-8 bytes). Raises ValueError when the directory holds a dataset written from an
    iterable and neither `resume` nor `overwrite` is given, when the documents differ from those a
    resumed run wrote, or when it was written with other settings (unless `overwrite`).
    """
    if isinstance(documents, (str, bytes, os.PathLike)):
        raise TypeError("write_dataset_from_documents takes an iterable of documents; for files use write_dataset")
    if type(shard_size) is not int or shard_size < 1:
        raise ValueError(f"shard_size must be a positive number of bytes, got {shard_size!r}")
    target = DatasetDirectory(directory)
    if target.store.size("") is not None:
        raise ValueError(f"{target} is a file, not a folder; name a folder for the dataset")
    engine = engines.choose(tokenizer, engine)
    if engine.dropout:  # a dataset's resuming and identity record no seed
        raise ValueError("BPE-dropout writes token arrays (encode_file, bpe encode --out FILE.npy), not datasets")
    out_dtype = choose_dtype(max(tokenizer.vocab), dtype)
    piece_size = piece_size or writer.piece_size_for(shard_size)
    head = {
        "format": layout.FORMAT,
        "version": layout.FORMAT_VERSION,
        "source": SOURCE,
        "tokenizer": writer.tokenizer_identity(tokenizer),
        "dtype": out_dtype.name,
        "shard_size": shard_size,
        "piece_size": piece_size,
        "inputs": [],
    }
    if append_separator:
        head["append_separator"] = True  # only then, so that earlier directories keep their head
    with target.opened(head, overwrite=overwrite, anew="pass overwrite=True to write it anew") as (
            _, previous, listed, lock_fd):
        if previous is not None and not resume:
            if not overwrite:
                raise ValueError(
                    f"{target} holds a dataset written from an iterable of documents (finished or not), which cannot "
                    "be replayed: pass resume=True with the same documents from the start to keep the shards whose "
                    "documents check out (they are read again, not encoded), or overwrite=True to write it anew")
            previous = None
        if previous is None:
            target.remove_all()
            listed = []
        return _run(tokenizer, documents, text_field, head, listed, target, out_dtype, num_workers, executor,
                    on_progress, lock_fd, engine)


def _kept_shards(target: DatasetDirectory, listed: list) -> list[dict]:
    """The records of the shards 0, 1, ... of an earlier run whose files check out, up to the
    first that does not."""
    by_name = {e.get("name"): e for e in listed if isinstance(e, dict)}
    kept: list[dict] = []
    first = 0
    while True:
        name = layout.shard_name(len(kept))
        entry = target.record(len(kept)) or by_name.get(name)
        if entry is None or not isinstance(entry.get("units"), list) or len(entry["units"]) != 2:
            return kept
        units = tuple(entry["units"])
        if units[0] != first or not isinstance(entry.get("text_sha256"), str) or not target.reusable_shard(
                entry, len(kept), units):
            return kept
        kept.append(entry)
        first = units[1]


def _resumed(target: DatasetDirectory, stream: Iterator[Batch], kept: list[dict],
             on_progress: Callable[[int], None] | None) -> int:
    """Read the kept shards' documents again and check them against their records; the UTF-8
    bytes read."""
    done = 0
    for entry in kept:
        first, stop = entry["units"]
        digests, size = [], 0
        for batch in _take(stream, stop - first):
            digests.append(batch.digest)
            size += batch.size
        if len(digests) < stop - first or _text_sha256(digests) != entry["text_sha256"]:
            raise ValueError(
                f"the documents differ from those the earlier run wrote into {target.path(entry['name'])}.npy "
                "(their sha256 differs, or they end sooner): resume=True needs the same documents, in the same "
                "order, from the start; pass overwrite=True to write the dataset anew")
        done += size
        if on_progress:
            on_progress(done)
    return done


def _run(tokenizer: TokenizerLike, documents, text_field, head, listed, target: DatasetDirectory, dtype: np.dtype, num_workers,
         executor, on_progress, lock_fd, engine) -> Written:
    budget = max(head["shard_size"] * writer.BYTES_PER_TOKEN // dtype.itemsize, 1)
    stream = batches(documents, head["piece_size"], text_field)
    kept = _kept_shards(target, listed) if listed or target.store.is_dir(WORK) else []
    done = _resumed(target, stream, kept, on_progress)
    entries = dict(enumerate(kept))
    rest = _peek(stream)
    if kept and kept[-1].get("final") and rest is not None:
        raise ValueError(
            f"the documents go on past the end of the earlier run, whose last shard "
            f"{target.path(kept[-1]['name'])}.npy ended with its documents: they are not the same documents; "
            "pass overwrite=True to write the dataset anew")
    if rest is None and kept and kept[-1].get("final") and target.finished():
        return target.written(kept, done, len(kept), done)

    # Whatever came after the kept shards is written again.
    store = target.store
    for name in store.names(WORK):
        if name.startswith("unit-") or _shard_index(name) >= len(kept):
            store.remove(f"{WORK}/{name}")
    for name in store.names():
        if name.endswith(".npy") and _shard_index(name) >= len(kept):
            store.remove(name)

    reused, reused_bytes = len(kept), done
    first_batch = kept[-1]["units"][1] if kept else 0
    sizes: dict[int, Batch] = {}  # the batches in flight, without their text
    last: list[int] = []  # the last batch's index, once the stream has ended

    def tasks() -> Iterator[tuple[int, list[str]]]:
        stream = iter(rest or ())
        batch, i = next(stream, None), first_batch
        while batch is not None:
            # With append_separator, one batch is read ahead to know the last before it is encoded.
            following = next(stream, None) if head.get("append_separator") else None
            sizes[i] = batch
            if following is None and head.get("append_separator"):
                last.append(i)
            texts, batch.documents = batch.documents, None
            yield i, texts
            batch, i = following or next(stream, None), i + 1

    def encode_here(i: int, texts: list[str]) -> dict:
        return target.write_part(i, dtype, True, encode_documents(tokenizer, texts, dtype.str, engine))

    def feed(results: Iterator[dict], shards: Shards) -> None:
        nonlocal done
        if kept:
            shards.after(kept[-1])
        digests: list[bytes] = []
        k, shard_first, size, read = len(kept), first_batch, 0, 0

        def close(stop: int, final: bool) -> None:
            nonlocal digests, k, shard_first, size, read
            extra = {"text_sha256": _text_sha256(digests), "input_documents": read, "input_bytes": size,
                     "final": final}
            shards.close(k, (shard_first, stop), extra, last=stop - 1 in last,
                         append_separator=bool(head.get("append_separator")))
            digests, k, shard_first, size, read = [], k + 1, stop, 0, 0

        i = first_batch
        for i, record in enumerate(results, start=first_batch):
            batch = sizes.pop(i)
            shards.add(i, record, new_document=True)  # every batch starts a document
            digests.append(batch.digest)
            size += batch.size
            read += batch.count
            done += batch.size
            if on_progress:
                on_progress(done)
            if size >= budget:
                close(i + 1, final=False)
        if shards.parts:
            close(i + 1, final=True)

    try:
        ordered = write_shards(target, head, entries, tasks(), feed, tokenizer=tokenizer,
                               encode_part=encode_documents_part, encode_here=encode_here, dtype=dtype,
                               num_workers=num_workers, executor=executor, lock_fd=lock_fd, engine=engine)
    except BaseException:
        # The workers have stopped (local ones are waited for): what they had begun to write goes, so a
        # stopped run leaves whole shards and records only.
        target.remove_leftovers()
        raise
    return target.written(ordered, done, reused, reused_bytes)


def _shard_index(name: str) -> int:
    """The index of the shard a file in the directory belongs to (`shard-00003.npy`: 3), else -1."""
    digits = name[len("shard-") : len("shard-") + 5]
    return int(digits) if name.startswith("shard-") and digits.isdigit() else -1


def _take(stream: Iterator[Batch], n: int) -> Iterator[Batch]:
    for _ in range(n):
        batch = next(stream, None)
        if batch is None:
            return
        yield batch


class _Rest:
    """The stream from its next batch on (already read, to know whether there is one)."""

    def __init__(self, first: Batch, stream: Iterator[Batch]):
        self.first, self.stream = first, stream

    def __iter__(self) -> Iterator[Batch]:
        first, self.first = self.first, None
        yield first
        yield from self.stream


def _peek(stream: Iterator[Batch]) -> "_Rest | None":
    first = next(stream, None)
    return None if first is None else _Rest(first, stream)
