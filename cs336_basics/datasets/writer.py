"""Writing a dataset directory (see `layout`): shards written where they are made, resumable to the byte.

The plan. The corpus is cut into work units (`sources.plan_units`) and the units into shards: runs
of whole units, in corpus order, each closed once its units' input bytes reach what `shard_size`
bytes of ids are estimated to hold (`BYTES_PER_TOKEN` bytes of text per token). The plan depends
only on the inputs, the tokenizer and the shard size, never on the workers or on timing, so a
resumed run makes the same shards.

The work. Each unit is encoded by a worker, which writes its ids to a *part* file in `DIR/.work/`
and, after it, a small JSON record of the part (tokens, whether it read a document, its last id,
its sha256); only that record comes back. Once every part of a shard is there, a worker *assembles*
the shard: it puts the separators in (from the plan and the records, see below), writes the
shard's ids and document starts beside their final names, fsyncs them, renames them into place and
then writes the shard's record `DIR/.work/shard-NNNNN.json`. Ids therefore never pass through the
process that runs the command. `manifest.json` is written last, from the records, and `.work/`
is then removed.

The separators. Units are joined exactly as `encode_files` joins them: the separator (the first
special token) goes before a unit that starts a new document and read one, when some unit before
it read one. Whether one did, and the last id before a shard, are carried from shard to shard in
order (`before_next` in each shard's record and manifest entry), so a shard's bytes are a function
of the inputs alone. A document starts at offset 0 (when there are tokens) and right after each
separator id; a separator that is the last id of a shard makes the next shard start a document.

The directory is a local folder or an `fsspec` URL that the workers can reach (see `store`).

Resume. A run takes `DIR/.lock` (flock; not for a URL) first and refuses to run beside another.
It then compares what it is about to write (tokenizer, pattern, dtype, shard size, inputs with
their sizes and modification times) with what the directory was written for (`manifest.json`,
else `.work/plan.json`), and refuses a difference, naming it, unless `overwrite`. It removes
temporary files left by a stopped run, keeps each shard whose files match its record (size and
sha256, read back from disk) and each part that matches its own, and encodes only the rest.
"""

import contextlib
import hashlib
import json
import os
import signal
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cs336_basics.corpora import executors, sources
from cs336_basics.datasets import layout
from cs336_basics.datasets.store import Store
from cs336_basics.encode import engines, token_arrays
from cs336_basics.encode.token_arrays import choose_dtype, encode_unit, tokenizer_state
from cs336_basics.errors import DatasetBusy
from cs336_basics.formats import hf

DEFAULT_SHARD_SIZE = 256 << 20  # bytes of ids per shard, about
MAX_PIECE_SIZE = 1 << 20  # bytes of input per work unit, at most
BYTES_PER_TOKEN = 4  # bytes of input per token, to plan shards: about right for English text
WORK = ".work"  # parts, records and the plan of an unfinished run
LOCK = ".lock"
PLAN = "plan.json"


@dataclass(frozen=True)
class Written:
    """What `write_dataset` did: the dataset's totals, and how much of it an earlier run had made."""

    directory: str  # as given: a local path or a URL
    tokens: int
    documents: int
    shards: int
    input_bytes: int
    reused_shards: int
    reused_bytes: int  # input bytes whose ids were found on disk (whole shards and parts)


def _ids_name(name: str) -> str:
    return layout.ids_file(".", name).name


def _docs_name(name: str) -> str:
    return layout.docs_file(".", name).name


# --- the plan ----------------------------------------------------------------------------------------


def piece_size_for(shard_size: int) -> int:
    """The work units' size for a shard size: at most `MAX_PIECE_SIZE`, and small enough that a
    small shard still holds a few units."""
    return max(min(MAX_PIECE_SIZE, shard_size // 2), 1)


def plan_shards(units: Sequence[sources.WorkUnit], shard_size: int, itemsize: int) -> list[tuple[int, int]]:
    """The shards as [first, stop) ranges of unit indices: runs of units, in order, each closed once
    its input bytes reach `shard_size` bytes of ids at `BYTES_PER_TOKEN` bytes per token."""
    budget = max(shard_size * BYTES_PER_TOKEN // itemsize, 1)
    shards = []
    first = 0
    size = 0
    for i, unit in enumerate(units):
        size += unit.size
        if size >= budget or i == len(units) - 1:
            shards.append((first, i + 1))
            first, size = i + 1, 0
    return shards


def tokenizer_identity(tokenizer) -> dict:
    """The manifest's `tokenizer` entry (see `layout`): the digest of its tokenizer.json covers its
    added-token flags and post-processor, which its pattern does not hold."""
    try:
        text = hf.tokenizer_json(tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens, tokenizer.pattern,
                                 added_tokens=getattr(tokenizer, "added_tokens", None),
                                 post_processor=getattr(tokenizer, "post_processor", None))
    except ValueError:  # a special token spelled like a token: no tokenizer.json, digest the data instead
        text = tokenizer_state(tokenizer)[0]
    specials = list(tokenizer.special_tokens)
    return {
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "pattern": tokenizer.pattern,
        "special_tokens": specials,
        "vocab_size": len(tokenizer.vocab),
        "separator_id": tokenizer.encode(specials[0])[0] if specials else None,
    }


def _mtime_ns(path: str) -> int | None:
    if sources.is_url(path):
        return None  # object stores do not all say; the size still tells most changes
    return os.stat(path).st_mtime_ns


def _head(tokenizer, files, units, dtype: np.dtype, shard_size: int, piece_size: int) -> dict:
    """The manifest's keys before `shards`: what the dataset is made from and how."""
    counts: dict[str, int] = {}
    for unit in units:
        counts[unit.path] = counts.get(unit.path, 0) + 1
    return {
        "format": layout.FORMAT,
        "version": layout.FORMAT_VERSION,
        "tokenizer": tokenizer_identity(tokenizer),
        "dtype": dtype.name,
        "shard_size": shard_size,
        "piece_size": piece_size,
        "inputs": [
            {"path": f.path, "size": f.size, "mtime_ns": _mtime_ns(f.path), "units": counts.get(f.path, 0)}
            for f in files
        ],
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


# --- the output directory ----------------------------------------------------------------------------


def check_output(store: Store, inputs, files: Sequence[sources.Source]) -> None:
    """Refuse an output that is a file (such as an input file), the same as or inside an input
    folder, or holding an input file."""
    if store.size("") is not None:
        raise ValueError(f"{store} is a file, not a folder; name a folder for the dataset "
                         "(or FILE.npy for one array)")
    local = store.local_path()

    def where(path: str) -> str | None:  # a path comparable with the output's, if there is one
        if local is not None:
            return None if sources.is_url(path) else str(Path(path).resolve())
        return path.rstrip("/") if sources.is_url(path) else None

    out = str(Path(local).resolve()) if local is not None else store.root
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    for item in map(os.fspath, items):
        folder = where(item)
        if folder is not None and (local is None or Path(folder).is_dir()) and _within(out, folder):
            raise ValueError(f"{store} is inside the input folder {item}: the dataset would become input; "
                             "write it outside the corpus")
    for f in files:
        path = where(f.path)
        if path is not None and path != out and _within(path, out):
            raise ValueError(f"the input {f.path} is inside the dataset folder {store}: writing the dataset "
                             "would change it; move it out")


def _within(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or inside it (both absolute, or both URLs)."""
    return path == folder or path.startswith(folder.rstrip("/" + os.sep) + ("/" if "://" in folder else os.sep))


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


def _prepare(store: Store) -> None:
    """Create the directory; refuse one that holds other things and no dataset."""
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
def locked(directory: str | os.PathLike) -> Iterator[int | None]:
    """Hold `DIR/.lock` for the run (released by the OS however the process ends); a second run on
    the same directory is refused. Yields the lock's file descriptor (None where there is no flock:
    on Windows, and for a URL, where two runs at once are not detected)."""
    try:
        import fcntl
    except ImportError:  # Windows: no lock
        fcntl = None
    if fcntl is None or sources.is_url(os.fspath(directory)):
        yield None
        return
    path = os.path.join(directory, LOCK)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DatasetBusy(f"{directory}: another run is writing this dataset (it holds {path}); "
                              "wait for it to end or stop it, then run again") from None
        yield fd
    finally:
        os.close(fd)


def _remove_leftovers(store: Store) -> None:
    """Temporary files and folders of a stopped run: `.NAME.XXXXXX.tmp` and shared caches."""
    for folder in ("", WORK):
        for name in store.names(folder):
            inside = f"{folder}/{name}" if folder else name
            if name.startswith(".encode-cache-"):
                store.remove_tree(inside)
            elif name.startswith(".") and name.endswith(".tmp") and (folder == WORK or _is_ours(name)):
                store.remove(inside)


def _remove_dataset(store: Store) -> None:
    """Everything this module wrote in the directory (for `overwrite`), the manifest first."""
    store.remove(layout.MANIFEST)
    store.remove_tree(WORK)
    for name in store.names():
        if name != LOCK and _is_ours(name):
            store.remove(name)


def _read_json(store: Store, name: str) -> dict | None:
    try:
        data = json.loads(store.read_bytes(name).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _previous_head(store: Store) -> tuple[dict | None, list]:
    """(the head the directory was written for, shard entries the manifest lists), from
    `manifest.json` (checked by `layout.read_manifest`) or else `.work/plan.json`."""
    if store.size(layout.MANIFEST) is not None:
        manifest = layout.read_manifest(store.root) if not store.url else _read_url_manifest(store)
        return {k: v for k, v in manifest.items() if k not in ("shards", "totals")}, manifest.get("shards") or []
    plan = _read_json(store, f"{WORK}/{PLAN}")
    if plan is not None and type(plan.get("version")) is int and plan["version"] > layout.FORMAT_VERSION:
        raise ValueError(f"{store.path(WORK + '/' + PLAN)}: written by a newer version of cs336-basics "
                         f"(format version {plan['version']}); upgrade, or pass overwrite=True / --overwrite")
    return plan, []


def _read_url_manifest(store: Store) -> dict:
    """`layout.read_manifest` of a copy of the manifest (layout reads local folders only), its
    messages naming the URL."""
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, layout.MANIFEST).write_bytes(store.read_bytes(layout.MANIFEST))
        try:
            return layout.read_manifest(folder)
        except ValueError as e:
            raise ValueError(str(e).replace(str(Path(folder, layout.MANIFEST)), store.path(layout.MANIFEST))) from None


def _matches(store: Store, name: str, size: int, sha256: str) -> bool:
    try:
        return store.size(name) == size and store.sha256(name) == sha256
    except OSError:
        return False


def _write_json(store: Store, name: str, data: dict, *, fsync: bool = False) -> None:
    store.write(name, [(json.dumps(data, indent=1) + "\n").encode("utf-8")], fsync=fsync)


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (length,)}
    )
    return buffer.getvalue()


# --- parts: one work unit's ids ----------------------------------------------------------------------


def _part_name(index: int) -> str:
    return f"unit-{index:07d}"


def write_part(store: Store, index: int, dtype: np.dtype, has_documents: bool, data: bytes) -> dict:
    """Write a unit's ids and then its record into `.work/`; the record (see the module docstring)."""
    itemsize = dtype.itemsize
    name = f"{WORK}/{_part_name(index)}"
    sha = store.write(f"{name}.ids", [data], fsync=False)  # resume checks it, so no fsync
    record = {
        "tokens": len(data) // itemsize,
        "has_documents": has_documents,
        "last_id": int(np.frombuffer(data[-itemsize:], dtype=dtype)[0]) if data else None,
        "sha256": sha,
    }
    _write_json(store, f"{name}.json", record)
    return record


def _encode_part(key: str, state: tuple | None, unit: sources.WorkUnit, dtype: str, directory: str, index: int,
                 engine: "engines.Choice | None" = None) -> dict:
    """In a worker: encode one unit and write its part (see `write_part`)."""
    # token_arrays' worker entry point: it finds the tokenizer (and the local workers' shared cache).
    _, has_documents, data = token_arrays._encode_unit_in_worker(key, state, unit, dtype, engine)
    return write_part(Store(directory), index, np.dtype(dtype), has_documents, data)


def _reusable_part(store: Store, index: int, itemsize: int) -> dict | None:
    name = f"{WORK}/{_part_name(index)}"
    record = _read_json(store, f"{name}.json")
    if record is None or not isinstance(record.get("tokens"), int) or not isinstance(record.get("has_documents"), bool):
        return None
    if not _matches(store, f"{name}.ids", record["tokens"] * itemsize, str(record.get("sha256"))):
        return None
    return record


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(1)


def _init_worker(lock_fd: int | None, key: str, state: tuple, share_folder: str, engine=None) -> None:
    # Ctrl-C reaches the whole process group: the command stops the workers itself, so that they
    # neither print tracebacks nor start on their next unit.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A worker whose command was killed would wait for work forever (its siblings keep the task
    # queue open): it ends itself instead, and the next run removes what it left half-written.
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    if lock_fd is not None:
        os.close(lock_fd)  # a forked worker that outlives the command must not keep the directory locked
    token_arrays._init_worker(key, state, share_folder, engine)


# --- shards: parts joined -------------------------------------------------------------------------------


def assemble_shard(
    directory: str,
    index: int,
    units: tuple[int, int],
    parts: list[tuple[int, bool]],
    starts_document: bool,
    dtype: str,
    separator_id: int | None,
    before_next: dict,
    extra: dict | None = None,
) -> dict:
    """In a worker: join the parts (unit index, separator before it?) into shard `index`, write its
    ids and document starts into place, then its record; return the record (a manifest entry,
    with the keys of `extra` last).

    `starts_document` says whether the shard's first id starts a document (it is the corpus's
    first, or the id before it is the separator)."""
    store = Store(directory)
    dtype = np.dtype(dtype)
    name = layout.shard_name(index)
    separator = np.array([] if separator_id is None else [separator_id], dtype=dtype)
    part_names = {i: f"{WORK}/{_part_name(i)}.ids" for i, _ in parts}
    sizes = []
    for i, _ in parts:
        size = store.size(part_names[i])
        if size is None:
            raise FileNotFoundError(2, "a part of the shard has gone (did another run remove it?)",
                                    store.path(part_names[i]))
        sizes.append(size // dtype.itemsize)
    tokens = sum(sizes) + len(separator) * sum(before for _, before in parts)
    header = _npy_header(dtype, tokens)
    starts: list[np.ndarray] = []
    position = 0
    after_separator = starts_document

    def chunks():
        nonlocal position, after_separator
        yield header
        for i, separator_before in parts:
            pieces = [separator] if separator_before else []
            pieces.append(np.frombuffer(store.read_bytes(part_names[i]), dtype=dtype))
            for ids in pieces:
                if not len(ids):
                    continue
                if after_separator:
                    starts.append(np.array([position], dtype=np.int64))
                if separator_id is not None:
                    starts.append(np.flatnonzero(ids[:-1] == separator_id).astype(np.int64) + position + 1)
                    after_separator = bool(ids[-1] == separator_id)
                else:
                    after_separator = False
                position += len(ids)
                yield ids.tobytes()

    sha = store.write(_ids_name(name), chunks(), fsync=True)
    doc_starts = np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64)
    docs_bytes = _npy_header(np.dtype(np.int64), len(doc_starts)) + doc_starts.tobytes()
    docs_sha = store.write(_docs_name(name), [docs_bytes], fsync=True)
    entry = {
        "name": name,
        "units": list(units),
        "tokens": tokens,
        "documents": len(doc_starts),
        "sha256": sha,
        "docs_sha256": docs_sha,
        "bytes": len(header) + tokens * dtype.itemsize,
        "docs_bytes": len(docs_bytes),
        "before_next": before_next,
        **(extra or {}),
    }
    _write_json(store, f"{WORK}/{name}.json", entry, fsync=True)
    return entry


def _remove_parts(store: Store, first: int, stop: int) -> None:
    """The parts of a written shard. The command removes them, not the worker that wrote the shard:
    a worker left running by a killed command must not pull parts from under the next run."""
    for i in range(first, stop):
        store.remove(f"{WORK}/{_part_name(i)}.ids")
        store.remove(f"{WORK}/{_part_name(i)}.json")


def _reusable_shard(store: Store, entry: dict | None, index: int, units: tuple[int, int]) -> bool:
    """Whether shard `index`'s files on disk match `entry` (its record or manifest entry)."""
    if entry is None or entry.get("name") != layout.shard_name(index) or entry.get("units") != list(units):
        return False
    before_next = entry.get("before_next")
    if not isinstance(before_next, dict) or set(before_next) != {"any_document", "last_id"}:
        return False
    name = entry["name"]
    return _matches(store, _ids_name(name), entry.get("bytes", -1), str(entry.get("sha256"))) and _matches(
        store, _docs_name(name), entry.get("docs_bytes", -1), str(entry.get("docs_sha256"))
    )


# --- the run ---------------------------------------------------------------------------------------------


def write_dataset(
    tokenizer,
    inputs,
    directory: str | os.PathLike,
    *,
    shard_size: int = DEFAULT_SHARD_SIZE,
    piece_size: int | None = None,
    num_workers: int = 1,
    executor: Executor | None = None,
    dtype: str | None = None,
    overwrite: bool = False,
    text_field: str = sources.DEFAULT_TEXT_FIELD,
    on_progress: Callable[[int], None] | None = None,
    engine: "str | engines.Choice" = "python",
) -> Written:
    """Encode the corpus `inputs` into the dataset directory `directory` (see the module docstring
    and `layout`), resuming what an earlier run of the same settings left there.

    `num_workers` local processes (1: this process) or `executor` do the work, with `engine`
    ("python", "tiktoken", "auto" or a `Choice` of `engines.choose`: the ids are the same).
    `on_progress(input_bytes_done)` counts reused work as done. Raises ValueError naming what
    changed when the directory was written with other settings (unless `overwrite`), `DatasetBusy`
    when another run holds it, and the OSError (naming the file) of a write that failed.
    """
    if type(shard_size) is not int or shard_size < 1:
        raise ValueError(f"shard_size must be a positive number of bytes, got {shard_size!r}")
    store = Store(directory)
    files = sources.resolve(inputs)
    check_output(store, inputs, files)
    engine = engines.choose(tokenizer, engine, input_bytes=sum(f.size for f in files))
    out_dtype = choose_dtype(max(tokenizer.vocab), dtype)
    piece_size = piece_size or piece_size_for(shard_size)
    units = sources.plan_units(files, piece_size=piece_size, special_tokens=tokenizer.cut_tokens,
                               text_field=text_field, pattern=tokenizer.pattern)
    shards = plan_shards(units, shard_size, out_dtype.itemsize)
    head = _head(tokenizer, files, units, out_dtype, shard_size, piece_size)
    _prepare(store)
    with locked(store.root) as lock_fd:
        try:
            previous, listed = _previous_head(store)
        except ValueError:
            if not overwrite:
                raise
            previous, listed = None, []
            _remove_dataset(store)
        if previous is not None and previous != head:
            if not overwrite:
                raise ValueError(f"{store} was written with other settings: {what_changed(previous, head)}; "
                                 "pass overwrite=True (--overwrite) to write it anew")
            _remove_dataset(store)
            listed = []
        _remove_leftovers(store)
        return _run(tokenizer, units, shards, head, listed, store, out_dtype, num_workers, executor,
                    on_progress, lock_fd, engine)


def _run(tokenizer, units, shards, head, listed, store: Store, dtype, num_workers, executor, on_progress, lock_fd,
         engine):
    total_bytes = sum(u.size for u in units)
    entries: dict[int, dict] = {}
    by_name = {e.get("name"): e for e in listed if isinstance(e, dict)}
    for k, units_range in enumerate(shards):
        name = layout.shard_name(k)
        entry = _read_json(store, f"{WORK}/{name}.json") or by_name.get(name)
        if _reusable_shard(store, entry, k, units_range):
            entries[k] = entry
    if len(entries) == len(shards) and store.size(layout.MANIFEST) is not None:
        store.remove_tree(WORK)  # left if a run stopped right after its manifest
        return _written(store, entries, shards, units, total_bytes, reused=set(entries), parts_bytes=0,
                        on_progress=on_progress)

    # Something is to be written: the directory stops being a finished dataset until the end.
    store.make_dirs(WORK)
    for entry in entries.values():
        if store.size(f"{WORK}/{entry['name']}.json") is None:
            _write_json(store, f"{WORK}/{entry['name']}.json", entry)
    _write_json(store, f"{WORK}/{PLAN}", head, fsync=True)
    store.remove(layout.MANIFEST)

    parts: dict[int, dict] = {}
    for k, (first, stop) in enumerate(shards):
        if k not in entries:
            for i in range(first, stop):
                record = _reusable_part(store, i, dtype.itemsize)
                if record is not None:
                    parts[i] = record
    todo = [i for k, (first, stop) in enumerate(shards) if k not in entries
            for i in range(first, stop) if i not in parts]
    separator_id = head["tokenizer"]["separator_id"]
    reused = set(entries)
    parts_bytes = sum(units[i].size for i in parts)

    def encode_here(i: int, unit: sources.WorkUnit) -> dict:
        return write_part(store, i, dtype, *encode_unit(tokenizer, unit, dtype.str, engine)[1:])

    work = ((i, units[i]) for i in todo)
    with on_workers(tokenizer, work, _encode_part, encode_here, store, dtype, num_workers, executor, lock_fd,
                    engine) as (results, assemble):
        pending: deque[tuple[int, Future]] = deque()
        any_document, last_id = False, None
        done = 0
        for k, (first, stop) in enumerate(shards):
            if k in entries:
                any_document = entries[k]["before_next"]["any_document"]
                last_id = entries[k]["before_next"]["last_id"]
                done += sum(u.size for u in units[first:stop])
                if on_progress:
                    on_progress(done)
                continue
            # The separators and the shard's first document start follow from the corpus before it.
            starts_document = last_id is None or last_id == separator_id
            layout_of_parts = []
            for i in range(first, stop):
                record = parts.get(i) or next(results)
                before = separator_id is not None and record["has_documents"] and units[i].new_document and any_document
                layout_of_parts.append((i, before))
                if before:
                    last_id = separator_id
                if record["tokens"]:
                    last_id = record["last_id"]
                any_document = any_document or record["has_documents"]
                done += units[i].size
                if on_progress:
                    on_progress(done)
            before_next = {"any_document": any_document, "last_id": last_id}
            pending.append((k, assemble(store.root, k, (first, stop), layout_of_parts, starts_document,
                                        dtype.str, separator_id, before_next)))
            while pending and pending[0][1].done():
                _collect(pending.popleft(), entries, shards, store)
        while pending:
            _collect(pending.popleft(), entries, shards, store)

    _remove_leftovers(store)  # also any that a worker of a killed run left while this one ran
    manifest = {**head, "shards": [entries[k] for k in range(len(shards))], "totals": _totals(entries)}
    _write_json(store, layout.MANIFEST, manifest, fsync=True)
    store.remove_tree(WORK)
    return _written(store, entries, shards, units, total_bytes, reused=reused, parts_bytes=parts_bytes,
                    on_progress=None)


@contextlib.contextmanager
def on_workers(tokenizer, work: Iterator[tuple[int, object]], encode_part: Callable, encode_here: Callable,
               store: Store, dtype: np.dtype, num_workers: int, executor: Executor | None, lock_fd: int | None,
               engine: "engines.Choice"):
    """(the parts' records of each `(i, item)` of `work`, in order, a few in flight; a function that
    submits a shard's assembly and returns its future). In this process with one worker and no
    executor (a record is `encode_here(i, item)`); else on `num_workers` local processes or on
    `executor` (a record is `encode_part(key, state, item, dtype, directory, i, engine)`)."""
    if executor is None and num_workers <= 1:
        def assemble_here(*args) -> Future:
            future: Future = Future()
            future.set_result(assemble_shard(*args))
            return future

        yield (encode_here(i, item) for i, item in work), assemble_here
        return
    with contextlib.ExitStack() as workers:
        if executor is None:
            # As `encode_files` does; the local workers' shared cache is local too: beside the
            # parts, or for a URL in /tmp. They got the tokenizer and the engine when they started.
            executor, key = workers.enter_context(token_arrays.local_workers(
                tokenizer, num_workers, engine, None if store.url else store.path(WORK),
                initializer=_init_worker, initargs=(lock_fd,)))
            state, engine = None, token_arrays._light(engine)
        else:
            key, state = tokenizer_state(tokenizer)
        args = ((key, state, item, dtype.str, store.root, i, engine) for i, item in work)
        width = executors.executor_width(executor, num_workers)
        results = executors.run_ordered(executor, encode_part, args, max_in_flight=2 * width)
        yield results, lambda *args: executor.submit(assemble_shard, *args)


def _collect(done: tuple[int, Future], entries: dict[int, dict], shards, store: Store) -> None:
    k, future = done
    entries[k] = executors._result(future, None)  # raises what failed, as run_ordered does
    _remove_parts(store, *shards[k])


def _totals(entries: dict[int, dict]) -> dict:
    return {
        "tokens": sum(e["tokens"] for e in entries.values()),
        "documents": sum(e["documents"] for e in entries.values()),
        "shards": len(entries),
    }


def _written(store: Store, entries, shards, units, total_bytes, *, reused, parts_bytes, on_progress) -> Written:
    reused_bytes = parts_bytes + sum(sum(u.size for u in units[slice(*shards[k])]) for k in reused)
    if on_progress:
        on_progress(total_bytes)
    totals = _totals(entries)
    return Written(store.root, totals["tokens"], totals["documents"], totals["shards"], total_bytes,
                   len(reused), reused_bytes)
