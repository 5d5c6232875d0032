"""The vocabulary as `bpe vocab` and the pages show it: each token with the merge that made it, that
merge's count, the token's occurrences, and why it would be under-trained (its embedding would get
little or no training: rare, unreachable, or a never-seen part of a character; see `FLAGS`).
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from cs336_basics.bpe import Tokenizer
from cs336_basics.text import tsv
from cs336_basics.train.merge_log import MergeLog, occurrences_by_id, readable_token, token_ids


@dataclass
class VocabEntry:
    """One token: its id, bytes, the merge that made it (rank and pair), that merge's count, the
    token's occurrences in the encoded training corpus (or a given text), and why it is under-trained."""

    id: int
    token: bytes
    special: bool
    rank: int | None = None
    pair: tuple[bytes, bytes] | None = None
    count: int | None = None
    occurrences: int | None = None
    flags: list[str] = field(default_factory=list)


# Why a token is listed as under-trained (its embedding would get little or no training).
FLAGS = {
    "rare": "occurs fewer times than the minimum",
    "unreachable": "does not encode back to itself",
    "partial": "part of a UTF-8 character, never occurs",
}
MIN_SHARE = 1e-6  # the default minimum: 0.0001 % of all tokens, or 10 if that is more


def default_min_count(total_tokens: int) -> int:
    """The fewest occurrences a token needs not to count as rare: 0.0001 % of all tokens, at least 10."""
    return max(10, math.ceil(total_tokens * MIN_SHARE))


def merge_ranks(tokenizer: Tokenizer) -> dict[bytes, int]:
    """Token bytes -> the rank of the first merge giving them."""
    made_by: dict[bytes, int] = {}
    for rank, (left, right) in enumerate(tokenizer.merges):
        made_by.setdefault(left + right, rank)
    return made_by


def vocab_entries(
    tokenizer: Tokenizer,
    log: MergeLog | None = None,
    *,
    occurrences: "dict[int, int] | None" = None,
    min_count: int | None = None,
) -> list[VocabEntry]:
    """Every token in id order, with the merge that made it (the first merge giving its bytes) and,
    when its merge log is given, that merge's count.

    Each token's occurrences come from `occurrences` (id -> count, e.g. measured on a text) or else
    from the merge log when it records them (in the encoded training corpus). With occurrences known,
    `flags` says why a token is under-trained (see `FLAGS`): fewer than `min_count` occurrences
    (default: `default_min_count` of all tokens), or a part of a character that never occurs; and,
    always, a token whose text encodes to other tokens (no text can ever produce it).
    """
    check_merge_log(tokenizer, log)
    if occurrences is None and log is not None and log.occurrences is not None:
        occurrences = occurrences_by_id(log.occurrences, token_ids(tokenizer.vocab, tokenizer.merges))
    if occurrences is not None and min_count is None:
        min_count = default_min_count(sum(occurrences.values()))
    made_by = merge_ranks(tokenizer)
    counts = [count for count, _ in log.steps] if log is not None else None
    specials = {t.encode("utf-8") for t in tokenizer.special_tokens}
    entries = []
    for token_id in sorted(tokenizer.vocab):
        token = tokenizer.vocab[token_id]
        entry = VocabEntry(token_id, token, special=token in specials)
        rank = made_by.get(token)
        if rank is not None and not entry.special:
            entry.rank, entry.pair = rank, tokenizer.merges[rank]
            entry.count = counts[rank] if counts is not None else None
        if not entry.special:
            entry.flags = _flags(tokenizer, entry, occurrences, min_count)
        entries.append(entry)
    return entries


def _flags(tokenizer: Tokenizer, entry: VocabEntry, occurrences: "dict[int, int] | None", min_count: int | None) -> list[str]:
    flags = []
    if occurrences is not None:
        entry.occurrences = occurrences.get(entry.id, 0)
        if entry.occurrences < min_count:
            flags.append("rare")
    try:
        text = entry.token.decode("utf-8")
    except UnicodeDecodeError:
        if entry.occurrences == 0:  # not whole characters: no text has them alone, so only merges use them
            flags.append("partial")
    else:
        if tokenizer.encode(text) != [entry.id]:
            flags.append("unreachable")
    return flags


def token_entry(tokenizer: Tokenizer, token_id: int, log: MergeLog | None = None, *,
                made_by: dict[bytes, int] | None = None, min_count: int | None = None) -> VocabEntry:
    """One token's `VocabEntry` (as in `vocab_entries`, with occurrences from the merge log when it
    records them), without going through the whole vocabulary. `made_by` (token bytes -> rank of the
    first merge giving them) may be passed in to save building it for every call."""
    if made_by is None:
        made_by = merge_ranks(tokenizer)
    token = tokenizer.vocab[token_id]
    entry = VocabEntry(token_id, token, special=token in {t.encode("utf-8") for t in tokenizer.special_tokens})
    if entry.special:
        return entry
    rank = made_by.get(token)
    if rank is not None:
        entry.rank, entry.pair = rank, tokenizer.merges[rank]
        entry.count = log.steps[rank][0] if log is not None else None
    occurrences = None
    if log is not None and log.occurrences is not None:
        by_id = occurrences_by_id(log.occurrences, token_ids(tokenizer.vocab, tokenizer.merges))
        occurrences = {token_id: by_id[token_id]} if token_id in by_id else {}
        if min_count is None:
            min_count = default_min_count(sum(log.occurrences))
    entry.flags = _flags(tokenizer, entry, occurrences, min_count)
    return entry


def under_trained(entries: Iterable[VocabEntry]) -> list[VocabEntry]:
    """The entries flagged as under-trained: tokens made by merges first (training made them, and
    later merges took their occurrences), then the rest (bytes that the corpus lacks); each group
    fewest occurrences first, then by id."""
    flagged = [e for e in entries if e.flags]
    return sorted(flagged, key=lambda e: (e.rank is None, e.occurrences if e.occurrences is not None else -1, e.id))


def check_merge_log(tokenizer: Tokenizer, log: MergeLog | None) -> None:
    """Refuse a merge log that does not record this tokenizer's merges (another run's, or a mix)."""
    if log is None:
        return
    problem = None
    if len(log.steps) != len(tokenizer.merges):
        problem = f"has {len(log.steps):,} merges and the tokenizer {len(tokenizer.merges):,}"
    elif log.merged is not None:
        for rank, ((left, right), shown) in enumerate(zip(tokenizer.merges, log.merged)):
            if readable_token(left + right) != shown:
                problem = f"makes {shown!r} at rank {rank} where the tokenizer makes {readable_token(left + right)!r}"
                break
    if problem:
        raise ValueError(f"this merge log {problem}: it is another tokenizer's log (bpe train --out DIR writes both)")


def vocab_tsv_lines(entries: Iterable[VocabEntry]) -> Iterable[str]:
    """`bpe vocab` output: a header, then id, readable token, merge rank, left, right, count, the
    token's occurrences and why it is under-trained (flags joined by commas; empty if it is not).
    Cells are written as `text.tsv` writes them, so pandas and `csv` read the table back."""
    yield tsv.row(["id", "token", "rank", "left", "right", "count", "occurrences", "under-trained"])
    for e in entries:
        token = f"{e.token.decode('utf-8')} (special)" if e.special else readable_token(e.token)
        occurrences = "" if e.occurrences is None else e.occurrences
        if e.pair is None:
            yield tsv.row([e.id, token, "", "", "", "", occurrences, ",".join(e.flags)])
        else:
            count = "" if e.count is None else e.count
            yield tsv.row([e.id, token, e.rank, readable_token(e.pair[0]), readable_token(e.pair[1]), count,
                           occurrences, ",".join(e.flags)])
