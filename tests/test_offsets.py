"""Offsets: `Tokenizer.decode_with_offsets` against tiktoken's on GPT-2's vocabulary, and
`Tokenizer.encode_with_offsets` against Hugging Face's `Encoding.offsets` on the tokenizer.json we
write, on generated text with characters of 1 to 4 UTF-8 bytes (often split between tokens) and
special tokens."""

import json
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer, train_bpe
from cs336_basics.encode.offsets import replaced_offsets, token_spans
from cs336_basics.text.surrogates import fix_surrogates
from tests.common import FIXTURES_PATH, gpt2_files, tiktoken_gpt2

EOT = "<|endoftext|>"
# Characters of 1, 2, 3 and 4 UTF-8 bytes: ASCII, accents, CJK, emoji (one with a joiner and a
# variation selector), and some that GPT-2 splits oddly.
PIECES = [" ", "  ", "a", "The", " cat", "é", " naïve", "ő", "Ω", "日本", "語", " 你好", "😀", "🤗", "👩‍💻", "❤️", "𝔘",
          "\n", "\t", "'s", "1234", ",", "!!", "\u0301", "ﬁ"]
CHARACTERS = st.characters(exclude_categories=["Cs"])


def texts(specials: list[str]) -> st.SearchStrategy[str]:
    pieces = st.one_of(st.sampled_from(PIECES), st.sampled_from(specials), st.text(CHARACTERS, max_size=3))
    return st.lists(pieces, max_size=16).map("".join)


@pytest.fixture(scope="module")
def gpt2():
    return Tokenizer.from_files(*gpt2_files(), special_tokens=[EOT])


@pytest.fixture(scope="module")
def small():
    """A small vocabulary, trained here on English: most characters outside ASCII come out in pieces."""
    vocab, merges = train_bpe(FIXTURES_PATH / "english.txt", 400, [EOT], num_workers=1)
    return Tokenizer(vocab, merges, [EOT])


def hugging_face(tokenizer: Tokenizer, folder):
    import tokenizers

    tokenizer.save_pretrained(folder)
    return tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))


def start_of_byte(data: bytes, position: int) -> int:
    """The index of the character holding byte `position` of `data` decoded with errors="replace"
    (computed the slow way: decoding the bytes up to it, the last character is the one holding it)."""
    return len(data[: position + 1].decode("utf-8", errors="replace")) - 1


# --- decode_with_offsets ---------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=texts([EOT]), cut=st.tuples(st.integers(0, 40), st.integers(0, 40)))
def test_decode_with_offsets_is_tiktokens_on_gpt2(gpt2, text, cut):
    """On the ids of a text, and on a slice of them, which may start or end inside a character:
    the same text and offsets as tiktoken, or the same error (tiktoken raises on invalid UTF-8)."""
    enc = tiktoken_gpt2()
    ids = gpt2.encode(text)
    assert gpt2.decode_with_offsets(ids) == enc.decode_with_offsets(ids)
    part = ids[cut[0]: cut[0] + cut[1]]
    try:
        expected = enc.decode_with_offsets(part)
    except UnicodeDecodeError as e:
        with pytest.raises(UnicodeDecodeError) as ours:
            gpt2.decode_with_offsets(part)
        assert (ours.value.start, ours.value.end, ours.value.object) == (e.start, e.end, e.object)
        assert 'errors="replace"' in str(ours.value)
    else:
        assert gpt2.decode_with_offsets(part) == expected


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(ids=st.lists(st.one_of(st.integers(0, 50256), st.integers(0, 255), st.sampled_from([94, 114, 118, 160, 171, 226])),
                    max_size=12))
def test_decode_with_offsets_on_any_ids_is_tiktokens_or_replaces_as_decode(gpt2, ids):
    """Any ids, mostly not valid UTF-8 together: strict is tiktoken's (or its error); "replace"
    gives `decode`'s text, and each token's start is the character holding its first byte."""
    enc = tiktoken_gpt2()
    try:
        expected = enc.decode_with_offsets(ids)
    except UnicodeDecodeError:
        with pytest.raises(UnicodeDecodeError):
            gpt2.decode_with_offsets(ids)
    else:
        assert gpt2.decode_with_offsets(ids) == expected
    text, starts = gpt2.decode_with_offsets(ids, errors="replace")
    data = gpt2.decode_bytes(ids)
    assert text == gpt2.decode(ids)
    byte_starts = [len(gpt2.decode_bytes(ids[:n])) for n in range(len(ids))]
    assert starts == [start_of_byte(data, b) for b in byte_starts]


def test_decode_with_offsets_examples_and_refusals(gpt2):
    ids = gpt2.encode(" 日本 😀")  # 日, 本 and 😀 are each cut between two tokens
    assert [gpt2.vocab[i] for i in ids] == [b" \xe6", b"\x97", b"\xa5", b"\xe6\x9c", b"\xac", b" \xf0\x9f\x98", b"\x80"]
    assert gpt2.decode_with_offsets(ids) == (" 日本 😀", [0, 1, 1, 2, 2, 3, 4])
    assert gpt2.decode_with_offsets(iter(ids)) == gpt2.decode_with_offsets(ids)
    assert gpt2.decode_with_offsets([]) == ("", [])
    # Without its first token, 日 lacks its first byte: each byte left is invalid, one U+FFFD each.
    assert gpt2.decode_with_offsets(ids[1:], errors="replace") == ("\ufffd\ufffd本 😀", [0, 1, 2, 2, 3, 4])
    assert replaced_offsets([b"\xe6", b"a", b"\x80\x80", b"b"]) == ("\ufffda\ufffd\ufffdb", [0, 1, 2, 4])
    with pytest.raises(UnicodeDecodeError, match="invalid start byte"):
        gpt2.decode_with_offsets(ids[1:])
    with pytest.raises(ValueError, match="token id 99999 is not in the vocabulary"):
        gpt2.decode_with_offsets([31373, 99999])
    with pytest.raises(ValueError, match='errors must be "strict" or "replace"'):
        gpt2.decode_with_offsets(ids, errors="ignore")


def test_decode_with_offsets_takes_numpy_arrays(gpt2):
    np = pytest.importorskip("numpy")
    ids = gpt2.encode("hello world")
    assert gpt2.decode_with_offsets(np.array(ids, dtype=np.uint16)) == ("hello world", [0, 5])
    with pytest.raises(ValueError, match="0-d array"):
        gpt2.decode_with_offsets(np.array(5))


# --- encode_with_offsets ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_gpt2(gpt2, tmp_path_factory):
    return hugging_face(gpt2, tmp_path_factory.mktemp("gpt2"))


@pytest.fixture(scope="module")
def hf_small(small, tmp_path_factory):
    return hugging_face(small, tmp_path_factory.mktemp("small"))


@pytest.fixture(scope="module")
def o200k_layout(gpt2, tmp_path_factory):
    """GPT-2's vocabulary under o200k's regex: our tokenizer.json cuts with a Split, then ByteLevel."""
    ours = Tokenizer(gpt2.vocab, gpt2.merges, [EOT], pattern="o200k")
    return ours, hugging_face(ours, tmp_path_factory.mktemp("o200k"))


def same_as_hugging_face(ours: Tokenizer, hf, text: str, add_special_tokens: bool = False) -> None:
    theirs = hf.encode(text, add_special_tokens=add_special_tokens)
    assert ours.encode_with_offsets(text, add_special_tokens=add_special_tokens) == (theirs.ids, theirs.offsets)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=texts([EOT]))
def test_encode_with_offsets_is_hugging_faces(gpt2, hf_gpt2, small, hf_small, o200k_layout, text):
    same_as_hugging_face(gpt2, hf_gpt2, text)
    same_as_hugging_face(small, hf_small, text)
    same_as_hugging_face(*o200k_layout, text)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=texts([EOT]))
def test_each_span_is_the_text_its_token_encodes(small, text):
    """Without an oracle: ids as `encode`; each token's bytes lie in its span's text, are all of it when
    the token starts and ends between characters, and the spans run through the text in order."""
    ids, spans = small.encode_with_offsets(text)
    assert ids == small.encode(text)
    data = text.encode("utf-8")
    at = 0
    for token_id, (start, end) in zip(ids, spans):
        token = small.vocab[token_id]
        span = text[start:end].encode("utf-8")
        before = len(text[:start].encode("utf-8"))
        assert before <= at and at + len(token) <= before + len(span)
        if at == before and at + len(token) == before + len(span):
            assert token == span
        at += len(token)
    assert at == len(data)
    assert [s for s, _ in spans] == sorted(s for s, _ in spans) and [e for _, e in spans] == sorted(e for _, e in spans)
    assert not spans or (spans[0][0] == 0 and spans[-1][1] == len(text))


def test_encode_with_offsets_examples(gpt2):
    assert gpt2.encode_with_offsets("hello world") == ([31373, 995], [(0, 5), (5, 11)])
    ids, spans = gpt2.encode_with_offsets(" 日本 😀" + EOT + "x")
    assert spans == [(0, 2), (1, 2), (1, 2), (2, 3), (2, 3), (3, 5), (4, 5), (5, 18), (18, 19)]
    assert ids[7] == 50256
    assert gpt2.encode_with_offsets("") == ([], [])
    with pytest.raises(TypeError, match="takes a str"):
        gpt2.encode_with_offsets(b"hello")
    assert token_spans([b"\xf0\x9f", b"\x98", b"\x80x"]) == [(0, 1), (0, 1), (0, 2)]


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.lists(st.sampled_from(["\ud83d\ude00", "\ud83d", "\ude00", "a", " é", "日", "\ud800\udc00"]), max_size=10)
       .map("".join))
def test_spans_of_text_with_surrogates_index_the_text_as_given(gpt2, hf_gpt2, text):
    """A surrogate pair is one character to `encode` and two to the caller; a lone one is U+FFFD.
    The spans are Hugging Face's on the repaired text, put back on the text as given."""
    valid = fix_surrogates(text)
    ids, spans = gpt2.encode_with_offsets(text)
    theirs = hf_gpt2.encode(valid, add_special_tokens=False)
    assert ids == theirs.ids == gpt2.encode(text)
    # Where each character of `valid`, and its end, starts in `text`: the shortest prefix repairing to it.
    back = [min(i for i in range(len(text) + 1) if fix_surrogates(text[:i]) == valid[:k]) for k in range(len(valid) + 1)]
    assert back[-1] == len(text)
    assert spans == [(back[s], back[e]) for s, e in theirs.offsets]


@pytest.fixture(scope="module")
def small_document(small, tmp_path_factory):
    folder = tmp_path_factory.mktemp("doc")
    small.save_pretrained(folder)
    return json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))


def loaded_both_ways(document: dict, folder):
    import tokenizers

    (folder / "tokenizer.json").write_text(json.dumps(document), encoding="utf-8")
    return Tokenizer.from_pretrained(folder / "tokenizer.json"), tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))


def test_a_templates_tokens_span_nothing_as_in_hugging_face(small, small_document, tmp_path):
    from tokenizers import processors

    eot = small.encode(EOT)[0]
    template = processors.TemplateProcessing(single=f"{EOT} $A {EOT}", special_tokens=[(EOT, eot)])
    ours, hf = loaded_both_ways(small_document | {"post_processor": json.loads(template.__getstate__())}, tmp_path)
    for text in ["hello world", " 日本😀", ""]:
        same_as_hugging_face(ours, hf, text, add_special_tokens=True)
        same_as_hugging_face(ours, hf, text)
    ids, spans = small.encode_with_offsets("the cat")
    assert ours.encode_with_offsets("the cat", add_special_tokens=True) == ([eot, *ids, eot], [(0, 0), *spans, (0, 0)])


def test_a_normalizer_that_changes_nothing_keeps_the_spans_and_one_that_changes_the_text_is_refused(small_document, tmp_path):
    ours, hf = loaded_both_ways(small_document | {"normalizer": {"type": "NFC"}}, tmp_path)
    for text in ["héllo wörld 日本😀", "caf\u00e9" + EOT]:
        same_as_hugging_face(ours, hf, text)
    with pytest.raises(ValueError, match="normalizer changes the text.*not supported.*normalize the text first"):
        ours.encode_with_offsets("cafe\u0301")
    same_as_hugging_face(ours, hf, unicodedata.normalize("NFC", "cafe\u0301"))  # as the message says


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_offsets_on_todays_vocabularies_are_tiktokens_and_hugging_faces(name, tiktoken_cache, tmp_path):
    """cl100k_base and o200k_base (their rank files from the test dependencies), with their special
    tokens: decoding as tiktoken, encoding as Hugging Face on the tokenizer.json we write."""
    import tiktoken

    enc, ours = tiktoken.get_encoding(name), Tokenizer.from_pretrained(name)
    hf = hugging_face(ours, tmp_path)

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=texts(ours.special_tokens), cut=st.integers(0, 8))
    def check(text, cut):
        ids = ours.encode(text)
        assert ours.decode_with_offsets(ids) == enc.decode_with_offsets(ids)
        try:
            expected = enc.decode_with_offsets(ids[cut:])
        except UnicodeDecodeError:
            with pytest.raises(UnicodeDecodeError):
                ours.decode_with_offsets(ids[cut:])
        else:
            assert ours.decode_with_offsets(ids[cut:]) == expected
        same_as_hugging_face(ours, hf, text)

    check()


# --- bpe inspect --offsets -------------------------------------------------------------------------


def test_inspect_offsets_prints_each_tokens_span(small, tmp_path, capsys):
    from cs336_basics.cli import main
    from cs336_basics.train.merge_log import readable_token

    small.save_pretrained(tmp_path / "small")
    text = "Héllo 日本 😀" + EOT + "\tok"
    assert main(["inspect", "--tokenizer", str(tmp_path / "small"), text, "--offsets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    ids, spans = small.encode_with_offsets(text)
    assert lines[1] == " ".join(map(str, ids)) and lines[3].split() == ["start", "end", "id", "token", "text"]
    rows = [line.split(None, 3) for line in lines[4:]]
    assert [(int(s), int(e), int(i)) for s, e, i, _ in rows] == [(s, e, i) for i, (s, e) in zip(ids, spans)]
    for (start, end), token_id, row in zip(spans, ids, rows):
        shown = f"[{readable_token(small.vocab[token_id])}]"
        assert row[3].startswith(shown) and row[3].rstrip().endswith(f"[{readable_token(text[start:end].encode())}]")
    assert main(["inspect", "--tokenizer", str(tmp_path / "small"), text]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3  # without --offsets, as before
