"""Under-trained tokens: each token's occurrences in the training corpus encoded with the final
vocabulary, read from the merge log (never by encoding again), checked by hand, against encoding
the corpus with the slow reference trainer's merges and encoder, and through `bpe train`/`bpe vocab`."""

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import report
from cs336_basics.bpe import Tokenizer, train_bpe
from cs336_basics.cli import main
from cs336_basics.train.merge_log import MergeLog, read_merge_log, readable_token, token_occurrences
from tests.common import FIXTURES_PATH
from cs336_basics.train.reference import split_documents, train_bpe_reference
from tests.reference import reference_encode

EOT = "<|endoftext|>"


def train(tmp_path, text: str, vocab_size: int, specials: list[str]):
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    steps: list[tuple[int, int]] = []
    stats: dict = {}
    vocab, merges = train_bpe(path, vocab_size, specials, merge_log=steps, stats=stats)
    log = MergeLog(stats["pretoken_bytes"], steps)
    log.occurrences = token_occurrences(stats["byte_counts"], merges, log)
    return vocab, merges, log


def encoded_counts(text: str, vocab, merges, specials: list[str]) -> Counter:
    """Each token's count in the corpus encoded by the reference encoder, special tokens left out."""
    counts = Counter()
    for document in split_documents(text, specials):
        counts.update(reference_encode(document, vocab, merges, []))
    return counts


# --- worked on paper -------------------------------------------------------------------------------


def test_a_token_absorbed_by_a_later_merge_occurs_zero_times(tmp_path):
    # Pre-tokens "abc", " abc", " abc". (a, b) and (b, c) both occur 3 times; the tie goes to the
    # greater (b, c). Then (a, bc) 3 times, then (" ", abc) twice. Encoded: "abc" once, " abc" twice;
    # "bc" was made from 3 places and all 3 were taken by "abc".
    vocab, merges, log = train(tmp_path, "abc abc abc", 259, [])
    assert merges == [(b"b", b"c"), (b"a", b"bc"), (b" ", b"abc")]
    occ = log.occurrences
    assert (occ[256], occ[257], occ[258]) == (0, 1, 2)
    assert (occ[ord("a")], occ[ord("b")], occ[ord("c")], occ[ord(" ")]) == (0, 0, 0, 0)
    assert sum(occ) == log.steps[-1][1] == 3  # the corpus length after the last merge
    entries = report.vocab_entries(Tokenizer(vocab, merges, []), log, min_count=1)
    listed = [e for e in report.under_trained(entries) if e.rank is not None]
    assert [(e.id, e.rank, e.count, e.occurrences, e.flags) for e in listed] == [(256, 0, 3, 0, ["rare"])]


def test_overlapping_merge_takes_two_from_the_same_token(tmp_path):
    # "aaa": (a, a) joins once ("aa a"), leaving one a; (aa, a) joins once ("aaa").
    _, merges, log = train(tmp_path, "aaa", 258, [])
    assert merges == [(b"a", b"a"), (b"aa", b"a")]
    assert log.occurrences[ord("a")] == 0 and log.occurrences[256:] == [0, 1]
    byte_counts = [0] * 256
    byte_counts[ord("a")] = 3
    assert token_occurrences(byte_counts, merges[:1], MergeLog(3, log.steps[:1]))[ord("a")] == 1  # 3 - 2 * 1


def test_flags_unreachable_and_partial_tokens():
    # GPT-2's pattern never lets "a " be one pre-token: the merge (a, " ") makes a token no text gives.
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"a "}
    tok = Tokenizer(vocab, [(b"a", b" ")], [])
    counts = Counter(tok.encode("a a a b"))
    entries = {e.id: e for e in report.vocab_entries(tok, occurrences=counts, min_count=1)}
    assert entries[256].flags == ["rare", "unreachable"]
    assert entries[0xFF].flags == ["rare", "partial"]  # a byte no UTF-8 text holds
    assert entries[0xE6].flags == ["rare", "partial"]
    assert entries[ord("a")].flags == [] and entries[ord("a")].occurrences == 3
    assert entries[ord("z")].flags == ["rare"]  # it could occur, but did not
    # Without occurrences only what the vocabulary itself shows is flagged.
    entries = {e.id: e for e in report.vocab_entries(tok)}
    assert entries[256].flags == ["unreachable"] and entries[0xFF].flags == [] and entries[0xFF].occurrences is None


def test_default_minimum_is_a_millionth_of_the_tokens_or_ten():
    assert report.default_min_count(0) == 10
    assert report.default_min_count(10_000_000) == 10
    assert report.default_min_count(10_000_001) == 11
    assert report.default_min_count(123_456_789) == 124


# --- against the reference trainer and encoder -----------------------------------------------------


def check_against_reference(tmp_path, text: str, vocab_size: int, specials: list[str], min_count: int) -> None:
    vocab, merges, log = train(tmp_path, text, vocab_size, specials)
    ref_vocab, ref_merges = train_bpe_reference(text, vocab_size, specials)
    assert merges == ref_merges
    counts = encoded_counts(text, ref_vocab, ref_merges, specials)
    assert log.occurrences == [counts[i] for i in range(256 + len(merges))]
    entries = report.vocab_entries(Tokenizer(vocab, merges, specials), log, min_count=min_count)
    rare = {e.id for e in entries if "rare" in e.flags}
    assert rare == {i for i in range(256 + len(merges)) if counts[i] < min_count}
    # A token made by a merge whose occurrences later merges all took is listed; one that occurs is not.
    for e in entries:
        if e.rank is not None and counts[e.id] == 0:
            assert e in report.under_trained(entries)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from(["a", "b", "ab", "aab", " ", "  ", "ba", "\n", "é", "日", EOT, "x y"]), max_size=40),
    st.integers(257, 290),
    st.integers(1, 3),
)
def test_occurrences_equal_the_reference_encoding_on_generated_corpora(tmp_path, pieces, vocab_size, min_count):
    check_against_reference(tmp_path, "".join(pieces), vocab_size, [EOT], min_count)


def test_occurrences_equal_the_reference_encoding_on_a_fixture(tmp_path):
    text = (FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8")[:30_000]
    check_against_reference(tmp_path, text, 400, [EOT], 10)


# --- the command line ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    assert main(["train", str(FIXTURES_PATH / "english.txt"), "--vocab-size", "500", "--out", str(out), "--quiet"]) == 0
    return out


def test_train_writes_occurrences_and_lists_under_trained_tokens(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("abc abc abc", encoding="utf-8")
    out = tmp_path / "t"
    assert main(["train", str(corpus), "--vocab-size", "260", "--out", str(out), "--quiet", "--min-count", "1"]) == 0
    summary = capsys.readouterr().out
    assert "under-trained        1 merged tokens with fewer than 1 occurrences" in summary
    assert "'bc' (merge 0: 3 then, 0 now)" in summary
    log = read_merge_log(out / "merge_log.tsv")
    assert log.occurrences[256:] == [0, 1, 2]
    assert main(["vocab", "--tokenizer", str(out), "--under-trained", "--min-count", "1"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == ["id", "token", "rank", "left", "right", "count", "occurrences", "under-trained"]
    assert rows[1] == ["256", "bc", "0", "b", "c", "3", "0", "rare"]
    assert all(int(r[0]) < 256 for r in rows[2:])  # then the bytes the corpus lacks


def test_vocab_lists_occurrences_of_every_token(trained, capsys):
    assert main(["vocab", "--tokenizer", str(trained)]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    tok = Tokenizer.from_pretrained(trained)
    text = (FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8")
    counts = Counter(tok.encode(text))
    special = tok.encode(EOT)[0]
    for row in rows:
        token_id = int(row[0])
        if token_id == special:
            assert row[6:] == ["", ""]
        else:
            assert int(row[6]) == counts[token_id], row
            assert ("rare" in row[7]) == (counts[token_id] < 10)


def test_an_old_merge_log_without_occurrences_still_reads(trained, tmp_path, capsys):
    old = tmp_path / "old"
    old.mkdir()
    for name in ("vocab.json", "merges.txt"):
        (old / name).write_bytes((trained / name).read_bytes())
    lines = (trained / "merge_log.tsv").read_text(encoding="utf-8").splitlines()
    kept = [lines[0], lines[1]] + lines[258:]  # without the byte rows
    (old / "merge_log.tsv").write_text("".join("\t".join(line.split("\t")[:7]) + "\n" for line in kept), encoding="utf-8")
    new_log, old_log = read_merge_log(trained / "merge_log.tsv"), read_merge_log(old / "merge_log.tsv")
    assert old_log.occurrences is None and old_log.steps == new_log.steps and old_log.merged == new_log.merged
    assert main(["vocab", "--tokenizer", str(old)]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows[300][5] != "" and all(r[6] == "" and "rare" not in r[7] for r in rows)
    assert main(["vocab", "--tokenizer", str(old), "--under-trained"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no merge log with each token's occurrences" in err[0] and "--text" in err[0]


def test_vocab_counts_on_a_given_text(trained, tmp_path, capsys):
    text = "the cat and the dog\n" * 3
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    assert main(["vocab", "--tokenizer", str(trained), "--text", str(tmp_path / "t.txt"), "--under-trained", "--min-count", "2",
                 "--quiet"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    counts = Counter(Tokenizer.from_pretrained(trained).encode(text))
    assert {int(r[0]) for r in rows if "rare" in r[7]} == {i for i in range(499) if counts[i] < 2}
    assert all(int(r[6]) == counts[int(r[0])] for r in rows)


def test_bad_byte_rows_name_the_line(trained, tmp_path):
    lines = (trained / "merge_log.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    bad = tmp_path / "merge_log.tsv"
    bad.write_text("".join(lines[:10] + lines[11:]), encoding="utf-8")  # byte 8's row is missing
    with pytest.raises(ValueError, match=r"line 11: expected the row of byte 8"):
        read_merge_log(bad)
    assert readable_token(b"\x08") in lines[10]


def test_report_page_lists_the_under_trained_tokens(trained, monkeypatch):
    import re

    from tests.test_report import FakePretrained

    tok = Tokenizer.from_pretrained(trained)
    monkeypatch.setattr(Tokenizer, "from_pretrained", FakePretrained(None), raising=False)  # offline
    log = read_merge_log(trained / "merge_log.tsv")
    page = report.build_report(tok, name="t", log=log, min_count=5)
    section = page[page.index('id="under-trained"'):]
    section = section[: section.index("</section>")]
    expected = [e for e in report.under_trained(report.vocab_entries(tok, log, min_count=5)) if e.rank is not None]
    assert expected and all(e.occurrences < 5 for e in expected)
    assert [int(i) for i in re.findall(r'<tr data-id="(\d+)">', section)] == [e.id for e in expected][:60]
    first = expected[0]
    assert f'<td class="n">{first.count:,}</td><td class="n">{first.occurrences:,}</td>' in section
    assert f'data-merged="{len(expected)}"' in section and "fewer than 5 occurrences" in section
    page = report.build_report(tok, name="t", log=MergeLog(log.corpus_bytes, log.steps, log.merged))
    assert "does not record how often each token occurs" in page


def test_report_page_counts_on_the_held_out_text_without_occurrences_in_the_log(trained, monkeypatch):
    import re

    from tests.test_report import FakePretrained

    tok = Tokenizer.from_pretrained(trained)  # as a pretrained tokenizer comes: no merge log
    monkeypatch.setattr(Tokenizer, "from_pretrained", FakePretrained(None), raising=False)
    text = "the cat and the dog and the bird\n" * 4
    page = report.build_report(tok, name="t", texts=[report.HeldOut("h.txt", text)], pretrained=[], min_count=3)
    section = page[page.index('id="under-trained"'):]
    section = section[: section.index("</section>")]
    counts = Counter(tok.encode(text))
    expected = [e.id for e in report.under_trained(report.vocab_entries(tok, occurrences=counts, min_count=3))
                if e.rank is not None]
    assert all(counts[i] < 3 for i in expected) and counts[tok.encode(" the")[0]] >= 3
    assert [int(i) for i in re.findall(r'<tr data-id="(\d+)">', section)] == expected[:60]
    assert "fewer than 3 occurrences in the held-out text (h.txt)" in section
