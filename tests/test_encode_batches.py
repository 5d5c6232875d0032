"""The batched encode path (`encoder.EncodeCache.encode`) against the slow reference encoder.

The cache looks every chunk up at once and computes the missing ones together: chunks that may
follow one another are joined and cut into pre-tokens in one call (ASCII and other text apart),
the first and last chunks of a document one by one, and each chunk's ids are cut from the ids of
all the pre-tokens. Its generations roll over in the middle of a batch when the cache is small.
Each of these is compared here with `tests.reference.reference_encode` on generated text, for
every named pattern, a custom regex and none; the packed ids are checked for 16 and 32-bit ids,
ids in the surrogate range, and `encode_file`.
"""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer
from cs336_basics.encode.encoder import bpe, build_merge_table, merge_chars, merge_words
from tests.adapters import run_train_bpe
from tests.common import FIXTURES_PATH
from tests.reference import merge_ranks, reference_bpe, reference_encode

EOT = "<|endoftext|>"
EXAMPLES = int(os.environ.get("BPE_FUZZ_EXAMPLES", 0)) or 150

PATTERNS = ["gpt2", "cl100k", "o200k", "none", r"\s+|\w+|[^\s\w]+"]


@pytest.fixture(scope="module")
def trained():
    """Merges learned on the English fixture (with some German, so merges hold non-ASCII bytes)."""
    vocab, merges = run_train_bpe(FIXTURES_PATH / "english.txt", 600, [EOT])
    return vocab, merges


# Words that the vocabulary knows, pieces that cut chunks in every way (punctuation, newlines,
# several spaces, digits, contractions), non-ASCII text and special tokens.
TEXT = st.lists(
    st.sampled_from(
        [" the", " and", "the", " of", "ing", " was", ",", ".", "!", "'s", "'ll", " ", "  ", "\n", "\n\n", "\r\n",
         "\t", "123", " 4567", "(x)", " Straße", " über", "中文", " 😀", "\u00a0", "\u3000", "a", "Z", EOT, EOT + EOT]
    )
    | st.text(max_size=4),
    max_size=40,
).map("".join)


def reference(text: str, tokenizer: Tokenizer, specials: list[str]) -> list[int]:
    return reference_encode(text, tokenizer.vocab, tokenizer.merges, specials, tokenizer.pattern)


@settings(max_examples=EXAMPLES, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=6), cache_size=st.sampled_from([1, 2, 5, 40, 1 << 18]),
       pattern=st.sampled_from(PATTERNS))
def test_batches_match_the_reference_through_cache_rollovers(trained, texts, cache_size, pattern):
    """One tokenizer encodes several texts in turn, so later ones meet entries of both generations."""
    vocab, merges = trained
    specials = [EOT, EOT + EOT]
    tokenizer = Tokenizer(vocab, merges, specials, pattern=pattern, cache_size=cache_size)
    for text in texts + texts[:2]:
        assert tokenizer.encode(text) == reference(text, tokenizer, specials)
    cache = tokenizer.cache
    assert len(cache) <= cache_size and len(cache._old) <= cache_size
    assert len(cache._parts) <= cache_size
    assert not set(cache) & set(specials), "special tokens are never stored"


@settings(max_examples=EXAMPLES // 3 or 1, deadline=None)
@given(documents=st.lists(TEXT, min_size=1, max_size=30), pattern=st.sampled_from(PATTERNS))
def test_many_documents_in_one_batch(trained, documents, pattern):
    """Many documents joined: many first and last chunks, and chunks repeated across documents."""
    vocab, merges = trained
    tokenizer = Tokenizer(vocab, merges, [EOT], pattern=pattern)
    text = EOT.join(documents * 3)
    assert tokenizer.encode(text) == reference(text, tokenizer, [EOT])


def test_a_few_misses_among_many_hits_are_patched_in_place(trained):
    vocab, merges = trained
    tokenizer = Tokenizer(vocab, merges, [EOT])
    text = (FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8")[:30_000]
    tokenizer.encode(text)
    for new in [" Zebraic", "\n\nqqq", EOT + "x", "中文 über"]:
        longer = text + new + text[:500]
        assert tokenizer.encode(longer) == reference(longer, tokenizer, [EOT])


def remapped(vocab: dict[int, bytes], merges, first_id: int) -> dict[int, bytes]:
    """The same tokens with the merged ones moved to ids from `first_id` on."""
    out = {i: t for i, t in vocab.items() if i < 256}
    for n, (a, b) in enumerate(merges):
        out[first_id + n] = a + b
    return out


@pytest.mark.parametrize("first_id, itemsize", [(256, 2), (0xD800 - 50, 2), (0xFFFF - 20, 4), (0x10FFFF - 2000, 4)])
def test_packed_ids_for_any_id_width(trained, first_id, itemsize):
    """Ids travel packed in 16 bits when all fit, else 32, ids in 0xD800-0xDFFF (surrogate
    code points when held as characters) included."""
    vocab, merges = trained
    big = remapped(vocab, merges, first_id)
    tokenizer = Tokenizer(big, merges, [EOT])
    assert np.dtype(tokenizer.packed_dtype).itemsize == itemsize
    text = (FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8")[:5000] + EOT + " über 中文"
    ids = tokenizer.encode(text)
    assert ids == reference(text, tokenizer, [EOT])
    assert np.frombuffer(tokenizer.encode_packed(text), dtype=tokenizer.packed_dtype).tolist() == ids
    assert max(ids) >= first_id


def test_encode_packed_fixes_surrogates_like_encode(trained):
    vocab, merges = trained
    tokenizer = Tokenizer(vocab, merges, [EOT])
    text = "a\ud83d\ude00b \ud800 c"
    packed = tokenizer.encode_packed(text)
    assert np.frombuffer(packed, dtype=tokenizer.packed_dtype).tolist() == tokenizer.encode(text)
    with pytest.raises(TypeError):
        tokenizer.encode_packed(b"bytes")


@pytest.mark.parametrize("first_id, dtype", [(256, None), (256, "uint32"), (0xFFFF - 20, None)])
def test_encode_file_with_workers_writes_the_packed_ids(tmp_path, trained, first_id, dtype):
    vocab, merges = trained
    tokenizer = Tokenizer(remapped(vocab, merges, first_id), merges, [EOT])
    text = (FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8")[:20_000] + EOT + " über"
    path = tmp_path / "in.txt"
    path.write_text(text, encoding="utf-8")
    tokenizer.encode_file(path, tmp_path / "out.npy", num_workers=2, piece_size=3000, dtype=dtype)
    ids = np.load(tmp_path / "out.npy")
    assert ids.tolist() == tokenizer.encode(text)
    assert ids.dtype == np.dtype(dtype or tokenizer.packed_dtype)


# --- BPE on one pre-token, against merging by the list of merges ----------------------------------


def vocabulary_of(merges: list[tuple[bytes, bytes]]) -> dict[int, bytes]:
    """The 256 bytes, then each token the merges make (once, where a merge makes it again)."""
    vocab = {i: bytes([i]) for i in range(256)}
    for token in dict.fromkeys(left + right for left, right in merges):
        vocab[len(vocab)] = token
    return vocab


def planted_vocabulary():
    """Merges where a token does not encode to itself: "abc" is made from ("ab", "c"), but on the
    bytes "abc" the earlier merge ("b", "c") wins, leaving ("a", "bc"), which is no merge."""
    merges = [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c"), (b"c", b"c"), (b"a", b"a")]
    return vocabulary_of(merges), merges


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.text(alphabet="abcx", max_size=80))
def test_bpe_follows_the_merges_even_where_a_token_does_not_encode_to_itself(word):
    vocab, merges = planted_vocabulary()
    table = build_merge_table(vocab, merges)
    assert bpe(b"abc", table) == (ord("a"), 256)  # not the token "abc" (258)
    expected = reference_bpe(word.encode(), merge_ranks(merges))
    ids = {t: i for i, t in vocab.items()}
    assert bpe(word.encode(), table) == tuple(ids[t] for t in expected)
    tokenizer = Tokenizer(vocab, merges)
    assert tokenizer.encode(word) == reference_encode(word, vocab, merges, [])


@st.composite
def merges_and_words(draw):
    """Merges drawn at random over the bytes of a few characters (each part a byte or an earlier
    merge's token, sometimes the same token twice), so that many pairs of bytes are joined by no
    merge; and words over the same characters, some long."""
    alphabet = draw(st.sampled_from(["abc", "abcde", "aé中", "ab\n "]))
    tokens = sorted({bytes([b]) for b in "".join(alphabet).encode()})
    merges = []
    for _ in range(draw(st.integers(0, 25))):
        left, right = draw(st.sampled_from(tokens)), draw(st.sampled_from(tokens))
        merges.append((left, right))
        tokens.append(left + right)
    vocab = vocabulary_of(merges)
    word = st.text(alphabet=alphabet, min_size=1, max_size=12) | st.text(alphabet=alphabet, min_size=60, max_size=200)
    return vocab, merges, draw(st.lists(word, max_size=12))


@settings(max_examples=EXAMPLES, deadline=None)
@given(merges_and_words())
def test_words_merged_in_parts_get_the_tokens_of_the_whole(case):
    """`merge_words` cuts words where no merge joins the bytes on either side; the tokens are those
    of BPE on each whole word (tiktoken's rule, written out here by the list of merges)."""
    vocab, merges, words = case
    table = build_merge_table(vocab, merges)
    rank = merge_ranks(merges)
    ids = {token: i for i, token in vocab.items()}
    expected = ["".join(chr(ids[t]) for t in reference_bpe(word.encode(), rank)) for word in words]
    chars = [word.encode().decode("latin-1").translate(table.byte_chars) for word in words]
    assert merge_words(chars, table) == expected
    assert [merge_chars(word, table) for word in chars] == expected
    known: dict[str, str] = {}  # parts merged by an earlier call are taken from it
    merge_words(chars[: len(chars) // 2], table, known)
    assert merge_words(chars, table, known) == expected
    assert all(len(part) <= 64 and merge_chars(part, table) == tokens for part, tokens in known.items())


def test_merge_words_cuts_where_no_merge_joins(monkeypatch):
    """Cutting is what saves the time: no merge joins "x" and "y", so the words are cut there and
    share their parts, each merged once."""
    from cs336_basics.encode import encoder

    merges = [(b"a", b"b"), (b"ab", b"x"), (b"y", b"a")]
    table = build_merge_table(vocabulary_of(merges), merges)
    assert table.joins == {"ab", "bx", "ya"}
    merged = []
    monkeypatch.setattr(encoder, "merge_chars", lambda word, table: merged.append(word) or merge_chars(word, table))
    # "yab" is [y][ab]: (a, b) comes first, and (y, ab) is no merge.
    assert merge_words(["abxyab", "abxyabxy", "abx"], table) == ["\u0101y\u0100", "\u0101y\u0101y", "\u0101"]
    assert sorted(merged) == sorted(["abx", "yab", "yabx", "y", table.separator])
    known = {"abx": "\u0101", "y": "y", "yabx": "?"}  # what is known is not merged again
    merged.clear()
    assert merge_words(["abxyabx", "yab"], table, known) == ["\u0101?", "y\u0100"]
    assert sorted(merged) == sorted(["yab", table.separator]) and known["yab"] == "y\u0100"
    runs = build_merge_table(vocabulary_of([(b"a", b"a")]), [(b"a", b"a")])
    known = {}
    word = "a" * 65 + "b" + "a" * 64 + "b"  # cut after each "a" run: "ab" is not joined
    assert merge_words([word], runs, known) == ["\u0100" * 32 + "ab" + "\u0100" * 32 + "b"]
    assert "a" * 64 in known and "a" * 65 not in known  # long parts are not kept
    known = {}
    assert merge_words(["aab", "aa", "aaa"], runs, known) == ["\u0100b", "\u0100", "\u0100a"]
    assert not known  # hardly cut (4 parts for 3 words): each word merged whole
    top = build_merge_table({**{i: bytes([i]) for i in range(256)}, 0x10FFFF: b"ab"}, [(b"a", b"b")])
    assert top.separator == ""  # every character may be an id: each word is merged whole
    assert merge_words(["ab", "xab"], top, {}) == ["\U0010ffff", "x\U0010ffff"]


def test_non_ascii_pre_tokens_are_cut_when_few_merges_join_their_bytes(trained):
    """Merges learned on English text join few (UTF-8 lead byte, continuation byte) pairs, so
    non-ASCII pre-tokens are cut; once 1/8 of those pairs are joined, they are merged whole."""
    vocab, merges = trained
    assert build_merge_table(vocab, merges).cut_non_ascii
    byte_merges = [(bytes([lead]), bytes([b])) for lead in range(0xC2, 0xC8) for b in range(0x80, 0xC0)]
    more = byte_merges + [(b"\xc8", bytes([b])) for b in range(0x80, 0xC0)]
    assert len(byte_merges) == 384 < 3264 / 8 < 384 + 64
    assert build_merge_table(vocabulary_of(byte_merges), byte_merges).cut_non_ascii
    assert not build_merge_table(vocabulary_of(more), more).cut_non_ascii
    tokenizer = Tokenizer(vocab, merges)
    tokenizer.encode("Straße über 中文 Straße")
    assert len(tokenizer.cache._parts) > 3  # the parts of the non-ASCII pre-tokens


def test_pre_tokens_of_a_new_chunk_come_from_the_old_generation(trained):
    vocab, merges = trained
    tokenizer = Tokenizer(vocab, merges, [EOT], cache_size=2)
    cache = tokenizer.cache
    tokenizer.encode(" the,")  # pre-tokens " the" and "," fill the generation; the chunk starts a new one
    assert set(cache._old) == {" the", ","} and set(cache) == {" the,"}
    table, cache._table = cache._table, None  # BPE would fail now
    with pytest.raises(AttributeError):
        tokenizer.encode(" zq")
    cache._table = table
    tokenizer.encode(" the,")
    assert tokenizer.encode(" the, the") == reference(" the, the", tokenizer, [EOT])
    tokenizer.encode(" x")
    tokenizer.encode(" y")  # now " the" is only in the old generation
    assert " the" in cache._old and " the" not in cache
    assert tokenizer.encode(" the;") == reference(" the;", tokenizer, [EOT])


def test_long_chunks_are_not_kept(trained):
    vocab, merges = trained
    for cache_size in (3, 1 << 10):  # chunks kept one by one, and all at once
        tokenizer = Tokenizer(vocab, merges, [EOT], cache_size=cache_size)
        long = " " + "ab" * 40
        assert tokenizer.encode(long + long[:64]) == reference(long + long[:64], tokenizer, [EOT])
        assert long not in tokenizer.cache and long[:64] in tokenizer.cache


def test_missing_chunks_in_several_batches(trained, monkeypatch):
    from cs336_basics.encode import encoder

    monkeypatch.setattr(encoder, "_BATCH", 7)
    vocab, merges = trained
    for cache_size in (5, 1 << 10):
        tokenizer = Tokenizer(vocab, merges, [EOT], cache_size=cache_size)
        text = (FIXTURES_PATH / "german.txt").read_bytes().decode("utf-8")[:4000]
        text = text[:2000] + EOT + text[1000:] + EOT + " über"
        assert tokenizer.encode(text) == reference(text, tokenizer, [EOT])


# --- encode_file's workers share what they compute -------------------------------------------------


def test_workers_share_computed_entries_through_files(tmp_path, trained):
    from cs336_basics.encode.token_arrays import _SharedCache

    vocab, merges = trained
    a, b = Tokenizer(vocab, merges, [EOT]), Tokenizer(vocab, merges, [EOT])
    a.cache.start_learning()
    share_a, share_b = _SharedCache(tmp_path, "a.cache"), _SharedCache(tmp_path, "b.cache")
    text = (FIXTURES_PATH / "german.txt").read_bytes().decode("utf-8")[:3000] + EOT + " über"
    a.encode(text[:1000])
    share_a.publish(a.cache)
    share_b.absorb(b.cache)
    a.encode(text)
    share_a.publish(a.cache)
    assert not a.cache.take_learned()  # taken once
    share_b.absorb(b.cache)
    assert share_b.read_to["a.cache"] == (tmp_path / "a.cache").stat().st_size
    # A record still being written is left for later.
    with open(tmp_path / "a.cache", "ab") as f:
        f.write((1000).to_bytes(8, "little") + b"\0" * 10)
    share_b.absorb(b.cache)
    table, b.cache._table = b.cache._table, None  # BPE would fail now: all comes from a's file
    assert b.encode(text) == reference(text, b, [EOT])
    b.cache._table = table
    assert share_b.read_to["a.cache"] < (tmp_path / "a.cache").stat().st_size
    share_b.absorb(b.cache)  # nothing new: the incomplete record is not read
    assert len(b.cache) == len(a.cache)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.dictionaries(st.text(), st.binary()))
def test_packed_entries_read_back(entries):
    from cs336_basics.encode.token_arrays import pack_entries, unpack_entries

    assert unpack_entries(pack_entries(entries)) == entries
