"""A merge shard (`train.merge._Shard`) holds its pair index as arrays of word numbers, and a large
shard its words as the UTF-8 of their token ids' characters: the merges must be the naive loop's
either way, whatever the ids (one, two, three or four bytes of UTF-8, surrogate code points among
them), and the words and index must stay compact."""

import random
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.train import merge
from cs336_basics.train.merge import _Shard
from cs336_basics.train.pair_queue import RIGHT, SHIFT
from cs336_basics.train.reference import learn_merges

# Non-ASCII letters make byte tokens 128-255 (two bytes of UTF-8 each in a shard's words).
_words = st.dictionaries(
    st.text("aab cé€", min_size=1, max_size=30).map(str.encode),
    st.integers(1, 5),
    min_size=1,
    max_size=12,
)


def _shard_merges(counts: dict[bytes, int], num_merges: int, first_id: int) -> list[tuple[bytes, bytes]]:
    """The merges a shard makes, choosing by the reference's rule, when the k-th merge's token has the
    id `first_id + k`."""
    words = [w for w in counts if len(w) > 1]
    shard = _Shard(list(words), [counts[w] for w in words])
    pair_counts = shard.count_pairs()
    token = {i: bytes([i]) for i in range(256)}
    merges = []
    for k in range(num_merges):
        live = {p: n for p, n in pair_counts.items() if n > 0}
        if not live:
            break
        pair = max(live, key=lambda p: (live[p], (token[p >> SHIFT], token[p & RIGHT])))
        merges.append((token[pair >> SHIFT], token[pair & RIGHT]))
        token[first_id + k] = merges[-1][0] + merges[-1][1]
        change, _ = shard.merge(pair, chr(first_id + k))
        del pair_counts[pair]
        for p, d in change.items():
            pair_counts[p] = pair_counts.get(p, 0) + d
    return merges


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_words, st.integers(1, 40), st.sampled_from([256, 0x7F8, 0xD7F0, 0xFFF0, 0x10FFD0]), st.booleans())
def test_shard_merges_as_the_naive_loop_whatever_the_ids(monkeypatch, counts, num_merges, first_id, utf8):
    # 0x7F8: ids cross from two to three bytes of UTF-8; 0xD7F0: into the surrogates; 0xFFF0: from
    # three bytes to four.
    monkeypatch.setattr(merge, "UTF8_WORDS", 0 if utf8 else 1 << 60)
    assert _shard_merges(counts, num_merges, first_id) == learn_merges(counts, num_merges)[0]


def test_a_large_shard_holds_a_word_in_under_100_bytes(monkeypatch):
    # Web-like words: 3-12 letters after a space, nearly all distinct; their bytes, the lists and the
    # index. Measured: 89 bytes a word; strings (one character per token) with tuples of int objects
    # for the index took 213, strings with this index 105.
    monkeypatch.setattr(merge, "UTF8_WORDS", 10_000)  # 50,000 words make a large shard here
    rng = random.Random(0)
    tracemalloc.start()
    try:
        words = list({(" " + "".join(rng.choices("etaoinshrdlucmwfgyp", k=rng.randint(3, 12)))).encode()
                      for _ in range(50_000)})
        shard = _Shard(words, [1] * len(words))
        shard.count_pairs()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held / len(words) < 100


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_words, st.integers(1, 40), st.integers(0, 3), st.sampled_from([3, 1 << 16]))
def test_utf8_words_with_forced_merges_and_long_words(monkeypatch, counts, num_merges, num_forced, long):
    # The forced merges hand the shard strings (not bytes); words of more than `long` tokens are
    # long words, merged beside the UTF-8 ones.
    monkeypatch.setattr(merge, "UTF8_WORDS", 0)
    monkeypatch.setattr(merge, "_LONG", long)
    forced = learn_merges(counts, num_forced)[0]
    log: list[tuple[int, int]] = []
    merges = merge.train_merges(counts, num_merges, merge_log=log, forced=forced)
    expected, expected_log = learn_merges(counts, num_merges, forced)
    assert merges == expected
    tokens = sum(len(w) * n for w, n in counts.items())
    assert [(count, tokens := tokens - shrink) for count, shrink in log] == expected_log
