"""The dataset directory being written (see `layout` for what it holds when finished): the one
object through which both writers (`writer` for files, `from_documents` for iterables) and their
workers prepare it, lock it, read and write its records, reuse what an earlier run finished, remove
what a stopped run left, and write its manifest.

While a run is unfinished the directory holds, beside the shards already written, `.work/` with
the run's plan (`plan.json`: the manifest's keys before `shards`), one record per finished shard
(`shard-NNNNN.json`, its manifest entry) and one *part* per encoded work unit or batch
(`unit-NNNNNNN.ids`, its ids, and `unit-NNNNNNN.json`, its record). `.lock` is held by the run
(flock; not for a URL) and removed when it ends (see `locked`). Every file is written atomically
(see `store`). A finished dataset holds its manifest and its shards, nothing else.
"""

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cs336_basics.corpora import sources
from cs336_basics.datasets import layout
from cs336_basics.datasets.store import Store
from cs336_basics.errors import DatasetBusy

WORK = ".work"  # parts, records and the plan of an unfinished run
LOCK = ".lock"
PLAN = "plan.json"


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


def totals(entries: Iterable[dict]) -> dict:
    """The manifest's `totals` of its shard entries."""
    entries = list(entries)
    return {
        "tokens": sum(e["tokens"] for e in entries),
        "documents": sum(e["documents"] for e in entries),
        "shards": len(entries),
    }


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


@contextlib.contextmanager
def locked(directory: str | os.PathLike) -> Iterator[int | None]:
    """Hold `DIR/.lock` for the run; a second run on the same directory is refused. Yields the
    lock's file descriptor (None where there is no flock: on Windows, and for a URL, where two
    runs at once are not detected).

    The file is removed when the run ends, however it ends short of being killed: nothing of the
    run stays. A killed run leaves it behind, unlocked (the OS releases a flock with its last
    holder), and the next run takes it and removes it in turn. Since a run removes the file while
    it holds it, a run that opened it just before then locks a file no longer in the folder: it
    checks that the file it locked is the one at `DIR/.lock`, and tries again if not."""
    try:
        import fcntl
    except ImportError:  # Windows: no lock
        fcntl = None
    if fcntl is None or sources.is_url(os.fspath(directory)):
        yield None
        return
    path = os.path.join(directory, LOCK)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DatasetBusy(f"{directory}: another run is writing this dataset (it holds {path}); "
                              "wait for it to end or stop it, then run again") from None
        if _same_file(fd, path):
            break
        os.close(fd)  # an ending run removed it after we opened it: lock the one there now
    try:
        yield fd
    finally:
        # Removed while still held, so that no other run can take this file meanwhile.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


def _same_file(fd: int, path: str) -> bool:
    """Whether the open file `fd` is the file at `path`."""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


def _is_ours(name: str) -> bool:
    """Whether a name in a dataset directory is one this module writes (or a temporary of one)."""
    if name in (layout.MANIFEST, WORK, LOCK):
        return True
    if name.startswith("."):
        name = name[1:]
        if not name.endswith(".tmp"):
            return False
        name = name.rsplit(".", 2)[0]  # `.NAME.XXXXXX.tmp` (see `Store.write`)
    return name == layout.MANIFEST or (name.startswith("shard-") and name.endswith(".npy"))


def part_name(index: int) -> str:
    """The name in `.work/` (without its extension) of part `index`."""
    return f"{WORK}/unit-{index:07d}"


class DatasetDirectory:
    """The files of one dataset directory (a local path or an `fsspec` URL) while it is written."""

    def __init__(self, root: str | os.PathLike):
        self.store = Store(root)
        self.root = self.store.root

    def __str__(self) -> str:
        return self.root

    def path(self, name: str = "") -> str:
        """The full path (or URL) of `name`, for messages."""
        return self.store.path(name)

    # --- before a run ------------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Create the directory; refuse one that holds other things and no dataset."""
        store = self.store
        try:
            store.make_dirs()
            if not store.url:
                with tempfile.TemporaryFile(dir=store.root):
                    pass
        except OSError as e:
            raise OSError(e.errno, f"cannot write the dataset folder {store}: {e.strerror or e}") from None
        names = store.names()
        if not any(n in (layout.MANIFEST, WORK) for n in names):
            foreign = sorted(n for n in names if not _is_ours(n))
            if foreign:
                raise ValueError(f"{store} holds files that are not a dataset's ({', '.join(foreign[:3])}); "
                                 "write the dataset to a new or empty folder")

    @contextlib.contextmanager
    def opened(self, head: dict, *, overwrite: bool, anew: str) -> Iterator[tuple[dict | None, list, int | None]]:
        """Prepare and lock the directory for a run that writes the dataset `head` describes (the
        manifest's keys before `shards`); yield (the head of the dataset it holds, finished or
        not, else None; the shard entries its manifest lists; the lock's file descriptor or None).

        A dataset of other settings is refused, naming what changed (`anew` tells how to write it
        anew), or with `overwrite` removed; so is one whose manifest or plan cannot be read. What
        a stopped run left half-written is removed."""
        self.prepare()
        with locked(self.root) as lock_fd:
            try:
                previous, listed = self.previous_head()
            except ValueError:
                if not overwrite:
                    raise
                previous, listed = None, []
                self.remove_dataset()
            if previous is not None and previous != head:
                if not overwrite:
                    raise ValueError(f"{self.store} was written with other settings: {what_changed(previous, head)}; "
                                     f"{anew}")
                self.remove_dataset()
                previous, listed = None, []
            self.remove_leftovers()
            yield previous, listed, lock_fd

    def previous_head(self) -> tuple[dict | None, list]:
        """(the head the directory was written for, shard entries the manifest lists), from
        `manifest.json` (checked by `layout.read_manifest`) or else `.work/plan.json`."""
        store = self.store
        if store.size(layout.MANIFEST) is not None:
            manifest = layout.read_manifest(store.root) if not store.url else self._read_url_manifest()
            return {k: v for k, v in manifest.items() if k not in ("shards", "totals")}, manifest.get("shards") or []
        plan = self.read_json(f"{WORK}/{PLAN}")
        if plan is not None and type(plan.get("version")) is int and plan["version"] > layout.FORMAT_VERSION:
            raise ValueError(f"{store.path(WORK + '/' + PLAN)}: written by a newer version of cs336-basics "
                             f"(format version {plan['version']}); upgrade, or pass overwrite=True / --overwrite")
        return plan, []

    def _read_url_manifest(self) -> dict:
        """`layout.read_manifest` of a copy of the manifest (layout reads local folders only), its
        messages naming the URL."""
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, layout.MANIFEST).write_bytes(self.store.read_bytes(layout.MANIFEST))
            try:
                return layout.read_manifest(folder)
            except ValueError as e:
                raise ValueError(str(e).replace(str(Path(folder, layout.MANIFEST)),
                                                self.store.path(layout.MANIFEST))) from None

    def remove_leftovers(self) -> None:
        """Temporary files and folders of a stopped run: `.NAME.XXXXXX.tmp` and shared caches."""
        store = self.store
        for folder in ("", WORK):
            for name in store.names(folder):
                inside = f"{folder}/{name}" if folder else name
                if name.startswith(".encode-cache-"):
                    store.remove_tree(inside)
                elif name.startswith(".") and name.endswith(".tmp") and (folder == WORK or _is_ours(name)):
                    store.remove(inside)

    def remove_dataset(self) -> None:
        """Everything the writers wrote in the directory (for `overwrite`), the manifest first."""
        store = self.store
        store.remove(layout.MANIFEST)
        store.remove_tree(WORK)
        for name in store.names():
            if name != LOCK and _is_ours(name):
                store.remove(name)

    # --- records -------------------------------------------------------------------------------------------

    def read_json(self, name: str) -> dict | None:
        """The JSON object in `name`; None when there is none, or it is not one."""
        try:
            data = json.loads(self.store.read_bytes(name).decode("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def write_json(self, name: str, data: dict, *, fsync: bool = False) -> None:
        self.store.write(name, [(json.dumps(data, indent=1) + "\n").encode("utf-8")], fsync=fsync)

    def shard_record(self, name: str) -> dict | None:
        """The record in `.work/` of the shard `name`, if it is there."""
        return self.read_json(f"{WORK}/{name}.json")

    def _matches(self, name: str, size: int, sha256: str) -> bool:
        try:
            return self.store.size(name) == size and self.store.sha256(name) == sha256
        except OSError:
            return False

    def reusable_shard(self, entry: dict | None, index: int, units: tuple[int, int]) -> bool:
        """Whether shard `index`'s files on disk match `entry` (its record or manifest entry)."""
        if entry is None or entry.get("name") != layout.shard_name(index) or entry.get("units") != list(units):
            return False
        before_next = entry.get("before_next")
        if not isinstance(before_next, dict) or set(before_next) != {"any_document", "last_id"}:
            return False
        name = entry["name"]
        return self._matches(ids_name(name), entry.get("bytes", -1), str(entry.get("sha256"))) and self._matches(
            docs_name(name), entry.get("docs_bytes", -1), str(entry.get("docs_sha256"))
        )

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
        if not self._matches(f"{name}.ids", record["tokens"] * itemsize, str(record.get("sha256"))):
            return None
        return record

    def remove_parts(self, first: int, stop: int) -> None:
        """The parts of a written shard. The command removes them, not the worker that wrote the shard:
        a worker left running by a killed command must not pull parts from under the next run."""
        for i in range(first, stop):
            self.store.remove(f"{part_name(i)}.ids")
            self.store.remove(f"{part_name(i)}.json")

    # --- a run ---------------------------------------------------------------------------------------------

    def finished(self) -> bool:
        """Whether the manifest is there; a run that stopped right after writing it left `.work/`,
        which this removes."""
        if self.store.size(layout.MANIFEST) is None:
            return False
        self.store.remove_tree(WORK)
        return True

    def begin(self, entries: Iterable[dict], head: dict) -> None:
        """Something is to be written: the directory stops being a finished dataset until `finish`.
        The kept shards' records and the plan go into `.work/`, then the manifest goes."""
        self.store.make_dirs(WORK)
        for entry in entries:
            if self.store.size(f"{WORK}/{entry['name']}.json") is None:
                self.write_json(f"{WORK}/{entry['name']}.json", entry)
        self.write_json(f"{WORK}/{PLAN}", head, fsync=True)
        self.store.remove(layout.MANIFEST)

    def finish(self, head: dict, entries: list[dict]) -> None:
        """Write the manifest of the shards `entries` (in order), then remove `.work/`."""
        self.remove_leftovers()  # also any that a worker of a killed run left while this one ran
        manifest = {**head, "shards": entries, "totals": totals(entries)}
        self.write_json(layout.MANIFEST, manifest, fsync=True)
        self.store.remove_tree(WORK)

    def written(self, entries: Iterable[dict], input_bytes: int, reused: int, reused_bytes: int) -> Written:
        counts = totals(entries)
        return Written(self.root, counts["tokens"], counts["documents"], counts["shards"], input_bytes, reused,
                       reused_bytes)


def ids_name(name: str) -> str:
    """The file name of shard `name`'s ids."""
    return layout.ids_file(".", name).name


def docs_name(name: str) -> str:
    """The file name of shard `name`'s document starts."""
    return layout.docs_file(".", name).name
