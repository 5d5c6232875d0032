"""Count tables (`bpe count`, `train_bpe_from_counts`, `bpe train --counts`): training from a table
gives exactly the merges of training on the text (oracle: the reference trainer), tables
add up exactly, a stopped `bpe count` resumes to a byte-identical table, counts past 2^32 stay exact,
and bad input fails with one line naming the file."""

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import train_bpe, train_bpe_from_counts
from cs336_basics.cli import main as bpe_main
from cs336_basics.counts import table, writer
from cs336_basics.text import tsv
from cs336_basics.train.merge import train_merges
from cs336_basics.train.merge_log import readable_token
from tests.kill_target import release
from cs336_basics.train.reference import learn_merges, train_bpe_reference

KILL_TARGET = Path(__file__).resolve().parent / "kill_target.py"
SPECIAL = "<|endoftext|>"
PATTERNS = ["gpt2", "none", r"\S+|\s+"]

texts = st.lists(st.sampled_from(list("ab c\n\té!") + ["<|endoftext|>", "<s>", "\U0001f600", "ab", "  "]),
                 max_size=60).map("".join)


def _count(inputs, folder, specials, pattern="gpt2", **options) -> Path:
    with pytest.MonkeyPatch.context() as m:  # tiny texts cut into many shards: below the floor users get
        m.setattr(writer, "MIN_PIECE_SIZE", 1)
        writer.count_corpus(inputs, folder, special_tokens=specials, pattern=pattern, **options)
    return Path(folder)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, pattern=st.sampled_from(sorted(PATTERNS)), specials=st.sampled_from([[], [SPECIAL], [SPECIAL, "<s>"]]),
       piece=st.sampled_from([1 << 20, 7, 30]), vocab=st.integers(258, 300))
def test_counts_then_train_equals_train_on_the_text_and_the_oracle(text, pattern, specials, piece, vocab):
    with tempfile.TemporaryDirectory() as d:
        corpus = Path(d, "c.txt")
        corpus.write_bytes(text.encode("utf-8"))
        folder = _count([corpus], Path(d, "t"), specials, pattern, piece_size=piece)
        expected = train_bpe(corpus, vocab, specials, pattern=pattern, num_workers=1)
        assert train_bpe_from_counts(folder, vocab) == expected
        assert train_bpe_from_counts(folder, vocab, specials, pattern=pattern) == expected
        assert expected == train_bpe_reference(text, vocab, specials, pattern)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(texts.filter(lambda t: "<|endoftext|>" not in t), min_size=2, max_size=6), cut=st.integers(1, 5))
def test_halves_merged_equal_the_whole(docs, cut):
    cut = min(cut, len(docs) - 1)
    with tempfile.TemporaryDirectory() as d:
        parts = [SPECIAL.join(docs[:cut]), SPECIAL.join(docs[cut:]), SPECIAL.join(docs)]
        paths = []
        for name, part in zip(("a", "b", "whole"), parts):
            paths.append(Path(d, f"{name}.txt"))
            paths[-1].write_bytes(part.encode("utf-8"))
        a, b, whole = (_count([p], Path(d, f"t-{p.stem}"), [SPECIAL], piece_size=16) for p in paths)
        table.merge_tables([a, b], Path(d, "sum"))
        summed = table.read_table(Path(d, "sum"))
        assert summed.word_counts == table.read_table(whole).word_counts
        assert summed.special_tokens == [SPECIAL] and summed.pattern == "gpt2"
        assert train_bpe_from_counts(Path(d, "sum"), 290) == train_bpe(paths[2], 290, [SPECIAL])


@settings(max_examples=200, deadline=None)
@given(token=st.binary(max_size=12) | st.text(max_size=8).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_readable_tokens_read_back(token):
    assert table.token_from_readable(readable_token(token)) == token


def test_a_tsv_file_trains_as_its_counts(tmp_path):
    counts = {b"hello": 7, b" world": 3, b"\xff\t\n\\": 2, "é\u2028x".encode(): 4, b'"q"': 5}
    # Cells as text.tsv writes them: `"q"` quoted the CSV way (bare, it would read as the token q).
    lines = [tsv.row([readable_token(w), n]) for w, n in counts.items()] + ["hello\t1"]  # written twice: added
    path = tmp_path / "counts.tsv"
    path.write_text("\r\n".join(lines) + "\n", encoding="utf-8")
    want = {**counts, b"hello": 8}
    assert table.read_tsv(path).word_counts == want
    assert train_bpe_from_counts(path, 280) == train_bpe_from_counts(want, 280)
    merges, _ = learn_merges(want, 280 - 256)
    assert train_bpe_from_counts(path, 280, [])[1] == merges  # the file records no special token: none given


def test_counts_beyond_32_bits_against_the_oracle(tmp_path):
    """If any step packed counts or pair counts into 32 bits, (a, b) at 2^32 + 3 would read as 3 and
    lose to (c, d), and the pair counts summed over words (past 2^33) would wrap."""
    big = 1 << 32
    counts = {b"ab": big + 3, b"cd": 1000, b"abab": big // 2 + 7, b"xyz": 3 * big, b"xy": big + 1, b"cdcd": 5}
    merges, log = learn_merges(counts, 6)
    lines = "".join(f"{readable_token(w)}\t{n}\n" for w, n in counts.items())
    (tmp_path / "c.tsv").write_text(lines, encoding="utf-8")
    words = sorted(counts)
    table_dir = tmp_path / "t"
    table_dir.mkdir()
    entry = table.write_shard(table_dir, table.shard_name(0), words, [counts[w] for w in words])
    head = {"format": table.FORMAT, "version": table.VERSION, "pattern": "gpt2", "special_tokens": [], "inputs": []}
    (table_dir / table.MANIFEST).write_text(table.manifest_text(head, [entry]))
    for source in (counts, tmp_path / "c.tsv", table_dir):
        got_log, stats = [], {}
        vocab, got = train_bpe_from_counts(source, 256 + 6, [], stats=stats, merge_log=got_log)
        assert got == merges, source
        assert [c for c, _ in got_log] == [c for c, _ in log] and got_log[-1][1] == log[-1][1]
        assert sum(stats["byte_counts"]) == stats["pretoken_bytes"] == sum(len(w) * n for w, n in counts.items())
    # the merge loop split over processes sends pair counts between them as arrays
    assert train_merges(dict(counts), 6, num_shards=2) == merges
    table.merge_tables([table_dir, table_dir], tmp_path / "twice")
    assert table.read_table(tmp_path / "twice").word_counts == {w: 2 * n for w, n in counts.items()}


# --- tables, resumed and refused ----------------------------------------------------------------------


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.txt"
    docs = [f"Document {i}: the quick brown fox {'jumps ' * (i % 5)}over {i * 37} lazy dogs.\n" for i in range(120)]
    path.write_text(SPECIAL.join(docs), encoding="utf-8")
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != table.LOCK}


def test_the_table_is_the_same_however_many_workers_count_it(tmp_path, corpus):
    one = _count([corpus], tmp_path / "one", [SPECIAL], piece_size=1500, num_workers=1)
    two = _count([corpus], tmp_path / "two", [SPECIAL], piece_size=1500, num_workers=2)
    assert len(table.read_manifest(one)["shards"]) > 3
    assert _files(one) == _files(two)
    assert train_bpe_from_counts(one, 400) == train_bpe(corpus, 400, [SPECIAL])


def test_settings_that_differ_are_refused_by_name_and_overwrite_counts_anew(tmp_path, corpus):
    folder = _count([corpus], tmp_path / "t", [SPECIAL], piece_size=1500)
    with pytest.raises(ValueError, match="pattern .*'gpt2'.*now 'cl100k'"):
        _count([corpus], folder, [SPECIAL], "cl100k")
    _count([corpus], folder, [SPECIAL], "cl100k", overwrite=True)
    assert table.read_manifest(folder)["pattern"] == "cl100k"
    other = _count([corpus], tmp_path / "u", ["<s>"], piece_size=1500)
    plain = _count([corpus], tmp_path / "v", [SPECIAL])
    with pytest.raises(ValueError, match=f"{other} was counted with the special tokens"):
        table.merge_tables([plain, other], tmp_path / "sum")
    with pytest.raises(ValueError, match=f"{folder} was counted with the pattern 'cl100k'"):
        table.merge_tables([plain, folder], tmp_path / "sum")
    assert not (tmp_path / "sum").exists()
    with pytest.raises(ValueError, match="counted with the special tokens"):
        train_bpe_from_counts(other, 300, [SPECIAL])
    with pytest.raises(ValueError, match="not a count table's"):
        (tmp_path / "foreign").mkdir()
        (tmp_path / "foreign" / "notes.txt").write_text("mine")
        _count([corpus], tmp_path / "foreign", [SPECIAL])


def test_a_corrupt_shard_and_a_bad_line_fail_with_one_line_naming_the_file(tmp_path, corpus, capsys):
    folder = _count([corpus], tmp_path / "t", [SPECIAL], piece_size=1500)
    shard = folder / table.shard_name(1)
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    assert bpe_main(["train", "--counts", str(folder), "--out", str(tmp_path / "tok"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(shard) in err and "corrupt" in err
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\t1\nb 2\n", encoding="utf-8")
    assert bpe_main(["train", "--counts", str(bad), "--out", str(tmp_path / "tok"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}, line 2" in err
    shard.write_bytes(b"not parquet")
    with pytest.raises(ValueError, match="shard-00001"):
        table.read_table(folder)


def test_bpe_count_and_train_from_it_on_the_command_line(tmp_path, corpus, capsys):
    out = tmp_path / "t"
    assert bpe_main(["count", str(corpus), "--out", str(out), "--piece-size", "2000", "--quiet"]) == 0
    assert bpe_main(["count", "--add", str(out), str(out), "--out", str(tmp_path / "sum")]) == 0
    assert bpe_main(["train", "--counts", str(tmp_path / "sum"), "--vocab-size", "300", "--out", str(tmp_path / "tok"),
                     "--quiet"]) == 0
    merges = (tmp_path / "tok" / "merges.txt").read_text()
    assert bpe_main(["train", str(corpus), "--vocab-size", "300", "--out", str(tmp_path / "tok2"), "--quiet"]) == 0
    assert (tmp_path / "tok2" / "merges.txt").read_text() == merges  # doubled counts: the same merges
    assert '"<|endoftext|>"' in (tmp_path / "tok" / "tokenizer.json").read_text()


def _kill_run(args: list[str], k: int, sig: int, cwd: Path) -> tuple[str | None, subprocess.CompletedProcess | None]:
    """Run `bpe ARGS` paused at its k-th write event and signalled there; what it paused at (None
    when it ended with fewer events)."""
    proc = subprocess.Popen([sys.executable, str(KILL_TARGET), str(k), *args], cwd=cwd, stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    paused = None
    try:
        for line in proc.stderr:
            if line.startswith("kill_target: paused at "):
                paused = line.removeprefix("kill_target: paused at ").strip()
                proc.send_signal(sig)
                release(proc)
                break
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return paused, proc.returncode


def _resumes_to_the_same_table(tmp_path: Path, corpus: Path, points, sig: int) -> list[str]:
    clean = _count([corpus], tmp_path / "clean", [SPECIAL], piece_size=2000)
    want = _files(clean)
    seen = []
    for k in points:
        out = tmp_path / f"killed-{k}"
        args = ["count", str(corpus), "--out", str(out), "--piece-size", "2000", "--workers", "1", "--quiet"]
        paused, code = _kill_run(args, k, sig, tmp_path)
        if paused is None:
            assert code == 0
            break
        assert code != 0, paused
        assert bpe_main(args) == 0
        assert _files(out) == want, f"resumed after {paused}"
        seen.append(paused)
    return seen


def test_a_killed_count_resumes_to_a_byte_identical_table(tmp_path, corpus):
    seen = _resumes_to_the_same_table(tmp_path, corpus, [4, 9], 9)
    assert len(seen) == 2


@pytest.mark.slow
@pytest.mark.parametrize("sig", [9, 2], ids=["SIGKILL", "SIGINT"])
def test_a_count_stopped_at_every_write_resumes_to_a_byte_identical_table(tmp_path, corpus, sig):
    seen = _resumes_to_the_same_table(tmp_path, corpus, range(1, 40), sig)
    assert len(seen) > 10, seen


# --- extending a tokenizer from counts ---------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, other=texts, small=st.integers(258, 290), more=st.integers(0, 30),
       extra=st.sampled_from([[], ["<s>"]]))
def test_extending_from_counts_equals_extending_on_the_text(text, other, small, more, extra):
    """`start_from` with counts gives what it gives on the text the counts were made from, the text
    cut at the extended tokenizer's special tokens and the new ones (the table's)."""
    from cs336_basics.bpe import Tokenizer

    with tempfile.TemporaryDirectory() as d:
        base_corpus, corpus = Path(d, "base.txt"), Path(d, "c.txt")
        base_corpus.write_bytes(other.encode("utf-8"))
        corpus.write_bytes(text.encode("utf-8"))
        base = Tokenizer(*train_bpe(base_corpus, small, [SPECIAL], num_workers=1), [SPECIAL])
        size = len(base.vocab) + len(extra) + more
        expected = train_bpe(corpus, size, extra, num_workers=1, start_from=base)
        folder = _count([corpus], Path(d, "t"), [SPECIAL, *extra])
        assert train_bpe_from_counts(folder, size, start_from=base) == expected
        assert train_bpe_from_counts(folder, size, [SPECIAL, *extra], start_from=base) == expected


def test_start_from_with_counts_on_the_command_line_and_what_it_refuses(tmp_path, corpus, capsys):
    base, counts, no_special = tmp_path / "base", tmp_path / "counts", tmp_path / "counts-plain"
    assert bpe_main(["train", str(corpus), "--vocab-size", "300", "--out", str(base), "--quiet"]) == 0
    assert bpe_main(["count", str(corpus), "--out", str(counts), "--quiet"]) == 0
    assert bpe_main(["train", "--counts", str(counts), "--start-from", str(base), "--vocab-size", "350",
                     "--out", str(tmp_path / "ext"), "--quiet"]) == 0
    assert bpe_main(["train", str(corpus), "--start-from", str(base), "--vocab-size", "350",
                     "--out", str(tmp_path / "ext-text"), "--quiet"]) == 0
    for name in ("vocab.json", "merges.txt"):
        assert (tmp_path / "ext" / name).read_bytes() == (tmp_path / "ext-text" / name).read_bytes()
    capsys.readouterr()
    assert bpe_main(["count", str(corpus), "--out", str(no_special), "--special-token", "<s>", "--quiet"]) == 0
    assert bpe_main(["train", "--counts", str(no_special), "--start-from", str(base), "--vocab-size", "350",
                     "--out", str(tmp_path / "no"), "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not cut at the special tokens ['<|endoftext|>']" in err[0]
    assert bpe_main(["train", "--counts", str(counts), "--superword-from", "300", "--vocab-size", "350",
                     "--out", str(tmp_path / "no"), "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--superword-from" in err[0]
    assert not (tmp_path / "no").exists()


def test_the_default_shard_is_one_per_worker_between_1_mib_and_1_gib():
    from cs336_basics.counts.writer import default_piece_size

    assert default_piece_size(1000 << 20, 2) == 500 << 20
    assert default_piece_size(1000, 4) == 1 << 20
    assert default_piece_size(11 << 30, 2) == 1 << 30
