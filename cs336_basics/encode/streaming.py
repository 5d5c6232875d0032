"""Streaming encode: the ids of a text given in pieces, holding only about one piece at a time
(`Tokenizer.encode_iterable`).

Text is encoded up to the last place where it can be cut without changing any pre-token or special
token (`last_safe_cut`), so the ids are exactly those of encoding the joined text at once.
"""

from collections.abc import Callable, Iterable, Iterator

import re

from cs336_basics.text.pretokenize import spanned_by_special
from cs336_basics.text.surrogates import fix_surrogates

# Text is searched for a cut once this many characters have come in since the last search.
SEARCH_EVERY = 4096


def encode_iterable(
    iterable: Iterable[str],
    encode_valid: Callable[[str], list[int]],
    last_boundary: "re.Pattern[str] | None",
    cut_tokens: list[str],
    special_tokens: list[str],
) -> Iterator[int]:
    """Yield the ids of `"".join(iterable)`: `encode_valid` (the ids of text holding no surrogates)
    of the text up to each safe cut (see `last_safe_cut`; `last_boundary` is the pattern's, see
    `patterns.Pretokenizer`), then of the rest. A surrogate pair split between two pieces counts
    as the character it stands for, as in the joined text."""
    buffer = ""
    searched = 0  # where the next search for a cut starts: before it, none was found
    held = ""  # a high surrogate ending the last piece: the next may start with its other half
    for piece in iterable:
        piece = held + piece
        held = piece[-1] if piece and "\ud800" <= piece[-1] <= "\udbff" else ""
        buffer += fix_surrogates(piece[: len(piece) - len(held)])  # so cuts are found in fixed text
        if len(buffer) - searched < SEARCH_EVERY:
            continue
        cut, searched = last_safe_cut(buffer, searched, last_boundary, cut_tokens, special_tokens)
        if cut > 0:
            yield from encode_valid(buffer[:cut])
            buffer = buffer[cut:]
            searched = 0
    buffer += fix_surrogates(held)
    if buffer:
        yield from encode_valid(buffer)


def last_safe_cut(
    text: str,
    start: int,
    last_boundary: "re.Pattern[str] | None",
    cut_tokens: list[str],
    special_tokens: list[str],
) -> tuple[int, int]:
    """The last offset after `start` where `text` can be cut whatever follows it (0 if none
    is found), and where the next search may start.

    A cut is a safe boundary of the pattern (`last_boundary` matches up to the last one; see
    `patterns`; for GPT-2, the start of a whitespace run after a non-whitespace character) or the
    start of one of `cut_tokens`, with no special token spanning it, and far enough from the end
    that no special token could start before it and end after the text. Only a few candidates are
    tried, so text that offers none (all whitespace, or overlapping special tokens) costs linear time.
    """
    limit = len(text) - max(max(map(len, special_tokens), default=0), 1)
    next_start = max(limit, start)
    for _ in range(16):
        if limit <= start:
            break
        m = last_boundary.match(text, start, limit + 1) if last_boundary is not None else None
        cut = m.end() if m else -1
        for token in cut_tokens:
            cut = max(cut, text.rfind(token, start, limit + len(token)))
        if cut < max(start, 1):
            break
        if not spanned_by_special(text, cut, special_tokens):
            return cut, next_start
        limit = cut - 1
    return 0, next_start

