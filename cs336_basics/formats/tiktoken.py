"""tiktoken's rank files (`.tiktoken`): reading, checking, writing, and recovering merges from ranks.

A rank file holds one token per line, `base64(bytes) rank`, and no merges. tiktoken encodes a piece
by merging, again and again, the leftmost adjacent pair whose concatenation has the lowest rank
(any pair whose concatenation is a token, not only a listed merge). We recover one merge per token:
the two parts that this same BPE, allowed only ranks below the token's, leaves of the token's bytes
(`recover_merges`). Listing those merges in rank order gives exactly tiktoken's ids:

    Say tiktoken merges an adjacent pair (x, y) into t. Before that step x and y are whole tokens,
    so no earlier merge crossed the edges of t's bytes and every earlier merge inside them was the
    lowest-ranked pair there: those bytes went through the steps of BPE on t alone. BPE on t alone
    only merges pairs ranked below t until it is left with the recovered (l, r). So (x, y) = (l, r):
    tiktoken only ever merges recovered pairs, lowest rank first and leftmost first, as we do.

tiktoken also takes a piece that is itself a token without running BPE; BPE gives that token
anyway, since its own bytes end in its recovered pair. The argument needs every token of two bytes
or more to be recoverable, which `recover_merges` checks. It is proven again on the real
vocabularies by the tests (tests/test_pretrained.py).
"""

import base64
import binascii
import gzip
import hashlib
import os
from itertools import repeat
from pathlib import Path

from cs336_basics.formats.gpt2 import MAX_TOKEN_ID
from cs336_basics.formats.staged import atomic_write_texts


def parse_ranks(data: bytes, *, source: str = "rank file") -> dict[bytes, int]:
    """Parse the text of a `.tiktoken` file; raise ValueError naming `source` and the line."""
    ranks: dict[bytes, int] = {}
    seen_ranks: dict[int, int] = {}
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as e:
        raise ValueError(f"{source}: not a rank file (byte {e.start} is not ASCII)") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line:
            continue
        fields = line.split(" ")
        if len(fields) != 2 or not fields[1].isdigit():
            raise ValueError(f"{source}: line {number} must be 'base64-token rank': {line[:80]!r}")
        try:
            token = base64.b64decode(fields[0], validate=True)
        except binascii.Error:
            raise ValueError(f"{source}: line {number} has invalid base64 {fields[0][:80]!r}") from None
        rank = int(fields[1])
        if not token:
            raise ValueError(f"{source}: line {number} holds an empty token")
        if token in ranks:
            raise ValueError(f"{source}: line {number} repeats the token {token!r} (rank {ranks[token]})")
        if rank in seen_ranks:
            raise ValueError(f"{source}: line {number} repeats rank {rank} (line {seen_ranks[rank]})")
        ranks[token] = rank
        seen_ranks[rank] = number
    if not ranks:
        raise ValueError(f"{source}: holds no tokens")
    return ranks


def read_rank_file(path: str | os.PathLike) -> bytes:
    """The contents of a `.tiktoken` file, uncompressed if its name ends in `.gz` (ValueError for
    a damaged gzip file, OSError for one that cannot be read)."""
    raw = Path(path).read_bytes()
    if str(path).endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise ValueError(f"{path}: not a complete gzip file ({e})") from None
    return raw


def load_ranks(path: str | os.PathLike, *, expected_sha256: str | None = None) -> dict[bytes, int]:
    """Read a `.tiktoken` rank file (gzip-compressed if its name ends in `.gz`).

    With `expected_sha256`, the (uncompressed) contents must have that hash, as tiktoken checks.
    """
    raw = read_rank_file(path)
    if expected_sha256 is not None:
        digest = hashlib.sha256(raw).hexdigest()
        if digest != expected_sha256:
            raise ValueError(
                f"{path}: sha256 is {digest}, expected {expected_sha256} (a damaged or different file)"
            )
    return parse_ranks(raw, source=str(path))


def dump_ranks(ranks: dict[bytes, int]) -> str:
    """The text of a `.tiktoken` file, lines in rank order (as tiktoken writes them)."""
    return "".join(
        f"{base64.b64encode(token).decode('ascii')} {rank}\n"
        for token, rank in sorted(ranks.items(), key=lambda item: item[1])
    )


def save_ranks(ranks: dict[bytes, int], path: str | os.PathLike) -> None:
    """Write a `.tiktoken` rank file atomically."""
    atomic_write_texts({path: dump_ranks(ranks)})


_NO_RANK = 1 << 62


_SINGLE_BYTES = [bytes([b]) for b in range(256)]


def _bpe(token: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    """tiktoken's BPE on `token`'s bytes with `ranks`: again and again, merge the leftmost adjacent
    pair whose concatenation has the lowest rank."""
    parts = list(map(_SINGLE_BYTES.__getitem__, token))
    rank_of = ranks.get
    pair_ranks = list(map(rank_of, map(bytes.__add__, parts, parts[1:]), repeat(_NO_RANK)))
    while pair_ranks:
        best = min(pair_ranks)
        if best == _NO_RANK:
            break
        where = pair_ranks.index(best)  # the leftmost of the lowest
        merged = parts[where] + parts[where + 1]
        parts[where : where + 2] = [merged]
        del pair_ranks[where]
        if where < len(pair_ranks):
            pair_ranks[where] = rank_of(merged + parts[where + 1], _NO_RANK)
        if where:
            pair_ranks[where - 1] = rank_of(parts[where - 1] + merged, _NO_RANK)
    return parts


def recover_merges(ranks: dict[bytes, int], *, source: str = "ranks") -> list[tuple[bytes, bytes]]:
    """One merge per token of two bytes or more, in rank order: the two parts that BPE with only
    lower ranks leaves of the token's bytes (see the module docstring for why this is exact).

    Raises ValueError naming `source` when a single byte is missing or a token cannot be recovered.
    """
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise ValueError(
            f"{source}: no token for the single byte {bytes([missing[0]])!r} ({len(missing)} bytes missing); "
            "byte-level BPE needs all 256"
        )
    if max(ranks.values()) > MAX_TOKEN_ID:
        raise ValueError(f"{source}: rank {max(ranks.values())} is above the largest id we hold, {MAX_TOKEN_ID}")
    merges: list[tuple[bytes, bytes]] = []
    below: dict[bytes, int] = {}  # the tokens of lower rank than the current one
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) <= 2:  # a byte, or two bytes that nothing below can join
            below[token] = rank
            if len(token) == 2:
                merges.append((token[:1], token[1:]))
            continue
        parts = _bpe(token, below)
        below[token] = rank
        if len(parts) != 2:
            shown = " + ".join(map(repr, parts[:8])) + (" + ..." if len(parts) > 8 else "")
            raise ValueError(
                f"{source}: token {token!r} (rank {rank}) cannot be recovered as a merge: BPE with the "
                f"lower ranks leaves {len(parts)} parts ({shown}), so these ranks do not come from BPE"
            )
        merges.append((parts[0], parts[1]))
    return merges


def vocab_from_ranks(ranks: dict[bytes, int], special_tokens: dict[str, int] | None = None) -> dict[int, bytes]:
    """The vocabulary id -> bytes of ranks and special tokens (ids are the ranks)."""
    vocab = {rank: token for token, rank in ranks.items()}
    for text, token_id in (special_tokens or {}).items():
        if token_id in vocab:
            raise ValueError(f"special token {text!r} has id {token_id}, which is the rank of {vocab[token_id]!r}")
        vocab[token_id] = text.encode("utf-8")
    return vocab


def ranks_from_vocab(
    vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: list[str]
) -> dict[bytes, int]:
    """Our ids as tiktoken ranks, if tiktoken's BPE over them gives our ids; else ValueError.

    That holds when every token other than a special token is a single byte or made by a merge, and
    the merges recovered from the ids are our merges (the module docstring says why that suffices).
    """
    specials = {token.encode("utf-8") for token in special_tokens}
    ranks = {token: token_id for token_id, token in vocab.items() if token not in specials}
    made = {left + right for left, right in merges}
    for token, token_id in ranks.items():
        if len(token) > 1 and token not in made:
            raise ValueError(
                f"token {token!r} (id {token_id}) is made by no merge, so its id cannot be a rank "
                "(tiktoken would produce it by merging its parts)"
            )
    order = sorted(merges, key=lambda merge: ranks[merge[0] + merge[1]])
    if order != merges:
        first = next(i for i, (a, b) in enumerate(zip(order, merges)) if a != b)
        left, right = merges[first]
        raise ValueError(
            f"the ids do not follow the merge order (merge {first + 1}, {left!r} + {right!r}, makes id "
            f"{ranks[left + right]}), so they cannot be tiktoken ranks; ids that follow the merges, as "
            "train_bpe gives, can"
        )
    try:
        recovered = recover_merges(ranks, source="vocabulary")
    except ValueError as e:
        raise ValueError(f"the ids cannot be tiktoken ranks: {e}") from None
    if recovered != merges:
        first = next(i for i, (a, b) in enumerate(zip(recovered, merges)) if a != b)
        raise ValueError(
            f"the ids cannot be tiktoken ranks: tiktoken would make {merges[first][0] + merges[first][1]!r} "
            f"from {recovered[first]!r}, not from our merge {merges[first]!r}"
        )
    return ranks
