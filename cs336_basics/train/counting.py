"""Counting the pre-tokens of a corpus, in work units run in parallel (see `sources`, `executors`).

A work unit's text is cut into documents at special tokens (and at record boundaries), documents
into chunks, and the chunks counted; the distinct chunks are then pre-tokenized once each (see
`pretokenize`). On another executor each task of units is counted on its own; local processes
take tasks as they go (see `_claim`) and count all of theirs into one table. Units are pieces of
files cut where no pre-token changes, so the total is the same however the corpus is cut, split
into files, or spread over workers; workers send back counts, never text.

Memory: a worker holds one block of text at a time, with its chunks, the counts of the distinct
chunks it has seen (up to `CHUNK_LIMIT` of them, see `_Counts`), and pre-token counts. It sends its
pre-token counts back packed (see `pack_counts`): a few bytes per pre-token instead of a dict of
Python objects, so that the tables waiting in the parent stay small, and in the UTF-8 the merge
loop wants.
"""

import queue
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from functools import partial
from itertools import islice

from cs336_basics.corpora import executors, sources
from cs336_basics.errors import WorkerError
from cs336_basics.text import patterns
from cs336_basics.text.pretokenize import count_chunks, pretoken_counts, special_token_regex
from cs336_basics.text.surrogates import fix_surrogates
from cs336_basics.train import allocator

_progress = None  # a shared counter of bytes read, set in each local worker process
_claims = None  # the tasks left to local processes (see `_claim`), set in each local worker process

# Bytes of text counted at a time. All the chunks of a block are alive at once, and each is a str
# of about 60 bytes for 10 bytes of text, so a block of 4 MiB costs a worker some 35 MiB more
# (through freed memory the allocator keeps) than one of 256 KiB, for no gain in speed.
COUNT_BLOCK_SIZE = 1 << 18

# Separates the pre-tokens of a packed table: the byte 0xFF never occurs in UTF-8.
_SEPARATOR = b"\xff"

PackedCounts = tuple[bytes, array]


def _init_worker(progress, claims=None) -> None:
    global _progress, _claims
    _progress, _claims = progress, claims


def count_units(
    units: Sequence[sources.WorkUnit],
    block_size: int = COUNT_BLOCK_SIZE,
    on_read: Callable[[int], None] | None = None,
) -> tuple[int, dict[str, int]]:
    """(bytes read, pre-token counts) of some work units; `on_read(n)` is called as each block
    of n bytes is read."""
    counts = _Counts(_pretokenizer_of(units))
    size = _count_chunks_of(units, counts, block_size, on_read)
    return size, counts.total()


# The most distinct chunks a process holds (some 110 MB of them) before it turns them into pre-tokens
# and starts a new table. Prose repeats its chunks (the 1 GB corpus holds 572 k), so this is seldom
# reached; 512 MB of source code holds 5-6 M, most seen once, and there this halves the memory and
# saves time too (a smaller table is faster to add to).
CHUNK_LIMIT = 1 << 20


class _Counts:
    """The counts of a process's chunks, turned into pre-token counts whenever more than `limit`
    distinct chunks are held, and at the end (see `total`). A chunk seen again after that
    is pre-tokenized again: if most chunks were seen more than once (text that repeats them), the
    limit doubles, so that such chunks are not pre-tokenized over and over."""

    def __init__(self, pretokenizer: patterns.Pretokenizer, limit: int | None = None):
        self.pretokenizer = pretokenizer
        # Without a safe boundary the chunks are pre-tokens already: nothing to gain.
        self.limit = (CHUNK_LIMIT if limit is None else limit) if pretokenizer.boundary else None
        self.chunks: Counter[str] = Counter()
        self.pretokens: dict[str, int] = {}

    def add(self, text: str, special_re) -> None:
        count_chunks(text, special_re, self.chunks, self.pretokenizer)
        if self.limit is not None and len(self.chunks) > self.limit:
            if list(self.chunks.values()).count(1) * 2 < len(self.chunks):
                self.limit *= 2
            self._turn_into_pretokens()

    def _turn_into_pretokens(self) -> None:
        pretoken_counts(self.chunks, self.pretokenizer, into=self.pretokens)  # empties self.chunks

    def total(self) -> dict[str, int]:
        """The pre-token counts of everything added (the table of chunks is emptied)."""
        self._turn_into_pretokens()
        return self.pretokens


def _count_chunks_of(
    units: Sequence[sources.WorkUnit],
    counts: _Counts,
    block_size: int,
    on_read: Callable[[int], None] | None,
) -> int:
    """Add the chunks of some work units to `counts`; return the bytes read."""
    size = 0
    for unit in units:
        special_re = special_token_regex(unit.special_tokens)
        for consumed, text, _ in sources.read_unit(unit, block_size=block_size):
            counts.add(text, special_re)
            if on_read is not None and consumed:
                on_read(consumed)
        size += unit.size
    return size


def _pretokenizer_of(units: Sequence[sources.WorkUnit]) -> patterns.Pretokenizer:
    return patterns.get(units[0].pattern) if units else patterns.get("gpt2")


def count_claimed(
    tasks: Sequence[Sequence[sources.WorkUnit]],
    region: int,
    block_size: int,
    claims,
    on_read: Callable[[int], None] | None = None,
) -> tuple[int, dict[str, int]]:
    """(bytes read, pre-token counts) of the tasks this process claims (see `_claim`), starting
    with those of `region`, all counted together (see `_Counts`)."""
    counts = _Counts(_pretokenizer_of(tasks[0] if tasks else ()))
    size = 0
    while (i := _claim(claims, region)) is not None:
        size += _count_chunks_of(tasks[i], counts, block_size, on_read)
    return size, counts.total()


def count_claimed_packed(
    tasks: Sequence[Sequence[sources.WorkUnit]], region: int, block_size: int = COUNT_BLOCK_SIZE
) -> tuple[int, PackedCounts]:
    """`count_claimed` in a local worker: (bytes read, packed pre-token counts)."""
    on_read = partial(_add_to, _progress) if _progress is not None else None
    size, counts = count_claimed(tasks, region, block_size, _claims, on_read)
    return size, pack_counts(counts)


def _regions(num_tasks: int, num_processes: int) -> list[int]:
    """The tasks cut into `num_processes` stretches, as [start, end, start, end, ...] (see `_claim`)."""
    bounds = [num_tasks * r // num_processes for r in range(num_processes + 1)]
    return [x for r in range(num_processes) for x in (bounds[r], bounds[r + 1])]


def _claim(claims, region: int) -> int | None:
    """Take a task: the next of `region`'s stretch, or once that is done, the last of the stretch
    with the most left; None when every task is taken. `claims` is a shared array made by
    `_regions`.

    Each process so reads one stretch of the corpus from its start, and they meet where their
    work, not their bytes, comes out even: parts of a corpus differ in how fast they count (source
    code has many more distinct chunks than prose), and one process may be slowed by others on
    the machine. Stretches, not tasks dealt in turn, so that each process meets fewer distinct
    chunks: its table of them is smaller, and so is the work of turning them into pre-tokens."""
    with claims.get_lock():
        if claims[2 * region] < claims[2 * region + 1]:
            claims[2 * region] += 1
            return claims[2 * region] - 1
        left = [claims[2 * r + 1] - claims[2 * r] for r in range(len(claims) // 2)]
        most = max(range(len(left)), key=left.__getitem__)
        if left[most] <= 0:
            return None
        claims[2 * most + 1] -= 1
        return claims[2 * most + 1]


def count_units_packed(units: Sequence[sources.WorkUnit], block_size: int = COUNT_BLOCK_SIZE) -> tuple[int, PackedCounts]:
    """(bytes read, packed pre-token counts) of some work units; this runs in a worker."""
    size, counts = count_units(units, block_size, partial(_add_to, _progress) if _progress is not None else None)
    return size, pack_counts(counts)


def _add_to(progress, n: int) -> None:
    """Add n bytes read to a counter shared between processes."""
    with progress.get_lock():
        progress.value += n


def pack_counts(counts: dict[str, int]) -> PackedCounts:
    """Pre-token counts as (the pre-tokens in UTF-8, each followed by 0xFF; their counts as an array).

    A table of 300 k pre-tokens packs into about 5 MB; as a dict it is some 30 MB of objects, which
    a parent waiting on several workers would hold at once. The keys are encoded a slice at a
    time: a list of all of them at once would cost a worker some 15 MB more at its peak.
    """
    words = iter(counts)
    slices = []
    while part := [word.encode("utf-8") for word in islice(words, _PACK_SLICE)]:
        slices.append(_SEPARATOR.join(part))
    slices.append(b"")  # so that the last pre-token is followed by a separator too
    return _SEPARATOR.join(slices) if counts else b"", array("q", counts.values())


# Pre-tokens encoded at a time by `pack_counts`.
_PACK_SLICE = 1 << 12


def sorted_counts(counts: dict[str, int]) -> tuple[list[bytes], list[int]]:
    """Pre-token counts as (the pre-tokens in UTF-8, sorted; their counts): what a count table's
    shard holds (see `counts.table`), the same however the counts were gathered. Sorting the str
    sorts the bytes: UTF-8 keeps the order of code points, and counted text holds no surrogates."""
    words = sorted(counts)
    return [w.encode("utf-8") for w in words], [counts[w] for w in words]


def add_packed(total: dict[bytes, int], packed: PackedCounts) -> None:
    """Add packed counts (see `pack_counts`) to `total`, whose keys are the pre-tokens in UTF-8."""
    keys, counts = packed
    words = keys.split(_SEPARATOR)
    words.pop()  # the empty piece after the last separator
    if len(words) != len(counts):
        raise ValueError(f"packed counts hold {len(words)} pre-tokens but {len(counts)} counts")
    if not total:
        total.update(zip(words, counts))
        return
    get = total.get
    for word, n in zip(words, counts):
        total[word] = get(word, 0) + n


def bundle(units: Sequence[sources.WorkUnit], target: int) -> list[tuple[sources.WorkUnit, ...]]:
    """Consecutive units grouped into tasks of at least `target` bytes (the last may be smaller), so
    that a folder of many small files does not send back one table of counts per file."""
    tasks: list[tuple[sources.WorkUnit, ...]] = []
    group: list[sources.WorkUnit] = []
    size = 0
    for unit in units:
        group.append(unit)
        size += unit.size
        if size >= target:
            tasks.append(tuple(group))
            group, size = [], 0
    if group:
        tasks.append(tuple(group))
    return tasks


def count_pretokens(
    units: Sequence[sources.WorkUnit],
    *,
    num_workers: int,
    executor: Executor | None = None,
    task_size: int,
    block_size: int = COUNT_BLOCK_SIZE,
    on_progress: Callable[[int], None] | None = None,
) -> dict[bytes, int]:
    """Count the pre-tokens of the work units, in `num_workers` local processes (this one and
    `num_workers - 1` forked workers), or on `executor`; the keys are the pre-tokens in UTF-8.

    Units are sent in tasks of at least `task_size` bytes (see `bundle`); use the size the units
    were planned with, so that small files are grouped and large ones stay apart.

    Memory grows with the number of distinct chunks, not with the corpus. `on_progress(bytes_done)`
    is called from time to time.
    """
    tasks = bundle(units, task_size)
    total: dict[bytes, int] = {}
    done = 0
    # The tables this process frees while counting and adding up go back to the system at once,
    # instead of staying in its heap, in pieces, through the merge loop (see `allocator`).
    allocator.return_large_blocks_at_once()
    if executor is None and (num_workers <= 1 or len(tasks) <= 1):
        # One table for every task, as each worker keeps: a chunk seen in several tasks is
        # pre-tokenized once (on 256 MB of the prose corpus, 0.6x the time of a table per task).
        counts = _Counts(_pretokenizer_of(units))
        for task in tasks:
            done += _count_chunks_of(task, counts, block_size, None)
            if on_progress:
                on_progress(done)
        add_packed(total, pack_counts(counts.total()))
        del counts
        allocator.release_freed_memory()
        return total

    progress = None
    claims = None
    if executor is None:
        # This process counts too, beside num_workers - 1 forked workers, rather than wait idle:
        # one process fewer holds a table of chunks at once. Each process takes tasks as it goes
        # (see `_claim`), so that all finish together however the corpus varies.
        processes = min(num_workers, len(tasks))
        # Imports leave freed memory in the heap (some 3 MB once this package is imported): give
        # it back before forking, so that no worker starts with it.
        allocator.release_freed_memory()
        ctx = executors.process_context()
        progress = ctx.Value("q", 0)
        claims = ctx.Array("q", _regions(len(tasks), processes))
        pool = executors.local_pool(processes - 1, initializer=_init_worker, initargs=(progress, claims))
        calls = ((tasks, region, block_size) for region in range(1, processes))
        count = count_claimed_packed
    else:
        pool = executors.own_pool(executor, num_workers)
        calls = ((task, block_size) for task in tasks)
        count = count_units_packed

    def report() -> None:
        if on_progress:
            on_progress(max(done, progress.value if progress is not None else 0))

    def read_here(n: int) -> None:
        _add_to(progress, n)
        report()

    # The packed tables are kept as they come and added up only once the workers are gone: the dict
    # they add up to is some 7 times their size, and the workers are at their largest meanwhile.
    pending: list[PackedCounts] = []
    pending_bytes = 0
    with pool as executor:
        width = executors.executor_width(executor, num_workers)
        results = executors.run_ordered(executor, count, calls, max_in_flight=2 * width, on_wait=report)
        if claims is not None:  # while the workers count theirs
            size, counts = count_claimed(tasks, 0, block_size, claims, read_here)
            pending.append(pack_counts(counts))
            del counts
            pending_bytes += _packed_bytes(pending[-1])
            done += size
        for size, packed in results:
            pending.append(packed)
            pending_bytes += _packed_bytes(packed)
            del packed
            if pending_bytes > _PENDING_LIMIT:  # many tasks: add up as we go
                _add_all(total, pending)
                pending_bytes = 0
            done += size
            report()
    _add_all(total, pending)
    allocator.release_freed_memory()
    return total


# The most bytes of packed tables held before they are added up while the workers still run.
_PENDING_LIMIT = 64 << 20


def _packed_bytes(packed: PackedCounts) -> int:
    return len(packed[0]) + packed[1].itemsize * len(packed[1])


def _add_all(total: dict[bytes, int], pending: list[PackedCounts]) -> None:
    """Add the packed tables to `total`, emptying `pending` and freeing each once added."""
    pending.reverse()
    while pending:
        add_packed(total, pending.pop())


def default_piece_size(total_bytes: int, num_workers: int, *, local: bool) -> int:
    """Bytes per training work unit.

    Local processes count all the units they take into one table (see `count_claimed`), so units
    can be small: 8 per process (at least 1 MiB, at most 1 GiB), for the processes to finish
    together. Other executors turn each unit's distinct chunks into pre-tokens, which costs about
    as much as counting a few tens of MB (with 572 k distinct chunks, 1.3 s), so units are kept
    large there: 4 per worker, at least 1 MiB."""
    per_worker = -(-total_bytes // max(num_workers, 1))
    if local:
        return min(max(per_worker // 8, 1 << 20), 1 << 30, max(per_worker, 1))
    return max(min(per_worker // 4, 1 << 30), 1 << 20)



# From this many pre-tokens on, `byte_counts` counts bytes with NumPy (some 3x faster: 4.5 s for
# 32 M web-like pre-tokens, where `Counter` took 14.5): there the merge loop of up to 2 shards loads
# it anyway (`merge.ALL_LONG_WORDS`), and below it the command's processes stay without it.
NUMPY_WORDS = 1 << 20


def byte_counts(word_counts: dict[bytes, int]) -> list[int]:
    """How often each byte value occurs in the corpus that these pre-token counts describe (each
    pre-token's bytes weighed by its count): the start from which the merge log gives every
    token's final count (see `merge_log.token_occurrences`). Exact, in Python ints.

    Pure Python below `NUMPY_WORDS` pre-tokens: `bpe train` computes this before the merge loop,
    and importing NumPy would cost that process some 15 MB through the loop. The pre-tokens of a
    batch that share a count are joined and counted at once (most rare words share a count of 1 or
    2); a pre-token alone with its count, byte by byte."""
    count_bytes = _byte_values
    if len(word_counts) >= NUMPY_WORDS:
        import numpy as np

        def count_bytes(data: bytes) -> Iterable[tuple[int, int]]:
            return enumerate(np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256).tolist())

    totals = [0] * 256
    items = iter(word_counts.items())
    while batch := list(islice(items, 1 << 16)):  # a batch at a time keeps the joined bytes small
        by_count: dict[int, list[bytes]] = defaultdict(list)
        for word, n in batch:
            by_count[n].append(word)
        for n, words in by_count.items():
            if len(words) == 1:
                for b in words[0]:
                    totals[b] += n
            else:
                for b, times in count_bytes(b"".join(words)):
                    totals[b] += times * n
    return totals


def _byte_values(data: bytes) -> Iterable[tuple[int, int]]:
    """(byte value, how often it occurs in `data`) for each value that does."""
    return Counter(data).items()


# --- documents from a Python iterable ------------------------------------------------------------------

# Characters of documents handed to a worker at once, and batches in flight per worker: the parent
# holds at most that many documents, however long the stream.
DOCUMENT_BATCH_CHARS = 1 << 20
_BATCHES_PER_WORKER = 2


def document_batches(
    documents: Iterable, batch_chars: int, text_field: str = "text"
) -> Iterator[list[str]]:
    """The documents in lists of about `batch_chars` characters (surrogates are fixed where they
    are counted, see `_add_documents`). A document is a str, or a mapping (a row of a `datasets`
    dataset, say) whose `text_field` holds one; anything else is a TypeError naming the
    document's position."""
    batch: list[str] = []
    size = 0
    for i, document in enumerate(documents):
        if type(document) is not str:  # the process that reads the documents does as little as it can
            document = sources.document_text(document, i, text_field, fixed=False)
        batch.append(document)
        size += len(document)
        if size >= batch_chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _add_documents(counts: _Counts, batch: list[str], special_re, separator: str | None) -> None:
    """Count a batch of documents: joined by a special token (which `count_chunks` cuts at again)
    when there is one, else one by one; surrogates fixed (the separator, ASCII, keeps a surrogate
    of one document from pairing with one of the next)."""
    if separator is not None:
        counts.add(fix_surrogates(separator.join(batch)), special_re)
    else:
        for document in batch:
            counts.add(fix_surrogates(document), special_re)


def count_documents(
    documents: Iterable,
    *,
    special_tokens: Sequence[str],
    pattern: str,
    num_workers: int,
    text_field: str = "text",
    batch_chars: int | None = None,
) -> dict[bytes, int]:
    """The pre-token counts (keys in UTF-8) of documents from any iterable, each a document of its
    own (also cut at the special tokens it holds), as the counts of a `.txt` of them joined by the
    first special token.

    This process reads the iterable and hands batches of documents to `num_workers - 1` forked
    processes through a queue bounded at a few batches per worker, so memory stays flat on an
    endless stream; when the queue is full, it counts the batch itself. Each process counts all
    its batches into one table; the workers send theirs back packed at the end.
    """
    pretokenizer = patterns.get(pattern)
    special_re = special_token_regex(special_tokens)
    separator = special_tokens[0] if special_tokens else None
    batches = document_batches(documents, batch_chars or DOCUMENT_BATCH_CHARS, text_field)
    total: dict[bytes, int] = {}
    allocator.return_large_blocks_at_once()
    if num_workers <= 1:
        counts = _Counts(pretokenizer)
        for batch in batches:
            _add_documents(counts, batch, special_re, separator)
        add_packed(total, pack_counts(counts.total()))
        allocator.release_freed_memory()
        return total

    ctx = executors.process_context()
    tasks = ctx.Queue(maxsize=_BATCHES_PER_WORKER * (num_workers - 1))
    results = ctx.Queue()
    allocator.release_freed_memory()
    workers = executors.start_processes(_count_queued, (tasks, results, pattern, list(special_tokens)),
                                        num_workers - 1)
    # This process counts too, whenever the workers have all the batches they can hold: one
    # process fewer holds a table (as for files), and none waits while another has work.
    own = _Counts(pretokenizer)
    pending: list[PackedCounts] = []
    try:
        for batch in batches:
            try:
                tasks.put_nowait(batch)
            except queue.Full:
                _add_documents(own, batch, special_re, separator)
            del batch
        for _ in workers:
            _put(tasks, None, workers, results)
        pending.append(pack_counts(own.total()))
        del own
        while len(pending) < len(workers) + 1:
            pending.append(_get(results, workers))
        for worker in workers:
            worker.join()
    except BaseException:
        executors.stop_processes(workers)
        raise
    finally:
        tasks.cancel_join_thread()  # batches no worker will read must not hold up the exit
    _add_all(total, pending)
    allocator.release_freed_memory()
    return total


def _count_queued(tasks, results, pattern: str, special_tokens: list[str]) -> None:
    """In a worker: count batches from `tasks` until None comes, then put the packed counts (or
    the error that stopped it) on `results`."""
    try:
        counts = _Counts(patterns.get(pattern))
        special_re = special_token_regex(special_tokens)
        separator = special_tokens[0] if special_tokens else None
        while (batch := tasks.get()) is not None:
            _add_documents(counts, batch, special_re, separator)
            del batch
        packed = pack_counts(counts.total())
        del counts
        results.put(("counts", packed))
    except Exception as e:  # sent as its type's name and message: any exception pickles that way
        results.put(("error", type(e).__name__, str(e)))


_ERRORS = {"ValueError": ValueError, "TypeError": TypeError, "MemoryError": MemoryError}


def _get(results, workers) -> PackedCounts:
    """The next packed table from the workers; their error, raised here; WorkerError if one died."""
    while True:
        try:
            message = results.get(timeout=0.1)
        except queue.Empty:
            if any(w.exitcode not in (None, 0) for w in workers):
                raise executors.worker_died(during=" while counting", kept="nothing was learned") from None
            if not all(w.exitcode == 0 for w in workers):
                continue
            try:  # every worker is gone: what they put may still be on its way
                message = results.get(timeout=5)
            except queue.Empty:
                raise WorkerError("the workers ended without sending their counts") from None
        if message[0] == "error":
            raise _ERRORS.get(message[1], RuntimeError)(message[2])
        return message[1]


def _put(tasks, item, workers, results) -> None:
    """Put `item` on the task queue, waiting while it is full; a worker that stopped on an error
    raises that error here, and one that died, WorkerError."""
    while True:
        try:
            tasks.put(item, timeout=0.1)
            return
        except queue.Full:
            if any(w.exitcode is not None for w in workers):
                _get(results, workers)  # raises the error the worker sent, or WorkerError
