"""Forced merges: the first merges of a run given rather than chosen (extending a tokenizer, and
SuperBPE's second stage), turned into the pairs of token ids the merge loop makes (`forced_pairs`),
and made on the words before the loop starts (`apply_forced`).

The loop gives ids 0-255 to the bytes and 256 + k to the token of merge k, so the ids of the forced
merges, which come first, are known before the loop starts: merge k joins the ids of its two tokens'
bytes, each a byte or the token of an earlier forced merge. A token made twice (two merges giving
the same bytes) is named by the first merge that made it.
"""

from __future__ import annotations  # NumPy names in hints, NumPy imported only where used

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

_LONG_PIECE = 128  # longer pieces are merged one at a time (`_merge_piece`), shorter ones together (`_merge_batch`)
_BATCH = 1 << 20  # characters of pieces merged together: the arrays stay small, the numpy calls few
_CHUNK = 1 << 23  # bytes of words cut at a time: their arrays take some 30 bytes a byte (see `apply_forced`)
_SHORT = 15  # pieces of up to this many bytes are told apart by two ints (see `_named_pieces`), longer ones as text
_MASK = [(1 << 8 * n) - 1 for n in range(9)]  # the low n bytes of 8
_DENSE = 1024  # pairs of ids below this are looked up in a table (of 4 MB)
_SEP = 0x10FFFF  # the id after each piece in a batch: no pair holds it, so no merge crosses it


def forced_pairs(forced, shift: int) -> list[int]:
    """The pair of each forced merge as the loop names pairs, `left << shift | right`; ValueError
    naming the first merge that is not a pair of non-empty bytes or uses a token no earlier merge
    makes."""
    token_id = {bytes([i]): i for i in range(256)}
    pairs = []
    for k, merge in enumerate(forced):
        if not (isinstance(merge, tuple) and len(merge) == 2 and all(type(t) is bytes and t for t in merge)):
            raise ValueError(f"forced merge {k + 1} is {merge!r}; each must be a pair of non-empty bytes")
        left, right = merge
        for token in merge:
            if token not in token_id:
                raise ValueError(
                    f"merge {k + 1} ({left!r}, {right!r}) uses the token {token!r}, which no earlier merge makes; "
                    "merges must come in rank order, each made of bytes and earlier merges' tokens"
                )
        pairs.append(token_id[left] << shift | token_id[right])
        token_id.setdefault(left + right, 256 + k)
    return pairs


def apply_forced(
    words: list, counts: list[int], forced: list[tuple[bytes, bytes]], pairs: list[int], shift: int, log: bool,
) -> tuple[list[str], list[int], list[tuple[int, int]] | None]:
    """Make the forced merges (`forced`, named by their `pairs` as `forced_pairs` gives them) on
    `words` (non-empty pre-tokens in UTF-8, replaced in place): return the words left with two
    tokens or more (all of them, as they are, when there are no forced merges), each a string with
    one character per token id as the merge loop holds words, their counts, and with `log`, each
    forced merge's `(count, shrink)` for the merge log: the pair's occurrences before it (overlaps
    count) and the merges it made, weighted by the words' `counts`. Exactly what making the forced
    merges one by one in every word gives, at a cost in proportion to the distinct pieces of the
    words rather than to the words times the merges.

    Two observations make it fast. A word is cut between every two bytes that no forced token holds
    side by side (`_piece_starts`): no forced merge can join tokens across such a cut, so the pieces
    merge alone, and a piece that recurs (" the", in many words) is merged once. And a piece is
    merged in rank order (`_merge_piece`), which gives what the merges one by one give (see there);
    short pieces are merged many at once, in NumPy (`_merge_batch`). The words go a chunk at a time
    (`_Chunker.merged`; a word longer than a chunk a part at a time, `_parts`): cut, their pieces named and the new ones merged, joined again, all in NumPy
    but for one string per distinct piece. With `log` the distinct pieces are merged once more at
    the end, counted: a piece's count is known only then.

    Why not `encode.encoder`'s rank-order merge: that one ranks pairs of token *bytes*, as tiktoken
    does, which matches the merges one by one only when no two merges make the same bytes; the
    loop names tokens by the merge that made them (a token made twice has two ids, see above), and
    so does this one, which holds however the merges repeat a token.
    """
    if not pairs:  # nothing to do: the words stay as they are
        return words, counts, None
    import numpy as np  # here, not above: plain training (no forced merges) loads no NumPy

    joined = np.zeros((256, 256), dtype=bool)  # joined[a, b]: some forced token holds bytes a, b side by side
    for left, right in forced:
        token = left + right
        joined[list(token[:-1]), list(token[1:])] = True
    chunk = _Chunker(~joined.T.ravel(), _piece_merger(pairs, shift))
    weight: dict[str, int] | None = {} if log else None  # each piece -> its count in the corpus
    start = 0
    while start < len(words):
        if len(words[start]) > _CHUNK:  # a part at a time: a chunk's arrays take some 30 bytes a byte
            n = counts[start:start + 1]
            words[start] = "".join([chunk.merged([part], n, weight)[0] for part in _parts(words[start], chunk.cut)])
            start += 1
            continue
        end, size = start, 0
        while end < len(words) and size < _CHUNK and len(words[end]) <= _CHUNK:
            size += len(words[end])
            end += 1
        words[start:end] = chunk.merged(words[start:end], counts[start:end], weight)
        start = end
    merges_log = None
    if weight is not None:  # the merges again, one per distinct piece, now counted
        merges_log = [[0, 0] for _ in pairs]
        chunk.merge(weight, {}, merges_log, weight)
    if any(len(word) < 2 for word in words):  # single tokens merge no more
        counts = [n for word, n in zip(words, counts) if len(word) > 1]
        words = [word for word in words if len(word) > 1]
    return words, counts, None if merges_log is None else [(count, shrink) for count, shrink in merges_log]


class _Chunker:
    """The forced merges made on a chunk of words at a time (`merged`), remembering each piece's
    tokens from chunk to chunk. `cut` says, for two bytes a, b read as the little-endian 16-bit
    number b << 8 | a, whether a word may be cut between them; `merge` is `_piece_merger`'s."""

    def __init__(self, cut, merge: Callable[..., None]):
        self.cut = cut
        self.merge = merge
        self.tokens_of: dict[str, str] = {}  # each piece seen so far -> its tokens

    def merged(self, words: list[bytes], counts: list[int], weight: dict[str, int] | None) -> list[str]:
        """`words` after the forced merges, as strings of token ids; with `weight`, adds to it each
        piece's occurrences in them times their `counts`."""
        import numpy as np

        raw = b"".join(words) + bytes(16)  # padded: a piece's key reads 16 bytes from its start
        size = len(raw) - 16
        word_sizes = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        word_starts = np.cumsum(word_sizes) - word_sizes
        starts = _piece_starts(raw, size, word_starts, self.cut)
        ids, pieces = _named_pieces(raw, size, starts)
        tokens_of = self.tokens_of
        self.merge([piece for piece in pieces if piece not in tokens_of], tokens_of)
        first_piece = np.searchsorted(starts, word_starts)  # of each word
        if weight is not None:
            per_word = np.diff(first_piece, append=len(starts))
            kind = np.int64 if max(counts) * len(starts) < 1 << 63 else object  # sums that fit, or Python ints
            sums = np.zeros(len(pieces), dtype=kind)
            np.add.at(sums, ids, np.repeat(np.array(counts, dtype=kind), per_word))
            get = weight.get
            for piece, n in zip(pieces, sums.tolist()):
                weight[piece] = get(piece, 0) + n
        return _joined(list(map(tokens_of.__getitem__, pieces)), ids, first_piece)


def _parts(word: bytes, cut: np.ndarray) -> list[bytes]:
    """`word` in parts of some `_CHUNK` bytes, each cut where `_piece_starts` cuts (see `_Chunker`
    for `cut`), so that its pieces are the word's; fewer parts where the word has no such place."""
    allowed = _places(word, len(word), cut)  # i: before byte i + 1
    parts, begin = [], 0
    while len(word) - begin > _CHUNK:
        rest = allowed[begin + _CHUNK:]
        if not rest.any():  # no place left to cut
            break
        after = begin + _CHUNK + int(rest.argmax())  # the first place (argmax of bools)
        parts.append(word[begin:after + 1])
        begin = after + 1
    parts.append(word[begin:])
    return parts


def _piece_starts(raw: bytes, size: int, word_starts: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """Where the pieces of the words held in the first `size` bytes of `raw` start: at each word's
    start and between every two bytes that `cut` allows (see `_Chunker`)."""
    import numpy as np

    allowed = np.empty(size, dtype=bool)
    allowed[:1] = True
    allowed[1:] = _places(raw, size, cut)
    allowed[word_starts] = True
    return np.flatnonzero(allowed)


def _places(raw: bytes, size: int, cut: np.ndarray) -> np.ndarray:
    """For each two bytes side by side in the first `size` bytes of `raw` (read at once as one
    little-endian 16-bit number), whether `cut` allows a cut between them."""
    import numpy as np

    return cut[np.ndarray((size - 1,), dtype="<u2", buffer=raw, strides=(1,))]


def _named_pieces(raw: bytes, size: int, starts: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The distinct pieces starting at `starts` in the first `size` bytes of `raw` (each as text,
    one character per byte), and for each piece its index among them.

    A piece of up to `_SHORT` bytes is named by two ints, its bytes and its length packed, so the
    pieces are told apart in NumPy (by sorting the names) and only one string is made for each
    distinct piece; longer ones, few, by their text."""
    import numpy as np

    lengths = np.diff(starts, append=size)
    text = raw[:size].decode("latin-1")
    ids = np.empty(len(starts), dtype=np.int64)
    short = np.flatnonzero(lengths <= _SHORT)
    at, length = starts[short], lengths[short]
    eight = np.ndarray((size + 8,), dtype="<u8", buffer=raw, strides=(1,))  # the 8 bytes from each position
    mask = np.array(_MASK, dtype=np.uint64)
    low = eight[at] & mask[np.minimum(length, 8)]
    high = eight[at + 8] & mask[np.clip(length - 8, 0, 7)] | length.astype(np.uint64) << np.uint64(56)
    order = np.lexsort((low, high))
    low, high = low[order], high[order]
    first = np.empty(len(order), dtype=bool)  # the first of each run of equal names
    first[:1] = True
    first[1:] = (low[1:] != low[:-1]) | (high[1:] != high[:-1])
    ids[short[order]] = np.cumsum(first) - 1
    at = at[order[first]]
    pieces = list(map(text.__getitem__, map(slice, at.tolist(), (at + length[order[first]]).tolist())))
    long = np.flatnonzero(lengths > _SHORT)
    if len(long):
        index: dict[str, int] = {}
        named = []
        ends = starts[long] + lengths[long]
        for piece in map(text.__getitem__, map(slice, starts[long].tolist(), ends.tolist())):
            i = index.get(piece)
            if i is None:
                i = index[piece] = len(pieces)
                pieces.append(piece)
            named.append(i)
        ids[long] = named
    return ids, pieces


def _joined(tokens: list[str], ids: np.ndarray, first_piece: np.ndarray) -> list[str]:
    """The words whose pieces are `ids` (indexes into `tokens`, the distinct pieces' tokens as
    strings), each word's first piece at `first_piece`: each word's pieces' tokens joined."""
    import numpy as np

    flat = np.frombuffer("".join(tokens).encode("utf-32-le", "surrogatepass"), dtype=np.int32)
    sizes = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    begins = np.cumsum(sizes) - sizes
    out_sizes = sizes[ids]
    total = np.cumsum(out_sizes)
    out = flat[np.repeat(begins[ids] - (total - out_sizes), out_sizes) + np.arange(total[-1])]
    word_ends = np.append(total[first_piece[1:] - 1], total[-1])
    out = np.insert(out, word_ends, np.int32(_SEP))  # after each word, to split at
    return out.tobytes().decode("utf-32-le", "surrogatepass").split(chr(_SEP))[:-1]


def _piece_merger(pairs: list[int], shift: int) -> Callable[..., None]:
    """`merge(pieces, tokens_of, merges_log=None, weight=None)`: sets `tokens_of[piece]` to each of
    `pieces`' tokens after the forced merges; with `merges_log`, adds to it each piece's merges,
    counted `weight[piece]` times, as `apply_forced` says. Long pieces one by one (`_merge_piece`),
    short ones in batches (`_merge_batch`). The tables are made once, here."""
    new_char = [chr(256 + k) for k in range(len(pairs))]
    mask = (1 << shift) - 1
    rank: dict[str, int] = {}
    for k, pair in enumerate(pairs):
        rank.setdefault(chr(pair >> shift) + chr(pair & mask), k)  # a pair forced again merges nothing more
    pair_chars = {k: p for p, k in rank.items()}
    ranks_of = _rank_lookup(pairs, shift)

    def merge(pieces, tokens_of: dict[str, str], merges_log: list[list[int]] | None = None,
              weight: dict[str, int] | None = None) -> None:
        batch: list[str] = []
        size = 0
        for piece in pieces:
            if len(piece) > _LONG_PIECE:
                n = weight[piece] if weight is not None else 0
                tokens_of[piece] = _merge_piece(piece, rank, pair_chars, new_char, merges_log, n)
                continue
            batch.append(piece)
            size += len(piece) + 1
            if size >= _BATCH:
                _merge_batch(batch, tokens_of, ranks_of, len(pairs), merges_log, weight)
                batch, size = [], 0
        _merge_batch(batch, tokens_of, ranks_of, len(pairs), merges_log, weight)

    return merge


def _merge_piece(piece: str, rank: dict[str, int], pair_chars: dict[int, str], new_char: list[str],
                 merges_log: list[list[int]] | None = None, n: int = 0) -> str:
    """`piece` (ids as characters) after the forced merges: the lowest-ranked pair present is merged
    at every occurrence, left to right, until none is left. This is what the merges one by one make:
    merges absent from the piece change nothing, and a merge only makes pairs holding its new token,
    which only later merges use (a merge names a token by the merge that made it, see the module).
    With `merges_log`, adds to its item k the count and shrink of forced merge k in the piece,
    counted `n` times."""
    get, push, pop = rank.get, heapq.heappush, heapq.heappop
    heap = sorted({k for k in map(get, map(str.__add__, piece, piece[1:])) if k is not None})
    while heap:
        k = pop(heap)
        pair = pair_chars[k]
        if pair not in piece:  # merged already, or a repeat
            continue
        new = new_char[k]
        merged = piece.replace(pair, new)
        if merges_log is not None:
            made = len(piece) - len(merged)
            # subtle: (a, a) overlaps itself: "aaa" holds it twice but merges it once
            count = made if pair[0] != pair[1] else sum(map(pair.__eq__, map(str.__add__, piece, piece[1:])))
            merges_log[k][0] += n * count
            merges_log[k][1] += n * made
        piece = merged
        i = piece.find(new)
        while i >= 0:  # the pairs the new token makes
            r = get(piece[i - 1:i + 1]) if i else None
            if r is not None:
                push(heap, r)
            r = get(piece[i:i + 2])
            if r is not None:
                push(heap, r)
            i = piece.find(new, i + 1)
    return piece


def _rank_lookup(pairs: list[int], shift: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """`ranks_of(left, right)`: the rank of each pair of token ids (int32 arrays), the first forced
    merge of that pair, or `len(pairs)` (above all ranks) where no forced merge joins it. Pairs of
    two ids below `_DENSE` (bytes and the first merges' tokens, most pairs) are looked up in a
    table, others among the sorted pairs."""
    import numpy as np  # here, not above: plain training (no forced merges) loads no NumPy

    keys, first = np.unique(np.array(pairs, dtype=np.int64), return_index=True)
    none = len(pairs)
    dense = min(256 + len(pairs), _DENSE)
    left, right = keys >> shift, keys & ((1 << shift) - 1)
    in_table = (left < dense) & (right < dense)
    table = np.full(dense * dense, none, dtype=np.int32)
    table[left[in_table] * dense + right[in_table]] = first[in_table]

    def ranks_of(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        out = np.full(len(left), none, dtype=np.int32)
        small = (left < dense) & (right < dense)
        out[small] = table[left[small] * dense + right[small]]
        big = np.flatnonzero(~small)
        if len(big):
            key = left[big].astype(np.int64) << shift | right[big]
            at = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
            out[big] = np.where(keys[at] == key, first[at], none)
        return out

    return ranks_of


def _merge_batch(batch: list[str], tokens_of: dict[str, str], ranks_of: Callable[[np.ndarray, np.ndarray], np.ndarray],
                 none: int, merges_log: list[list[int]] | None, weight: dict[str, int] | None) -> None:
    """`_merge_piece` for many (short) pieces at once, in numpy: sets `tokens_of[piece]` for each
    piece of `batch`, and with `merges_log` adds its merges, counted `weight[piece]` times. `none`
    is the rank `ranks_of` gives a pair no forced merge joins.

    The pieces lie in one array of ids, each followed by `_SEP` (no pair holds it, so no merge
    crosses it), and `rank[i]` is the rank of the pair at i, i + 1. Each round merges, in every
    piece, every occurrence of that piece's lowest-ranked pair, left to right; a piece whose pairs
    are all `none` is done and leaves the arrays."""
    import numpy as np  # here, not above, as `long_words` (which imports NumPy)

    from cs336_basics.train.long_words import every_other_in_runs

    if not batch:
        return
    ids = np.frombuffer((chr(_SEP).join(batch) + chr(_SEP)).encode("utf-32-le"), dtype=np.int32).copy()
    lengths = np.fromiter(map(len, batch), dtype=np.int64, count=len(batch)) + 1  # the separator too
    starts = np.cumsum(lengths) - lengths
    rank = np.append(ranks_of(ids[:-1], ids[1:]), np.int32(none))
    which = np.arange(len(batch))  # the pieces still merging, as indexes into batch
    if merges_log is not None:
        weights = np.array([weight[piece] for piece in batch], dtype=object)
        log_count = np.zeros(none, dtype=object)
        log_made = np.zeros(none, dtype=object)
    while len(which):
        lowest = np.minimum.reduceat(rank, starts)
        done = lowest == none
        if done.any():  # these pieces are merged: out of the arrays
            at = np.repeat(done, lengths)
            text = ids[at].tobytes().decode("utf-32-le", "surrogatepass")
            for i, tokens in zip(which[done].tolist(), text.split(chr(_SEP))):
                tokens_of[batch[i]] = tokens
            keep = ~done
            ids, rank = ids[~at], rank[~at]
            which, lowest, lengths = which[keep], lowest[keep], lengths[keep]
            starts = np.cumsum(lengths) - lengths
            if not len(which):
                break
        hit = rank == np.repeat(lowest, lengths)
        at = np.flatnonzero(hit)
        next_to = np.append(False, np.diff(at) == 1)
        if next_to.any():  # subtle: a run of hits is (a, a) overlapping itself: merge its first, third, ...
            at = at[every_other_in_runs(next_to)]
        merged = np.zeros(len(ids), dtype=bool)
        merged[at] = True
        made = np.add.reduceat(merged, starts, dtype=np.int64)
        if merges_log is not None:
            np.add.at(log_count, lowest, weights[which] * np.add.reduceat(hit, starts, dtype=np.int64))
            np.add.at(log_made, lowest, weights[which] * made)
        ids[at] = 256 + rank[at]
        gone = np.zeros(len(ids), dtype=bool)
        gone[at + 1] = True
        ids, rank = ids[~gone], rank[~gone]
        lengths = lengths - made
        starts = np.cumsum(lengths) - lengths
        at -= np.arange(len(at))  # where the new tokens are now
        around = np.concatenate((at[at > 0] - 1, at))
        rank[around] = ranks_of(ids[around], ids[around + 1])
    if merges_log is not None:
        for k in np.flatnonzero(log_made).tolist():
            merges_log[k][0] += log_count[k]
            merges_log[k][1] += log_made[k]
