"""Pre-tokenization patterns: names, validation, exact semantics against tiktoken's regex engine, the
safe-boundary facts the fast paths rest on, and encoding with each pattern."""

import io
import os
import pathlib
import random
import tempfile
import time
from functools import lru_cache

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics import errors
from cs336_basics.bpe import Tokenizer, train_bpe
from cs336_basics.corpora.cutting import find_safe_cut
from cs336_basics.text import patterns, timeouts
from cs336_basics.train import merge
from tests.adapters import run_train_bpe
from tests.common import FIXTURES_PATH, tiktoken_for
from cs336_basics.train.reference import pretokens, split_documents, train_bpe_reference
from tests.reference import reference_encode

EOT = "<|endoftext|>"
NAMED = ["gpt2", "cl100k", "o200k"]
CUSTOM = r"""\p{L}+|\p{N}|[^\p{L}\p{N}\s]+|\s+"""
FUZZ = int(os.environ.get("BPE_FUZZ_EXAMPLES", 0))  # 0: each test's own default


@lru_cache
def table_differences() -> frozenset[str]:
    """The characters whose Unicode classes (as used by the patterns) differ between the `regex`
    package and tiktoken's engine: found by running each class as a pattern through tiktoken."""
    import tiktoken

    ranks = {bytes([i]): i for i in range(256)}
    chars = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    differ: set[str] = set()
    for cls in [r"\p{L}", r"\p{N}", r"\p{M}", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\s"]:
        enc = tiktoken.Encoding(name="class", pat_str=cls, mergeable_ranks=ranks, special_tokens={})
        theirs = set(enc.decode_bytes(enc.encode_ordinary(chars)).decode("utf-8"))
        differ |= theirs ^ set(regex.findall(cls, chars))
    return frozenset(differ)


# Characters each pattern treats specially: cased letters, titlecase (ǅ), modifier letters (ʰ),
# other letters (中), marks (U+0301), the long s and Kelvin sign (case-insensitive contractions),
# digits and other numbers, apostrophes, every kind of whitespace, and controls that are not \s.
SPECIAL_PIECES = st.sampled_from(
    ["a", "b", "s", "Z", "T", "é", "É", "ǅ", "ʰ", "中", "\u0301", "ſ", "\u212a", "1", "23", "٣", "½", "'", "’",
     "'s", "'S", "'ll", "'LL", "'Ve", "!", ".", "-", "/", "$", ".\n", "?\r\n", ")\n\n", " ", "  ", "\t", "\n", "\r",
     "\r\n", "\n\n", "\x0b", "\x0c", "\x1c", "\x85", "\u00a0", "\u1680", "\u2000", "\u2028", "\u202f", "\u3000",
     "😀", EOT]
)
# Mostly the pieces above (three to one), else any character whose classes both engines agree on.
PIECES = st.one_of(
    SPECIAL_PIECES, SPECIAL_PIECES, SPECIAL_PIECES,
    st.characters(exclude_categories=["Cs"]).filter(lambda c: c not in table_differences()),
)
TEXTS = st.lists(PIECES, max_size=40).map("".join)


def split_specials(text: str) -> list[str]:
    return text.split(EOT)


# --- names and validation ----------------------------------------------------------------------------


def test_named_patterns_are_tiktokens(monkeypatch):
    import tiktoken_ext.openai_public as openai_public

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: {})
    monkeypatch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", lambda *args, **kwargs: {})
    assert patterns.regex_string("cl100k") == openai_public.cl100k_base()["pat_str"]
    assert patterns.regex_string("o200k") == openai_public.o200k_base()["pat_str"]
    # tiktoken's r50k/p50k pattern is a possessive rewrite of GPT-2's; docs/behaviour.md keeps GPT-2's own.
    assert patterns.regex_string("gpt2") == r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@pytest.mark.parametrize(
    "given_, name",
    [("gpt2", "gpt2"), ("r50k_base", "gpt2"), ("p50k_base", "gpt2"), ("cl100k", "cl100k"), ("cl100k_base", "cl100k"),
     ("o200k", "o200k"), ("o200k_base", "o200k"), ("none", "none"), (CUSTOM, CUSTOM)],
)
def test_canonical_names(given_, name):
    assert patterns.canonical(given_) == name
    assert Tokenizer({i: bytes([i]) for i in range(256)}, [], pattern=given_).pattern == name
    assert patterns.regex_string(given_) == (None if name == "none" else patterns.NAMED.get(name, name))


@pytest.mark.parametrize(
    "pattern, words",
    [
        ("cl100", ["unknown pattern name 'cl100'", "gpt2, cl100k, o200k, none"]),
        ("GPT2", ["unknown pattern name 'GPT2'", "gpt2, cl100k, o200k, none"]),
        ("[a-z", ["'[a-z'", "not a valid regex"]),
        ("a|", ["'a|'", "matches the empty string"]),
        (r"\s*", ["matches the empty string"]),
        (None, ["pattern must be a str"]),
    ],
)
def test_bad_patterns_are_refused_where_they_enter(pattern, words):
    for make in (patterns.canonical, lambda p: Tokenizer({i: bytes([i]) for i in range(256)}, [], pattern=p)):
        with pytest.raises(ValueError) as e:
            make(pattern)
        assert all(w in str(e.value) for w in words), str(e.value)


def test_text_a_custom_pattern_leaves_unmatched_is_an_error_naming_the_offset():
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], pattern=r"[a-z]+| ")
    assert tok.encode("ab c") == list(b"ab c")
    with pytest.raises(ValueError, match=r"leaves '!' unmatched at character offset 2"):
        tok.encode("ab! c")
    with pytest.raises(ValueError, match=r"leaves 'X' unmatched at character offset 4"):
        tok.encode("ab cX")


def test_a_custom_pattern_matching_empty_in_context_is_an_error_naming_the_offset():
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], pattern=r"a|(?=b)")
    with pytest.raises(ValueError, match=r"matches the empty string at character offset 1"):
        tok.encode("ab")


def test_a_long_unmatched_text_is_named_by_its_start_in_a_short_message():
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], pattern=r"[a-z]+| ")
    with pytest.raises(ValueError, match=r"leaves '!{30}…' unmatched at character offset 3") as e:
        tok.encode("ab " + "!" * 10_000)
    assert len(str(e.value)) < 400


def test_a_custom_pattern_running_past_its_time_limit_is_stopped_naming_it(monkeypatch):
    pattern = r"\p{L}+|\p{N}+|[^\p{L}\p{N}\s]+|\s+(?!\S)|\s+"  # 30 to 60 characters: named whole
    monkeypatch.setattr(timeouts, "TIMEOUT_SECONDS", 1e-6)
    monkeypatch.setattr(timeouts, "TIMEOUT_SECONDS_PER_MB", 0.0)
    with pytest.raises(errors.PatternTimeout) as e:
        patterns.get(pattern).pretokens("some words 12 and more, " * 2000)
    assert all(w in str(e.value) for w in [repr(pattern), "ran for over 0 s", "48,000 characters", "'some words"]), str(e.value)


def test_the_time_limit_of_a_custom_pattern_grows_with_the_document():
    base, per_mb = timeouts.TIMEOUT_SECONDS, timeouts.TIMEOUT_SECONDS_PER_MB
    assert timeouts.custom_timeout(0) == base
    assert timeouts.custom_timeout(1_000_000) == base + per_mb
    assert timeouts.custom_timeout(3_000_000) == base + 3 * per_mb


@pytest.mark.parametrize("name", ["none", CUSTOM])
def test_a_pattern_without_a_boundary_keeps_a_document_as_one_chunk(name):
    pretokenizer = patterns.get(name)
    assert not pretokenizer.boundary
    assert pretokenizer.chunks("one two\nthree ") == ["one two\nthree "]
    assert pretokenizer.chunks("") == []
    assert pretokenizer.pretokens("") == []


@pytest.mark.parametrize("name, chunks", [("gpt2", ["one", " two", "\nthree", " "]), ("cl100k", ["one", " two\nthree", " "]),
                                          ("o200k", ["one", " two\nthree", " "])])
def test_the_named_patterns_cut_documents_into_chunks_at_their_boundaries(name, chunks):
    pretokenizer = patterns.get(name)
    assert pretokenizer.boundary
    assert pretokenizer.chunks("one two\nthree ") == chunks


@pytest.mark.parametrize("name", NAMED)
def test_safe_cuts_in_bytes_fall_exactly_after_non_whitespace_ascii_before_whitespace(name):
    whitespace = {c for c in range(128) if regex.match(r"\s", chr(c))}  # as the patterns' engine reads \s
    after = whitespace if name == "gpt2" else whitespace - {ord("\r"), ord("\n")}
    safe_cut = patterns.get(name).safe_cut_bytes
    for a in range(256):
        for b in range(256):
            cut = safe_cut.match(bytes([a, b])) is not None
            assert cut == (a < 128 and a not in whitespace and b in after), (a, b)


@pytest.mark.parametrize("name", NAMED)
def test_the_one_word_shortcuts_give_the_pre_tokens_of_the_pattern(name):
    chunks = ["1a", " 1a", "!a", "a", "A", " a", "ab", " ab", "Ab", " Ab", "AB", "aB", " aB", "aBc", "aBC", "1ab", "ab's",
              "é", " é", "éA", "1é", "a1", " ", "  ab"]
    pretokenizer = patterns.get(name)
    for chunk in chunks:
        assert pretokenizer.chunk_pretokens(chunk) == regex.findall(patterns.NAMED[name], chunk), chunk



# --- exact semantics ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_unicode_tables_differ_only_for_characters_newer_than_python_s_tables():
    import unicodedata

    differ = table_differences()
    assert differ  # the `regex` package knows a newer Unicode than tiktoken's engine
    # U+0295 moved from Ll to Lo in Unicode 16; everything else is unassigned in Python's tables.
    assert {c for c in differ if unicodedata.category(c) != "Cn"} == {"\u0295"}


def test_end_of_text_anchor_differs_between_engines_but_not_for_cl100k():
    # `regex`'s `$` also matches before a final newline; tiktoken's only at the very end.
    tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"xx"}, [(b"x", b"x")], pattern=r"x+$|x|\n")
    enc = tiktoken_for(tok.vocab, [], r"x+$|x|\n")
    assert tok.encode("xx\n") == [256, 10] != enc.encode("xx\n") == [120, 120, 10]
    # cl100k's `\s++$` takes a whole whitespace run, final newline included, so where `$` can match
    # is the same in both engines (checked below against `\Z`, which is end of text in both).
    assert "$" not in patterns.CL100K.replace(r"\s++$", "")


@settings(max_examples=FUZZ or 300, deadline=None)
@given(TEXTS)
def test_cl100k_end_anchor_is_end_of_text(text):
    strict = regex.compile(patterns.CL100K.replace(r"\s++$", r"\s++\Z"))
    for document in split_specials(text + "\n"):
        assert patterns.get("cl100k").pretokens(document) == strict.findall(document)


@settings(max_examples=FUZZ or 300, deadline=None)
@given(TEXTS, st.sampled_from(NAMED))
def test_named_patterns_cover_every_character(text, name):
    for document in split_specials(text):
        pieces = patterns.get(name).pretokens(document)
        assert "".join(pieces) == document and all(pieces)
        assert pieces == pretokens(document, name)


# --- the safe-boundary facts (see the docstring of cs336_basics/text/patterns.py) --------------------------


@settings(max_examples=FUZZ or 400, deadline=None)
@given(TEXTS, st.sampled_from(NAMED))
def test_chunks_pretokenize_like_the_whole_text(text, name):
    pretokenizer = patterns.get(name)
    for document in split_specials(text):
        chunks = pretokenizer.chunks(document)
        assert "".join(chunks) == document and all(chunks)
        assert [p for c in chunks for p in pretokenizer.chunk_pretokens(c)] == pretokenizer.pretokens(document)


@settings(max_examples=FUZZ or 300, deadline=None)
@given(TEXTS, st.sampled_from(NAMED))
def test_a_pretoken_alone_is_one_pretoken(text, name):
    # The encoder caches chunks and pre-tokens in one dict, which needs this.
    pretokenizer = patterns.get(name)
    for document in split_specials(text):
        for piece in pretokenizer.pretokens(document):
            assert pretokenizer.pretokens(piece) == [piece] == pretokenizer.chunk_pretokens(piece)


# --- encoding with each pattern -----------------------------------------------------------------------


def _generated_corpus(seed: int, size: int) -> str:
    """Text over the characters the patterns treat specially, so that a vocabulary trained on it
    without pre-tokenization has merges across every kind of boundary."""
    rng = random.Random(seed)
    words = ["the", "The", "cat", "CAT", "sat", "éte", "ǅa", "ʰb", "中文", "e\u0301", "12", "345", "٣", "it's",
             "IT'S", "we'll", "x/y", "a.", "b!", "—", "😀", "$1"]
    spaces = [" ", " ", " ", "  ", "\n", "\n\n", "\r\n", "\t", "\u00a0", " \n", ".\n", "\u3000"]
    out = []
    length = 0
    while length < size:
        out += [rng.choice(words), rng.choice(spaces)]
        if rng.random() < 0.02:
            out.append(EOT)
        length += len(out[-1]) + len(out[-2])
    return "".join(out)


@pytest.fixture(scope="module")
def crossing_vocab():
    """A vocabulary trained with no pre-tokenization: its merges join across pre-token boundaries,
    so a boundary placed differently from tiktoken's shows up as different ids."""
    return train_bpe_reference(_generated_corpus(0, 3000), 700, [EOT], pattern="none")


@pytest.fixture(scope="module")
def english_vocab():
    return run_train_bpe(FIXTURES_PATH / "english.txt", 1000, [EOT])


@settings(max_examples=FUZZ or 150, deadline=None)
@given(TEXTS, st.sampled_from(NAMED))
def test_ids_equal_tiktoken_with_the_same_pattern(crossing_vocab, english_vocab, text, name):
    for vocab, merges in (crossing_vocab, english_vocab):
        tok = Tokenizer(vocab, merges, [EOT], pattern=name)
        enc = tiktoken_for(vocab, [EOT], patterns.regex_string(name))
        assert tok.encode(text) == enc.encode(text, allowed_special="all")


@settings(max_examples=FUZZ or 200, deadline=None)
@given(TEXTS, st.sampled_from([*NAMED, "none", CUSTOM]))
def test_ids_equal_the_reference_encoder(crossing_vocab, text, name):
    vocab, merges = crossing_vocab
    tok = Tokenizer(vocab, merges, [EOT], pattern=name)
    assert tok.encode(text) == reference_encode(text, vocab, merges, [EOT], name)
    assert tok.decode(tok.encode(text)) == text


@settings(max_examples=FUZZ or 100, deadline=None)
@given(TEXTS, st.lists(st.integers(0, 60), max_size=6), st.sampled_from([*NAMED, "none", CUSTOM]))
def test_encode_iterable_equals_encode(crossing_vocab, text, cuts, name):
    vocab, merges = crossing_vocab
    tok = Tokenizer(vocab, merges, [EOT], pattern=name)
    bounds = sorted({min(c, len(text)) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)])]
    assert list(tok.encode_iterable(pieces)) == tok.encode(text)


def test_encode_iterable_cuts_with_each_pattern(crossing_vocab):
    # Long text streamed line by line is cut (at the pattern's boundaries or special tokens) and equals encode.
    vocab, merges = crossing_vocab
    text = _generated_corpus(1, 60_000)
    for name in [*NAMED, "none", CUSTOM]:
        tok = Tokenizer(vocab, merges, [EOT], pattern=name)
        assert list(tok.encode_iterable(text.splitlines(keepends=True))) == tok.encode(text), name


@pytest.mark.parametrize("name", ["cl100k", "o200k"])
def test_encode_iterable_never_cuts_between_punctuation_and_newline(crossing_vocab, name):
    # Text whose only whitespace follows punctuation: there is no boundary, only special tokens.
    vocab, merges = crossing_vocab
    tok = Tokenizer(vocab, merges, [EOT], pattern=name)
    assert len(tok.encode("a.\n")) == 2  # ".\n" is one token, so a cut inside it would show
    text = "the.\n" * 2000 + EOT + "cat!\r\n" * 2000
    pieces = [text[i : i + 1000] for i in range(0, len(text), 1000)]
    assert list(tok.encode_iterable(pieces)) == tok.encode(text)


def test_long_sequences_equal_the_reference_encoder(crossing_vocab):
    # Pieces longer than 64 tokens take the heap path of `encoder.bpe`.
    vocab, merges = crossing_vocab
    text = _generated_corpus(2, 5000).replace(EOT, "")
    tok = Tokenizer(vocab, merges, pattern="none")
    assert tok.encode(text) == reference_encode(text, vocab, merges, [], "none")
    for long in ["a" * 1000, "ab" * 700, " " * 500, "12" * 300]:
        for name in ["gpt2", "none"]:
            assert Tokenizer(vocab, merges, pattern=name).encode(long) == reference_encode(long, vocab, merges, [], name)


# --- training with each pattern -------------------------------------------------------------------------

ALL = [*NAMED, "none", CUSTOM]


def train_text(directory, text: str, vocab_size: int, specials: list[str], pattern: str, **options):
    path = pathlib.Path(directory) / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    return train_bpe(path, vocab_size, specials, pattern=pattern, **options)


@settings(max_examples=FUZZ or 150, deadline=None)
@given(
    st.lists(PIECES, max_size=120).map("".join),
    st.integers(256, 330),
    st.sampled_from([[], [EOT]]),
    st.sampled_from(ALL),
    st.sampled_from([None, 1, 7, 40]),
)
def test_training_equals_the_reference(text, vocab_size, specials, name, piece_size):
    vocab_size += len(specials)
    with tempfile.TemporaryDirectory() as directory:
        got = train_text(directory, text, vocab_size, specials, name, num_workers=1, piece_size=piece_size)
    assert got == train_bpe_reference(text, vocab_size, specials, name)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("fixture, vocab_size", [("english", 400), ("emoji_chat", 350)])
def test_training_on_fixtures_equals_the_reference_for_any_workers(tmp_path, name, fixture, vocab_size):
    text = (FIXTURES_PATH / f"{fixture}.txt").read_bytes().decode("utf-8")[:6000]
    expected = train_bpe_reference(text, vocab_size, [EOT], name)
    for workers, piece_size in [(1, None), (2, 500), (3, 97)]:
        got = train_text(tmp_path, text, vocab_size, [EOT], name, num_workers=workers, piece_size=piece_size)
        assert got == expected, (workers, piece_size)


@settings(max_examples=FUZZ or 100, deadline=None)
@given(st.lists(PIECES, max_size=80).map("".join), st.sampled_from([1, 2]))
def test_long_words_merge_like_short_ones(text, num_shards):
    # Every word of more than one token is a long word (`long_words.LongWords`, threshold 1), in 1 or 2 shards.
    counts = {}
    for document in split_specials(text):
        for piece in patterns.get("o200k").pretokens(document) + [document]:
            counts[piece.encode("utf-8")] = counts.get(piece.encode("utf-8"), 0) + 1
    expected_log: list = []
    expected = merge.train_merges(counts, 60, merge_log=expected_log)
    saved = merge._LONG
    merge._LONG = 1
    try:
        log: list = []
        assert merge.train_merges(counts, 60, num_shards=num_shards, merge_log=log) == expected
        assert log == expected_log  # the counts, and how much each merge shrank the corpus
    finally:
        merge._LONG = saved


def test_train_bpe_validates_the_pattern_before_reading(tmp_path):
    with pytest.raises(ValueError, match="unknown pattern name 'gtp2'; the known names are gpt2"):
        train_bpe(tmp_path / "missing.txt", 300, [], pattern="gtp2")
    path = tmp_path / "corpus.txt"
    path.write_text("abc def!", encoding="utf-8")
    with pytest.raises(ValueError, match=r"pattern '\[a-z\]\+\| ' leaves '!' unmatched at character offset 7"):
        train_bpe(path, 300, [], pattern="[a-z]+| ")


# --- safe cuts in files, for each pattern ---------------------------------------------------------------


@settings(max_examples=FUZZ or 300, deadline=None)
@given(TEXTS, st.sampled_from([[], [EOT], [EOT, EOT + EOT, "|"]]), st.sampled_from(ALL))
def test_cutting_at_safe_cuts_changes_no_pretoken(text, specials, name):
    data = text.encode("utf-8")
    boundary = patterns.get(name).safe_cut_bytes
    special_bytes = [s.encode() for s in specials]
    # Every safe cut in the text: the first one at or after each offset.
    cuts = sorted({find_safe_cut(io.BytesIO(data), t, len(data), special_bytes, boundary) for t in range(len(data))})

    def pieces(t: str) -> list[str]:
        return [p for d in split_documents(t, specials) for p in pretokens(d, name)]

    whole = pieces(text)
    for bounds in [[0, c, len(data)] for c in cuts] + [[0, *cuts, len(data)]]:
        parts = [data[a:b].decode("utf-8") for a, b in zip(bounds, bounds[1:])]
        assert [p for part in parts for p in pieces(part)] == whole, bounds


def test_patterns_without_a_boundary_cut_only_at_special_tokens():
    data = b"one two three\nfour five " * 20 + EOT.encode() + b"six seven"
    for name in ["none", CUSTOM]:
        boundary = patterns.get(name).safe_cut_bytes
        assert find_safe_cut(io.BytesIO(data), 1, len(data), [], boundary) == len(data)
        assert find_safe_cut(io.BytesIO(data), 1, len(data), [EOT.encode()], boundary) == data.index(EOT.encode())
    for name in NAMED:  # these cut right after the first word
        assert find_safe_cut(io.BytesIO(data), 1, len(data), [], patterns.get(name).safe_cut_bytes) == 3


# --- "none" on documents of megabytes ---------------------------------------------------------------------


@pytest.mark.slow
def test_none_trains_and_encodes_a_megabyte_document_in_seconds(tmp_path):
    text = _generated_corpus(3, 1_000_000).replace(EOT, " ")
    path = tmp_path / "one-document.txt"
    path.write_bytes(text.encode("utf-8"))
    started = time.perf_counter()
    vocab, merges = train_bpe(path, 1256, [], pattern="none")
    trained = time.perf_counter()
    tok = Tokenizer(vocab, merges, pattern="none")
    ids = tok.encode(text)
    encoded = time.perf_counter()
    print(f"\n'none' on {len(text):,} characters: training {trained - started:.2f} s, encoding {encoded - trained:.2f} s")
    assert len(merges) == 1000 and tok.decode(ids) == text
    assert trained - started < 30 and encoded - trained < 30  # quadratic time would take many minutes


# --- the command line -----------------------------------------------------------------------------------


def test_cli_trains_and_encodes_with_a_pattern(tmp_path, capsys):
    from cs336_basics.cli import main

    text = _generated_corpus(4, 20_000)
    corpus_path = tmp_path / "corpus.txt"
    corpus_path.write_bytes(text.encode("utf-8"))
    out = tmp_path / "tok"
    assert main(["train", str(corpus_path), "--vocab-size", "400", "--out", str(out), "--pattern", "o200k_base", "--quiet"]) == 0
    assert "pattern o200k" in capsys.readouterr().out
    tok = Tokenizer.from_files(out / "vocab.json", out / "merges.txt", [EOT], pattern="o200k")
    assert (tok.vocab, tok.merges) == train_bpe(corpus_path, 400, [EOT], pattern="o200k")
    assert main(["encode", "--tokenizer", str(out), "--pattern", "o200k", str(corpus_path), "--out", str(tmp_path / "a.npy"),
                 "--quiet", "--workers", "2"]) == 0
    import numpy as np

    assert np.load(tmp_path / "a.npy").tolist() == tok.encode(text)


@pytest.mark.parametrize("pattern, words", [("o200", "unknown pattern name 'o200'"), ("(", "not a valid regex"),
                                            ("[a-z]+", "unmatched at character offset")])
def test_cli_bad_pattern_is_one_line(tmp_path, capsys, pattern, words):
    from cs336_basics.cli import main

    corpus_path = tmp_path / "corpus.txt"
    corpus_path.write_text("hello world", encoding="utf-8")
    assert main(["train", str(corpus_path), "--vocab-size", "300", "--out", str(tmp_path / "t"), "--pattern", pattern,
                 "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bpe: ") and words in err and err.count("\n") == 1


ASCII_TEXTS = st.text(st.sampled_from([*"aZsStTdDmMlLvVeErR019'’!./-$ \t\n\r\x0b\x0c\x1c\x00"]), max_size=40) | st.lists(
    st.sampled_from(["'s", "'LL", "'Ve", "don't", "I'M", "HTTPServer", "x/y", ".\n", "!\r\n", "123456", "  ", " \n "]),
    max_size=12,
).map("".join)


@settings(max_examples=FUZZ or 500, deadline=None)
@given(ASCII_TEXTS, st.sampled_from(NAMED))
def test_ascii_fast_regexes_equal_the_patterns_on_ascii_text(text, name):
    assert patterns.ASCII_RES[name].findall(text) == patterns.get(name).pretokens(text)
