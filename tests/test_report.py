"""`bpe report`, `bpe vocab` and `bpe stats` with several tokenizers: what they say is checked
against direct computation (encoding, the merge log, the reference trainer)."""

import csv
import io
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from cs336_basics import report
from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import main
from cs336_basics.train.merge_log import MergeLog, compression_curve, read_merge_log, readable_token
from tests.common import FIXTURES_PATH
from cs336_basics.train.reference import train_bpe_reference

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tokenizer trained by `bpe train` on the English fixture (vocab 500), and its folder."""
    out = tmp_path_factory.mktemp("tok")
    assert main(["train", str(FIXTURES_PATH / "english.txt"), "--vocab-size", "500", "--out", str(out), "--quiet"]) == 0
    return out, Tokenizer.from_files(out / "vocab.json", out / "merges.txt", [EOT])


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bpe: "), err
    return err[0]


# --- bpe vocab -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_vocab_lists_every_token_with_its_merge_and_count(trained, capsys):
    folder, tokenizer = trained
    assert main(["vocab", "--tokenizer", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("\t") == ["id", "token", "rank", "left", "right", "count", "occurrences", "under-trained"]
    rows = [r[:6] for r in csv.reader(lines[1:], delimiter="\t")]  # occurrences: see test_under_trained.py
    assert [int(r[0]) for r in rows] == sorted(tokenizer.vocab) == list(range(500))
    reference_log: list[tuple[int, int]] = []
    _, merges = train_bpe_reference((FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8"), 500, [EOT],
                                    merge_log=reference_log)
    for token_id, token, rank, left, right, count in rows:
        token_id = int(token_id)
        if token_id < 256:
            assert (token, rank, left, right, count) == (readable_token(bytes([token_id])), "", "", "", "")
        elif token_id == 499:
            assert token == f"{EOT} (special)" and rank == ""
        else:
            k = token_id - 256
            assert (int(rank), left, right, int(count)) == (
                k, readable_token(merges[k][0]), readable_token(merges[k][1]), reference_log[k][0])
            assert token == readable_token(merges[k][0] + merges[k][1])


def test_vocab_reads_back_with_pandas_and_csv_whatever_the_tokens_hold(tmp_path, capsys):
    """Tokens that are a quote, a missing-value word of pandas, or special tokens holding a tab, a quote
    and a line break come back as written, read with `csv` and with pandas as docs/looking-inside.md says."""
    pandas = pytest.importorskip("pandas")
    vocab = {i: bytes([i]) for i in range(256)}
    merges = [(b"N", b"A"), (b'"', b'"'), (b"n", b"u"), (b"nu", b"l"), (b"nul", b"l")]
    vocab.update({256 + k: a + b for k, (a, b) in enumerate(merges)})
    specials = ['say "hi"\tthere', "two\nlines", "nan"]
    Tokenizer(vocab, merges, specials).save_pretrained(tmp_path / "tok")
    assert main(["vocab", "-t", str(tmp_path / "tok")]) == 0
    out = capsys.readouterr().out
    expected = [readable_token(vocab[i]) for i in range(261)] + [f"{t} (special)" for t in specials]
    assert [r[1] for r in list(csv.reader(io.StringIO(out, newline=""), delimiter="\t"))[1:]] == expected
    frame = pandas.read_csv(io.StringIO(out), sep="\t", keep_default_na=False, na_values=[""])
    assert list(frame["token"]) == expected
    assert list(frame["id"]) == list(range(264))


def test_vocab_without_a_merge_log_leaves_counts_empty(trained, tmp_path, capsys):
    folder, _ = trained
    for name in ("vocab.json", "merges.txt"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    assert main(["vocab", str(tmp_path)]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows[256][2] == "0" and rows[256][5] == ""


def test_vocab_of_a_tokenizer_whose_ids_are_not_in_merge_order():
    # Pretrained vocabularies need not number tokens in merge order: the merge is found by its bytes.
    vocab = {i: bytes([i]) for i in range(256)} | {300: b"ab", 256: b"abc"}
    tokenizer = Tokenizer(vocab, [(b"a", b"b"), (b"ab", b"c")])
    entries = {e.id: e for e in report.vocab_entries(tokenizer, MergeLog(12, [(7, 10), (5, 5)]))}
    assert (entries[300].rank, entries[300].pair, entries[300].count) == (0, (b"a", b"b"), 7)
    assert (entries[256].rank, entries[256].pair, entries[256].count) == (1, (b"ab", b"c"), 5)


# --- bpe stats -------------------------------------------------------------------------------------


def test_stats_compares_tokenizers_side_by_side(trained, tmp_path, capsys):
    folder, tokenizer = trained
    small = tmp_path / "small"
    assert main(["train", str(FIXTURES_PATH / "english.txt"), "--vocab-size", "300", "--out", str(small), "--quiet"]) == 0
    capsys.readouterr()
    path = FIXTURES_PATH / "german.txt"
    assert main(["stats", "--tokenizer", str(folder), "--tokenizer", str(small), str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    text = path.read_bytes().decode("utf-8")
    assert lines[0] == f"{path}: {len(text.encode()):,} bytes, {len(text):,} characters"
    assert lines[1].split() == [folder.name, "small"]  # the folders' names, not their paths
    table = {line[:60].strip(): line[60:].split() for line in lines[2:]}
    table = {re.sub(r"\s+", " ", k): v for k, v in table.items()}
    small_tok = Tokenizer.from_files(small / "vocab.json", small / "merges.txt", [EOT])
    for column, tok in enumerate([tokenizer, small_tok]):
        ids = tok.encode(text)
        row = {label: values[column] for label, values in table.items()}
        assert row["tokens"] == f"{len(ids):,}"
        assert row["bytes per token"] == f"{len(text.encode()) / len(ids):.2f}"
        assert row["characters per token"] == f"{len(text) / len(ids):.2f}"
        kinds = Counter(report.classify_token(tok.vocab[i]) for i in ids)
        assert row["% part of one UTF-8 character"] == f"{100 * kinds['partial'] / len(ids):.2f}"


def test_stats_table_lines_up():
    a = report.TextStats(bytes=10, chars=8, tokens=4, kinds=Counter(word=3, text=1))
    table = report.stats_table([("first", a), ("a much longer name", a)]).splitlines()
    assert len({len(line) for line in table}) == 1
    assert table[2].split()[-2:] == ["2.50", "2.50"] and table[4].split()[-1] == "75.00"


# --- truncation (the held-out curve) ----------------------------------------------------------------


@pytest.mark.slow
def test_truncated_tokenizer_is_what_training_with_fewer_merges_gives(trained, tmp_path):
    _, tokenizer = trained
    text = (FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8")
    for k in (0, 17, 120):
        vocab, merges = train_bpe_reference(text, 256 + k + 1, [EOT])
        cut = report.truncated(tokenizer, k)
        assert cut.merges == merges and sorted(cut.vocab.values()) == sorted(vocab.values())
        sample = (FIXTURES_PATH / "german.txt").read_bytes().decode("utf-8")[:3000]
        fresh = Tokenizer(vocab, merges, [EOT])
        assert [cut.vocab[i] for i in cut.encode(sample)] == [vocab[i] for i in fresh.encode(sample)]
    other = Tokenizer(tokenizer.vocab, tokenizer.merges, [EOT], pattern="none")
    assert report.truncated(other, 5).pattern == "none"


def test_read_sample_cuts_at_a_line_or_a_whole_character(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("first line\nsecond: 日本語".encode())
    assert report.read_sample(path, 100).text == "first line\nsecond: 日本語"
    assert report.read_sample(path, 18).text == "first line\n"  # a newline in the second half
    assert report.read_sample(path, 21).text == "first line\nsecond: "  # else a whole character
    assert report.read_sample(path, 8).text == "first li"
    path.write_bytes("日本語".encode())
    assert report.read_sample(path, 7).text == "日本"  # the cut fell inside 語
    path.write_bytes(b"ok \xff then more text")
    with pytest.raises(ValueError, match="not valid UTF-8 at byte offset 3"):
        report.read_sample(path, 100)
    path.write_bytes("日本語".encode()[:-1])  # a file that itself ends inside a character
    with pytest.raises(ValueError, match="not valid UTF-8 at byte offset 6"):
        report.read_sample(path, 100)


# --- the page --------------------------------------------------------------------------------------


class FakePretrained:
    """Stands in for Tokenizer.from_pretrained: one name loads (our own tokenizer), one fails."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.real = getattr(Tokenizer, "from_pretrained", None)  # folders and files still load for real

    def __call__(self, name, **options):
        if name == "gpt2":
            return self.tokenizer
        if self.real is not None and Path(name).exists():
            return self.real(name, **options)
        raise OSError(f"no files for {name} here")


@pytest.mark.slow
def test_report_page_is_self_contained_and_says_what_it_measured(trained, monkeypatch):
    folder, tokenizer = trained
    monkeypatch.setattr(Tokenizer, "from_pretrained", FakePretrained(tokenizer), raising=False)
    log = read_merge_log(folder / "merge_log.tsv")
    held_out = report.read_sample(FIXTURES_PATH / "german.txt", 1 << 20)
    page = report.build_report(tokenizer, name="english-500", log=log, texts=[held_out])

    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)  # nothing fetched from outside
    assert page.count("<svg") == 2 and "<img" not in page
    text = held_out.text
    ids = tokenizer.encode(text)
    ours = f"<td>{len(ids):,}</td><td>{len(text.encode()) / len(ids):.2f}</td><td>{len(text) / len(ids):.2f}</td>"
    assert page.count(ours) == 2  # ours, and "gpt2" (the fake loads ours)
    assert "<td>cl100k_base</td><td colspan=\"7\">not available: OSError: no files for cl100k_base here</td>" in page
    merges_table = page[page.index('id="merges"') :]
    first, last = log.steps[0][0], log.steps[-1][0]
    assert f'<td class="n">{first:,}</td>' in merges_table and f'<td class="n">{last:,}</td>' in merges_table
    assert f"{log.corpus_bytes:,} bytes → {log.steps[-1][1]:,} tokens" in page
    # The table under the curve: training values from the log, held-out ones from encoding again.
    sizes = [257, 265, 272, 287, 318, 379, 500]  # 243 merges: 0, 1/32, 1/16, 1/8, 1/4, 1/2, all of them
    curve = dict(compression_curve(log, base_vocab_size=257))
    held = [len(text.encode()) / len(report.truncated(tokenizer, s - 257).encode(text)) for s in sizes]
    assert "".join(f"<th>{s:,}</th>" for s in sizes) in page
    assert "<td>training corpus</td>" + "".join(f"<td>{curve[s]:.2f}</td>" for s in sizes) in page
    assert "<td>held-out text</td>" + "".join(f"<td>{h:.2f}</td>" for h in held) in page
    sample = report.sample_of(text)
    assert f'data-tokens="{len(tokenizer.encode(sample))}"' in page


@pytest.mark.slow
def test_report_without_from_pretrained_says_so(trained, monkeypatch):
    folder, tokenizer = trained
    monkeypatch.delattr(Tokenizer, "from_pretrained", raising=False)
    page = report.build_report(tokenizer, name="x", texts=[report.HeldOut("t", "some text")])  # offline: no loads
    assert page.count("not available: this version of the package has no Tokenizer.from_pretrained") == 3
    assert "No merge log" in page


@pytest.mark.slow
def test_held_out_curve_points_are_measured_with_truncated_merges(trained, monkeypatch):
    _, tokenizer = trained
    calls = []
    real = report.truncated
    monkeypatch.setattr(report.page, "truncated", lambda tok, k: calls.append(k) or real(tok, k))
    report.build_report(tokenizer, name="x", texts=[report.HeldOut("t", "some text")], pretrained=[], num_points=5)
    assert calls == [0, 30, 61, 122]  # 243 merges: 0, 1/8, 1/4, 1/2 (and all, the tokenizer itself)


def test_sample_spans_cover_the_text_once(trained):
    _, tokenizer = trained
    text = "naïve 日本 <|endoftext|>x\n\ny"
    spans, count = report.sections.sample_html(tokenizer, text)
    assert count == len(tokenizer.encode(text)) == spans.count('<span class="t ')
    shown = "".join(re.findall(r">([^<]*)</span>", spans)).replace("↵", "")
    assert shown.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") == text
    assert re.search(r'class="t c\d part"', spans)  # 日 is split into byte tokens: a thin bar before it


def test_report_command_writes_the_page(trained, tmp_path, capsys, monkeypatch):
    folder, tokenizer = trained
    monkeypatch.setattr(Tokenizer, "from_pretrained", FakePretrained(tokenizer), raising=False)  # tests are offline
    out = tmp_path / "r" / "report.html"
    argv = ["report", "--tokenizer", str(folder), str(FIXTURES_PATH / "german.txt"), str(FIXTURES_PATH / "code.txt"),
            "--out", str(out), "--quiet", "--sample-bytes", "5000"]
    assert main(argv) == 0
    page = out.read_text(encoding="utf-8")
    assert "german.txt, code.txt" in page and 'id="curve-plot"' in page
    assert f"wrote {out}" in capsys.readouterr().out


def test_report_without_matplotlib_names_the_extra(trained, tmp_path, capsys, monkeypatch):
    folder, _ = trained
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    out = tmp_path / "report.html"
    assert main(["report", "-t", str(folder), "--out", str(out), "--quiet"]) == 1
    line = one_error_line(capsys)
    assert "matplotlib" in line and "`report` extra" in line and "cs336-basics[report]" in line
    assert not out.exists()


def test_report_bad_input_is_one_line(trained, tmp_path, capsys):
    folder, _ = trained
    assert main(["report", str(folder), str(tmp_path / "none.txt"), "--out", str(tmp_path / "r.html")]) == 1
    assert "input file not found" in one_error_line(capsys)
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in ("vocab.json", "merges.txt"):
        (bad / name).write_bytes((folder / name).read_bytes())
    (bad / "merge_log.tsv").write_text("nonsense\n")
    assert main(["report", "--tokenizer", str(bad), "--out", str(tmp_path / "r.html")]) == 1
    assert "merge_log.tsv, line 1" in one_error_line(capsys)
    lines = (folder / "merge_log.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    (bad / "merge_log.tsv").write_text("".join(lines[:-1]), encoding="utf-8")
    for command in (["report", str(bad), "--out", str(tmp_path / "r.html")], ["vocab", str(bad)]):
        assert main(command) == 1
        assert f"{bad / 'merge_log.tsv'}: this merge log has 242 merges and the tokenizer 243" in one_error_line(capsys)
    # Same length, another merge: the token column gives it away.
    lines[100 + 256] = lines[100 + 256].replace("\t", "\tx", 4)  # after the 256 rows of the bytes
    (bad / "merge_log.tsv").write_text("".join(lines), encoding="utf-8")
    assert main(["vocab", "--tokenizer", str(bad)]) == 1
    assert "at rank 98 where the tokenizer makes" in one_error_line(capsys)
    assert not (tmp_path / "r.html").exists()
