"""Converting a finished dataset directory into a format a trainer reads, without encoding again:
Megatron-LM's indexed dataset (`formats.megatron`) or llm.c's shards (`formats.llmc`).

The shards are read one at a time, in order, and streamed to the writer in pieces of at most
CHUNK_TOKENS, so memory stays flat whatever the size. Each shard is checked against the manifest
(sha256 of both files, counts) before its ids are used, and the output is renamed into place only
once every shard has gone through, so a bad shard leaves no output. The ids are the same and in
the same order; in Megatron's format each document is one sequence, also one that runs across
shards of the directory (its tokens arrive from two shards and are written as one).
"""

import os
from pathlib import Path
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from cs336_basics.datasets.loader import TokenDataset
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
    on_progress: Callable[[int], None] | None = None,
) -> Converted:
    """Write the dataset in `directory` as `format` at the prefix `out`: `OUT.bin` and `OUT.idx`
    for "megatron" (uint16 ids, or int32 for a uint32 dataset), `OUT_000000.bin`... of at most
    `shard_tokens` tokens for "llmc" (refused, naming the id, if an id exceeds 65535).

    `on_progress(tokens_done)` is called after each shard. Raises ValueError naming every shard
    that disagrees with the manifest, before anything is written in place.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown dataset format {format!r}; known: {', '.join(FORMATS)}")
    dataset = TokenDataset(directory)
    if dataset.kind != "directory":
        raise ValueError(f"{directory}: not a dataset directory (convert reads what `bpe encode --out DIR/` writes)")
    first_file = megatron.paths(out)[0] if format == "megatron" else llmc.shard_path(out, 0)
    # The output's folder is made for the write (and removed again if it fails); an OSError names
    # the output, never the temporary files that stand for it.
    with folders_for([first_file]), final_names(out):
        return _convert(dataset, out, format, shard_tokens, on_progress)


def _convert(dataset: TokenDataset, out, format: str, shard_tokens: int, on_progress) -> Converted:
    if format == "megatron":
        writer = megatron.MegatronWriter(out, np.uint16 if dataset.dtype.itemsize <= 2 else np.int32)
    else:
        writer = llmc.LlmcWriter(out, shard_tokens=shard_tokens, total_tokens=len(dataset))
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
    paths = list(megatron.paths(out)) if format == "megatron" else writer.paths
    return Converted(paths, len(dataset), dataset.num_documents)
