"""What the commands print about a tokenizer: bytes per token, one figure wherever it is printed
(`bpe train`, `encode`, `stats`), with the text it was measured on; an extension's summary, which
counts and judges only the new merges; and tokens listed longest first, whole (`bpe vocab --sort
length`, the training summary's longest tokens)."""

import csv
import io
import re
from contextlib import redirect_stdout

import pytest

from cs336_basics import report
from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import main
from cs336_basics.cli.train import _sample_text
from cs336_basics.corpora import sources
from cs336_basics.train.merge_log import read_merge_log, readable_token
from tests.common import FIXTURES_PATH

EOT = "<|endoftext|>"


def load(folder) -> Tokenizer:
    return Tokenizer.from_files(folder / "vocab.json", folder / "merges.txt", [EOT])


def test_bytes_per_token_is_one_figure_in_train_encode_and_stats(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes((FIXTURES_PATH / "english.txt").read_bytes()[:60_000])
    text = corpus.read_bytes().decode("utf-8")
    assert EOT in text  # a special token counts as its bytes and one token
    folder = tmp_path / "tok"
    assert main(["train", str(corpus), "--vocab-size", "400", "--out", str(folder), "--quiet"]) == 0
    assert main(["encode", str(corpus), "--tokenizer", str(folder), "--out", str(tmp_path / "ids.npy"), "--quiet"]) == 0
    assert main(["stats", str(corpus), "--tokenizer", str(folder), "--quiet"]) == 0
    out = capsys.readouterr().out
    oracle = f"{len(text.encode()) / len(load(folder).encode(text)):.2f}"
    on_all = f"bytes per token on all {len(text.encode()) / 1000:.1f} KB of {corpus}"
    printed = re.findall(r"(\d+\.\d\d) (bytes per token on .*?)(?:;|\n)", out)
    assert printed == [(oracle, on_all)] * 2  # train's summary, then encode's
    assert re.search(r"^bytes per token +(\S+)$", out, re.M).group(1) == oracle  # stats' table
    assert f"{corpus}: {len(text.encode()):,} bytes" in out  # the text stats measured, and its size


def test_train_and_stats_measure_records_alike(tmp_path, capsys):
    # Each record of a .jsonl file is a text of its own, in the training summary as in `bpe stats`.
    import json

    records = (FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")[:40_000].split(EOT)
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": r}) + "\n" for r in records), encoding="utf-8")
    folder = tmp_path / "tok"
    assert main(["train", str(corpus), "--vocab-size", "350", "--out", str(folder), "--quiet"]) == 0
    assert main(["stats", str(corpus), "--tokenizer", str(folder), "--quiet"]) == 0
    out = capsys.readouterr().out
    tokenizer = load(folder)
    size = sum(len(r.encode()) for r in records)
    oracle = f"{size / sum(len(tokenizer.encode(r)) for r in records):.2f}"
    assert f"compression          {oracle} bytes per token on all {size / 1000:.1f} KB of {corpus}\n" in out
    assert re.search(r"^bytes per token +(\S+)$", out, re.M).group(1) == oracle
    assert f"{corpus}: {size:,} bytes" in out


def test_the_summary_names_the_part_of_a_large_file_it_measured(tmp_path):
    corpus = tmp_path / "big.txt"
    corpus.write_bytes((FIXTURES_PATH / "english.txt").read_bytes()[:30_000])
    files = sources.resolve(str(corpus))
    sample, part = _sample_text(files, [EOT], "text", "gpt2", limit=4000)
    assert part == "the last" and len(sample) == 1 and 0 < len(sample[0].encode()) < 10_000
    assert corpus.read_text(encoding="utf-8").endswith(sample[0])
    sample, part = _sample_text(files, [EOT], "text", "gpt2")
    assert part == "all" and sample == [corpus.read_text(encoding="utf-8")]
    assert report.on_text(2_100_000, 1_000_000, "valid.txt", "the last") == \
        "2.10 bytes per token on the last 2.1 MB of valid.txt"


def test_an_extension_counts_and_judges_only_its_new_merges(tmp_path, capsys):
    base, extended = tmp_path / "base", tmp_path / "ext"
    assert main(["train", str(FIXTURES_PATH / "english.txt"), "--vocab-size", "320", "--out", str(base),
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["train", str(FIXTURES_PATH / "german.txt"), "--start-from", str(base), "--vocab-size", "420",
                 "--out", str(extended), "--quiet", "--min-count", "5"]) == 0
    out = capsys.readouterr().out
    old, tokenizer = load(base), load(extended)
    new = len(tokenizer.merges) - len(old.merges)
    assert new == 100 and len(old.merges) == 63
    assert f"(100 new merges after the 63 of {base})" in out
    # The oracle: the tokens of the new merges that the log flags, and none of the base's.
    log = read_merge_log(extended / "merge_log.tsv")
    entries = report.under_trained(report.vocab_entries(tokenizer, log, min_count=5))
    flagged = [e for e in entries if e.rank is not None and e.rank >= len(old.merges)]
    assert flagged and any(e.rank is not None and e.rank < len(old.merges) for e in entries)  # both kinds exist
    line = re.search(r"under-trained +(.*)", out).group(1)
    assert line.startswith(f"{len(flagged)} of the 100 new merges' tokens with fewer than 5 occurrences")
    assert f"the 320 tokens of {base} are not judged" in line
    ranks = [int(r) for r in re.findall(r"\(merge (\d+):", line)]
    assert ranks == [e.rank for e in flagged[:5]]


def test_a_fresh_run_judges_every_merge(tmp_path, capsys):
    assert main(["train", str(FIXTURES_PATH / "german.txt"), "--vocab-size", "400", "--out", str(tmp_path / "t"),
                 "--quiet", "--min-count", "5"]) == 0
    out = capsys.readouterr().out
    tokenizer = load(tmp_path / "t")
    log = read_merge_log(tmp_path / "t" / "merge_log.tsv")
    entries = report.under_trained(report.vocab_entries(tokenizer, log, min_count=5))
    merged = [e for e in entries if e.rank is not None]
    assert f"({len(tokenizer.merges):,} merges)" in out
    assert f"under-trained        {len(merged)} merged tokens with fewer than 5 occurrences" in out
    assert f"and {len(entries) - len(merged)} other tokens (bytes the corpus lacks)" in out


@pytest.fixture(scope="module")
def long_tokens(tmp_path_factory):
    """A tokenizer whose longest tokens are long (pattern "none": merges run across words), and the
    output of `bpe train` that made it."""
    folder = tmp_path_factory.mktemp("long")
    corpus = folder / "c.txt"
    corpus.write_text(EOT.join(["the quick brown fox jumps over the lazy dog\n"] * 40 + ["ab ab"] * 5),
                      encoding="utf-8")
    out = folder / "tok"
    printed = io.StringIO()
    with redirect_stdout(printed):
        assert main(["train", str(corpus), "--vocab-size", "320", "--pattern", "none", "--out", str(out),
                     "--quiet"]) == 0
    return Tokenizer.from_files(out / "vocab.json", out / "merges.txt", [EOT]), out, printed.getvalue()


def by_length(tokenizer: Tokenizer, specials: bool) -> list[int]:
    """Ids, longest token first, ties in id order (the oracle)."""
    skip = set() if specials else {EOT.encode()}
    return sorted((i for i, t in tokenizer.vocab.items() if t not in skip), key=lambda i: (-len(tokenizer.vocab[i]), i))


def test_vocab_sort_length_lists_longest_first_whole(long_tokens, capsys):
    tokenizer, folder, _ = long_tokens
    assert main(["vocab", str(folder), "--sort", "length"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out), delimiter="\t"))[1:]  # cells quoted as csv does
    assert [int(r[0]) for r in rows] == by_length(tokenizer, specials=True)
    for r in rows:
        token = tokenizer.vocab[int(r[0])]
        assert r[1] == (f"{EOT} (special)" if token == EOT.encode() else readable_token(token))
    assert len(tokenizer.vocab[int(rows[0][0])]) > 30  # long enough that cutting it would show
    assert main(["vocab", str(folder), "--sort", "id"]) == 0
    assert [int(line.split("\t")[0]) for line in capsys.readouterr().out.splitlines()[1:]] == sorted(tokenizer.vocab)


def test_the_training_summary_shows_the_longest_tokens_whole(long_tokens):
    tokenizer, _, out = long_tokens
    line = re.search(r"longest tokens +(.*)", out).group(1)
    expected = [tokenizer.vocab[i] for i in by_length(tokenizer, specials=False)[:5]]
    assert line == ", ".join(f"'{readable_token(t)}' ({len(t)} B)" for t in expected)
    assert len(expected[0]) > 30


def test_encode_counts_the_separators_it_puts_in_as_text(tmp_path):
    from types import SimpleNamespace

    from cs336_basics.cli.encode import _encoded_text_bytes

    texts = ["one text", "", "two" + EOT, "three"]
    paths = [tmp_path / f"{k}.txt" for k in range(len(texts))]
    for path, text in zip(paths, texts):
        path.write_text(text, encoding="utf-8")
    files = sources.resolve([str(p) for p in paths])
    tokenizer = SimpleNamespace(special_tokens=[EOT])
    # Empty files are no documents; non-empty ones are joined by the separator; --append-separator
    # adds one unless the text ends with it.
    assert _encoded_text_bytes(files, tokenizer, False) == len(EOT.join(t for t in texts if t).encode())
    assert _encoded_text_bytes(files, tokenizer, True) == len((EOT.join(t for t in texts if t) + EOT).encode())
    assert _encoded_text_bytes(files[:3], tokenizer, True) == len(EOT.join(["one text", "two" + EOT]).encode())


def test_the_report_names_the_texts_its_figures_were_measured_on(tmp_path):
    pytest.importorskip("matplotlib")
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes((FIXTURES_PATH / "english.txt").read_bytes()[:20_000])
    text = corpus.read_text(encoding="utf-8")
    folder = tmp_path / "tok"
    assert main(["train", str(corpus), "--vocab-size", "300", "--out", str(folder), "--quiet"]) == 0
    tokenizer, log = load(folder), read_merge_log(folder / "merge_log.tsv")
    whole = report.read_sample(corpus, 1 << 20)
    page = report.build_report(tokenizer, name="t", log=log, texts=[whole], pretrained=[])
    figure = len(text.encode()) / len(tokenizer.encode(text))
    assert f"{figure:.2f} bytes per token on all {len(text.encode()) / 1000:.1f} KB of corpus.txt" in page
    tokens = log.steps[-1][1]
    assert (f"{log.corpus_bytes / tokens:.2f} bytes per token on all {log.corpus_bytes / 1000:.1f} KB of the "
            "training corpus outside special tokens") in page
    first = report.read_sample(corpus, 5000)
    page = report.build_report(tokenizer, name="t", log=log, texts=[first], pretrained=[])
    assert not first.whole
    assert f"bytes per token on the first {len(first.text.encode()) / 1000:.1f} KB of corpus.txt" in page
