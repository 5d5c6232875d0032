"""Pre-tokenization: cutting text at special tokens and into GPT-2 pre-tokens, and counting them.

Everything here is exact with respect to the GPT-2 pattern run by the `regex` package. The fast paths
rest on one fact about that pattern: a pre-token never spans the boundary between a run of
non-whitespace and the run of whitespace that follows it. So text can be cut into *chunks* — a
whitespace run plus the non-whitespace run after it — and each distinct chunk pre-tokenized on its own.
"""

import re
from collections import Counter
from collections.abc import Iterable

import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_GPT2_RE = regex.compile(GPT2_PATTERN)

# The characters that `regex` counts as \s. Stdlib `re` and `str.split()` also count U+001C..U+001F,
# which would cut differently, so the set is spelled out.
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_CHUNK_RE = re.compile(f"[{WHITESPACE}]*[^{WHITESPACE}]+|[{WHITESPACE}]+")

# The GPT-2 pattern restricted to ASCII text, for stdlib `re`, which is about twice as fast as `regex`.
_A = "\t\n\x0b\x0c\r "
_ASCII_RE = re.compile(rf"""'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^{_A}A-Za-z0-9]+|[{_A}]+(?![^{_A}])|[{_A}]+""")


def validate_special_tokens(special_tokens: Iterable[str] | None) -> list[str]:
    """Return the special tokens as a list, raising ValueError for an empty, duplicated or non-str one."""
    if isinstance(special_tokens, (str, bytes)):
        raise ValueError(f"special_tokens must be a list of str, not one {type(special_tokens).__name__}: "
                         f"write [{special_tokens!r}]")
    tokens = list(special_tokens or [])
    for token in tokens:
        if not isinstance(token, str):
            raise ValueError(f"special tokens must be str, got {token!r} ({type(token).__name__})")
        if not token:
            raise ValueError("special tokens must not be empty strings")
    duplicates = sorted({t for t in tokens if tokens.count(t) > 1})
    if duplicates:
        raise ValueError(f"special token listed more than once: {duplicates[0]!r}")
    return tokens


def special_token_regex(special_tokens: Iterable[str], *, keep: bool = False) -> re.Pattern[str] | None:
    """A pattern matching any special token literally, longest first; None when there are none.

    With `keep`, the pattern is a group, so `split` returns the tokens between the documents.
    """
    tokens = sorted(set(special_tokens), key=len, reverse=True)
    if not tokens:
        return None
    alternatives = "|".join(map(re.escape, tokens))
    return re.compile(f"({alternatives})" if keep else alternatives)


def split_on_special_tokens(text: str, special_re: re.Pattern[str] | None) -> list[str]:
    """Cut text into documents at special tokens, dropping the tokens themselves."""
    return special_re.split(text) if special_re is not None else [text]


def pretokenize(text: str) -> list[str]:
    """The GPT-2 pre-tokens of a text that holds no special tokens.

    >>> pretokenize("Hello, world!  ok")
    ['Hello', ',', ' world', '!', ' ', ' ok']
    """
    return _GPT2_RE.findall(text)


def chunks(text: str) -> list[str]:
    """Cut text into chunks, each a whitespace run plus the following non-whitespace run.

    Concatenating the chunks gives back the text, and pre-tokenizing each chunk on its own gives the
    same pre-tokens as pre-tokenizing the whole text.
    """
    return _CHUNK_RE.findall(text)


def pretokenize_chunk(chunk: str) -> list[str]:
    r"""The GPT-2 pre-tokens of one chunk (see `chunks`).

    Most chunks are a word with at most one space before it, which is one pre-token (` ?\p{L}+`;
    `str.isalpha` accepts only letters that `regex` also calls \p{L}, as a test checks). Others go
    to the stdlib engine when ASCII, which is about twice as fast as `regex`.
    """
    if (chunk[1:] if chunk[0] == " " else chunk).isalpha():
        return [chunk]
    return _ASCII_RE.findall(chunk) if chunk.isascii() else _GPT2_RE.findall(chunk)


def count_chunks(text: str, special_re: re.Pattern[str] | None, counts: Counter[str] | None = None) -> Counter[str]:
    """Add to `counts` how often each chunk occurs in the documents of `text`."""
    counts = Counter() if counts is None else counts
    for document in split_on_special_tokens(text, special_re):
        counts.update(_CHUNK_RE.findall(document))
    return counts


def pretoken_counts(chunk_counts: dict[str, int]) -> dict[str, int]:
    """Turn chunk counts into pre-token counts, running the GPT-2 pattern once per distinct chunk."""
    counts: dict[str, int] = {}
    get = counts.get
    for chunk, n in chunk_counts.items():
        for piece in pretokenize_chunk(chunk):
            counts[piece] = get(piece, 0) + n
    return counts
