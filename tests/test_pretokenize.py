"""The facts the fast pre-tokenization rests on, checked against the GPT-2 pattern run by `regex`."""

import io

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.corpora.cutting import find_safe_cut
from cs336_basics.text.pretokenize import WHITESPACE, chunks, pretokenize, pretokenize_chunk
from cs336_basics.train.reference import split_documents
from tests.common import GPT2_PATTERN

PIECES = st.sampled_from(
    ["a", "Z", "é", "ж", "中", "😀", "1", "٣", "'", "'s", "'ll", "!", "-", " ", "  ", "\t", "\n", "\r\n", "\x0b",
     "\x0c", "\x1c", "\x1f", "\x85", "\u00a0", "\u1680", "\u2000", "\u2028", "\u202f", "\u3000", "\u200b", "<|x|>"]
) | st.characters(exclude_categories=["Cs"])
TEXTS = st.lists(PIECES, max_size=40).map("".join)


@pytest.mark.slow
def test_whitespace_set_is_regex_s():
    s = regex.compile(r"\s")
    ours = regex.compile(f"[{WHITESPACE}]")
    assert all(bool(s.match(chr(c))) == bool(ours.match(chr(c))) for c in range(0x110000))


def test_isalpha_letters_are_regex_letters():
    letter = regex.compile(r"\p{L}")
    assert all(letter.match(chr(c)) for c in range(0x110000) if chr(c).isalpha())


@settings(max_examples=1000, deadline=None)
@given(TEXTS)
def test_chunks_pretokenize_like_the_whole_text(text):
    parts = chunks(text)
    assert "".join(parts) == text
    assert [p for c in parts for p in pretokenize_chunk(c)] == regex.findall(GPT2_PATTERN, text) == pretokenize(text)


@settings(max_examples=1000, deadline=None)
@given(TEXTS)
def test_a_pretoken_alone_is_one_pretoken(text):
    # The tokenizer caches chunks and pre-tokens in one dict, which needs this.
    for piece in pretokenize(text):
        assert pretokenize(piece) == [piece] == pretokenize_chunk(piece)


@settings(max_examples=1000, deadline=None)
@given(TEXTS, st.lists(st.integers(0, 200), max_size=5), st.sampled_from([[], ["<|x|>"], ["<|x|>", "<|x|><|x|>", "|"]]))
def test_cutting_at_safe_cuts_changes_no_pretoken(text, targets, specials):
    data = text.encode("utf-8")
    f = io.BytesIO(data)
    cuts = sorted({find_safe_cut(f, t, len(data), [s.encode() for s in specials]) for t in targets})
    bounds = [0, *cuts, len(data)]
    parts = [data[a:b].decode("utf-8") for a, b in zip(bounds, bounds[1:])]

    def pretokens(t: str) -> list[str]:
        return [p for d in split_documents(t, specials) for p in regex.findall(GPT2_PATTERN, d)]

    assert [p for part in parts for p in pretokens(part)] == pretokens(text)
