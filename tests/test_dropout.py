"""BPE-dropout (`encode(text, dropout=p, seed=s)`, see `encode/dropout.py`) against its oracles.

- Plain BPE: with no drop the replay of Hugging Face's `merge_all` (`simulate`) gives `encode`'s
  tokens, and a probability too small to drop anything gives `encode`'s ids through the dropout path.
- The exact distribution: on a three-merge vocabulary where a stale queue entry gives a dropped merge
  a second chance, every drop pattern is enumerated and the probabilities summed, against the
  values worked out by hand (which Hugging Face's `tokenizers` also gives, sampled).
- Hugging Face's `BPE(dropout=p)` on the same vocabulary (ours saved with `save_pretrained`, its
  model rebuilt with `dropout`): mean tokens per text and each token's share, over many runs.
- Invariants on generated text: every output decodes to the input; p = 1 gives bytes with special
  tokens whole; the same seed gives the same ids (on a fresh tokenizer too, through
  `encode_iterable` in any pieces, `encode_batch` with any number of processes, `bpe encode` with
  any number of workers); different seeds differ on long text; tiktoken is never used with dropout.
"""

import itertools
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import main
from cs336_basics.encode import engines
from cs336_basics.encode.dropout import draws_with_stale_dropped, simulate
from cs336_basics.encode.encoder import build_merge_table, merge_chars
from tests.adapters import run_train_bpe
from tests.common import FIXTURES_PATH

EOT = "<|endoftext|>"

TEXT = st.lists(
    st.sampled_from(
        [" the", " and", "the", " of", "ing", " was", ",", ".", "!", "'s", " ", "  ", "\n", "\n\n", "\t", "123",
         " Straße", " über", "中文", " 😀", "a", "Z", " internationalization", EOT, EOT + EOT]
    )
    | st.text(max_size=4),
    max_size=30,
).map("".join)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    """Merges learned on the English fixture (with some German, so merges hold non-ASCII bytes)."""
    vocab, merges = run_train_bpe(FIXTURES_PATH / "english.txt", 600, [EOT])
    return Tokenizer(vocab, merges, [EOT])


# --- plain BPE -----------------------------------------------------------------------------------


@settings(max_examples=200)
@given(text=TEXT, seed=st.integers(0, 2**32))
def test_dropout_zero_is_encode_exactly(tok, text, seed):
    assert tok.encode(text, dropout=0, seed=seed) == tok.encode(text)
    # A probability too small for any draw to drop: the ids come through the dropout path.
    assert tok.encode(text, dropout=1e-300, seed=seed) == tok.encode(text)


@settings(max_examples=200)
@given(word=st.binary(min_size=1, max_size=40) | st.text("abcdefghilmnorstu ", min_size=1, max_size=30).map(str.encode))
def test_the_replay_without_drops_is_bpe(tok, word):
    table = build_merge_table(tok.vocab, tok.merges)
    chars = word.decode("latin-1").translate(table.byte_chars)
    tokens, draws = simulate(chars, (), table)
    assert tokens == merge_chars(chars, table)
    assert draws >= len(chars) - len(tokens)  # at least one draw for each merge made
    # Dropping one stale entry changes nothing but the number of draws (the shortcut `_sampled` takes).
    stale: list[int] = []
    assert simulate(chars, (), table, stale) == (tokens, draws)
    for k in stale:
        assert simulate(chars, (k,), table) == (tokens, draws_with_stale_dropped(draws, k))


# --- the exact distribution ------------------------------------------------------------------------


def exact_outcomes(word: str, table, p: float) -> dict[str, float]:
    """Every outcome of dropout BPE on `word` with its probability: the sum, over every pattern of
    dropped draws, of p^drops (1 - p)^kept draws."""
    result: Counter = Counter()

    def walk(drops: tuple[int, ...]) -> None:
        tokens, draws = simulate(word, drops, table)
        result[tokens] += p ** len(drops) * (1 - p) ** (draws - len(drops))
        for k in range(drops[-1] + 1 if drops else 1, draws + 1):
            walk((*drops, k))

    walk(())
    return dict(result)


def test_a_stale_entry_gives_a_dropped_merge_a_second_chance():
    # "he" first, then "t"+"he" (rank 1) before "t"+"h" (rank 2): once "he" is made, the queue holds
    # "t he" and the stale "t h". A dropped "t he" comes back when the stale entry is kept.
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"he", 257: b"the", 258: b"th"}
    merges = [(b"h", b"e"), (b"t", b"he"), (b"t", b"h")]
    table = build_merge_table(vocab, merges)
    word = "the".translate(table.byte_chars)
    p = 0.1
    he_kept = (1 - p) + p * (1 - p) * (1 - p)  # kept at once, or dropped, then the stale entry kept and it kept
    expected = {
        "the": (1 - p) * he_kept,
        "th e": p * (1 - p),  # "he" dropped, "th" kept: "he" comes back stale
        "t he": (1 - p) * (1 - he_kept),
        "t h e": p * p,
    }
    ids = {"the": 257, "th": 258, "he": 256, "t": ord("t"), "h": ord("h"), "e": ord("e")}
    exact = exact_outcomes(word, table, p)
    assert exact.keys() == {"".join(chr(ids[t]) for t in key.split()) for key in expected}
    for key, probability in expected.items():
        assert exact["".join(chr(ids[t]) for t in key.split())] == pytest.approx(probability, abs=1e-12)


def test_the_stale_entry_rule_is_hugging_faces():
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers.models import BPE

    hf = HFTokenizer(BPE({"t": 0, "h": 1, "e": 2, "he": 3, "the": 4, "th": 5}, [("h", "e"), ("t", "he"), ("t", "h")],
                         dropout=0.1))
    runs = 4000
    seen = Counter(" ".join(hf.encode("the").tokens) for _ in range(runs))
    # The values of the test above: 0.8829, 0.09, 0.0171, 0.01. Without the second chance "t he"
    # would be 0.09 and "the" 0.81.
    for key, probability in {"the": 0.8829, "th e": 0.09, "t he": 0.0171, "t h e": 0.01}.items():
        assert seen[key] / runs == pytest.approx(probability, abs=0.025)


def test_ours_samples_the_exact_distribution(tok):
    table = build_merge_table(tok.vocab, tok.merges)
    word = " there"
    exact = exact_outcomes(word.encode().decode("latin-1").translate(table.byte_chars), table, 0.3)
    runs = 3000
    seen = Counter("".join(map(chr, tok.encode(word, dropout=0.3, seed=s))) for s in range(runs))
    assert seen.keys() <= exact.keys()
    for outcome, probability in exact.items():
        assert seen[outcome] / runs == pytest.approx(probability, abs=0.03), outcome


# --- Hugging Face's BPE(dropout=p) -------------------------------------------------------------------


def hf_with_dropout(tok: Tokenizer, folder, p: float):
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers.models import BPE

    tok.save_pretrained(folder)
    hf = HFTokenizer.from_file(str(folder / "tokenizer.json"))
    hf.model = BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt"), dropout=p)
    return hf


SHORT_TEXTS = [
    "The little girl found a shiny red ball in the garden, and she was very happy.",
    "Once upon a time, there was a big dog named Max. Max liked to play outside every day!",
    " Über 123 Straßen\n\nthe end",
]


@pytest.mark.parametrize("p, runs", [(0.1, 400), pytest.param(0.1, 4000, marks=pytest.mark.slow),
                                     (0.5, 300), pytest.param(0.5, 3000, marks=pytest.mark.slow)])
def test_statistically_like_hugging_faces_bpe_dropout(tok, tmp_path, p, runs):
    """Mean tokens per text within 3% (at 400 runs about 5 standard errors) and each token's share
    of all tokens within 0.01 (at least 4 standard errors for the commonest tokens)."""
    hf = hf_with_dropout(tok, tmp_path, p)
    plain = hf_with_dropout(tok, tmp_path, None)
    for text in SHORT_TEXTS:
        assert plain.encode(text, add_special_tokens=False).ids == tok.encode(text)  # the same vocabulary
        ours = [tok.encode(text, dropout=p, seed=s) for s in range(runs)]
        theirs = [hf.encode(text, add_special_tokens=False).ids for _ in range(runs)]
        mean_ours, mean_theirs = np.mean(list(map(len, ours))), np.mean(list(map(len, theirs)))
        assert mean_ours == pytest.approx(mean_theirs, rel=0.03), text
        assert mean_ours > len(tok.encode(text))  # dropout made more tokens
        share_ours = Counter(itertools.chain.from_iterable(ours))
        share_theirs = Counter(itertools.chain.from_iterable(theirs))
        n_ours, n_theirs = sum(share_ours.values()), sum(share_theirs.values())
        for token in share_ours.keys() | share_theirs.keys():
            assert share_ours[token] / n_ours == pytest.approx(share_theirs[token] / n_theirs, abs=0.01), (text, token)


# --- invariants ----------------------------------------------------------------------------------------


@settings(max_examples=150)
@given(text=TEXT, p=st.sampled_from([0.05, 0.1, 0.5, 0.9, 1.0]), seed=st.integers(0, 2**32))
def test_every_output_decodes_to_the_input(tok, text, p, seed):
    ids = tok.encode(text, dropout=p, seed=seed)
    assert tok.decode(ids) == text
    assert tok.encode_packed(text, dropout=p, seed=seed) == np.array(ids, tok.packed_dtype).tobytes()


@settings(max_examples=100)
@given(text=TEXT, seed=st.integers(0, 2**32))
def test_dropout_one_gives_bytes_and_whole_special_tokens(tok, text, seed):
    ids = tok.encode(text, dropout=1, seed=seed)
    pieces = [tok.vocab[i] for i in ids]
    assert all(len(piece) == 1 or piece == EOT.encode() for piece in pieces)
    assert pieces.count(EOT.encode()) == text.count(EOT)
    assert b"".join(pieces) == text.encode()


def test_the_same_seed_gives_the_same_ids_and_others_differ(tok):
    text = (FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")[:20000]
    first = tok.encode(text, dropout=0.1, seed=7)
    fresh = Tokenizer(tok.vocab, tok.merges, [EOT])  # nothing kept from earlier calls
    assert fresh.encode(text, dropout=0.1, seed=7) == first
    assert tok.encode(text, dropout=0.1, seed=7) == first
    assert tok.encode(text, dropout=0.1, seed=8) != first
    assert tok.encode(text, dropout=0.1, seed=(7, 0)) != first
    assert tok.encode(text, dropout=0.1) != tok.encode(text, dropout=0.1)  # no seed: a fresh one each time


@settings(max_examples=50)
@given(text=TEXT, cuts=st.lists(st.integers(0, 200), max_size=6), seed=st.integers(0, 2**32))
def test_encode_iterable_gives_encodes_ids_in_any_pieces(tok, text, cuts, seed):
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    assert list(tok.encode_iterable(pieces, dropout=0.3, seed=seed)) == tok.encode(text, dropout=0.3, seed=seed)


def test_encode_iterable_over_many_blocks(tok):
    text = (FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")[:60000]  # several blocks of pre-tokens
    pieces = [text[i : i + 777] for i in range(0, len(text), 777)]
    assert list(tok.encode_iterable(pieces, dropout=0.1, seed=3)) == tok.encode(text, dropout=0.1, seed=3)


def test_encode_batch_does_not_depend_on_the_workers(tok):
    texts = [(FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")[i : i + 3000] for i in range(0, 30000, 3000)]
    one = tok.encode_batch(texts, dropout=0.1, seed=5)
    assert tok.encode_batch(texts, dropout=0.1, seed=5, num_workers=2) == one
    assert one == [tok.encode(text, dropout=0.1, seed=(5, i)) for i, text in enumerate(texts)]
    assert [tok.decode(ids) for ids in one] == texts


def test_tiktoken_is_never_used_with_dropout(tok):
    with pytest.raises(ValueError, match="engine 'tiktoken' has no BPE-dropout"):
        tok.encode_batch(["a text"], engine="tiktoken", dropout=0.1)
    choice = engines.choose(tok, "auto", input_bytes=1 << 30, dropout=0.1, seed=1)
    assert choice.engine == "python" and "BPE-dropout" in choice.reason
    with pytest.raises(ValueError, match="dropout must be a probability"):
        tok.encode("a", dropout=1.5)
    with pytest.raises(ValueError, match="seed must be"):
        tok.encode("a", dropout=0.1, seed=-1)


# --- bpe encode --dropout --------------------------------------------------------------------------------


def test_bpe_encode_dropout_does_not_depend_on_the_workers(tmp_path, tok, capsys):
    tok.save_pretrained(tmp_path / "tok")
    inputs = [str(FIXTURES_PATH / f"{name}.txt") for name in ("german", "english", "chinese")]
    arrays = []
    for workers in (1, 2):
        out = tmp_path / f"ids{workers}.npy"
        assert main(["encode", *inputs, "--tokenizer", str(tmp_path / "tok"), "--out", str(out), "--dropout", "0.1",
                     "--seed", "11", "--workers", str(workers), "--quiet"]) == 0
        arrays.append(np.load(out))
    assert arrays[0].tolist() == arrays[1].tolist()
    texts = [open(p, encoding="utf-8", newline="").read() for p in inputs]
    assert tok.decode(arrays[0]) == EOT.join(texts)
    assert arrays[0].tolist() != tok.encode(EOT.join(texts))
    assert "BPE-dropout 0.1 with seed 11" in capsys.readouterr().out
    # Work units of 500 bytes: the same array whatever the workers, through the Python function too.
    choice = engines.choose(tok, "auto", dropout=0.1, seed=11)
    small = []
    for workers in (1, 2):
        out = tmp_path / f"small{workers}.npy"
        tok.encode_file(inputs, out, num_workers=workers, piece_size=500, engine=choice)
        small.append(np.load(out).tolist())
    assert small[0] == small[1] and tok.decode(small[0]) == EOT.join(texts)


@pytest.mark.parametrize("argv, message", [
    (["--dropout", "0.1", "--engine", "tiktoken"], "engine 'tiktoken' has no BPE-dropout"),
    (["--seed", "3"], "--seed is for --dropout"),
    (["--dropout", "1.5"], "expected a probability between 0 and 1"),
])
def test_bpe_encode_dropout_refusals(tmp_path, tok, capsys, argv, message):
    tok.save_pretrained(tmp_path / "tok")
    status = main(["encode", str(FIXTURES_PATH / "german.txt"), "--tokenizer", str(tmp_path / "tok"),
                   "--out", str(tmp_path / "x.npy"), "--quiet", *argv])
    assert status != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.npy").exists()


def test_bpe_encode_dropout_writes_only_an_array(tmp_path, tok, capsys):
    tok.save_pretrained(tmp_path / "tok")
    status = main(["encode", str(FIXTURES_PATH / "german.txt"), "--tokenizer", str(tmp_path / "tok"),
                   "--out", str(tmp_path / "dataset"), "--dropout", "0.1", "--quiet"])
    assert status == 1
    assert "--dropout writes one .npy array" in capsys.readouterr().err


def test_each_work_unit_draws_its_own_stream(tmp_path, tok):
    text = (FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")[:5000].replace(EOT, "")
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    out = tmp_path / "twice.npy"
    tok.encode_file([tmp_path / "a.txt"] * 2, out, engine=engines.choose(tok, "python", dropout=0.1, seed=2))
    ids = np.load(out).tolist()
    eot = tok.encode(EOT)[0]
    first, second = ids[: ids.index(eot)], ids[ids.index(eot) + 1 :]
    assert tok.decode(first) == tok.decode(second) == text
    assert first != second  # the same text in two units, not the same draws


def test_a_dataset_directory_refuses_a_dropout_choice(tmp_path, tok):
    choice = engines.choose(tok, "auto", dropout=0.1, seed=1)
    with pytest.raises(ValueError, match="BPE-dropout writes token arrays"):
        tok.encode_dataset(FIXTURES_PATH / "german.txt", tmp_path / "ds", engine=choice)
    with pytest.raises(ValueError, match="BPE-dropout writes token arrays"):
        tok.encode_dataset_from_iterator(["a text"], tmp_path / "ds2", engine=choice)
    assert not (tmp_path / "ds").exists() and not (tmp_path / "ds2").exists()
