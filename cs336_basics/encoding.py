"""Encoding with a trained vocabulary: the tables it needs and BPE applied to one pre-token.

A pre-token is handled as a `str` with one character per token id (`chr(id)`), so that finding the
lowest-ranked pair and merging it run in C: `min` over `dict.get` of every adjacent pair, then
`str.replace`, which merges every occurrence left to right without overlap, as applying one merge
rank at a time does.
"""

from dataclasses import dataclass
from itertools import repeat

_NO_RANK = 1 << 62


@dataclass(frozen=True)
class MergeTable:
    """What BPE needs from a vocabulary and its merges, in id-character form.

    byte_chars: a `str.translate` table from each byte value (as a Latin-1 code point) to its token.
    pair_rank:  the two id-characters of each merge -> the merge's rank (its position in the list).
    merged:     rank -> (the pair, the id-character of the merged token).
    """

    byte_chars: dict[int, str]
    pair_rank: dict[str, int]
    merged: list[tuple[str, str]]


def build_merge_table(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> MergeTable:
    """Build the tables; raise ValueError if a byte, a merged token or its parts lack an id."""
    ids = {token: token_id for token_id, token in vocab.items()}
    missing = [b for b in range(256) if bytes([b]) not in ids]
    if missing:
        raise ValueError(
            f"vocabulary has no token for the single byte {bytes([missing[0]])!r} ({len(missing)} bytes missing); "
            "a byte-level BPE vocabulary needs all 256"
        )
    byte_chars = {b: chr(ids[bytes([b])]) for b in range(256)}
    pair_rank: dict[str, int] = {}
    merged: list[tuple[str, str]] = []
    for rank, (left, right) in enumerate(merges):
        for part in (left, right, left + right):
            if part not in ids:
                raise ValueError(f"merge {rank + 1} ({left!r}, {right!r}) needs {part!r}, which is not in the vocabulary")
        pair = chr(ids[left]) + chr(ids[right])
        pair_rank.setdefault(pair, rank)  # a repeated merge can never apply again
        merged.append((pair, chr(ids[left + right])))
    return MergeTable(byte_chars, pair_rank, merged)


def bpe(piece: bytes, table: MergeTable) -> list[int]:
    """The token ids of one pre-token: apply merges, lowest rank first, until none applies."""
    word = piece.decode("latin-1").translate(table.byte_chars)
    rank_of = table.pair_rank.get
    while len(word) > 1:
        rank = min(map(rank_of, map(str.__add__, word, word[1:]), repeat(_NO_RANK)))
        if rank == _NO_RANK:
            break
        pair, new = table.merged[rank]
        word = word.replace(pair, new)
    return list(map(ord, word))
