"""Encoding with a trained vocabulary: the tables it needs and BPE applied to one pre-token.

BPE on a pre-token merges the leftmost adjacent pair of lowest rank, again and again, as tiktoken
does. Tokens are handled as characters `chr(id)`, so pairs are 2-character strings looked up in one
dict. A short pre-token keeps the ranks of its adjacent pairs in a list, updated around each merge
(`min` and `list.index` run in C). On a long one (with pattern "none" a whole document, maybe
megabytes) that would be quadratic. There every occurrence of the lowest-ranked pair is merged at
once with `str.replace` (left to right, without overlap) while that shortens the word fast; then the
tokens become a linked list, each ranked pair keeps the positions where it occurs, and a heap gives
the ranks present in increasing order: each rank's occurrences are merged left to right, and the
pairs they make are added to the positions and, when new, their ranks to the heap. The work is in
proportion to the merges made, not to the word's length times the ranks.

Merging all occurrences of a pair at once, rank after rank, agrees with merging one at a time
because every merge's parts are single bytes or tokens made by earlier merges (checked when the table
is built): the tokens a merge makes can only take part in later merges, so the next lowest pair is
the next occurrence of the same pair.
"""

import heapq
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain, repeat

from cs336_basics.pretokenize import pretokenize_chunk

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
    made = {bytes([b]) for b in range(256)}
    for rank, (left, right) in enumerate(merges):
        for part in (left, right, left + right):
            if part not in ids:
                raise ValueError(f"merge {rank + 1} ({left!r}, {right!r}) needs {part!r}, which is not in the vocabulary")
        for part in (left, right):
            if part not in made:
                raise ValueError(
                    f"merge {rank + 1} ({left!r}, {right!r}) uses {part!r} before any earlier merge makes it; "
                    "merges must be listed in the order they were learned"
                )
        made.add(left + right)
        pair = chr(ids[left]) + chr(ids[right])
        pair_rank.setdefault(pair, rank)  # a repeated merge can never apply again
        merged.append((pair, chr(ids[left + right])))
    return MergeTable(byte_chars, pair_rank, merged)


# Up to this many tokens a pre-token is merged one pair at a time; longer ones by `str.replace`.
_SHORT = 64


def bpe(piece: bytes, table: MergeTable) -> tuple[int, ...]:
    """The token ids of one pre-token: merge the leftmost lowest-ranked pair until none is left."""
    word = piece.decode("latin-1").translate(table.byte_chars)
    if len(word) < 2:
        return tuple(map(ord, word))
    rank_of = table.pair_rank.get
    merged = table.merged
    if len(word) > _SHORT:
        # Merging every occurrence of the lowest-ranked pair at once costs a pass over the word; it is
        # kept while each pass removes at least 1/16 of the tokens (so long runs like "aaaa..." take
        # a few passes), then the heap takes over. Either way the total is near-linear.
        while len(word) > 1:
            rank = min(map(rank_of, map(str.__add__, word, word[1:]), repeat(_NO_RANK)))
            if rank == _NO_RANK:
                break
            pair, new = merged[rank]
            shorter = word.replace(pair, new)
            if (len(word) - len(shorter)) * 16 < len(word):
                return _bpe_long(shorter, table)
            word = shorter
        return tuple(map(ord, word))

    tokens = list(word)
    ranks = list(map(rank_of, map(str.__add__, word, word[1:]), repeat(_NO_RANK)))
    while ranks:
        rank = min(ranks)
        if rank == _NO_RANK:
            break
        i = ranks.index(rank)
        new = merged[rank][1]
        tokens[i] = new
        del tokens[i + 1]
        del ranks[i]
        if i < len(ranks):
            ranks[i] = rank_of(new + tokens[i + 1], _NO_RANK)
        if i:
            ranks[i - 1] = rank_of(tokens[i - 1] + new, _NO_RANK)
    return tuple(map(ord, tokens))


def _bpe_long(word: str, table: MergeTable) -> tuple[int, ...]:
    """`bpe` on a long sequence of id-characters, in near-linear time (see the module docstring)."""
    rank_of = table.pair_rank.get
    merged = table.merged
    n = len(word)
    tokens: list[str | None] = list(word)
    nxt = array("q", range(1, n + 1))  # n: no next token
    prv = array("q", range(-1, n - 1))  # -1: no previous token
    sites: dict[str, list[int]] = {}
    for i, pair in enumerate(map(str.__add__, word, word[1:])):
        if pair in sites:
            sites[pair].append(i)
        elif rank_of(pair) is not None:
            sites[pair] = [i]
    ranks = list(map(rank_of, sites))
    heapq.heapify(ranks)
    push = heapq.heappush
    while ranks:
        pair, new = merged[heapq.heappop(ranks)]
        positions = sites.pop(pair)
        positions.sort()  # left to right: of overlapping occurrences the left one merges
        a, b = pair
        for i in positions:
            if tokens[i] != a:
                continue
            j = nxt[i]
            if j == n or tokens[j] != b:
                continue
            tokens[j] = None
            tokens[i] = new
            k = nxt[i] = nxt[j]
            if k != n:
                prv[k] = i
                q = new + tokens[k]
                if q in sites:
                    sites[q].append(i)
                elif (r := rank_of(q)) is not None:
                    sites[q] = [i]
                    push(ranks, r)
            p = prv[i]
            if p >= 0:
                q = tokens[p] + new
                if q in sites:
                    sites[q].append(p)
                elif (r := rank_of(q)) is not None:
                    sites[q] = [p]
                    push(ranks, r)
    return tuple(ord(t) for t in tokens if t is not None)


class EncodeCache(dict):
    """Chunk or pre-token -> token ids; a missing entry is computed, then kept.

    A chunk (see `patterns`) of one pre-token goes straight to `bpe`; a longer one is cut into
    pre-tokens by `split`, each looked up here too (a pre-token alone is a chunk of one pre-token).
    With `split=None` every key is a pre-token.
    Memory stays bounded: when `max_entries` are held, they become the *old* generation and a new
    one starts; an entry found in the old generation moves to the new one, so what text uses
    often survives, and what it stopped using is dropped a generation later. Keys longer than
    `max_key_length` are not kept.
    """

    def __init__(
        self,
        table: MergeTable,
        max_entries: int,
        max_key_length: int = 64,
        split: Callable[[str], list[str]] | None = pretokenize_chunk,
    ):
        super().__init__()
        self._split = split
        self._table = table
        self._old: dict[str, tuple[int, ...]] = {}
        self._max_entries = max_entries
        self._max_key_length = max_key_length

    def __missing__(self, chunk: str) -> tuple[int, ...]:
        ids = self._old.get(chunk)
        if ids is None:
            pieces = self._split(chunk) if self._split is not None else None
            if pieces is None or len(pieces) == 1:
                ids = bpe(chunk.encode("utf-8"), self._table)
            else:
                ids = tuple(chain.from_iterable(map(self.__getitem__, pieces)))
        if len(chunk) <= self._max_key_length:
            if len(self) >= self._max_entries:
                self._old = dict(self)
                self.clear()
            self[chunk] = ids
        return ids
