"""A merge shard (`train.merge._Shard`) holds its short words as strings with an index of word
numbers, and a web-scale shard every word as a long word (`long_words`): the merges must be the naive
loop's either way, whatever the ids (surrogate code points among them), and a web-scale shard's words
and index must stay compact."""

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


def _shard_merges(counts: dict[bytes, int], num_merges: int, first_id: int, long: int | None = None
                  ) -> list[tuple[bytes, bytes]]:
    """The merges a shard makes, choosing by the reference's rule, when the k-th merge's token has the
    id `first_id + k` (words of more than `long` tokens long words)."""
    words = [w for w in counts if len(w) > 1]
    shard = _Shard(list(words), [counts[w] for w in words], long)
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


@settings(max_examples=150, deadline=None)
@given(_words, st.integers(1, 40), st.sampled_from([256, 0x7F8, 0xD7F0, 0xFFF0, 0x10FFD0]), st.sampled_from([None, 0]))
def test_shard_merges_as_the_naive_loop_whatever_the_ids(counts, num_merges, first_id, long):
    # 0xD7F0: ids run into the surrogates; 0x10FFD0: up to the last code point. `long` 0: every word
    # is a long word, as in a web-scale shard.
    assert _shard_merges(counts, num_merges, first_id, long) == learn_merges(counts, num_merges)[0]


def _held(words: list[bytes], counts: list[int], num_merges: int) -> int:
    """The bytes a web-scale shard of `words` holds after `num_merges` merges."""
    from cs336_basics.train import long_words  # noqa: F401  (NumPy loaded before measuring)

    tracemalloc.start()
    try:
        shard = _Shard(list(words), list(counts), 0)
        pair_counts = shard.count_pairs()
        for k in range(num_merges):
            pair = max(pair_counts, key=pair_counts.__getitem__)
            del pair_counts[pair]
            change, _ = shard.merge(pair, chr(256 + k))
            for p, d in change.items():
                pair_counts[p] = pair_counts.get(p, 0) + d
        del pair_counts, change
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_a_web_scale_shard_holds_a_word_in_under_110_bytes():
    # Web-like words: 3-12 letters after a space, nearly all distinct: the token array, the index of
    # the first pairs and of the pairs 300 merges made, per word (the held bytes of 100,000 words
    # less those of 50,000: a shard's fixed arrays left out). Measured: 102 bytes a word; 123 with
    # the first count's arrays kept, and more with an array of positions per pair made.
    rng = random.Random(0)
    words = list({(" " + "".join(rng.choices("etaoinshrdlucmwfgyp", k=rng.randint(3, 12)))).encode()
                  for _ in range(100_000)})
    counts = [rng.choice([1, 1, 1, 2, 3]) for _ in words]
    half = len(words) // 2
    per_word = (_held(words, counts, 300) - _held(words[:half], counts[:half], 300)) / (len(words) - half)
    assert per_word < 110


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_words, st.integers(1, 40), st.integers(0, 3), st.booleans())
def test_web_scale_shards_with_forced_merges(monkeypatch, counts, num_merges, num_forced, two_shards):
    # The forced merges hand the shards strings (not bytes), which become long words all the same.
    monkeypatch.setattr(merge, "ALL_LONG_WORDS", 1)
    forced = learn_merges(counts, num_forced)[0]
    log: list[tuple[int, int]] = []
    merges = merge.train_merges(counts, num_merges, merge_log=log, forced=forced, num_shards=1 + two_shards)
    expected, expected_log = learn_merges(counts, num_merges, forced)
    assert merges == expected
    tokens = sum(len(w) * n for w, n in counts.items())
    assert [(count, tokens := tokens - shrink) for count, shrink in log] == expected_log
