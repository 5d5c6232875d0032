"""Long words (whole documents with pattern "none", SuperBPE's stage 2) are merged with NumPy
(`train.long_words`): the merges and merge log must be the naive loop's, whichever words are long."""

from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.train import merge
from cs336_basics.train.merge import train_merges
from cs336_basics.train.reference import learn_merges

# Few letters make long runs of one letter ((a, a) overlapping itself), adjacent occurrences of a
# pair ("abab") and many ties; counts past 2^32 check that the counts stay exact.
_words = st.dictionaries(
    st.text("aab c", min_size=1, max_size=40).map(str.encode),
    st.one_of(st.just(1), st.integers(1, 5), st.integers(1 << 32, 1 << 34)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_words, st.integers(0, 6), st.integers(1, 60), st.booleans())
def test_long_words_merge_as_the_naive_loop(monkeypatch, counts, long, num_merges, one_key):
    from cs336_basics.train import long_words

    monkeypatch.setattr(merge, "_LONG", long)  # words of more than `long` tokens are long words
    if not one_key:  # the index sorted by a stable argsort, as for ids too large for one int64 key
        monkeypatch.setattr(long_words, "_KEY_BITS", 0)
    log: list[tuple[int, int]] = []
    merges = train_merges(counts, num_merges, merge_log=log)
    expected_merges, expected_log = learn_merges(counts, num_merges)
    assert merges == expected_merges
    tokens = sum(len(w) * n for w, n in counts.items())
    assert [(count, tokens := tokens - shrink) for count, shrink in log] == expected_log


@pytest.mark.parametrize("long", [0, 3])
def test_runs_of_one_token_merge_left_to_right(monkeypatch, long):
    # "aaaaa": (a, a) merges at 0 and 2, leaving "AAa"; then (A, A) and so on, as str.replace does.
    monkeypatch.setattr(merge, "_LONG", long)
    counts = {b"aaaaa": 1, b"aaaaaaaa": 2, b"baaab": 3}
    expected_merges, expected_log = learn_merges(counts, 6)
    log: list[tuple[int, int]] = []
    assert train_merges(counts, 6, merge_log=log) == expected_merges
    tokens = sum(len(w) * n for w, n in counts.items())
    assert [(count, tokens := tokens - shrink) for count, shrink in log] == expected_log


def test_long_words_index_in_batches(monkeypatch):
    # The first index is built in batches of positions; a pair recurring across batches keeps all its sites.
    from cs336_basics.train import long_words

    monkeypatch.setattr(merge, "_LONG", 0)
    monkeypatch.setattr(long_words, "_BATCH", 7)
    counts = {b"abcabcabcabc": 1, b"cabcab cab": 3, b"aaaaaaaaaaaaa": 1}
    assert train_merges(counts, 12) == learn_merges(counts, 12)[0]


def test_words_are_long_from_8_tokens_only_where_long_words_hold_most_of_the_text():
    prose = [b" the", b" cat", b" something", b" beautiful"] * 10 + [b"x" * 70]
    documents = [b"a" * 100, b"b" * 300, b" the"]
    assert merge._long_threshold(prose) == merge._LONG
    assert merge._long_threshold(documents) == merge._MOSTLY_LONG


def test_every_word_is_long_in_web_scale_shards(monkeypatch):
    monkeypatch.setattr(merge, "ALL_LONG_WORDS", 4)
    assert merge._long_threshold([b" the", b" cat"] * 4, num_shards=2) == 0
    assert merge._long_threshold([b" the", b" cat"] * 4, num_shards=3) == merge._LONG


def test_long_words_hold_ids_in_the_surrogate_range():
    # After the forced merges of a large tokenizer (o200k's 200,000 as SuperBPE's stage 2 on top of
    # it), a word holds ids 55,296-57,343, which as characters are surrogate code points.
    from cs336_basics.train.long_words import SHIFT, LongWords

    a, b = chr(0xD800), chr(0xDFFF)
    words = LongWords([a + b + a + b, b + b + a], [1, 2])
    pairs: dict[int, int] = {}
    words.count_pairs(pairs)
    name = {(a, b): 0xD800 << SHIFT | 0xDFFF, (b, a): 0xDFFF << SHIFT | 0xD800, (b, b): 0xDFFF << SHIFT | 0xDFFF}
    assert pairs == {name[a, b]: 2, name[b, a]: 3, name[b, b]: 2}
    assert words.merge(name[a, b], 0xDABC, defaultdict(int)) == 2  # two sites, in the word counted once
