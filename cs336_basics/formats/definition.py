"""The data that defines a tokenizer, `TokenizerDefinition`, and its checks where it enters.

A definition is what the loaders of `pretrained` and `hf` give and what `Tokenizer.from_definition`
takes: the vocabulary, the merges, the special tokens, the pre-tokenization pattern (a name, a
regex or a Hugging Face pipeline of normalizers and Split steps, see `text.pipelines`: the pattern
says how text is cut into pre-tokens and nothing else), and what a `tokenizer.json` adds beyond
pre-tokenization: its added tokens' flags and its post-processor. `bpe.Tokenizer` takes its
vocabulary and merges through `checked_vocab` and `checked_merges`, its added-token flags and
post-processor through `checked_added_tokens`, and gives the special tokens missing from the
vocabulary ids with `add_special_tokens`.
"""

from typing import NamedTuple

from cs336_basics.formats import gpt2
from cs336_basics.text import pipelines

# The flags (special, normalized) of a special token that a definition does not list: matched on
# the raw text before anything else, as tiktoken does.
DEFAULT_FLAGS = (True, False)


class TokenizerDefinition(NamedTuple):
    """What defines a tokenizer: ids -> bytes, merges in rank order, special tokens (the first one
    joins documents), the pattern, and, from a Hugging Face `tokenizer.json` (under a pipeline
    pattern only): `added_tokens`, the flags `(special, normalized)` of the added tokens whose flags
    are not `DEFAULT_FLAGS`, and `post_processor` (its JSON, honoured by `Tokenizer.encode(...,
    add_special_tokens=True)` only)."""

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    special_tokens: list[str]
    pattern: str
    added_tokens: dict[str, tuple[bool, bool]] = {}
    post_processor: "dict | None" = None


def checked_added_tokens(
    added_tokens: "dict[str, tuple[bool, bool]] | None", post_processor: "dict | None", pattern: str
) -> tuple[dict[str, tuple[bool, bool]], "dict | None"]:
    """The added tokens' flags without the default ones, sorted, and the post-processor; ValueError
    for flags that are not pairs of bools, or for flags or a post-processor under a pattern that is
    not a Hugging Face pipeline (only a pipeline matches added tokens as `tokenizers` does)."""
    flags: dict[str, tuple[bool, bool]] = {}
    for token, pair in sorted((added_tokens or {}).items()):
        if type(token) is not str or not isinstance(pair, (tuple, list)) or len(pair) != 2 or not all(
            type(x) is bool for x in pair
        ):
            raise ValueError(f"added_tokens must map each token to (special, normalized) bools, got {token!r}: {pair!r}")
        if tuple(pair) != DEFAULT_FLAGS:
            flags[token] = (pair[0], pair[1])
    if post_processor is not None and not isinstance(post_processor, dict):
        raise ValueError(f"post_processor must be a dict (a tokenizer.json's), got {type(post_processor).__name__}")
    if (flags or post_processor is not None) and not pipelines.is_pipeline(pattern):
        raise ValueError(
            "added-token flags and a post-processor need a Hugging Face pipeline pattern (see text.pipelines), "
            f"not {pattern[:60]!r}"
        )
    return flags, post_processor


def checked_merges(merges: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The merges as a list of pairs of bytes (bytearrays and lists copied); ValueError naming the
    first that is not a pair of bytes."""
    checked = []
    for n, merge in enumerate(merges, start=1):
        if type(merge) is tuple and len(merge) == 2 and type(merge[0]) is bytes and type(merge[1]) is bytes:
            checked.append(merge)  # the usual case, without copying
            continue
        if (
            not isinstance(merge, (tuple, list))
            or len(merge) != 2
            or not all(isinstance(part, (bytes, bytearray)) for part in merge)
        ):
            raise ValueError(f"merge {n} is {merge!r}; each merge must be a pair of bytes")
        checked.append((bytes(merge[0]), bytes(merge[1])))
    return checked


def checked_vocab(vocab: dict[int, bytes]) -> dict[int, bytes]:
    """A copy of the vocabulary with bytes tokens; ValueError for an id that is not an int from 0 to
    `gpt2.MAX_TOKEN_ID`, a token that is not bytes, or two ids of one token."""
    if not isinstance(vocab, dict):
        raise ValueError(f"vocab must be a dict from id to bytes, got {type(vocab).__name__}")
    checked: dict[int, bytes] = {}
    seen: dict[bytes, int] = {}
    for token_id, token in vocab.items():
        if type(token_id) is not int or not 0 <= token_id <= gpt2.MAX_TOKEN_ID:
            raise ValueError(f"vocab ids must be ints from 0 to {gpt2.MAX_TOKEN_ID}, got {token_id!r}")
        if type(token) is not bytes:
            if not isinstance(token, (bytes, bytearray)):
                raise ValueError(f"vocab id {token_id} maps to {token!r}; tokens must be bytes")
            token = bytes(token)
        if token in seen:
            raise ValueError(f"vocab ids {seen[token]} and {token_id} both map to {token!r}")
        seen[token] = token_id
        checked[token_id] = token
    return checked


def add_special_tokens(vocab: dict[int, bytes], special_tokens: list[str]) -> dict[bytes, int]:
    """Give each special token missing from `vocab` the next free id (in place, in order); return
    every token's id."""
    ids = {token: token_id for token_id, token in vocab.items()}
    next_id = max(vocab, default=-1) + 1
    for token in special_tokens:
        token_bytes = token.encode("utf-8")
        if token_bytes not in ids:
            vocab[next_id] = token_bytes
            ids[token_bytes] = next_id
            next_id += 1
    return ids
