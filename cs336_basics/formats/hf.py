"""Hugging Face's `tokenizer.json` for byte-level BPE: writing ours, reading ours and others'.

A `tokenizer.json` is a serialized pipeline: normalizer, pre-tokenizer, model, post-processor,
decoder, plus "added tokens" matched before everything else. We write, and read back, only the
pipelines whose ids we reproduce exactly:

- no normalizer; a `BPE` model over GPT-2's byte-to-unicode spelling of the bytes, without dropout,
  `ignore_merges`, byte fallback, or subword prefix and suffix;
- the pre-tokenizer holds the pattern: `ByteLevel` with its built-in regex is GPT-2's pattern,
  `ByteLevel` without regex is "none", and `Sequence[Split(Regex(R), "Isolated"), ByteLevel without
  regex]` (the layout of recent models) is the regex R, named when it is one of ours;
- `ByteLevel` decoder (or none), `ByteLevel` post-processor (offsets only) or none;
- added tokens are our special tokens, matched as they are (no `lstrip`, `rstrip`, `single_word`).

Anything else (a normalizer, a WordPiece or Unigram model, dropout, `add_prefix_space`, an unknown
pre-tokenizer, a template post-processor that adds tokens...) is refused by name, never approximated.
"""

import json

import regex

from cs336_basics.formats.gpt2 import text_to_token, token_to_text
from cs336_basics.text.patterns import regex_string

_NAMED = ("gpt2", "cl100k", "o200k")

# `tokenizers` runs Split regexes with Oniguruma, which reads `X{n,m}+` as `(?:X{n,m})+`, where the
# `regex` package and tiktoken read a possessive `X{n,m}`: as written, cl100k's `\p{N}{1,3}+` would
# keep "2019" whole instead of cutting "201" "9". So what we write spells it as an atomic group,
# which both engines read alike, and what we read is turned into the `regex` spelling of what
# Oniguruma does. X is one atom: a \p{..} class, an escape, a [...] set or one plain character.
_ATOM = r"(\\[pP]\{[^}]*\}|\\.|\[(?:\\.|[^\]\\])*\]|[^\\()\[\]{}|])"
_BOUNDED_PLUS = regex.compile(_ATOM + r"\{(\d+(?:,\d*)?)\}\+")
_GROUP_BOUNDED_PLUS = regex.compile(r"\)\{\d+(?:,\d*)?\}\+")


def _for_oniguruma(source: str) -> str:
    if _GROUP_BOUNDED_PLUS.search(source):
        raise ValueError(f"pattern {source!r} repeats a group with {{n,m}}+, which Hugging Face's regex engine reads differently")
    return _BOUNDED_PLUS.sub(r"(?>\1{\2})", source)


def _from_oniguruma(source: str, where: str) -> str:
    if _GROUP_BOUNDED_PLUS.search(source):
        raise ValueError(f"{where}: Split regex repeats a group with {{n,m}}+, which we do not reproduce")
    return _BOUNDED_PLUS.sub(r"(?:\1{\2})+", source)


def _pattern_name(onig_source: str, where: str) -> str:
    """Our name for a Split regex when it is one of our named patterns as we write them, else the
    regex in the `regex` package's spelling."""
    for name in _NAMED:
        if onig_source == _for_oniguruma(regex_string(name)):
            return name
    return _from_oniguruma(onig_source, where)


_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def _pre_tokenizer(pattern: str) -> dict:
    if pattern == "gpt2":
        return dict(_BYTE_LEVEL)
    if pattern == "none":
        return {**_BYTE_LEVEL, "use_regex": False}
    return {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": _for_oniguruma(regex_string(pattern))}, "behavior": "Isolated", "invert": False},
            {**_BYTE_LEVEL, "use_regex": False},
        ],
    }


def tokenizer_json(
    vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: list[str], pattern: str
) -> str:
    """The text of a `tokenizer.json` that encodes like `Tokenizer(vocab, merges, special_tokens,
    pattern=pattern)` in Hugging Face `tokenizers` and `transformers`."""
    specials = {token.encode("utf-8"): token for token in special_tokens}
    model_vocab: dict[str, int] = {}
    added = []
    for token_id in sorted(vocab):
        token = vocab[token_id]
        if token in specials:
            added.append(
                {"id": token_id, "content": specials[token], "single_word": False, "lstrip": False,
                 "rstrip": False, "normalized": False, "special": True}
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
        "normalizer": None,
        "pre_tokenizer": _pre_tokenizer(pattern),
        "post_processor": None,
        "decoder": {**_BYTE_LEVEL},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": model_vocab,
            "merges": [[token_to_text(left), token_to_text(right)] for left, right in merges],
        },
    }
    return json.dumps(document, ensure_ascii=False, indent=1) + "\n"


def _describe(component) -> str:
    if isinstance(component, dict):
        return repr(component.get("type", "?"))
    return repr(component)


def _read_pattern(pre: object, source: str) -> str:
    def byte_level(step: dict, *, regex: bool) -> None:
        if step.get("add_prefix_space"):
            raise ValueError(
                f"{source}: pre-tokenizer ByteLevel has add_prefix_space=true, which we do not reproduce "
                "(save with ByteLevel(add_prefix_space=False))"
            )
        if bool(step.get("use_regex", True)) != regex:
            raise ValueError(f"{source}: ByteLevel after Split must have use_regex=false")

    if isinstance(pre, dict) and pre.get("type") == "ByteLevel":
        if pre.get("add_prefix_space"):
            byte_level(pre, regex=True)
        return "gpt2" if pre.get("use_regex", True) else "none"
    if isinstance(pre, dict) and pre.get("type") == "Sequence":
        steps = pre.get("pretokenizers")
        if (
            isinstance(steps, list)
            and len(steps) == 2
            and all(isinstance(step, dict) for step in steps)
            and steps[0].get("type") == "Split"
            and steps[1].get("type") == "ByteLevel"
        ):
            split = steps[0]
            regex_source = split.get("pattern", {}).get("Regex") if isinstance(split.get("pattern"), dict) else None
            if not isinstance(regex_source, str):
                raise ValueError(f"{source}: pre-tokenizer Split must hold a Regex pattern, got {split.get('pattern')!r}")
            if split.get("behavior") != "Isolated" or split.get("invert"):
                raise ValueError(
                    f"{source}: pre-tokenizer Split with behavior {split.get('behavior')!r} and invert "
                    f"{split.get('invert')!r} is not supported (only Isolated, not inverted)"
                )
            byte_level(steps[1], regex=False)
            return _pattern_name(regex_source, source)
        kinds = ", ".join(_describe(step) for step in steps) if isinstance(steps, list) else "?"
        raise ValueError(
            f"{source}: pre-tokenizer Sequence[{kinds}] is not supported "
            "(only ByteLevel, or Split(Regex) then ByteLevel without regex)"
        )
    raise ValueError(
        f"{source}: pre-tokenizer {_describe(pre)} is not supported "
        "(only ByteLevel, or Split(Regex) then ByteLevel without regex)"
    )


def _no_repeated_keys(source: str):
    def hook(pairs: list[tuple[str, object]]) -> dict:
        result = {}
        for key, value in pairs:
            if key in result:
                raise ValueError(f"{source}: key {key!r} appears more than once in one object (duplicate tokens?)")
            result[key] = value
        return result

    return hook


def parse_tokenizer_json(
    data: bytes, *, source: str = "tokenizer.json"
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], list[str], str]:
    """Read a byte-level BPE `tokenizer.json`: `(vocab, merges, special_tokens, pattern)`.

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

    if document.get("normalizer") is not None:
        raise ValueError(f"{source}: normalizer {_describe(document['normalizer'])} is not supported (we apply none)")
    model = document["model"]
    if model.get("type", "BPE") != "BPE":
        raise ValueError(f"{source}: model {model.get('type')!r} is not supported (only byte-level BPE)")
    if model.get("dropout") not in (None, 0, 0.0):
        raise ValueError(f"{source}: BPE dropout {model['dropout']!r} is not supported (it makes encoding random)")
    for option in ("ignore_merges", "byte_fallback"):
        if model.get(option):
            raise ValueError(f"{source}: BPE option {option}=true is not supported")
    for option in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise ValueError(f"{source}: BPE option {option}={model[option]!r} is not supported")
    pattern = _read_pattern(document.get("pre_tokenizer"), source)
    decoder = document.get("decoder")
    if decoder is not None and not (isinstance(decoder, dict) and decoder.get("type") == "ByteLevel"):
        raise ValueError(f"{source}: decoder {_describe(decoder)} is not supported (only ByteLevel)")
    post = document.get("post_processor")
    if post is not None and not (isinstance(post, dict) and post.get("type") == "ByteLevel"):
        raise ValueError(
            f"{source}: post-processor {_describe(post)} is not supported (it may add tokens; only ByteLevel)"
        )

    raw_vocab = model.get("vocab")
    if not isinstance(raw_vocab, dict):
        raise ValueError(f"{source}: model.vocab must be an object mapping token to id")
    added = document.get("added_tokens") or []
    if not isinstance(added, list):
        raise ValueError(f"{source}: added_tokens must be a list")
    # A key that is an added token's text stands for that text (`tokenizers` matches added tokens
    # first, and decodes them as their text), as we write special tokens: not through the byte table.
    added_texts = {entry.get("content") for entry in added if isinstance(entry, dict)}
    vocab: dict[int, bytes] = {}
    ids: dict[bytes, int] = {}
    for key, token_id in raw_vocab.items():
        if type(token_id) is not int or token_id < 0:
            raise ValueError(f"{source}: token {key!r} has id {token_id!r}; ids must be non-negative integers")
        token = key.encode("utf-8") if key in added_texts else text_to_token(key)
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

    special_tokens: list[str] = []
    # `tokenizers` does not take an added token's id from the file: it gives the token the id of
    # its spelling in model.vocab, or else the next id after model.vocab and the added tokens before
    # it. A file whose ids differ from those is refused, so that ours are always `tokenizers`' ids.
    model_size = len(raw_vocab)
    added_ids: list[int] = []
    for entry in added:
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str) or type(entry.get("id")) is not int:
            raise ValueError(f"{source}: added token {entry!r} needs a string content and an integer id")
        content, token_id = entry["content"], entry["id"]
        if not content:
            raise ValueError(f"{source}: added token with id {token_id} is the empty string")
        for option in ("single_word", "lstrip", "rstrip"):
            if entry.get(option):
                raise ValueError(f"{source}: added token {content!r} has {option}=true, which is not supported")
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

    raw_merges = model.get("merges")
    if not isinstance(raw_merges, list):
        raise ValueError(f"{source}: model.merges must be a list")
    merges: list[tuple[bytes, bytes]] = []
    for number, merge in enumerate(raw_merges, start=1):
        if isinstance(merge, str):
            merge = merge.split(" ")
        if not (isinstance(merge, list) and len(merge) == 2 and all(isinstance(part, str) and part for part in merge)):
            raise ValueError(f"{source}: merge {number} must be two tokens, got {merge!r}")
        pair = tuple(text_to_token(part) for part in merge)
        if None in pair or not all(part in ids for part in pair):
            raise ValueError(f"{source}: merge {number} names {merge!r}, which is not in the vocabulary")
        if pair[0] + pair[1] not in ids:
            raise ValueError(f"{source}: merge {number} makes {merge[0] + merge[1]!r}, which is not in the vocabulary")
        merges.append(pair)
    return vocab, merges, special_tokens, pattern
