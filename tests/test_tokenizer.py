"""The tokenizer: parity with tiktoken (GPT-2's vocabulary and our own), the slow reference encoder
as oracle, special tokens, streaming, decoding, files, and memory."""

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer
from cs336_basics.encode import streaming
from cs336_basics.text import patterns
from tests.adapters import get_tokenizer, run_train_bpe
from tests.common import OVERLAP_PIECES, OVERLAPPING_SPECIALS, FIXTURES_PATH, gpt2_files, tiktoken_for, tiktoken_gpt2
from tests.reference import reference_encode

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    encoder_json, vocab_bpe = gpt2_files()
    return Tokenizer.from_files(encoder_json, vocab_bpe, special_tokens=[EOT])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tokenizer trained by us on the English fixture, with two overlapping special tokens."""
    specials = [EOT, EOT + EOT]
    vocab, merges = run_train_bpe(FIXTURES_PATH / "english.txt", 1000, [EOT])
    return vocab, merges, specials


SAMPLES = [
    "",
    "s",
    "🙃",
    "Hello, how are you?",
    "Héllo hôw are ü? 🙃 Ça va, naïve café!",
    f"Hello{EOT}{EOT}world{EOT} again {EOT}",
    f"{EOT}",
    "Die Bücher über Straßenbäume waren größer, als Jürgen dachte.",
    "床前明月光，疑是地上霜。举头望明月，低头思故乡。",
    "   leading spaces and trailing   ",
    "\t\ttabs\tinside\t\t",
    "\n\nnewlines\n\n\nin the middle\n",
    " \n \n\t \u00a0\u3000 mixed\x1c whitespace \r\n\r\n",
    "I'm sure you're right, they've said we'll see what she'd do; it's fine. DON'T SHOUT'S",
    "In 2024 prices rose 3.5% to $1,234,567.89 (12345678901234567890).",
    "a" * 300,
    "ab" * 200,
    "👩‍💻🇩🇪🎉🎉 x",
]

RICH = st.lists(
    st.sampled_from(
        list("abcxyzABC '’-.,!?0123456789\t\n\r éüßçЖж中文日本😀👩‍💻🇩")
        + ["\u00a0", "\u3000", "\u2028", "\x1c", "\x00", "\U0010ffff", "\u0301", "'s", "'ll", " the", EOT]
    )
    # Not "Cn": characters unassigned in this Python's Unicode may be letters to `regex` but not to
    # tiktoken, whose tables are older; there the two specifications disagree.
    | st.characters(exclude_categories=["Cs", "Cn"]),
    max_size=60,
).map("".join)


# --- parity with tiktoken on GPT-2's vocabulary ----------------------------------------------------


@pytest.mark.parametrize("text", SAMPLES)
def test_gpt2_matches_tiktoken(gpt2, text):
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2().encode(text, allowed_special={EOT})
    assert gpt2.decode(ids) == text


@settings(max_examples=300, deadline=None)
@given(RICH)
def test_gpt2_matches_tiktoken_on_generated_text(gpt2, text):
    assert gpt2.encode(text) == tiktoken_gpt2().encode(text, allowed_special={EOT})


def test_gpt2_fixtures_match_tiktoken(gpt2):
    for name in ["english", "german", "chinese", "emoji_chat", "code"]:
        text = (FIXTURES_PATH / f"{name}.txt").read_bytes().decode("utf-8")
        assert gpt2.encode(text) == tiktoken_gpt2().encode(text, allowed_special={EOT}), name


# --- parity with tiktoken and with the slow reference on vocabularies we trained --------------------


@settings(max_examples=200, deadline=None)
@given(RICH)
def test_trained_vocab_matches_tiktoken_and_reference(trained, text):
    vocab, merges, specials = trained
    tokenizer = get_tokenizer(vocab, merges, specials)
    ids = tokenizer.encode(text)
    assert ids == tiktoken_for(tokenizer.vocab, specials).encode(text, allowed_special=set(specials))
    assert ids == reference_encode(text, tokenizer.vocab, merges, specials)
    assert tokenizer.decode(ids) == text


# --- special tokens --------------------------------------------------------------------------------


def test_longest_special_token_wins(trained):
    vocab, merges, specials = trained
    tokenizer = get_tokenizer(vocab, merges, specials)
    # Training put EOT at 999; EOT + EOT is missing from the vocab, so it is appended at 1000. Single
    # letters are their byte values.
    assert tokenizer.vocab[999] == EOT.encode() and tokenizer.vocab[1000] == (EOT + EOT).encode()
    text = f"a{EOT}{EOT}b{EOT}c{EOT}{EOT}{EOT}"
    assert tokenizer.encode(text) == [ord("a"), 1000, ord("b"), 999, ord("c"), 1000, 999]
    # Listed shortest first, they are still matched longest first.
    assert get_tokenizer(vocab, merges, [EOT, EOT + EOT]).encode(EOT * 3) == [1000, 999]


def test_special_tokens_missing_from_vocab_are_appended(trained):
    vocab, merges, _ = trained
    tokenizer = get_tokenizer(vocab, merges, ["<new>", EOT])
    assert tokenizer.encode("<new>") == [len(vocab)]
    assert tokenizer.encode(EOT) == [999]


@pytest.mark.slow
def test_without_special_tokens_they_are_ordinary_text(gpt2):
    encoder_json, vocab_bpe = gpt2_files()
    plain = Tokenizer.from_files(encoder_json, vocab_bpe)
    assert plain.encode(EOT) == tiktoken_gpt2().encode(EOT, disallowed_special=())
    assert 50256 not in plain.encode(EOT)


# --- the encode cache ------------------------------------------------------------------------------


@pytest.mark.parametrize("cache_size", [1, 3, 50])
def test_small_caches_roll_over_and_change_nothing(trained, cache_size):
    vocab, merges, specials = trained
    tokenizer = Tokenizer(vocab, merges, specials, cache_size=cache_size)
    text = (FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8")[:20_000]
    expected = tiktoken_for(tokenizer.vocab, specials).encode(text, allowed_special=set(specials))
    assert tokenizer.encode(text) == expected
    assert tokenizer.encode(text) == expected  # again, now partly served from the cache's two generations
    cache = tokenizer.cache
    assert 0 < len(cache) <= cache_size and 0 < len(cache._old) <= cache_size


def test_cache_keeps_what_is_used_and_drops_what_is_not(trained):
    vocab, merges, specials = trained
    tokenizer = Tokenizer(vocab, merges, specials, cache_size=2)
    cache = tokenizer.cache
    tokenizer.encode(" the cat")  # two chunks: " the", " cat"
    assert set(cache) == {" the", " cat"} and not cache._old
    tokenizer.encode(" dog")  # full: the two become the old generation
    assert set(cache) == {" dog"} and set(cache._old) == {" the", " cat"}
    tokenizer.encode(" the")  # found in the old generation, moved to the new
    assert set(cache) == {" dog", " the"}
    tokenizer.encode(" owl")  # full again: " cat", unused for a generation, is dropped
    assert set(cache) == {" owl"} and set(cache._old) == {" dog", " the"}
    assert cache._old[" the"] == tokenizer.encode_packed(" the")  # the ids, packed


# --- encode_iterable -------------------------------------------------------------------------------


@st.composite
def cut_texts(draw):
    text = draw(RICH) + draw(st.sampled_from(["", EOT, EOT + EOT, "  \n", "word"])) + draw(RICH)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    return text, pieces


@settings(max_examples=300, deadline=None)
@given(cut_texts())
def test_encode_iterable_equals_encode_for_any_cuts(trained, case):
    vocab, merges, specials = trained
    tokenizer = get_tokenizer(vocab, merges, specials)
    text, pieces = case
    assert list(tokenizer.encode_iterable(iter(pieces))) == tokenizer.encode(text)


@st.composite
def long_cut_texts(draw):
    """Texts past encode_iterable's 4,096-character buffer, with overlapping special tokens, in pieces."""
    specials = draw(st.sampled_from(OVERLAPPING_SPECIALS))
    unit = "".join(draw(st.lists(st.sampled_from(OVERLAP_PIECES + specials) | RICH, min_size=1, max_size=30))) or " "
    text = unit * (4500 // len(unit) + 1)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=30)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    return specials, text, pieces


@settings(max_examples=80, deadline=None)
@given(long_cut_texts())
def test_encode_iterable_cuts_long_text_beside_overlapping_specials(trained, case):
    vocab, merges, _ = trained
    specials, text, pieces = case
    tokenizer = get_tokenizer(vocab, merges, specials)
    assert list(tokenizer.encode_iterable(iter(pieces))) == tokenizer.encode(text)


@pytest.mark.parametrize(
    "specials, unit",
    [
        (["<<x>>", "<x>>"], "ab <<x>>cd "),  # a token starting one character before a candidate cut
        (["[aa]", "]bb["], "xx [aa]bb[yy "),  # a token ending one character after it
        ([EOT, EOT + EOT], f"word {EOT}{EOT}x "),
    ],
)
def test_encode_iterable_never_cuts_inside_a_special_token(trained, specials, unit):
    vocab, merges, _ = trained
    tokenizer = get_tokenizer(vocab, merges, specials)
    text = unit * (9000 // len(unit))
    expected = reference_encode(text, tokenizer.vocab, merges, specials)
    for size in (1, 7, len(unit), 4096, 5000):
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        assert list(tokenizer.encode_iterable(pieces)) == expected, size


def test_encode_iterable_over_a_file(gpt2):
    with open(FIXTURES_PATH / "english.txt", encoding="utf-8", newline="") as f:
        ids = list(gpt2.encode_iterable(f))
    text = (FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8")
    assert ids == tiktoken_gpt2().encode(text, allowed_special={EOT})


@pytest.fixture(scope="module")
def five_mb_file(tmp_path_factory):
    from tests.make_fixtures import english_text

    path = tmp_path_factory.mktemp("big") / "five_mb.txt"
    path.write_text(english_text(5_000_000, seed=11), encoding="utf-8")
    return path


# Run in a fresh interpreter, so that memory freed by earlier tests cannot serve as slack under the cap.
_MEMORY_PROBE = """
import os, resource, sys
import psutil
from cs336_basics.bpe import Tokenizer

def fold(ids):  # a count and a position-weighted checksum, so the ids need not be kept
    n = total = 0
    for i in ids:
        n += 1
        total = (total * 31 + i) % 1_000_000_007
    return n, total

mode, vocab_json, merges_txt, path = sys.argv[1:]
tokenizer = Tokenizer.from_files(vocab_json, merges_txt, ["<|endoftext|>"])
with open(path, encoding="utf-8") as f:
    cap = psutil.Process(os.getpid()).memory_info().rss + 1_000_000  # CS336's cap: RSS + 1 MB
    resource.setrlimit(resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))
    try:
        result = fold(tokenizer.encode_iterable(f) if mode == "iterable" else tokenizer.encode(f.read()))
    except MemoryError:
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        import traceback
        traceback.print_exc()  # where the memory ran out, for the assertion's message
        sys.exit(3)
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print(*result)
"""


def _fold(ids) -> tuple[int, int]:
    n = total = 0
    for i in ids:
        n += 1
        total = (total * 31 + i) % 1_000_000_007
    return n, total


def _encode_under_cap(mode: str, path) -> subprocess.CompletedProcess:
    encoder_json, vocab_bpe = gpt2_files()
    return subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, mode, str(encoder_json), str(vocab_bpe), str(path)],
        capture_output=True, text=True, timeout=300,
    )


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")
def test_encode_iterable_memory_usage(five_mb_file):
    result = _encode_under_cap("iterable", five_mb_file)
    assert result.returncode == 0, result.stderr
    expected = _fold(tiktoken_gpt2().encode(five_mb_file.read_text(encoding="utf-8"), allowed_special={EOT}))
    assert tuple(map(int, result.stdout.split())) == expected


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")
@pytest.mark.xfail(reason="encoding the whole 5 MB text at once needs more than 1 MB", raises=MemoryError, strict=True)
def test_encode_memory_usage(five_mb_file):
    result = _encode_under_cap("whole", five_mb_file)
    if result.returncode == 3:
        raise MemoryError("the cap bites: encode of the whole text ran out of memory")
    assert result.returncode == 0, result.stderr


# --- decode ----------------------------------------------------------------------------------------


def test_decode_replaces_invalid_utf8(gpt2):
    ids = gpt2.encode("🙃")
    assert len(ids) > 1
    assert gpt2.decode(ids[:1]) == "\ufffd"
    assert gpt2.decode_bytes(ids) == "🙃".encode()


@pytest.mark.parametrize("bad", [-1, 50257, 10**9])
def test_decode_unknown_id_names_it(gpt2, bad):
    with pytest.raises(ValueError, match=str(bad)):
        gpt2.decode([1, 2, bad])


def test_decode_accepts_numpy_arrays(gpt2):
    import numpy as np

    ids = gpt2.encode("hello world")
    assert gpt2.decode(np.array(ids, dtype=np.uint16)) == "hello world"


# --- files -----------------------------------------------------------------------------------------


def test_save_then_load_gives_identical_ids(tmp_path, trained):
    vocab, merges, specials = trained
    # Add tokens that are not valid UTF-8 on their own, and bytes that need the byte table.
    tokenizer = get_tokenizer(vocab, merges, specials)
    tokenizer.save(tmp_path / "vocab.json", tmp_path / "merges.txt")
    loaded = Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", specials)
    assert loaded.vocab == tokenizer.vocab and loaded.merges == tokenizer.merges
    text = (FIXTURES_PATH / "emoji_chat.txt").read_bytes().decode("utf-8") + EOT + EOT + " \x00\xff"
    assert loaded.encode(text) == tokenizer.encode(text)


def test_gpt2_save_load_round_trip(tmp_path, gpt2):
    gpt2.save(tmp_path / "vocab.json", tmp_path / "merges.txt")
    encoder_json, vocab_bpe = gpt2_files()
    assert json.loads((tmp_path / "vocab.json").read_text("utf-8")) == json.loads(encoder_json.read_text("utf-8"))
    loaded = Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", [EOT])
    assert loaded.vocab == gpt2.vocab and loaded.merges == gpt2.merges


def _write(tmp_path, vocab_text: str, merges_text: str):
    (tmp_path / "vocab.json").write_text(vocab_text, encoding="utf-8")
    (tmp_path / "merges.txt").write_text(merges_text, encoding="utf-8")
    return tmp_path / "vocab.json", tmp_path / "merges.txt"


def _byte_vocab(extra: dict[str, int] | None = None) -> dict[str, int]:
    from tests.common import gpt2_bytes_to_unicode

    vocab = {c: b for b, c in gpt2_bytes_to_unicode().items()}
    vocab.update(extra or {})
    return vocab


@pytest.mark.parametrize(
    "vocab_text, merges_text, message",
    [
        ("{not json", "", r"vocab.json: malformed JSON at line 1"),
        ("[1, 2]", "", r"vocab.json: expected a JSON object"),
        (json.dumps(_byte_vocab({"ab": 1})), "", r"vocab.json: key 'ab' repeats id 1"),
        (json.dumps(_byte_vocab({"ab": "x"})), "", r"vocab.json: key 'ab' has id 'x'"),
        (json.dumps(_byte_vocab({"ab": 256})), "a b\nq z\n", r"merges.txt: line 2 merges 'q' and 'z', but the result 'qz' is not in"),
        (json.dumps(_byte_vocab({"ab": 256})), "a b c\n", r"merges.txt: line 1 must hold two tokens"),
        (json.dumps(_byte_vocab({"ab": 256})), "ab\n", r"merges.txt: line 1 must hold two tokens"),
    ],
)
def test_bad_files_name_file_and_place(tmp_path, vocab_text, merges_text, message):
    vocab_path, merges_path = _write(tmp_path, vocab_text, merges_text)
    with pytest.raises(ValueError, match=message):
        Tokenizer.from_files(vocab_path, merges_path)


def test_merge_naming_unknown_token(tmp_path):
    vocab_path, merges_path = _write(tmp_path, json.dumps(_byte_vocab({"ab": 256})), "#version: 0.2\na b\nab Ω\n")
    with pytest.raises(ValueError, match=r"merges.txt: line 3 names 'Ω'"):
        Tokenizer.from_files(vocab_path, merges_path)


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        Tokenizer.from_files(tmp_path / "nope.json", tmp_path / "merges.txt")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "th", "e", "ing", "ä", "ж", "中", "x"]), min_size=20, max_size=200).map("".join))
def test_long_pretokens_match_tiktoken(gpt2, word):
    # One pre-token of up to ~600 bytes: past the length where BPE switches to str.replace.
    for text in (word, " " + word):
        assert gpt2.encode(text) == tiktoken_gpt2().encode(text)


def test_merges_out_of_learning_order_are_refused():
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}
    with pytest.raises(ValueError, match=r"merge 1 .* uses b'ab' before any earlier merge makes it"):
        Tokenizer(vocab, [(b"ab", b"c"), (b"a", b"b")])


def test_merges_from_another_save_are_refused(tmp_path, trained):
    vocab, merges, specials = trained
    get_tokenizer(vocab, merges, specials).save(tmp_path / "vocab.json", tmp_path / "merges.txt")
    smaller = get_tokenizer({i: t for i, t in vocab.items() if i < 356}, merges[:100], specials)
    smaller.save(tmp_path / "vocab2.json", tmp_path / "merges2.txt")
    (tmp_path / "merges.txt").write_bytes((tmp_path / "merges2.txt").read_bytes())  # a half-finished save
    with pytest.raises(ValueError, match="merges.txt was written with another vocab.json"):
        Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", specials)


# --- surrogates: str that is not valid Unicode, encoded as tiktoken does -----------------------------

# Pairs (which stand for one character), lone halves, and halves in the wrong order.
SURROGATE_TEXT = st.lists(
    st.sampled_from(["\ud83d\ude00", "\ud83d", "\ude00", "\udce9", "\ud800\udc00", "\udbff\udfff", "\udfff\udbff"])
    | st.characters(categories=["Cs"])
    | RICH,
    max_size=20,
).map("".join)


@pytest.mark.parametrize(
    "text, fixed",
    [
        ("\ud83d\ude00", "😀"),
        ("a\udcffb", "a\ufffdb"),
        ("\ude00\ud83d", "\ufffd\ufffd"),
        ("\ud83d\ud83d\ude00 x", "\ufffd😀 x"),
        (f"\ud83d{EOT}\ude00", f"\ufffd{EOT}\ufffd"),  # a special token between the halves: no pair
    ],
)
def test_surrogates_are_fixed_as_tiktoken_does(gpt2, text, fixed):
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2().encode(text, allowed_special={EOT}) == gpt2.encode(fixed)
    assert gpt2.decode(ids) == fixed


@settings(max_examples=100, deadline=None)
@given(SURROGATE_TEXT)
def test_surrogates_match_tiktoken(gpt2, text):
    assert gpt2.encode(text) == tiktoken_gpt2().encode(text, allowed_special={EOT})


@pytest.fixture(scope="module")
def trained_with_tiktoken(trained):
    vocab, merges, specials = trained
    tokenizer = get_tokenizer(vocab, merges, specials)
    return tokenizer, tiktoken_for(tokenizer.vocab, specials), set(specials)


@settings(max_examples=60, deadline=None)
@given(SURROGATE_TEXT, st.lists(st.integers(0, 200), max_size=8))
def test_surrogates_in_encode_iterable_even_split_across_pieces(trained_with_tiktoken, text, cuts):
    tokenizer, tiktoken_encoding, allowed = trained_with_tiktoken
    text = text + "\ud83d\ude00 " * 5  # at least one pair, to be split by some cut below
    cuts = sorted({min(c, len(text)) for c in cuts} | {len(text) - 3})
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    assert list(tokenizer.encode_iterable(pieces)) == tiktoken_encoding.encode(text, allowed_special=allowed)
    long_text = text * (5000 // len(text) + 1)  # past the 4,096-character buffer, cut every 7 characters
    assert list(tokenizer.encode_iterable(long_text[i : i + 7] for i in range(0, len(long_text), 7))) == (
        tiktoken_encoding.encode(long_text, allowed_special=allowed)
    )


def test_fix_surrogates_returns_clean_text_itself():
    from cs336_basics.text.surrogates import fix_surrogates

    for text in ["plain ascii", "Grüße, 世界 😀", ""]:
        assert fix_surrogates(text) is text


def test_surrogate_pairs_can_make_a_special_token(trained):
    # Fixed first, "\ud83d\ude00 x" is the special token "😀 x", as tiktoken sees it; cutting it at its
    # space (a place where a cut between words would fall) would lose it.
    vocab, merges, _ = trained
    specials = ["😀 x"]
    tokenizer = get_tokenizer(vocab, merges, specials)
    text = "ab \ud83d\ude00 x cd " * 800
    expected = tiktoken_for(tokenizer.vocab, specials).encode(text, allowed_special=set(specials))
    assert tokenizer.encode(text) == expected
    assert list(tokenizer.encode_iterable(text[i : i + 5] for i in range(0, len(text), 5))) == expected


# --- where encode_iterable cuts: streaming.last_safe_cut against its definition ---------------------

WS = set(" \t\n\x0b\x0c\r\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {chr(c) for c in range(0x2000, 0x200B)}


def _is_safe_cut(text: str, c: int, specials: list[str], start: int = 0) -> bool:
    """A cut before a special token or between a word and a space (both after `start`), inside no
    special token."""
    word_then_space = start < c < len(text) and text[c - 1] not in WS and text[c] in WS
    spanned = any(text.startswith(s, i) and i + len(s) > c for s in specials for i in range(max(c - len(s) + 1, 0), c))
    return (word_then_space or any(text.startswith(s, c) for s in specials)) and not spanned


_TOKENIZERS: dict[tuple[str, ...], Tokenizer] = {}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([[], [EOT], ["|", "<|"], *OVERLAPPING_SPECIALS]), st.data())
def test_last_safe_cut_is_the_last_safe_cut(trained, specials, data):
    # With fewer than 16 special tokens in the text, every candidate is tried, so the answer is exact.
    key = tuple(specials)
    if key not in _TOKENIZERS:
        vocab, merges, _ = trained
        _TOKENIZERS[key] = get_tokenizer(vocab, merges, specials)
    tokenizer = _TOKENIZERS[key]
    pieces = st.sampled_from(OVERLAP_PIECES + ["é", "\u3000", "\t", "ab cd", "|", "\x1c"] + specials * 2)
    text = "".join(data.draw(st.lists(pieces, max_size=12)))
    start = data.draw(st.integers(0, len(text)))
    limit = len(text) - max(max(map(len, specials), default=0), 1)
    candidates = range(max(start, 1), limit + 1) if limit > start else ()
    expected = max((c for c in candidates if _is_safe_cut(text, c, specials, start)), default=0)
    cut, next_start = streaming.last_safe_cut(
        text, start, patterns.get(tokenizer.pattern).last_boundary, tokenizer.cut_tokens, tokenizer.special_tokens
    )
    assert next_start == max(limit, start)
    assert cut == expected or cut == 0 == expected - start  # a cut at `start` itself may be passed over


def test_encode_iterable_holds_little_text(trained):
    # Ids come out while the input is read: the text read but not yet encoded stays near the
    # 4,096-character buffer, not growing with the input.
    vocab, merges, specials = trained
    tokenizer = get_tokenizer(vocab, merges, specials)
    read = 0

    def pieces():
        nonlocal read
        for n in range(3000):
            piece = f"word{n % 7} more{EOT} " if n % 5 else "  x\n"
            read += len(piece)
            yield piece

    encoded = 0
    lag = 0
    for token_id in tokenizer.encode_iterable(pieces()):
        encoded += len(tokenizer.vocab[token_id])  # ASCII text: one byte per character
        lag = max(lag, read - encoded)
    assert encoded == read and lag < 4096 + 40


def test_cache_serves_the_old_generation_without_bpe(trained):
    vocab, merges, specials = trained
    tokenizer = Tokenizer(vocab, merges, specials, cache_size=2)
    expected = tokenizer.encode(" the cat")
    tokenizer.encode(" dog")  # " the" and " cat" are now the old generation
    table, tokenizer.cache._table = tokenizer.cache._table, None  # BPE would fail now
    assert tokenizer.encode(" the cat") == expected
    tokenizer.cache._table = table


def test_cache_keeps_keys_up_to_64_characters(trained):
    vocab, merges, specials = trained
    tokenizer = Tokenizer(vocab, merges, specials)
    for n, kept in [(64, True), (65, False)]:
        word = " " + "ab" * 40
        word = word[:n]
        tokenizer.encode(word)
        assert (word in tokenizer.cache) == kept


def test_a_definition_travels_whole_to_workers_and_into_dataset_identities():
    """Added-token flags and the post-processor are not in the pattern (see `formats.definition`):
    the state workers rebuild a tokenizer from, and a dataset's tokenizer identity, carry them."""
    from cs336_basics.datasets.writer import tokenizer_identity
    from cs336_basics.encode.token_arrays import tokenizer_state
    from cs336_basics.formats.definition import TokenizerDefinition
    from cs336_basics.text import pipelines

    post = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<a>", "type_id": 0}},
                                                     {"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {"<a>": {"id": "<a>", "ids": [256], "tokens": ["<a>"]}}}
    vocab = {i: bytes([i]) for i in range(256)}
    spec = pipelines.make_spec(["NFC"], [{"byte_level": True}])
    tok = Tokenizer.from_definition(TokenizerDefinition(vocab, [], ["<a>"], spec, {"<a>": (True, True)}, post))
    plain = Tokenizer(vocab, [], ["<a>"], pattern=spec)
    assert tok.encode("x<a>", add_special_tokens=True) == [256, ord("x"), 256]
    key, (cls, *data, options) = tokenizer_state(tok)
    rebuilt = cls(*data, **options)
    assert (rebuilt.added_tokens, rebuilt.post_processor) == ({"<a>": (True, True)}, post)
    assert rebuilt.encode("x<a>", add_special_tokens=True) == [256, ord("x"), 256]
    assert key != tokenizer_state(plain)[0]
    assert tokenizer_identity(tok)["sha256"] != tokenizer_identity(plain)["sha256"]
    assert tokenizer_identity(tok)["pattern"] == tokenizer_identity(plain)["pattern"] == spec
