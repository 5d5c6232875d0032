"""The trainer: hand-worked examples, the slow reference as oracle, reference files, special tokens,
speed, worker-count independence and bad input."""

import time
from collections import Counter

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.train.merge import _reversed_order_key, train_merges
from cs336_basics.train.reference import count_pretokens, learn_merges, train_bpe_reference
from tests.adapters import run_train_bpe
from tests.common import FIXTURES_PATH, GPT2_PATTERN, OVERLAP_PIECES, OVERLAPPING_SPECIALS
from tests.reference import REFERENCE_RUNS, read_gpt2_files

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
    # The example of docs/behaviour.md: among (A, B), (A, C), (B, ZZ), (BA, A), all once, (BA, A)
    # wins. The corpus first makes ZZ and BA (4 times each; ZZ wins that tie), then those four pairs
    # occur once each.
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
    assert merges == learn_merges({b"low": 5, b"lower": 2, b"newest": 6, b"widest": 3}, 6)[0]




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
    assert train_text(tmp_path, text, vocab_size, specials) == train_bpe_reference(text, vocab_size, specials)


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("vocab_size", [300, pytest.param(700, marks=pytest.mark.slow)])
def test_matches_reference_on_fixtures(name, vocab_size):
    path = FIXTURES_PATH / f"{name}.txt"
    specials = REFERENCE_RUNS[name][1]
    text = path.read_bytes().decode("utf-8")
    assert run_train_bpe(path, vocab_size, specials) == train_bpe_reference(text, vocab_size, specials)


@pytest.mark.parametrize("name", FIXTURES)
def test_matches_reference_files(name):
    """Stricter than CS336's comparison of key and value sets: every id maps to the same bytes."""
    vocab_size, specials = REFERENCE_RUNS[name]
    vocab, merges = run_train_bpe(FIXTURES_PATH / f"{name}.txt", vocab_size, specials)
    ref_dir = FIXTURES_PATH / "reference"
    ref_vocab, ref_merges = read_gpt2_files(ref_dir / f"{name}-vocab.json", ref_dir / f"{name}-merges.txt")
    assert merges == ref_merges
    assert vocab == ref_vocab


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
    assert (vocab, merges) == train_bpe_reference(text, 300, specials)
    assert [vocab[i] for i in range(len(vocab) - 3, len(vocab))] == [b"<|a|>", b"<|ab|>", b"<|a"]
    assert not any(b"<|a" in t for t in list(vocab.values())[:-3])


def test_special_tokens_split_documents(tmp_path):
    # Worked by hand. The documents are "xa", "bxxa", "bxxa", "bx": pre-tokens xa x1, bxxa x2, bx x1.
    # Pairs: (x, a) 3, (b, x) 3, (x, x) 2; the tie goes to the greater (x, a). Then (b, x) 3, then
    # (bx, xa) 2, and no pair is left. Text that ignored the special token would count "<|", "|>",
    # "endoftext" and their pairs three times each.
    vocab, merges = train_text(tmp_path, "xa<|endoftext|>bx" * 3, 300, ["<|endoftext|>"])
    assert merges == [(b"x", b"a"), (b"b", b"x"), (b"bx", b"xa")]
    assert vocab == {i: bytes([i]) for i in range(256)} | {256: b"xa", 257: b"bx", 258: b"bxxa", 259: b"<|endoftext|>"}


def test_special_tokens_are_matched_longest_first_whatever_their_order(tmp_path):
    # "<|a" is a prefix of "<|a|>" and listed first. Matched first, it would leave "|>" as text, whose
    # pair (|, >) would be the most frequent (5 times) and merged first.
    text = "<|a|>ok<|a|>ok<|a|>ok<|a|>no<|a|>!<|a"
    vocab, merges = train_text(tmp_path, text, 260, ["<|a", "<|a|>"])
    # Documents "ok" x3, "no", "!": (o, k) 3 is merged, then the only pair left, (n, o).
    assert merges == [(b"o", b"k"), (b"n", b"o")]
    assert vocab[258] == b"<|a" and vocab[259] == b"<|a|>"
    assert (vocab, merges) == train_bpe_reference(text, 260, ["<|a", "<|a|>"])


@st.composite
def overlapping_corpora(draw):
    specials = draw(st.sampled_from(OVERLAPPING_SPECIALS))
    pieces = st.sampled_from(OVERLAP_PIECES + specials)
    text = "".join(draw(st.lists(pieces, min_size=1, max_size=40)))
    return text, 256 + len(specials) + draw(st.integers(0, 40)), specials


@pytest.mark.parametrize(
    "text, specials",
    [
        # One-off errors in the coverage test of cutting.find_safe_cut cut at the start of "<x>>" inside
        # "<<x>>" (a token starting one byte before the cut) ...
        ("a<<x>>b <<x>> c<x>>d  <<x>><<x>> ee<<x>>>x> " * 3, ["<<x>>", "<x>>"]),
        # ... or at the start of "]bb[" inside "[aa]bb[" (a token ending one byte after the cut).
        ("xx[aa]bb[ [aa]bb[aa]bb[ yy" * 3, ["[aa]", "]bb["]),
    ],
)
def test_overlapping_special_tokens_at_small_piece_sizes(tmp_path, text, specials):
    expected = train_bpe_reference(text, 280, specials)
    for piece_size in range(1, 30):
        assert train_text(tmp_path, text, 280, specials, num_workers=1, piece_size=piece_size) == expected, piece_size


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(overlapping_corpora(), st.integers(1, 16))
def test_overlapping_special_tokens_any_piece_size(tmp_path, case, piece_size):
    text, vocab_size, specials = case
    expected = train_bpe_reference(text, vocab_size, specials)
    assert train_text(tmp_path, text, vocab_size, specials, num_workers=1, piece_size=piece_size) == expected


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
    expected = train_bpe_reference(text, vocab_size, specials)
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
    counts = count_pretokens(text, ["<|endoftext|>"])
    assert train_merges(counts, 800, num_shards=num_shards) == train_merges(counts, 800, num_shards=1)


# --- the merge loop split among processes ----------------------------------------------------------


class InProcessShard:
    """A stand-in for `merge._RemoteShard` that merges in this process, so that the loop's dealings
    with its shards (the next pair chosen before their changes are in) can be checked on many
    inputs fast. It answers in order, as the process would, and only what was asked."""

    def start(self, words, counts, long, forced, log):
        from cs336_basics.train import merge

        self.shard, forced_log = merge._prepared_shard(words, counts, long, forced, log)
        self.answers = [merge._first_answer(self.shard, forced_log)]

    def send_merge(self, pair, new):
        from cs336_basics.train import merge

        self.answers.append(merge._answer(self.shard, pair, new))

    def receive(self):
        return self.answers.pop(0)

    def close(self):
        pass


def _chosen_early(monkeypatch) -> list[bool]:
    """Record, for each pair chosen while a merge's remote changes were not in, whether it was
    taken then."""
    from cs336_basics.train import merge, pair_queue

    seen: list[bool] = []
    check = pair_queue.Unheard.cannot_change

    def recorded(self, pair, count):
        seen.append(check(self, pair, count))
        return seen[-1]

    monkeypatch.setattr(merge, "_RemoteShard", InProcessShard)
    monkeypatch.setattr(pair_queue.Unheard, "cannot_change", recorded)
    return seen


_small_words = st.dictionaries(
    st.text("abc d", min_size=1, max_size=10).map(str.encode), st.integers(1, 30), min_size=1, max_size=25
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_small_words, st.integers(2, 3))
def test_choosing_the_next_pair_before_the_shards_answer_changes_nothing(monkeypatch, counts, num_shards):
    # Few letters and small counts make many ties and near ties, and pairs that a merge's remote
    # changes raise past the best one without them: the oracle is the plain loop over all words.
    _chosen_early(monkeypatch)
    log: list[tuple[int, int]] = []
    merges = train_merges(counts, 40, num_shards=num_shards, merge_log=log)
    expected_merges, expected_log = learn_merges(counts, 40)
    assert merges == expected_merges
    tokens = sum(len(w) * n for w, n in counts.items())
    assert [(count, tokens := tokens - shrink) for count, shrink in log] == expected_log


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_small_words, _small_words, st.integers(2, 3), st.integers(0, 12), st.sampled_from([1, 3, 256]))
def test_forced_merges_made_by_each_shard_add_up_to_the_whole(monkeypatch, counts, other, num_shards, num_forced, long):
    # Each shard makes the forced merges on its own words and logs them: the logs added up, and the
    # merges after, must be those of one shard holding every word (long words too, `long` small).
    from cs336_basics.train import merge

    forced = train_merges(other, num_forced)
    expected_log: list[tuple[int, int]] = []
    expected = train_merges(counts, len(forced) + 8, forced=forced, merge_log=expected_log)
    monkeypatch.setattr(merge, "_RemoteShard", InProcessShard)
    monkeypatch.setattr(merge, "_LONG", long)
    log: list[tuple[int, int]] = []
    assert train_merges(counts, len(forced) + 8, num_shards=num_shards, forced=forced, merge_log=log) == expected
    assert log == expected_log


@pytest.mark.slow
def test_the_next_pair_is_often_chosen_before_the_shards_answer(monkeypatch):
    seen = _chosen_early(monkeypatch)
    text = (FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8")
    counts = count_pretokens(text, ["<|endoftext|>"])
    assert train_merges(counts, 500, num_shards=2) == learn_merges(counts, 500)[0]
    # Both ways are taken: 55% of pairs early here (87% on a 32 MB corpus, whose counts are larger).
    assert seen.count(True) > len(seen) / 3 and False in seen


@pytest.mark.parametrize("workers", [2, 3])
def test_sharded_training_through_train_bpe(tmp_path, monkeypatch, workers):
    # train_bpe shards the merge loop only past trainer.PARALLEL_MIN_WORDS distinct pre-tokens; lower it so
    # that small corpora take that path (the stats say how many workers were used).
    from cs336_basics.train import trainer
    from cs336_basics.train import merge

    started = []

    class CountedShard(merge._RemoteShard):
        def start(self, words, counts, long, forced, log):
            started.append(len(words))
            super().start(words, counts, long, forced, log)

    monkeypatch.setattr(trainer, "PARALLEL_MIN_WORDS", 1)
    monkeypatch.setattr(merge, "_RemoteShard", CountedShard)
    text = "xa<|endoftext|>bx" * 3 + "".join(FRAGMENTS) * 2
    result = train_text(tmp_path, text, 400, ["<|endoftext|>"], num_workers=workers, piece_size=64)
    assert len(started) == workers - 1 and all(started)  # this process holds one shard, workers the others
    assert result == train_bpe_reference(text, 400, ["<|endoftext|>"])


def _child_pids() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.mark.parametrize("after_merges, how, code", [(0, "exit", 7), (5, "exit", 7), (3, "raise", 1)])
def test_a_dying_merge_worker_is_a_clear_error(monkeypatch, after_merges, how, code):
    from cs336_basics.train import merge

    counts = {w.encode(): n for n, w in enumerate(["hello", "world", "yellow", "mellow", "low", "owl"] * 3, start=1)}
    before = _child_pids()
    # The shard processes run tests/dying_shard.py, which answers `after_merges` merges, then dies.
    monkeypatch.setattr(merge, "_SHARD_SERVER", "tests.dying_shard:serve")
    monkeypatch.setenv("DYING_SHARD_AFTER", str(after_merges))
    monkeypatch.setenv("DYING_SHARD_HOW", how)
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match=rf"merge worker process \(\d+\) died \(exit code {code};"):
        train_merges(counts, 50, num_shards=3)
    assert time.perf_counter() - started < 30
    assert _child_pids() == before  # every worker is gone, the live ones too


# --- where the corpus may be cut: cutting.find_safe_cut against its definition -----------------------

_ASCII_WS = b"\t\n\x0b\x0c\r "


def is_safe_cut(data: bytes, c: int, specials: list[bytes]) -> bool:
    """The definition in corpus's docstring, checked the slow way."""
    starts_special = any(data.startswith(s, c) for s in specials)
    word_then_space = 0 < c < len(data) and data[c - 1] < 0x80 and data[c - 1] not in _ASCII_WS and data[c] in _ASCII_WS
    spanned = any(data.startswith(s, i) and i + len(s) > c for s in specials for i in range(max(c - len(s) + 1, 0), c))
    return (starts_special or word_then_space) and not spanned


@settings(max_examples=150, deadline=None)
@given(
    # A one-character special token is refused in training but allowed in encode_file, which cuts too;
    # a special token holding a space spans the cut between words that it holds.
    st.sampled_from([[], ["<|endoftext|>"], ["|", "<|"], ["<a b>", "b>"], *OVERLAPPING_SPECIALS]),
    st.sampled_from([1, 2, 3, 5, 8, 1 << 16]),
    st.data(),
)
def test_find_safe_cut_is_the_first_safe_cut(specials, window, data):
    pieces = st.sampled_from(OVERLAP_PIECES + ["é", "\t", "ab cd", "|", "<a"] + specials * 3)
    check_find_safe_cut("".join(data.draw(st.lists(pieces, max_size=30))).encode(), specials, window)


@pytest.mark.parametrize(
    "text, specials",
    [("<<x>><x>><x>>", ["<<x>>", "<x>>"]), ("[aa]bb[aa]bb[aa]", ["[aa]", "]bb["]), ("a<||||b", ["|", "<|"]),
     ("%%%%%%", ["%%%", "%%"]), ("x<a b> y b> <a b>", ["<a b>", "b>"])],
)
def test_find_safe_cut_examples(text, specials):
    for window in (1, 2, 3, 1 << 16):
        check_find_safe_cut(text.encode(), specials, window)


def check_find_safe_cut(text: bytes, specials: list[str], window: int) -> None:
    """find_safe_cut gives the first safe cut at every target, for several stops."""
    import io

    from cs336_basics.corpora import cutting

    encoded = [s.encode() for s in specials]
    cuts = [c for c in range(1, len(text)) if is_safe_cut(text, c, encoded)]
    old = cutting.SEARCH_WINDOW
    cutting.SEARCH_WINDOW = window  # small windows make the search cross window edges
    try:
        for stop in [len(text), *cuts[:: max(len(cuts) // 4, 1)]]:
            for target in range(len(text) + 2):
                expected = min((c for c in cuts if max(target, 1) <= c < stop), default=stop)
                assert cutting.find_safe_cut(io.BytesIO(text), target, stop, encoded) == expected, (target, stop)
    finally:
        cutting.SEARCH_WINDOW = old


# --- building blocks of counting and merging, on hand-worked values ---------------------------------


def test_reversed_order_key_values():
    assert _reversed_order_key(b"") == "\u0100"
    assert _reversed_order_key(b"\x00\xffA") == "\xff\x00\xbe\u0100"


@pytest.mark.parametrize(
    "chunk, pretokens",
    [(" word", [" word"]), ("word", ["word"]), (" 1abc", [" 1", "abc"]), (" !ab", [" !", "ab"]), ("  a", [" ", " a"]),
     (" é1", [" é", "1"]), ("don't", ["don", "'t"])],
)
def test_pretokenize_chunk_examples(chunk, pretokens):
    from cs336_basics.text.pretokenize import pretokenize_chunk

    assert pretokenize_chunk(chunk) == pretokens == regex.findall(GPT2_PATTERN, chunk)


def test_count_chunks_makes_its_own_counter():
    from cs336_basics.text.pretokenize import count_chunks, special_token_regex

    assert count_chunks("a b<|x|>a b", special_token_regex(["<|x|>"])) == Counter({"a": 2, " b": 2})


def test_train_merges_reports_each_merge_restores_gc_and_starts_no_process(monkeypatch):
    import gc

    from cs336_basics.train import merge

    def no_process(*args):
        raise AssertionError("one shard needs no process")

    monkeypatch.setattr(merge, "_RemoteShard", no_process)
    done = []
    assert gc.isenabled()
    merges = train_merges({b"low": 5, b"lower": 2, b"newest": 6, b"widest": 3}, 6, on_merge=done.append)
    assert gc.isenabled()
    assert done == [1, 2, 3, 4, 5, 6] and len(merges) == 6


# --- the pair queue: the most frequent pair, ties to the greatest bytes, against a plain max --------

_QUEUE_TOKENS = [b"a", b"b", b"ab", b"ba", b"aab", b"\xff", b"\xff\x00", b"", b"\x00"]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_pair_queue_pops_what_a_plain_max_would(data):
    # The queue keeps most pairs out of its heap (below a floor that halves as counts fall) and
    # files stale entries again; a plain max over the counts is the oracle. Counts may only rise
    # for pairs that are absent (as in the merge loop, where only new pairs gain).
    from cs336_basics.train.merge import _pair_chars, _pair_id
    from cs336_basics.train.pair_queue import PairQueue

    tokens = _QUEUE_TOKENS[:-2] + [bytes([i]) for i in range(256)]  # distinct byte strings
    chars = [chr(i) for i in range(len(tokens))]
    token_key = [_reversed_order_key(t) for t in tokens]
    pair = st.tuples(st.sampled_from(chars), st.sampled_from(chars)).map("".join).map(_pair_id)
    counts = data.draw(st.dictionaries(pair, st.integers(1, 5000), max_size=30))
    queue = PairQueue(dict(counts), token_key)

    def oracle_best():
        live = [(n, tokens[ord(_pair_chars(p)[0])], tokens[ord(_pair_chars(p)[1])], p) for p, n in counts.items() if n > 0]
        return max(live)[3] if live else None

    for _ in range(data.draw(st.integers(1, 40))):
        expected = oracle_best()
        got = queue.pop_best()
        assert (got and got[0]) == expected
        if got is None:
            break
        assert got[1] == counts.pop(expected)
        change: dict[int, int] = {}
        for p in data.draw(st.lists(st.sampled_from(sorted(counts)), max_size=5)) if counts else []:
            change[p] = change.get(p, 0) - data.draw(st.integers(0, counts[p] + change.get(p, 0)))
        for p in data.draw(st.lists(pair, max_size=5)):
            if counts.get(p, 0) == 0 and p not in change:
                change[p] = data.draw(st.integers(1, 6000))
        gained = queue.apply(change.items())
        assert sorted(gained) == sorted(p for p, d in change.items() if d > 0)
        for p, d in change.items():
            counts[p] = counts.get(p, 0) + d
        queue.file(gained)


def test_allocator_knobs_do_nothing_where_the_c_library_lacks_them(monkeypatch):
    # glibc has both calls; elsewhere (macOS, Windows, musl) training must run all the same.
    from cs336_basics.train import allocator

    allocator.release_freed_memory()
    allocator.return_large_blocks_at_once()
    expected = train_merges({b"low": 5, b"lower": 2}, 3)
    assert expected == [(b"o", b"w"), (b"l", b"ow"), (b"low", b"e")]
    for libc in (None, object()):
        monkeypatch.setattr(allocator, "_libc", lambda libc=libc: libc)
        allocator.release_freed_memory()
        allocator.return_large_blocks_at_once()
        assert train_merges({b"low": 5, b"lower": 2}, 3) == expected
