"""Counting a corpus into a count table (see `table`), resumable after any stop.

The corpus is planned into work units (`sources.plan_units`) and the units grouped into tasks
(`counting.bundle`); each task is one shard, counted and written by the worker that runs it
(`count_shard`: local processes, or any executor, e.g. Dask, whose workers see the folder), which
then writes the shard's record into `.work/`. A shard's content depends only on its task, so the
table is the same however many workers count it, and a run stopped anywhere (Ctrl-C, SIGTERM,
SIGKILL, a dead machine) is finished by running it again: shards whose file has the size and
sha256 of their record (or manifest entry) are kept, the rest counted again, and the manifest,
written last, makes the table.

The folder's life (its lock, what it may hold, the plan and records in `.work/`, what is kept, the
manifest) is a shard folder's, as a token dataset's is: see `datasets.shard_folder`.
"""

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from cs336_basics.corpora import executors, sources
from cs336_basics.counts import table
from cs336_basics.datasets import shard_folder
from cs336_basics.datasets.shard_folder import Kind, ShardFolder
from cs336_basics.text import patterns
from cs336_basics.text.pretokenize import validate_special_tokens
from cs336_basics.train import counting

# A count table's largest piece (see `shard_folder.default_piece_size`): its pieces are its shards.
LARGEST_PIECE = 1 << 30
# The smallest piece one may ask for: each piece is a shard, a Parquet file of some 800 bytes
# however little it holds, so a smaller one makes a table larger than its text (and -1 or 1 makes a
# shard for every byte). The default is never below `shard_folder.MIN_PIECE_SIZE` (1 MiB).
MIN_PIECE_SIZE = 1 << 10


def _shard_files(entry: dict) -> list[tuple[str, object, object]]:
    """A count shard's one file, with the size and sha256 its entry gives."""
    return [(str(entry.get("name")), entry.get("bytes", -1), str(entry.get("sha256")))]


COUNT_TABLE = Kind(noun="count table", format=table.FORMAT, version=table.VERSION, shard_endings=(".parquet",),
                   read_manifest=table.read_manifest, shard_files=_shard_files, total_keys=table.TOTAL_KEYS)


@dataclass(frozen=True)
class Counted:
    """What `count_corpus` did: the table's totals, and how much an earlier run had made."""

    directory: str
    shards: int
    reused_shards: int
    input_bytes: int
    occurrences: int
    rows: int


def default_piece_size(total_bytes: int, num_workers: int) -> int:
    """Bytes per shard by the rule all shard folders share (`shard_folder.default_piece_size`): one
    shard per worker, at least 1 MiB and at most `LARGEST_PIECE` (1 GiB). Each shard's counts are
    made on their own (a worker turns its chunks into pre-tokens once per shard, and sorts them), so
    fewer, larger shards count faster: on 128 MB of web-like text, counting it as two shards took
    1.17x the CPU time of one, as four 1.47x. More shards lose less to a stop; past 2 GiB for two
    workers the cap gives more shards anyway."""
    return shard_folder.default_piece_size(total_bytes, num_workers, LARGEST_PIECE)


def count_shard(units: Sequence[sources.WorkUnit], folder: str, index: int) -> dict:
    """In a worker: count the units, write shard `index` and then its record; return the record."""
    size, counts = counting.count_units(units)
    words, values = counting.sorted_counts(counts)
    del counts
    record = table.write_shard(Path(folder), table.shard_name(index), words, values)
    record["input_bytes"] = size
    ShardFolder(folder, COUNT_TABLE).write_record(index, record)
    return record


def _reusable(target: ShardFolder, index: int, entry: dict | None) -> dict | None:
    """`entry` (shard `index`'s record or manifest entry) when the shard on disk matches it, else None."""
    if entry is None or entry.get("name") != table.shard_name(index) or not isinstance(entry.get("input_bytes"), int):
        return None
    return entry if target.intact(entry) else None


def count_corpus(
    inputs, directory: "str | os.PathLike", *, special_tokens: list[str], pattern: str = "gpt2",
    num_workers: int = 1, executor: Executor | None = None, piece_size: int | None = None,
    text_field: str = "text", overwrite: bool = False, on_progress: Callable[[int], None] | None = None,
    files: Sequence[sources.Source] | None = None, min_pretoken_count: int = 1,
) -> Counted:
    """Count the pre-tokens of a corpus into the count table `directory` (see the module docstring).

    Run again after a stop it counts only what is missing; a folder holding a table of other
    settings (inputs, pattern, special tokens, piece size) is refused, naming what changed, unless
    `overwrite`. `piece_size` (bytes per shard, at least `MIN_PIECE_SIZE`) defaults to that of the
    unfinished table being resumed, else `default_piece_size`. `on_progress(bytes_done)` is called
    as shards finish. `files`: `sources.resolve(inputs, outside=[directory])`, when the caller has
    it already. The table's folder is never read as input, and an input in it is refused.
    `min_pretoken_count` N > 1 is recorded in the manifest: training from the table drops the
    pre-tokens counted fewer than N times in all (the shards keep every count, so tables add up).
    """
    if piece_size is not None:
        if isinstance(piece_size, bool) or not isinstance(piece_size, int):
            raise TypeError(f"piece_size must be a whole number of bytes or None, got {piece_size!r}")
        if piece_size < MIN_PIECE_SIZE:
            raise ValueError(f"a piece size of {piece_size} bytes is below the floor: a count table's pieces are at "
                             f"least {MIN_PIECE_SIZE} bytes (1 KiB; each is a shard, a Parquet file of some 800 bytes "
                             "however little it holds); leave it out for the default")
    special_tokens = validate_special_tokens(special_tokens)
    pattern = patterns.canonical(pattern)
    files = sources.resolve(inputs, outside=[directory]) if files is None else list(files)
    sources.refuse_output_among_inputs(directory, files)
    size = sum(f.size for f in files)
    width = num_workers if executor is None else executors.executor_width(executor, num_workers)
    head = {
        "format": table.FORMAT, "version": table.VERSION, "pattern": pattern, "special_tokens": special_tokens,
        "text_field": text_field, "piece_size": piece_size if piece_size is not None else default_piece_size(size, width),
        "inputs": [{"path": f.path, "size": f.size,
                    "mtime_ns": None if sources.is_url(f.path) else os.stat(f.path).st_mtime_ns} for f in files],
    }
    if type(min_pretoken_count) is not int or min_pretoken_count < 1:
        raise ValueError(f"min_pretoken_count must be a positive int (1 drops nothing), got {min_pretoken_count!r}")
    if min_pretoken_count > 1:  # only then, so that tables counted before this option still resume
        head["min_pretoken_count"] = min_pretoken_count
    target = ShardFolder(directory, COUNT_TABLE)
    with target.opened(head, overwrite=overwrite, adopt=() if piece_size is not None else ("piece_size",),
                       anew="pass --overwrite (overwrite=True) to count it anew, or write to another folder") as opened:
        return _count(files, target, opened.head, opened.listed, num_workers, executor, on_progress)


def _count(files, target: ShardFolder, head: dict, listed: list, num_workers: int, executor: Executor | None,
           on_progress) -> Counted:
    units = sources.plan_units(files, piece_size=head["piece_size"], special_tokens=head["special_tokens"],
                               text_field=head["text_field"], pattern=head["pattern"])
    tasks = counting.bundle(units, head["piece_size"])
    by_name = {e.get("name"): e for e in listed if isinstance(e, dict)}
    records: list[dict | None] = [
        _reusable(target, i, target.record(i)) or _reusable(target, i, by_name.get(table.shard_name(i)))
        for i in range(len(tasks))
    ]
    reused = sum(r is not None for r in records)
    if reused == len(tasks) and target.finished():
        return _counted(target, records, reused)
    target.begin({i: r for i, r in enumerate(records) if r is not None}, head)
    done = sum(r["input_bytes"] for r in records if r is not None)
    if on_progress:
        on_progress(done)
    todo = [i for i, r in enumerate(records) if r is None]
    for i, record in _run(tasks, todo, target.root, num_workers, executor):
        records[i] = record
        done += record["input_bytes"]
        if on_progress:
            on_progress(done)
    target.finish(head, records)
    return _counted(target, records, reused)


def _run(tasks, todo: list[int], root: str, num_workers: int, executor: Executor | None):
    """Yield (index, record) of each shard in `todo`, counted here, on local processes or on `executor`."""
    if executor is None and (num_workers <= 1 or len(todo) <= 1):
        for i in todo:
            yield i, count_shard(tasks[i], root, i)
        return
    with executors.own_pool(executor, min(num_workers, len(todo))) as pool:
        width = executors.executor_width(pool, num_workers)
        calls = ((tasks[i], root, i) for i in todo)
        yield from zip(todo, executors.run_ordered(pool, count_shard, calls, max_in_flight=width))


def _counted(target: ShardFolder, entries: list[dict], reused: int) -> Counted:
    sums = table.totals(entries)
    return Counted(target.root, sums["shards"], reused, sums["input_bytes"], sums["occurrences"], sums["rows"])
