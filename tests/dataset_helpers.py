"""A small, obviously correct writer of dataset directories (as `datasets/layout.py` defines them),
for tests of what reads them: concatenate the documents, cut the ids into shards of a fixed number of
tokens, and write each shard's ids and document starts and then the manifest, with numpy and json.

It is kept apart so that a test can check that the real writer (`datasets/writer.py`) agrees with it.
"""

import hashlib
import json
from pathlib import Path

import numpy as np

from cs336_basics.datasets import layout


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_dataset(
    directory: Path, documents: list[list[int]], shard_tokens: int, dtype: str = "uint16", vocab_size: int = 65536
) -> Path:
    """Write `documents` (each a non-empty list of ids) as a dataset in `directory`, in shards of
    `shard_tokens` tokens (the last one shorter). Returns `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ids = [i for doc in documents for i in doc]
    starts = []
    at = 0
    for doc in documents:
        assert doc, "a document has at least one token"
        starts.append(at)
        at += len(doc)
    shards = []
    for index, first in enumerate(range(0, max(len(ids), 1), shard_tokens)):
        stop = min(first + shard_tokens, len(ids))
        name = layout.shard_name(index)
        np.save(layout.ids_file(directory, name), np.array(ids[first:stop], dtype=dtype))
        local = [s - first for s in starts if first <= s < stop]
        np.save(layout.docs_file(directory, name), np.array(local, dtype=np.int64))
        shards.append({
            "name": name,
            "units": [index, index + 1],
            "tokens": stop - first,
            "documents": len(local),
            "sha256": sha256_of(layout.ids_file(directory, name)),
            "docs_sha256": sha256_of(layout.docs_file(directory, name)),
            "bytes": layout.ids_file(directory, name).stat().st_size,
            "docs_bytes": layout.docs_file(directory, name).stat().st_size,
        })
    manifest = {
        "format": layout.FORMAT,
        "version": layout.FORMAT_VERSION,
        "tokenizer": {"sha256": "0" * 64, "pattern": "gpt2", "special_tokens": ["<|endoftext|>"],
                      "vocab_size": vocab_size, "separator_id": 0},
        "dtype": dtype,
        "shard_size": shard_tokens * np.dtype(dtype).itemsize,
        "inputs": [{"path": "corpus.txt", "size": 0, "mtime_ns": 0, "units": len(shards)}],
        "shards": shards,
        "totals": {"tokens": len(ids), "documents": len(documents), "shards": len(shards)},
    }
    (directory / layout.MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return directory
