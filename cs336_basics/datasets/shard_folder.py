"""A folder of shards that a resumable run writes: the one mechanism behind count tables
(`counts.writer`) and token datasets (`writer`, `from_documents`). What a shard holds and how it is
made is theirs; the folder's life is this module's.

    DIR/manifest.json              written last, atomically: the head (what the folder is made from
                                   and how), the shards' entries in order, and their `totals`
    DIR/shard-00000...             the shards, each put in place whole by the worker that makes it
    DIR/.work/plan.json            while a run is unfinished: its head
    DIR/.work/shard-NNNNN.json     while a run is unfinished: each finished shard's record (its entry)
    DIR/.lock                      held by the run (flock; not for a URL), removed when it ends

A run, in this order. `ShardFolder.opened` makes the folder and takes its lock before anything
else, so a run refused because another holds the folder changes nothing in it; it refuses a folder
that holds something else (files that are not of its kind, or another kind's manifest or plan),
naming it; it reads the head the folder was written for (the manifest, else the plan) and refuses a
different one, naming what changed, unless `overwrite`, which removes what the old run wrote; and
it removes the temporary files a stopped run left. The writer then keeps each shard whose files are
`intact` (the size and the sha256 its record gives, read back from disk), `begin`s (the kept
shards' records and the plan go into `.work/`, then the manifest goes), writes the rest, and
`finish`es: the manifest with its totals, then `.work/` removed. A finished folder holds its
manifest and its shards, nothing else. Every file is written atomically (see `store`).

Default piece sizes. A *piece* is the input that one task reads. There is one rule
(`default_piece_size`): the input shared evenly among the workers, one piece each, but never less
than `MIN_PIECE_SIZE` (1 MiB: a smaller task costs more to start than it saves) and never more than
the kind's largest piece. A count table's piece is a whole shard, at most 1 GiB, so a table has
about one shard per worker. A dataset's piece is a part of a shard, at most 1 MiB and half a shard
(so that a stop loses little and a shard holds a few parts): that cap is always the smaller, so a
dataset's pieces, like its shards, never depend on the workers.
"""

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from cs336_basics.corpora import sources
from cs336_basics.datasets.store import Store
from cs336_basics.errors import DatasetBusy

MANIFEST = "manifest.json"
WORK = ".work"  # the plan and the shards' records of an unfinished run
LOCK = ".lock"
PLAN = "plan.json"
MIN_PIECE_SIZE = 1 << 20


def default_piece_size(total_bytes: int, num_workers: int, largest: int) -> int:
    """The input bytes a task reads by default (see the module docstring): `total_bytes` shared
    among `num_workers`, at least `MIN_PIECE_SIZE`, at most `largest` (and at least 1)."""
    per_worker = -(-total_bytes // max(num_workers, 1))
    return max(min(max(per_worker, MIN_PIECE_SIZE), largest), 1)


def changed_keys(old: dict, new: dict) -> str:
    """The keys of the head whose values differ, in words: a kind's `what_changed` by default."""
    changed = [f"{key.replace('_', ' ')} ({old.get(key)!r}, now {new[key]!r})" for key in new if old.get(key) != new[key]]
    return "; ".join(changed) or "its settings differ"


def totals(entries: Iterable[dict], keys: Iterable[str]) -> dict:
    """The manifest's `totals`: each of `keys` summed over the shards' entries, then `shards`."""
    entries = list(entries)
    return {key: sum(e.get(key, 0) for e in entries) for key in keys} | {"shards": len(entries)}


@dataclass(frozen=True)
class Kind:
    """What a kind of shard folder is, as far as the folder's life needs to know."""

    noun: str  # "dataset", "count table": in messages
    format: str  # the manifest's `format`
    version: int  # the newest format version this package writes; a plan of a newer one is refused
    shard_endings: tuple[str, ...]  # how the names of shard files end (`shard-00000` + one of these)
    read_manifest: Callable[[Path], dict]  # checked, or ValueError naming the file
    shard_files: Callable[[dict], list[tuple[str, object, object]]]  # a shard entry's (file, size, sha256)s
    total_keys: tuple[str, ...]  # the entries' keys that `totals` sums
    what_changed: Callable[[dict, dict], str] = field(default=changed_keys)  # two heads' differences, in words

    def owns(self, name: str) -> bool:
        """Whether a name in the folder is one that a run of this kind writes (or a temporary of one)."""
        if name in (MANIFEST, WORK, LOCK):
            return True
        if name.startswith("."):
            if not name.endswith(".tmp"):
                return False
            name = name[1:].rsplit(".", 2)[0]  # `.NAME.XXXXXX.tmp` (see `Store.write`)
        return name == MANIFEST or (name.startswith("shard-") and name.endswith(self.shard_endings))


def record_name(index: int) -> str:
    """The name of shard `index`'s record in `.work/`."""
    return f"{WORK}/shard-{index:05d}.json"


@contextlib.contextmanager
def locked(directory: str | os.PathLike, noun: str = "dataset") -> Iterator[int | None]:
    """Hold `DIR/.lock` for the run; a second run on the same folder is refused (`DatasetBusy`).
    Yields the lock's file descriptor (None where there is no flock: on Windows, and for a URL,
    where two runs at once are not detected).

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
            raise DatasetBusy(f"{directory}: another run is writing this {noun} (it holds {path}); "
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


class Opened(NamedTuple):
    """What `ShardFolder.opened` found: the run's head (with what it adopted from the folder's), the
    head the folder holds (finished or not; None when there is none or it was removed), the shard
    entries its manifest lists, and the lock's file descriptor (or None)."""

    head: dict
    previous: dict | None
    listed: list
    lock_fd: int | None


class ShardFolder:
    """The files of one shard folder of `kind` (a local path or an `fsspec` URL) while it is written."""

    def __init__(self, root: str | os.PathLike, kind: Kind):
        self.store = Store(root)
        self.root = self.store.root
        self.kind = kind

    def __str__(self) -> str:
        return self.root

    def path(self, name: str = "") -> str:
        """The full path (or URL) of `name`, for messages."""
        return self.store.path(name)

    # --- before a run --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def opened(self, head: dict, *, overwrite: bool, anew: str, adopt: Iterable[str] = ()) -> Iterator[Opened]:
        """Make and lock the folder for a run that writes what `head` describes (the manifest's keys
        before `shards`), then check it, for the block (see the module docstring).

        Refused, naming why: a folder another run holds; one holding files not of this kind, or
        another kind's manifest or plan (even with `overwrite`: it is not ours to remove); one
        written with another head (`anew` tells how to write it anew), or whose manifest or plan
        cannot be read, unless `overwrite`, which removes what the old run wrote. The keys in
        `adopt` are the run's defaults: when the folder's head differs in those alone, its values
        are kept (a resumed run goes on as it was planned)."""
        self._make()
        with locked(self.root, self.kind.noun) as lock_fd:
            self._check_ours()
            try:
                previous, listed = self.previous_head()
            except ValueError:
                if not overwrite:
                    raise
                previous, listed = None, []
                self.remove_all()
            if previous is not None:
                adopted = {**head, **{k: previous[k] for k in adopt if k in previous}}
                if adopted == previous:
                    head = adopted
            if previous is not None and previous != head:
                if not overwrite:
                    raise ValueError(f"{self.store} was written with other settings: "
                                     f"{self.kind.what_changed(previous, head)}; {anew}")
                self.remove_all()
                previous, listed = None, []
            self.remove_leftovers()
            yield Opened(head, previous, listed, lock_fd)

    def _make(self) -> None:
        """Create the folder, and check that it can be written (the lock's file goes in it)."""
        store = self.store
        try:
            store.make_dirs()
            if not store.url:
                with tempfile.TemporaryFile(dir=store.root):
                    pass
        except OSError as e:
            raise OSError(e.errno, f"cannot write the {self.kind.noun} folder {store}: {e.strerror or e}") from None

    def _check_ours(self) -> None:
        """Refuse a folder of another kind (its manifest or plan says so) or, where there is neither,
        one holding files this kind does not write."""
        store, noun = self.store, self.kind.noun
        names = store.names()
        # A folder where a file of ours goes (or the reverse) would fail late, after the work. Shards
        # are looked at in a local folder only: at a URL each look is a request.
        for name in (n for n in names if self.kind.owns(n) and (not store.url or n in (MANIFEST, WORK))):
            if store.is_dir(name) != (name == WORK):
                what = "a file" if name == WORK else "a folder"
                raise ValueError(f"{store.path(name)} is {what}, not what a {noun} keeps there: move it away or "
                                 f"write the {noun} to a new or empty folder")
        for name in (MANIFEST, f"{WORK}/{PLAN}"):
            found = self.read_json(name)
            if found is not None and isinstance(found.get("format"), str) and found["format"] != self.kind.format:
                raise ValueError(f"{store} holds another kind of folder ({name} says \"format\": "
                                 f"{json.dumps(found['format'])}), not a {noun}: write the {noun} to a new or "
                                 "empty folder")
        if not any(n in (MANIFEST, WORK) for n in names):
            foreign = sorted(n for n in names if not self.kind.owns(n))
            if foreign:
                raise ValueError(f"{store} holds files that are not a {noun}'s ({', '.join(foreign[:3])}); "
                                 f"write the {noun} to a new or empty folder")

    def previous_head(self) -> tuple[dict | None, list]:
        """(the head the folder was written for, the shard entries its manifest lists), from the
        manifest (checked by the kind's `read_manifest`) or else the plan; ValueError naming the
        file when it cannot be read."""
        store = self.store
        if store.size(MANIFEST) is not None:
            manifest = self._read_manifest()
            return {k: v for k, v in manifest.items() if k not in ("shards", "totals")}, manifest.get("shards") or []
        plan = self.read_json(f"{WORK}/{PLAN}")
        if plan is not None and type(plan.get("version")) is int and plan["version"] > self.kind.version:
            raise ValueError(f"{store.path(WORK + '/' + PLAN)}: written by a newer version of cs336-basics "
                             f"(format version {plan['version']}); upgrade, or pass overwrite=True / --overwrite")
        return plan, []

    def _read_manifest(self) -> dict:
        """The kind's `read_manifest`, of a copy of the manifest for a URL (it reads local folders),
        its messages naming the URL."""
        if not self.store.url:
            return self.kind.read_manifest(Path(self.root))
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, MANIFEST).write_bytes(self.store.read_bytes(MANIFEST))
            try:
                return self.kind.read_manifest(Path(folder))
            except ValueError as e:
                raise ValueError(str(e).replace(str(Path(folder, MANIFEST)), self.store.path(MANIFEST))
                                 .replace(folder, self.root)) from None

    def remove_leftovers(self) -> None:
        """What a stopped run left half-written: temporary files (`.NAME.XXXXXX.tmp`) of the kind's
        files, and anything hidden in `.work/` (temporaries, the workers' caches)."""
        store = self.store
        for name in store.names():
            if name.startswith(".") and name.endswith(".tmp") and self.kind.owns(name):
                store.remove(name)
        for name in store.names(WORK):
            if name.startswith("."):
                if store.is_dir(f"{WORK}/{name}"):
                    store.remove_tree(f"{WORK}/{name}")
                else:
                    store.remove(f"{WORK}/{name}")

    def remove_all(self) -> None:
        """Everything a run of this kind wrote in the folder (for `overwrite`), the manifest first."""
        store = self.store
        store.remove(MANIFEST)
        store.remove_tree(WORK)
        for name in store.names():
            if name != LOCK and self.kind.owns(name):
                store.remove(name)

    # --- records ---------------------------------------------------------------------------------------

    def read_json(self, name: str) -> dict | None:
        """The JSON object in `name`; None when there is none, or it is not one."""
        try:
            data = json.loads(self.store.read_bytes(name).decode("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def write_json(self, name: str, data: dict, *, fsync: bool = False) -> None:
        self.store.write(name, [(json.dumps(data, indent=1) + "\n").encode("utf-8")], fsync=fsync)

    def record(self, index: int) -> dict | None:
        """The record in `.work/` of shard `index`, if it is there."""
        return self.read_json(record_name(index))

    def write_record(self, index: int, entry: dict, *, fsync: bool = False) -> None:
        """(In a worker, once the shard's files are in place) shard `index`'s record."""
        self.write_json(record_name(index), entry, fsync=fsync)

    def matches(self, name: str, size, sha256) -> bool:
        """Whether the file `name` is there with this size and this sha256 (the size is read first)."""
        try:
            return self.store.size(name) == size and self.store.sha256(name) == sha256
        except OSError:
            return False

    def intact(self, entry: dict) -> bool:
        """Whether each file of the shard `entry` (a record or manifest entry) has the size and the
        sha256 the entry gives: the one test for keeping a shard."""
        return all(self.matches(name, size, sha) for name, size, sha in self.kind.shard_files(entry))

    # --- a run -----------------------------------------------------------------------------------------

    def finished(self) -> bool:
        """Whether the manifest is there; a run that stopped right after writing it left `.work/`,
        which this removes."""
        if self.store.size(MANIFEST) is None:
            return False
        self.store.remove_tree(WORK)
        return True

    def begin(self, kept: Mapping[int, dict], head: dict) -> None:
        """Something is to be written: the folder stops being finished until `finish`. The kept
        shards' records (`kept`, by index) and the plan go into `.work/`, then the manifest goes."""
        self.store.make_dirs(WORK)
        for index, entry in kept.items():
            if self.store.size(record_name(index)) is None:
                self.write_record(index, entry)
        self.write_json(f"{WORK}/{PLAN}", head, fsync=True)
        self.store.remove(MANIFEST)

    def finish(self, head: dict, entries: list[dict]) -> None:
        """Write the manifest of the shards `entries` (in order), then remove `.work/`."""
        self.remove_leftovers()  # also any that a worker of a killed run left while this one ran
        manifest = {**head, "shards": entries, "totals": totals(entries, self.kind.total_keys)}
        self.write_json(MANIFEST, manifest, fsync=True)
        self.store.remove_tree(WORK)
