"""SuperBPE (`train_bpe(..., superword_from=t)`, `bpe train --superword-from`): the stage-2 pattern
against its definition and Hugging Face's pipeline, training against the naive two-stage loop, both
engines giving the same ids, and the word-spanning measures."""

import subprocess
import sys

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer, train_bpe
from cs336_basics.encode import engines
from cs336_basics.report import measures
from cs336_basics.text import patterns
from cs336_basics.train.forced import apply_forced, forced_pairs
from tests.common import FIXTURES_PATH
from tests.reference import reference_superbpe, reference_superbpe_pretokens

# Digits of several kinds (ASCII, Arabic-Indic, superscript two, one half) among letters and spaces.
STAGE2_TEXT = st.text(alphabet="ab 1234567890\u0661\u0662\u00b2\u00bd.\n", max_size=60)
SPECIALS = ["<|endoftext|>"]


@settings(max_examples=300, deadline=None)
@given(STAGE2_TEXT)
def test_the_stage2_pattern_is_its_definition(text):
    assert patterns.get("superbpe").pretokens(text) == reference_superbpe_pretokens(text)


@settings(max_examples=200, deadline=None)
@given(STAGE2_TEXT)
def test_the_stage2_pattern_cuts_as_superbpes_hugging_face_pipeline(text):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.pre_tokenizers import Digits, Sequence, Split

    # The authors' stage-2 pre-tokenizer, without its ByteLevel step (which only maps bytes).
    theirs = Sequence([Digits(individual_digits=False),
                       Split(pattern=tokenizers.Regex(r"(?=(\d{3})+(?!\d))"), behavior="isolated", invert=False)])
    assert patterns.get("superbpe").pretokens(text) == [piece for piece, _ in theirs.pre_tokenize_str(text)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet="ab c\nd.1", max_size=100), st.integers(257, 290), st.integers(0, 30),
       st.sampled_from([[], SPECIALS]))
def test_superbpe_matches_the_naive_two_stage_loop(tmp_path, text, transition, more, specials):
    transition = max(transition, 256 + len(specials))
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8", newline="")
    vocab, merges = train_bpe(path, transition + more, specials, superword_from=transition)
    assert merges == reference_superbpe(text, transition + more, specials, transition)
    assert len(set(vocab.values())) == len(vocab)


@pytest.fixture(scope="module")
def superbpe(tmp_path_factory):
    corpus = FIXTURES_PATH / "english.txt"
    vocab, merges = train_bpe(corpus, 700, SPECIALS, superword_from=500)
    plain_vocab, plain_merges = train_bpe(corpus, 700, SPECIALS)
    return (Tokenizer(vocab, merges, SPECIALS, pattern="superbpe"), Tokenizer(plain_vocab, plain_merges, SPECIALS),
            corpus.read_text(encoding="utf-8"))


def test_superbpe_learns_tokens_that_span_words(superbpe):
    tok, plain, text = superbpe
    spanning = [t for t in tok.vocab.values() if measures.spans_words(t)]
    assert spanning and not any(measures.spans_words(t) for t in plain.vocab.values())
    assert len(tok.encode(text)) < len(plain.encode(text))


def test_superbpe_saves_with_its_pattern_and_both_engines_agree(superbpe, tmp_path):
    tok, _, text = superbpe
    text = text[:20_000] + "<|endoftext|>In 2025, 1234567 people said ١٢٣٤ and ½."
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert engines.encode_text(engines.choose(tok, "tiktoken"), tok, text).tolist() == ids
    assert engines.choose(tok, "auto").engine == "tiktoken"
    tok.save_pretrained(tmp_path / "saved")
    again = Tokenizer.from_pretrained(tmp_path / "saved")
    assert again.pattern == "superbpe" and again.encode(text) == ids
    tokenizers = pytest.importorskip("tokenizers")
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "saved" / "tokenizer.json")).encode(text).ids == ids


def test_word_spanning_measures(superbpe):
    tok, plain, text = superbpe
    sample = text[:5000]
    stats = measures.TextStats()
    stats.add(tok, sample)
    assert 0 < stats.spanning_share < 1
    plain_stats = measures.TextStats()
    plain_stats.add(plain, sample)
    assert plain_stats.spanning_share == 0
    assert measures.spans_words(b"of the") and measures.spans_words(b"it.\n\nThe")
    assert not any(map(measures.spans_words, [b" the", b"the\n", b"\n\nThe", b"  "]))
    rows = dict(measures.measure_rows([stats, plain_stats]))
    assert rows["vocabulary spanning words"][1] == "0" and rows["vocabulary spanning words"][0] != "0"


def test_bpe_train_superword_from(tmp_path):
    corpus = str(FIXTURES_PATH / "english.txt")
    done = subprocess.run([sys.executable, "-m", "cs336_basics.cli", "train", corpus, "--vocab-size", "600",
                           "--superword-from", "450", "--out", str(tmp_path / "s"), "--quiet"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    tok = Tokenizer.from_pretrained(tmp_path / "s")
    assert tok.pattern == "superbpe" and len(tok.vocab) == 600
    assert regex.search("pattern superbpe", done.stdout)


# --- forced merges made before the loop (train/forced.py), against making them one by one ----------

@st.composite
def forced_merges(draw):
    """Merges of tokens made from a few bytes, spaces and newlines among them, each of two tokens
    made before; often a merge makes a token an earlier one made (("a", "ab") after ("aa", "b")),
    or repeats a pair."""
    tokens = [bytes([b]) for b in b"ab \n"]
    merges = []
    for _ in range(draw(st.integers(1, 25))):
        left, right = draw(st.sampled_from(tokens)), draw(st.sampled_from(tokens))
        merges.append((left, right))
        tokens.append(left + right)
    return merges


def one_by_one(words, counts, forced):
    """The words after making each forced merge in turn in every word (what the loop did before),
    and each merge's (count, shrink): its pair's occurrences, overlaps counted, and merges made."""
    pairs = forced_pairs(forced, 21)
    words = [word.decode("latin-1") for word in words]
    log = []
    for k, pair in enumerate(pairs):
        pair = chr(pair >> 21) + chr(pair & (1 << 21) - 1)
        count = sum(n * sum(word[i:i + 2] == pair for i in range(len(word))) for word, n in zip(words, counts))
        merged = [word.replace(pair, chr(256 + k)) for word in words]
        log.append((count, sum(n * (len(a) - len(b)) for a, b, n in zip(words, merged, counts))))
        words = merged
    return words, log


@settings(max_examples=300, deadline=None)
@given(forced_merges(), st.lists(st.tuples(st.text(alphabet="ab \n", min_size=2, max_size=30), st.integers(1, 5)),
                                 max_size=8, unique_by=lambda item: item[0]))
def test_forced_merges_made_before_the_loop_are_the_merges_one_by_one(forced, items):
    words, counts = [w.encode() for w, _ in items], [n for _, n in items]
    expected, expected_log = one_by_one(words, counts, forced)
    got, got_counts, log = apply_forced(list(words), counts, forced, forced_pairs(forced, 21), 21, True)
    assert got == [w for w in expected if len(w) > 1]
    assert got_counts == [n for w, n in zip(expected, counts) if len(w) > 1]
    assert log == expected_log


def test_a_token_made_twice_and_a_long_piece():
    # "aab" made twice, by ("aa", "b") and ("a", "ab"), and named by the first ("aab", "aab");
    # a merge joining across a space; a long piece (no space or newline in it).
    forced = [(b"a", b"a"), (b"a", b"b"), (b"aa", b"b"), (b"a", b"ab"), (b"aab", b" "), (b"aab", b"aab")]
    words = [b"aab aab", b"aaab\naab", b"ab" * 40 + b"aab" * 30, b"aaaab ab"]
    counts = [3, 1, 2, 5]
    expected, expected_log = one_by_one(words, counts, forced)
    got, _, log = apply_forced(list(words), counts, forced, forced_pairs(forced, 21), 21, True)
    assert got == expected and log == expected_log
