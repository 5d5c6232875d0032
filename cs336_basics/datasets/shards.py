"""The shards of a dataset directory, made on the workers: the run both writers share (`write_shards`:
the directory marked unfinished, work encoded into parts, parts joined into shards in order, the
manifest written), and the functions the workers run (`encode_file_part`, `encode_documents_part`,
`assemble_shard`, `init_worker`). See `writer` for the plan, the separators and resuming.
"""

import contextlib
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future

import numpy as np

from cs336_basics.corpora import executors, sources
from cs336_basics.datasets import layout
from cs336_basics.datasets.directory import DatasetDirectory, docs_name, ids_name, part_name
from cs336_basics.datasets.shard_folder import WORK
from cs336_basics.encode import engines, token_arrays
from cs336_basics.encode.protocol import TokenizerLike
from cs336_basics.encode.token_arrays import tokenizer_state
from cs336_basics.formats.npy import npy_header

# --- in the workers --------------------------------------------------------------------------------------


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(1)


def init_worker(lock_fd: int | None, key: str, state: tuple, share_folder: str, engine=None) -> None:
    """In a local worker, at its start: see `token_arrays.init_worker`; besides, it ignores Ctrl-C,
    ends itself when the command is gone, and lets go of the directory's lock."""
    # Ctrl-C reaches the whole process group: the command stops the workers itself, so that they
    # neither print tracebacks nor start on their next unit.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A worker whose command was killed would wait for work forever (its siblings keep the task
    # queue open): it ends itself instead, and the next run removes what it left half-written.
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    if lock_fd is not None:
        os.close(lock_fd)  # a forked worker that outlives the command must not keep the directory locked
    token_arrays.init_worker(key, state, share_folder, engine)


def encode_file_part(key: str, state: tuple | None, unit: sources.WorkUnit, dtype: str, directory: str, index: int,
                     engine: "engines.Choice | None" = None) -> dict:
    """In a worker: encode one work unit and write its part (see `DatasetDirectory.write_part`)."""
    _, has_documents, data = token_arrays.encode_unit_in_worker(key, state, unit, dtype, engine)
    return DatasetDirectory(directory).write_part(index, np.dtype(dtype), has_documents, data)


def encode_documents_part(key: str, state: tuple | None, documents: list[str], dtype: str, directory: str,
                          index: int, engine: "engines.Choice | None" = None) -> dict:
    """In a worker: encode a batch of documents and write its part (see `DatasetDirectory.write_part`)."""
    data = token_arrays.encode_documents_in_worker(key, state, documents, dtype, engine)
    return DatasetDirectory(directory).write_part(index, np.dtype(dtype), True, data)


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
    separator_after: bool = False,
) -> dict:
    """In a worker: join the parts (unit index, separator before it?) into shard `index`, write its
    ids and document starts into place, then its record; return the record (a manifest entry,
    with the keys of `extra` last). `separator_after`: a separator ends the shard (the corpus's
    last, with `append_separator`).

    `starts_document` says whether the shard's first id starts a document (it is the corpus's
    first, or the id before it is the separator)."""
    target = DatasetDirectory(directory)
    store = target.store
    dtype = np.dtype(dtype)
    name = layout.shard_name(index)
    separator = np.array([] if separator_id is None else [separator_id], dtype=dtype)
    part_names = {i: f"{part_name(i)}.ids" for i, _ in parts}
    sizes = []
    for i, _ in parts:
        size = store.size(part_names[i])
        if size is None:
            raise FileNotFoundError(2, "a part of the shard has gone (did another run remove it?)",
                                    store.path(part_names[i]))
        sizes.append(size // dtype.itemsize)
    tokens = sum(sizes) + len(separator) * (sum(before for _, before in parts) + separator_after)
    header = npy_header(dtype, tokens)
    starts: list[np.ndarray] = []
    position = 0
    after_separator = starts_document

    def chunks():
        nonlocal position, after_separator
        yield header
        for i, separator_before in [*parts, (None, separator_after)]:
            pieces = [separator] if separator_before else []
            if i is not None:
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

    sha = store.write(ids_name(name), chunks(), fsync=True)
    doc_starts = np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64)
    docs_bytes = npy_header(np.dtype(np.int64), len(doc_starts)) + doc_starts.tobytes()
    docs_sha = store.write(docs_name(name), [docs_bytes], fsync=True)
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
    target.write_record(index, entry, fsync=True)
    return entry


# --- in the command ----------------------------------------------------------------------------------------


class Shards:
    """Shards being assembled, in order: the parts `add`ed since the last `close` make up the next
    shard. The separators between parts and whether a shard starts with a document follow from the
    corpus before them (see `writer`), carried from shard to shard here. Each shard's record comes
    back into `entries` (by index; the kept shards' are there from the start)."""

    def __init__(self, directory: DatasetDirectory, dtype: np.dtype, separator_id: int | None, assemble: Callable,
                 entries: dict[int, dict]):
        self.directory, self.dtype, self.separator_id, self.assemble = directory, dtype, separator_id, assemble
        self.entries = entries
        self.any_document, self.last_id = False, None
        self.parts: list[tuple[int, bool]] = []
        self.starts_document = True
        self.pending: deque[tuple[int, tuple[int, int], Future]] = deque()

    def after(self, entry: dict) -> None:
        """Go on after a kept shard (its manifest entry)."""
        self.any_document = entry["before_next"]["any_document"]
        self.last_id = entry["before_next"]["last_id"]

    def add(self, i: int, record: dict, new_document: bool) -> None:
        """Part `i` (its record) comes next; `new_document`: its first document is a new one."""
        if not self.parts:
            self.starts_document = self.last_id is None or self.last_id == self.separator_id
        before = (self.separator_id is not None and record["has_documents"] and new_document
                  and self.any_document)
        self.parts.append((i, before))
        if before:
            self.last_id = self.separator_id
        if record["tokens"]:
            self.last_id = record["last_id"]
        self.any_document = self.any_document or record["has_documents"]
        self.collect(wait=False)

    def close(self, k: int, units: tuple[int, int], extra: dict | None = None, *, last: bool = False,
              append_separator: bool = False) -> None:
        """Have the parts added since the last close assembled into shard `k`, of `units`; the last
        shard ends with a separator with `append_separator` unless the corpus ends with one."""
        end = last and append_separator and self.separator_id is not None and self.last_id not in (
            None, self.separator_id)
        if end:
            self.last_id = self.separator_id
        before_next = {"any_document": self.any_document, "last_id": self.last_id}
        future = self.assemble(self.directory.root, k, units, self.parts, self.starts_document, self.dtype.str,
                               self.separator_id, before_next, extra, end)
        self.pending.append((k, units, future))
        self.parts = []
        self.collect(wait=False)

    def collect(self, *, wait: bool) -> None:
        """Take in the records of the shards assembled (all of them, waiting, with `wait`) and remove
        their parts; a worker's error is raised here."""
        while self.pending and (wait or self.pending[0][2].done()):
            k, (first, stop), future = self.pending.popleft()
            self.entries[k] = executors.result_of(future)  # raises what failed, as run_ordered does
            self.directory.remove_parts(first, stop)


@contextlib.contextmanager
def on_workers(tokenizer: TokenizerLike, work: Iterator[tuple[int, object]], encode_part: Callable, encode_here: Callable,
               directory: DatasetDirectory, dtype: np.dtype, num_workers: int, executor: Executor | None,
               lock_fd: int | None, engine: "engines.Choice"):
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
                tokenizer, num_workers, engine, None if directory.store.url else directory.path(WORK),
                initializer=init_worker, initargs=(lock_fd,)))
            state, engine = None, token_arrays.light_choice(engine)
        else:
            key, state = tokenizer_state(tokenizer)
        args = ((key, state, item, dtype.str, directory.root, i, engine) for i, item in work)
        width = executors.executor_width(executor, num_workers)
        results = executors.run_ordered(executor, encode_part, args, max_in_flight=2 * width)
        yield results, lambda *args: executor.submit(assemble_shard, *args)


def write_shards(
    directory: DatasetDirectory,
    head: dict,
    entries: dict[int, dict],
    work: Iterable[tuple[int, object]],
    feed: Callable[[Iterator[dict], Shards], None],
    *,
    tokenizer,
    encode_part: Callable,
    encode_here: Callable,
    dtype: np.dtype,
    num_workers: int,
    executor: Executor | None,
    lock_fd: int | None,
    engine: "engines.Choice",
) -> list[dict]:
    """The run both writers share, once they know which shards they keep (`entries`, by index):
    the directory is marked unfinished, the parts of `work` are encoded on the workers (see
    `on_workers`) and `feed(records, shards)` adds each part's record to `shards` and closes the
    shards; every shard's record is collected, then the manifest written. Returns the shards'
    entries in order."""
    directory.begin(entries, head)
    with on_workers(tokenizer, iter(work), encode_part, encode_here, directory, dtype, num_workers, executor,
                    lock_fd, engine) as (results, assemble):
        shards = Shards(directory, dtype, head["tokenizer"]["separator_id"], assemble, entries)
        feed(results, shards)
        shards.collect(wait=True)
    ordered = [entries[k] for k in range(len(entries))]
    directory.finish(head, ordered)
    return ordered
