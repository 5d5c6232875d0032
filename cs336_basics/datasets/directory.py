"""The dataset directory being written (see `layout` for what it holds when finished): the one
object through which both writers (`writer` for files, `from_documents` for iterables) and their
workers write it. It is a shard folder (`shard_folder`: the lock, the checks, the records, what is
kept, the manifest), a dataset's `Kind` of one, whose shards are made of parts.

While a run is unfinished the directory holds, beside the shards already written and `.work/`'s
plan and shard records (see `shard_folder`), one *part* per encoded work unit or batch in `.work/`
(`unit-NNNNNNN.ids`, its ids, and `unit-NNNNNNN.json`, its record).
"""

import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from cs336_basics.datasets import layout
from cs336_basics.datasets.shard_folder import WORK, Kind, ShardFolder, totals


@dataclass(frozen=True)
class Written:
    """What a writer did: the dataset's totals, and how much of it an earlier run had made."""

    directory: str  # as given: a local path or a URL
    tokens: int
    documents: int
    shards: int
    input_bytes: int
    reused_shards: int
    reused_bytes: int  # input bytes whose ids were found on disk (whole shards and parts)


def what_changed(old: dict, new: dict) -> str:
    """The differences between two heads (see `_head`), in words."""
    if old.get("source") != new.get("source"):  # "iterable" (see `from_documents`), or None: files
        source = {None: "files", "iterable": "an iterable of documents"}
        return (f"it was written from {source.get(old.get('source'), old.get('source'))}, "
                f"now from {source.get(new.get('source'), new.get('source'))}")
    changes = []
    old_tok, new_tok = old.get("tokenizer") or {}, new["tokenizer"]
    if old_tok.get("pattern") != new_tok["pattern"]:
        changes.append(f"the pattern changed ({old_tok.get('pattern')!r}, now {new_tok['pattern']!r})")
    if old_tok.get("special_tokens") != new_tok["special_tokens"]:
        changes.append(f"the special tokens changed ({old_tok.get('special_tokens')}, now {new_tok['special_tokens']})")
    if not changes and old_tok != new_tok:
        changes.append(f"the tokenizer changed (tokenizer.json sha256 {str(old_tok.get('sha256'))[:12]}..., "
                       f"now {new_tok['sha256'][:12]}...)")
    for key, what in (("dtype", "the dtype"), ("shard_size", "the shard size"), ("piece_size", "the piece size")):
        if old.get(key) != new[key] and not (key == "piece_size" and old.get("shard_size") != new["shard_size"]):
            changes.append(f"{what} changed ({old.get(key)}, now {new[key]})")
    if bool(old.get("append_separator")) != bool(new.get("append_separator")):
        said = {True: "with --append-separator", False: "without --append-separator"}
        changes.append(f"it was written {said[bool(old.get('append_separator'))]}, now "
                       f"{said[bool(new.get('append_separator'))]}")
    recut = old.get("shard_size") == new["shard_size"] and old.get("piece_size") == new["piece_size"]
    old_inputs = {i.get("path"): i for i in old.get("inputs") or [] if isinstance(i, dict)}
    new_inputs = {i["path"]: i for i in new["inputs"]}
    for path, now in new_inputs.items():
        before = old_inputs.get(path)
        if before is None:
            changes.append(f"input {path} is new")
        elif before.get("size") != now["size"]:
            changes.append(f"input {path} changed (size {before.get('size')}, now {now['size']})")
        elif before.get("mtime_ns") != now["mtime_ns"]:
            changes.append(f"input {path} changed (it was modified since)")
        elif before.get("units") != now["units"] and recut:
            changes.append(f"input {path} is cut differently ({before.get('units')} work units, now {now['units']})")
    changes += [f"input {path} is gone" for path in old_inputs if path not in new_inputs]
    if not changes and list(old_inputs) != list(new_inputs):
        changes.append("the inputs are in another order")
    if not changes and old.get("version") != new["version"]:
        changes.append(f"the format version changed ({old.get('version')}, now {new['version']})")
    return "; ".join(changes) or "its settings differ"


def part_name(index: int) -> str:
    """The name in `.work/` (without its extension) of part `index`."""
    return f"{WORK}/unit-{index:07d}"


def _shard_files(entry: dict) -> list[tuple[str, object, object]]:
    """A dataset shard's files (its ids, its document starts), with the size and sha256 its entry gives."""
    name = str(entry.get("name"))
    return [(ids_name(name), entry.get("bytes", -1), str(entry.get("sha256"))),
            (docs_name(name), entry.get("docs_bytes", -1), str(entry.get("docs_sha256")))]


DATASET = Kind(noun="dataset", format=layout.FORMAT, version=layout.FORMAT_VERSION, shard_endings=(".npy",),
               read_manifest=layout.read_manifest, shard_files=_shard_files, total_keys=("tokens", "documents"),
               what_changed=what_changed)


class DatasetDirectory(ShardFolder):
    """The files of one dataset directory (a local path or an `fsspec` URL) while it is written: a
    shard folder (see `shard_folder`) whose shards are made of parts."""

    def __init__(self, root: str | os.PathLike):
        super().__init__(root, DATASET)

    def reusable_shard(self, entry: dict | None, index: int, units: tuple[int, int]) -> bool:
        """Whether shard `index`'s files on disk match `entry` (its record or manifest entry)."""
        if entry is None or entry.get("name") != layout.shard_name(index) or entry.get("units") != list(units):
            return False
        before_next = entry.get("before_next")
        if not isinstance(before_next, dict) or set(before_next) != {"any_document", "last_id"}:
            return False
        return self.intact(entry)

    def write_part(self, index: int, dtype: np.dtype, has_documents: bool, data: bytes) -> dict:
        """Write a unit's ids and then its record into `.work/`; the record (see `writer`)."""
        itemsize = dtype.itemsize
        name = part_name(index)
        sha = self.store.write(f"{name}.ids", [data], fsync=False)  # resume checks it, so no fsync
        record = {
            "tokens": len(data) // itemsize,
            "has_documents": has_documents,
            "last_id": int(np.frombuffer(data[-itemsize:], dtype=dtype)[0]) if data else None,
            "sha256": sha,
        }
        self.write_json(f"{name}.json", record)
        return record

    def reusable_part(self, index: int, itemsize: int) -> dict | None:
        """The record of part `index` when its ids on disk match it, else None."""
        name = part_name(index)
        record = self.read_json(f"{name}.json")
        if record is None or not isinstance(record.get("tokens"), int) or not isinstance(record.get("has_documents"), bool):
            return None
        if not self.matches(f"{name}.ids", record["tokens"] * itemsize, str(record.get("sha256"))):
            return None
        return record

    def remove_parts(self, first: int, stop: int) -> None:
        """The parts of a written shard. The command removes them, not the worker that wrote the shard:
        a worker left running by a killed command must not pull parts from under the next run."""
        for i in range(first, stop):
            self.store.remove(f"{part_name(i)}.ids")
            self.store.remove(f"{part_name(i)}.json")

    # --- a run ---------------------------------------------------------------------------------------------

    def written(self, entries: Iterable[dict], input_bytes: int, reused: int, reused_bytes: int) -> Written:
        counts = totals(entries, DATASET.total_keys)
        return Written(self.root, counts["tokens"], counts["documents"], counts["shards"], input_bytes, reused,
                       reused_bytes)


def ids_name(name: str) -> str:
    """The file name of shard `name`'s ids."""
    return layout.ids_file(".", name).name


def docs_name(name: str) -> str:
    """The file name of shard `name`'s document starts."""
    return layout.docs_file(".", name).name
