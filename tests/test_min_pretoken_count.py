"""`min_pretoken_count` (`--min-pretoken-count`): the pre-tokens seen fewer than N times are dropped
before merging, and the merges are exactly those of the counts that are left."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer, train_bpe, train_bpe_from_counts
from cs336_basics.cli import main
from cs336_basics.counts import table, writer
from cs336_basics.train.reference import count_pretokens, learn_merges

SPECIAL = "<|endoftext|>"
words = st.binary(min_size=1, max_size=6).map(lambda w: bytes(b % 4 + 97 for b in w))  # a, b, c, d: many ties
count_dicts = st.dictionaries(words, st.integers(1, 6), min_size=1, max_size=25)


def pruned(counts: dict[bytes, int], n: int) -> dict[bytes, int]:
    return {w: c for w, c in counts.items() if c >= n}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(counts=count_dicts, n=st.integers(1, 5), num_merges=st.integers(1, 30))
def test_the_merges_are_those_of_the_pruned_counts(counts, n, num_merges):
    _, merges = train_bpe_from_counts(counts, 256 + num_merges, [], min_pretoken_count=n)
    assert merges == learn_merges(pruned(counts, n), num_merges)[0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(st.text(alphabet="ab c\n.é", max_size=40), min_size=1, max_size=8), n=st.integers(1, 4))
def test_training_on_a_file_prunes_its_counts(tmp_path_factory, docs, n):
    path = tmp_path_factory.mktemp("prune") / "c.txt"
    text = SPECIAL.join(docs)
    path.write_bytes(text.encode("utf-8"))
    vocab, merges = train_bpe(path, 300, [SPECIAL], min_pretoken_count=n)
    assert merges == learn_merges(pruned(count_pretokens(text, [SPECIAL]), n), 300 - 257)[0]
    if n == 1:  # no pruning: today's merges and vocabulary exactly
        assert (vocab, merges) == train_bpe(path, 300, [SPECIAL])


def test_pruning_changes_the_merges_and_the_statistics_say_what_was_dropped():
    counts = {b"ab": 1, b"ab ": 1, b"xy": 1, b"cd": 3, b"cde": 2}
    stats, log = {}, []
    _, merges = train_bpe_from_counts(counts, 260, [], min_pretoken_count=2, stats=stats, merge_log=log)
    assert merges[0] == (b"c", b"d")
    assert train_bpe_from_counts(counts, 260, [])[1][0] != merges[0] or merges != train_bpe_from_counts(counts, 260, [])[1]
    assert stats["distinct_pretokens"] == 5 and stats["dropped_pretokens"] == 3
    assert stats["pretoken_bytes"] == 2 * 3 + 3 * 2  # the merge log starts from what is left
    assert log[0] == (5, stats["pretoken_bytes"] - 5)


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2"])
def test_a_bad_count_is_refused_before_any_work(tmp_path, bad):
    corpus = tmp_path / "c.txt"
    corpus.write_text("ab ab", encoding="utf-8")
    with pytest.raises(ValueError, match="min_pretoken_count"):
        train_bpe_from_counts({b"ab": 1}, 300, [], min_pretoken_count=bad)
    with pytest.raises(ValueError, match="min_pretoken_count"):
        train_bpe(corpus, 300, [SPECIAL], min_pretoken_count=bad)
    with pytest.raises(ValueError, match="min_pretoken_count"):
        writer.count_corpus(str(corpus), tmp_path / "t", special_tokens=[SPECIAL], min_pretoken_count=bad)
    assert not (tmp_path / "t").exists()


def test_a_count_table_records_it_and_training_applies_it(tmp_path):
    corpus = tmp_path / "c.txt"
    text = "low lower lowest newer wider new new low<|endoftext|>low wide"
    corpus.write_text(text, encoding="utf-8")
    writer.count_corpus(str(corpus), tmp_path / "t2", special_tokens=[SPECIAL], min_pretoken_count=2)
    writer.count_corpus(str(corpus), tmp_path / "t1", special_tokens=[SPECIAL])
    assert table.read_manifest(tmp_path / "t2")["min_pretoken_count"] == 2
    assert "min_pretoken_count" not in table.read_manifest(tmp_path / "t1")
    # The table keeps every count (so tables add up exactly); training drops the rare ones.
    assert table.read_counts(tmp_path / "t2").word_counts == count_pretokens(text, [SPECIAL])
    want = learn_merges(pruned(count_pretokens(text, [SPECIAL]), 2), 20)[0]
    assert train_bpe_from_counts(tmp_path / "t2", 277)[1] == want
    assert train_bpe_from_counts(tmp_path / "t1", 277, min_pretoken_count=2)[1] == want
    assert train_bpe_from_counts(tmp_path / "t2", 277, min_pretoken_count=1)[1] == train_bpe(corpus, 277, [SPECIAL])[1]
    added = table.merge_tables([tmp_path / "t1", tmp_path / "t2"], tmp_path / "sum")
    assert added["min_pretoken_count"] == 2
    doubled = {w: 2 * n for w, n in count_pretokens(text, [SPECIAL]).items()}
    assert train_bpe_from_counts(tmp_path / "sum", 277)[1] == learn_merges(pruned(doubled, 2), 20)[0]


def test_the_commands_take_it(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    text = "low lower lowest newer wider new new low<|endoftext|>low wide " * 3 + "rare words once"
    corpus.write_text(text, encoding="utf-8")
    out = tmp_path / "tok"
    assert main(["train", str(corpus), "--vocab-size", "280", "--out", str(out), "--quiet",
                 "--min-pretoken-count", "2"]) == 0
    printed = capsys.readouterr().out
    assert "3 seen fewer than 2 times dropped" in printed
    assert Tokenizer.from_pretrained(str(out)).merges == train_bpe(corpus, 280, [SPECIAL], min_pretoken_count=2)[1]
    assert main(["count", str(corpus), "--out", str(tmp_path / "t"), "--quiet", "--min-pretoken-count", "3"]) == 0
    assert table.read_manifest(tmp_path / "t")["min_pretoken_count"] == 3
    capsys.readouterr()
    assert main(["train", "--counts", str(tmp_path / "t"), "--vocab-size", "280", "--out", str(tmp_path / "t3"),
                 "--quiet"]) == 0  # the table's N
    assert "seen fewer than 3 times dropped" in capsys.readouterr().out
    assert Tokenizer.from_pretrained(str(tmp_path / "t3")).merges == train_bpe(corpus, 280, [SPECIAL],
                                                                               min_pretoken_count=3)[1]

