"""The data that defines a tokenizer (vocabulary, merges, special tokens), checked where it enters.

`bpe.Tokenizer` takes its vocabulary and merges through `checked_vocab` and `checked_merges`, and
gives the special tokens missing from the vocabulary ids with `add_special_tokens`.
"""

from cs336_basics.formats import gpt2


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
