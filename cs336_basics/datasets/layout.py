"""The dataset directory: what its files are called and what its manifest says. The one definition
that the writer, the loader and the format converters share.

    DIR/manifest.json             written last, atomically: a folder without it is an unfinished run
    DIR/shard-00000.npy           ids of a contiguous run of work units, in corpus order (1-D, the
                                  manifest's dtype: uint16 when every id fits, else uint32)
    DIR/shard-00000.docs.npy      int64: the offset in that shard of each document that starts in it

Concatenating the shards in order gives exactly the array that `encode_file` writes for the same
corpus (documents joined by the first special token). A document starts at its first token and runs
to the next one's start, so the separator after it is its last token; a document may run on into the
next shard. Document starts are global offsets minus the shard's first token's offset.

The manifest (JSON, keys in this order):

    format          "cs336-bpe-dataset"
    version         FORMAT_VERSION; a newer one is refused (written by a newer version of this package)
    tokenizer       {"sha256": of its tokenizer.json text, "pattern", "special_tokens", "vocab_size",
                     "separator_id": the first special token's id, or null}

Versions: 2 (now): a Hugging Face pipeline's `pattern` holds pre-tokenization only (normalizers,
Split steps, ignore_merges); its added tokens' flags and post-processor are no longer in it (the
sha256 covers them). 1: the pattern held them too. A version-1 manifest still reads (`loader`,
`convert`), and its ids are what they were; resuming one is refused, naming the version change, as
the writer refuses any change of settings (write it anew with `overwrite`).

    dtype           "uint16" or "uint32"
    shard_size      the target size of a shard on disk, in bytes
    piece_size      the work units' target size, in bytes of input (how the inputs were cut)
    inputs          [{"path", "size", "mtime_ns", "units": how many work units it was cut into}]
    shards          [{"name": "shard-00000", "units": [first, stop) as indices into the corpus's
                     work units, "tokens", "documents": how many start in it, "sha256": of the ids
                     file, "docs_sha256": of the document-starts file, "bytes" and "docs_bytes":
                     the two files' sizes, "before_next": {"any_document", "last_id"}, what the
                     next shard's writer needs to know of the corpus up to here (see `writer`)}]
    totals          {"tokens", "documents", "shards"}

A dataset written from a Python iterable of documents (see `from_documents`) has `"source":
"iterable"` after `version`, no `inputs` (an empty list), `piece_size` in characters per batch of
documents, shards whose `units` index those batches, and in each shard's entry, last:
`text_sha256` (of its documents' text, to check a resume), `input_documents`, `input_bytes` and
`final` (the end of the documents closed it).
"""

import json
import os
from pathlib import Path

FORMAT = "cs336-bpe-dataset"
FORMAT_VERSION = 2
MANIFEST = "manifest.json"


def shard_name(index: int) -> str:
    """The name of shard `index` (0-based): `shard-00000`; its files add `.npy` and `.docs.npy`."""
    return f"shard-{index:05d}"


def ids_file(directory: str | os.PathLike, name: str) -> Path:
    return Path(directory) / f"{name}.npy"


def docs_file(directory: str | os.PathLike, name: str) -> Path:
    return Path(directory) / f"{name}.docs.npy"


def read_manifest(directory: str | os.PathLike) -> dict:
    """The manifest of the dataset in `directory`, checked for its format and version.

    Raises FileNotFoundError naming the directory when there is none (an unfinished run, or not a
    dataset), and ValueError naming the file when it is not a dataset manifest or is of a newer
    version than this package reads.
    """
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{directory}: no {MANIFEST}: not a finished dataset (run the same command again to finish it)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{path}: not a dataset manifest ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{path}: not a dataset manifest (no \"format\": \"{FORMAT}\")")
    version = manifest.get("version")
    if type(version) is not int or version > FORMAT_VERSION:
        raise ValueError(
            f"{path}: dataset format version {version!r}, this package reads up to {FORMAT_VERSION}; upgrade cs336-basics"
        )
    return manifest
