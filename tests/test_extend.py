"""Extending a tokenizer (`train_bpe(..., start_from=...)`, `bpe train --start-from`): forced merges
in the merge loop against the naive loop with forced merges, extension equal to training further,
GPT-2 extended (old tokens where no new merge applies, every format we write), ids and bad input."""

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer, train_bpe
from cs336_basics.encode import engines
from cs336_basics.formats.definition import TokenizerDefinition
from cs336_basics.train.merge import train_merges
from tests.common import FIXTURES_PATH, gpt2_files
from cs336_basics.train.reference import count_pretokens, learn_merges

TEXT = st.text(alphabet="ab c\nd.é1", max_size=120)
SPECIALS = ["<|endoftext|>"]


# --- the merge loop with forced merges, against the naive loop -----------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT, TEXT, st.integers(0, 30), st.integers(0, 40))
def test_forced_merges_match_the_naive_loop(text, other, num_forced, num_more):
    # The forced merges are learned on another text, so that some never occur in this one.
    forced, _ = learn_merges(count_pretokens(other, []), num_forced)
    words = count_pretokens(text, SPECIALS)
    expected, _ = learn_merges(words, len(forced) + num_more, forced)
    assert train_merges(words, len(forced) + num_more, forced=forced) == expected


@pytest.mark.slow
def test_forced_merges_with_worker_shards_and_long_words():
    text = (FIXTURES_PATH / "english.txt").read_text()[:30_000]
    other = (FIXTURES_PATH / "german.txt").read_text()[:20_000]
    forced, _ = learn_merges(count_pretokens(other, []), 60)
    for pattern in ("gpt2", "none"):  # GPT-2's words; whole documents (long words)
        words = count_pretokens(text, SPECIALS, pattern)
        expected, _ = learn_merges(words, 100, forced)
        log: list = []
        assert train_merges(words, 100, num_shards=2, forced=forced, merge_log=log) == expected
        assert len(log) == 100


def test_a_forced_merge_of_unknown_tokens_is_refused():
    with pytest.raises(ValueError, match="no earlier merge makes"):
        train_merges({b"abc": 2}, 3, forced=[(b"a", b"b"), (b"abc", b"d")])
    with pytest.raises(ValueError, match="pair of non-empty bytes"):
        train_merges({b"abc": 2}, 3, forced=[(b"a", b"")])


# --- extending our own tokenizer -------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(TEXT, st.integers(257, 300), st.integers(0, 40))
def test_extending_equals_training_further(tmp_path, text, small, more):
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8", newline="")
    vocab, merges = train_bpe(path, small, SPECIALS)
    direct_vocab, direct_merges = train_bpe(path, small + more, SPECIALS)
    assume(len(set(direct_vocab.values())) == len(direct_vocab))  # else an extension makes more merges
    ext_vocab, ext_merges = train_bpe(path, small + more, SPECIALS, start_from=Tokenizer(vocab, merges, SPECIALS))
    assert ext_merges == direct_merges
    # Every old id kept; the new merges' tokens take the ids after the old vocabulary, in order.
    assert {i: ext_vocab[i] for i in vocab} == vocab
    new = [left + right for left, right in direct_merges[len(merges):]]
    assert [ext_vocab[i] for i in range(len(vocab), len(ext_vocab))] == new
    assert sorted(ext_vocab.values()) == sorted(direct_vocab.values())


def test_the_extension_keeps_the_special_tokens_and_adds_new_ones(tmp_path):
    path = FIXTURES_PATH / "english.txt"
    vocab, merges = train_bpe(path, 400, ["<|endoftext|>", "<pad>"])
    ext_vocab, ext_merges = train_bpe(path, 500, ["<sep>"], start_from=Tokenizer(vocab, merges, ["<|endoftext|>", "<pad>"]))
    assert len(ext_vocab) == 500 and ext_vocab[398] == b"<|endoftext|>" and ext_vocab[399] == b"<pad>"
    assert ext_vocab[499] == b"<sep>" and ext_merges[:len(merges)] == merges


def test_bad_extensions_are_refused(tmp_path):
    path = FIXTURES_PATH / "english.txt"
    vocab, merges = train_bpe(path, 300, SPECIALS)
    tok = Tokenizer(vocab, merges, SPECIALS)
    with pytest.raises(ValueError, match="below the minimum 300"):
        train_bpe(path, 299, SPECIALS, start_from=tok)
    with pytest.raises(ValueError, match="pre-tokenizes with 'gpt2'"):
        train_bpe(path, 400, SPECIALS, start_from=tok, pattern="cl100k")
    no_bytes = TokenizerDefinition({i: bytes([i]) for i in range(200)}, [], [], "gpt2")
    with pytest.raises(ValueError, match="not byte-level"):
        train_bpe(path, 400, SPECIALS, start_from=no_bytes)


def test_a_new_merge_making_a_token_the_vocabulary_holds_keeps_its_id(tmp_path):
    # A tokenizer holding " the" without a merge that makes it (as open models hold added tokens).
    path = tmp_path / "corpus.txt"
    path.write_text(" the the the the", encoding="utf-8")
    base = TokenizerDefinition({**{i: bytes([i]) for i in range(256)}, 300: b" the"}, [], [], "gpt2")
    vocab, merges = train_bpe(path, 260, [], start_from=base)
    assert merges == [(b"t", b"h"), (b"th", b"e"), (b" ", b"the")]
    # The third merge makes " the", which keeps its id: the vocabulary is one short of 260.
    assert vocab[300] == b" the" and vocab[301] == b"th" and vocab[302] == b"the" and len(vocab) == 259


# --- extending GPT-2 -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2_and_extended(tmp_path_factory):
    encoder_json, vocab_bpe = gpt2_files()
    gpt2 = Tokenizer.from_files(encoder_json, vocab_bpe, SPECIALS)
    corpus = FIXTURES_PATH / "code.txt"
    vocab, merges = train_bpe(corpus, len(gpt2.vocab) + 100, SPECIALS, start_from=gpt2)
    return gpt2, Tokenizer(vocab, merges, SPECIALS), corpus.read_text(encoding="utf-8")


@pytest.mark.slow
def test_extended_gpt2_keeps_every_id_and_merge(gpt2_and_extended):
    gpt2, extended, _ = gpt2_and_extended
    assert len(extended.vocab) == len(gpt2.vocab) + 100 and len(extended.merges) == len(gpt2.merges) + 100
    assert {i: extended.vocab[i] for i in gpt2.vocab} == gpt2.vocab
    assert extended.merges[:len(gpt2.merges)] == gpt2.merges
    assert min(set(extended.vocab) - set(gpt2.vocab)) == 50257


@pytest.mark.slow
def test_extended_gpt2_uses_old_tokens_where_no_new_merge_applies(gpt2_and_extended):
    gpt2, extended, text = gpt2_and_extended
    text = text[:20_000] + "\nHello world, ünïcödé 🙂 and <|endoftext|> plain English prose."
    changed = 0
    for piece in extended._pretokenizer.pretokens(text.replace("<|endoftext|>", "")):
        old, new = gpt2.encode(piece), extended.encode(piece)
        # New merges rank after every old one: the encoding reaches GPT-2's, then only new merges apply.
        assert new == old or max(new) >= 50257, piece
        changed += new != old
    assert changed > 0  # the new merges do apply to code
    assert extended.decode(extended.encode(text)) == text
    assert len(extended.encode(text)) < len(gpt2.encode(text))


@pytest.mark.slow
def test_extended_gpt2_saves_and_loads_in_every_format(gpt2_and_extended, tmp_path):
    _, extended, text = gpt2_and_extended
    text = text[:5000] + "<|endoftext|>tail"
    ids = extended.encode(text)
    extended.save_pretrained(tmp_path / "saved")
    assert Tokenizer.from_pretrained(tmp_path / "saved").encode(text) == ids
    assert Tokenizer.from_files(tmp_path / "saved" / "vocab.json", tmp_path / "saved" / "merges.txt", SPECIALS).encode(text) == ids
    assert extended.to_tiktoken().encode(text, allowed_special="all") == ids
    extended.save_tiktoken(tmp_path / "ext.tiktoken")
    assert Tokenizer.from_pretrained(tmp_path / "ext.tiktoken", special_tokens={"<|endoftext|>": 50256}).encode(text) == ids
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "saved" / "tokenizer.json"))
    assert hf.encode(text).ids == ids
    assert engines.encode_text(engines.choose(extended, "tiktoken"), extended, text).tolist() == ids


# --- the command line ----------------------------------------------------------------------------------


def test_bpe_train_start_from(tmp_path):
    def bpe(*args):
        return subprocess.run([sys.executable, "-m", "cs336_basics.cli", *args], capture_output=True, text=True)

    corpus = str(FIXTURES_PATH / "english.txt")
    assert bpe("train", corpus, "--vocab-size", "400", "--out", str(tmp_path / "small"), "--quiet").returncode == 0
    done = bpe("train", corpus, "--start-from", str(tmp_path / "small"), "--vocab-size", "500",
               "--out", str(tmp_path / "ext"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert bpe("train", corpus, "--vocab-size", "500", "--out", str(tmp_path / "big"), "--quiet").returncode == 0
    merges = [(tmp_path / d / "merges.txt").read_text().splitlines()[1:] for d in ("ext", "big")]
    assert merges[0] == merges[1]
    ext = json.loads((tmp_path / "ext" / "vocab.json").read_text())
    assert ext["<|endoftext|>"] == 399 and len(ext) == 500
    refused = bpe("train", corpus, "--start-from", str(tmp_path / "small"), "--vocab-size", "300", "--out",
                  str(tmp_path / "no"), "--quiet")
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1 and "minimum 400" in refused.stderr
