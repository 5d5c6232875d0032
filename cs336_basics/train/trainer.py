"""Training plumbing behind `bpe.train_bpe` and `bpe.train_bpe_from_iterator`: the options
checked where they enter, progress bars, and, once a corpus is counted, the merge loop run and its
result turned into the vocabulary (`train_from_counts`).

Training from what exists feeds the same loop: extending a tokenizer (`start_from`) forces its
merges first and gives the new tokens the ids after its own (`extended_vocab`); SuperBPE
(`superword_from`) trains to the transition size, then counts the corpus again with the stage-2
pattern and forces the stage-1 merges before going on, passing over the pairs whose tokens break
its limits (see `train_on_files` and `SuperwordOptions`)."""

import concurrent.futures
import contextlib
import os
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

from cs336_basics.corpora import executors, sources
from cs336_basics.text import patterns
from cs336_basics.text.pretokenize import validate_special_tokens
from cs336_basics.train import counting
from cs336_basics.train.merge import train_merges
from cs336_basics.train.pair_queue import superword_limits


class BaseTokenizer(NamedTuple):
    """What training reads of a tokenizer it starts from: the first four fields of
    `formats.definition.TokenizerDefinition`, which `bpe.train_bpe` passes (this package does not
    import `formats`; any object with these attributes will do)."""

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    special_tokens: list[str]
    pattern: str

class SuperwordOptions(NamedTuple):
    """SuperBPE's second stage, checked (see `superword_options`): the transition (a vocabulary
    size), the stage-2 pattern, and its limits on the tokens of stage-2 merges (at most `max_words`
    words, 0 for any number; no colon followed by a space with `colon_rule`)."""

    transition: int
    pattern: str
    max_words: int
    colon_rule: bool


def superword_options(superword_from, vocab_size: int, special_tokens: list[str], start_from: BaseTokenizer | None,
                      pattern=None, max_words=None, colon_rule=None) -> SuperwordOptions | None:
    """The SuperBPE options of a run, checked, or None without `superword_from`; ValueError for
    anything wrong. `superword_from=True` starts stage 2 at `start_from`'s size (with the special
    tokens it lacks). The pattern defaults to "superbpe" (the released recipe), whose limits are on
    by default (4 words, the colon rule); with "superbpe-v1" (the preprint's recipe) they are off by
    default. Either is given explicitly to override."""
    if superword_from is None:
        given = [name for name, value in (("superword_pattern", pattern), ("superword_max_words", max_words),
                                          ("superword_colon_rule", colon_rule)) if value is not None]
        if given:
            raise ValueError(f"{', '.join(given)} only apply to SuperBPE: give superword_from too")
        return None
    if superword_from is True:
        if start_from is None:
            raise ValueError("superword_from=True starts SuperBPE's stage 2 at the size of the tokenizer to extend: "
                             "give start_from too, or give the transition as a vocabulary size")
        superword_from = smallest_vocab(special_tokens, start_from)
    check_transition(superword_from, vocab_size, special_tokens, start_from)
    stage2 = patterns.superword_pattern(patterns.SUPERBPE if pattern is None else pattern)
    v1 = stage2 == patterns.SUPERBPE_V1
    if max_words is None:
        max_words = 0 if v1 else 4
    if type(max_words) is not int or max_words < 0:
        raise ValueError(f"superword_max_words must be an int of at least 0 (0: no limit), got {max_words!r}")
    if colon_rule is None:
        colon_rule = not v1
    if type(colon_rule) is not bool:
        raise ValueError(f"superword_colon_rule must be True or False, got {colon_rule!r}")
    return SuperwordOptions(superword_from, stage2, max_words, colon_rule)


# Below this many distinct pre-tokens one process runs the merge loop faster than several.
PARALLEL_MIN_WORDS = 20_000


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
    input_path, vocab_size: int, special_tokens: list[str], *, pattern: str | None, num_workers: int | None,
    piece_size: int | None, executor: "concurrent.futures.Executor | None", text_field: str, progress: bool,
    stats: dict | None, merge_log: list[tuple[int, int]] | None, start_from: BaseTokenizer | None = None,
    superword_from: "int | bool | None" = None, superword_pattern: str | None = None,
    superword_max_words: int | None = None, superword_colon_rule: bool | None = None, min_pretoken_count: int = 1,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """`bpe.train_bpe`, which states the contract: the corpus resolved and planned into work units,
    counted by workers or `executor`, then `train_from_counts`. With `superword_from` (SuperBPE, see
    `superword_options`), stage 1 trains to that size, and stage 2 counts again with the stage-2
    pattern, forces the stage-1 merges and passes over the pairs whose tokens break its limits. Both
    stages drop the pre-tokens seen fewer than `min_pretoken_count` times."""
    special_tokens, pattern = checked_extension(special_tokens, pattern, vocab_size, num_workers, start_from)
    check_min_pretoken_count(min_pretoken_count)
    superwords = superword_options(superword_from, vocab_size, special_tokens, start_from, superword_pattern,
                                   superword_max_words, superword_colon_rule)
    files = sources.resolve(input_path)
    size = sum(f.size for f in files)
    workers = executors.default_num_workers(size) if num_workers is None else num_workers
    if piece_size is None:
        width = workers if executor is None else executors.executor_width(executor, workers)
        piece_size = counting.default_piece_size(size, width, local=executor is None)

    def count(pattern: str) -> dict[bytes, int]:
        units = sources.plan_units(
            files, piece_size=piece_size, special_tokens=special_tokens, text_field=text_field, pattern=pattern
        )
        with progress_bar(progress, total=size, unit="B", unit_scale=True, desc="counting") as bar:
            return counting.count_pretokens(
                units,
                num_workers=workers,
                executor=executor,
                task_size=piece_size,
                on_progress=(lambda done: bar.update(done - bar.n)) if bar else None,
            )

    started = time.perf_counter()
    forced = allows = None
    if superwords is not None:
        stage1 = {"count_seconds": 0.0, "merge_seconds": 0.0}
        if superwords.transition == smallest_vocab(special_tokens, start_from):  # stage 1 learns nothing
            forced = list(start_from.merges) if start_from is not None else []
        else:
            _, forced = train_from_counts([count(pattern)], superwords.transition, special_tokens, workers, started,
                                          size, progress, stage1, None, base=start_from, min_count=min_pretoken_count)
        pattern = superwords.pattern
        allows = superword_limits(superwords.max_words, superwords.colon_rule)
        if start_from is None:  # stage 2 may make a token twice: vocabulary and merges as an extension's
            start_from = BaseTokenizer({i: bytes([i]) for i in range(256)}, [], [], pattern)
        started = time.perf_counter()
    handed_over = [count(pattern)]  # the only reference: the merge loop may free the counts (see below)
    vocab, merges = train_from_counts(handed_over, vocab_size, special_tokens, workers, started, size, progress,
                                      stats, merge_log, base=start_from, forced=forced, allows=allows,
                                      min_count=min_pretoken_count)
    if superwords is not None and stats is not None:
        for key in ("count_seconds", "merge_seconds"):
            stats[key] += stage1[key]
    return vocab, merges


def train_on_documents(
    documents: Iterable, vocab_size: int, special_tokens: list[str], *, pattern: str, num_workers: int | None,
    text_field: str, progress: bool, stats: dict | None, merge_log: list[tuple[int, int]] | None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """`bpe.train_bpe_from_iterator`, which states the contract: the documents counted in batches by
    workers, then `train_from_counts`."""
    special_tokens, pattern = checked_training_options(special_tokens, pattern, vocab_size, num_workers)
    if isinstance(documents, (str, bytes, os.PathLike)):
        raise TypeError("train_bpe_from_iterator takes an iterable of documents; for a file or folder use train_bpe")
    workers = num_workers or executors.default_num_workers(executors.PARALLEL_MIN_BYTES)
    started = time.perf_counter()
    handed_over = [counting.count_documents(
        documents, special_tokens=special_tokens, pattern=pattern, num_workers=workers, text_field=text_field
    )]
    return train_from_counts(handed_over, vocab_size, special_tokens, workers, started, None, progress, stats,
                             merge_log)


def train_on_counts(
    handed_over: list, vocab_size: int, special_tokens: list[str], *, pattern: str, num_workers: int | None,
    progress: bool, stats: dict | None, merge_log: list[tuple[int, int]] | None, input_bytes: int | None,
    started: float, start_from: BaseTokenizer | None = None, min_pretoken_count: int = 1,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """`bpe.train_bpe_from_counts`, which states the contract: counts made before (the one item of
    `handed_over`, read since `started`, cut at `special_tokens`) go straight to `train_from_counts`:
    no pass over a corpus. With `start_from`, as `train_on_files`: the counts must have been cut at
    its special tokens too, as the text would have been."""
    if start_from is not None:
        missing = [t for t in start_from.special_tokens if t not in special_tokens]
        if missing:
            raise ValueError(f"the counts were not cut at the special tokens {missing} of the tokenizer to extend, "
                             "as its corpus would be: count the corpus again with them")
    special_tokens, pattern = checked_extension(special_tokens, pattern, vocab_size, num_workers, start_from)
    check_min_pretoken_count(min_pretoken_count)
    workers = num_workers or executors.default_num_workers(executors.PARALLEL_MIN_BYTES)
    return train_from_counts(handed_over, vocab_size, special_tokens, workers, started, input_bytes, progress, stats,
                             merge_log, base=start_from, min_count=min_pretoken_count)


def train_from_counts(
    handed_over: list, vocab_size: int, special_tokens: list[str], workers: int, started: float,
    size: int | None, progress: bool, stats: dict | None, merge_log: list[tuple[int, int]] | None, *,
    base: BaseTokenizer | None = None, forced: list[tuple[bytes, bytes]] | None = None,
    allows: Callable[[bytes], bool] | None = None, min_count: int = 1,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The merges and vocabulary learned from pre-token counts, given as the one item of the list
    `handed_over`, which holds the only reference to them (the part `train_bpe` and
    `train_bpe_from_iterator` share once the corpus is counted).

    With `base` (a tokenizer being extended) the vocabulary is `extended_vocab`'s; the loop's first
    merges are forced: `forced`, or by default the base's merges. `allows` is SuperBPE's test of
    the chosen merges' tokens (see `merge.train_merges`). The pre-tokens counted fewer than
    `min_count` times are dropped first (see `pruned`): the merges, merge log and statistics are
    those of the counts that are left."""
    word_counts = handed_over.pop()
    distinct = len(word_counts)
    word_counts = pruned(word_counts, min_count)  # the dict counted is freed here when pruned
    kept = len(word_counts)
    wanted = stats is not None or merge_log is not None
    byte_counts = counting.byte_counts(word_counts) if stats is not None else None
    if byte_counts is not None:
        corpus_bytes = sum(byte_counts)
    else:
        corpus_bytes = sum(len(word) * n for word, n in word_counts.items()) if wanted else 0
    counted = time.perf_counter()

    if forced is None:
        forced = base.merges if base is not None else []
    num_merges = vocab_size - 256 - len(special_tokens)
    if base is not None:  # the forced merges, and as many new ones as the vocabulary has room for
        num_merges = len(forced) + vocab_size - len(extended_vocab(base, forced, special_tokens))
    steps: list[tuple[int, int]] | None = [] if merge_log is not None else None
    # train_merges is given the only reference to the counts, so it can free them once it has
    # copied them into its own form, before the loop grows.
    handed_over = [word_counts]
    del word_counts
    with progress_bar(progress, total=num_merges, unit="merge", desc="merging") as bar:
        merges = train_merges(
            handed_over.pop(),
            num_merges,
            num_shards=workers if kept >= PARALLEL_MIN_WORDS else 1,
            on_merge=(lambda k: bar.update(1)) if bar else None,
            merge_log=steps,
            forced=forced,
            known=None if base is None else set(base.vocab.values()) | {t.encode("utf-8") for t in special_tokens},
            allows=allows,
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
            dropped_pretokens=distinct - kept,
            min_pretoken_count=min_count,
            pretoken_bytes=corpus_bytes,
            input_bytes=corpus_bytes if size is None else size,
            num_workers=workers,
            byte_counts=byte_counts,
        )

    if base is not None:
        return extended_vocab(base, merges, special_tokens), merges
    vocab = {i: bytes([i]) for i in range(256)}
    for left, right in merges:
        vocab[len(vocab)] = left + right
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges


def pruned(word_counts: dict[bytes, int], min_count: int) -> dict[bytes, int]:
    """The counts of the pre-tokens counted at least `min_count` times (`word_counts` itself for 1).
    A new dict, so that the one given can be freed with the pre-tokens dropped: a dict does not
    shrink as keys are deleted from it."""
    if min_count <= 1:
        return word_counts
    return {word: n for word, n in word_counts.items() if n >= min_count}


def check_min_pretoken_count(min_pretoken_count: int) -> None:
    """ValueError unless `min_pretoken_count` is a positive int."""
    if type(min_pretoken_count) is not int or min_pretoken_count < 1:
        raise ValueError(f"min_pretoken_count must be a positive int (1 drops nothing), got {min_pretoken_count!r}")


def extension_options(
    special_tokens, pattern: str | None, start_from: BaseTokenizer | None
) -> tuple[list[str], str]:
    """The special tokens and pattern of a training run: with `start_from`, its special tokens come
    first (they cut the new corpus too) and its pattern is the default; another pattern is refused.
    A special token naming one of its ordinary tokens (a token its merges make, which text encodes
    to) is refused, naming the id: making it special would change what that text encodes to. (A
    token of its vocabulary that no merge makes, as GPT-2's vocab.json holds `<|endoftext|>`, may
    be named: it keeps its id.) Without `start_from`, the pattern defaults to "gpt2"."""
    if start_from is None:
        return special_tokens, "gpt2" if pattern is None else pattern
    if pattern is not None and patterns.canonical(pattern) != patterns.canonical(start_from.pattern):
        raise ValueError(
            f"the tokenizer to extend pre-tokenizes with {start_from.pattern!r}, not {pattern!r}: its merges "
            "only mean the same with its own pattern; drop pattern="
        )
    given = validate_special_tokens(special_tokens)
    missing = [bytes([b]) for b in range(256) if bytes([b]) not in set(start_from.vocab.values())]
    if missing:
        raise ValueError(f"the tokenizer to extend lacks the single-byte tokens {missing[:5]}...: it is not "
                         "byte-level BPE, which every token of ours starts from")
    new = [t for t in given if t not in start_from.special_tokens]
    made = {left + right for left, right in start_from.merges}
    for token in new:
        if token.encode("utf-8") in made:
            token_id = min((i for i, t in start_from.vocab.items() if t == token.encode("utf-8")), default="?")
            raise ValueError(
                f"special token {token!r} is the ordinary token {token_id} of the tokenizer to extend (its merges make "
                f"it): as a special token, text holding it would encode differently; name a new token, or one of its "
                f"special tokens {start_from.special_tokens}"
            )
    return [*start_from.special_tokens, *new], start_from.pattern


def checked_extension(special_tokens, pattern: str | None, vocab_size: int, num_workers: int | None,
                      start_from: BaseTokenizer | None) -> tuple[list[str], str]:
    """`checked_training_options` of a run that may extend `start_from` (see `extension_options`),
    whose vocabulary must hold at least that tokenizer and the special tokens it lacks."""
    special_tokens, pattern = extension_options(special_tokens, pattern, start_from)
    special_tokens, pattern = checked_training_options(special_tokens, pattern, vocab_size, num_workers)
    if start_from is not None and vocab_size < smallest_vocab(special_tokens, start_from):
        raise ValueError(f"vocab_size {vocab_size} is below the minimum {smallest_vocab(special_tokens, start_from)}: "
                         "the size of the tokenizer to extend, with the special tokens it lacks")
    return special_tokens, pattern


def new_special_tokens(base: BaseTokenizer, special_tokens: list[str]) -> list[str]:
    """The special tokens that `base`'s vocabulary lacks, which an extension adds."""
    have = set(base.vocab.values())
    return [t for t in special_tokens if t.encode("utf-8") not in have]


def extended_vocab(base: BaseTokenizer, merges: list[tuple[bytes, bytes]], special_tokens: list[str]) -> dict[int, bytes]:
    """The vocabulary of `base` extended by `merges` (its own merges first): every id of `base` is
    kept; each new merge's token takes the next id above all of them, then the special tokens that
    `base` lacks. A new merge whose token is already in the vocabulary (a token `base` holds beyond
    its merges, or one made twice) keeps that token's id and adds none (the merge loop then makes
    one more merge, see `merge.train_merges`'s `known`)."""
    vocab = dict(base.vocab)
    ids = {token: i for i, token in vocab.items()}
    next_id = max(vocab, default=-1) + 1
    new = [left + right for left, right in merges[len(base.merges):]]
    for token in [*new, *(t.encode("utf-8") for t in special_tokens)]:
        if token not in ids:
            vocab[next_id] = token
            ids[token] = next_id
            next_id += 1
    return vocab


def smallest_vocab(special_tokens: list[str], start_from: BaseTokenizer | None) -> int:
    """The smallest vocabulary a run can have: 256 bytes and the special tokens, or the tokenizer
    extended with the special tokens it lacks."""
    if start_from is None:
        return 256 + len(special_tokens)
    return len(start_from.vocab) + len(new_special_tokens(start_from, special_tokens))


def check_transition(superword_from: int, vocab_size: int, special_tokens: list[str],
                     start_from: BaseTokenizer | None) -> None:
    """ValueError unless the SuperBPE transition is an int from the smallest vocabulary (256 bytes
    and the special tokens, or the tokenizer extended) to `vocab_size`."""
    smallest = smallest_vocab(special_tokens, start_from)
    if type(superword_from) is not int or not smallest <= superword_from <= vocab_size:
        raise ValueError(
            f"superword_from (the vocabulary size where SuperBPE starts learning superwords) must be an int "
            f"from {smallest} to vocab_size {vocab_size}, got {superword_from!r}"
        )


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

