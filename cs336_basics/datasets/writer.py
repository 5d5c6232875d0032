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

The directory's files, records and lock are `directory.DatasetDirectory`'s; the run that both
writers share, and what the workers run, are in `shards`.

Resume. A run takes `DIR/.lock` (flock; not for a URL) first and refuses to run beside another.
It then compares what it is about to write (tokenizer, pattern, dtype, shard size, inputs with
their sizes and modification times) with what the directory was written for (`manifest.json`,
else `.work/plan.json`), and refuses a difference, naming it, unless `overwrite`. It removes
temporary files left by a stopped run, keeps each shard whose files match its record (size and
sha256, read back from disk) and each part that matches its own, and encodes only the rest. All
of this but the parts is the shard folder's (`shard_folder`), which count tables share.
"""

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from pathlib import Path

import numpy as np

from cs336_basics.corpora import sources
from cs336_basics.datasets import layout
from cs336_basics.datasets.directory import DatasetDirectory, Written
from cs336_basics.datasets.shard_folder import MIN_PIECE_SIZE, default_piece_size
from cs336_basics.datasets.shards import Shards, encode_file_part, write_shards
from cs336_basics.datasets.store import Store
from cs336_basics.encode import engines
from cs336_basics.encode.protocol import TokenizerLike
from cs336_basics.encode.token_arrays import choose_dtype, encode_unit, tokenizer_state
from cs336_basics.formats import hf

DEFAULT_SHARD_SIZE = 256 << 20  # bytes of ids per shard, about
# Bytes of input per work unit, at most: no more than the least piece of the rule (`shard_folder`),
# so that the default never depends on the workers.
MAX_PIECE_SIZE = MIN_PIECE_SIZE
BYTES_PER_TOKEN = 4  # bytes of input per token, to plan shards: about right for English text


# --- the plan ----------------------------------------------------------------------------------------


def piece_size_for(shard_size: int, total_bytes: int = 0, num_workers: int = 1) -> int:
    """The work units' default size, by the rule all shard folders share (`shard_folder.default_piece_size`):
    a dataset's largest piece is `MAX_PIECE_SIZE`, and half a shard so that a small shard still
    holds a few units. That is never more than the rule's least, so it is the size whatever the
    input and the workers: the plan depends on the shard size alone."""
    return default_piece_size(total_bytes, num_workers, largest=max(min(MAX_PIECE_SIZE, shard_size // 2), 1))


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


def tokenizer_identity(tokenizer: TokenizerLike) -> dict:
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


def _head(tokenizer: TokenizerLike, files, units, dtype: np.dtype, shard_size: int, piece_size: int) -> dict:
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
    append_separator: bool = False,
    files: Sequence[sources.Source] | None = None,
) -> Written:
    """Encode the corpus `inputs` into the dataset directory `directory` (see the module docstring
    and `layout`), resuming what an earlier run of the same settings left there. With
    `append_separator` the last document ends with the separator even when the corpus does not.
    `files`: `sources.resolve(inputs)`, when the caller has it already (the inputs are then not
    resolved again); `inputs` are still needed, to refuse an output inside an input folder.

    `num_workers` local processes (1: this process) or `executor` do the work, with `engine`
    ("python", "tiktoken", "auto" or a `Choice` of `engines.choose`: the ids are the same).
    `on_progress(input_bytes_done)` counts reused work as done. Raises ValueError naming what
    changed when the directory was written with other settings (unless `overwrite`), `DatasetBusy`
    when another run holds it, and the OSError (naming the file) of a write that failed.
    """
    if type(shard_size) is not int or shard_size < 1:
        raise ValueError(f"shard_size must be a positive number of bytes, got {shard_size!r}")
    target = DatasetDirectory(directory)
    files = sources.resolve(inputs) if files is None else list(files)
    check_output(target.store, inputs, files)
    engine = engines.choose(tokenizer, engine, input_bytes=sum(f.size for f in files))
    if engine.dropout:  # a dataset's resuming and identity record no seed
        raise ValueError("BPE-dropout writes token arrays (encode_file, bpe encode --out FILE.npy), not datasets")
    out_dtype = choose_dtype(max(tokenizer.vocab), dtype)
    piece_size = piece_size or piece_size_for(shard_size, sum(f.size for f in files), num_workers)
    units = sources.plan_units(files, piece_size=piece_size, special_tokens=tokenizer.cut_tokens,
                               text_field=text_field, pattern=tokenizer.pattern)
    shards = plan_shards(units, shard_size, out_dtype.itemsize)
    head = _head(tokenizer, files, units, out_dtype, shard_size, piece_size)
    if append_separator:
        head["append_separator"] = True  # only then, so that earlier directories keep their head
    with target.opened(head, overwrite=overwrite, anew="pass overwrite=True (--overwrite) to write it anew") as (
            _, _, listed, lock_fd):
        return _run(tokenizer, units, shards, head, listed, target, out_dtype, num_workers, executor,
                    on_progress, lock_fd, engine)


def _run(tokenizer: TokenizerLike, units, shards, head, listed, target: DatasetDirectory, dtype, num_workers, executor,
         on_progress, lock_fd, engine) -> Written:
    total_bytes = sum(u.size for u in units)
    entries: dict[int, dict] = {}
    by_name = {e.get("name"): e for e in listed if isinstance(e, dict)}
    for k, units_range in enumerate(shards):
        name = layout.shard_name(k)
        entry = target.record(k) or by_name.get(name)
        if target.reusable_shard(entry, k, units_range):
            entries[k] = entry
    reused = set(entries)
    if len(entries) == len(shards) and target.finished():
        return _written(target, entries, shards, units, total_bytes, reused=reused, parts_bytes=0,
                        on_progress=on_progress)

    parts: dict[int, dict] = {}
    for k, (first, stop) in enumerate(shards):
        if k not in entries:
            for i in range(first, stop):
                record = target.reusable_part(i, dtype.itemsize)
                if record is not None:
                    parts[i] = record
    todo = [i for k, (first, stop) in enumerate(shards) if k not in entries
            for i in range(first, stop) if i not in parts]
    parts_bytes = sum(units[i].size for i in parts)

    def encode_here(i: int, unit: sources.WorkUnit) -> dict:
        return target.write_part(i, dtype, *encode_unit(tokenizer, unit, dtype.str, engine)[1:])

    def feed(results: Iterator[dict], assembly: Shards) -> None:
        done = 0
        for k, (first, stop) in enumerate(shards):
            if k in reused:
                assembly.after(entries[k])
                done += sum(u.size for u in units[first:stop])
                if on_progress:
                    on_progress(done)
                continue
            for i in range(first, stop):
                assembly.add(i, parts.get(i) or next(results), units[i].new_document)
                done += units[i].size
                if on_progress:
                    on_progress(done)
            assembly.close(k, (first, stop), last=k == len(shards) - 1,
                           append_separator=bool(head.get("append_separator")))

    write_shards(target, head, entries, ((i, units[i]) for i in todo), feed, tokenizer=tokenizer,
                 encode_part=encode_file_part, encode_here=encode_here, dtype=dtype, num_workers=num_workers,
                 executor=executor, lock_fd=lock_fd, engine=engine)
    return _written(target, entries, shards, units, total_bytes, reused=reused, parts_bytes=parts_bytes,
                    on_progress=None)


def _written(target: DatasetDirectory, entries, shards, units, total_bytes, *, reused, parts_bytes,
             on_progress) -> Written:
    reused_bytes = parts_bytes + sum(sum(u.size for u in units[slice(*shards[k])]) for k in reused)
    if on_progress:
        on_progress(total_bytes)
    return target.written(entries.values(), total_bytes, len(reused), reused_bytes)
