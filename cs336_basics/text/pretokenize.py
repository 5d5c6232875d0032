"""Pre-tokenization: cutting text at special tokens and into pre-tokens, and counting them.

The patterns, and the facts about where their pre-tokens never span, live in `patterns`: text is cut
into *chunks* at those places and each distinct chunk is pre-tokenized on its own. The functions
without a `pretokenizer` argument use GPT-2's pattern.
"""

import re
from collections import Counter
from collections.abc import Iterable
from itertools import chain

from cs336_basics.text import patterns
from cs336_basics.text.patterns import GPT2 as GPT2_PATTERN  # noqa: F401 (re-exported)
from cs336_basics.text.patterns import WHITESPACE, Pretokenizer  # noqa: F401

_GPT2 = patterns.get("gpt2")


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


def spanned_by_special(text, pos: int, special_tokens) -> bool:
    """Whether an occurrence of one of `special_tokens` in `text` starts before `pos` and ends after
    it (text and tokens both `str`, or both `bytes`): a cut at `pos` would split it."""
    for token in special_tokens:
        i = text.find(token, max(pos - len(token) + 1, 0), pos + len(token) - 1)
        if i != -1 and i < pos:
            return True
    return False


def special_token_regex(special_tokens: Iterable[str], *, keep: bool = False) -> re.Pattern[str] | None:
    """A pattern matching any special token literally: the leftmost occurrence, and of those
    starting there the longest (as Hugging Face's added tokens match); None when there are none.

    With `keep`, the pattern is a group, so `split` returns the tokens between the documents. The
    tokens are spelled as a trie (`<(?:a(?:b)?|c)` for "<a", "<ab", "<c"), each optional ending
    tried after the longer ones, so that a position tries only the tokens that share what was read
    (four times faster than one alternative per token with DeepSeek's 1,283 added tokens).
    """
    tokens = set(special_tokens)
    if not tokens:
        return None
    trie: dict = {}
    for token in tokens:
        node = trie
        for character in token:
            node = node.setdefault(character, {})
        node[""] = {}  # a token ends here
    alternatives = _trie_regex(trie)
    return re.compile(f"({alternatives})" if keep else f"(?:{alternatives})")


def _trie_regex(node: dict) -> str:
    branches = [re.escape(character) + _trie_regex(child) for character, child in sorted(node.items()) if character]
    if not branches:
        return ""
    if len(branches) == 1 and "" not in node:
        return branches[0]
    return "(?:" + "|".join(branches) + ")" + ("?" if "" in node else "")


def split_on_special_tokens(text: str, special_re: re.Pattern[str] | None) -> list[str]:
    """Cut text into documents at special tokens, dropping the tokens themselves."""
    return special_re.split(text) if special_re is not None else [text]


def pretokenize(text: str) -> list[str]:
    """The GPT-2 pre-tokens of a text that holds no special tokens.

    >>> pretokenize("Hello, world!  ok")
    ['Hello', ',', ' world', '!', ' ', ' ok']
    """
    return _GPT2.pretokens(text)


def chunks(text: str) -> list[str]:
    """Cut text into chunks, each a whitespace run plus the following non-whitespace run.

    Concatenating the chunks gives back the text, and pre-tokenizing each chunk on its own gives the
    same pre-tokens as pre-tokenizing the whole text.
    """
    return _GPT2.chunks(text)


def pretokenize_chunk(chunk: str) -> list[str]:
    r"""The GPT-2 pre-tokens of one chunk (see `chunks`).

    Most chunks are a word with at most one space before it, which is one pre-token (` ?\p{L}+`;
    `str.isalpha` accepts only letters that `regex` also calls \p{L}, as a test checks). Others go
    to the stdlib engine when ASCII, which is about twice as fast as `regex`.
    """
    return _GPT2.chunk_pretokens(chunk)


def count_chunks(
    text: str,
    special_re: re.Pattern[str] | None,
    counts: Counter[str] | None = None,
    pretokenizer: Pretokenizer = _GPT2,
) -> Counter[str]:
    """Add to `counts` how often each chunk occurs in the documents of `text` (see `patterns`).

    Without a safe boundary (a custom regex, or "none") a chunk is a document's list of pre-tokens
    counted at once, so that text the regex leaves unmatched is reported here, where it is read.
    """
    counts = Counter() if counts is None else counts
    documents = split_on_special_tokens(text, special_re)
    if pretokenizer.boundary:
        # One update over all documents: a call per document costs more than its chunks when
        # documents are short.
        counts.update(chain.from_iterable(map(pretokenizer.chunk_re.findall, documents)))
    else:
        for document in documents:
            counts.update(pretokenizer.pretokens(document))
    return counts


def pretoken_counts(
    chunk_counts: dict[str, int], pretokenizer: Pretokenizer = _GPT2, into: dict[str, int] | None = None
) -> dict[str, int]:
    """Turn chunk counts into pre-token counts, running the pattern once per distinct chunk; the
    counts are added to `into` if given (and it is returned).

    `chunk_counts` is emptied as it is read, so that each chunk's memory can hold the pre-tokens
    that follow rather than both tables being whole at once.
    """
    counts: dict[str, int] = {} if into is None else into
    get = counts.get
    if not pretokenizer.boundary:  # count_chunks counted pre-tokens already
        if counts:
            for piece, n in chunk_counts.items():
                counts[piece] = get(piece, 0) + n
        else:
            counts.update(chunk_counts)
        chunk_counts.clear()
        return counts
    split = pretokenizer.chunk_pretokens
    pop = chunk_counts.popitem
    for _ in range(len(chunk_counts)):
        chunk, n = pop()
        for piece in split(chunk):
            counts[piece] = get(piece, 0) + n
    return counts
