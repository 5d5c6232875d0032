"""SuperBPE (`train_bpe(..., superword_from=t)`, `bpe train --superword-from`): the stage-2 patterns
against Hugging Face's pipelines (the released one's Split, the preprint's Digits and Split) and the
preprint's definition, training against the naive two-stage loop with the released limits, the
preprint's recipe pinned to the merges it gave before the released one came, both engines giving
the same ids, saving and loading, extending a tokenizer, and the word-spanning measures."""

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
from cs336_basics.train.merge import train_merges
from cs336_basics.train.pair_queue import superword_limits
from cs336_basics.train.reference import learn_merges
from tests.common import FIXTURES_PATH
from tests.reference import reference_superbpe, reference_superbpe_pretokens

# Digits of several kinds (ASCII, Arabic-Indic, superscript two, one half) among letters and spaces.
STAGE2_TEXT = st.text(alphabet="ab 1234567890\u0661\u0662\u00b2\u00bd.\n", max_size=60)
SPECIALS = ["<|endoftext|>"]


@settings(max_examples=300, deadline=None)
@given(STAGE2_TEXT)
def test_the_preprints_stage2_pattern_is_its_definition(text):
    assert patterns.get("superbpe-v1").pretokens(text) == reference_superbpe_pretokens(text)


@settings(max_examples=200, deadline=None)
@given(STAGE2_TEXT)
def test_the_preprints_stage2_pattern_cuts_as_its_hugging_face_pipeline(text):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.pre_tokenizers import Digits, Sequence, Split

    # The authors' stage-2 pre-tokenizer, without its ByteLevel step (which only maps bytes).
    theirs = Sequence([Digits(individual_digits=False),
                       Split(pattern=tokenizers.Regex(r"(?=(\d{3})+(?!\d))"), behavior="isolated", invert=False)])
    assert patterns.get("superbpe-v1").pretokens(text) == [piece for piece, _ in theirs.pre_tokenize_str(text)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet="ab c\nd.1", max_size=100), st.integers(257, 290), st.integers(0, 30),
       st.sampled_from([[], SPECIALS]))
def test_the_preprints_recipe_matches_the_naive_two_stage_loop(tmp_path, text, transition, more, specials):
    transition = max(transition, 256 + len(specials))
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8", newline="")
    vocab, merges = train_bpe(path, transition + more, specials, superword_from=transition,
                              superword_pattern="superbpe-v1")
    assert merges == reference_superbpe(text, transition + more, specials, transition)
    assert len(set(vocab.values())) == len(vocab)


# --- the released recipe: the authors' Split, and the limits on stage-2 tokens ---------------------

# Text where the released Split matters: colons before spaces, runs of spaces, digits of several kinds,
# punctuation runs with line breaks and slashes after them, tabs and carriage returns.
RELEASED_TEXT = st.text(alphabet="ab  :.,/\n\r\t1234\u0661\u00b2\u00bd\u00a0é-", max_size=80)
# Corpora for training: a few phrases of words (some ending in a colon, numbers, punctuation runs)
# repeated with separators (colons before spaces, runs of spaces, lines), so that stage 2 reaches
# tokens of several words and the limits pass over some pairs (in some 40% of the examples).
WORD = st.sampled_from(["a", "b", "ab", "ba", "a:", "b:", "1", "123", "4567", "::", "a.", "/"])
PHRASE = st.lists(WORD, min_size=1, max_size=7).map(" ".join)
SEPARATOR = st.sampled_from([" ", " ", "  ", "\n", "\n\n", ": ", ". ", "... "])
CORPUS = st.lists(PHRASE, min_size=1, max_size=4).flatmap(
    lambda pool: st.lists(st.tuples(st.sampled_from(pool), SEPARATOR), max_size=30).map(
        lambda items: "".join(phrase + separator for phrase, separator in items)))


def hf_isolated(split: str):
    """Hugging Face's own Split of `split` with behavior Isolated, as SuperBPE's authors' scripts build it:
    a document's pieces."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.pre_tokenizers import Split

    theirs = Split(tokenizers.Regex(split), behavior="isolated")
    return lambda text: [piece for piece, _ in theirs.pre_tokenize_str(text)]


def released_limits(max_words: int, colon_rule: bool):
    """The limits as the issue states them, written apart from the package's: no `": "` (with the
    colon rule), at most `max_words` non-empty parts between spaces (0: no limit)."""
    def allows(token: bytes) -> bool:
        if colon_rule and b": " in token:
            return False
        return not max_words or len([w for w in token.split(b" ") if w]) <= max_words
    return allows


# The authors' released regex, and one that keeps punctuation and line breaks out of superwords (as
# PythonNut/superbpe#9 asks): its punctuation alone, and whitespace holding a line break, stand apart.
RELEASED = r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)"
NO_PUNCTUATION = r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+| +(?!\S)"


@settings(max_examples=300, deadline=None)
@given(RELEASED_TEXT)
def test_the_stage2_pattern_cuts_as_superbpes_hugging_face_pipeline(text):
    expected = hf_isolated(RELEASED)(text)
    assert patterns.get("superbpe").pretokens(text) == expected
    assert regex.findall(patterns.regex_string("superbpe"), text) == expected  # the regex tiktoken is given
    assert patterns.SUPERBPE_SPLIT == RELEASED


@settings(max_examples=200, deadline=None)
@given(RELEASED_TEXT)
def test_a_superword_pattern_regex_is_read_as_an_isolated_split(text):
    pattern = patterns.superword_pattern(NO_PUNCTUATION)
    assert patterns.get(pattern).pretokens(text) == hf_isolated(NO_PUNCTUATION)(text)


def test_superword_pattern_names_and_refusals():
    assert patterns.superword_pattern("superbpe") == "superbpe"
    assert patterns.superword_pattern("superbpe-v1") == "superbpe-v1"
    assert patterns.superword_pattern(RELEASED) == patterns.isolated(RELEASED)
    for bad, says in [("superbpe-v2", "unknown pattern name"), ("(a)|b", "capturing group"), ("a*", "empty string"),
                      ("[a", "not a valid regex")]:
        with pytest.raises(ValueError, match=says):
            patterns.superword_pattern(bad)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(CORPUS, st.integers(257, 275), st.integers(0, 60), st.sampled_from([[], SPECIALS]),
       st.sampled_from([None, 0, 1, 2, 4]), st.sampled_from([None, True, False]))
def test_superbpe_matches_the_naive_two_stage_loop(tmp_path, text, transition, more, specials, max_words, colon_rule):
    """The reference loop with the stage-1 merges forced, Hugging Face's Split for the stage-2
    pieces, and the pairs filtered by the limits (by default 4 words and the colon rule)."""
    text = text.replace("\n\n", SPECIALS[0]) if specials else text
    transition = max(transition, 256 + len(specials))
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8", newline="")
    vocab, merges = train_bpe(path, transition + more, specials, superword_from=transition,
                              superword_max_words=max_words, superword_colon_rule=colon_rule)
    allows = released_limits(4 if max_words is None else max_words, colon_rule is not False)
    assert merges == reference_superbpe(text, transition + more, specials, transition, stage2=hf_isolated(RELEASED),
                                        allows=allows)
    assert len(set(vocab.values())) == len(vocab)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(alphabet="ab :", min_size=2, max_size=12).map(str.encode), st.integers(1, 6),
                       min_size=1, max_size=12),
       st.integers(0, 40), st.sampled_from([1, 2]), st.sampled_from([1, 2, 3]))
def test_the_merge_loop_passes_over_pairs_the_limits_refuse_with_shards_too(counts, num_merges, shards, max_words):
    """Straight through the merge loop, also with a second shard whose changes come in late (a
    passed-over pair may come up again when they do)."""
    allows = released_limits(max_words, True)
    expected, expected_log = learn_merges(counts, num_merges, allows=allows)
    log: list = []
    got = train_merges(dict(counts), num_merges, num_shards=shards, merge_log=log,
                       allows=superword_limits(max_words, True))
    assert got == expected
    assert [count for count, _ in log] == [count for count, _ in expected_log]


# The merges of the preprint's recipe before the released one came (`superword_from=T` then; saved by
# tests/fixtures/reference/superbpe_v1_merges.json's maker, the code of `numbers_text` below with it).
V1_MERGES = FIXTURES_PATH / "reference" / "superbpe_v1_merges.json"


def numbers_text(seed=40, n=3000):
    """Generated text with numbers, colons, runs of spaces and lines (the third corpus of V1_MERGES)."""
    import random

    rng = random.Random(seed)
    words = ["the", "cat", "sat", "on", "mat", "total", "price", "Note", "id", "x"]
    parts = []
    for _ in range(n):
        k = rng.randrange(10)
        if k < 5:
            parts.append(rng.choice(words))
        elif k < 7:
            parts.append(str(rng.randrange(10 ** rng.randrange(1, 9))))
        elif k == 7:
            parts.append(rng.choice([": ", ":", " - ", "...", "//", "\n", "\n\n", "   "]))
        else:
            parts.append(rng.choice([" ", "  ", ", "]))
        parts.append(" " if rng.randrange(3) else "")
    return "".join(parts)


@pytest.mark.parametrize("name", ["english.txt", "code.txt", "numbers"])
def test_the_preprints_recipe_gives_the_merges_it_gave_before(name, tmp_path):
    import json

    pinned = json.loads(V1_MERGES.read_text(encoding="utf-8"))[name]
    path = FIXTURES_PATH / name
    if name == "numbers":
        path = tmp_path / "numbers.txt"
        path.write_text(numbers_text(), encoding="utf-8", newline="")
    expected = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in pinned["merges"]]
    _, merges = train_bpe(path, pinned["vocab_size"], SPECIALS, superword_from=pinned["superword_from"],
                          superword_pattern="superbpe-v1")
    assert merges == expected
    # The released recipe differs there: the limits pass over what the preprint's made.
    _, released = train_bpe(path, pinned["vocab_size"], SPECIALS, superword_from=pinned["superword_from"])
    stage2 = [a + b for a, b in released[pinned["superword_from"] - 257:]]
    assert not any(b": " in t or measures.word_count(t) > 4 for t in stage2)
    if any(b": " in a + b or measures.word_count(a + b) > 4 for a, b in expected):
        assert released != expected


def test_the_options_need_superword_from_and_are_checked(tmp_path):
    path = FIXTURES_PATH / "english.txt"
    for options, says in [({"superword_pattern": "superbpe"}, "give superword_from"),
                          ({"superword_from": 300, "superword_max_words": -1}, "superword_max_words"),
                          ({"superword_from": 300, "superword_colon_rule": 1}, "superword_colon_rule"),
                          ({"superword_from": True}, "start_from"),
                          ({"superword_from": 300, "superword_pattern": "nope"}, "unknown pattern name")]:
        with pytest.raises(ValueError, match=says):
            train_bpe(path, 400, SPECIALS, **options)


def test_superword_from_true_starts_at_the_base_and_keeps_its_ids(tmp_path):
    corpus = FIXTURES_PATH / "english.txt"
    base_vocab, base_merges = train_bpe(corpus, 400, SPECIALS)
    base = Tokenizer(base_vocab, base_merges, SPECIALS)
    vocab, merges = train_bpe(corpus, 480, SPECIALS, start_from=base, superword_from=True)
    assert (vocab, merges) == train_bpe(corpus, 480, SPECIALS, start_from=base, superword_from=400)
    assert all(vocab[i] == token for i, token in base_vocab.items()) and merges[:len(base_merges)] == base_merges
    stage2 = [a + b for a, b in merges[len(base_merges):]]
    assert any(measures.spans_words(t) for t in stage2)
    assert not any(b": " in t or measures.word_count(t) > 4 for t in stage2)
    # The command line: --superword-from without T, after INPUT, is the same.
    base.save_pretrained(tmp_path / "base")
    done = subprocess.run([sys.executable, "-m", "cs336_basics.cli", "train", str(corpus), "--start-from",
                           str(tmp_path / "base"), "--vocab-size", "480", "--superword-from", "--out",
                           str(tmp_path / "s"), "--quiet"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    tok = Tokenizer.from_pretrained(tmp_path / "s")
    assert (tok.vocab, tok.merges, tok.pattern) == (vocab, merges, "superbpe")


def test_a_tokenizer_with_a_custom_superword_pattern_saves_loads_and_encodes_as_it_trained(tmp_path):
    text = (FIXTURES_PATH / "code.txt").read_text(encoding="utf-8")
    vocab, merges = train_bpe(FIXTURES_PATH / "code.txt", 600, SPECIALS, superword_from=420,
                              superword_pattern=NO_PUNCTUATION)
    pattern = patterns.superword_pattern(NO_PUNCTUATION)
    tok = Tokenizer(vocab, merges, SPECIALS, pattern=pattern)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    # Each piece of training's pre-tokenization encodes alone to the same tokens: encode cuts the same.
    pieces = hf_isolated(NO_PUNCTUATION)(text.replace(SPECIALS[0], ""))
    assert [t for p in pieces for t in tok.encode(p)] == tok.encode(text.replace(SPECIALS[0], ""))
    tok.save_pretrained(tmp_path / "saved")
    again = Tokenizer.from_pretrained(tmp_path / "saved")
    assert again.pattern == pattern and again.encode(text) == ids
    tokenizers = pytest.importorskip("tokenizers")
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "saved" / "tokenizer.json")).encode(text).ids == ids


def test_the_authors_tokenizer_json_layout_reads_as_superbpe(tmp_path):
    """A tokenizer.json as SuperBPE's authors release theirs (their Split, then ByteLevel without its
    regex) loads with pattern "superbpe" and encodes as Hugging Face does."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers

    vocab, merges = train_bpe(FIXTURES_PATH / "english.txt", 600, SPECIALS, superword_from=450)
    Tokenizer(vocab, merges, SPECIALS, pattern="superbpe").save_pretrained(tmp_path / "ours")
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "ours" / "tokenizer.json"))
    theirs.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(tokenizers.Regex(RELEASED), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    theirs.decoder = decoders.ByteLevel()
    assert isinstance(theirs.model, models.BPE)
    theirs.save(str(tmp_path / "theirs.json"))
    loaded = Tokenizer.from_pretrained(tmp_path / "theirs.json")
    text = (FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")[:5000] + " Note:  12345 ...\n//x"
    assert loaded.pattern == "superbpe" and loaded.encode(text) == theirs.encode(text).ids


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
    check_saved_and_both_engines(tok, text, tmp_path)


def test_the_preprints_recipe_saves_with_its_pattern_and_both_engines_agree(tmp_path):
    vocab, merges = train_bpe(FIXTURES_PATH / "english.txt", 700, SPECIALS, superword_from=500,
                              superword_pattern="superbpe-v1")
    tok = Tokenizer(vocab, merges, SPECIALS, pattern="superbpe-v1")
    check_saved_and_both_engines(tok, (FIXTURES_PATH / "english.txt").read_text(encoding="utf-8"), tmp_path)


def check_saved_and_both_engines(tok, text, tmp_path):
    """Our engine, tiktoken's, the tokenizer saved and loaded, and Hugging Face's on its tokenizer.json
    give the same ids, on text with digits of several kinds, colons, runs of spaces and punctuation."""
    text = text[:20_000] + "<|endoftext|>In 2025, 1234567 people said ١٢٣٤ and ½. Note:  a\n\n...  //x  \r\n"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert engines.encode_text(engines.choose(tok, "tiktoken"), tok, text).tolist() == ids
    assert engines.choose(tok, "auto").engine == "tiktoken"
    tok.save_pretrained(tmp_path / "saved")
    again = Tokenizer.from_pretrained(tmp_path / "saved")
    assert again.pattern == tok.pattern and again.encode(text) == ids
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


def test_the_command_line_options_match_the_function(tmp_path, capsys):
    from cs336_basics.cli import main

    corpus = FIXTURES_PATH / "code.txt"
    for flags, options in [(["--superword-pattern", "superbpe-v1"], {"superword_pattern": "superbpe-v1"}),
                           (["--superword-max-words", "2", "--superword-allow-colon-space"],
                            {"superword_max_words": 2, "superword_colon_rule": False}),
                           (["--superword-pattern", NO_PUNCTUATION], {"superword_pattern": NO_PUNCTUATION})]:
        out = tmp_path / str(len(flags)) / "tok"
        assert main(["train", str(corpus), "--vocab-size", "560", "--superword-from", "420", *flags, "--out", str(out),
                     "--quiet"]) == 0
        vocab, merges = train_bpe(corpus, 560, SPECIALS, superword_from=420, **options)
        tok = Tokenizer.from_pretrained(out)
        assert (tok.vocab, tok.merges) == (vocab, merges)
        assert tok.pattern == patterns.superword_pattern(options.get("superword_pattern", "superbpe"))
    capsys.readouterr()
    for flags, says in [(["--superword-max-words", "2"], "give --superword-from too"),
                        (["--superword-from"], "give --start-from"),
                        (["--superword-from", "420", "--superword-pattern", "superbpe2"], "unknown pattern name")]:
        assert main(["train", str(corpus), "--vocab-size", "560", *flags, "--out", str(tmp_path / "x"), "--quiet"]) != 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("bpe: ") and says in err[0], err


def test_the_share_of_superwords_of_more_than_4_words(tmp_path):
    """`bpe stats`'s row: among the text's tokens spanning words, those of more than 4 words (the
    non-empty parts between spaces): none for the released recipe, some for the preprint's."""
    corpus = FIXTURES_PATH / "english.txt"
    text = corpus.read_text(encoding="utf-8")[:30_000]
    columns = []
    for stage2 in ["superbpe", "superbpe-v1"]:
        vocab, merges = train_bpe(corpus, 800, SPECIALS, superword_from=500, superword_pattern=stage2)
        tok = Tokenizer(vocab, merges, SPECIALS, pattern=stage2)
        stats, rest = measures.TextStats(), measures.TextStats()
        stats.add(tok, text[:10_000])
        rest.add(tok, text[10_000:])
        stats.update(rest)  # as bpe stats adds up its texts
        spanning = [i for i in tok.encode(text[:10_000]) + tok.encode(text[10_000:]) if measures.spans_words(vocab[i])]
        many = [i for i in spanning if len([w for w in vocab[i].split(b" ") if w]) > 4]
        assert stats.many_words_share == len(many) / len(spanning)
        columns.append(stats)
    released, v1 = columns
    assert released.many_words_share == 0 < v1.many_words_share
    row = dict(measures.measure_rows(columns))["superwords of 5+ words (%)"]
    assert row == ["0.00", f"{100 * v1.many_words_share:.2f}"]
