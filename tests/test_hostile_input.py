"""Bad, extreme and hostile input, through the public API and the `bpe` command.

Every case asserts an outcome: the exception type and a message naming the problem, or the exact
correct result (the oracles are `tests/reference.py` and tiktoken). Sections:

- files: vocab.json and merges.txt that are malformed or inconsistent;
- objects: a Tokenizer built from bad in-memory vocabularies and merges;
- special tokens: empty, duplicated, regex metacharacters, whitespace, overlapping, single bytes;
- vocab_size and training input: out of range, empty, only specials, not UTF-8, NUL bytes, 20 MB line;
- encode and decode arguments: non-strings, lone surrogates, ids that are negative, large or not ints;
- the `bpe` command: one line on stderr starting with `bpe: `, an exit status, no output file;
- speed: 1 MB pre-tokens (one repeated character, a two-character cycle) take seconds, not hours;
- atomic output: runs killed by SIGINT / SIGKILL (in subprocesses) leave old or new files, never a mix;
- no code execution when loading: no pickle, no eval, no file read besides the two named;
- fuzzing with hypothesis (`BPE_FUZZ_EXAMPLES` raises the number of examples, default 2000).

Run `uv run pytest tests/test_hostile_input.py -s` to see the measured times.
"""

import ast
import json
import os
import pickle
import random
import re
import resource
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import report
from cs336_basics.bpe import Tokenizer, train_bpe
from cs336_basics.cli import main as bpe_main
from cs336_basics.train.merge_log import read_merge_log
from tests.common import FIXTURES_PATH, gpt2_bytes_to_unicode, gpt2_files, tiktoken_for, tiktoken_gpt2
from tests.kill_target import paused_at, release
from cs336_basics.train.reference import train_bpe_reference
from tests.reference import reference_encode

ROOT = Path(__file__).resolve().parent.parent
KILL_TARGET = Path(__file__).resolve().parent / "kill_target.py"
EOT = "<|endoftext|>"
TIME_LIMIT = 20.0  # seconds for 1 MB of pathological input; a linear-time implementation needs about 1
FUZZ_EXAMPLES = int(os.environ.get("BPE_FUZZ_EXAMPLES", 2000))


# --- helpers ---------------------------------------------------------------------------------------


def byte_vocab() -> dict[str, int]:
    """The 256 single bytes in GPT-2 spelling, each at its byte value."""
    return {c: b for b, c in gpt2_bytes_to_unicode().items()}


BYTES_JSON = json.dumps(byte_vocab(), ensure_ascii=False)
BYTE_VOCAB = {i: bytes([i]) for i in range(256)}


def with_entries(*entries: str) -> str:
    """BYTES_JSON with raw JSON members appended, so that duplicate keys or NaN can be written."""
    return BYTES_JSON[:-1] + "".join(", " + e for e in entries) + "}"


def write_pair(folder: Path, vocab: str | bytes, merges: str | bytes) -> tuple[Path, Path]:
    vocab_path, merges_path = folder / "vocab.json", folder / "merges.txt"
    vocab_path.write_bytes(vocab.encode("utf-8") if isinstance(vocab, str) else vocab)
    merges_path.write_bytes(merges.encode("utf-8") if isinstance(merges, str) else merges)
    return vocab_path, merges_path


def train_text(tmp_path: Path, text: str | bytes, vocab_size, special_tokens, **kwargs):
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return train_bpe(path, vocab_size, special_tokens, **kwargs)


@contextmanager
def time_limit(seconds: float):
    """Raise TimeoutError in the main thread when the block runs longer than `seconds`."""

    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def address_space_cap(extra_bytes: int = 1 << 30):
    """Cap virtual memory at the current size + extra_bytes, so a giant allocation fails at once
    (as MemoryError) instead of paging the machine to death where memory is overcommitted."""
    previous = resource.getrlimit(resource.RLIMIT_AS)
    cap = psutil.Process(os.getpid()).memory_info().vms + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (cap, previous[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, previous)


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    encoder_json, vocab_bpe = gpt2_files()
    return Tokenizer.from_files(encoder_json, vocab_bpe, special_tokens=[EOT])


# Special tokens for the trained tokenizer: one a prefix of another, and one made of whitespace.
TRAINED_SPECIALS = [EOT, EOT + EOT, "\n\n"]


@pytest.fixture(scope="module")
def trained() -> Tokenizer:
    vocab, merges = train_bpe(FIXTURES_PATH / "english.txt", 800, TRAINED_SPECIALS)
    return Tokenizer(vocab, merges, TRAINED_SPECIALS)


# --- files: vocab.json -----------------------------------------------------------------------------

BAD_VOCAB_FILES = [
    ("malformed", "{not json", r"vocab\.json: malformed JSON at line 1"),
    ("malformed on line 3", '{\n"a": 97,\n"b" 98\n}', r"vocab\.json: malformed JSON at line 3"),
    ("empty file", "", r"vocab\.json: malformed JSON at line 1"),
    ("truncated", BYTES_JSON[: len(BYTES_JSON) // 2], r"vocab\.json: malformed JSON"),
    ("a list", "[1, 2]", r"vocab\.json: expected a JSON object.* list"),
    ("a string", '"abc"', r"vocab\.json: expected a JSON object.* str"),
    ("null", "null", r"vocab\.json: expected a JSON object"),
    ("a number", "256", r"vocab\.json: expected a JSON object.* int"),
    ("string id", with_entries('"ab": "256"'), r"vocab\.json: key 'ab' has id '256'"),
    ("float id", with_entries('"ab": 256.0'), r"vocab\.json: key 'ab' has id 256\.0"),
    ("boolean id", with_entries('"ab": true'), r"vocab\.json: key 'ab' has id True"),
    ("null id", with_entries('"ab": null'), r"vocab\.json: key 'ab' has id None"),
    ("NaN id", with_entries('"ab": NaN'), r"vocab\.json: key 'ab' has id nan"),
    ("object id", with_entries('"ab": {"id": 256}'), r"vocab\.json: key 'ab' has id \{"),
    ("negative id", with_entries('"ab": -1'), r"vocab\.json: key 'ab' has id -1"),
    ("duplicate id", with_entries('"ab": 65'), r"vocab\.json: key 'ab' repeats id 65"),
    # The same key twice: json.loads would silently keep the last one.
    ("duplicate key", with_entries('"ab": 256', '"ab": 257'), r"vocab\.json.*'ab'"),
    # 'Ω' is not spelled through the byte table, so it is UTF-8 text: the bytes that 'Î©' spells.
    ("two spellings of the same bytes", with_entries('"Î©": 256', '"Ω": 257'), r"keys 'Î©' and 'Ω' stand for the same bytes"),
    ("a single byte missing", json.dumps({k: v for k, v in byte_vocab().items() if v != 65}), r"vocab\.json.*single byte b'A'"),
]


@pytest.mark.parametrize("vocab_text, message", [c[1:] for c in BAD_VOCAB_FILES], ids=[c[0] for c in BAD_VOCAB_FILES])
def test_bad_vocab_file(tmp_path, vocab_text, message):
    with pytest.raises(ValueError, match=message):
        Tokenizer.from_files(*write_pair(tmp_path, vocab_text, ""))


@pytest.mark.parametrize(
    "raw, offset",
    [(b'{"a\xff": 1}', 3), (BYTES_JSON.encode("utf-16"), 0), (b'{"caf\xe9": 1}', 5)],
    ids=["invalid byte", "UTF-16", "Latin-1"],
)
def test_vocab_file_not_utf8_names_the_byte(tmp_path, raw, offset):
    with pytest.raises(ValueError, match=rf"vocab\.json: not UTF-8 at byte {offset}\b"):
        Tokenizer.from_files(*write_pair(tmp_path, raw, ""))


def test_vocab_file_with_bom_loads_like_without(tmp_path):
    plain = Tokenizer.from_files(*write_pair(tmp_path, with_entries('"ab": 256'), "a b\n"))
    bom = Tokenizer.from_files(*write_pair(tmp_path, b"\xef\xbb\xbf" + with_entries('"ab": 256').encode(), "a b\n"))
    assert bom.vocab == plain.vocab and bom.merges == plain.merges == [(b"a", b"b")]


@pytest.mark.parametrize("big_id", [2_000_000, 10**12, 10**30])
def test_vocab_id_far_beyond_any_vocabulary(tmp_path, big_id):
    """Either the id works, or the error names it; no MemoryError, OverflowError or chr() message."""
    paths = write_pair(tmp_path, with_entries(f'"ab": {big_id}'), "a b\n")
    try:
        with address_space_cap():
            tokenizer = Tokenizer.from_files(*paths)
    except ValueError as e:
        assert str(big_id) in str(e) and "vocab.json" in str(e), f"the error does not name the id: {e}"
        return
    assert tokenizer.encode("ab") == [big_id]
    assert tokenizer.decode([big_id]) == "ab"


# --- files: merges.txt -----------------------------------------------------------------------------

AB_VOCAB = with_entries('"ab": 256')

BAD_MERGES_FILES = [
    ("one field", "a b\nab\n", r"merges\.txt: line 2 must hold two tokens"),
    ("three fields", "a b c\n", r"merges\.txt: line 1 must hold two tokens"),
    ("tab separator", "a\tb\n", r"merges\.txt: line 1 must hold two tokens"),
    ("two spaces", "a  b\n", r"merges\.txt: line 1 must hold two tokens"),
    ("trailing space", "a b \n", r"merges\.txt: line 1 must hold two tokens"),
    ("token absent from vocab", "a b\nab Ω\n", r"merges\.txt: line 2 names 'Ω', which is not in .*vocab\.json"),
    ("result absent from vocab", "a b\nb a\n", r"merges\.txt: line 2 merges 'b' and 'a', but the result 'ba' is not in"),
    ("CRLF, result absent on line 2", b"a b\r\nb a\r\n", r"merges\.txt: line 2 merges 'b' and 'a'"),
    ("BOM, result absent on line 2", b"\xef\xbb\xbfa b\nb a\n", r"merges\.txt: line 2 merges 'b' and 'a'"),
    ("#version not on the first line", "a b\n#version: 0.2\n", r"merges\.txt: line 2 names '#version:'"),
    ("not UTF-8", b"a b\n\xff\xfe x\n", r"merges\.txt: not UTF-8 at byte 4\b"),
]


@pytest.mark.parametrize("merges_text, message", [c[1:] for c in BAD_MERGES_FILES], ids=[c[0] for c in BAD_MERGES_FILES])
def test_bad_merges_file(tmp_path, merges_text, message):
    with pytest.raises(ValueError, match=message):
        Tokenizer.from_files(*write_pair(tmp_path, AB_VOCAB, merges_text))


@pytest.mark.parametrize(
    "merges_raw",
    [
        b"a b\n",
        b"a b",  # no final newline
        b"\xef\xbb\xbf#version: 0.2\na b\n",  # BOM
        b"\xef\xbb\xbfa b\n",
        b"#version: 0.2\r\na b\r\n",  # CRLF
        b"#version: 0.2\ra b\r",  # old Mac line ends
        b"#version: 0.2\n\na b\n\n\n",  # blank lines
    ],
    ids=["plain", "no final newline", "BOM and version", "BOM", "CRLF", "CR", "blank lines"],
)
def test_merges_file_variants_load_alike(tmp_path, merges_raw):
    tokenizer = Tokenizer.from_files(*write_pair(tmp_path, AB_VOCAB, merges_raw))
    assert tokenizer.merges == [(b"a", b"b")]
    assert tokenizer.encode("abab") == [256, 256]


def test_missing_files_are_os_errors_naming_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        Tokenizer.from_files(tmp_path / "nope.json", tmp_path / "merges.txt")
    vocab_path, _ = write_pair(tmp_path, AB_VOCAB, "")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        Tokenizer.from_files(vocab_path, tmp_path / "nope.txt")
    with pytest.raises(IsADirectoryError):
        Tokenizer.from_files(tmp_path, tmp_path / "merges.txt")


# --- objects: vocab and merges built in memory ----------------------------------------------------


@pytest.mark.parametrize(
    "vocab, merges, error, message",
    [
        ([b"a"], [], ValueError, r"vocab must be a dict"),
        ({i: chr(i) for i in range(256)}, [], ValueError, r"vocab id 0 maps to '\\x00'; tokens must be bytes"),
        (BYTE_VOCAB | {-1: b"ab"}, [], ValueError, r"ints from 0 to 1114111, got -1"),
        (BYTE_VOCAB | {"256": b"ab"}, [], ValueError, r"ints from 0 to 1114111, got '256'"),
        (BYTE_VOCAB | {256: b"a"}, [], ValueError, r"vocab ids 97 and 256 both map to b'a'"),
        ({i: bytes([i]) for i in range(255)}, [], ValueError, r"single byte b'\\xff'"),
        (BYTE_VOCAB, [(b"a", b"b")], ValueError, r"merge 1 \(b'a', b'b'\) needs b'ab'"),
        (BYTE_VOCAB | {256: b"ab"}, [(b"a", b"b", b"c")], ValueError, r"(?i)merge"),
        (BYTE_VOCAB | {256: b"ab"}, [("a", "b")], (TypeError, ValueError), r"(?i)merge"),
    ],
    ids=[
        "vocab a list",
        "tokens are str",
        "negative id",
        "string id",
        "two ids, same bytes",
        "byte 255 missing",
        "merge result absent",
        "merge with three parts",
        "merge of str",
    ],
)
def test_bad_in_memory_vocab_or_merges(vocab, merges, error, message):
    with pytest.raises(error, match=message):
        Tokenizer(vocab, merges)


# --- special tokens --------------------------------------------------------------------------------


def _both(tmp_path, specials):
    """Build a Tokenizer and train with `specials`, each expected to fail."""
    path = tmp_path / "corpus.txt"
    path.write_text("hello world")
    yield lambda: Tokenizer(BYTE_VOCAB, [], specials)
    yield lambda: train_bpe(path, 300, specials)
    vocab_path, merges_path = write_pair(tmp_path, BYTES_JSON, "")
    yield lambda: Tokenizer.from_files(vocab_path, merges_path, specials)


@pytest.mark.parametrize(
    "specials, message",
    [
        ([""], r"must not be empty"),
        ([EOT, ""], r"must not be empty"),
        (["<s>", "<s>"], r"special token listed more than once: '<s>'"),
        ([EOT, "<s>", EOT], r"special token listed more than once: '<\|endoftext\|>'"),
        ([b"<s>"], r"special tokens must be str, got b'<s>'"),
        ([None], r"special tokens must be str, got None"),
        ([5], r"special tokens must be str, got 5"),
    ],
    ids=["empty", "empty after a good one", "duplicated", "duplicated apart", "bytes", "None", "int"],
)
def test_bad_special_tokens(tmp_path, specials, message):
    for attempt in _both(tmp_path, specials):
        with pytest.raises(ValueError, match=message):
            attempt()


@pytest.mark.parametrize("specials", ["<pad>", EOT], ids=["<pad>", "<|endoftext|>"])
def test_special_tokens_given_as_one_string_are_refused(tmp_path, specials):
    # A str is iterable: taken as a list it becomes one special token per character, silently.
    for attempt in _both(tmp_path, specials):
        with pytest.raises((TypeError, ValueError), match=r"(?i)a list|sequence|iterable|of str"):
            attempt()


SPECIAL_SETS = {
    "character class": ["[.*+?]"],
    "backslash d": ["\\d"],
    "alternation": ["a|b"],
    "group and anchors": ["(?:x)", "$^"],
    "all metacharacters": ["[.*+?]", "\\d", "a|b", "(?:x)", "$^"],
    "blank line": ["\n\n"],
    "space and tab": [" \t"],
    "ideographic space": ["\u3000"],
    "CRLF": ["\r\n"],
    "whitespace and EOT": ["\n\n", EOT],
    "overlapping": ["<a><b>", "<b><c>"],
    "one a prefix of another": ["<a>", "<a><b>"],
    "nested prefixes": ["<a><a>", "<a>", "<a><a><a>"],
}
# Where one special token is a prefix of another, tiktoken's choice depends on hash order: skip it.
TIKTOKEN_SKIP = {"one a prefix of another", "nested prefixes"}
PIECES = ["hello", " world", "4", "2", "\\", "d", "[", ".", "*", "+", "?", "]", "a", "|", "b", "(", ")", "$", "^",
          "x", ":", " ", "  ", "\n", "\t", "\r", "\u3000", "<", ">", "é", "中", "🙃"]  # fmt: skip


def _mixed_text(rng: random.Random, specials: list[str], n: int) -> str:
    pieces = PIECES + specials * 3 + [s[: len(s) // 2] for s in specials]  # halves of specials too
    return "".join(rng.choice(pieces) for _ in range(n))


@pytest.mark.parametrize("specials", list(SPECIAL_SETS.values()), ids=list(SPECIAL_SETS))
def test_special_tokens_are_literal_strings(tmp_path, specials):
    """Regex metacharacters, whitespace and overlapping special tokens: training equals the
    reference trainer, encoding equals the reference encoder (and tiktoken), streaming equals encode."""
    name = next(k for k, v in SPECIAL_SETS.items() if v == specials)
    rng = random.Random(name)
    text = _mixed_text(rng, specials, 3000)
    vocab, merges = train_text(tmp_path, text, 320, specials)
    assert (vocab, merges) == train_bpe_reference(text, 320, specials)

    tokenizer = Tokenizer(vocab, merges, specials)
    for i, special in enumerate(specials):  # the trainer gives them the last ids, in order
        assert tokenizer.encode(special) == [256 + len(merges) + i]
    encoding = None if name in TIKTOKEN_SKIP else tiktoken_for(tokenizer.vocab, specials)
    for _ in range(60):
        sample = _mixed_text(rng, specials, rng.randint(0, 80))
        ids = tokenizer.encode(sample)
        assert ids == reference_encode(sample, tokenizer.vocab, merges, specials), repr(sample)
        if encoding is not None:
            assert ids == encoding.encode(sample, allowed_special=set(specials)), repr(sample)
        assert tokenizer.decode(ids) == sample
    long_text = _mixed_text(rng, specials, 6000)  # longer than encode_iterable's buffer
    cuts = sorted(rng.sample(range(len(long_text)), 40))
    pieces = [long_text[a:b] for a, b in zip([0, *cuts], [*cuts, len(long_text)])]
    assert list(tokenizer.encode_iterable(pieces)) == tokenizer.encode(long_text)


@pytest.mark.parametrize("special", ["|", "\n", " ", "."], ids=["pipe", "newline", "space", "dot"])
def test_single_character_special_token_trains_a_usable_tokenizer(tmp_path, special):
    """A one-byte special token: train_bpe may refuse it up front (naming it), or the tokenizer it
    trains must work. Training and then failing to build a Tokenizer from the result is a bug."""
    text = f"a{special}b the{special}cat{special}{special} sat on the mat"
    try:
        vocab, merges = train_text(tmp_path, text * 20, 300, [special])
    except ValueError as e:
        assert repr(special) in str(e), f"the error does not name the special token: {e}"
        return
    tokenizer = Tokenizer(vocab, merges, [special])
    ids = tokenizer.encode(f"x{special}y")
    assert len(ids) == 3 and tokenizer.vocab[ids[1]] == special.encode()
    assert tokenizer.decode(ids) == f"x{special}y"


def test_special_token_already_in_vocab_keeps_its_id():
    tokenizer = Tokenizer(BYTE_VOCAB | {256: b"<s>"}, [], ["<s>", "<new>"])
    assert tokenizer.encode("a<s>b<new>") == [97, 256, 98, 257]


# --- vocab_size ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "vocab_size, specials, minimum",
    [(-5, [EOT], 257), (0, [EOT], 257), (255, [EOT], 257), (256, [EOT], 257), (258, ["<a>", "<b>", "<c>"], 259)],
)
def test_vocab_size_below_minimum_names_it(tmp_path, vocab_size, specials, minimum):
    with pytest.raises(ValueError, match=rf"vocab_size {vocab_size} is below the minimum {minimum}\b"):
        train_text(tmp_path, "hello world", vocab_size, specials)


@pytest.mark.parametrize("vocab_size", [300.0, "300", True, None], ids=["float", "str", "bool", "None"])
def test_vocab_size_not_an_int(tmp_path, vocab_size):
    with pytest.raises(ValueError, match=r"vocab_size must be an int, got " + re.escape(repr(vocab_size))):
        train_text(tmp_path, "hello world", vocab_size, [])


def test_vocab_size_equal_to_minimum_gives_bytes_and_specials(tmp_path):
    vocab, merges = train_text(tmp_path, "hello hello world", 258, ["<a>", "<b>"])
    assert merges == [] and vocab == BYTE_VOCAB | {256: b"<a>", 257: b"<b>"}


def test_vocab_size_far_above_what_the_corpus_gives(tmp_path):
    text = "the cat sat on the mat, the end.\n" * 10
    vocab, merges = train_text(tmp_path, text, 1_000_000, [EOT])
    assert (vocab, merges) == train_bpe_reference(text, 1_000_000, [EOT])
    assert len(merges) < 50 and len(vocab) == 256 + len(merges) + 1


# --- training input --------------------------------------------------------------------------------

GOOD_ODD_CORPORA = {
    "empty": b"",
    "one byte": b"a",
    "one multibyte character": "🙃".encode(),
    "only a special token, repeated": EOT.encode() * 1000,
    "only special tokens, back to back": (EOT * 3 + "<pad>" + EOT).encode() * 200,
    "only whitespace": b" \n\t\r\n  " * 300,
    "NUL bytes only": b"\x00" * 5000,
    "NUL bytes mixed in": b"ab\x00cd\x00\x00ef \x00\x00\x00 a\x00b" * 200,
    "a BOM at the start": b"\xef\xbb\xbfhello hello world",
    "CRLF line ends": b"one two\r\nthree four\r\n" * 50,
    "U+10FFFF and U+FFFE": "\U0010ffff\ufffe \U0010ffff\ufffe x".encode() * 50,
}


@pytest.mark.parametrize("data", list(GOOD_ODD_CORPORA.values()), ids=list(GOOD_ODD_CORPORA))
def test_odd_but_valid_training_input_matches_reference(tmp_path, data):
    specials = [EOT, "<pad>"]
    vocab, merges = train_text(tmp_path, data, 400, specials)
    assert (vocab, merges) == train_bpe_reference(data.decode("utf-8"), 400, specials)


@pytest.mark.parametrize(
    "data, offset",
    [
        (b"hello world " * 10 + b"\xff oops", 120),
        (b"hello \xe2\x82", 6),  # truncated at the end of the file
        (b"hello\xed\xa0\x80", 5),  # a UTF-16 surrogate written as UTF-8 (CESU-8)
        (b"\xc0\xaf", 0),  # overlong encoding of '/'
        ("naïve café".encode("latin-1"), 2),
        ("hello".encode("utf-16"), 0),
        (EOT.encode() + b"\x80", 13),
    ],
    ids=["invalid byte", "truncated", "surrogate", "overlong", "Latin-1", "UTF-16", "after a special token"],
)
def test_training_input_not_utf8_names_the_offset(tmp_path, data, offset):
    with pytest.raises(ValueError, match=rf"corpus\.txt: not valid UTF-8 at byte offset {offset}\b"):
        train_text(tmp_path, data, 300, [EOT])


def test_not_utf8_deep_in_a_file_counted_in_pieces_names_the_absolute_offset(tmp_path):
    data = bytearray(b"hello world " * 30_000)
    data[250_001] = 0xFF
    for workers, piece_size in [(1, None), (2, 1 << 15), (1, 1 << 12)]:
        with pytest.raises(ValueError, match=r"not valid UTF-8 at byte offset 250001\b"):
            train_text(tmp_path, bytes(data), 300, [], num_workers=workers, piece_size=piece_size)


@pytest.mark.slow
def test_twenty_megabyte_line_without_whitespace(tmp_path):
    # Punctuation cuts it into pre-tokens, so only the reading and cutting of the file is extreme.
    # Each repetition gives the same pre-tokens, so three repetitions give the same merges.
    unit = "The,quick.brown-fox_jumps;over[the]lazy|dog:0123456789!"
    path = tmp_path / "line.txt"
    path.write_text(unit * (20_000_000 // len(unit)), encoding="utf-8")
    started = time.perf_counter()
    with time_limit(3 * TIME_LIMIT):
        result = train_bpe(path, 300, [EOT])
    elapsed = time.perf_counter() - started
    print(f"\ntraining on one 20 MB line without whitespace: {elapsed:.2f} s")
    assert result == train_bpe_reference(unit * 3, 300, [EOT])


def test_missing_or_folder_training_input(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        train_bpe(tmp_path / "nope.txt", 300, [])
    # A folder is a corpus of its supported files (tests/test_sources.py); an empty one is refused.
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path))):
        train_bpe(tmp_path, 300, [])


# --- encode and decode arguments -------------------------------------------------------------------


@pytest.mark.parametrize("text", [b"hello", None, 5, ["hello"]], ids=["bytes", "None", "int", "list"])
def test_encode_needs_a_str(gpt2, text):
    with pytest.raises(TypeError, match=r"encode takes a str, got " + type(text).__name__):
        gpt2.encode(text)


@pytest.mark.parametrize(
    "text, fixed", [("\ud800", "\ufffd"), ("a\udcffb", "a\ufffdb"), ("hello \udfff world", "hello \ufffd world")]
)
def test_encode_lone_surrogate_becomes_u_fffd_as_in_tiktoken(gpt2, text, fixed):
    # Issue 14: what tiktoken does (more in tests/test_tokenizer.py).
    assert gpt2.encode(text) == gpt2.encode(fixed) == tiktoken_gpt2().encode(text)


def test_encode_iterable_of_bytes_is_a_type_error(gpt2):
    with pytest.raises(TypeError, match="bytes"):
        list(gpt2.encode_iterable([b"hello"]))


@pytest.mark.parametrize(
    "ids, message",
    [
        ([1, 2, -1], r"token id -1 is not in the vocabulary"),
        ([-(10**30)], r"token id -1000000000000000000000000000000 is not"),
        ([50257], r"token id 50257 is not in the vocabulary"),
        ([10**30], r"token id 1000000000000000000000000000000 is not"),
        ([2**64], r"token id 18446744073709551616 is not"),
        ([1, 2, 999_999, -1], r"token id 999999 is not"),
        (np.array([5, -1], dtype=np.int64), r"token id -1 is not"),
        (np.array([5, 2**40], dtype=np.uint64), r"token id 1099511627776 is not"),
        ([1.5], r"token ids must be integers, got 1\.5"),
        ([1, 2.0], r"token ids must be integers, got 2\.0"),
        (["3"], r"token ids must be integers, got '3'"),
        ([None], r"token ids must be integers, got None"),
        ([b"\x01"], r"token ids must be integers, got b'\\x01'"),
        (np.array([1.0, 2.0]), r"token ids must be integers, got 1\.0"),
    ],
    ids=["negative", "very negative", "first free id", "huge", "2**64", "first bad named", "numpy negative",
         "numpy huge", "float", "integral float", "str", "None", "bytes", "numpy float"],  # fmt: skip
)
def test_decode_bad_ids_names_them(gpt2, ids, message):
    with pytest.raises(ValueError, match=message):
        gpt2.decode(ids)
    with pytest.raises(ValueError, match=message):
        gpt2.decode_bytes(ids)


# --- the bpe command -------------------------------------------------------------------------------


def run_bpe(capsys, argv: list[str]) -> tuple[int, str, str]:
    """Run `bpe` in-process; return (exit status, stdout, stderr)."""
    try:
        code = bpe_main(argv)
    except SystemExit as e:  # argparse exits instead of returning; a shell sees the same status
        code = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


class Evil:
    """Unpickling this creates the file `path`: proof that a pickle was loaded."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture(scope="module")
def cli_inputs(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("cli_inputs")
    (d / "good.txt").write_text("hello world, hello there. " * 50 + EOT + " the end\n", encoding="utf-8")
    (d / "latin1.txt").write_bytes(b"hello world " * 100 + "café".encode("latin-1"))  # bad byte at 1203
    (d / "bigbad.txt").write_bytes(b"hello world " * 100_000 + b"\xc3\x28 more text")  # at 1200000
    (d / "statsbad.txt").write_bytes(b"hello world\n" * 10_000 + b"\xff\n")  # at 120000
    (d / "a_folder").mkdir()
    (d / "afile").write_text("not a folder")
    vocab, merges = train_bpe(d / "good.txt", 300, [EOT])
    (d / "tok").mkdir()
    Tokenizer(vocab, merges, [EOT]).save(d / "tok" / "vocab.json", d / "tok" / "merges.txt")
    (d / "badjson_tok").mkdir()
    write_pair(d / "badjson_tok", "{oops", "")
    (d / "badmerges_tok").mkdir()
    write_pair(d / "badmerges_tok", (d / "tok" / "vocab.json").read_bytes(), "#version: 0.2\nĠ Ω\n")
    np.save(d / "float.npy", np.array([1.5, 2.0]))
    np.save(d / "2d.npy", np.zeros((2, 2), dtype=np.uint16))
    np.save(d / "neg.npy", np.array([104, -1, 5], dtype=np.int32))
    np.save(d / "big.npy", np.array([104, 70_000], dtype=np.uint32))
    (d / "empty.npy").write_bytes(b"")
    (d / "trunc.npy").write_bytes((d / "big.npy").read_bytes()[:-3])
    (d / "text.npy").write_text("hello world")
    np.save(d / "evil.npy", np.array([Evil(str(d / "PWNED")), 1], dtype=object), allow_pickle=True)
    paths = {p.stem: str(p) for p in d.iterdir()}
    paths.update(dir=str(d), missing=str(d / "missing.txt"), missing_npy=str(d / "missing.npy"))
    paths.update(missing_dir=str(d / "no_tokenizer_here"), sentinel=str(d / "PWNED"))
    return paths


TRAIN = ["train", "--out", "{out}/tok", "--quiet"]
ENCODE = ["encode", "--tokenizer", "{tok}", "--out", "{out}/x.npy", "--quiet"]
DECODE = ["decode", "--tokenizer", "{tok}"]
CLI_CASES = [
    # (name, argv, exit status, words the one stderr line must contain)
    ("train: missing input", [*TRAIN, "{missing}"], 1, ["not found", "missing.txt"]),
    ("train: input is a folder", [*TRAIN, "{a_folder}"], 1, ["folder", "a_folder"]),
    ("train: input not UTF-8", [*TRAIN, "{latin1}"], 1, ["latin1.txt", "byte offset 1203"]),
    ("train: vocab size below minimum", [*TRAIN, "{good}", "--vocab-size", "256"], 1, ["minimum 257"]),
    ("train: empty special token", [*TRAIN, "{good}", "--special-token", ""], 1, ["special token", "empty"]),
    ("train: duplicated special token", [*TRAIN, "{good}", "--special-token", "<s>", "--special-token", "<s>"], 1, ["'<s>'"]),
    ("train: output folder is a file", ["train", "{good}", "--out", "{afile}", "--quiet"], 1, ["afile"]),
    ("train: vocab size not a number", [*TRAIN, "{good}", "--vocab-size", "lots"], 2, ["vocab-size", "lots"]),
    ("train: vocab size zero", [*TRAIN, "{good}", "--vocab-size", "0"], 2, ["vocab-size"]),
    ("train: zero workers", [*TRAIN, "{good}", "--workers", "0"], 2, ["workers"]),
    ("unknown command", ["frobnicate"], 2, ["frobnicate"]),
    ("no command", [], 2, ["command"]),
    ("encode: no tokenizer there", ["encode", "{good}", "--tokenizer", "{missing_dir}", "--out", "{out}/x.npy"], 1, ["vocab.json", "not found"]),
    ("encode: missing --tokenizer", ["encode", "{good}", "--out", "{out}/x.npy"], 2, ["--tokenizer"]),
    ("encode: malformed vocab.json", ["encode", "{good}", "--tokenizer", "{badjson_tok}", "--out", "{out}/x.npy"], 1, ["vocab.json", "malformed JSON at line 1"]),
    ("encode: merges.txt names an unknown token", ["encode", "{good}", "--tokenizer", "{badmerges_tok}", "--out", "{out}/x.npy"], 1, ["merges.txt", "line 2", "'Ω'"]),
    ("encode: missing input", [*ENCODE, "{missing}"], 1, ["not found", "missing.txt"]),
    ("encode: input not UTF-8, 1 worker", [*ENCODE, "{bigbad}", "--workers", "1"], 1, ["bigbad.txt", "byte offset 1200000"]),
    ("encode: input not UTF-8, 2 workers", [*ENCODE, "{bigbad}", "--workers", "2"], 1, ["bigbad.txt", "byte offset 1200000"]),
    ("encode: output is a folder", ["encode", "{good}", "--tokenizer", "{tok}", "--out", "{out}/taken.npy", "--quiet"], 1, ["taken.npy"]),
    ("encode: unknown dtype", [*ENCODE, "{good}", "--dtype", "uint8"], 2, ["dtype", "uint8"]),
    ("decode: float ids", [*DECODE, "{float}"], 1, ["float.npy", "float64"]),
    ("decode: 2-D array", [*DECODE, "{2d}"], 1, ["2d.npy", "(2, 2)"]),
    ("decode: negative id", [*DECODE, "{neg}"], 1, ["token id -1 is not in the vocabulary"]),
    ("decode: id too large", [*DECODE, "{big}"], 1, ["token id 70000 is not in the vocabulary"]),
    ("decode: empty file", [*DECODE, "{empty}"], 1, ["empty.npy"]),
    ("decode: truncated array", [*DECODE, "{trunc}"], 1, ["trunc.npy"]),
    ("decode: text, not an array", [*DECODE, "{text}"], 1, ["text.npy"]),
    ("decode: pickled objects", [*DECODE, "{evil}"], 1, ["evil.npy"]),
    ("decode: missing file", [*DECODE, "{missing_npy}"], 1, ["not found", "missing.npy"]),
    # A Latin-1 terminal passes b"caf\xe9"; Python's argv holds it as a lone surrogate.
    ("inspect: undecodable argument", ["inspect", "caf\udce9", "--tokenizer", "{tok}"], 1, ["surrogate"]),
    ("stats: input not UTF-8", ["stats", "{statsbad}", "--tokenizer", "{tok}"], 1, ["statsbad.txt", "120000"]),
    ("stats: missing input", ["stats", "{missing}", "--tokenizer", "{tok}"], 1, ["not found", "missing.txt"]),
]  # fmt: skip


@pytest.mark.parametrize("argv, status, words", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input(tmp_path, capsys, cli_inputs, argv, status, words):
    out_dir = tmp_path / "out"
    (out_dir / "taken.npy").mkdir(parents=True)  # an existing folder where a file is to be written
    afile_before = Path(cli_inputs["afile"]).read_bytes()
    paths = cli_inputs | {"out": str(out_dir)}
    code, out, err = run_bpe(capsys, [a.format(**paths) for a in argv])

    assert code == status, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe: "), f"stderr is not one 'bpe: ' line:\n{err}"
    for word in words:
        assert word in lines[0], f"{word!r} is not named in: {lines[0]}"
    assert out == ""
    assert [p for p in out_dir.rglob("*") if not p.is_dir()] == [], "an output file was created"
    assert not any(p.is_file() for p in (out_dir / "taken.npy").iterdir())
    assert Path(cli_inputs["afile"]).read_bytes() == afile_before
    assert not Path(cli_inputs["sentinel"]).exists(), "a pickle was loaded"


def test_cli_good_input_works(tmp_path, capsys, cli_inputs):
    """The control for the table above: the same commands with good input succeed."""
    out = tmp_path / "out"
    assert run_bpe(capsys, ["train", cli_inputs["good"], "--vocab-size", "300", "--out", str(out), "--quiet"])[0] == 0
    code, _, err = run_bpe(capsys, ["encode", cli_inputs["good"], "--tokenizer", str(out), "--out", str(out / "x.npy"), "--quiet"])
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["merge_log.tsv", "merges.txt", "tokenizer.json", "vocab.json", "x.npy"]
    code, text, err = run_bpe(capsys, ["decode", str(out / "x.npy"), "--tokenizer", str(out)])
    assert code == 0 and text == Path(cli_inputs["good"]).read_text(encoding="utf-8"), err


# --- speed: pathological pre-tokens ----------------------------------------------------------------

N = 1_000_000


def run_merges(unit: bytes, n: int, num_merges: int) -> list[tuple[bytes, bytes]]:
    """The merges BPE learns from one pre-token made of n copies of the token `unit` (a cheap oracle).

    The word is kept as runs [k, r]: r tokens in a row, each `unit * k`. Two tokens `unit * i`,
    `unit * j` compare as bytes like i, j (one is a prefix of the other), so ties go to the
    greatest (i, j). A pair (k, k) occurs r - 1 times inside a run (overlapping) and is merged
    r // 2 times from the left; a pair (i, j), i != j, occurs once at each boundary of runs i, j.
    """
    runs = [[1, n]]
    merges: list[tuple[bytes, bytes]] = []
    while len(merges) < num_merges:
        counts: dict[tuple[int, int], int] = {}
        for k, r in runs:
            if r > 1:
                counts[(k, k)] = counts.get((k, k), 0) + r - 1
        for (i, _), (j, _) in zip(runs, runs[1:]):
            counts[(i, j)] = counts.get((i, j), 0) + 1
        if not counts:
            break
        x, y = max(counts, key=lambda p: (counts[p], p))
        merges.append((unit * x, unit * y))
        new: list[list[int]] = []
        for idx, (k, r) in enumerate(runs):
            if x == y:
                new += [[2 * k, r // 2], [k, r % 2]] if k == x else [[k, r]]
                continue
            gives_last = idx + 1 < len(runs) and k == x and runs[idx + 1][0] == y
            takes_first = idx > 0 and k == y and runs[idx - 1][0] == x
            new.append([k, r - gives_last - takes_first])
            if gives_last:
                new.append([x + y, 1])
        runs = []
        for k, r in new:  # drop empty runs, join equal neighbours
            if r and runs and runs[-1][0] == k:
                runs[-1][1] += r
            elif r:
                runs.append([k, r])
    return merges


def expected_merges(kind: str, n: int, num_merges: int) -> list[tuple[bytes, bytes]]:
    if kind == "run":  # "aaaa..."
        return run_merges(b"a", n, num_merges)
    # "abab...": (a, b) occurs once more than (b, a), and then it is a run of "ab" tokens.
    return [(b"a", b"b")] + run_merges(b"ab", n // 2, num_merges - 1)


def pathological_text(kind: str, n: int) -> str:
    return "a" * n if kind == "run" else "ab" * (n // 2)


@pytest.mark.parametrize("kind", ["run", "cycle"])
def test_run_merges_oracle_matches_reference(kind):
    for n in [*range(2, 70, 2), 98, 128, 250, 256, 300]:
        text = pathological_text(kind, n)
        assert expected_merges(kind, n, 100) == train_bpe_reference(text, 356, [])[1], n


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["run", "cycle"], ids=["1 MB of 'a'", "1 MB of 'abab'"])
def test_training_on_a_one_megabyte_pretoken_is_fast(tmp_path, kind):
    path = tmp_path / "corpus.txt"
    path.write_text(pathological_text(kind, N), encoding="ascii")
    started = time.perf_counter()
    try:
        with time_limit(TIME_LIMIT):
            vocab, merges = train_bpe(path, 1000, [])
    finally:
        print(f"\ntraining on a {kind} of {N:,} characters: {time.perf_counter() - started:.2f} s")
    assert merges == expected_merges(kind, N, 1000 - 256)
    assert len(vocab) == 256 + len(merges)


PATHOLOGICAL_ENCODE = {
    "1 MB of 'a'": ("gpt2", "a" * N),
    "1 MB of 'abab'": ("gpt2", "ab" * (N // 2)),
    "1 MB of newlines": ("gpt2", "\n" * N),  # a file of blank lines: whitespace only, no safe cut
    "1 MB of newlines, with a blank-line special token": ("trained", "\n" * N),  # "\n\n" spans every cut
}


@pytest.mark.slow
@pytest.mark.parametrize("which, text", list(PATHOLOGICAL_ENCODE.values()), ids=list(PATHOLOGICAL_ENCODE))
def test_encoding_a_one_megabyte_pretoken_is_fast(tmp_path, request, which, text):
    name = next(k for k, v in PATHOLOGICAL_ENCODE.items() if v == (which, text))
    tokenizer = request.getfixturevalue(which)
    path = tmp_path / "input.txt"
    path.write_text(text, encoding="utf-8", newline="")
    times: dict[str, float] = {}
    started = time.perf_counter()
    try:
        with time_limit(TIME_LIMIT):
            ids = tokenizer.encode(text)
            times["encode"] = time.perf_counter() - started
            started = time.perf_counter()
            with open(path, encoding="utf-8", newline="") as f:  # as CS336 streams a file: line by line
                streamed = list(tokenizer.encode_iterable(f))
            times["encode_iterable"] = time.perf_counter() - started
            started = time.perf_counter()
            decoded = tokenizer.decode(ids)
            times["decode"] = time.perf_counter() - started
    finally:
        done = ", ".join(f"{k} {v:.2f} s" for k, v in times.items())
        print(f"\n{name}: {done}" + ("" if len(times) == 3 else f" (gave up on the next after {TIME_LIMIT:.0f} s)"))
    assert decoded == text
    assert streamed == ids
    if which == "trained":
        assert ids == tokenizer.encode("\n\n") * (N // 2)
    elif not text.isspace():  # tiktoken's regex overflows its stack on a 1 MB run of whitespace
        assert ids == tiktoken_gpt2().encode(text, allowed_special={EOT})


# --- atomic output: killed runs --------------------------------------------------------------------


BPE = ["-m", "cs336_basics.cli"]


def _spawn(args: list[str], cwd: Path, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a Ctrl-C in the terminal running pytest does not reach it
    )


def _run(args: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    proc = _spawn(args, cwd)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return time.perf_counter() - started


def _random_corpus(path: Path, seed: int, n_words: int) -> None:
    """Many distinct words, so that training takes a fraction of a second rather than nothing."""
    rng = random.Random(seed)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    words = ["".join(rng.choice(letters[: rng.randint(5, 26)]) for _ in range(rng.randint(1, 10))) for _ in range(20_000)]
    path.write_text(" ".join(rng.choice(words) for _ in range(n_words)), encoding="utf-8")


@pytest.fixture(scope="module")
def kill_setup(tmp_path_factory):
    """Two known-good versions of each output: 'old' (already in place) and 'new' (being written)."""
    d = tmp_path_factory.mktemp("kill")
    _random_corpus(d / "corpus.txt", 1, 150_000)
    _random_corpus(d / "other.txt", 2, 150_000)
    train_args = lambda vocab_size, out: ["train", str(d / "corpus.txt"), "--vocab-size", str(vocab_size),
                                          "--out", str(out), "--quiet", "--workers", "1"]  # fmt: skip
    encode_args = lambda text, out: ["encode", str(d / text), "--tokenizer", str(d / "v3000"), "--out", str(out),
                                     "--quiet", "--workers", "1"]  # fmt: skip
    _run([*BPE, *train_args(1000, d / "v1000")], d)
    train_seconds = _run([*BPE, *train_args(3000, d / "v3000")], d)
    _run([*BPE, *encode_args("corpus.txt", d / "old.npy")], d)
    encode_seconds = _run([*BPE, *encode_args("other.txt", d / "new.npy")], d)

    tokenizer_files = ["vocab.json", "merges.txt", "tokenizer.json", "merge_log.tsv"]
    return {
        "train": dict(
            names=tokenizer_files,
            versions={
                "old": tuple((d / "v1000" / n).read_bytes() for n in tokenizer_files),
                "new": tuple((d / "v3000" / n).read_bytes() for n in tokenizer_files),
            },
            args=lambda out: train_args(3000, out),
            seconds=train_seconds,
        ),
        "encode": dict(
            names=["tokens.npy"],
            versions={"old": ((d / "old.npy").read_bytes(),), "new": ((d / "new.npy").read_bytes(),)},
            args=lambda out: encode_args("other.txt", out / "tokens.npy"),
            seconds=encode_seconds,
        ),
        "dir": d,
    }


def _put_old_version(folder: Path, names: list[str], old: tuple[bytes, ...]) -> None:
    if folder.exists():
        for p in folder.iterdir():
            p.unlink()
    folder.mkdir(exist_ok=True)
    for name, data in zip(names, old):
        (folder / name).write_bytes(data)


def _check_killed_run(folder, names, versions, sig, label) -> tuple[list[str], str]:
    """Problems with the folder after a killed run, and which version it holds."""
    problems = []
    found = tuple((folder / n).read_bytes() if (folder / n).is_file() else None for n in names)
    which = next((k for k, v in versions.items() if v == found), None)
    kinds = [next((k for k, v in versions.items() if v[i] == found[i]), "missing" if found[i] is None else "other")
             for i in range(len(names))]
    if which is None and sig == signal.SIGKILL and set(kinds) == {"old", "new"} and names[0] == "vocab.json":
        # SIGKILL between two renames cannot be prevented; loading must then refuse the mix.
        with pytest.raises(ValueError, match="was written with another|another tokenizer's log"):
            tokenizer = Tokenizer.from_pretrained(folder)
            report.vocab_entries(tokenizer, read_merge_log(folder / "merge_log.tsv"))
        which = "mixed, refused on loading"
    elif which is None:
        parts = [f"{n} is {kind}" for n, kind in zip(names, kinds)]
        problems.append(f"{label}: not one whole version: {', '.join(parts)}")
    elif names[0].endswith(".npy"):
        np.load(folder / names[0], allow_pickle=False)
    else:
        Tokenizer.from_files(folder / names[0], folder / names[1], [EOT])
    extra = sorted(set(os.listdir(folder)) - set(names))
    # After SIGKILL nothing can clean up: a hidden `.NAME.XXXX.tmp` beside the output is acceptable.
    # After SIGINT the program runs its cleanup, so nothing may be left.
    allowed = [n for n in extra if sig == signal.SIGKILL and re.fullmatch(r"\..+\.tmp", n)]
    if sorted(set(extra) - set(allowed)):
        problems.append(f"{label}: left behind {sorted(set(extra) - set(allowed))}")
    return problems, which or "mixed"


# Moments of a run from its start to just before its final write, each announced by
# tests/kill_target.py (the K-th call of a function): the writes themselves are the next test's.
MOMENTS = {
    "train": ["1:cs336_basics.corpora.sources:read_unit",  # reading the corpus
              "1:cs336_basics.train.trainer:train_merges",  # counted: the merges begin
              "1500:cs336_basics.train.merge:_reversed_order_key"],  # the 1,244th merge of 2,743
    "encode": ["1:cs336_basics.corpora.sources:read_unit",  # reading the corpus
               "10:cs336_basics.encode.encoder:merge_words"],  # half way through (of 19 calls)
}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["train", "encode"])
def test_killed_before_the_final_write_leaves_the_old_output(kill_setup, command):
    """Put the old output in place, start a run writing the new one to the same place, and stop it
    (Ctrl-C, SIGKILL) at moments throughout the run, each where the run is paused by
    tests/kill_target.py (never after a delay, which a busy machine stretches): the old output must
    be there, whole, with no stray files."""
    setup = kill_setup[command]
    folder = kill_setup["dir"] / f"moments_{command}"
    problems, seen = [], []
    for sig in (signal.SIGINT, signal.SIGKILL):
        for at in MOMENTS[command]:
            _put_old_version(folder, setup["names"], setup["versions"]["old"])
            proc = _spawn([str(KILL_TARGET), at, *setup["args"](folder)], folder.parent, stdin=subprocess.PIPE)
            try:
                with time_limit(60):
                    event, lines = paused_at(proc)
                    assert event is not None, f"{command} never paused at {at}:\n{''.join(lines)}"
                    proc.send_signal(sig)
                    release(proc)
                    err = "".join(lines) + proc.communicate(timeout=60)[1]
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            label = f"{sig.name} at {at} (exit {proc.returncode})"
            if proc.returncode != (130 if sig == signal.SIGINT else -signal.SIGKILL):
                problems.append(f"{label}: unexpected exit status; stderr: {err.strip()[-300:]}")
            if sig == signal.SIGINT and err.strip().splitlines()[-1] != "bpe: interrupted; no output was written":
                problems.append(f"{label}: the last line is not 'no output was written': {err.strip()[-300:]}")
            found, which = _check_killed_run(folder, setup["names"], setup["versions"], sig, label)
            problems += found
            if which != "old":
                problems.append(f"{label}: stopped before its final write, the output is {which}")
            seen.append(f"{label}: {which}")
    print(f"\n{command}: " + "; ".join(seen))
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
@pytest.mark.parametrize("command", ["train", "encode"])
def test_killed_during_the_final_write_leaves_old_or_new_output(kill_setup, command, sig):
    """Kill at each step of the final write (after each fsync of a temporary file and after each
    rename into place), paused there by tests/kill_target.py. The output must be one whole version
    (for train: vocab.json and merges.txt from the same run), and an interrupted run that says no
    output was written must have left the old output."""
    setup = kill_setup[command]
    folder = kill_setup["dir"] / f"final_{command}_{sig.name}"
    problems, seen = [], []
    for k in range(1, 10):
        _put_old_version(folder, setup["names"], setup["versions"]["old"])
        proc = _spawn([str(KILL_TARGET), str(k), *setup["args"](folder)], folder.parent, stdin=subprocess.PIPE)
        try:
            with time_limit(60):
                event, lines = paused_at(proc)
                if event is not None:
                    proc.send_signal(sig)
                    release(proc)
                err = "".join(lines) + proc.communicate(timeout=60)[1]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if event is None:  # the run ended with fewer than k write events: all were tried
            assert proc.returncode == 0, err
            assert k > 1, "the run wrote its output without fsync, replace or rename"
            break
        label = f"{sig.name} after {event} (exit {proc.returncode})"
        found, which = _check_killed_run(folder, setup["names"], setup["versions"], sig, label)
        problems += found
        if "no output was written" in err and which != "old":
            problems.append(f"{label}: says 'no output was written' but the output is {which}")
        seen.append(f"{event}: {which}")
    print(f"\n{command}, {sig.name} at each write event: " + "; ".join(seen))
    assert not problems, "\n".join(problems)


def test_written_files_have_ordinary_permissions(tmp_path, trained):
    """Writing through a temporary file must not leave the output readable by its owner only."""
    umask = os.umask(0)
    os.umask(umask)
    trained.save(tmp_path / "vocab.json", tmp_path / "merges.txt")
    (tmp_path / "input.txt").write_text("hello world\n")
    trained.encode_file(tmp_path / "input.txt", tmp_path / "tokens.npy", num_workers=1)
    for name in ["vocab.json", "merges.txt", "tokens.npy"]:
        assert oct((tmp_path / name).stat().st_mode & 0o777) == oct(0o666 & ~umask), name


# --- loading never executes code -------------------------------------------------------------------

_AUDIT: list | None = None
_AUDIT_HOOKED = False
FORBIDDEN_EVENTS = {"exec", "compile", "pickle.find_class", "marshal.loads", "marshal.load", "os.system",
                    "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "ctypes.dlopen"}  # fmt: skip


def _audit_hook(event, args):
    if _AUDIT is not None and (event == "open" or event in FORBIDDEN_EVENTS):
        _AUDIT.append((event, args))


@contextmanager
def audited():
    """Record the files opened and any code-running events (sys.addaudithook) inside the block."""
    global _AUDIT, _AUDIT_HOOKED
    if not _AUDIT_HOOKED:
        sys.addaudithook(_audit_hook)  # cannot be removed; it records only inside this block
        _AUDIT_HOOKED = True
    _AUDIT = []
    try:
        yield _AUDIT
    finally:
        _AUDIT = None


def _opened_in(events, folder: Path) -> set[str]:
    opened = set()
    for event, args in events:
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path = Path(os.fsdecode(args[0])).resolve()
            if folder.resolve() in path.parents:
                opened.add(path.name)
    return opened


CODE_KEYS = [
    "__import__('os').system('touch {sentinel}')",
    "eval(compile('open(\"{sentinel}\", \"w\")', 'x', 'exec'))",
    "{{7*7}}",
    "${{jndi:ldap://example.invalid/a}}",
    "!!python/object/apply:os.system ['touch {sentinel}']",
    "\"; touch {sentinel}; #",
]


def test_vocab_keys_that_look_like_code_are_plain_data(tmp_path):
    sentinel = tmp_path / "PWNED"
    keys = [k.format(sentinel=sentinel) for k in CODE_KEYS]
    paths = write_pair(tmp_path, json.dumps(byte_vocab() | {k: 256 + i for i, k in enumerate(keys)}), "")
    (tmp_path / "warm").mkdir()
    Tokenizer.from_files(*write_pair(tmp_path / "warm", BYTES_JSON, ""))  # warm up: lazy imports run code
    with audited() as events:
        tokenizer = Tokenizer.from_files(*paths)
    assert [tokenizer.vocab[256 + i] for i in range(len(keys))] == [k.encode() for k in keys]
    assert tokenizer.decode(range(256, 256 + len(keys))) == "".join(keys)
    assert not sentinel.exists()
    assert [e for e, _ in events if e in FORBIDDEN_EVENTS] == []


def test_vocab_values_that_look_like_code_are_rejected(tmp_path):
    sentinel = tmp_path / "PWNED"
    code = f"__import__('os').system('touch {sentinel}')"
    with pytest.raises(ValueError, match=r"vocab\.json: key 'ab' has id \"__import__"):
        Tokenizer.from_files(*write_pair(tmp_path, with_entries(f'"ab": {json.dumps(code)}'), ""))
    assert not sentinel.exists()


@pytest.mark.parametrize("which", ["vocab", "merges"])
def test_pickles_in_place_of_the_files_are_rejected_not_loaded(tmp_path, which):
    sentinel = tmp_path / "PWNED"
    evil = pickle.dumps(Evil(str(sentinel)))
    vocab, merges = (evil, "") if which == "vocab" else (AB_VOCAB, evil)
    with pytest.raises(ValueError, match=rf"{which}\.(json|txt): "):
        Tokenizer.from_files(*write_pair(tmp_path, vocab, merges))
    assert not sentinel.exists()


def test_from_files_reads_only_the_two_named_files(tmp_path):
    sentinel = tmp_path / "PWNED"
    evil = pickle.dumps(Evil(str(sentinel)))
    decoys = {
        "tokenizer.pkl": evil,
        "vocab.pkl": evil,
        "merges.pkl": evil,
        "vocab.py": f"open({str(sentinel)!r}, 'w')\n".encode(),
        "__init__.py": f"open({str(sentinel)!r}, 'w')\n".encode(),
        "vocab.json.bak": b"{}",
        ".vocab.json.x1.tmp": b"{",
        "merges.txt~": b"x y z\n",
        "special_tokens_map.json": b'{"eos_token": "<|endoftext|>"}',
        "tokenizer.json": b"{}",
        "config.json": b"{}",
    }
    for name, data in decoys.items():
        (tmp_path / name).write_bytes(data)
    vocab_path, merges_path = write_pair(tmp_path, AB_VOCAB, "#version: 0.2\na b\n")
    Tokenizer.from_files(vocab_path, merges_path, [EOT])  # warm up: lazy imports open files
    with audited() as events:
        tokenizer = Tokenizer.from_files(vocab_path, merges_path, [EOT])
    assert tokenizer.encode("ab" + EOT) == [256, 257]
    assert _opened_in(events, tmp_path) == {"vocab.json", "merges.txt"}
    assert [e for e, _ in events if e in FORBIDDEN_EVENTS] == []
    assert not sentinel.exists()


def test_library_source_never_loads_code():
    """No pickle-like module, no eval/exec/compile/__import__, no allow_pickle=True and no torch.load
    in cs336_basics (the loader may import torch to hand out tensors, never to load files)."""
    found = []
    for path in sorted((ROOT / "cs336_basics").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
                for name in names:
                    if name.split(".")[0] in {"pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib", "yaml"}:
                        found.append(f"{where}: imports {name}")
            elif isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name) and node.func.id in {"eval", "exec", "compile", "__import__"}:
                    found.append(f"{where}: calls {node.func.id}")
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr == "load" and getattr(func.value, "id", "") == "torch":
                    found.append(f"{where}: calls torch.load")
                for kw in node.keywords:
                    if kw.arg == "allow_pickle" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                        found.append(f"{where}: allow_pickle is not False")
    assert found == []


# --- fuzzing ---------------------------------------------------------------------------------------

EDGE_CHARACTERS = ["\x00", "\U0010ffff", "\ufeff", "\u2028", "\u2029", "\x1c", "\x1f", "\x85", "\xa0", "\u3000",
                   "\r\n", "\r", "\t", " ", "  ", "\n", "\n\n", "'s", "'ll", "’", "e\u0301", "👩‍💻", "🇩🇪", "中",
                   "123", "\ufffd", "\uffff", "\ufffe", "\U0001f600", "\u200d", "\u0130", EOT, "<|endof", "|>"]  # fmt: skip
CHARS = st.characters(exclude_categories=["Cs"])
FUZZ_TEXT = st.one_of(
    st.text(CHARS),
    st.lists(st.one_of(CHARS, st.sampled_from(EDGE_CHARACTERS)), max_size=80).map("".join),
)
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.slow
@FUZZ
@given(FUZZ_TEXT)
def test_fuzz_round_trip(gpt2, trained, text):
    for tokenizer in (gpt2, trained):
        assert tokenizer.decode(tokenizer.encode(text)) == text


# Characters unassigned in this Python's Unicode tables are left out here: the `regex` package and
# tiktoken know different Unicode versions, so a character new in Unicode 17 (U+323B0, say) is a
# letter to one and not to the other, and the pre-tokens differ.
ASSIGNED_TEXT = st.one_of(
    st.text(st.characters(exclude_categories=["Cs", "Cn"])),
    st.lists(st.one_of(st.characters(exclude_categories=["Cs", "Cn"]), st.sampled_from(EDGE_CHARACTERS)), max_size=80).map("".join),
)


@pytest.mark.slow
@FUZZ
@given(ASSIGNED_TEXT)
def test_fuzz_ids_equal_tiktoken_on_gpt2(gpt2, text):
    assert gpt2.encode(text) == tiktoken_gpt2().encode(text, allowed_special={EOT})


# encode_iterable only cuts text once it holds 4096 characters: long fillers get it there.
# (Long runs of newlines are left to the speed tests: with "\n\n" special they are slow to cut.)
FILLERS = ["", "x" * 4100, "word " * 820, " " * 4100, "word " * 800 + "\n" * 100, ("a" + EOT) * 300,
           "ab\n\n" * 1030, "é  " * 1370, EOT * 320, "word " * 800 + "\n\n\n" * 40]  # fmt: skip


@st.composite
def cut_texts(draw):
    head = draw(st.sampled_from(FILLERS))
    middle = draw(FUZZ_TEXT) + draw(st.sampled_from(["", EOT, EOT + EOT, "\n\n", "<|endof", "\n", " "])) + draw(FUZZ_TEXT)
    text = head + middle + draw(st.sampled_from(FILLERS))
    anywhere = draw(st.lists(st.integers(0, len(text)), max_size=10))
    # Cuts near the end of the filler and inside the drawn middle, where the interesting text is.
    near = draw(st.lists(st.integers(-6, len(middle) + 6), max_size=8))
    cuts = sorted({*anywhere, *(min(max(len(head) + c, 0), len(text)) for c in near)})
    return text, [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


@pytest.mark.slow
@FUZZ
@given(cut_texts())
def test_fuzz_encode_iterable_equals_encode_for_any_cuts(trained, case):
    text, pieces = case
    assert "".join(pieces) == text
    assert list(trained.encode_iterable(iter(pieces))) == trained.encode(text)
