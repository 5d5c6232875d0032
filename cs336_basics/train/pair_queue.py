"""Choosing the merge loop's next pair: the pair counts in a queue that finds the most frequent pair
fast (`PairQueue`), what a merge whose changes from other processes are not in yet may still
change (`Unheard`), so the next pair can often be chosen without waiting for them, and the tokens
SuperBPE's second stage may not make (`superword_limits`).

A pair of token ids (left, right) is named by the int `left << SHIFT | right`: every code point
fits in 21 bits.
"""

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable

SHIFT = 21
RIGHT = (1 << SHIFT) - 1


class Unheard:
    """A merge whose changes from the remote shards are not in yet, and what they may change.

    In each word a merge of (a, b) into c takes away pairs (x, a) and (b, y) and makes pairs that
    hold c; no other pair's count changes. The remote shards make each such pair at most once per
    merge site, and they hold at most `count - shrink` of the merged pair's occurrences (this
    process merged `shrink` of them, each taking one). So a pair holding c counts at most
    `largest_new` (the largest count of such a pair this process made) plus `count - shrink`.
    The best pair without the remote changes is the best with them if it counts more than that
    (then it holds no c) and is neither (x, a) nor (b, y), which keep their counts otherwise.
    """

    __slots__ = ("number", "count", "shrink", "a", "b", "bound")

    def __init__(self, number: int, pair: int, count: int, shrink: int, largest_new: int):
        self.number, self.count, self.shrink = number, count, shrink
        self.a, self.b = pair >> SHIFT, pair & RIGHT
        self.bound = largest_new + count - shrink

    def cannot_change(self, pair: int, count: int) -> bool:
        """Whether the remote changes for this merge cannot keep `pair`, the best pair without
        them, with `count`, from being the best."""
        left, right = pair >> SHIFT, pair & RIGHT
        return count > self.bound and left != self.b and right != self.a


class PairQueue:
    """The pair counts, and the most frequent pair found fast: a lazy max-heap plus a waiting room.

    Heap entries sort by count, then by the reversed-order keys of the two tokens, so the smallest
    entry is the most frequent pair and, among equals, the greatest (left bytes, right bytes). An
    entry may overstate its pair's count (counts fall as merges take pairs apart); a popped entry
    whose count fell is filed again with its current count.

    Most pairs never come near the top, so pairs counted below `floor` (a power of two) wait in
    buckets by their count's bit length instead of taking heap pushes. A pair's count only rises
    when the pair is new, so a waiting pair is never under-filed; when the heap runs empty, the
    floor halves and the bucket just under it moves into the heap. An entry enters the heap only at
    or above the floor, which never rises, so a current entry is at least every waiting pair.
    """

    def __init__(self, counts: dict[int, int], token_key: list[str]):
        self.counts = counts
        self.token_key = token_key
        top = max(counts.values(), default=0)
        self.floor = 1 << max(top.bit_length() - 1, 0)
        self.waiting: dict[int, list[int]] = defaultdict(list)
        self.heap: list[tuple[int, str, int]] = []
        self.file(list(counts))
        heapq.heapify(self.heap)

    def file(self, pairs: list[int]) -> None:
        """Give each pair (with a positive count) a heap entry, or a place in the waiting room."""
        counts, key, floor, heap, waiting = self.counts, self.token_key, self.floor, self.heap, self.waiting
        for pair in pairs:
            n = counts.get(pair, 0)
            if n >= floor:
                heapq.heappush(heap, (-n, key[pair >> SHIFT] + key[pair & RIGHT], pair))
            elif n > 0:
                waiting[n.bit_length()].append(pair)

    def apply(self, change: Iterable[tuple[int, int]]) -> list[int]:
        """Add count changes, given as (pair, change) items; return the pairs that gained (new
        pairs, to be filed)."""
        counts = self.counts
        get = counts.get
        gained = []
        for p, d in change:
            counts[p] = get(p, 0) + d
            if d > 0:
                gained.append(p)
        return gained

    def put_back(self, pair: int, count: int) -> None:
        """Undo `pop_best`, which returned (pair, count)."""
        self.counts[pair] = count
        self.file([pair])

    def pop_best(self) -> tuple[int, int] | None:
        """Remove and return the most frequent pair and its count, or None when no pair is left."""
        heap, counts = self.heap, self.counts
        while True:
            if not heap:
                if self.floor == 1:
                    return None
                self.floor //= 2
                self.file(self.waiting.pop(self.floor.bit_length(), []))
                continue
            neg_count, _, pair = heapq.heappop(heap)
            current = counts.get(pair, 0)
            if current == -neg_count:
                del counts[pair]  # every occurrence is merged
                return pair, current
            self.file([pair])  # stale: the count fell since this entry was filed


def superword_limits(max_words: int, colon_rule: bool) -> Callable[[bytes], bool] | None:
    """SuperBPE's limits on the tokens of stage-2 merges, as its authors release it: the test a
    merge's token must pass, or None when both limits are off. A token passes when it holds at most
    `max_words` words (the non-empty parts between its spaces; 0: any number), and, with
    `colon_rule`, no colon followed by a space. The merge loop passes over a pair whose token fails
    (see `merge.train_merges`).

    >>> allows = superword_limits(4, True)
    >>> allows(b" of the"), allows(b"a b c d e"), allows(b"Note: ")
    (True, False, False)
    """
    if not max_words and not colon_rule:
        return None

    def allows(token: bytes) -> bool:
        if colon_rule and b": " in token:
            return False
        # Fewer spaces than max_words cannot part more words than that: the split is skipped.
        return not max_words or token.count(b" ") < max_words or len([w for w in token.split(b" ") if w]) <= max_words

    return allows
