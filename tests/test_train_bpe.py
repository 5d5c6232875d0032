"""The trainer: hand-worked examples, the slow reference as oracle, reference files, special tokens,
speed, worker-count independence and bad input."""

import time
from collections import Counter

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.merge import _reversed_order_key, train_merges
from tests.adapters import run_train_bpe
from tests.common import FIXTURES_PATH
from tests.reference import GPT2_PATTERN, REFERENCE_RUNS, read_gpt2_files, reference_train_bpe, split_documents

FIXTURES = ["english", "german", "chinese", "emoji_chat", "code"]
SPECIALS = ["<|endoftext|>", "<|endoftext|><|endoftext|>", "<pad>"]


def train_text(tmp_path, text: str, vocab_size: int, special_tokens: list[str], **kwargs):
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    return run_train_bpe(path, vocab_size, special_tokens, **kwargs)


# --- examples that can be checked on paper ----------------------------------------------------------


def test_overlapping_pairs_count_twice(tmp_path):
    # "aaa" alone holds (a, a) twice, so it is merged, then (aa, a).
    vocab, merges = train_text(tmp_path, "aaa", 258, [])
    assert merges == [(b"a", b"a"), (b"aa", b"a")]
    assert vocab[256] == b"aa" and vocab[257] == b"aaa"
    # "aaa ab ab": (a, a), (" ", a) and (a, b) occur twice each; the greatest pair wins the tie.
    vocab, merges = train_text(tmp_path, "aaa ab ab", 257, [])
    assert merges == [(b"a", b"b")]


def test_tie_break_prefers_the_greatest_pair_bytes(tmp_path):
    # SPEC's example: among (A, B), (A, C), (B, ZZ), (BA, A), all once, (BA, A) wins. The corpus first
    # makes ZZ and BA (4 times each; ZZ wins that tie), then those four pairs occur once each.
    text = "BAA\nAB\nAC\nBZZ\nBA\nBA\nBA\nZZ\nZZ\nZZ"
    vocab, merges = train_text(tmp_path, text, 259, [])
    assert merges == [(b"Z", b"Z"), (b"B", b"A"), (b"BA", b"A")]
    keys = [(b"A", b"B"), (b"A", b"C"), (b"B", b"ZZ"), (b"BA", b"A")]
    assert min(keys, key=lambda p: _reversed_order_key(p[0]) + _reversed_order_key(p[1])) == (b"BA", b"A")


def test_wikipedia_example(tmp_path):
    # "aaabdaaabac", one pre-token. (a, a) occurs 4 times (overlapping) and is merged into "aa",
    # leaving aa a b d aa a b a c. Now (aa, a) and (a, b) occur twice each; b"aa" > b"a", so (aa, a)
    # wins the tie (Wikipedia, breaking ties otherwise, merges (a, b) here). Then (aaa, b) occurs twice.
    vocab, merges = train_text(tmp_path, "aaabdaaabac", 259, [])
    assert merges == [(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")]


@given(st.lists(st.binary(min_size=1, max_size=6), min_size=2, max_size=6))
def test_reversed_order_key_reverses_pair_order(tokens):
    pairs = list(zip(tokens, tokens[1:]))
    by_key = sorted(pairs, key=lambda p: _reversed_order_key(p[0]) + _reversed_order_key(p[1]))
    assert by_key == sorted(pairs, reverse=True)


def test_merge_loop_on_counts_directly():
    merges = train_merges({b"low": 5, b"lower": 2, b"newest": 6, b"widest": 3}, 6)
    assert merges == reference_train_counts({b"low": 5, b"lower": 2, b"newest": 6, b"widest": 3}, 6)


def reference_train_counts(word_counts: dict[bytes, int], num_merges: int) -> list[tuple[bytes, bytes]]:
    from tests.reference import merge_word

    words = Counter({tuple(bytes([b]) for b in w): n for w, n in word_counts.items()})
    merges = []
    for _ in range(num_merges):
        pairs = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += n
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        merges.append(best)
        words = Counter({merge_word(w, best): n for w, n in words.items()})
    return merges


# --- the slow reference as oracle ------------------------------------------------------------------

FRAGMENTS = [
    "the", " the", "cat", " sat", "on", " mat", "don't", "it's", "we'll", "they've", "I'm", "you're",
    "she'd", "'s", "'ll", "café", "naïve", "Übermaß", "straße", "привет", " мир", "日本語", "漢字", "中",
    "😀", "👩‍💻", "🇩🇪", "🎉🎉", "123", " 4567", "3.14", "!!", "?", "...", "--", "(x)", "$5", "#",
    " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", " \n", "\r\n", "\u00a0", "\u3000", "\x1c", "aaaa", "abab",
]


@st.composite
def corpora(draw):
    specials = draw(st.lists(st.sampled_from(SPECIALS), unique=True, max_size=3))
    pieces = st.sampled_from(FRAGMENTS) | st.text(alphabet="ab \n'é中😀1", min_size=1, max_size=5)
    if specials:
        pieces = pieces | st.sampled_from(specials)
    text = "".join(draw(st.lists(pieces, max_size=40)))
    minimum = 256 + len(specials)
    vocab_size = minimum + draw(st.integers(0, 120))
    return text, vocab_size, specials


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpora())
def test_matches_reference_on_generated_corpora(tmp_path, case):
    text, vocab_size, specials = case
    assert train_text(tmp_path, text, vocab_size, specials) == reference_train_bpe(text, vocab_size, specials)


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("vocab_size", [300, 700])
def test_matches_reference_on_fixtures(name, vocab_size):
    path = FIXTURES_PATH / f"{name}.txt"
    specials = REFERENCE_RUNS[name][1]
    text = path.read_bytes().decode("utf-8")
    assert run_train_bpe(path, vocab_size, specials) == reference_train_bpe(text, vocab_size, specials)


@pytest.mark.parametrize("name", FIXTURES)
def test_matches_reference_files(name):
    """Compared as CS336 compares with its reference files: merges equal, vocab keys and values equal."""
    vocab_size, specials = REFERENCE_RUNS[name]
    vocab, merges = run_train_bpe(FIXTURES_PATH / f"{name}.txt", vocab_size, specials)
    ref_dir = FIXTURES_PATH / "reference"
    ref_vocab, ref_merges = read_gpt2_files(ref_dir / f"{name}-vocab.json", ref_dir / f"{name}-merges.txt")
    assert merges == ref_merges
    assert set(vocab.keys()) == set(ref_vocab.keys())
    assert set(vocab.values()) == set(ref_vocab.values())


def test_exhausting_pairs_gives_fewer_merges(tmp_path):
    vocab, merges = train_text(tmp_path, "ab ab", 10_000, [])
    assert merges == [(b"a", b"b"), (b" ", b"ab")]
    assert len(vocab) == 258


# --- special tokens --------------------------------------------------------------------------------


def test_special_tokens_are_in_vocab_and_never_merged():
    path = FIXTURES_PATH / "english.txt"
    vocab, merges = run_train_bpe(path, 1000, ["<|endoftext|>"])
    assert vocab[999] == b"<|endoftext|>"
    others = [token for i, token in vocab.items() if i != 999]
    assert not any(b"<|" in token for token in others)
    assert len(vocab) == 1000 and len(set(vocab.values())) == 1000


def test_several_special_tokens_one_a_prefix_of_another(tmp_path):
    text = "x<|a|>y<|a|><|ab|>z<|ab|>zz<|a|>" * 5 + "<|abc|>"
    specials = ["<|a|>", "<|ab|>", "<|a"]
    vocab, merges = train_text(tmp_path, text, 300, specials)
    assert (vocab, merges) == reference_train_bpe(text, 300, specials)
    assert [vocab[i] for i in range(len(vocab) - 3, len(vocab))] == [b"<|a|>", b"<|ab|>", b"<|a"]
    assert not any(b"<|a" in t for t in list(vocab.values())[:-3])


def test_special_tokens_split_documents(tmp_path):
    # Without the split, "a" at the end of one document and "b" at the start of the next would pair.
    vocab, merges = train_text(tmp_path, "xa<|endoftext|>bx" * 3, 300, ["<|endoftext|>"])
    assert (b"a", b"b") not in merges and (b"a", b"<") not in merges


# --- speed (the one timing test: CS336's bound) ----------------------------------------------------


def test_train_bpe_speed():
    start = time.perf_counter()
    run_train_bpe(FIXTURES_PATH / "english.txt", 500, ["<|endoftext|>"])
    assert time.perf_counter() - start < 1.5


# --- the same merges for any number of workers and any cutting -------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_same_merges_for_any_workers_and_piece_size(name):
    path = FIXTURES_PATH / f"{name}.txt"
    specials = REFERENCE_RUNS[name][1]
    expected = run_train_bpe(path, 600, specials, num_workers=1)
    for workers, piece_size in [(2, None), (3, None), (2, 1000), (3, 97), (1, 50)]:
        assert run_train_bpe(path, 600, specials, num_workers=workers, piece_size=piece_size) == expected


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpora(), st.integers(1, 40))
def test_tiny_pieces_change_nothing(tmp_path, case, piece_size):
    text, vocab_size, specials = case
    expected = reference_train_bpe(text, vocab_size, specials)
    assert train_text(tmp_path, text, vocab_size, specials, num_workers=1, piece_size=piece_size) == expected


# --- bad input -------------------------------------------------------------------------------------


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        run_train_bpe(tmp_path / "nope.txt", 300, [])


def test_directory_is_refused(tmp_path):
    with pytest.raises(OSError):
        run_train_bpe(tmp_path, 300, [])


def test_not_utf8_names_the_offset(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"hello world " * 10 + b"\xff oops")
    with pytest.raises(ValueError, match="byte offset 120"):
        run_train_bpe(path, 300, [])


@pytest.mark.parametrize("vocab_size", [0, 255, 256])
def test_vocab_size_below_minimum_names_it(tmp_path, vocab_size):
    path = tmp_path / "c.txt"
    path.write_text("hello")
    with pytest.raises(ValueError, match="minimum 257"):
        run_train_bpe(path, vocab_size, ["<|endoftext|>"])


def test_vocab_size_equal_to_minimum_gives_no_merges(tmp_path):
    vocab, merges = train_text(tmp_path, "hello hello", 257, ["<|endoftext|>"])
    assert merges == [] and len(vocab) == 257 and vocab[256] == b"<|endoftext|>"


@pytest.mark.parametrize("specials", [[""], ["<a>", "<a>"], [None]])
def test_bad_special_tokens(tmp_path, specials):
    path = tmp_path / "c.txt"
    path.write_text("hello")
    with pytest.raises(ValueError, match="special token"):
        run_train_bpe(path, 300, specials)


def test_empty_file_gives_the_bare_vocabulary(tmp_path):
    vocab, merges = train_text(tmp_path, "", 500, ["<|endoftext|>"])
    assert merges == [] and len(vocab) == 257


@pytest.mark.parametrize("num_shards", [2, 3])
def test_merge_loop_shards_change_nothing(num_shards):
    text = (FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8") + (FIXTURES_PATH / "code.txt").read_text()
    counts = Counter(
        p.encode("utf-8") for d in split_documents(text, ["<|endoftext|>"]) for p in regex.findall(GPT2_PATTERN, d)
    )
    assert train_merges(counts, 800, num_shards=num_shards) == train_merges(counts, 800, num_shards=1)
