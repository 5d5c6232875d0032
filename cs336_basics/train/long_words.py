"""A merge shard's long words (whole documents with pattern "none", SuperBPE's stage 2), merged with
NumPy: one merge costs a few array operations over its sites, not Python work per site.

All the long words of a shard are one array of token ids, each word after a separator (and one at
the end). Positions are the units the words first held; a token lives at the position of its first
unit, and `units[id]` says how many units it spans, so the next token starts right after it. The
position of a token's last unit (when it spans more than one) holds the negative distance back to
its first, so the token before a position is found in one step too; the other positions inside a
token hold stale values that nothing reads (every value inside a token is negative, so no site
there matches a pair). This takes 4 bytes per unit where links to the next and previous tokens
took 8 more (at 1 GB of web-like text, some 0.9 GB per shard), and a token of a million units (a
megabyte of one letter) costs no more than one of two. The separator's id `_EDGE` is no token's
nor any distance, so a pair never spans two words, and a word's first (last) token has an edge to
its left (right).

Where each pair occurs is kept by position, append-only (as `merge._Shard` keeps its short words):
the pairs of the words as they first were, sorted by pair in batches (`_Batch`), and, for the pairs
a merge makes, the positions it made them at, one `_Batch` per merge (a few bytes per pair, where an
array per pair took some 150: web-scale shards make millions of pairs). A position once filed under
a pair may have moved on (its token or the next one merged into another since): such a site is
checked when its pair is merged, and skipped. A position's pair never comes back once it has left: tokens only grow.

Pairs are named as the merge loop names them (`left << SHIFT | right`). Counts are exact int64.
"""

import numpy as np

from cs336_basics.train.pair_queue import RIGHT, SHIFT

_EDGE = -(1 << 31)  # the separator before and after each word: below every distance back (see above)

# Positions whose pairs are sorted at once when the index is first built: the sort's arrays take
# some 20 bytes per position, so this bounds them (about 160 MB).
_BATCH = 1 << 23

# Words joined at once when the token array is built (see `_joined`).
_JOIN = 1 << 20

_KEY_BITS = 63  # what an int64 key holds (see `LongWords.count_pairs`)


class _Batch:
    """The first pairs of some positions, by pair: `pairs` (sorted, distinct), and the positions of
    `pairs[j]` are `positions[starts[j]:starts[j + 1]]`, ascending."""

    __slots__ = ("pairs", "starts", "positions")

    def __init__(self, pairs: np.ndarray, starts: np.ndarray, positions: np.ndarray):
        self.pairs, self.starts, self.positions = pairs, starts, positions

    def sites(self, pair: int) -> np.ndarray | None:
        j = int(np.searchsorted(self.pairs, pair))
        if j == len(self.pairs) or self.pairs[j] != pair:
            return None
        return self.positions[self.starts[j]:self.starts[j + 1]]


class LongWords:
    """Words given as UTF-8 pre-tokens (whose ids are their bytes) or strings of token ids (one
    character per id), each counted `counts[i]` times; `count_pairs` once, then `merge` for each
    merge of the loop."""

    def __init__(self, words: list[bytes | str], counts: list[int]):
        sizes = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        # Word k's first token is at starts[k]; the separator before it at starts[k] - 1.
        self.starts = np.cumsum(sizes + 1) - sizes
        self.tokens = _joined(words, self.starts)
        self.index = np.int32 if len(self.tokens) < 1 << 31 else np.int64
        self.units = np.ones(1 << SHIFT, dtype=np.int32)  # each id's units; the words' ids are one unit each
        self.counts = np.array(counts, dtype=np.int64)
        # The words counted more than once, where `_weights` looks (a search among a few, not all).
        repeated = np.flatnonzero(self.counts != 1)
        self.ones = not len(repeated)  # most long words occur once: often none is counted more
        self.repeated_starts = self.starts[repeated].astype(self.index)
        self.repeated_ends = self.repeated_starts + sizes[repeated].astype(self.index)
        self.repeated_counts = self.counts[repeated]
        self.batches: list[_Batch] = []
        self.made: dict[int, _Batch] = {}  # new token -> where its merge made each pair holding it

    def _weights(self, positions: np.ndarray) -> np.ndarray:
        """The count of the word holding each position."""
        weights = np.ones(len(positions), dtype=np.int64)
        if self.ones:
            return weights
        word = np.searchsorted(self.repeated_starts, positions, side="right") - 1
        inside = (word >= 0) & (positions < self.repeated_ends[word])
        weights[inside] = self.repeated_counts[word[inside]]
        return weights

    def count_pairs(self, pair_counts: dict[int, int]) -> None:
        """Add how often each adjacent pair occurs (overlaps count) to `pair_counts`, and build the
        index; once, before any merge."""
        tokens = self.tokens
        # A pair and a position in the batch fit one int64 key when the ids are small enough (up to
        # 2^19, vocabularies of 524k): then one plain sort of the keys orders the pairs, and each
        # pair's positions, at some half the cost of a stable argsort.
        place = _BATCH.bit_length()
        one_key = SHIFT + int(tokens.max(initial=0)).bit_length() + place <= _KEY_BITS
        found, found_counts = [], []
        edges = np.append(self.starts - 1, len(tokens))
        for begin in range(0, len(tokens) - 1, _BATCH):
            end = min(begin + _BATCH, len(tokens) - 1)
            left, right = tokens[begin:end].astype(np.int64), tokens[begin + 1:end + 1]
            positions = np.flatnonzero((left >= 0) & (right >= 0))
            pairs = left[positions] << SHIFT | right[positions]
            del left
            if one_key:
                keys = pairs << place | positions
                del pairs
                keys.sort()
                pairs, positions = keys >> place, keys & ((1 << place) - 1)
                del keys
                distinct, starts = _runs(pairs)
            else:
                distinct, starts, positions = _sorted_runs(pairs, positions)
            bounds = np.append(starts, len(positions))
            if self.ones:
                counts = np.diff(bounds)
            else:
                counts = np.add.reduceat(self._position_counts(edges, begin, end)[positions], starts) if len(starts) else starts
            self.batches.append(_Batch(distinct, bounds, (positions + begin).astype(self.index)))
            found.append(distinct)
            found_counts.append(counts)
        # The batches summed in NumPy, then added to the dict once per pair, not once per batch: a
        # batch holds a million pairs or more. Each batch's pairs come sorted, which the stable sort
        # (a merge sort) takes advantage of.
        pairs, starts, counts = _sorted_runs(np.concatenate(found), np.concatenate(found_counts))
        del found, found_counts
        _add_runs(pair_counts, pairs.tolist(), counts, starts)
        self.starts = self.counts = None  # the first count's alone: the repeated words' are kept

    def _position_counts(self, edges: np.ndarray, begin: int, end: int) -> np.ndarray:
        """The count of the word holding each position from `begin` to `end`, where word k holds
        `edges[k]` (its separator) to `edges[k + 1]`: in order, so by repeating each word's count,
        not by searching for each position's word."""
        first = int(np.searchsorted(edges, begin, side="right")) - 1
        last = int(np.searchsorted(edges, end, side="left"))  # words first..last - 1 hold begin..end
        counts = np.repeat(self.counts[first:last], np.diff(edges[first:last + 1]))
        return counts[begin - int(edges[first]):][:end - begin]

    def _sites(self, pair: int) -> np.ndarray:
        """The positions filed under `pair`, ascending, each once (some may be stale). A pair is
        filed either in the batches (the first pairs: each batch ascending, and the batches in
        order) or by the merge that made its newer token (see `_file`), never both."""
        made = self.made.get(max(pair >> SHIFT, pair & RIGHT))
        if made is not None:
            found = made.sites(pair)
            return np.zeros(0, dtype=self.index) if found is None else found
        parts = [s for s in (batch.sites(pair) for batch in self.batches) if s is not None]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=self.index)

    def merge(self, pair: int, new: int, change: dict[int, int]) -> int:
        """Merge `pair` into the token `new` at every occurrence, left to right in each word (as
        `str.replace`); add the pair count changes to `change` (a defaultdict(int); the merged
        pair's own change is left for the caller to drop) and return by how many tokens the words
        shrank, weighted by their counts."""
        a, b = pair >> SHIFT, pair & RIGHT
        tokens = self.tokens
        at = self._sites(pair)
        if not len(at):
            return 0
        at = at[tokens[at] == a]
        units = self.units
        after = at + units[a]
        live = tokens[after] == b
        at, after = at[live], after[live]
        if not len(at):
            return 0
        if a == b:  # (a, a) overlaps itself: an occurrence may start at the token the one before it ends with
            joined = np.zeros(len(at), dtype=bool)
            joined[1:] = at[1:] == after[:-1]
            keep = every_other_in_runs(joined)
            at, after = at[keep], after[keep]
        left, right = _token_before(tokens, at), after + units[b]
        weight = self._weights(at)
        # An occurrence right after another (their tokens adjacent) has the new token to its left.
        follows = np.zeros(len(at), dtype=bool)
        follows[1:] = left[1:] == after[:-1]
        followed = np.zeros(len(at), dtype=bool)
        followed[:-1] = follows[1:]
        x = tokens[left].astype(np.int64)
        y = tokens[right].astype(np.int64)
        has_left = (x >= 0) & ~follows
        has_right = (y >= 0) & ~followed
        c_left = new << SHIFT
        lost = [x[has_left] << SHIFT | a, b << SHIFT | y[has_right], np.full(int(followed.sum()), b << SHIFT | a)]
        gained = [x[has_left] << SHIFT | new, c_left | y[has_right], np.full(int(follows.sum()), c_left | new)]
        lost_n = [weight[has_left], weight[has_right], weight[followed]]
        _add_changes(change, np.concatenate(lost), -np.concatenate(lost_n))
        # The sites of the pairs made: (x, new) where x is, (new, y) and (new, new) where new is.
        self._file(change, new, gained, [left[has_left], at[has_right], at[np.flatnonzero(follows) - 1]],
                   [weight[has_left], weight[has_right], weight[follows]])
        tokens[at] = new
        units[new] = units[a] + units[b]
        tokens[after] = -1  # inside the new token now
        last = right - 1
        tokens[last] = at - last  # the new token's last unit: the distance back to its first
        return int(weight.sum())

    def _file(self, change: dict[int, int], new: int, pairs: list[np.ndarray], positions: list[np.ndarray],
              weights: list[np.ndarray]) -> None:
        """Add to `change` the counts of the pairs the merge making `new` made, each site `weights`
        times, and file their `positions` under `new`: one sort for both. Each such pair holds `new`
        beside an older token, so no other merge files it; and its positions come from one of the
        lists, each ascending, so they stay ascending (the sort is stable)."""
        pairs = np.concatenate(pairs)
        if not len(pairs):
            return
        distinct, starts, positions, weights = _sorted_runs(pairs, np.concatenate(positions), np.concatenate(weights))
        _add_runs(change, distinct.tolist(), weights, starts)
        bounds = np.append(starts, len(pairs)).astype(self.index)
        self.made[new] = _Batch(distinct, bounds, positions.astype(self.index))


def _joined(words: list[bytes | str], starts: np.ndarray) -> np.ndarray:
    """The token ids of `words` (UTF-8 pre-tokens, whose ids are their bytes, or strings with one
    character per id) one after another, word k's first at `starts[k]`, each word after the
    separator `_EDGE` and one more at the end. The words are joined a batch at a time with a stand-in
    separator, so a batch costs a few calls in C however short its words (web-scale shards hold
    millions of words of a few bytes)."""
    tokens = np.empty(int(starts[-1]) + len(words[-1]) + 1 if words else 1, dtype=np.int32)
    for begin in range(0, len(words), _JOIN):
        batch = words[begin:begin + _JOIN]
        try:
            ids = np.frombuffer(b"\0".join(batch), dtype=np.uint8)
        except TypeError:  # some are strings
            text = "\0".join([w.decode("latin-1") if w.__class__ is bytes else w for w in batch])
            ids = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.int32)
        first = int(starts[begin])
        tokens[first:first + len(ids)] = ids
    tokens[starts - 1] = _EDGE
    tokens[-1] = _EDGE
    return tokens


def _token_before(tokens: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Where the token (or separator) before each token at `positions` starts."""
    before = positions - 1
    back = tokens[before]
    return before + np.where((back < 0) & (back != _EDGE), back, 0)


def _runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of sorted `keys` and where each run of one starts (`np.unique` would
    sort them again)."""
    new = np.empty(len(keys), dtype=bool)
    new[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    return keys[starts], starts


def every_other_in_runs(joined: np.ndarray) -> np.ndarray:
    """Which occurrences of a pair (a, a), in order, merging left to right makes, given `joined[i]`:
    whether occurrence i starts at the token occurrence i - 1 ends with (they overlap). In each run
    of overlapping occurrences the first, third, ... merge, as `str.replace` does. Shared with the
    forced merges' batches (`forced._merge_batch`)."""
    index = np.arange(len(joined))
    run_start = np.maximum.accumulate(np.where(joined, 0, index))
    return (index - run_start) % 2 == 0


def _sorted_runs(keys: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    """`keys` sorted (stably): their distinct values, where each run of one starts, and each of
    `values` in the same order."""
    order = np.argsort(keys, kind="stable")
    distinct, starts = _runs(keys[order])
    return distinct, starts, *(v[order] for v in values)


def _add_runs(total: dict[int, int], pairs: list[int], values: np.ndarray, starts: np.ndarray) -> None:
    """Add to each of `pairs`' entries in `total` the sum of its run of `values` (runs starting at
    `starts`; in int64: exact)."""
    get = total.get
    for pair, n in zip(pairs, np.add.reduceat(values, starts).tolist() if len(starts) else []):
        total[pair] = get(pair, 0) + n


def _add_changes(change: dict[int, int], pairs: np.ndarray, deltas: np.ndarray) -> None:
    """Add each delta to its pair's entry in `change`, summed per pair first."""
    distinct, starts, deltas = _sorted_runs(pairs, deltas)
    _add_runs(change, distinct.tolist(), deltas, starts)
