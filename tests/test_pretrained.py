"""The pretrained encodings (gpt2, r50k_base, p50k_base, cl100k_base, o200k_base): ids equal to tiktoken's.

The rank files come offline (see `tests.common.tiktoken_file_bytes`, each checked by hash) and are
served to tiktoken's own loader through a cache folder, as a user's cache would. The key claim is
that merges recovered from ranks give tiktoken's BPE; it is checked on every token of every
vocabulary, on concatenations of random tokens, and on generated text.
"""

import os

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer
from cs336_basics.encode.encoder import bpe, build_merge_table
from cs336_basics.formats.tiktoken import load_ranks, parse_ranks, recover_merges, vocab_from_ranks
from tests.common import TIKTOKEN_FILES, tiktoken_file_bytes

NAMES = ["gpt2", "r50k_base", "p50k_base", "cl100k_base", "o200k_base"]
# Examples per run, over all names; BPE_FUZZ_EXAMPLES raises it.
FUZZ_EXAMPLES = max(int(os.environ.get("BPE_FUZZ_EXAMPLES", 2000)), 2000)


# tiktoken finds every rank file in a cache folder that tests/conftest.py fills: no network.
pytestmark = [pytest.mark.usefixtures("tiktoken_cache"), pytest.mark.slow]  # whole vocabularies of up to 200k tokens


_loaded: dict[str, tuple] = {}


def load(name: str) -> tuple[Tokenizer, object]:
    """Ours and tiktoken's encoding `name`, loaded once per test run."""
    if name not in _loaded:
        import tiktoken

        _loaded[name] = (Tokenizer.from_pretrained(name), tiktoken.get_encoding(name))
    return _loaded[name]


def text_strategy(name: str):
    """Text mixing the encoding's special tokens, whitespace runs, scripts, digits and contractions."""
    pieces = list("aZé ßЖ中😀'’.,!?-/0\t\n\r") + [
        "   ", "      ", "\n\n", " \n ", "'s", "'LL", "HeLLo", " world", "1234567", "\u00a0", "\u3000",
        "\u0301", "👩‍💻", "<|", "|>", "<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>",
    ]
    return st.lists(
        st.one_of(st.sampled_from(pieces), st.text(st.characters(exclude_categories=["Cs", "Cn"]), max_size=6)),
        max_size=30,
    ).map("".join)


@pytest.mark.parametrize("name", NAMES)
def test_ids_are_tiktokens_ranks_and_special_tokens(name):
    tok, enc = load(name)
    ranks = enc._mergeable_ranks
    special_ids = set(enc._special_tokens.values())
    assert {token_id: token for token, token_id in ranks.items()} == {
        token_id: token for token_id, token in tok.vocab.items() if token_id not in special_ids
    }
    assert {t: tok.encode(t) for t in tok.special_tokens} == {t: [i] for t, i in enc._special_tokens.items()}
    assert len(tok.vocab) == len(ranks) + len(enc._special_tokens)


def test_single_bytes_are_not_at_ids_0_to_255_in_byte_order():
    tok, _ = load("cl100k_base")
    assert tok.encode("!") == [0] and tok.vocab[0] == b"!"
    assert tok.encode("\x00") != [0]
    assert sorted(i for i, t in tok.vocab.items() if len(t) == 1) == list(range(256))
    assert tok.decode([100257, 100276]) == "<|endoftext|><|endofprompt|>"  # specials after a gap


@pytest.mark.parametrize("name", ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"])
def test_every_token_alone_is_one_token(name):
    """BPE on each token's own bytes gives that token: the recovered merges rebuild all of them."""
    tok, _ = load(name)
    table = _table(name)
    specials = {t.encode() for t in tok.special_tokens}
    wrong = [(i, t) for i, t in tok.vocab.items() if t not in specials and bpe(t, table) != (i,)]
    assert wrong == []


_tables: dict[str, object] = {}


def _table(name: str):
    if name not in _tables:
        tok, _ = load(name)
        _tables[name] = build_merge_table(tok.vocab, tok.merges)
    return _tables[name]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=FUZZ_EXAMPLES // len(NAMES), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_encode_equals_tiktoken(name, data):
    """Whole texts with special tokens; then BPE alone on random tokens glued together, where
    tiktoken (which merges any adjacent pair that makes a token) and our merge list (one split per
    token) would disagree if recovery were wrong."""
    tok, enc = load(name)
    text = data.draw(text_strategy(name), label="text")
    ids = tok.encode(text)
    assert ids == enc.encode(text, allowed_special="all")
    assert tok.decode(ids) == text
    special_ids = set(enc._special_tokens.values())
    drawn = data.draw(st.lists(st.integers(0, enc.max_token_value), min_size=1, max_size=6), label="token ids")
    glued = b"".join(tok.vocab[i] for i in drawn if i in tok.vocab and i not in special_ids)
    if glued:
        assert list(bpe(glued, _table(name))) == enc._encode_single_piece(glued)


@pytest.mark.parametrize("name", NAMES)
def test_encode_equals_tiktoken_on_fixtures(name):
    from tests.common import FIXTURES_PATH

    tok, enc = load(name)
    for path in sorted(FIXTURES_PATH.glob("*.txt"))[:6]:
        text = path.read_text(encoding="utf-8")[:20_000]
        assert tok.encode(text) == enc.encode(text, allowed_special="all"), path.name


def test_a_tiktoken_file_loads_with_pattern_and_special_tokens(tmp_path):
    """GPT-2's ranks with GPT-4's pattern, against tiktoken given the same."""
    import tiktoken

    from cs336_basics.text.patterns import regex_string

    path = tmp_path / "r50k_base.tiktoken"
    path.write_bytes(tiktoken_file_bytes("r50k_base"))
    specials = {"<|endoftext|>": 50256, "<|x|>": 60000}
    tok = Tokenizer.from_pretrained(path, pattern="cl100k", special_tokens=specials, sha256=TIKTOKEN_FILES["r50k_base"][1])
    enc = tiktoken.Encoding(
        name="t", pat_str=regex_string("cl100k"), mergeable_ranks=load("r50k_base")[1]._mergeable_ranks, special_tokens=specials
    )
    text = "Hello  world's 12345<|endoftext|>\n\n  x<|x|>HELLO'LL"
    assert tok.encode(text) == enc.encode(text, allowed_special="all")
    assert tok.pattern == "cl100k"


def test_a_wrong_hash_names_the_file(tmp_path):
    path = tmp_path / "r50k_base.tiktoken"
    path.write_bytes(tiktoken_file_bytes("r50k_base").replace(b" 50255\n", b" 50254\n"))
    with pytest.raises(ValueError, match=rf"{path}: sha256 is [0-9a-f]+, expected 306cd27f"):
        load_ranks(path, expected_sha256=TIKTOKEN_FILES["r50k_base"][1])
    with pytest.raises(ValueError, match="repeats rank 50254"):
        Tokenizer.from_pretrained(path)


@pytest.mark.parametrize(
    "text, problem",
    [
        (b"IQ== 0\nIQ== 1\n", "line 2 repeats the token b'!'"),
        (b"IQ== 0\nIg== zero\n", "line 2 must be 'base64-token rank'"),
        (b"IQ== 0\n!!!! 1\n", "line 2 has invalid base64"),
        (b"", "holds no tokens"),
        (b"\xff", "not a rank file"),
    ],
)
def test_malformed_rank_files(text, problem):
    with pytest.raises(ValueError, match=f"^x.tiktoken: .*{regex.escape(problem)}"):
        parse_ranks(text, source="x.tiktoken")


def test_unrecoverable_ranks_are_refused():
    ranks = {bytes([b]): b for b in range(256)}
    ranks[b"abc"] = 256  # no token for ab or bc: no merge can make it
    with pytest.raises(ValueError, match=r"ranks: token b'abc' \(rank 256\) cannot be recovered.*3 parts"):
        recover_merges(ranks)
    del ranks[b"a"]
    with pytest.raises(ValueError, match="no token for the single byte b'a'"):
        recover_merges(ranks)


def test_recovery_follows_bpe_not_the_first_split():
    """BPE on abc joins the lower-ranked of ab and bc first; on aaa, the leftmost a + a."""
    ranks = {bytes([b]): b for b in range(256)}
    ranks.update({b"bc": 256, b"ab": 257, b"abc": 258})
    assert recover_merges(ranks) == [(b"b", b"c"), (b"a", b"b"), (b"a", b"bc")]
    ranks.update({b"bc": 257, b"ab": 256})
    assert recover_merges(ranks) == [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c")]
    ranks = {bytes([b]): b for b in range(256)} | {b"aa": 256, b"aaa": 257}
    assert recover_merges(ranks)[-1] == (b"aa", b"a")
    vocab = vocab_from_ranks(ranks, {"<s>": 300})
    assert vocab[300] == b"<s>" and vocab[257] == b"aaa"


def test_unknown_names_list_the_known_ones():
    with pytest.raises(FileNotFoundError, match="cl100k_base, o200k_base"):
        Tokenizer.from_pretrained("gpt5_base")


def test_without_tiktoken_the_message_names_the_extra(monkeypatch):
    import sys

    from cs336_basics.formats import pretrained

    monkeypatch.setattr(pretrained, "_recovered", {})
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import tiktoken now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'cs336-basics\[tiktoken\]'"):
        Tokenizer.from_pretrained("gpt2")


def test_a_failed_download_says_where_tiktoken_looks(monkeypatch):
    import tiktoken

    from cs336_basics.formats import pretrained

    def offline(name):
        raise ConnectionError("no network")

    monkeypatch.setattr(pretrained, "_recovered", {})
    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    with pytest.raises(ValueError, match="cannot get the rank file of o200k_base through tiktoken.*TIKTOKEN_CACHE_DIR"):
        Tokenizer.from_pretrained("o200k_base")


def test_names_take_no_pattern_or_special_tokens():
    with pytest.raises(ValueError, match="brings its own pattern and special tokens"):
        Tokenizer.from_pretrained("gpt2", special_tokens=["<s>"])
