"""The BPE merge loop: from pre-token counts to the list of merges, exactly as CS336 defines it.

Each step merges the most frequent adjacent pair; among equally frequent pairs the one whose
`(bytes_of_left, bytes_of_right)` is lexicographically *greatest* wins.

How it stays fast in pure Python:
- each distinct pre-token is a `str` with one character per token id, so finding a pair, merging it
  (`str.replace` is exactly left-to-right and non-overlapping) and testing staleness run in C;
- pair counts are updated only around each merge site, in the pre-tokens that hold the pair, found
  through an index pair -> pre-token numbers (append-only; stale entries are skipped by one `in`);
- the best pair comes from a lazy max-heap: a pair is pushed when its count rises, and a popped entry
  whose count has fallen since is pushed back with its current count.
"""

import gc
import heapq
from collections import defaultdict
from collections.abc import Callable


def _reversed_order_key(token: bytes) -> str:
    """A string whose order is the reverse of the order of `token` among byte strings.

    Each byte b becomes chr(255 - b) and a terminator chr(256), greater than every such character,
    ends it; so a prefix sorts after its extensions, as it must when the order is reversed. The
    keys are prefix-free, so the key of a pair is simply the two keys concatenated.
    """
    return "".join([chr(255 - b) for b in token]) + "\u0100"


def train_merges(
    word_counts: dict[bytes, int],
    num_merges: int,
    *,
    on_merge: Callable[[int], None] | None = None,
) -> list[tuple[bytes, bytes]]:
    """Learn up to `num_merges` merges from pre-token counts; fewer when no pair is left.

    Token ids are 0..255 for single bytes and 256 + k for the k-th merge. `on_merge(k)` is called
    after each merge (for progress bars).
    """
    token_bytes = [bytes([i]) for i in range(256)]
    token_key = [_reversed_order_key(t) for t in token_bytes]

    # Pre-tokens as strings of token-id characters; single tokens can never merge.
    words: list[str] = []
    counts: list[int] = []
    for word, n in word_counts.items():
        if len(word) > 1 and n > 0:
            words.append(word.decode("latin-1"))
            counts.append(n)

    pair_counts: dict[str, int] = defaultdict(int)
    where: dict[str, list[int]] = defaultdict(list)
    for i, (word, n) in enumerate(zip(words, counts)):
        for pair in map(str.__add__, word, word[1:]):
            pair_counts[pair] += n
            where[pair].append(i)  # a word holding a pair twice is listed twice; merging skips the second

    def heap_entry(pair: str, count: int) -> tuple[int, str, str]:
        return (-count, token_key[ord(pair[0])] + token_key[ord(pair[1])], pair)

    heap = [heap_entry(pair, n) for pair, n in pair_counts.items()]
    heapq.heapify(heap)

    merges: list[tuple[bytes, bytes]] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the loop allocates millions of small objects and frees none in cycles
    try:
        while len(merges) < num_merges and heap:
            neg_count, _, pair = heapq.heappop(heap)
            current = pair_counts.get(pair, 0)
            if current != -neg_count:
                if current > 0:  # stale: the count fell since this entry was pushed
                    heapq.heappush(heap, heap_entry(pair, current))
                continue

            left, right = ord(pair[0]), ord(pair[1])
            new_id = len(token_bytes)
            new = chr(new_id)
            merges.append((token_bytes[left], token_bytes[right]))
            token_bytes.append(token_bytes[left] + token_bytes[right])
            token_key.append(_reversed_order_key(token_bytes[-1]))

            risen = _apply_merge(pair, new, words, counts, where, pair_counts)
            del pair_counts[pair]  # every occurrence is merged
            for p in risen:
                n = pair_counts.get(p, 0)
                if n > 0:
                    heapq.heappush(heap, heap_entry(p, n))
            if on_merge is not None:
                on_merge(len(merges))
    finally:
        if gc_was_enabled:
            gc.enable()
    return merges


def _apply_merge(
    pair: str,
    new: str,
    words: list[str],
    counts: list[int],
    where: dict[str, list[int]],
    pair_counts: dict[str, int],
) -> list[str]:
    """Merge `pair` into the character `new` in every word holding it; return the pairs that gained.

    Only the pairs next to each merge site change. In the old word each site loses its left pair
    (unless that is the previous site's right pair) and its right pair; in the new word each new
    token gains its left pair, and its right pair unless the right neighbour is itself new (that
    pair is the next site's left pair). The pairs that gain all hold `new`, so they are new pairs,
    gathered apart and added at the end. The count of `pair` itself is left for the caller to drop.
    """
    a, b = pair
    gained: dict[str, int] = defaultdict(int)
    gained_where: dict[str, list[int]] = defaultdict(list)
    for i in where.pop(pair, ()):
        word = words[i]
        pos = word.find(pair)
        if pos < 0:  # a stale index entry, or a duplicate already handled
            continue
        n = counts[i]
        end = pos + 2
        if word.find(pair, end) < 0:  # one site, by far the most common case
            if pos:
                x = word[pos - 1]
                pair_counts[x + a] -= n
                p = x + new
                gained[p] += n
                gained_where[p].append(i)
            if end < len(word):
                y = word[end]
                pair_counts[b + y] -= n
                p = new + y
                gained[p] += n
                gained_where[p].append(i)
            words[i] = word.replace(pair, new)
            continue

        size = len(word)
        prev_end = -1
        while pos >= 0:
            if pos and pos != prev_end:
                pair_counts[word[pos - 1] + a] -= n
            end = pos + 2
            if end < size:
                pair_counts[b + word[end]] -= n
            prev_end = end
            pos = word.find(pair, end)
        word = word.replace(pair, new)
        words[i] = word
        size = len(word)
        pos = word.find(new)
        while pos >= 0:
            if pos:
                p = word[pos - 1] + new
                gained[p] += n
                gained_where[p].append(i)
            nxt = pos + 1
            if nxt < size and word[nxt] != new:
                p = new + word[nxt]
                gained[p] += n
                gained_where[p].append(i)
            pos = word.find(new, nxt)

    pair_counts.update(gained)
    where.update(gained_where)
    return list(gained)
