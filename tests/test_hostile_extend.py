"""Extending a tokenizer, SuperBPE and count-file defaults, tried as a careless or hostile user would:
the command line and the Python API given the same request give the same tokenizer (special tokens
of the base kept at their ids, new ones after the new merges; a special token that names an ordinary
token of the base refused by both; a count file's default special token), every id `merge_log.tsv`
names is the id the tokenizer gives (GPT-2's bytes and special token inside the id range, an open
model's gaps, SuperBPE), and the merge loop returns exactly the number of merges asked even when
fewer than the forced ones. Last, the property tests of the whole suite draw the same examples on
every run (see tests/conftest.py)."""

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer, train_bpe, train_bpe_from_counts
from cs336_basics.cli import main
from cs336_basics.report import token_entry, vocab_entries
from cs336_basics.text import tsv
from cs336_basics.train.merge import train_merges
from cs336_basics.train.merge_log import read_merge_log, readable_token
from tests.common import FIXTURES_PATH

EOT, IM_START = "<|endoftext|>", "<|im_start|>"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two small documents cut by EOT, for training and extending."""
    path = tmp_path_factory.mktemp("corpus") / "c.txt"
    text = (FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")[:6000]
    path.write_text(text[:3000] + EOT + text[3000:], encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def base(corpus, tmp_path_factory):
    """A tokenizer of 300 tokens, `<|endoftext|>` at 299, saved as `bpe train` saves one."""
    vocab, merges = train_bpe(corpus, 300, [EOT])
    folder = tmp_path_factory.mktemp("base") / "tok"
    Tokenizer(vocab, merges, [EOT]).save_pretrained(folder)
    assert vocab[299] == EOT.encode()
    return folder


def bpe(*argv: str) -> int:
    return main([str(a) for a in argv])


def saved(folder) -> Tokenizer:
    return Tokenizer.from_pretrained(folder)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe: "), err
    return lines[0]


# --- extension: the command does what the function does -------------------------------------------------


@pytest.mark.parametrize("new", [[IM_START], [EOT, IM_START], [EOT]])
def test_extension_keeps_the_bases_special_tokens_in_the_command_as_in_the_function(corpus, base, tmp_path, new):
    args = []
    for token in new:
        args += ["--special-token", token]
    assert bpe("train", corpus, "--start-from", base, *args, "--vocab-size", 360, "--out", tmp_path / "cli",
               "--quiet", "--workers", 1) == 0
    vocab, merges = train_bpe(corpus, 360, new, start_from=base)
    cli = saved(tmp_path / "cli")
    assert (cli.vocab, cli.merges) == (vocab, merges)
    expected = [EOT, *(t for t in new if t != EOT)]
    assert cli.special_tokens == expected
    assert cli.vocab[299] == EOT.encode() and cli.encode(f"a{EOT}b")[1] == 299  # still special, same id
    if IM_START in new:
        assert vocab[359] == IM_START.encode() and cli.encode(IM_START) == [359]  # after the 60 new merges
    assert len(cli.vocab) == 360


def test_extension_without_special_token_adds_the_default_in_the_command_as_in_the_function(corpus, base, tmp_path):
    # The command's default special token is <|endoftext|>, which the base holds already: nothing new.
    assert bpe("train", corpus, "--start-from", base, "--vocab-size", 330, "--out", tmp_path / "cli", "--quiet") == 0
    vocab, merges = train_bpe(corpus, 330, [EOT], start_from=base)
    cli = saved(tmp_path / "cli")
    assert (cli.vocab, cli.merges, cli.special_tokens) == (vocab, merges, [EOT])


def test_a_special_token_naming_an_ordinary_token_of_the_base_is_refused_by_both(corpus, base, tmp_path, capsys):
    tok = saved(base)
    token_id = 280
    word = tok.vocab[token_id].decode("utf-8")  # a token a merge of the base makes
    with pytest.raises(ValueError) as refused:
        train_bpe(corpus, 360, [word], start_from=base)
    assert repr(word) in str(refused.value) and str(token_id) in str(refused.value)
    assert bpe("train", corpus, "--start-from", base, "--special-token", word, "--vocab-size", 360,
               "--out", tmp_path / "cli", "--quiet") == 1
    line = one_error_line(capsys)
    assert repr(word) in line and str(token_id) in line
    assert not (tmp_path / "cli").exists()
    # A single byte is an ordinary token too (and one of the base's ids).
    with pytest.raises(ValueError, match="single byte"):
        train_bpe(corpus, 360, ["a"], start_from=base)


def test_a_gpt2_vocabulary_naming_its_added_token_special_keeps_its_id(corpus, tmp_path):
    # vocab.json and merges.txt record no special tokens; <|endoftext|> is in the vocabulary but no
    # merge makes it: naming it special keeps its id (as GPT-2's files are read everywhere).
    vocab, merges = train_bpe(corpus, 300, [EOT])
    Tokenizer(vocab, merges, [EOT]).save(tmp_path / "vocab.json", tmp_path / "merges.txt")
    ext_vocab, _ = train_bpe(corpus, 320, [EOT], start_from=tmp_path)
    assert ext_vocab[299] == EOT.encode() and len(ext_vocab) == 320


@pytest.fixture(scope="module")
def gpt2_offline(tiktoken_cache):
    return Tokenizer.from_pretrained("gpt2")


@pytest.mark.slow
def test_gpt2_with_a_new_special_token_in_the_command_as_in_the_function(gpt2_offline, corpus, tmp_path, capsys):
    size = len(gpt2_offline.vocab) + 20
    assert bpe("train", corpus, "--start-from", "gpt2", "--special-token", IM_START, "--vocab-size", size,
               "--out", tmp_path / "cli", "--quiet", "--workers", 1) == 0, capsys.readouterr().err
    vocab, merges = train_bpe(corpus, size, [IM_START], start_from="gpt2")
    cli = saved(tmp_path / "cli")
    assert (cli.vocab, cli.merges, cli.special_tokens) == (vocab, merges, [EOT, IM_START])
    assert vocab[50256] == EOT.encode() and vocab[size - 1] == IM_START.encode()
    check_merge_log_ids(tmp_path / "cli")


def test_an_ordinary_token_of_gpt2_named_special_is_refused_by_both(gpt2_offline, corpus, tmp_path, capsys):
    size = len(gpt2_offline.vocab) + 20
    with pytest.raises(ValueError, match=r"' function'.*2163"):
        train_bpe(corpus, size, [" function"], start_from=gpt2_offline)
    assert bpe("train", corpus, "--start-from", "gpt2", "--special-token", " function", "--vocab-size", size,
               "--out", tmp_path / "no", "--quiet") == 1
    line = one_error_line(capsys)
    assert "' function'" in line and "2163" in line
    assert not (tmp_path / "no").exists()


# --- merge_log.tsv names the tokenizer's ids ---------------------------------------------------------------


def check_merge_log_ids(folder) -> None:
    """Every id in `folder`'s merge_log.tsv is the id vocab.json gives the row's token; the occurrences
    `bpe vocab` shows are those of the training corpus encoded with the tokenizer."""
    tok = saved(folder)
    ids = {readable_token(token): i for i, token in tok.vocab.items()}
    vocab_json = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    assert sorted(vocab_json.values()) == sorted(tok.vocab)
    rows = tsv.read_rows((folder / "merge_log.tsv").read_text(encoding="utf-8"))[2:]
    assert len(rows) == 256 + len(tok.merges)
    for row in rows:
        assert int(row[1]) == ids[row[4]], row


def encoded_counts(tok: Tokenizer, corpus) -> Counter:
    specials = {i for i, t in tok.vocab.items() if t.decode("utf-8", "replace") in tok.special_tokens}
    return Counter(i for i in tok.encode(corpus.read_text(encoding="utf-8")) if i not in specials)


def check_occurrences(folder, corpus) -> None:
    tok = saved(folder)
    log = read_merge_log(folder / "merge_log.tsv")
    shown = {e.id: e.occurrences for e in vocab_entries(tok, log) if e.occurrences is not None}
    counted = encoded_counts(tok, corpus)
    assert {i: n for i, n in shown.items() if n} == {i: n for i, n in counted.items()}
    for token_id, _ in counted.most_common(5):  # what a click on a token of the served page shows
        assert token_entry(tok, token_id, log).occurrences == counted[token_id]


@pytest.fixture(scope="module")
def gapped(tmp_path_factory):
    """An open model's layout: the bytes at ids 10-265 in another order, merges' tokens at every
    other id from 300, a special token at 5 and another after all of them."""
    vocab = {10 + k: bytes([(k * 7) % 256]) for k in range(256)}
    merges = [(b"t", b"h"), (b"th", b"e"), (b" ", b"the"), (b"a", b"n"), (b" ", b"an")]
    for k, (left, right) in enumerate(merges):
        vocab[300 + 2 * k] = left + right
    vocab[5], vocab[400] = EOT.encode(), b"<pad>"
    folder = tmp_path_factory.mktemp("gapped") / "tok"
    Tokenizer(vocab, merges, [EOT, "<pad>"]).save_pretrained(folder)
    return folder


def test_merge_log_names_the_ids_of_an_extended_open_model_with_gaps(gapped, corpus, tmp_path):
    assert bpe("train", corpus, "--start-from", gapped, "--special-token", IM_START, "--vocab-size", 320,
               "--out", tmp_path / "ext", "--quiet") == 0
    check_merge_log_ids(tmp_path / "ext")
    check_occurrences(tmp_path / "ext", corpus)
    tok = saved(tmp_path / "ext")
    assert tok.vocab[5] == EOT.encode() and tok.vocab[400] == b"<pad>" and min(set(tok.vocab) - set(range(401))) == 401


def test_the_report_names_the_ids_of_an_extended_open_model_with_gaps(gapped, corpus, tmp_path):
    pytest.importorskip("matplotlib")
    from cs336_basics.report.page import build_report

    assert bpe("train", corpus, "--start-from", gapped, "--vocab-size", 320, "--out", tmp_path / "ext", "--quiet") == 0
    tok = saved(tmp_path / "ext")
    page = build_report(tok, name="ext", log=read_merge_log(tmp_path / "ext" / "merge_log.tsv"), pretrained=[])
    ids = {token: i for i, token in tok.vocab.items()}
    last = tok.merges[-1]
    assert f"<tr><td>{len(tok.merges) - 1}</td><td>{ids[last[0] + last[1]]}</td>" in page
    first = tok.merges[0]
    assert f"<tr><td>0</td><td>{ids[first[0] + first[1]]}</td>" in page


def test_merge_log_names_the_ids_of_an_extension_of_our_own(base, corpus, tmp_path):
    assert bpe("train", corpus, "--start-from", base, "--special-token", IM_START, "--vocab-size", 340,
               "--out", tmp_path / "ext", "--quiet") == 0
    check_merge_log_ids(tmp_path / "ext")
    check_occurrences(tmp_path / "ext", corpus)


@pytest.mark.parametrize("extending", [False, True])
def test_merge_log_names_the_ids_of_superbpe(corpus, base, tmp_path, extending):
    start = ["--start-from", base] if extending else []  # then <|endoftext|> sits at 299, inside the range
    assert bpe("train", corpus, *start, "--vocab-size", 420, "--superword-from", 330, "--out", tmp_path / "super",
               "--quiet") == 0
    check_merge_log_ids(tmp_path / "super")
    check_occurrences(tmp_path / "super", corpus)


@pytest.mark.slow
def test_merge_log_names_the_ids_of_an_extended_gpt2(gpt2_offline, corpus, tmp_path):
    assert bpe("train", corpus, "--start-from", "gpt2", "--vocab-size", len(gpt2_offline.vocab) + 40,
               "--out", tmp_path / "ext", "--quiet", "--workers", 1) == 0
    check_merge_log_ids(tmp_path / "ext")  # GPT-2's bytes are not at ids 0-255, <|endoftext|> is 50256
    check_occurrences(tmp_path / "ext", corpus)


# --- count files: the documented default special token -----------------------------------------------------


def test_a_count_file_defaults_to_endoftext_in_the_command_as_in_the_function(tmp_path):
    words = tmp_path / "words.tsv"
    words.write_text("".join(f"{w}\t{n}\n" for w, n in [(" the", 9), (" then", 4), (" other", 3), ("there", 2)]),
                     encoding="utf-8")
    assert bpe("train", "--counts", words, "--vocab-size", 262, "--out", tmp_path / "cli", "--quiet") == 0
    vocab, merges = train_bpe_from_counts(words, 262)
    cli = saved(tmp_path / "cli")
    assert (cli.vocab, cli.merges, cli.special_tokens) == (vocab, merges, [EOT])
    assert vocab[261] == EOT.encode() and len(vocab) == 262
    # Given, it is the special token; an empty list means none.
    vocab, _ = train_bpe_from_counts(words, 262, [])
    assert EOT.encode() not in vocab.values() and len(vocab) == 262


def test_a_count_table_defaults_to_its_own_special_tokens_in_the_command_as_in_the_function(corpus, tmp_path):
    assert bpe("count", corpus, "--out", tmp_path / "counts", "--special-token", "<s>", "--quiet") == 0
    assert bpe("train", "--counts", tmp_path / "counts", "--vocab-size", 300, "--out", tmp_path / "cli",
               "--quiet") == 0
    vocab, merges = train_bpe_from_counts(tmp_path / "counts", 300)
    cli = saved(tmp_path / "cli")
    assert (cli.vocab, cli.merges, cli.special_tokens) == (vocab, merges, ["<s>"])
    assert vocab[299] == b"<s>"


# --- the merge loop returns the number of merges asked ------------------------------------------------------


@pytest.mark.parametrize("num_shards", [1, 2])
@pytest.mark.parametrize("asked", [0, 1, 2])
def test_train_merges_asked_for_fewer_than_the_forced_ones_returns_that_many(num_shards, asked):
    forced = [(b"a", b"b"), (b"ab", b"c"), (b"x", b"y")]
    log: list = []
    merges = train_merges({b"abc": 2, b"xyz": 3, b"abd": 1}, asked, num_shards=num_shards, forced=forced,
                          merge_log=log)
    assert merges == forced[:asked] and len(log) == asked


# --- the property tests are the same from run to run -------------------------------------------------------


@given(st.integers())
def _drawn(n):
    pass


def test_property_tests_draw_from_a_fixed_seed_unless_a_random_run_is_asked(request):
    """Whether a property test catches a bug must not change from run to run: by default (and in
    CI) hypothesis draws from a seed fixed per test, with no example database and no deadline; the
    `random` profile (BPE_HYPOTHESIS_PROFILE=random, or --hypothesis-profile random) draws anew."""
    chosen = request.config.getoption("--hypothesis-profile", None) or os.environ.get("BPE_HYPOTHESIS_PROFILE")
    drawn = _drawn._hypothesis_internal_use_settings  # what a decorated test of any module runs with
    if chosen not in (None, "fixed"):
        assert not settings.get_profile("random").derandomize
        pytest.skip(f"the profile {chosen!r} was asked for")
    for current in (settings(), drawn):
        assert current.derandomize and current.database is None and current.deadline is None
    assert not settings.get_profile("random").derandomize


# --- the output never replaces what training reads ----------------------------------------------------------


def test_an_extension_written_over_its_base_is_refused(corpus, base, tmp_path, capsys):
    base = Path(shutil.copytree(base, tmp_path / "tok"))
    before = {p.name: p.read_bytes() for p in base.iterdir()}
    assert bpe("train", corpus, "--start-from", base, "--vocab-size", 330, "--out", base, "--quiet") == 1
    assert "destroy the input" in one_error_line(capsys)
    assert {p.name: p.read_bytes() for p in base.iterdir()} == before
    assert bpe("train", corpus, "--start-from", base / "tokenizer.json", "--vocab-size", 330, "--out", base,
               "--quiet") == 1
    one_error_line(capsys)
    assert {p.name: p.read_bytes() for p in base.iterdir()} == before


def test_a_tokenizer_written_into_the_count_table_it_reads_is_refused(corpus, tmp_path, capsys):
    assert bpe("count", corpus, "--out", tmp_path / "counts", "--quiet") == 0
    before = sorted(p.name for p in (tmp_path / "counts").iterdir())
    assert bpe("train", "--counts", tmp_path / "counts", "--vocab-size", 300, "--out", tmp_path / "counts",
               "--quiet") == 1
    assert str(tmp_path / "counts") in one_error_line(capsys)
    assert sorted(p.name for p in (tmp_path / "counts").iterdir()) == before
    words = tmp_path / "words.tsv"
    words.write_text(" the\t3\n", encoding="utf-8")
    assert bpe("train", "--counts", words, "--vocab-size", 260, "--out", words, "--quiet") == 1
    one_error_line(capsys)
    assert words.read_text(encoding="utf-8") == " the\t3\n"
