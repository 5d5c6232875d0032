"""How `Tokenizer.encode` hands chunks to the cache, against the slow reference encoder.

`encode.text_encoder.TextEncoder.encode_packed` gives `EncodeCache.encode` the chunks of a few documents (and the
special tokens between them) at a time, at most `text_encoder.CHUNKS_PER_CALL` (a longer run of chunks is
cut into calls of that size). `EncodeCache.encode` looks every chunk up, then either patches the few missing ones in place
or, when many miss, joins through the dict of computed ones. Each of these is checked here on
generated text and chunk lists: per call sizes down to one chunk, lists with no miss, a few, and
many, repeated chunks and chunks met only in the old generation.
"""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer
from cs336_basics.encode import text_encoder
from tests.adapters import run_train_bpe
from tests.common import FIXTURES_PATH
from tests.reference import reference_encode

EOT = "<|endoftext|>"
EXAMPLES = int(os.environ.get("BPE_FUZZ_EXAMPLES", 0)) or 100

WORDS = [" the", " and", "the", ",", ".", "'s", " ", "  ", "\n", "\n\n", "123", " über", "中文", " 😀", "(x)", "a"]
TEXT = st.lists(st.sampled_from([*WORDS, EOT]) | st.text(max_size=3), max_size=60).map("".join)


@pytest.fixture(scope="module")
def trained():
    vocab, merges = run_train_bpe(FIXTURES_PATH / "english.txt", 400, [EOT])
    return vocab, merges


def reference(text: str, tokenizer: Tokenizer) -> list[int]:
    return reference_encode(text, tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens, tokenizer.pattern)


@settings(max_examples=EXAMPLES, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=4), per_call=st.sampled_from([1, 2, 3, 8, 1 << 13]),
       pattern=st.sampled_from(["gpt2", "cl100k", "none"]), specials=st.sampled_from([[EOT], []]))
def test_documents_handed_over_in_calls_of_any_size(trained, texts, per_call, pattern, specials):
    vocab, merges = trained
    tokenizer = Tokenizer(vocab, merges, specials, pattern=pattern, cache_size=64)
    old = text_encoder.CHUNKS_PER_CALL
    text_encoder.CHUNKS_PER_CALL = per_call
    try:
        for text in texts + texts[:1]:
            assert tokenizer.encode(text) == reference(text, tokenizer)
    finally:
        text_encoder.CHUNKS_PER_CALL = old


def chunk_ids(tokenizer: Tokenizer, chunks: list[str]) -> list[int]:
    """The ids of `EncodeCache.encode(chunks)`, unpacked."""
    return np.frombuffer(tokenizer.cache.encode(chunks), dtype=tokenizer.packed_dtype).tolist()


POOL = [" the", " and", ",", " über", "\n", " Zebra", " qqq", "xyz", " 7", "!!", " a", " b", " c", " d"]


@settings(max_examples=EXAMPLES, deadline=None)
@given(warm=st.lists(st.sampled_from(POOL), max_size=20), chunks=st.lists(st.sampled_from(POOL), max_size=80),
       cache_size=st.sampled_from([2, 5, 1 << 10]))
def test_encode_patches_few_misses_and_joins_many(trained, warm, chunks, cache_size):
    """With a warmed cache, `chunks` holds no miss, a few or many, in any order and repeated; the
    ids are those of each chunk encoded alone (every POOL entry is a chunk of its own)."""
    vocab, merges = trained
    tokenizer = Tokenizer(vocab, merges, [EOT], cache_size=cache_size)
    chunk_ids(tokenizer, warm)
    expected = [i for chunk in chunks for i in reference(chunk, tokenizer)]
    assert chunk_ids(tokenizer, chunks) == expected
    assert chunk_ids(tokenizer, chunks) == expected  # again, now mostly hits


def test_encode_patches_a_few_misses_among_many_hits(trained):
    """Calls with a few misses among 300 hits, some repeated (the patch path), then one with half
    missing (the join path)."""
    vocab, merges = trained
    tokenizer = Tokenizer(vocab, merges, [EOT])
    hits = [" the", " and", ","] * 100
    chunk_ids(tokenizer, hits)
    for new in ([" Zebra"], [" Zebra", " qq", " Zebra", "\n", " rr"] * 3, [" q", " r", " s", " t"] * 75):
        chunks = hits[:200] + new + hits[200:]
        assert chunk_ids(tokenizer, chunks) == [i for c in chunks for i in reference(c, tokenizer)]
