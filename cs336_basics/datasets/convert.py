"""Converting a finished dataset directory into a format a trainer reads, without encoding again:
Megatron-LM's indexed dataset (`formats.megatron`) or llm.c's shards (`formats.llmc`).

The shards are read one at a time, in order, and streamed to the writer in pieces of at most
CHUNK_TOKENS, so memory stays flat whatever the size. Each shard is checked against the manifest
(sha256 of both files, counts) before its ids are used, and the output is renamed into place only
once every shard has gone through, so a bad shard leaves no output. The ids are the same and in
the same order; in Megatron's format each document is one sequence, also one that runs across
shards of the directory (its tokens arrive from two shards and are written as one).

`append_separator` ends the last document with the separator (the manifest's `separator_id`) when
it does not end with one already, as Megatron-LM's `preprocess_data.py --append-eod` ends every
document; without it the ids are exactly the directory's.

In one step (`write_format`, what `bpe encode --format` runs): the corpus is written as a dataset
directory in a hidden folder beside the output, `.NAME.dataset/` (the workers write its shards,
and it resumes as any dataset directory does), then converted, then removed. The conversion copies
the ids once more (no encoding), so the disk holds the output twice until the folder goes.
"""

import contextlib
import os
import re
import shutil
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar

import numpy as np

from cs336_basics.corpora import sources
from cs336_basics.datasets.loader import TokenDataset
from cs336_basics.errors import BpeError
from cs336_basics.formats import llmc, megatron
from cs336_basics.formats.staged import final_names, folders_for

FORMATS = ("megatron", "llmc")
CHUNK_TOKENS = 1 << 24


class Converted(NamedTuple):
    paths: list[Path]
    tokens: int
    documents: int


def convert_dataset(
    directory: str | os.PathLike,
    out: str | os.PathLike,
    format: str = "megatron",
    *,
    shard_tokens: int = llmc.DEFAULT_SHARD_TOKENS,
    append_separator: bool = False,
    on_progress: Callable[[int], None] | None = None,
) -> Converted:
    """Write the dataset in `directory` as `format` at the prefix `out`: `OUT.bin` and `OUT.idx`
    for "megatron" (uint16 ids, or int32 for a uint32 dataset), `OUT_000000.bin`... of at most
    `shard_tokens` tokens, balanced (see `formats.llmc`), for "llmc" (refused, naming the id, if an
    id exceeds 65535). Missing folders above `out` are made. `append_separator`: see the module
    docstring (a ValueError for a dataset without special tokens).

    `on_progress(tokens_done)` is called after each shard. Raises ValueError naming every shard
    that disagrees with the manifest, before anything is written in place.
    """
    _check_options(format, shard_tokens, out)
    dataset = TokenDataset(directory)
    if dataset.kind != "directory":
        raise ValueError(f"{directory}: not a dataset directory (convert reads what `bpe encode --out DIR/` writes)")
    own_files = [p for p in Path(directory).rglob("*") if p.is_file()]
    sources.refuse_outputs_among_inputs(output_paths(out, format), own_files)
    separator = None
    if append_separator:
        separator = (dataset.manifest.get("tokenizer") or {}).get("separator_id")
        if not isinstance(separator, int):
            raise ValueError(f"{directory}: the dataset has no separator (its tokenizer has no special token) "
                             "to end the last document with")
        if _last_id(dataset) in (None, separator):
            separator = None  # no document, or the last ends with one already
    first_file = megatron.paths(out)[0] if format == "megatron" else llmc.shard_path(out, 0)
    # The output's folder is made for the write (and removed again if it fails); an OSError names
    # the output, never the temporary files that stand for it.
    with folders_for([first_file]), final_names(out):
        return _convert(dataset, out, format, shard_tokens, separator, on_progress)


def output_paths(out: str | os.PathLike, format: str) -> list[Path]:
    """Every file a write of `format` at the prefix `out` may create, replace or remove, for a caller
    to check against its inputs (`sources.refuse_output_among_inputs`): `OUT.bin` and `OUT.idx`;
    or `OUT_000000.bin` and every file there now named as a shard of `OUT` (a write removes those
    numbered past its last)."""
    if format == "megatron":
        return list(megatron.paths(out))
    return list(dict.fromkeys([llmc.shard_path(out, 0), *llmc.shard_paths_there(out)]))


def _check_options(format: str, shard_tokens: int, out: str | os.PathLike) -> None:
    """Refuse, before any work, a format or shard size that cannot be written, or a file of the
    output that a folder stands in the way of (its final rename would fail, after all the work)."""
    if format not in FORMATS:
        raise ValueError(f"unknown dataset format {format!r}; known: {', '.join(FORMATS)}")
    if format == "llmc":
        llmc.check_shard_tokens(shard_tokens)
    for path in output_paths(out, format):
        if path.is_dir():
            raise ValueError(f"{path} is a folder, where {format} writes a file of {out}: move it away or "
                             "choose another prefix")


def _convert(dataset: TokenDataset, out, format: str, shard_tokens: int, separator: int | None,
             on_progress) -> Converted:
    tokens = len(dataset) + (separator is not None)
    if format == "megatron":
        writer = megatron.MegatronWriter(out, np.uint16 if dataset.dtype.itemsize <= 2 else np.int32)
    else:
        writer = llmc.LlmcWriter(out, shard_tokens=shard_tokens, total_tokens=tokens)
    with writer:
        done = 0
        for k in range(dataset.num_shards):
            if bad := dataset.shard_problems(k):
                name = dataset.shard_names[k]
                raise ValueError(f"{dataset.path}: {name}: {', '.join(bad)} (see `bpe dataset verify`)")
            ids = dataset.shard_ids(k)
            starts = np.asarray(dataset.shard_document_starts(k))
            for first in range(0, max(len(ids), 1), CHUNK_TOKENS):
                piece = ids[first : first + CHUNK_TOKENS]
                if format == "megatron":
                    lo, hi = np.searchsorted(starts, [first, first + len(piece)])
                    writer.add(piece, starts[lo:hi] - first)
                else:
                    writer.add(piece)
            done += len(ids)
            if on_progress:
                on_progress(done)
        if separator is not None:
            end = np.array([separator], dtype=dataset.dtype)
            writer.add(end, []) if format == "megatron" else writer.add(end)  # the open document goes on
    paths = list(megatron.paths(out)) if format == "megatron" else writer.paths
    return Converted(paths, tokens, dataset.num_documents)


def _last_id(dataset: TokenDataset) -> int | None:
    for k in reversed(range(dataset.num_shards)):
        ids = dataset.shard_ids(k)
        if len(ids):
            return int(ids[-1])
    return None


# --- in one step -----------------------------------------------------------------------------------------

T = TypeVar("T")


def work_directory(out: str | os.PathLike) -> Path:
    """The hidden dataset directory beside the prefix `out` through which `write_format` writes it."""
    out = Path(out)
    return out.parent / f".{out.name}.dataset"


def write_format(
    write_directory: Callable[[Path], T],
    out: str | os.PathLike,
    format: str = "megatron",
    *,
    shard_tokens: int = llmc.DEFAULT_SHARD_TOKENS,
    append_separator: bool = False,
    on_converting: Callable[[int, int], None] | None = None,
) -> tuple[T, Converted]:
    """Write a corpus as `format` at the prefix `out` in one step: `write_directory(folder)` writes
    it as a dataset directory in `work_directory(out)` (a writer of `datasets.writer` or
    `datasets.from_documents`, resuming what a stopped run left there), which is then converted
    (see `convert_dataset`) and removed. Returns (what `write_directory` returned, the conversion).

    `on_converting(tokens_done, tokens)` reports the conversion. A stop (Ctrl-C, an error, a kill)
    leaves the hidden folder for the next run with the same arguments to resume; errors name `out`,
    never that folder. Options that cannot be written are refused before anything is.
    """
    _check_options(format, shard_tokens, out)
    out = Path(out)
    work = work_directory(out)
    if work.exists() and not work.is_dir():
        raise ValueError(f"{work} is a file, where the unfinished run of {out} is kept: move it away")
    with _naming(work, f"{out} (its unfinished run)"):
        written = write_directory(work)
        tokens = len(TokenDataset(work))
        progress = (lambda done: on_converting(done, tokens)) if on_converting else None
        converted = convert_dataset(work, out, format, shard_tokens=shard_tokens, append_separator=append_separator,
                                    on_progress=progress)
    shutil.rmtree(work, ignore_errors=True)
    return written, converted


@contextlib.contextmanager
def _naming(folder: Path, instead: str) -> Iterator[None]:
    """Errors of the block that name `folder` or a file in it name `instead`."""
    pattern = re.compile(re.escape(str(folder)) + r"""(/[^\s:'",)]*)?""")
    try:
        yield
    except (BpeError, ValueError, OSError) as e:
        if isinstance(e, OSError) and e.errno is not None:
            names = [pattern.sub(instead, str(n)) if n is not None else None for n in (e.filename, e.filename2)]
            new = type(e)(e.errno, pattern.sub(instead, e.strerror or ""), *[n for n in names if n is not None][:1])
            raise new.with_traceback(e.__traceback__) from None
        if pattern.search(str(e)):
            e.args = tuple(pattern.sub(instead, a) if isinstance(a, str) else a for a in e.args)
        raise
