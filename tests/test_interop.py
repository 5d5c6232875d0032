"""Tokenizer directories, tokenizer.json (Hugging Face) and .tiktoken export: parity and round trips.

Oracles: Hugging Face `tokenizers` and `transformers` reading the files we write (and writing the
files we read), and tiktoken given the ranks we export. Bad files give one error naming the file.
"""

import json
import os

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer
from tests.adapters import run_train_bpe
from tests.common import FIXTURES_PATH

EOT = "<|endoftext|>"
SPECIALS = [EOT, "<|pad|>"]
FUZZ_EXAMPLES = int(os.environ.get("BPE_FUZZ_EXAMPLES", 2000))

TEXT = st.lists(
    st.one_of(
        st.sampled_from(list("abcxyz ABC'’-.,!?0123\t\n\r éüßЖ中😀") + ["   ", "\n\n", "'s", " the", EOT, "<|pad|>", "\u00a0"]),
        st.text(st.characters(exclude_categories=["Cs", "Cn"]), max_size=4),
    ),
    max_size=25,
).map("".join)


def english() -> str:
    return (FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def trained():
    vocab, merges = run_train_bpe(FIXTURES_PATH / "english.txt", 600, SPECIALS)
    return Tokenizer(vocab, merges, SPECIALS)


@pytest.fixture(scope="module")
def saved(trained, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tok")
    trained.save_pretrained(folder)
    return folder


def test_save_pretrained_writes_three_files_that_load_back(trained, saved):
    assert sorted(p.name for p in saved.iterdir()) == ["merges.txt", "tokenizer.json", "vocab.json"]
    for source in (saved, saved / "tokenizer.json"):
        loaded = Tokenizer.from_pretrained(source)
        assert (loaded.vocab, loaded.merges, loaded.special_tokens) == (trained.vocab, trained.merges, SPECIALS)
    # vocab.json and merges.txt are still the GPT-2 pair
    again = Tokenizer.from_files(saved / "vocab.json", saved / "merges.txt", SPECIALS)
    assert (again.vocab, again.merges) == (trained.vocab, trained.merges)


def test_a_directory_without_tokenizer_json_has_the_gpt2_pattern(trained, tmp_path):
    trained.save(tmp_path / "vocab.json", tmp_path / "merges.txt")
    loaded = Tokenizer.from_pretrained(tmp_path, special_tokens=SPECIALS)
    assert loaded.pattern == "gpt2"
    text = english()[:5000] + EOT
    assert loaded.encode(text) == trained.encode(text)


def test_a_pattern_given_with_a_tokenizer_json_must_be_its_own_under_any_alias(trained, tmp_path):
    Tokenizer(trained.vocab, trained.merges, SPECIALS, pattern="cl100k").save_pretrained(tmp_path)
    for alias in ("cl100k", "cl100k_base"):
        assert Tokenizer.from_pretrained(tmp_path, pattern=alias).pattern == "cl100k"
    with pytest.raises(ValueError, match="has the pattern 'cl100k'; it cannot be loaded with pattern='gpt2'"):
        Tokenizer.from_pretrained(tmp_path, pattern="gpt2")


@settings(max_examples=FUZZ_EXAMPLES // 4, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=TEXT)
def test_hugging_face_reads_our_tokenizer_json_with_our_ids(trained, saved, text):
    hf = _hf(saved)
    assert hf.encode(text).ids == trained.encode(text)


_hf_cache: dict = {}


def _hf(folder):
    if folder not in _hf_cache:
        import tokenizers

        _hf_cache[folder] = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    return _hf_cache[folder]


@pytest.mark.slow
def test_transformers_reads_our_tokenizer_json_with_our_ids(trained, saved):
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_file=str(saved / "tokenizer.json"))
    text = english()[:20_000].replace("\n\n", f"\n{EOT}<|pad|>", 5)
    ids = trained.encode(text)
    assert EOT in text and fast.encode(text) == ids == _hf(saved).encode(text).ids
    assert fast.decode(ids) == text == _hf(saved).decode(ids, skip_special_tokens=False)


PATTERN_TEXT = st.lists(
    st.sampled_from(list("aZé ßЖ中😀'’.,!?-/0\t\n\r") + ["   ", "\r\n", " \n ", "'S", "'ll", "HeLLo", "12345", "2019", EOT]),
    max_size=30,
).map("".join)


@pytest.mark.parametrize("pattern", ["cl100k", "o200k", "none"])
@settings(max_examples=FUZZ_EXAMPLES // 20, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=PATTERN_TEXT)
def test_other_patterns_round_trip_through_hugging_face_and_transformers(trained, pattern, text):
    """The pattern travels in tokenizer.json: HF's Split(regex) gives our pre-tokens (onig runs it)."""
    ours, loaded, hf, fast = _with_pattern(trained, pattern)
    assert loaded.pattern == pattern
    ids = ours.encode(text)
    assert hf.encode(text).ids == ids == loaded.encode(text) == fast.encode(text)
    # the pre-tokens themselves, which a small vocabulary might hide (e.g. digits in threes)
    from cs336_basics.formats.gpt2 import token_to_text
    from cs336_basics.text.patterns import regex_string

    document = text.replace(EOT, "")
    pieces = [document] if pattern == "none" else regex.findall(regex_string(pattern), document)
    expected = [token_to_text(p.encode("utf-8")) for p in pieces if p]
    assert [piece for piece, _ in hf.pre_tokenizer.pre_tokenize_str(document)] == expected


_patterned: dict = {}


def _with_pattern(trained, pattern):
    """Our English vocabulary with another pattern, saved, and read back by us, tokenizers and transformers."""
    if pattern not in _patterned:
        import tempfile

        from transformers import PreTrainedTokenizerFast

        ours = Tokenizer(trained.vocab, trained.merges, SPECIALS, pattern=pattern)
        folder = tempfile.mkdtemp(prefix=f"bpe-{pattern}-")
        ours.save_pretrained(folder)
        path = f"{folder}/tokenizer.json"
        _patterned[pattern] = (
            ours, Tokenizer.from_pretrained(folder), _hf_from(path), PreTrainedTokenizerFast(tokenizer_file=path)
        )
    return _patterned[pattern]


def _hf_from(path):
    import tokenizers

    return tokenizers.Tokenizer.from_file(str(path))


def _hf_trained(tmp_path, *, split_regex: str | None = None):
    """A tokenizer.json written by Hugging Face's own BpeTrainer (ids do not follow the merges)."""
    from tokenizers import Regex, Tokenizer as HFTokenizer, decoders, models, pre_tokenizers, trainers

    hf = HFTokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=split_regex is None)
    if split_regex is None:
        hf.pre_tokenizer = byte_level
    else:
        hf.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(split_regex), behavior="isolated"), byte_level]
        )
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    hf.train([str(FIXTURES_PATH / "english.txt")], trainer)
    path = tmp_path / "hf.json"
    hf.save(str(path))
    return hf, path


@settings(max_examples=FUZZ_EXAMPLES // 4, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=TEXT)
def test_we_read_hugging_face_byte_level_files_with_its_ids(hf_byte_level, text):
    hf, ours = hf_byte_level
    assert ours.encode(text) == hf.encode(text).ids


@pytest.fixture(scope="module")
def hf_byte_level(tmp_path_factory):
    hf, path = _hf_trained(tmp_path_factory.mktemp("hf"))
    return hf, Tokenizer.from_pretrained(path)


@pytest.mark.parametrize("as_written", ["by tiktoken", "by us"])
def test_we_read_split_then_byte_level_files_with_their_ids(tmp_path, as_written):
    """GPT-4's regex as tiktoken spells it means something else to Hugging Face (digits are not cut
    in threes), and we follow Hugging Face; as we write it, it is GPT-4's pattern."""
    from cs336_basics.text.patterns import regex_string
    from cs336_basics.text.pipelines import for_oniguruma

    split = regex_string("cl100k") if as_written == "by tiktoken" else for_oniguruma(regex_string("cl100k"))
    hf, path = _hf_trained(tmp_path, split_regex=split)
    ours = Tokenizer.from_pretrained(path)
    assert (ours.pattern == "cl100k") == (as_written == "by us")
    text = english()[:20_000] + f"{EOT}  HELLO'S  wörld\r\n\r\n 1234567 <|pad|>"
    assert ours.encode(text) == hf.encode(text).ids


def _pipeline_spec(normalizers: list[str], steps: list[dict], added: bool = True) -> tuple[str, dict]:
    """A pipeline pattern, and the added-token flags that go with it (see `formats.definition`)."""
    from cs336_basics.text import pipelines

    return pipelines.make_spec(normalizers, steps), {EOT: (True, True)} if added else {}


@pytest.mark.parametrize("pattern, byte_level", [
    ("gpt2", True), ("cl100k", None), ("o200k", None), ("none", False), (r"\p{L}+|\s+|.", None),
    (_pipeline_spec(["NFC"], [{"byte_level": True}]), True),
    (_pipeline_spec(["NFKC", "NFD"], [{"regex": r"\p{N}{1,3}", "behavior": "Contiguous", "invert": True},
                                      {"string": "é", "behavior": "MergedWithNext", "invert": False}, {"byte_level": False}]), None),
    (_pipeline_spec(["NFC"], [{"byte_level": True}], added=False), True),
    (_pipeline_spec([], [{"regex": r"\p{L}+", "behavior": "Contiguous", "invert": False}, {"byte_level": False}], added=False), None),
    (_pipeline_spec([], [{"regex": r"\p{L}+", "behavior": "Isolated", "invert": True}, {"byte_level": False}], added=False), None),
    (_pipeline_spec([], [{"string": "é", "behavior": "Isolated", "invert": False}, {"byte_level": False}], added=False), None),
], ids=["gpt2", "cl100k", "o200k", "none", "custom", "normalizer-only", "splits", "NFC", "contiguous", "inverted", "string"])
def test_tokenizers_writes_our_tokenizer_json_back_unchanged_and_we_read_back_its_pattern(pattern, byte_level):
    from tokenizers import Tokenizer as HFTokenizer, models, pre_tokenizers

    from cs336_basics.formats import hf

    pattern, added = pattern if isinstance(pattern, tuple) else (pattern, {})
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b" ab", 258: EOT.encode()}
    ours = json.loads(hf.tokenizer_json(vocab, [(b"a", b"b"), (b" ", b"ab")], [EOT], pattern, added_tokens=added))
    assert json.loads(HFTokenizer.from_str(json.dumps(ours)).to_str()) == ours  # every field as tokenizers spells it
    assert hf.parse_tokenizer_json(json.dumps(ours).encode())[3] == pattern
    assert hf.parse_tokenizer_json(json.dumps(ours).encode()).added_tokens == added
    if byte_level is not None:  # GPT-2's layout: tokenizers' own ByteLevel alone, with its regex or without
        plain = HFTokenizer(models.BPE())
        plain.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=byte_level)
        assert ours["pre_tokenizer"] == json.loads(plain.to_str())["pre_tokenizer"]


def test_a_custom_pattern_that_tokenizers_would_read_otherwise_is_not_saved(trained, tmp_path):
    tok = Tokenizer(trained.vocab, trained.merges, SPECIALS, pattern=r"(ab){1,2}+|\s+|.")
    with pytest.raises(ValueError, match=r"repeats a group with \{n,m\}\+, which Hugging Face's regex engine reads differently"):
        tok.save_pretrained(tmp_path)


def test_ours_to_hugging_face_and_back_keeps_ids(hf_byte_level, tmp_path):
    _, ours = hf_byte_level
    ours.save_pretrained(tmp_path)
    again = Tokenizer.from_pretrained(tmp_path)
    text = english()[:20_000] + EOT
    assert again.vocab == ours.vocab and again.encode(text) == ours.encode(text) == _hf(tmp_path).encode(text).ids


# --- tiktoken export ---------------------------------------------------------------------------------


@settings(max_examples=FUZZ_EXAMPLES // 4, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=TEXT)
def test_to_tiktoken_gives_our_ids(trained, text):
    assert _tiktoken_of(trained).encode(text, allowed_special="all") == trained.encode(text)


_tt: dict = {}


def _tiktoken_of(tok):
    if id(tok) not in _tt:
        _tt[id(tok)] = tok.to_tiktoken()
    return _tt[id(tok)]


def test_ours_to_tiktoken_file_and_back_keeps_ids(trained, tmp_path):
    path = tmp_path / "ours.tiktoken"
    trained.save_tiktoken(path)
    specials = {t: trained.encode(t)[0] for t in SPECIALS}
    again = Tokenizer.from_pretrained(path, special_tokens=specials)
    assert again.vocab == trained.vocab and again.merges == trained.merges
    text = english()[:20_000] + EOT
    assert again.encode(text) == trained.encode(text)


def test_ids_that_are_not_ranks_are_refused_and_nothing_is_written(hf_byte_level, tmp_path):
    _, ours = hf_byte_level  # Hugging Face puts the special tokens first, then the bytes in its own order
    vocab = dict(ours.vocab)
    # swap the ids of the first two merged tokens: they no longer follow the merge order
    a, b = (ours.merges[0][0] + ours.merges[0][1]), (ours.merges[1][0] + ours.merges[1][1])
    ids = {t: i for i, t in vocab.items()}
    vocab[ids[a]], vocab[ids[b]] = b, a
    swapped = Tokenizer(vocab, ours.merges, ours.special_tokens)
    with pytest.raises(ValueError, match="ids do not follow the merge order"):
        swapped.save_tiktoken(tmp_path / "x.tiktoken")
    with pytest.raises(ValueError, match="cannot be tiktoken ranks"):
        swapped.to_tiktoken()
    assert list(tmp_path.iterdir()) == []


def test_a_token_no_merge_makes_cannot_be_a_rank(tmp_path):
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"xyz"}
    tok = Tokenizer(vocab, [(b"a", b"b")])
    with pytest.raises(ValueError, match=r"token b'xyz' \(id 257\) is made by no merge"):
        tok.save_tiktoken(tmp_path / "x.tiktoken")


# --- what we refuse --------------------------------------------------------------------------------


def _edited(saved, tmp_path, edit) -> str:
    document = json.loads((saved / "tokenizer.json").read_text(encoding="utf-8"))
    edit(document)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(normalizer={"type": "Lowercase"}), "normalizer 'Lowercase' is not supported"),
        (lambda d: d.update(normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Strip"}]}),
         "normalizer 'Strip' is not supported"),
        (lambda d: d["model"].update(type="WordPiece"), "model 'WordPiece' is not supported"),
        (lambda d: d["model"].update(dropout=0.1), "BPE dropout 0.1 is not supported"),
        (lambda d: d["model"].update(byte_fallback=True), "byte_fallback=true is not supported"),
        (lambda d: (d["model"].update(ignore_merges=True), d.update(normalizer={"type": "NFC"})),
         "ignore_merges=true with a normalizer is not supported"),
        (lambda d: d["model"].update(continuing_subword_prefix="##"), "continuing_subword_prefix='##'"),
        (lambda d: d["pre_tokenizer"].update(add_prefix_space=True), "add_prefix_space=true"),
        (lambda d: d.update(pre_tokenizer={"type": "Metaspace"}), "pre-tokenizer 'Metaspace' is not supported"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}]}), "pre-tokenizer 'Whitespace' is not supported"),
        (lambda d: d.update(post_processor={"type": "BertProcessing"}), "post-processor 'BertProcessing'"),
        (lambda d: d.update(post_processor={"type": "TemplateProcessing"}), "post-processor TemplateProcessing needs"),
        (lambda d: d.update(decoder={"type": "WordPiece"}), "decoder 'WordPiece' is not supported"),
        (lambda d: d["added_tokens"][0].update(lstrip=True), "has lstrip=true"),
        (lambda d: d["added_tokens"][0].update(id=5), "has id 5 but the model gives it id"),
        (lambda d: d["added_tokens"].append(dict(d["added_tokens"][0])), "is listed twice"),
        (lambda d: d["model"]["vocab"].update({"Ġthe": 3}), "both have id 3"),
        (lambda d: d["model"]["merges"].append(["Ġ", "zzzz"]), "not in the vocabulary"),
        (lambda d: d["model"]["vocab"].update({"€": 5000}), "not written in the byte-level alphabet"),
        (lambda d: d["model"]["vocab"].pop("a"), "merge \\d+ names"),
    ],
)
def test_what_we_cannot_reproduce_is_refused_by_name(saved, tmp_path, edit, message):
    path = _edited(saved, tmp_path, edit)
    with pytest.raises(ValueError, match=f"^{path}: .*{message}"):
        Tokenizer.from_pretrained(path)


def test_truncated_and_malformed_files_name_the_file(saved, tmp_path):
    text = (saved / "tokenizer.json").read_bytes()
    path = tmp_path / "tokenizer.json"
    path.write_bytes(text[: len(text) // 2])
    with pytest.raises(ValueError, match=f"^{path}: malformed JSON at line .*truncated"):
        Tokenizer.from_pretrained(tmp_path)
    path.write_bytes(text.replace(b'"vocab": {', b'"vocab": {\n"a": 1,', 1))
    with pytest.raises(ValueError, match=f"^{path}: key 'a' appears more than once"):
        Tokenizer.from_pretrained(path)
    path.write_bytes(b"[1, 2]")
    with pytest.raises(ValueError, match="not a tokenizer.json"):
        Tokenizer.from_pretrained(path)
    path.write_bytes(b"[" * 100_000)
    with pytest.raises(ValueError, match=f"^{path}: JSON nested too deeply"):
        Tokenizer.from_pretrained(path)
    path.write_bytes(text[:20] + b"\xff" + text[20:])
    with pytest.raises(ValueError, match=f"^{path}: not UTF-8 at byte 20"):
        Tokenizer.from_pretrained(path)


def test_a_failed_save_leaves_the_directory_as_it_was(trained, saved, tmp_path):
    for p in saved.iterdir():
        (tmp_path / p.name).write_bytes(p.read_bytes())
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    clash = Tokenizer(trained.vocab, trained.merges, SPECIALS + ["Ġthe"])  # spelled like the token " the"
    with pytest.raises(ValueError, match="same bytes|spelled like"):
        clash.save_pretrained(tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_merges_that_tiktoken_would_make_otherwise_are_refused(tmp_path):
    """abc is listed as a + bc, but tiktoken's BPE on abc joins a and b first (lower rank), so it
    would make abc from ab + c, a token our merges never produce: the ids would differ."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"bc", 258: b"abc"}
    tok = Tokenizer(vocab, [(b"a", b"b"), (b"b", b"c"), (b"a", b"bc")])
    assert tok.encode("abc") == [256, ord("c")]
    with pytest.raises(ValueError, match=r"tiktoken would make b'abc' from \(b'ab', b'c'\), not from our merge"):
        tok.save_tiktoken(tmp_path / "x.tiktoken")
    assert list(tmp_path.iterdir()) == []


def test_files_from_different_saves_are_refused(trained, saved, tmp_path):
    """merges.txt names the sha256 of vocab.json and tokenizer.json saved with it."""
    for p in saved.iterdir():
        (tmp_path / p.name).write_bytes(p.read_bytes())
    other = Tokenizer(trained.vocab, trained.merges, SPECIALS, pattern="cl100k")
    other.save_pretrained(tmp_path / "other")
    (tmp_path / "tokenizer.json").write_bytes((tmp_path / "other" / "tokenizer.json").read_bytes())
    with pytest.raises(ValueError, match=r"merges.txt was written with another tokenizer.json than .*interrupted save"):
        Tokenizer.from_pretrained(tmp_path)
    assert Tokenizer.from_pretrained(tmp_path / "tokenizer.json").pattern == "cl100k"  # the file alone is whole
