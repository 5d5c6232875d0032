"""The tiktoken engine against its oracle, the Python engine (`Tokenizer.encode`), and each refusal.

The ids must be the same on any text: special tokens (also one that is a prefix of another),
surrogates, every named pattern, the fixtures, and characters whose Unicode class differs between
the two engines' tables (under "auto" those documents go to the Python engine; under "tiktoken"
they are refused by name). See `cs336_basics/encode/engines.py`.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import main
from cs336_basics.encode import engines
from cs336_basics.text.pretokenize import special_token_regex
from cs336_basics.text.surrogates import fix_surrogates
from tests.adapters import run_train_bpe
from tests.common import FIXTURES_PATH

EOT = "<|endoftext|>"
SPECIALS = [EOT, EOT + EOT, "<|pad|>"]  # the second holds the first: longest first decides
APART = [EOT, "<|pad|>"]  # none begins another: tiktoken cuts texts at them itself
NAMED = ["gpt2", "cl100k", "o200k", "none"]
EXAMPLES = int(os.environ.get("BPE_FUZZ_EXAMPLES", 0)) or 60
FIXTURES = ["english.txt", "german.txt", "chinese.txt", "code.txt", "emoji_chat.txt"]


@pytest.fixture(scope="module")
def trained():
    return run_train_bpe(FIXTURES_PATH / "english.txt", 600, [EOT])


@pytest.fixture(scope="module")
def tokenizers(trained):
    vocab, merges = trained
    return {name: Tokenizer(vocab, merges, SPECIALS, pattern=name) for name in NAMED}


@pytest.fixture(scope="module")
def apart(trained):
    """The tokenizers with special tokens of which none begins another (tiktoken cuts at them)."""
    vocab, merges = trained
    return {name: Tokenizer(vocab, merges, APART, pattern=name) for name in NAMED}


@pytest.fixture(scope="module")
def kinds(tokenizers, apart):
    """The tokenizers by (pattern, kind of special tokens): one that begins another ("nested"),
    none that begins another ("apart"), and no special tokens at all ("none")."""
    vocab, merges = run_train_bpe(FIXTURES_PATH / "english.txt", 600, [])
    plain = {name: Tokenizer(vocab, merges, [], pattern=name) for name in NAMED}
    return {(name, kind): by_kind[name] for name in NAMED
            for kind, by_kind in (("nested", tokenizers), ("apart", apart), ("none", plain))}


KINDS = ["nested", "apart", "none"]


def test_tiktoken_cuts_at_special_tokens_only_when_none_begins_another(tokenizers, apart):
    assert engines.choose(apart["gpt2"], "tiktoken").whole
    assert not engines.choose(tokenizers["gpt2"], "tiktoken").whole


def differing_sample() -> list[str]:
    return sorted(engines.differing_characters("o200k"))[::97] + ["\u0295"]


# Pieces that exercise the patterns, the special tokens and surrogates (pairs, lone ones).
PIECES = st.sampled_from(
    ["a", "the", " the", "The", "A", "'s", "'LL", " ", "  ", "\n", "\r\n", "\n\n", "\t", "\u00a0", "\u3000", "1",
     "123", "4567", "!", ".\n", "é", "ǅ", "ʰ", "中文", "\u0301", "😀", "\ud83d\ude00", "\ud83d", "\ude00", EOT,
     EOT + EOT, "<|pad|>", "<|endof", "|>"]
)
TEXT = st.lists(st.one_of(PIECES, PIECES, st.characters(exclude_categories=["Cs"])), max_size=40).map("".join)
TEXT_WITH_DIFFERING = st.lists(st.one_of(PIECES, st.sampled_from(differing_sample())), max_size=30).map("".join)


@settings(max_examples=EXAMPLES, deadline=None)
@given(TEXT, st.sampled_from(NAMED), st.sampled_from(KINDS), st.sampled_from([1, 2]))
def test_auto_gives_the_python_engine_s_ids_on_any_text(kinds, text, name, kind, threads):
    tok = kinds[name, kind]
    choice = engines.choose(tok, "auto", threads=threads)
    assert choice.engine == "tiktoken"
    assert engines.encode_text(choice, tok, text).tolist() == tok.encode(text)
    # Several texts at once (over the threads, each whole), and one text's documents over them.
    halves = [text[: len(text) // 2], text[len(text) // 2 :]]
    assert [a.tolist() for a in engines.encode_texts(choice, tok, halves)] == [tok.encode(t) for t in halves]


@settings(max_examples=EXAMPLES, deadline=None)
@given(TEXT_WITH_DIFFERING, st.sampled_from(NAMED), st.sampled_from(KINDS))
def test_characters_whose_class_differs_go_to_python_under_auto_and_are_refused_under_tiktoken(kinds, text, name, kind):
    tok = kinds[name, kind]
    assert engines.encode_text(engines.choose(tok, "auto"), tok, text).tolist() == tok.encode(text)
    strict = engines.choose(tok, "tiktoken")
    differing = engines.differing_characters(name)
    try:
        ids = engines.encode_text(strict, tok, text).tolist()
    except ValueError as e:
        assert "Unicode class differs" in str(e) and "use engine 'auto'" in str(e)
        code = str(e).split("U+")[1].split(" ")[0]
        assert chr(int(code, 16)) in text and chr(int(code, 16)) in engines.differing_characters(name)
        # The first one in its document is named, with its place.
        where, c = int(str(e).split("at character ")[1].split(" ")[0]), chr(int(code, 16))
        cut = special_token_regex(tok.special_tokens)
        documents = cut.split(fix_surrogates(text)) if cut else [fix_surrogates(text)]
        document = next(d for d in documents if d[where : where + 1] == c and not set(d[:where]) & differing)
        assert document
    else:
        assert ids == tok.encode(text)
        assert not set(text) & engines.differing_characters(name)


def test_the_differing_characters_are_those_the_tables_disagree_on():
    # U+0295 moved from Ll to Lo: only o200k tells those apart. A Unicode 17 letter differs for all.
    assert "\u0295" in engines.differing_characters("o200k")
    assert "\u0295" not in engines.differing_characters("gpt2")
    assert "\U000323b0" in engines.differing_characters("gpt2")
    assert engines.differing_characters("none") == frozenset()
    assert not {"a", "é", "中", " ", "1"} & engines.differing_characters("o200k")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", NAMED)
@pytest.mark.parametrize("fixture", FIXTURES)
def test_fixtures_encode_alike(kinds, fixture, name, kind):
    tok = kinds[name, kind]
    text = (FIXTURES_PATH / fixture).read_text(encoding="utf-8")
    assert engines.encode_text(engines.choose(tok, "tiktoken"), tok, text).tolist() == tok.encode(text)


def test_a_special_token_holding_another_is_taken_whole_as_by_the_python_engine(tokenizers):
    tok = tokenizers["gpt2"]
    text = f"a{EOT}{EOT}{EOT}b<|pad|>{EOT}"
    ids = engines.encode_text(engines.choose(tok, "tiktoken"), tok, text).tolist()
    assert ids == tok.encode(text)
    assert ids.count(tok.encode(EOT + EOT)[0]) == 1 and ids.count(tok.encode(EOT)[0]) == 2


@pytest.mark.parametrize("engine", ["python", "tiktoken", "auto"])
@pytest.mark.parametrize("workers", [1, 2])
def test_encode_file_gives_the_same_array_with_each_engine(tmp_path, trained, engine, workers):
    vocab, merges = trained
    tok = Tokenizer(vocab, merges, [EOT], pattern="cl100k")
    corpus = tmp_path / "corpus.jsonl"
    records = ['{"text": "Hello\\ud83d\\ude00 world"}', '{"text": "lone \\ud800 surrogate<|endoftext|>x"}',
               '{"text": ""}', '{"text": "\\u0295 and \\ud808\\udfb0 differ"}']
    corpus.write_text("\n".join(records * 50) + "\n", encoding="utf-8")
    english = FIXTURES_PATH / "english.txt"
    out = tmp_path / "ids.npy"
    tok.encode_file([english, corpus], out, num_workers=workers, piece_size=4096, engine=engine)
    expected = tok.encode_file([english, corpus], tmp_path / "python.npy", num_workers=1, engine="python")
    assert np.load(out).tolist() == np.load(tmp_path / "python.npy").tolist()
    assert len(np.load(out)) == expected


@pytest.mark.parametrize("workers", [1, 2])
def test_a_dataset_directory_is_the_same_bytes_with_each_engine(tmp_path, trained, workers):
    from tests.test_dataset_writer import files_of

    vocab, merges = trained
    tok = Tokenizer(vocab, merges, [EOT], pattern="cl100k")
    inputs = [FIXTURES_PATH / "english.txt", FIXTURES_PATH / "chinese.txt"]
    tok.encode_dataset(inputs, tmp_path / "python", shard_size=20_000, num_workers=1, engine="python")
    tok.encode_dataset(inputs, tmp_path / "tiktoken", shard_size=20_000, num_workers=workers, engine="tiktoken")
    python, tiktoken = files_of(tmp_path / "python"), files_of(tmp_path / "tiktoken")
    assert len(python) > 3 and python == tiktoken


def test_encode_file_on_another_executor_sends_the_engine_with_each_unit(tmp_path, tokenizers):
    tok = tokenizers["o200k"]
    english = FIXTURES_PATH / "english.txt"
    with ThreadPoolExecutor(2) as pool:
        tok.encode_file(english, tmp_path / "a.npy", executor=pool, piece_size=8192, engine="tiktoken")
    tok.encode_file(english, tmp_path / "b.npy", num_workers=1, engine="python")
    assert np.load(tmp_path / "a.npy").tolist() == np.load(tmp_path / "b.npy").tolist()


@pytest.mark.parametrize("engine", ["python", "tiktoken", "auto"])
@pytest.mark.parametrize("workers", [1, 2])
def test_encode_batch_equals_encode_of_each_text(tokenizers, engine, workers):
    tok = tokenizers["gpt2"]
    texts = (FIXTURES_PATH / "german.txt").read_text(encoding="utf-8").split("\n")[:200]
    texts += ["", EOT, "x\ud800", "\u0295"]
    assert tok.encode_batch(texts, num_workers=workers, engine=engine) == [tok.encode(t) for t in texts]
    assert tok.encode_batch(iter(texts[:3]), engine=engine) == [tok.encode(t) for t in texts[:3]]
    assert tok.encode_batch([], engine=engine) == []


def test_encode_batch_refuses_what_is_not_text(tokenizers):
    tok = tokenizers["gpt2"]
    with pytest.raises(TypeError, match="encode_batch takes str texts, got bytes"):
        tok.encode_batch(["ok", b"bytes"])
    with pytest.raises(TypeError, match="encode_batch takes str texts, got int"):
        tok.encode_batch([1])
    with pytest.raises(TypeError, match=r"takes a list of texts, not one str: write \['one text'\]"):
        tok.encode_batch("one text")
    with pytest.raises(ValueError, match="num_workers must be a positive int"):
        tok.encode_batch(["ok"], num_workers=0)


# --- refusals ----------------------------------------------------------------------------------------


def test_ids_that_are_not_ranks_are_refused_with_the_reason(trained):
    vocab, merges = trained
    # The first two merged tokens swap ids: the ids no longer follow the merge order.
    swapped = dict(vocab)
    swapped[256], swapped[257] = vocab[257], vocab[256]
    tok = Tokenizer(swapped, merges, [EOT])
    with pytest.raises(ValueError, match="engine 'tiktoken' cannot give this tokenizer's ids: .*merge order"):
        engines.choose(tok, "tiktoken")
    choice = engines.choose(tok, "auto")
    assert choice.engine == "python" and "merge order" in choice.reason
    text = (FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")[:3000]
    assert engines.encode_text(choice, tok, text).tolist() == tok.encode(text)


def test_a_custom_regex_is_refused_with_the_reason(trained):
    vocab, merges = trained
    tok = Tokenizer(vocab, merges, [EOT], pattern=r"\w+|\s+|[^\w\s]+")
    with pytest.raises(ValueError, match="custom regex may mean something else in tiktoken"):
        engines.choose(tok, "tiktoken")
    choice = engines.choose(tok, "auto")
    assert choice.engine == "python" and "custom regex" in choice.reason


def test_without_tiktoken_auto_runs_python_and_tiktoken_is_refused(tokenizers, monkeypatch):
    monkeypatch.setattr(engines, "_tiktoken", lambda: None)
    tok = tokenizers["gpt2"]
    with pytest.raises(ImportError, match=r"needs tiktoken, which is not installed: pip install 'cs336-basics\[tiktoken\]'"):
        engines.choose(tok, "tiktoken")
    assert engines.choose(tok, "auto") == engines.Choice("python", "tiktoken is not installed")


def test_unknown_engines_and_bad_thread_counts_are_refused(tokenizers):
    tok = tokenizers["gpt2"]
    with pytest.raises(ValueError, match="unknown engine 'rust'; the engines are python, tiktoken, auto"):
        engines.choose(tok, "rust")
    with pytest.raises(ValueError, match="threads must be a positive int"):
        engines.choose(tok, "auto", threads=0)
    with pytest.raises(ValueError, match="unknown engine"):
        tok.encode_file(FIXTURES_PATH / "english.txt", "/nonexistent/x.npy", engine="fast")


def test_auto_leaves_small_inputs_to_python(tokenizers):
    tok = tokenizers["gpt2"]
    assert engines.choose(tok, "auto", input_bytes=engines.AUTO_MIN_BYTES - 1).engine == "python"
    assert engines.choose(tok, "auto", input_bytes=engines.AUTO_MIN_BYTES).engine == "tiktoken"
    assert engines.choose(tok, "tiktoken", input_bytes=10).engine == "tiktoken"


def test_python_is_always_python(tokenizers):
    assert engines.choose(tokenizers["o200k"], "python") == engines.Choice("python", "asked for")


def test_cli_names_the_engine_and_refuses_with_the_reason(tmp_path, trained, capsys):
    vocab, merges = trained
    Tokenizer(vocab, merges, [EOT]).save_pretrained(tmp_path / "tok")
    english = str(FIXTURES_PATH / "english.txt")
    argv = ["encode", "--tokenizer", str(tmp_path / "tok"), english, "--out", str(tmp_path / "a.npy"), "--quiet"]
    assert main(argv) == 0  # 133 KB: under auto's threshold
    assert "engine: python (the input is under 4 MB, where checking that tiktoken gives our ids" in capsys.readouterr().out
    assert main([*argv, "--engine", "tiktoken"]) == 0
    assert "engine: tiktoken (asked for)" in capsys.readouterr().out
    assert main([*argv, "--engine", "python"]) == 0
    assert "engine: python (asked for)" in capsys.readouterr().out
    custom = tmp_path / "custom"
    Tokenizer(vocab, merges, [EOT], pattern=r"\w+|\s+|[^\w\s]+").save_pretrained(custom)
    argv[2] = str(custom)
    assert main([*argv, "--engine", "tiktoken"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bpe: engine 'tiktoken' cannot give this tokenizer's ids: a custom regex") and "Traceback" not in err


@pytest.mark.slow  # checking that GPT-2's 50 000 ids are ranks takes about a second
def test_gpt2_s_vocabulary_on_the_fixtures(tmp_path):
    from tests.common import gpt2_files, tiktoken_gpt2

    encoder_json, vocab_bpe = gpt2_files()
    tok = Tokenizer.from_files(encoder_json, vocab_bpe, [EOT])
    choice = engines.choose(tok, "tiktoken")
    for fixture in FIXTURES:
        text = (FIXTURES_PATH / fixture).read_text(encoding="utf-8")
        ids = engines.encode_text(choice, tok, text).tolist()
        assert ids == tok.encode(text) == tiktoken_gpt2().encode(text, allowed_special="all")
    corpus = [FIXTURES_PATH / f for f in FIXTURES]
    tok.encode_file(corpus, tmp_path / "a.npy", num_workers=2, piece_size=16384, engine=choice)
    tok.encode_file(corpus, tmp_path / "b.npy", num_workers=1, engine="python")
    assert np.load(tmp_path / "a.npy").tolist() == np.load(tmp_path / "b.npy").tolist()
