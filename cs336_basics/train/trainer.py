"""Training plumbing behind `bpe.train_bpe` and `bpe.train_bpe_from_iterator`: the options
checked where they enter, how many workers a corpus gets, progress bars, and, once a corpus is
counted, the merge loop run and its result turned into the vocabulary (`train_from_counts`)."""

import concurrent.futures
import contextlib
import os
import time
from collections.abc import Iterable

from cs336_basics.corpora import executors, sources
from cs336_basics.text import patterns
from cs336_basics.text.pretokenize import validate_special_tokens
from cs336_basics.train import counting
from cs336_basics.train.merge import train_merges

# Below these sizes one process is faster than starting workers.
PARALLEL_MIN_BYTES = 4 << 20
PARALLEL_MIN_WORDS = 20_000


def default_num_workers(file_size: int) -> int:
    """All the cores this process may use, or 1 for a small file."""
    if file_size < PARALLEL_MIN_BYTES:
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check_vocab_size(vocab_size: int, special_tokens: list[str]) -> None:
    """Raise ValueError unless vocab_size is an int of at least 256 + the number of special tokens."""
    minimum = 256 + len(special_tokens)
    if type(vocab_size) is not int:
        raise ValueError(f"vocab_size must be an int, got {vocab_size!r}")
    if vocab_size < minimum:
        raise ValueError(
            f"vocab_size {vocab_size} is below the minimum {minimum} "
            f"(256 single bytes + {len(special_tokens)} special tokens)"
        )


def train_on_files(
    input_path, vocab_size: int, special_tokens: list[str], *, pattern: str, num_workers: int | None,
    piece_size: int | None, executor: "concurrent.futures.Executor | None", text_field: str, progress: bool,
    stats: dict | None, merge_log: list[tuple[int, int]] | None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """`bpe.train_bpe`, which states the contract: the corpus resolved and planned into work units,
    counted by workers or `executor`, then `train_from_counts`."""
    special_tokens, pattern = checked_training_options(special_tokens, pattern, vocab_size, num_workers)
    files = sources.resolve(input_path)
    size = sum(f.size for f in files)
    workers = default_num_workers(size) if num_workers is None else num_workers

    started = time.perf_counter()
    if piece_size is None:
        width = workers if executor is None else executors.executor_width(executor, workers)
        piece_size = counting.default_piece_size(size, width, local=executor is None)
    units = sources.plan_units(
        files, piece_size=piece_size, special_tokens=special_tokens, text_field=text_field, pattern=pattern
    )
    with progress_bar(progress, total=size, unit="B", unit_scale=True, desc="counting") as bar:
        word_counts = counting.count_pretokens(
            units,
            num_workers=workers,
            executor=executor,
            task_size=piece_size,
            on_progress=(lambda done: bar.update(done - bar.n)) if bar else None,
        )
    handed_over = [word_counts]  # the only reference: the merge loop may free the counts (see below)
    del word_counts
    return train_from_counts(handed_over, vocab_size, special_tokens, workers, started, size, progress, stats,
                             merge_log)


def train_on_documents(
    documents: Iterable, vocab_size: int, special_tokens: list[str], *, pattern: str, num_workers: int | None,
    text_field: str, progress: bool, stats: dict | None, merge_log: list[tuple[int, int]] | None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """`bpe.train_bpe_from_iterator`, which states the contract: the documents counted in batches by
    workers, then `train_from_counts`."""
    special_tokens, pattern = checked_training_options(special_tokens, pattern, vocab_size, num_workers)
    if isinstance(documents, (str, bytes, os.PathLike)):
        raise TypeError("train_bpe_from_iterator takes an iterable of documents; for a file or folder use train_bpe")
    workers = num_workers or default_num_workers(PARALLEL_MIN_BYTES)
    started = time.perf_counter()
    handed_over = [counting.count_documents(
        documents, special_tokens=special_tokens, pattern=pattern, num_workers=workers, text_field=text_field
    )]
    return train_from_counts(handed_over, vocab_size, special_tokens, workers, started, None, progress, stats,
                             merge_log)


def train_on_counts(
    handed_over: list, vocab_size: int, special_tokens: list[str], *, pattern: str, num_workers: int | None,
    progress: bool, stats: dict | None, merge_log: list[tuple[int, int]] | None, input_bytes: int | None,
    started: float,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """`bpe.train_bpe_from_counts`, which states the contract: counts made before (the one item of
    `handed_over`, read since `started`) go straight to `train_from_counts`: no pass over a corpus."""
    special_tokens, pattern = checked_training_options(special_tokens, pattern, vocab_size, num_workers)
    workers = num_workers or default_num_workers(PARALLEL_MIN_BYTES)
    return train_from_counts(handed_over, vocab_size, special_tokens, workers, started, input_bytes, progress, stats,
                             merge_log)


def train_from_counts(
    handed_over: list, vocab_size: int, special_tokens: list[str], workers: int, started: float,
    size: int | None, progress: bool, stats: dict | None, merge_log: list[tuple[int, int]] | None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The merges and vocabulary learned from pre-token counts, given as the one item of the list
    `handed_over`, which holds the only reference to them (the part `train_bpe` and
    `train_bpe_from_iterator` share once the corpus is counted)."""
    word_counts = handed_over.pop()
    distinct = len(word_counts)
    wanted = stats is not None or merge_log is not None
    corpus_bytes = sum(len(word) * n for word, n in word_counts.items()) if wanted else 0
    byte_counts = counting.byte_counts(word_counts) if stats is not None else None
    counted = time.perf_counter()

    num_merges = vocab_size - 256 - len(special_tokens)
    steps: list[tuple[int, int]] | None = [] if merge_log is not None else None
    # train_merges is given the only reference to the counts, so it can free them once it has
    # copied them into its own form, before the loop grows.
    handed_over = [word_counts]
    del word_counts
    with progress_bar(progress, total=num_merges, unit="merge", desc="merging") as bar:
        merges = train_merges(
            handed_over.pop(),
            num_merges,
            num_shards=workers if distinct >= PARALLEL_MIN_WORDS else 1,
            on_merge=(lambda k: bar.update(1)) if bar else None,
            merge_log=steps,
        )
    if merge_log is not None:
        tokens = corpus_bytes
        for count, shrink in steps:
            tokens -= shrink
            merge_log.append((count, tokens))
    if stats is not None:
        stats.update(
            count_seconds=counted - started,
            merge_seconds=time.perf_counter() - counted,
            distinct_pretokens=distinct,
            pretoken_bytes=corpus_bytes,
            input_bytes=corpus_bytes if size is None else size,
            num_workers=workers,
            byte_counts=byte_counts,
        )

    vocab = {i: bytes([i]) for i in range(256)}
    for left, right in merges:
        vocab[len(vocab)] = left + right
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges


def checked_training_options(special_tokens, pattern: str, vocab_size: int, num_workers: int | None) -> tuple[list[str], str]:
    """The special tokens as a list and the canonical pattern; ValueError for anything wrong."""
    special_tokens = validate_special_tokens(special_tokens)
    pattern = patterns.canonical(pattern)
    for token in special_tokens:
        if len(token.encode("utf-8")) == 1:
            raise ValueError(
                f"special token {token!r} is a single byte, which is already token {ord(token)}; "
                "special tokens for training need at least two bytes"
            )
    check_vocab_size(vocab_size, special_tokens)
    if num_workers is not None and (type(num_workers) is not int or num_workers < 1):
        raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
    return special_tokens, pattern


def progress_bar(enabled: bool, **kwargs):
    """A tqdm bar, or a context giving None when progress is off (the library is quiet by default)."""
    if not enabled:
        return contextlib.nullcontext()
    from tqdm import tqdm

    return tqdm(**kwargs)

