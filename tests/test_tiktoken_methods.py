"""tiktoken's `Encoding` methods on our `Tokenizer` (see `encode/tiktoken_methods.py`), called on the
Tokenizer itself (not through `to_tiktoken`), each compared with tiktoken's GPT-2 encoding built
from the same two files.

The first part follows tiktoken's own Encoding tests (its tests/test_encoding.py) where they make
sense for a tokenizer loaded from GPT-2's files; the tests there on cl100k's three special tokens
run here on GPT-2's vocabulary with the same three, given to both. Then hypothesis draws text
holding the special tokens and the arguments, and nanoGPT's OpenWebText preparation loop runs with
either tokenizer into the same array.
"""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cs336_basics
from cs336_basics.bpe import Tokenizer
from tests.common import GPT2_PATTERN, gpt2_files, tiktoken_gpt2

EOT, FIM_PREFIX, FIM_MIDDLE = "<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>"
FIM = [EOT, FIM_PREFIX, FIM_MIDDLE]  # cl100k's names, given ids 50256, 50257, 50258 here


@pytest.fixture(scope="module")
def ours() -> Tokenizer:
    return Tokenizer.from_files(*gpt2_files(), special_tokens=[EOT])


@pytest.fixture(scope="module")
def theirs():
    return tiktoken_gpt2()


@pytest.fixture(scope="module")
def pair_fim():
    """GPT-2's vocabulary with the three special tokens of tiktoken's special-token test, in both."""
    import tiktoken

    tok = Tokenizer.from_files(*gpt2_files(), special_tokens=FIM)
    enc = tiktoken.Encoding(name="gpt2-fim", pat_str=GPT2_PATTERN, mergeable_ranks=tiktoken_gpt2()._mergeable_ranks,
                            special_tokens={EOT: 50256, FIM_PREFIX: 50257, FIM_MIDDLE: 50258})
    return tok, enc


def outcome(call, *args, **kwargs):
    """What a call gives: its value, or the kind of error and the first line of its message (ours
    goes on with its own advice; tiktoken's first line is what callers match)."""
    try:
        return call(*args, **kwargs)
    except (ValueError, TypeError) as e:
        return type(e).__name__, str(e).split("\n")[0]


# --- tiktoken's own tests, on GPT-2 -------------------------------------------------------------------


def test_simple_and_basic_encode(ours, theirs):
    assert ours.encode("hello world") == theirs.encode("hello world") == [31373, 995]
    assert ours.decode([31373, 995]) == "hello world"
    assert ours.encode("hello <|endoftext|>", allowed_special="all") == [31373, 220, 50256]
    assert ours.encode_ordinary("hello world") == [31373, 995]
    assert ours.encode("") == ours.encode_ordinary("") == []


def test_simple_repeated(ours, theirs):
    for n in range(1, 17):
        for text in ("0" * n, " " + "0" * n, "x" * n):
            assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
            assert ours.encode(text, allowed_special=set()) == theirs.encode(text)


def test_encode_surrogate_pairs(ours, theirs):
    assert ours.encode_ordinary("👍") == theirs.encode_ordinary("👍")
    assert ours.encode_ordinary("\ud83d\udc4d") == theirs.encode_ordinary("\ud83d\udc4d") == theirs.encode("👍")
    assert ours.encode("\ud83d", disallowed_special=()) == theirs.encode("\ud83d") == theirs.encode("\ufffd")


def test_catastrophically_repetitive(ours, theirs):
    for c in ["^", "0", "a", "'s", " ", "\n"]:
        for text in (c * 10_000, " " + c * 10_000, c * 10_000 + "\n"):
            assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
            assert ours.decode(ours.encode_ordinary(text)) == text


def test_basic_roundtrip(ours, theirs):
    for value in ("hello", "hello ", "hello  ", " hello", " hello ", " hello  ", "hello world", "编码测试，数字 12345"):
        assert ours.encode_ordinary(value) == theirs.encode_ordinary(value)
        assert ours.decode(ours.encode_ordinary(value)) == value


def test_single_token_roundtrip_over_the_whole_vocabulary(ours, theirs):
    assert ours.n_vocab == theirs.n_vocab == 50257
    for token in range(ours.n_vocab):
        token_bytes = ours.decode_single_token_bytes(token)
        assert token_bytes == theirs.decode_single_token_bytes(token)
        assert ours.encode_single_token(token_bytes) == theirs.encode_single_token(token_bytes) == token
    assert ours.encode_single_token("hello") == theirs.encode_single_token("hello") == 31373
    for missing in (50257, -1):
        with pytest.raises(KeyError):
            theirs.decode_single_token_bytes(50257)
        with pytest.raises(KeyError):
            ours.decode_single_token_bytes(missing)
    with pytest.raises(KeyError):
        theirs.encode_single_token("hello world")
    with pytest.raises(KeyError):
        ours.encode_single_token("hello world")


def test_decode_tokens_bytes(ours, theirs):
    text = "hello world, 👍 <|endoftext|>"
    ids = theirs.encode(text, allowed_special="all")
    pieces = ours.decode_tokens_bytes(ids)
    assert pieces == theirs.decode_tokens_bytes(ids)
    assert pieces[:2] == [b"hello", b" world"] and pieces[-1] == b"<|endoftext|>"
    assert b"".join(pieces) == text.encode() and any(len(p.decode("utf-8", "replace")) != len(p) for p in pieces)
    assert ours.decode_tokens_bytes(np.array(ids, dtype=np.uint16)) == theirs.decode_tokens_bytes(ids)
    assert ours.decode_tokens_bytes([]) == []


def test_the_vocabulary_facts(ours, theirs):
    assert ours.eot_token == theirs.eot_token == 50256
    assert ours.max_token_value == theirs.max_token_value == 50256
    assert ours.special_tokens_set == theirs.special_tokens_set == {EOT}
    assert ours.token_byte_values() == theirs.token_byte_values()
    assert len(ours.token_byte_values()) == 50256  # the special token is not a mergeable one


def test_special_token(pair_fim):
    """tiktoken's special-token test (written for cl100k's three), on GPT-2 with the same three."""
    tok, enc = pair_fim
    eot, fip, fim = (tok.encode_single_token(t) for t in FIM)
    assert (eot, fip, fim) == (enc.eot_token, 50257, 50258) and tok.eot_token == eot
    text = "<|endoftext|> hello <|fim_prefix|>"
    assert tok.encode(text, disallowed_special=()) == enc.encode(text, disallowed_special=())
    assert eot not in tok.encode(text, disallowed_special=())
    for disallowed in ("all", {EOT}, {FIM_PREFIX}):
        with pytest.raises(ValueError, match="disallowed special token"):
            tok.encode(text, disallowed_special=disallowed)
        with pytest.raises(ValueError, match="disallowed special token"):
            enc.encode(text, disallowed_special=disallowed)
    with pytest.raises(ValueError):
        tok.encode(text, allowed_special=set())  # tiktoken's default

    text = "<|endoftext|> hello <|fim_prefix|> there <|fim_middle|>"
    cases = [
        ({"disallowed_special": ()}, set()),
        ({"allowed_special": "all", "disallowed_special": ()}, {eot, fip, fim}),
        ({"allowed_special": "all", "disallowed_special": "all"}, {eot, fip, fim}),
        ({"allowed_special": "all"}, {eot, fip, fim}),
        ({"allowed_special": {FIM_PREFIX}, "disallowed_special": ()}, {fip}),
        ({"allowed_special": {EOT}, "disallowed_special": ()}, {eot}),
        ({"allowed_special": {FIM_MIDDLE}, "disallowed_special": ()}, {fim}),
    ]
    for arguments, specials_in in cases:
        ids = tok.encode(text, **arguments)
        assert ids == enc.encode(text, **arguments), arguments
        assert {eot, fip, fim} & set(ids) == specials_in, arguments
    assert tok.encode(text) == enc.encode(text, allowed_special="all")  # with neither: CS336's default


def test_the_error_and_its_first_line(ours, theirs):
    for text in ("<|endoftext|>", "a<|endoftext|>b", "x" * 100 + "<|endoftext|>"):
        with pytest.raises(ValueError) as their_error:
            theirs.encode(text)
        with pytest.raises(ValueError) as our_error:
            ours.encode(text, allowed_special=set())
        first = str(their_error.value).split("\n")[0]
        assert first == "Encountered text corresponding to disallowed special token '<|endoftext|>'."
        assert str(our_error.value).split("\n")[0] == first
        assert "allowed_special" in str(our_error.value) and "disallowed_special=()" in str(our_error.value)


def test_a_disallowed_string_need_not_be_a_special_token(ours, theirs):
    """tiktoken searches the text for every string given as disallowed_special, and ignores an
    allowed one that is no special token."""
    for arguments in ({"disallowed_special": {"world"}}, {"allowed_special": "all", "disallowed_special": {"world"}}):
        expected = ("ValueError", "Encountered text corresponding to disallowed special token 'world'.")
        assert outcome(theirs.encode, "hello world", **arguments) == expected
        assert outcome(ours.encode, "hello world", **arguments) == expected
    arguments = {"allowed_special": {"hello", EOT}}
    assert ours.encode("hello<|endoftext|>", **arguments) == theirs.encode("hello<|endoftext|>", **arguments)


def test_bad_arguments_are_refused_as_tiktoken_refuses_them(ours, theirs):
    with pytest.raises(TypeError):
        theirs.encode("hi", allowed_special=EOT)
    with pytest.raises(TypeError, match="allowed_special takes"):
        ours.encode("hi", allowed_special=EOT)
    with pytest.raises(TypeError, match="disallowed_special takes"):
        ours.encode("hi", disallowed_special=EOT)
    with pytest.raises(TypeError, match="as str"):
        ours.encode("hi", allowed_special={b"<|endoftext|>"})
    with pytest.raises(TypeError, match="encode takes a str"):
        ours.encode(b"hi", allowed_special="all")
    with pytest.raises(TypeError):
        ours.encode_ordinary(b"hi")


def test_batch_encode(ours, theirs):
    text1, text2 = "hello world", "goodbye world"
    assert ours.encode_batch([text1]) == [ours.encode(text1)] == theirs.encode_batch([text1])
    assert ours.encode_batch([text1, text2]) == theirs.encode_batch([text1, text2])
    assert ours.encode_ordinary_batch([text1]) == [ours.encode_ordinary(text1)]
    assert ours.encode_ordinary_batch([text1, text2], num_threads=2) == theirs.encode_ordinary_batch([text1, text2])
    assert ours.encode_ordinary_batch(iter([text1, text2])) == theirs.encode_ordinary_batch([text1, text2])
    assert ours.decode_batch(ours.encode_batch([text1, text2])) == [text1, text2]
    with pytest.raises(TypeError, match="not one str"):
        ours.encode_ordinary_batch(text1)


def test_batch_encode_with_tiktokens_special_arguments(ours, theirs):
    texts = ["hello", "a <|endoftext|> b", "<|endoftext|>"]
    for arguments in ({"allowed_special": "all"}, {"disallowed_special": ()}, {"allowed_special": {EOT}}):
        assert ours.encode_batch(texts, **arguments) == theirs.encode_batch(texts, **arguments)
        assert ours.encode_batch(iter(texts), **arguments) == theirs.encode_batch(texts, **arguments)
        threaded = ours.encode_batch(texts, num_workers=2, engine="tiktoken", **arguments)
        assert threaded == theirs.encode_batch(texts, **arguments)
    assert ours.encode_batch(texts, disallowed_special=()) == ours.encode_ordinary_batch(texts)
    # Every text is checked before any is encoded: the second holds a disallowed token.
    for arguments in ({"allowed_special": set()}, {"disallowed_special": {EOT}}):
        with pytest.raises(ValueError, match="disallowed special token '<|endoftext|>'"):
            theirs.encode_batch(texts, **arguments)
        with pytest.raises(ValueError, match="disallowed special token '<|endoftext|>'"):
            ours.encode_batch(texts, **arguments)
    with pytest.raises(TypeError, match="not one str"):
        ours.encode_batch("hello", allowed_special="all")


def test_a_vocabulary_with_a_gap_counts_as_tiktoken_counts(ours):
    """n_vocab is the largest id plus one, not the number of tokens (tiktoken's meaning)."""
    import tiktoken

    vocab = {i: t for i, t in ours.vocab.items() if i != 50256}
    vocab[60000] = EOT.encode()
    tok = Tokenizer(vocab, ours.merges, [EOT])
    enc = tiktoken.Encoding(name="gap", pat_str=GPT2_PATTERN, mergeable_ranks=tiktoken_gpt2()._mergeable_ranks,
                            special_tokens={EOT: 60000})
    assert tok.n_vocab == enc.n_vocab == 60001 and len(tok.vocab) == 50257
    assert tok.max_token_value == enc.max_token_value == 60000
    assert tok.eot_token == enc.eot_token == 60000
    assert tok.encode("a<|endoftext|>", allowed_special="all") == enc.encode("a<|endoftext|>", allowed_special="all")


def test_eot_token_needs_the_endoftext_special_token(ours):
    tok = Tokenizer(ours.vocab, ours.merges, ["<|end|>"])
    with pytest.raises(KeyError, match="not a special token"):
        _ = tok.eot_token
    assert tok.special_tokens_set == {"<|end|>"} and tok.n_vocab == 50258  # <|end|> got the next id


def test_what_these_methods_leave_as_it_was(ours):
    """With neither argument, encode is CS336's (special tokens allowed); the variants are kept, and
    one with every special token allowed is the tokenizer itself."""
    text = "a<|endoftext|>b"
    assert ours.encode(text) == ours.encode(text, allowed_special="all") == [64, 50256, 65]
    assert ours.encode(text, allowed_special={EOT, "not special"}) == [64, 50256, 65]
    assert ours._variant(frozenset({EOT})) is ours
    assert ours._variant(frozenset()) is ours._variant(frozenset())
    ordinary = ours._variant(frozenset())
    assert ordinary.vocab == {i: t for i, t in ours.vocab.items() if i != 50256}


# --- generated text -----------------------------------------------------------------------------------

PIECES = [EOT, FIM_PREFIX, FIM_MIDDLE, "<|", "|>", "endoftext", "<|endof", "text|>", " ", "  ", "\n", "hello", " world",
          "'s", "12345", "👍", "\ud83d", "请", "!"]
texts = st.lists(st.sampled_from(PIECES) | st.text(max_size=8), max_size=12).map("".join)
choices = st.one_of(st.none(), st.just("all"), st.sets(st.sampled_from(FIM + ["hello", "<|other|>"]), max_size=3),
                    st.just(()))


@settings(max_examples=300, deadline=None)
@given(text=texts)
def test_encode_ordinary_equals_tiktokens(ours, theirs, text):
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text) == ours.encode(text, disallowed_special=())


@settings(max_examples=400, deadline=None)
@given(text=texts, allowed=choices, disallowed=choices)
def test_allowed_and_disallowed_special_equal_tiktokens(pair_fim, text, allowed, disallowed):
    """Every combination, also sets naming strings that are no special token ("hello" disallowed
    raises on "hello", as in tiktoken), and the raise with the same first line."""
    tok, enc = pair_fim
    arguments = {k: v for k, v in (("allowed_special", allowed), ("disallowed_special", disallowed)) if v is not None}
    if not arguments:  # with neither, ours keeps CS336's default: tiktoken's with every special token allowed
        assert tok.encode(text) == enc.encode(text, allowed_special="all")
        return
    # tiktoken's allowed_special must be a set (ours takes any collection)
    theirs_arguments = {k: set(v) if isinstance(v, tuple) and k[0] == "a" else v for k, v in arguments.items()}
    expected = outcome(enc.encode, text, **theirs_arguments)
    assert outcome(tok.encode, text, **arguments) == expected
    assert outcome(tok.encode_batch, ["", text], **arguments) == (
        expected if isinstance(expected, tuple) else [[], expected])


# --- nanoGPT's OpenWebText preparation -------------------------------------------------------------------


def prepare(enc, documents: list[str], path) -> np.ndarray:
    """nanoGPT's data/openwebtext/prepare.py in its published shape: each document encoded with
    `encode_ordinary` and `eot_token` appended, their lengths summed, and all the ids written in
    batches into a `uint16` memmap (which only holds ids below 2**16, as `max_token_value` says)."""
    assert enc.max_token_value < 2**16
    encoded = []
    for text in documents:
        ids = enc.encode_ordinary(text)
        ids.append(enc.eot_token)
        encoded.append({"ids": ids, "len": len(ids)})
    total = np.sum([e["len"] for e in encoded], dtype=np.uint64)
    arr = np.memmap(path, dtype=np.uint16, mode="w+", shape=(int(total),))
    idx = 0
    for start in range(0, len(encoded), 16):  # batches of documents, concatenated
        batch = np.concatenate([np.array(e["ids"]) for e in encoded[start : start + 16]])
        arr[idx : idx + len(batch)] = batch
        idx += len(batch)
    arr.flush()
    return np.fromfile(path, dtype=np.uint16)


def test_nanogpt_openwebtext_preparation_gives_the_same_array(ours, theirs, tmp_path):
    sample = (Path(cs336_basics.__file__).parent / "data" / "sample.txt").read_text(encoding="utf-8")
    # Web documents can hold the special token's text: encode_ordinary reads it as text.
    documents = sample.split(EOT) + ["a page quoting <|endoftext|> in its text", "", "\ud83d\udc4d \ud83d"]
    with_ours = prepare(ours, documents, tmp_path / "ours.bin")
    with_theirs = prepare(theirs, documents, tmp_path / "theirs.bin")
    assert (tmp_path / "ours.bin").read_bytes() == (tmp_path / "theirs.bin").read_bytes()
    assert len(with_ours) > 60_000 and (with_ours == 50256).sum() == len(documents)
    assert np.array_equal(with_ours, with_theirs)
