"""The measures papers use (fertility, Rényi and Shannon efficiency, vocabulary use), each checked on
an example small enough to work out on paper, then through `bpe stats` and the report page."""

import math
import re
from collections import Counter

import pytest

from cs336_basics import report
from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import main

BYTES = {i: bytes([i]) for i in range(256)}


def tokenizer_with(merges: list[tuple[bytes, bytes]], pattern: str = "gpt2") -> Tokenizer:
    vocab = dict(BYTES)
    for left, right in merges:
        vocab[len(vocab)] = left + right
    return Tokenizer(vocab, merges, [], pattern=pattern)


# --- fertility -------------------------------------------------------------------------------------


def test_tokens_per_word_counts_the_tokens_holding_each_words_bytes():
    # "ab", " ", "cd": the space token holds no byte of a word.
    assert report.tokens_per_word("ab cd", [2, 1, 2]) == [1, 1]
    # "a", "b ", "cd": "b " holds part of "ab" only.
    assert report.tokens_per_word("ab cd", [1, 2, 2]) == [2, 1]
    # "a", "b c", "d": "b c" holds part of both words, and counts for each.
    assert report.tokens_per_word("ab cd", [1, 3, 1]) == [2, 2]
    # Multi-byte characters and leading, trailing and repeated whitespace: "  ", "hé", "llo ", " ", "x", "\n".
    assert report.tokens_per_word("  héllo  x\n", [2, 3, 4, 1, 1, 1]) == [2, 1]
    assert report.tokens_per_word("", []) == [] and report.tokens_per_word(" \n", [2]) == []


def test_fertility_and_split_words_on_a_hand_worked_example():
    # GPT-2's pattern cuts "ab abc a" into "ab", " abc", " a"; with the merges (a, b) then (" ", ab)
    # the tokens are "ab" | " ab", "c" | " ", "a": the words take 1, 2 and 1 tokens.
    tok = tokenizer_with([(b"a", b"b"), (b" ", b"ab")])
    assert [tok.vocab[i] for i in tok.encode("ab abc a")] == [b"ab", b" ab", b"c", b" ", b"a"]
    stats = report.TextStats()
    stats.add(tok, "ab abc a")
    assert (stats.words, stats.word_tokens, stats.split_words) == (3, 4, 1)
    assert stats.fertility == pytest.approx(4 / 3) and stats.split_share == pytest.approx(1 / 3)


def test_fertility_with_a_token_across_two_words():
    # No pre-tokenization: the merge (b, " ") makes "a", "b ", "a", "b", "c" of "ab abc".
    tok = tokenizer_with([(b"b", b" ")], pattern="none")
    assert [tok.vocab[i] for i in tok.encode("ab abc")] == [b"a", b"b ", b"a", b"b", b"c"]
    stats = report.TextStats()
    stats.add(tok, "ab abc")
    assert (stats.words, stats.word_tokens, stats.split_words) == (2, 5, 2)
    assert stats.fertility == 2.5 and stats.split_share == 1.0


def test_text_with_surrogates_is_measured_as_encode_reads_it():
    tok = tokenizer_with([])
    stats = report.TextStats()
    stats.add(tok, "a\ud83d\ude00 b\ud800")  # a pair (one emoji, 4 bytes) and a lone one (U+FFFD, 3 bytes)
    assert (stats.bytes, stats.tokens, stats.words, stats.word_tokens) == (1 + 4 + 1 + 1 + 3, 10, 2, 9)


# --- efficiency ------------------------------------------------------------------------------------


def test_shannon_and_renyi_efficiency_on_a_hand_worked_distribution():
    # Probabilities 1/2, 1/4, 1/4 over a vocabulary of 4 (log2 |V| = 2 bits).
    counts = Counter({7: 2, 8: 1, 9: 1})
    # Shannon: H = 1/2 * 1 + 2 * 1/4 * 2 = 1.5 bits; 1.5 / 2.
    assert report.efficiency(counts, 4, 1.0) == pytest.approx(0.75)
    # Rényi, order 2: H = -log2(1/4 + 1/16 + 1/16) = log2(8/3) bits.
    assert report.efficiency(counts, 4, 2.0) == pytest.approx(math.log2(8 / 3) / 2)
    # Order 2.5: sum of p^2.5 = 2^-2.5 + 2 * 2^-5; H = log2 of that / (1 - 2.5).
    assert report.efficiency(counts, 4, 2.5) == pytest.approx(math.log2(2**-2.5 + 2**-4) / -1.5 / 2)
    assert report.efficiency(counts, 4, 2.5) == pytest.approx(0.6877, abs=1e-4)


def test_efficiency_is_one_for_even_use_of_the_whole_vocabulary_and_zero_for_one_token():
    for alpha in (1.0, 2.5):
        assert report.efficiency(Counter({0: 5, 1: 5, 2: 5}), 3, alpha) == pytest.approx(1.0)
        assert report.efficiency(Counter({0: 5, 1: 5, 2: 5}), 9, alpha) == pytest.approx(0.5)  # log 3 / log 9
        assert report.efficiency(Counter({4: 10}), 100, alpha) == 0.0
    assert report.efficiency(Counter(), 10, 2.5) == 0.0


def test_renyi_efficiency_weighs_frequent_tokens_more_than_shannon():
    # One very frequent token and many rare ones: order 2.5 sees mostly the frequent one.
    counts = Counter({0: 1000, **{i: 1 for i in range(1, 101)}})
    assert report.efficiency(counts, 101, 2.5) < report.efficiency(counts, 101, 1.0)


# --- vocabulary use --------------------------------------------------------------------------------


def test_vocabulary_use_and_the_tokens_that_make_half():
    stats = report.TextStats(tokens=10, counts=Counter({1: 4, 2: 3, 3: 3}), vocab_size=8)
    assert stats.vocab_used == 3 / 8
    assert stats.half_of_tokens == 2  # 4 < 5, 4 + 3 >= 5
    assert report.tokens_for_share(Counter({1: 5, 2: 3, 3: 2}), 0.5) == 1  # exactly half
    assert report.tokens_for_share(Counter({1: 1, 2: 1, 3: 1, 4: 1}), 0.5) == 2
    assert report.tokens_for_share(Counter(), 0.5) == 0


def test_text_stats_count_tokens_and_add_up():
    tok = tokenizer_with([(b"a", b"b")])
    one, two = report.TextStats(), report.TextStats()
    one.add(tok, "ab ab")
    two.add(tok, "ba")
    assert one.counts == Counter({256: 2, 32: 1}) and one.vocab_size == 257
    both = report.TextStats()
    both.update(one)
    both.update(two)
    whole = report.TextStats()
    whole.add(tok, "ab ab")
    whole.add(tok, "ba")
    assert both == whole
    assert both.counts == Counter({256: 2, 32: 1, 98: 1, 97: 1}) and both.vocab_used == 4 / 257
    assert (both.words, both.word_tokens, both.split_words) == (3, 4, 1)


# --- where they are shown --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    corpus = out / "corpus.txt"
    corpus.write_text("the cat sat on the mat. the dog sat on the log.\n" * 20, encoding="utf-8")
    assert main(["train", str(corpus), "--vocab-size", "280", "--out", str(out / "t"), "--quiet"]) == 0
    return out / "t"


def _row(table: str, label: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(label))
    return line[len(label):].split()


def test_stats_shows_the_measures_for_each_file_and_for_all(folder, tmp_path, capsys):
    texts = {"a.txt": "the cat sat on the mat\n", "b.txt": "dogs and logs, cats and mats\n"}
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert main(["stats", "--tokenizer", str(folder), str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    tok = Tokenizer.from_pretrained(folder)
    parts = out.split("\n\n")
    assert len(parts) == 3 and parts[0].startswith(str(tmp_path / "a.txt")) and parts[2].startswith("all files:")
    expected = []
    for name, text in texts.items():
        s = report.TextStats()
        s.add(tok, text)
        expected.append(s)
    total = report.TextStats()
    for s in expected:
        total.update(s)
    for part, s in zip(parts, [*expected, total]):
        assert _row(part, "tokens per word (fertility)") == [f"{s.fertility:.2f}"]
        assert _row(part, "Rényi efficiency (α = 2.5)") == [f"{s.renyi_efficiency:.3f}"]
        assert _row(part, "Shannon efficiency") == [f"{s.shannon_efficiency:.3f}"]
        assert _row(part, "vocabulary used (%)") == [f"{100 * s.vocab_used:.2f}"]
        assert _row(part, "tokens making half of all") == [f"{s.half_of_tokens:,}"]
        assert _row(part, "words cut in 2+ tokens (%)") == [f"{100 * s.split_share:.2f}"]
    assert total.words == 6 + 6


@pytest.mark.slow
def test_report_page_shows_the_measures_per_text(folder, monkeypatch):
    tok = Tokenizer.from_pretrained(folder)
    monkeypatch.setattr(Tokenizer, "from_pretrained", lambda name, **kw: (_ for _ in ()).throw(OSError("no")),
                        raising=False)
    texts = [report.HeldOut("one.txt", "the cat sat"), report.HeldOut("two.txt", "a dog on a log")]
    page = report.build_report(tok, name="t", path="some/where/t", texts=texts, pretrained=["gpt2"])
    table = page[page.index('id="measures-table"'):]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr><td>([^<]*)</td>((?:<td>[^<]*</td>)+)</tr>", table)
    assert [label for label, _ in rows] == ["t (this one)", "t (this one) on one.txt", "t (this one) on two.txt"]
    one = report.TextStats()
    one.add(tok, "the cat sat")
    cells = re.findall(r"<td>([^<]*)</td>", rows[1][1])
    assert cells == [f"{one.fertility:.2f}", f"{100 * one.split_share:.2f}", f"{100 * one.spanning_share:.2f}",
                     f"{one.spanning_vocab:,}", f"{100 * one.many_words_share:.2f}", f"{one.renyi_efficiency:.3f}", f"{one.shannon_efficiency:.3f}",
                     f"{100 * one.vocab_used:.2f}", f"{one.half_of_tokens:,}"]
    # The heading is the short name; the path is in the summary cards.
    assert "<title>BPE report: t</title>" in page and "<dd>some/where/t</dd>" in page


def test_offline_pretrained_is_one_short_line(monkeypatch):
    import requests

    def offline(name, **options):
        try:
            raise requests.ConnectionError("HTTPSConnectionPool(host='openaipublic.blob.core.windows.net', port=443)")
        except requests.ConnectionError as e:
            raise ValueError(f"cannot get the rank file of {name} through tiktoken ({e})") from None

    monkeypatch.setattr(Tokenizer, "from_pretrained", offline, raising=False)
    tok, reason = report.load_pretrained("cl100k_base")
    assert tok is None
    assert reason == ("not available offline: tiktoken downloads cl100k_base's rank file once; "
                      "set TIKTOKEN_CACHE_DIR to a folder that holds it")
    monkeypatch.setattr(Tokenizer, "from_pretrained", lambda name, **kw: (_ for _ in ()).throw(OSError("no file x")),
                        raising=False)
    assert report.load_pretrained("gpt2") == (None, "OSError: no file x")  # other failures keep their message


def test_report_command_titles_the_page_with_the_folders_name(folder, tmp_path, monkeypatch):
    from tests.test_report import FakePretrained

    monkeypatch.setattr(Tokenizer, "from_pretrained", FakePretrained(None), raising=False)  # offline
    out = tmp_path / "r.html"
    assert main(["report", "--tokenizer", str(folder), "--out", str(out), "--quiet"]) == 0
    page = out.read_text(encoding="utf-8")
    assert "<title>BPE report: t</title>" in page and "<h1>t</h1>" in page
    assert f"<dd>{folder}</dd>" in page
