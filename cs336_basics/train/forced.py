"""Forced merges: the first merges of a run given rather than chosen (extending a tokenizer, and
SuperBPE's second stage), turned into the pairs of token ids the merge loop makes (`forced_pairs`),
and made on the words before the loop starts (`apply_forced`).

The loop gives ids 0-255 to the bytes and 256 + k to the token of merge k, so the ids of the forced
merges, which come first, are known before the loop starts: merge k joins the ids of its two tokens'
bytes, each a byte or the token of an earlier forced merge. A token made twice (two merges giving
the same bytes) is named by the first merge that made it.
"""

import heapq
import re


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
    `words` (pre-tokens in UTF-8, replaced in place): return the words left with two tokens or
    more (all of them, as they are, when there are no forced merges), each a string with one character per token id as the merge loop holds words, their
    counts, and with `log`, each forced merge's `(count, shrink)` for the merge log: the pair's
    occurrences before it
    (overlaps count) and the merges it made, weighted by the words' `counts`. Exactly what making
    the forced merges one by one in every word gives, at a cost in proportion to the distinct pieces
    of the words rather than to the words times the merges.

    Two observations make it fast. A word is cut between two bytes that no forced token holds side
    by side (`_cutter`): no forced merge can join tokens across such a cut, so the pieces merge
    alone, and a piece that recurs (" the", in many words) is merged once. And a piece is merged in
    rank order (`_merge_piece`), which gives what the merges one by one give (see there).

    Why not `encode.encoder`'s rank-order merge: that one ranks pairs of token *bytes*, as tiktoken
    does, which matches the merges one by one only when no two merges make the same bytes; the
    loop names tokens by the merge that made them (a token made twice has two ids, see above), and
    so does this one, which holds however the merges repeat a token.
    """
    if not pairs:  # nothing to do: the words stay as they are
        return words, counts, None
    new_char = [chr(256 + k) for k in range(len(pairs))]
    mask = (1 << shift) - 1
    rank: dict[str, int] = {}
    for k, pair in enumerate(pairs):
        rank.setdefault(chr(pair >> shift) + chr(pair & mask), k)  # a pair forced again merges nothing more
    pair_chars = {k: p for p, k in rank.items()}
    split = _cutter(left + right for left, right in forced).split
    # The pieces, each with its count in the corpus (one character per byte).
    weight: dict[str, int] = {}
    get = weight.get
    for i, (word, n) in enumerate(zip(words, counts)):
        words[i] = word = word.decode("latin-1")
        for piece in split(word):
            weight[piece] = get(piece, 0) + n
    merges_log = [[0, 0] for _ in pairs] if log else None
    for piece, n in weight.items():  # weight becomes piece -> its tokens
        weight[piece] = _merge_piece(piece, rank, pair_chars, new_char, merges_log, n)
    tokens_of = weight.__getitem__
    for i, word in enumerate(words):
        words[i] = "".join(map(tokens_of, split(word)))
    if any(len(word) < 2 for word in words):  # single tokens merge no more
        counts = [n for word, n in zip(words, counts) if len(word) > 1]
        words = [word for word in words if len(word) > 1]
    return words, counts, None if merges_log is None else [(count, shrink) for count, shrink in merges_log]


def _cutter(tokens) -> "re.Pattern[str]":
    """A pattern matching (empty) where a word may be cut: before a space or a newline, where no
    forced token holds the two bytes side by side (so no forced merge can join across). Text is one
    character per byte (latin-1). Other places would be as safe; cutting there alone keeps the
    pattern fast (some 30 MB/s), and the pieces (" the", "\nThe") recur."""
    joined = set()
    for token in tokens:
        text = token.decode("latin-1")
        joined.update(map(str.__add__, text, text[1:]))
    alternatives = []
    for p in " \n":  # the lookahead first: it fails fast, at almost every place
        before = "".join(re.escape(chr(x)) for x in range(256) if chr(x) + p not in joined)
        if before:
            alternatives.append(f"(?={re.escape(p)})(?<=[{before}])")
    return re.compile("|".join(alternatives) or "(?!)", re.DOTALL)


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
