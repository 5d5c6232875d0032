"""BPE-dropout (Provilkov et al., 2020): BPE that skips each merge it could make with probability p,
so one text gets a different valid segmentation on each call, as Hugging Face's `BPE(dropout=p)`.

The process, on one pre-token, is Hugging Face's (`merge_all` of its BPE model), step for step:
the candidate merges (adjacent pairs that some merge joins) wait in a queue ordered by (rank,
position). Each one taken from the queue is dropped with probability p and set aside; one that is
not dropped first puts those set aside back, then is merged, unless it is stale (a side of it was
merged meanwhile: entries are not removed from the queue when that happens), and the pairs it makes
with its neighbours join the queue. The pre-token is done when the queue is empty: every merge still
possible was dropped once more. Stale entries draw too, and one that is not dropped also puts the
set-aside merges back: this gives a dropped merge a second chance and makes the final merges of a
word much likelier than 1 - p (measured on Hugging Face's `tokenizers` too; a test compares them).

Because of that second chance, what happens in one part of a pre-token depends on the rest of it,
so a pre-token is never cut into parts here (unlike `encoder.merge_words`): each is processed
whole. Hugging Face's `ignore_merges` (a pre-token that is a token is taken whole) does not apply
with dropout, as in Hugging Face's.

Speed. The outcome is a function of which draws (numbered in the order entries are taken) drop:
with no drop it is plain BPE. The draws are Bernoulli(p), so the number of the first dropped one is
geometric: one uniform number per pre-token occurrence (drawn by NumPy for many at once, and
inverted) says whether it drops within the draws its plain BPE takes. Most occurrences do not (then their ids are the plain ones, kept
per distinct pre-token); the others follow the chain of drops, each step keyed by the pre-token and
the drops so far, whose outcome (ids and number of draws) is computed once and kept.

Randomness. Draws come from NumPy generators seeded by a stream key (the seed, and for `bpe encode`
the work unit's number, for `encode_batch` the text's) and the number of the block of `BLOCK`
pre-tokens the occurrence falls in, so the ids depend on the seed and the sequence of pre-tokens
only: not on how a text is cut into calls (`encode_iterable` gives `encode`'s ids) or onto workers.
"""

import heapq
import secrets
from collections.abc import Callable, Sequence
from itertools import chain
from typing import TYPE_CHECKING

from cs336_basics.encode.encoder import MergeTable

if TYPE_CHECKING:  # NumPy is imported where it is used: training imports this module and needs none
    import numpy as np

Seed = int | Sequence[int] | None  # a seed, or a sequence of non-negative ints (as NumPy's)

# Pre-token occurrences per block of randomness (see the module docstring).
BLOCK = 1 << 13
# Outcomes of drops kept before they are dropped at once (and pre-tokens or keys, before all is).
_MAX_KEPT = 1 << 20


def checked_dropout(dropout: float) -> float:
    """`dropout` as a float in [0, 1]; ValueError otherwise."""
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
        raise ValueError(f"dropout must be a probability between 0 and 1, got {dropout!r}")
    return float(dropout)


def stream_key(seed: "int | Sequence[int] | None") -> tuple[int, ...]:
    """The key of a random stream: the seed's numbers (a fresh random seed when None)."""
    if seed is None:
        return (secrets.randbits(64),)
    numbers = (seed,) if isinstance(seed, int) else tuple(seed) if isinstance(seed, (tuple, list)) else None
    if not numbers or any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in numbers):
        raise ValueError(f"seed must be a non-negative int (or a sequence of them) or None, got {seed!r}")
    return numbers


def randomness(dropout: float, seed: "int | Sequence[int] | None") -> "tuple[()] | tuple[float, Stream]":
    """What `TextEncoder.encode_packed` takes after the text: nothing for `dropout` 0 (plain BPE),
    else the probability and a `Stream` from `seed`. ValueError for a bad probability or seed."""
    dropout = checked_dropout(dropout)
    key = stream_key(seed)
    return (dropout, Stream(key, dropout)) if dropout else ()


def simulate(word: str, drops: Sequence[int], table: MergeTable, stale: "list[int] | None" = None) -> tuple[str, int]:
    """Hugging Face's dropout BPE of one pre-token (bytes as id-characters, see `encoder`) where the
    draws numbered in `drops` (1-based, increasing) drop and every other draw keeps: (its tokens as
    id-characters, the number of draws made). See the module docstring. The numbers of the draws
    of stale entries that are kept are appended to `stale` when given."""
    rank_of = table.pair_rank.get
    merged = table.merged
    n = len(word)
    tokens: list[str | None] = list(word)
    nxt = [*range(1, n), -1]
    prv = list(range(-1, n - 1))
    # Queue entries are rank << _SHIFT | position (ints order as (rank, position) do, and faster);
    # `current` holds, for each token, the entry of the pair it starts now (-1: none), so an entry
    # taken from the queue is stale exactly when it is not its token's current one.
    current = [-1] * n
    queue = []
    for i, pair in enumerate(map(str.__add__, word, word[1:])):
        if (r := rank_of(pair)) is not None:
            current[i] = entry = r << _SHIFT | i
            queue.append(entry)
    heapq.heapify(queue)
    pop, push = heapq.heappop, heapq.heappush
    set_aside: list[int] = []
    pending = iter(drops)
    next_drop = next(pending, 0)
    draws = 0
    while queue:
        entry = pop(queue)
        draws += 1
        if draws == next_drop:
            set_aside.append(entry)
            next_drop = next(pending, 0)
            continue
        if set_aside:
            for skipped in set_aside:
                push(queue, skipped)
            set_aside.clear()
        i = entry & _POSITION
        if current[i] != entry:
            if stale is not None:
                stale.append(draws)
            continue
        j = nxt[i]
        tokens[i] = new = merged[entry >> _SHIFT][1]
        tokens[j] = None
        current[j] = -1
        k = nxt[i] = nxt[j]
        current[i] = -1
        if k >= 0:
            prv[k] = i
            if (r := rank_of(new + tokens[k])) is not None:
                current[i] = entry = r << _SHIFT | i
                push(queue, entry)
        p = prv[i]
        if p >= 0:
            current[p] = -1
            if (r := rank_of(tokens[p] + new)) is not None:
                current[p] = entry = r << _SHIFT | p
                push(queue, entry)
    return "".join(filter(None, tokens)), draws


# A queue entry's position takes its low _SHIFT bits (more than any pre-token's length in bytes).
_SHIFT = 40
_POSITION = (1 << _SHIFT) - 1


class DropoutEncoder:
    """Keys (the chunks or pre-tokens a `TextEncoder` hands its cache) to packed ids with dropout;
    what it keeps between calls is deterministic (plain BPE, outcomes of given drops), never random
    ids. One per `TextEncoder`, built when dropout is first asked for.

    Each occurrence of a pre-token takes one uniform number from the stream, turned into the number
    of its first dropped draw; the occurrences that drop within their plain BPE's draws follow their
    chain of drops (see the module docstring), the others take the plain ids.
    """

    def __init__(self, table: MergeTable, codec: str, fixed: dict[str, bytes],
                 key_pretokens: "Callable[[str], list[str]] | None"):
        self._table = table
        self._codec = codec
        self._fixed = fixed  # keys with given ids: special and added tokens
        self._split = key_pretokens or (lambda key: [key])  # a key -> its pre-tokens
        self._clear()

    def _clear(self) -> None:
        import numpy as np

        self._words: dict[str, int] = {}  # pre-token -> its number
        self._chars: list[str] = []  # by number: the bytes as id-characters
        self._bytes: list[bytes] = []  # by number: the ids of the single bytes (p = 1)
        self._pops = np.zeros(1024, np.int64)  # by number: the draws plain BPE makes
        self._keys: dict[str, tuple[int, ...]] = {}  # key -> its pre-tokens' numbers
        self._outcomes: dict[tuple, tuple[int, bytes]] = {}  # (number, drops) -> (draws, ids)
        self._plain: list[bytes] = []  # by number: the ids of plain BPE
        self._stale: list[frozenset[int]] = []  # by number: the draws of stale entries in plain BPE

    def _number(self, piece: str) -> int:
        number = len(self._chars)
        fixed = self._fixed.get(piece)
        stale: list[int] = []
        if fixed is not None:
            chars, plain, draws = "", fixed, 0
        else:
            raw = piece if piece.isascii() else piece.encode("utf-8").decode("latin-1")
            chars = raw.translate(self._table.byte_chars)
            tokens, draws = simulate(chars, (), self._table, stale)
            plain = tokens.encode(self._codec, "surrogatepass")
        self._stale.append(frozenset(stale))
        self._words[piece] = number
        self._chars.append(chars)
        self._plain.append(plain)
        self._bytes.append(plain if fixed is not None else chars.encode(self._codec, "surrogatepass"))
        if number >= len(self._pops):
            self._pops = _grown(self._pops, 0)
        self._pops[number] = draws
        return number

    def _numbers(self, key: str) -> tuple[int, ...]:
        words = self._words
        number = self._number
        pieces = [key] if key in self._fixed else self._split(key)
        numbers = tuple(words[piece] if piece in words else number(piece) for piece in pieces)
        self._keys[key] = numbers
        return numbers

    def encode(self, keys: list[str], dropout: float, stream: "Stream") -> bytes:
        """The packed ids of `keys`, one after the other, with each merge dropped with probability
        `dropout`, drawing from `stream`."""
        import numpy as np

        if len(self._plain) > _MAX_KEPT or len(self._keys) > _MAX_KEPT:
            self._clear()
        elif len(self._outcomes) > _MAX_KEPT:
            self._outcomes.clear()
        known = self._keys
        numbers_of = self._numbers
        occurrences = list(chain.from_iterable(known[k] if k in known else numbers_of(k) for k in keys))
        if dropout >= 1:
            return b"".join(map(self._bytes.__getitem__, occurrences))
        values = list(map(self._plain.__getitem__, occurrences))
        if not occurrences:
            return b""
        pops = self._pops[np.array(occurrences, np.int64)]
        start = 0
        while start < len(occurrences):
            u, gaps = stream.block_draws(len(occurrences) - start)
            end = start + len(u)
            first = first_drops(u, dropout)
            for i in np.flatnonzero(first <= pops[start:end]).tolist():
                values[start + i] = self._sampled(occurrences[start + i], int(first[i]), gaps)
            start = end
        return b"".join(values)

    def _sampled(self, number: int, first: int, gaps: "Gaps") -> bytes:
        """The ids of one occurrence of pre-token `number` whose first drop is draw `first`."""
        outcomes = self._outcomes
        drops: tuple[int, ...] = (first,)
        at = first
        while True:
            key = (number, drops)
            outcome = outcomes.get(key)
            if outcome is None and len(drops) == 1 and first in self._stale[number]:
                outcome = (draws_with_stale_dropped(int(self._pops[number]), first), self._plain[number])
            elif outcome is None:
                tokens, draws = simulate(self._chars[number], drops, self._table)
                outcome = outcomes[key] = (draws, tokens.encode(self._codec, "surrogatepass"))
            at += gaps.next_gap()
            if at > outcome[0]:
                return outcome[1]
            drops = (*drops, at)


def draws_with_stale_dropped(plain_draws: int, first: int) -> int:
    """The draws of a pre-token's BPE when the only one that drops is number `first`, a stale entry's
    in its plain BPE of `plain_draws` draws: the entry comes back when the next draw keeps and is
    taken once more (unless it was the last), and the tokens are the plain ones."""
    return plain_draws + (first < plain_draws)


def _grown(array: "np.ndarray", fill) -> "np.ndarray":
    """`array` twice as long, the new places holding `fill`."""
    import numpy as np

    bigger = np.full(2 * len(array), fill, array.dtype)
    bigger[: len(array)] = array
    return bigger


def first_drops(u: "np.ndarray", dropout: float) -> "np.ndarray":
    """The number of the first of a run of Bernoulli(`dropout`) draws that drops (1, 2, ...), one
    for each uniform number in `u`, by inversion."""
    import numpy as np

    return np.clip(np.ceil(np.log1p(-u) / np.log1p(-dropout)), 1, 1 << 62).astype(np.int64)


class Gaps:
    """The gaps between dropped draws, for the simulated occurrences of one block, a batch at a time."""

    def __init__(self, seed: list[int], dropout: float):
        self._seed = seed
        self._generator: "np.random.Generator | None" = None  # made when first needed
        self._dropout = dropout
        self._batch: list[int] = []

    def next_gap(self) -> int:
        import numpy as np

        if not self._batch:
            if self._generator is None:
                self._generator = np.random.default_rng(self._seed)
            self._batch = first_drops(self._generator.random(64), self._dropout).tolist()[::-1]
        return self._batch.pop()


class Stream:
    """The randomness of one stream (see the module docstring): one uniform number for each pre-token
    occurrence, in order, and gaps for those simulated. Block b draws the uniform numbers from the
    generator seeded `(*key, b, 0)`, the gaps from `(*key, b, 1)`."""

    def __init__(self, key: tuple[int, ...], dropout: float):
        self._key = key
        self._dropout = dropout
        self._block = -1
        self._used = BLOCK  # occurrences of the current block already given out
        self._uniform: "np.random.Generator | None" = None
        self._gaps: "Gaps | None" = None

    def block_draws(self, wanted: int) -> "tuple[np.ndarray, Gaps]":
        """(the uniform numbers of the next occurrences, at most `wanted` and all in one block, and
        the gaps of that block, for the occurrences simulated)."""
        import numpy as np

        if self._used == BLOCK:
            self._block += 1
            self._uniform = np.random.default_rng([*self._key, self._block, 0])
            self._gaps = Gaps([*self._key, self._block, 1], self._dropout)
            self._used = 0
        n = min(BLOCK - self._used, wanted)
        self._used += n
        return self._uniform.random(n), self._gaps
