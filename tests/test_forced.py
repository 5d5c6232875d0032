"""`train.forced.apply_forced` against the forced merges made one by one, on generated words and merges.

The oracle is the definition: for each forced merge in order, replace its pair left to right (not
overlapping) in every word; its count is the pair's occurrences before (overlaps count), its shrink
the replacements, both weighted by the words' counts. Tokens are named as the merge loop names them:
byte b is b, the token of merge k is 256 + k, and a merge names its tokens by the first merge that
made their bytes.
"""

import contextlib
from unittest import mock

from hypothesis import given, settings, strategies as st

from cs336_basics.train import forced as forced_module
from cs336_basics.train.forced import apply_forced, forced_pairs

SHIFT = 21
ALPHABET = [b"a", b"b", b" ", b"\n", b"\xff"]


def merged_one_by_one(words: list[bytes], counts: list[int], forced: list[tuple[bytes, bytes]]):
    """The words after each forced merge in turn, their counts, and each merge's (count, shrink)."""
    text = [word.decode("latin-1") for word in words]
    name = {bytes([b]): chr(b) for b in range(256)}
    log = []
    for k, (left, right) in enumerate(forced):
        pair, new = name[left] + name[right], chr(256 + k)
        count = shrink = 0
        for i, (word, n) in enumerate(zip(text, counts)):
            count += n * sum(word[j:j + 2] == pair for j in range(len(word) - 1))
            merged = word.replace(pair, new)
            shrink += n * (len(word) - len(merged))
            text[i] = merged
        log.append((count, shrink))
        name.setdefault(left + right, new)
    kept = [(word, n) for word, n in zip(text, counts) if len(word) > 1]
    return [word for word, _ in kept], [n for _, n in kept], log


@st.composite
def forced_merges(draw, max_merges: int = 30) -> list[tuple[bytes, bytes]]:
    """Merges over the alphabet, each of two tokens made before: repeats of a pair, (a, a), and
    the same bytes made twice ((a, ab) and (aa, b)) come often."""
    tokens = list(ALPHABET)
    merges = []
    for _ in range(draw(st.integers(0, max_merges))):
        if merges and draw(st.integers(0, 9)) == 0:
            merges.append(draw(st.sampled_from(merges)))  # a pair forced again
            continue
        left = draw(st.sampled_from(tokens))
        right = left if draw(st.integers(0, 4)) == 0 else draw(st.sampled_from(tokens))
        merges.append((left, right))
        tokens.append(left + right)
    return merges


def word_strategy(max_size: int) -> st.SearchStrategy[bytes]:
    # runs of one byte make (a, a) overlap itself; few spaces make long pieces
    return st.lists(st.tuples(st.sampled_from(ALPHABET), st.integers(1, 6)), min_size=1, max_size=max_size).map(
        lambda runs: b"".join(byte * n for byte, n in runs)).filter(lambda word: len(word) > 1)


def check(words: list[bytes], counts: list[int], merges: list[tuple[bytes, bytes]], log: bool) -> None:
    expected_words, expected_counts, expected_log = merged_one_by_one(words, counts, merges)
    pairs = forced_pairs(merges, SHIFT)
    got_words, got_counts, got_log = apply_forced(list(words), list(counts), merges, pairs, SHIFT, log)
    if not merges:
        assert (got_words, got_counts, got_log) == (words, counts, None)
        return
    assert got_words == expected_words
    assert got_counts == expected_counts
    assert got_log == (expected_log if log else None)


# Small sizes so that few generated words take every path: pieces told apart by their bytes packed
# and by their text, merged one by one (long) and in batches, several batches and chunks, pairs
# looked up in the table and among the sorted pairs. Counts past 2^61 make a chunk's weights exceed
# int64 (added as Python ints).
SMALL = {"_LONG_PIECE": 12, "_BATCH": 40, "_CHUNK": 50, "_DENSE": 259, "_SHORT": 3}


def sizes(small: bool):
    return mock.patch.multiple(forced_module, **SMALL) if small else contextlib.nullcontext()


@settings(max_examples=150, deadline=None)
@given(words=st.lists(word_strategy(20), min_size=1, max_size=12), merges=forced_merges(),
       counts=st.lists(st.integers(1, 3) | st.integers(1, 2**40) | st.integers(2**61, 2**62), min_size=12, max_size=12),
       log=st.booleans(), small=st.booleans())
def test_apply_forced_is_the_merges_one_by_one(words, merges, counts, log, small):
    with sizes(small):
        check(words, counts[:len(words)], merges, log)


@settings(max_examples=30, deadline=None)
@given(words=st.lists(word_strategy(120), min_size=1, max_size=4), merges=forced_merges(60), log=st.booleans())
def test_long_pieces_at_default_sizes(words, merges, log):
    """Pieces past `_LONG_PIECE` characters (few spaces), merged one by one, beside short ones."""
    check(words + [b" ab", b"a b\n"], [1] * (len(words) + 2), merges, log)


def test_a_run_of_a_pair_of_one_token_merges_every_other_pair():
    merges = [(b"a", b"a"), (b"aa", b"a"), (b"aa", b"aa")]
    for small in (False, True):
        with sizes(small):
            check([b"a" * n for n in range(2, 40)] + [b" " + b"a" * 200], [1] * 38 + [3], merges, True)


def test_the_first_of_equal_pairs_names_and_counts_the_merge():
    """The same pair forced twice: the second merges nothing; a token made twice keeps the first
    merge's id for the merges after it."""
    merges = [(b"a", b"b"), (b"a", b"b"), (b"ab", b"b"), (b"b", b"b"), (b"a", b"bb"), (b"abb", b" ")]
    for small in (False, True):
        with sizes(small):
            check([b"abb abb", b"abbb", b"xabb\n", b"ab" * 30], [2, 1, 5, 1], merges, True)


def test_pieces_are_told_apart_by_every_byte_and_by_their_length():
    """Pieces of every length to past `_SHORT` (no cut inside: every pair of their bytes is forced)
    that differ only in their last byte, or only in trailing zero bytes, merge each as itself."""
    merges = [(b"x", b"x"), (b"x", b"a"), (b"x", b"\x00"), (b"\x00", b"\x00"), (b"xx", b"xx"), (b"xxxx", b"xa")]
    words = [b"x" * n + end for n in range(1, 20) for end in (b"", b"a", b"\x00", b"\x00\x00")]
    for small in (False, True):
        with sizes(small):
            check(words, list(range(1, len(words) + 1)), merges, True)


def test_a_word_longer_than_a_chunk_is_merged_in_parts_cut_where_its_pieces_are():
    """Parts of a long word start only where the word may be cut (here, next to its spaces), never
    inside a run of bytes that forced tokens join; a word with no such place is one part."""
    merges = [(b"a", b"b"), (b"b", b"a"), (b"ab", b"ab"), (b"abab", b"ab")]
    words = [b"ab" * 40 + b" " + b"ab" * 40 + b" b", b"ab" * 60, b"x" + b"ab" * 30]
    for small in (False, True):
        with sizes(small):
            check(words, [1, 2, 3], merges, True)
