"""Counting a corpus into a count table (see `table`), resumable after any stop.

The corpus is planned into work units (`sources.plan_units`) and the units grouped into tasks
(`counting.bundle`); each task is one shard, counted and written by the worker that runs it
(`count_shard`: local processes, or any executor, e.g. Dask, whose workers see the folder), which
then writes the shard's record into `.work/`. A shard's content depends only on its task, so the
table is the same however many workers count it, and a run stopped anywhere (Ctrl-C, SIGTERM,
SIGKILL, a dead machine) is finished by running it again: shards whose record matches the file on
disk are kept, the rest counted again, and the manifest, written last, makes the table.

While unfinished the folder holds `.work/plan.json` (the manifest's keys before `shards`) and
`.work/shard-NNNNN.json` (one record per finished shard); `.lock` is held by the run (the lock of
`datasets.directory`, which fits as it is: a flock on a file in the folder).
"""

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from cs336_basics.corpora import executors, sources
from cs336_basics.counts import table
from cs336_basics.datasets.directory import locked
from cs336_basics.errors import DatasetBusy
from cs336_basics.formats import staged
from cs336_basics.text import patterns
from cs336_basics.text.pretokenize import validate_special_tokens
from cs336_basics.train import counting


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
    """Bytes per shard: one shard per worker, at least 1 MiB and at most 1 GiB. Each shard's counts
    are made on their own (a worker turns its chunks into pre-tokens once per shard, and sorts
    them), so fewer, larger shards count faster: on 128 MB of web-like text, counting it as two
    shards took 1.17x the CPU time of one, as four 1.47x. More shards lose less to a stop; past
    2 GiB for two workers the cap gives more shards anyway."""
    per_worker = -(-total_bytes // max(num_workers, 1))
    return min(max(per_worker, 1 << 20), 1 << 30)


def count_shard(units: Sequence[sources.WorkUnit], folder: str, index: int) -> dict:
    """In a worker: count the units, write shard `index` and then its record; return the record."""
    size, counts = counting.count_units(units)
    words, values = counting.sorted_counts(counts)
    del counts
    root = Path(folder)
    record = table.write_shard(root, table.shard_name(index), words, values)
    record["input_bytes"] = size
    with staged.replacing(root / table.WORK / f"shard-{index:05d}.json", fsync=False) as f:
        f.write(json.dumps(record).encode("utf-8"))
    return record


def _reusable(root: Path, index: int) -> dict | None:
    """The record of shard `index` when the shard on disk matches it, else None."""
    try:
        record = json.loads((root / table.WORK / f"shard-{index:05d}.json").read_bytes())
        data = (root / table.shard_name(index)).read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("name") != table.shard_name(index):
        return None
    if len(data) != record.get("bytes") or hashlib.sha256(data).hexdigest() != record.get("sha256"):
        return None
    return record


def _is_ours(name: str) -> bool:
    if name in (table.MANIFEST, table.WORK, table.LOCK):
        return True
    if name.startswith(".") and name.endswith(".tmp"):
        name = name[1:].rsplit(".", 2)[0]
    return name == table.MANIFEST or (name.startswith("shard-") and name.endswith(".parquet"))


def _prepare(root: Path, overwrite: bool) -> None:
    """Create the folder; refuse one holding files that are not a table's; remove temporaries."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(e.errno, f"cannot write the count table folder {root}: {e.strerror or e}") from None
    names = os.listdir(root)
    foreign = sorted(n for n in names if not _is_ours(n))
    if foreign and not any(n in (table.MANIFEST, table.WORK) for n in names):
        raise ValueError(f"{root} holds files that are not a count table's ({', '.join(foreign[:3])}); "
                         "write the table to a new or empty folder")
    for folder in (root, root / table.WORK):
        for name in os.listdir(folder) if folder.is_dir() else []:
            if name.startswith(".") and name.endswith(".tmp"):
                (folder / name).unlink(missing_ok=True)


def _previous_head(root: Path) -> dict | None:
    for path in (root / table.MANIFEST, root / table.WORK / "plan.json"):
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in ("shards", "totals")}
    return None


def _what_changed(old: dict, new: dict) -> str:
    changed = [f"{key.replace('_', ' ')} ({old.get(key)!r}, now {new[key]!r})" for key in new if old.get(key) != new[key]]
    return "; ".join(changed) or "its settings differ"


def _remove_table(root: Path) -> None:
    (root / table.MANIFEST).unlink(missing_ok=True)
    shutil.rmtree(root / table.WORK, ignore_errors=True)
    for name in os.listdir(root):
        if name != table.LOCK and _is_ours(name):
            (root / name).unlink(missing_ok=True)


def count_corpus(
    inputs, directory: "str | os.PathLike", *, special_tokens: list[str], pattern: str = "gpt2",
    num_workers: int = 1, executor: Executor | None = None, piece_size: int | None = None,
    text_field: str = "text", overwrite: bool = False, on_progress: Callable[[int], None] | None = None,
) -> Counted:
    """Count the pre-tokens of a corpus into the count table `directory` (see the module docstring).

    Run again after a stop it counts only what is missing; a folder holding a table of other
    settings (inputs, pattern, special tokens, piece size) is refused, naming what changed, unless
    `overwrite`. `piece_size` (bytes per shard) defaults to that of the unfinished table being
    resumed, else `default_piece_size`. `on_progress(bytes_done)` is called as shards finish.
    """
    special_tokens = validate_special_tokens(special_tokens)
    pattern = patterns.canonical(pattern)
    files = sources.resolve(inputs)
    size = sum(f.size for f in files)
    root = Path(directory)
    _prepare(root, overwrite)
    try:
        with locked(root):
            return _count_locked(files, root, special_tokens, pattern, num_workers, executor, piece_size, text_field,
                                 overwrite, on_progress, size)
    except DatasetBusy:
        raise DatasetBusy(f"{root}: another `bpe count` is writing this count table (it holds {root / table.LOCK}); "
                          "wait for it to end or stop it, then run again") from None


def _count_locked(files, root, special_tokens, pattern, num_workers, executor, piece_size, text_field, overwrite,
                  on_progress, size) -> Counted:
    width = num_workers if executor is None else executors.executor_width(executor, num_workers)
    head = {
        "format": table.FORMAT, "version": table.VERSION, "pattern": pattern, "special_tokens": special_tokens,
        "text_field": text_field, "piece_size": piece_size or default_piece_size(size, width),
        "inputs": [{"path": f.path, "size": f.size,
                    "mtime_ns": None if sources.is_url(f.path) else os.stat(f.path).st_mtime_ns} for f in files],
    }
    previous = _previous_head(root)
    if previous is not None and piece_size is None and {**previous, "piece_size": head["piece_size"]} == head:
        head["piece_size"] = previous["piece_size"]  # resume as planned, whatever the workers now
    if previous is not None and previous != head:
        if not overwrite:
            raise ValueError(f"{root} holds a count table of other settings: {_what_changed(previous, head)}; "
                             "pass --overwrite (overwrite=True) to count it anew, or write to another folder")
        _remove_table(root)
    if (root / table.MANIFEST).exists() and previous == head:
        manifest = table.read_manifest(root)
        shutil.rmtree(root / table.WORK, ignore_errors=True)
        return _counted(root, manifest["shards"], len(manifest["shards"]))

    units = sources.plan_units(files, piece_size=head["piece_size"], special_tokens=special_tokens,
                               text_field=text_field, pattern=pattern)
    tasks = counting.bundle(units, head["piece_size"])
    (root / table.WORK).mkdir(exist_ok=True)
    with staged.replacing(root / table.WORK / "plan.json") as f:
        f.write((json.dumps(head, indent=1) + "\n").encode("utf-8"))
    records: list[dict | None] = [_reusable(root, i) for i in range(len(tasks))]
    reused = sum(r is not None for r in records)
    done = sum(r["input_bytes"] for r in records if r is not None)
    if on_progress:
        on_progress(done)
    todo = [i for i, r in enumerate(records) if r is None]
    for i, record in _run(tasks, todo, root, num_workers, executor):
        records[i] = record
        done += record["input_bytes"]
        if on_progress:
            on_progress(done)
    with staged.replacing(root / table.MANIFEST) as f:
        f.write(table.manifest_text(head, records).encode("utf-8"))
    shutil.rmtree(root / table.WORK, ignore_errors=True)
    return _counted(root, records, reused)


def _run(tasks, todo: list[int], root: Path, num_workers: int, executor: Executor | None):
    """Yield (index, record) of each shard in `todo`, counted here, on local processes or on `executor`."""
    if executor is None and (num_workers <= 1 or len(todo) <= 1):
        for i in todo:
            yield i, count_shard(tasks[i], str(root), i)
        return
    with executors.own_pool(executor, min(num_workers, len(todo))) as pool:
        width = executors.executor_width(pool, num_workers)
        calls = ((tasks[i], str(root), i) for i in todo)
        yield from zip(todo, executors.run_ordered(pool, count_shard, calls, max_in_flight=width))


def _counted(root: Path, entries: list[dict], reused: int) -> Counted:
    sums = table.totals(entries)
    return Counted(str(root), sums["shards"], reused, sums["input_bytes"], sums["occurrences"], sums["rows"])
