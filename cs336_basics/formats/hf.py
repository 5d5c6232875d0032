r"""Hugging Face's `tokenizer.json` for byte-level BPE: writing ours, reading ours and open models'.

A `tokenizer.json` is a serialized pipeline: normalizer, pre-tokenizer, model, post-processor,
decoder, plus "added tokens" matched before everything else. We read, and write back, the pipelines
whose ids we reproduce exactly (`tokenizers`' `encode(text, add_special_tokens=False).ids`; tests
check them against it, on DeepSeek's file and on layouts built with `tokenizers`):

- normalizer: none, or NFC, NFKC, NFD, NFKD and `Sequence`s of them (an empty one is none), done
  with Python's `unicodedata` (text holding one of the characters its tables normalize otherwise
  than `tokenizers` is refused, see `pipelines.NORMALIZED_OTHERWISE`);
- pre-tokenizer: `ByteLevel` (its `use_regex`, true when missing, is GPT-2's regex), or a `Sequence`
  of any number of `Split` steps (a `Regex` or a `String`; Isolated, MergedWithPrevious,
  MergedWithNext or Contiguous; inverted or not) and `Digits` steps (read as a Split on \p{N})
  ending with `ByteLevel`. GPT-2's layout, and one
  Isolated Split of one of our named patterns then ByteLevel without regex, read as the named
  pattern; anything else as a pipeline (see `text/pipelines.py`), the regexes read the way
  Oniguruma runs them, and refused where it reads them otherwise than the `regex` package (`^`,
  `$`, `\w`, `\h`...: see `pipelines.engine_difference`) — except one lone Isolated Split (and
  nothing else needing a pipeline), which reads as the custom regex it is, with the `regex`
  package's meaning, as we write one: the same pre-tokens wherever it matches every character, and
  a refusal where it does not (Hugging Face keeps such text as pieces);
- model: `BPE` over GPT-2's byte-to-unicode spelling of the bytes, without dropout, byte fallback,
  or subword prefix and suffix; `ignore_merges` (a pre-token in the vocabulary is taken whole) too,
  except with a normalizer;
- added tokens, special or not, normalized or not (those not normalized are matched on the raw text
  first, the others on the normalized text between them), at the ids `tokenizers` gives them;
- post-processor: `ByteLevel` (offsets only), `TemplateProcessing` (its single-sequence template,
  honoured by `Tokenizer.encode(text, add_special_tokens=True)`), or a `Sequence` of these;
- decoder: `ByteLevel`, a `Sequence` of it, or none.

Anything else is refused by name, naming the file and the part, never approximated: other
normalizers (Lowercase, Replace, Prepend, Strip...), `Split` with Removed (it drops text), a
pre-tokenizer without `ByteLevel` at its end (the model would see characters, not bytes), other
pre-tokenizers, `add_prefix_space`, added tokens with `lstrip`, `rstrip` or `single_word`, other
models, dropout, other post-processors and decoders, and `ignore_merges` with a normalizer.
"""

import json
import unicodedata

import regex

from cs336_basics.formats.definition import DEFAULT_FLAGS, TokenizerDefinition, checked_added_tokens
from cs336_basics.formats.gpt2 import text_to_token, token_to_text
from cs336_basics.text import pipelines
from cs336_basics.text.patterns import SUPERBPE_SPLIT, regex_string
from cs336_basics.text.pipelines import for_oniguruma

_NAMED = ("gpt2", "cl100k", "o200k", "superbpe", "superbpe-v1")


def _pattern_name(onig_source: str) -> str | None:
    """Our name for a Split regex when it is one of our named patterns as we write them, or
    SuperBPE's own Split (as its authors' tokenizer.json files have it), else None."""
    if onig_source == SUPERBPE_SPLIT:  # Isolated, its pieces are the "superbpe" pattern's
        return "superbpe"
    for name in _NAMED:
        if onig_source == for_oniguruma(regex_string(name)):
            return name
    return None


_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def _pre_tokenizer(pattern: str) -> dict:
    if pipelines.is_pipeline(pattern):
        pipeline = pipelines.get(pattern)
        spec = json.loads(pattern[len(pipelines.PREFIX):])
        byte_level = {**_BYTE_LEVEL, "use_regex": spec["steps"][-1]["byte_level"]}
        splits = [
            {"type": "Split", "pattern": {"String" if step.literal else "Regex": step.source},
             "behavior": step.behavior, "invert": step.invert}
            for step in pipeline.steps[: len(spec["steps"]) - 1]
        ]
        return {"type": "Sequence", "pretokenizers": [*splits, byte_level]} if splits else byte_level
    if pattern == "gpt2":
        return dict(_BYTE_LEVEL)
    if pattern == "none":
        return {**_BYTE_LEVEL, "use_regex": False}
    return {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": for_oniguruma(regex_string(pattern))}, "behavior": "Isolated", "invert": False},
            {**_BYTE_LEVEL, "use_regex": False},
        ],
    }


def _normalizer(pipeline: "pipelines.Pipeline | None") -> "dict | None":
    if pipeline is None or not pipeline.normalizers:
        return None
    return {"type": "Sequence", "normalizers": [{"type": form} for form in pipeline.normalizers]}


def tokenizer_json(
    vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: list[str], pattern: str, *,
    added_tokens: "dict[str, tuple[bool, bool]] | None" = None, post_processor: "dict | None" = None,
) -> str:
    """The text of a `tokenizer.json` that encodes like `Tokenizer(vocab, merges, special_tokens,
    pattern=pattern, added_tokens=added_tokens, post_processor=post_processor)` in Hugging Face
    `tokenizers` and `transformers` (see `definition.TokenizerDefinition` for the last two)."""
    pipeline = pipelines.get(pattern) if pipelines.is_pipeline(pattern) else None
    flags = added_tokens or {}
    specials = {token.encode("utf-8"): token for token in special_tokens}
    model_vocab: dict[str, int] = {}
    added = []
    for token_id in sorted(vocab):
        token = vocab[token_id]
        if token in specials:
            content = specials[token]
            special, normalized = flags.get(content, DEFAULT_FLAGS)
            added.append(
                {"id": token_id, "content": content, "single_word": False, "lstrip": False,
                 "rstrip": False, "normalized": normalized, "special": special}
            )
        # Special tokens are in the model's vocabulary too, as their own text: `tokenizers` gives an
        # added token missing from it the next free id, whatever id the file says.
        key = specials.get(token) or token_to_text(token)
        if key in model_vocab:
            raise ValueError(
                f"special token {key!r} is spelled like the token with id {model_vocab[key]} in tokenizer.json; "
                "rename the special token"
            )
        model_vocab[key] = token_id
    # In the order given, which a reader takes as theirs (the first joins documents): their ids come
    # from model.vocab, so the order changes none.
    added.sort(key=lambda entry: special_tokens.index(entry["content"]))
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": _normalizer(pipeline),
        "pre_tokenizer": _pre_tokenizer(pattern),
        "post_processor": post_processor,
        "decoder": {**_BYTE_LEVEL},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": bool(pipeline and pipeline.ignore_merges),
            "vocab": model_vocab,
            "merges": [[token_to_text(left), token_to_text(right)] for left, right in merges],
        },
    }
    return json.dumps(document, ensure_ascii=False, indent=1) + "\n"


def _describe(component) -> str:
    if isinstance(component, dict):
        return repr(component.get("type", "?"))
    return repr(component)


_SUPPORTED_PRE = "ByteLevel, or a Sequence of Split and Digits steps then ByteLevel"


def _read_steps(pre: object, source: str) -> list[dict]:
    """The pre-tokenizer as pipeline steps (see `pipelines`): Split steps, then {"byte_level": use_regex}."""
    if isinstance(pre, dict) and pre.get("type") == "Sequence":
        steps = pre.get("pretokenizers")
        if not isinstance(steps, list) or not steps:
            raise ValueError(f"{source}: pre-tokenizer Sequence must hold a list of steps ({_SUPPORTED_PRE})")
    else:
        steps = [pre]
    result = []
    for n, step in enumerate(steps):
        kind = step.get("type") if isinstance(step, dict) else None
        last = n == len(steps) - 1
        if kind == "ByteLevel" and last:
            if step.get("add_prefix_space"):
                raise ValueError(
                    f"{source}: pre-tokenizer ByteLevel has add_prefix_space=true, which we do not reproduce "
                    "(save with ByteLevel(add_prefix_space=False))"
                )
            use_regex = step.get("use_regex", True)  # `tokenizers` reads a missing use_regex as true
            if type(use_regex) is not bool:
                raise ValueError(f"{source}: pre-tokenizer ByteLevel use_regex must be true or false, got {use_regex!r}")
            result.append({"byte_level": use_regex})
        elif kind == "Split":
            pattern, behavior, invert = step.get("pattern"), step.get("behavior"), step.get("invert", False)
            if behavior == "Removed":
                raise ValueError(
                    f"{source}: pre-tokenizer Split with behavior 'Removed' drops text, which byte-level BPE "
                    "cannot give back; not supported"
                )
            if behavior not in pipelines.BEHAVIORS or type(invert) is not bool:
                raise ValueError(
                    f"{source}: pre-tokenizer Split with behavior {behavior!r} and invert {invert!r} is not supported "
                    f"(behaviors {', '.join(pipelines.BEHAVIORS)}; invert true or false)"
                )
            if isinstance(pattern, dict) and pattern.keys() == {"Regex"} and isinstance(pattern["Regex"], str):
                entry = {"regex": pattern["Regex"]}
                pipelines.from_oniguruma(pattern["Regex"], source)
            elif isinstance(pattern, dict) and pattern.keys() == {"String"} and isinstance(pattern["String"], str):
                entry = {"string": pattern["String"]}
            else:
                raise ValueError(f"{source}: pre-tokenizer Split must hold a Regex or a String pattern, got {pattern!r}")
            result.append({**entry, "behavior": behavior, "invert": invert})
        elif kind == "Digits":
            # Hugging Face cuts at each numeric character (Rust's `is_numeric`: \p{N}), each alone
            # (individual_digits) or runs of them together: a Split on \p{N}, Isolated or Contiguous.
            individual = step.get("individual_digits", False)
            if type(individual) is not bool:
                raise ValueError(f"{source}: pre-tokenizer Digits individual_digits must be true or false")
            result.append({"regex": r"\p{N}", "behavior": "Isolated" if individual else "Contiguous", "invert": False})
        elif kind == "ByteLevel":
            raise ValueError(f"{source}: pre-tokenizer ByteLevel must be the last step ({_SUPPORTED_PRE})")
        else:
            raise ValueError(f"{source}: pre-tokenizer {_describe(step)} is not supported ({_SUPPORTED_PRE})")
    if "byte_level" not in result[-1]:
        raise ValueError(
            f"{source}: pre-tokenizer has no ByteLevel step at its end, so the model would see characters, "
            f"not bytes (unknown ones dropped); not supported ({_SUPPORTED_PRE})"
        )
    return result


def _read_normalizers(normalizer: object, source: str) -> list[str]:
    if normalizer is None:
        return []
    kind = normalizer.get("type") if isinstance(normalizer, dict) else None
    if kind == "Sequence" and isinstance(normalizer.get("normalizers"), list):
        forms = []
        for inner in normalizer["normalizers"]:
            forms += _read_normalizers(inner, source)
        return forms
    if kind in pipelines.NORMALIZERS:
        return [kind]
    raise ValueError(
        f"{source}: normalizer {_describe(normalizer)} is not supported "
        f"(only {', '.join(pipelines.NORMALIZERS)} and Sequences of them, done with Python's unicodedata)"
    )


def _read_post_processor(post: object, source: str) -> "dict | None":
    """The post-processor to keep (None when it adds nothing); ValueError for one we cannot reproduce."""
    if post is None:
        return None
    kind = post.get("type") if isinstance(post, dict) else None
    if kind == "ByteLevel":
        return None  # offsets only
    if kind == "Sequence" and isinstance(post.get("processors"), list):
        kept = [p for p in (_read_post_processor(inner, source) for inner in post["processors"]) if p is not None]
        if len(kept) > 1:
            raise ValueError(f"{source}: post-processor Sequence holds more than one TemplateProcessing; not supported")
        return kept[0] if kept else None
    if kind == "TemplateProcessing":
        template_ids(post, source)
        return post
    raise ValueError(
        f"{source}: post-processor {_describe(post)} is not supported (only ByteLevel, TemplateProcessing "
        "and Sequences of them)"
    )


def template_ids(post: "dict | None", source: str = "post-processor") -> tuple[list[int], list[int]]:
    """The ids a TemplateProcessing's single-sequence template puts before and after the text
    (none for no post-processor)."""
    if post is None:
        return [], []
    single, specials = post.get("single"), post.get("special_tokens")
    if not isinstance(single, list) or not isinstance(specials, dict):
        raise ValueError(f"{source}: post-processor TemplateProcessing needs a single template and special_tokens")
    before: list[int] = []
    after: list[int] = []
    seen_sequence = False
    for item in single:
        if isinstance(item, dict) and item.keys() == {"Sequence"} and item["Sequence"].get("id") == "A" and not seen_sequence:
            seen_sequence = True
        elif isinstance(item, dict) and item.keys() == {"SpecialToken"}:
            name = item["SpecialToken"].get("id")
            ids = specials.get(name, {}).get("ids") if isinstance(specials.get(name), dict) else None
            if not isinstance(ids, list) or not all(type(i) is int and i >= 0 for i in ids):
                raise ValueError(f"{source}: post-processor template token {name!r} has no list of ids in special_tokens")
            (after if seen_sequence else before).extend(ids)
        else:
            raise ValueError(f"{source}: post-processor single template item {item!r} is not supported (only $A once and special tokens)")
    if not seen_sequence:
        raise ValueError(f"{source}: post-processor single template has no $A")
    return before, after


def _read_decoder(decoder: object, source: str) -> None:
    kind = decoder.get("type") if isinstance(decoder, dict) else None
    if decoder is None or kind == "ByteLevel":
        return
    if kind == "Sequence" and isinstance(decoder.get("decoders"), list):
        for inner in decoder["decoders"]:
            _read_decoder(inner, source)
        return
    raise ValueError(f"{source}: decoder {_describe(decoder)} is not supported (only ByteLevel, or a Sequence of it)")


def _pattern_of(steps: list[dict], normalizers: list[str], ignore_merges: bool,
                added: dict[str, tuple[bool, bool]], post: "dict | None", source: str) -> str:
    """Our pattern for the pipeline: a named pattern where it is one exactly, else a pipeline spec
    (also when the file has added-token flags or a post-processor, which only a tokenizer under a
    pipeline honours, although the spec does not hold them)."""
    plain = not normalizers and not ignore_merges and post is None and all(f == DEFAULT_FLAGS for f in added.values())
    if plain and len(steps) == 1:
        return "gpt2" if steps[0]["byte_level"] else "none"
    if plain and len(steps) == 2 and steps[1] == {"byte_level": False}:
        step = steps[0]
        if "regex" in step and step["behavior"] == "Isolated" and not step["invert"]:
            name = _pattern_name(step["regex"])
            if name is not None:
                return name
            # One regex alone is a custom pattern, as we write one, so a tokenizer saved with it comes
            # back with it: the same pre-tokens wherever the regex matches every character, and a
            # refusal naming the offset where it does not (Hugging Face keeps such text as pieces).
            # A regex Oniguruma reads otherwise (`pipelines.engine_difference`) has the `regex`
            # package's meaning here, which docs/pretrained.md says may differ.
            return pipelines.from_oniguruma(step["regex"], source)
    try:
        return pipelines.make_spec(normalizers, steps, ignore_merges=ignore_merges)
    except ValueError as e:
        raise ValueError(f"{source}: pre-tokenizer: {e}") from None


def _no_repeated_keys(source: str):
    def hook(pairs: list[tuple[str, object]]) -> dict:
        result = {}
        for key, value in pairs:
            if key in result:
                raise ValueError(f"{source}: key {key!r} appears more than once in one object (duplicate tokens?)")
            result[key] = value
        return result

    return hook


def parse_tokenizer_json(data: bytes, *, source: str = "tokenizer.json") -> TokenizerDefinition:
    """Read a byte-level BPE `tokenizer.json`: the `TokenizerDefinition` (vocab, merges, special
    tokens, pattern, added-token flags and post-processor) it holds.

    Raises ValueError naming `source` and the part that is malformed or that we cannot reproduce.
    """
    try:
        document = json.loads(data.decode("utf-8-sig"), object_pairs_hook=_no_repeated_keys(source))
    except UnicodeDecodeError as e:
        raise ValueError(f"{source}: not UTF-8 at byte {e.start}") from None
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{source}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg} (a truncated file?)"
        ) from None
    except RecursionError:
        raise ValueError(f"{source}: JSON nested too deeply to read (not a tokenizer.json)") from None
    if not isinstance(document, dict) or not isinstance(document.get("model"), dict):
        raise ValueError(f"{source}: not a tokenizer.json (no \"model\" object)")

    normalizers = _read_normalizers(document.get("normalizer"), source)
    model = document["model"]
    if model.get("type", "BPE") != "BPE":
        raise ValueError(f"{source}: model {model.get('type')!r} is not supported (only byte-level BPE)")
    if model.get("dropout") not in (None, 0, 0.0):
        raise ValueError(f"{source}: BPE dropout {model['dropout']!r} is not supported (it makes encoding random)")
    if model.get("byte_fallback"):
        raise ValueError(f"{source}: BPE option byte_fallback=true is not supported")
    ignore_merges = model.get("ignore_merges", False)
    if type(ignore_merges) is not bool:
        raise ValueError(f"{source}: BPE option ignore_merges must be true or false, got {ignore_merges!r}")
    if ignore_merges and normalizers:
        raise ValueError(
            f"{source}: BPE option ignore_merges=true with a normalizer is not supported (a normalized pre-token "
            "could spell an added token, which Hugging Face looks up in a vocabulary we do not keep apart)"
        )
    for option in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise ValueError(f"{source}: BPE option {option}={model[option]!r} is not supported")
    steps = _read_steps(document.get("pre_tokenizer"), source)
    _read_decoder(document.get("decoder"), source)
    post = _read_post_processor(document.get("post_processor"), source)

    raw_vocab = model.get("vocab")
    if not isinstance(raw_vocab, dict):
        raise ValueError(f"{source}: model.vocab must be an object mapping token to id")
    added = document.get("added_tokens") or []
    if not isinstance(added, list):
        raise ValueError(f"{source}: added_tokens must be a list")
    vocab, ids, spelled = _read_model_vocab(raw_vocab, added, source)
    special_tokens, flags = _read_added_tokens(added, raw_vocab, vocab, ids, source)
    merges = _read_merges(model.get("merges"), spelled, ids, source)
    if normalizers:
        _check_normalized_tokens(flags, normalizers, source)
    if post is not None:
        for token_id in [*template_ids(post, source)[0], *template_ids(post, source)[1]]:
            if token_id not in vocab:
                raise ValueError(f"{source}: post-processor template adds id {token_id}, which is not in the vocabulary")
    pattern = _pattern_of(steps, normalizers, ignore_merges, flags, post, source)
    if not pipelines.is_pipeline(pattern):
        return TokenizerDefinition(vocab, merges, special_tokens, pattern)
    flags, post = checked_added_tokens(flags, post, pattern)
    return TokenizerDefinition(vocab, merges, special_tokens, pattern, flags, post)


def _read_model_vocab(
    raw_vocab: dict, added: list, source: str
) -> tuple[dict[int, bytes], dict[bytes, int], dict[str, "bytes | None"]]:
    """model.vocab read: id -> token, token -> id, and each key read through the byte table (for
    the merges)."""
    # A key that is an added token's text stands for that text (`tokenizers` matches added tokens
    # first, and decodes them as their text), as we write special tokens: not through the byte table.
    added_texts = {entry.get("content") for entry in added if isinstance(entry, dict)}
    vocab: dict[int, bytes] = {}
    ids: dict[bytes, int] = {}
    spelled: dict[str, bytes | None] = {}  # each key read through the byte table, for the merges
    for key, token_id in raw_vocab.items():
        if type(token_id) is not int or token_id < 0:
            raise ValueError(f"{source}: token {key!r} has id {token_id!r}; ids must be non-negative integers")
        spelled[key] = token = text_to_token(key)
        if key in added_texts:
            token = key.encode("utf-8")
        if token == b"":
            raise ValueError(f"{source}: model.vocab holds an empty token (id {token_id}); every token needs a byte")
        if token is None:
            raise ValueError(
                f"{source}: token {key!r} is not written in the byte-level alphabet (not a byte-level BPE model)"
            )
        if token_id in vocab:
            raise ValueError(f"{source}: tokens {token_to_text(vocab[token_id])!r} and {key!r} both have id {token_id}")
        vocab[token_id] = token
        ids[token] = token_id
    return vocab, ids, spelled


def _read_added_tokens(
    added: list, raw_vocab: dict, vocab: dict[int, bytes], ids: dict[bytes, int], source: str
) -> tuple[list[str], dict[str, tuple[bool, bool]]]:
    """The added tokens, in the file's order, and their flags `(special, normalized)`; each is put
    into `vocab` and `ids` at its id."""
    special_tokens: list[str] = []
    # `tokenizers` does not take an added token's id from the file: it gives the token the id of
    # its spelling in model.vocab, or else the next id after model.vocab and the added tokens before
    # it. A file whose ids differ from those is refused, so that ours are always `tokenizers`' ids.
    model_size = len(raw_vocab)
    added_ids: list[int] = []
    flags: dict[str, tuple[bool, bool]] = {}
    for entry in added:
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str) or type(entry.get("id")) is not int:
            raise ValueError(f"{source}: added token {entry!r} needs a string content and an integer id")
        content, token_id = entry["content"], entry["id"]
        if not content:
            raise ValueError(f"{source}: added token with id {token_id} is the empty string")
        for option in ("single_word", "lstrip", "rstrip"):
            if entry.get(option):
                raise ValueError(f"{source}: added token {content!r} has {option}=true, which is not supported")
        special, normalized = entry.get("special", False), entry.get("normalized", not entry.get("special", False))
        if type(special) is not bool or type(normalized) is not bool:
            raise ValueError(f"{source}: added token {content!r} needs special and normalized true or false")
        flags[content] = (special, normalized)
        token = content.encode("utf-8")
        hf_id = raw_vocab.get(content)
        if hf_id is not None and hf_id != token_id:
            raise ValueError(f"{source}: added token {content!r} has id {token_id} but the model gives it id {hf_id}")
        if hf_id is None:
            top = max(added_ids, default=-1)
            hf_id = top + 1 if top >= model_size else model_size
            if hf_id != token_id:
                raise ValueError(
                    f"{source}: added token {content!r} is not in model.vocab and has id {token_id}, but Hugging "
                    f"Face tokenizers gives it id {hf_id} (the next id after model.vocab and the added tokens "
                    "before it); correct the id in the file"
                )
        added_ids.append(hf_id)
        if ids.get(token, token_id) != token_id:
            raise ValueError(f"{source}: added token {content!r} has id {token_id} but the model gives it id {ids[token]}")
        if token_id in vocab and vocab[token_id] != token:
            raise ValueError(
                f"{source}: added token {content!r} has id {token_id}, which the model gives to "
                f"{token_to_text(vocab[token_id])!r}"
            )
        if content in special_tokens:
            raise ValueError(f"{source}: added token {content!r} is listed twice")
        vocab[token_id] = token
        ids[token] = token_id
        special_tokens.append(content)
    return special_tokens, flags


def _read_merges(raw_merges: object, spelled: dict[str, "bytes | None"], ids: dict[bytes, int], source: str
                 ) -> list[tuple[bytes, bytes]]:
    """model.merges read, each checked against the vocabulary."""
    if not isinstance(raw_merges, list):
        raise ValueError(f"{source}: model.merges must be a list")
    merges: list[tuple[bytes, bytes]] = []
    for number, merge in enumerate(raw_merges, start=1):
        if type(merge) is str:
            merge = merge.split(" ")
        if type(merge) is not list or len(merge) != 2:
            raise ValueError(f"{source}: merge {number} must be two tokens, got {merge!r}")
        a, b = merge
        if type(a) is not str or type(b) is not str or not a or not b:
            raise ValueError(f"{source}: merge {number} must be two tokens, got {merge!r}")
        left = spelled[a] if a in spelled else text_to_token(a)
        right = spelled[b] if b in spelled else text_to_token(b)
        if left not in ids or right not in ids:  # None is never in ids
            raise ValueError(f"{source}: merge {number} names {merge!r}, which is not in the vocabulary")
        if left + right not in ids:
            raise ValueError(f"{source}: merge {number} makes {a + b!r}, which is not in the vocabulary")
        merges.append((left, right))
    return merges


def _check_normalized_tokens(flags: dict[str, tuple[bool, bool]], normalizers: list[str], source: str) -> None:
    """Refuse normalized added tokens that normalize to the same text (which one `tokenizers` picks is its own)."""
    seen: dict[str, str] = {}
    for content, (_, normalized) in flags.items():
        if normalized:
            text = content
            for form in normalizers:
                text = unicodedata.normalize(form, text)
            if text in seen:
                raise ValueError(
                    f"{source}: normalized added tokens {seen[text]!r} and {content!r} are the same text after the "
                    "normalizer; not supported"
                )
            seen[text] = content
