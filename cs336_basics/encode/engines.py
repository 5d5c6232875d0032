"""Encoding engines for corpora: our Python BPE (`encoder`), or tiktoken's Rust BPE over our vocabulary.

Why tiktoken gives our ids: tiktoken merges, inside each pre-token, the adjacent pair whose
concatenation has the lowest rank. When our ids follow the merge order (as `train_bpe` gives them)
and each merge is the one tiktoken's BPE recovers from the ranks, the ids are ranks and its merges
are ours, in the same order (the proof is in `formats/tiktoken.py`; `ranks_from_vocab` checks the
conditions and says which one fails). What remains is to cut the text the same way:

- special tokens: tiktoken's `encode` cuts a text at them in Rust and runs its pattern on each
  document between them separately, as ours does; it is handed a whole text at a time. It tries
  them in an order of its own where ours tries the longest first, which differ only when one
  special token begins another: for such tokenizers we cut each text at them ourselves, put in
  their ids, and hand tiktoken the documents between them (`encode_ordinary`);
- surrogates: fixed first, by the same `fix_surrogates` the Python engine uses;
- the pattern: the named patterns are tiktoken's own regexes, and with "none" both engines take a
  document as one piece (tiktoken with `[\\s\\S]+`). A custom regex is refused: it runs in another
  regex engine whose meaning may differ from the `regex` package's (`$` before a final newline,
  Unicode tables), and text it leaves unmatched is dropped silently by tiktoken where we refuse it.
  So is a Hugging Face pipeline (see `text/pipelines.py`): several regexes one after the other, and
  normalizers, which no single tiktoken regex runs.
- Unicode tables: the `regex` package knows a newer Unicode than tiktoken's engine, so a few
  characters (letters new in recent Unicode versions, U+0295 for `o200k`) belong to different
  classes in the two. They are found once per process by running each class the pattern uses
  through tiktoken itself (`differing_characters`); a document holding one is encoded by the
  Python engine under "auto", and refused under "tiktoken". Texts are searched for them by a
  tiktoken `Encoding` whose pattern is their class (Rust's regex engine: some 13 times faster
  than `re` on text that is not ASCII).

`choose` decides, with the reason, once per call in the process that plans the work; workers get
the `Choice` and encode with `encode_text`. `Tokenizer.encode` and `encode_iterable` always use the
Python engine. So does BPE-dropout (see `dropout`): tiktoken has none, so `choose` refuses
"tiktoken" with dropout and "auto" picks ours.
"""

import dataclasses
import uuid
from array import array
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from cs336_basics.encode.protocol import TokenizerLike
from cs336_basics.errors import missing_extra
from cs336_basics.formats.tiktoken import ranks_from_vocab
from cs336_basics.text import patterns
from cs336_basics.text.pretokenize import special_token_regex
from cs336_basics.text.surrogates import fix_surrogates

if TYPE_CHECKING:
    import numpy as np

ENGINES = ("python", "tiktoken", "auto")

# The Unicode classes each named pattern uses (`\s` included); see `differing_characters`.
_CLASSES = {
    "gpt2": (r"\p{L}", r"\p{N}", r"\s"),
    "cl100k": (r"\p{L}", r"\p{N}", r"\s"),
    "o200k": (r"\p{L}", r"\p{N}", r"\s", r"\p{M}", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}"),
    "none": (),
    "superbpe": (r"\p{N}", r"\p{L}", r"\s"),
    "superbpe-v1": (r"\p{N}", r"\d"),
}


@dataclass(frozen=True)
class Choice:
    """The engine that runs ("python" or "tiktoken"), why, and what a worker needs to run it: plain
    data that pickles, from which each process builds the `tiktoken.Encoding` once (see `warm_up`).

    For tiktoken: `key` names the encoding, `pat_str`, `ranks` and `special_ids` (the special
    tokens' ids) build it, `differing` is the regex class of the characters whose class differs
    between the engines, `whole` says that tiktoken may cut texts at the special tokens itself (no
    special token begins another), and `strict` is true when the user asked for tiktoken, so a
    differing character is an error, not a fallback. `threads` is how many threads each worker
    gives tiktoken.
    """

    engine: str
    reason: str
    key: str = ""
    pat_str: str = ""
    ranks: "dict[bytes, int] | None" = field(default=None, repr=False)
    special_ids: "dict[str, int] | None" = None
    differing: "str | None" = field(default=None, repr=False)
    whole: bool = True
    strict: bool = False
    threads: int = 1
    # BPE-dropout (the Python engine only): the probability, the seed, and the number of the work
    # unit being encoded, from which the unit's random stream is derived (see `dropout`).
    dropout: float = 0.0
    seed: tuple[int, ...] = ()
    unit: int = 0


def _tiktoken():
    try:
        import tiktoken
    except ImportError:
        return None
    return tiktoken


# In each process: (tiktoken Encoding, finder of differing characters) by the choice's key, one at a
# time (a long-lived worker must not collect them).
_encodings: dict[str, tuple] = {}

_BYTES = {bytes([i]): i for i in range(256)}


def warm_up(choice: Choice) -> tuple:
    """(the `tiktoken.Encoding`, the `tiktoken.Encoding` that finds differing characters, or None)
    of a tiktoken choice, built once per process; afterwards a copy of the choice without `ranks`
    and `differing` will do."""
    built = _encodings.get(choice.key)
    if built is None:
        if choice.ranks is None:
            raise RuntimeError("a tiktoken choice without its ranks reached a process that never saw them")
        import tiktoken

        encoding = tiktoken.Encoding(name="cs336-engine", pat_str=choice.pat_str, mergeable_ranks=choice.ranks,
                                     special_tokens=choice.special_ids)
        # Its pieces are the differing characters of a text, each as its UTF-8 bytes (one id a byte).
        finder = choice.differing and tiktoken.Encoding(name="cs336-differing", pat_str=choice.differing,
                                                        mergeable_ranks=_BYTES, special_tokens={})
        _encodings.clear()
        _encodings[choice.key] = built = (encoding, finder or None)
    return built


# Per tokenizer: (key, regex source, ranks, None) or (None, None, None, why tiktoken cannot give its
# ids). Checking that the ids are ranks takes about a second for GPT-2's vocabulary: done once.
_checked: "weakref.WeakKeyDictionary[object, tuple]" = weakref.WeakKeyDictionary()


def _check(tokenizer: TokenizerLike) -> tuple:
    if tokenizer in _checked:
        return _checked[tokenizer]
    if patterns.get(tokenizer.pattern).pipeline is not None:
        result = (None, None, None, "its pre-tokenizer is a Hugging Face pipeline (Split steps, which keep the text "
                  "their regex does not match, maybe several, maybe normalizers), which tiktoken's one regex cannot run")
    elif patterns.canonical(tokenizer.pattern) not in _CLASSES:
        result = (None, None, None, "a custom regex may mean something else in tiktoken's regex engine "
                  "(anchors, Unicode tables), and tiktoken drops text the regex leaves unmatched where we refuse it")
    else:
        try:
            ranks = ranks_from_vocab(tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens)
        except ValueError as e:
            result = (None, None, None, str(e))
        else:
            # The regex `Tokenizer.to_tiktoken` gives tiktoken; "none" is one piece per document.
            result = (uuid.uuid4().hex, patterns.regex_string(tokenizer.pattern) or r"[\s\S]+", ranks, None)
    _checked[tokenizer] = result
    return result


# Under "auto", inputs smaller than this are encoded by ours: checking that tiktoken gives our ids
# costs about a second for a vocabulary of 50 000 (0.2 s for 10 000), what ours takes on some 4 MB.
AUTO_MIN_BYTES = 4 << 20


def choose(tokenizer: TokenizerLike, engine: str = "auto", *, threads: int = 1, input_bytes: int | None = None,
           dropout: float = 0.0, seed: "int | tuple[int, ...] | None" = None) -> Choice:
    """The engine to encode corpora with, and why (see the module docstring).

    "python" always runs ours. "tiktoken" runs tiktoken, or raises ValueError (ImportError when it
    is not installed) saying why it cannot give our ids. "auto" runs tiktoken where it is installed
    and gives our ids, else ours; and ours for an input of fewer than `AUTO_MIN_BYTES`, when
    `input_bytes` says so. With `dropout` above 0 (BPE-dropout, drawing from `seed`, a random
    one when None) ours runs, and "tiktoken" is refused.
    """
    if isinstance(engine, Choice):
        return engine
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; the engines are {', '.join(ENGINES)}")
    if type(threads) is not int or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    if dropout:
        from cs336_basics.encode.dropout import checked_dropout, stream_key  # NumPy: not for training

        dropout, seed = checked_dropout(dropout), stream_key(seed)
        if engine == "tiktoken":
            raise ValueError("engine 'tiktoken' has no BPE-dropout; use engine 'python' or 'auto' (which picks ours)")
        return Choice("python", f"BPE-dropout {dropout:g} with seed {','.join(map(str, seed))} runs in ours only",
                      dropout=dropout, seed=seed)
    if engine == "python":
        return Choice("python", "asked for")
    if engine == "auto" and input_bytes is not None and input_bytes < AUTO_MIN_BYTES:
        return Choice("python", f"the input is under {AUTO_MIN_BYTES >> 20} MB, where checking that tiktoken "
                                "gives our ids would cost more than it saves")
    if _tiktoken() is None:
        if engine == "tiktoken":
            raise missing_extra("tiktoken", "engine 'tiktoken'", instead="or use engine 'python'")
        return Choice("python", "tiktoken is not installed")
    key, pat_str, ranks, why_not = _check(tokenizer)
    if why_not is not None:
        if engine == "tiktoken":
            raise ValueError(f"engine 'tiktoken' cannot give this tokenizer's ids: {why_not}; use engine 'python'")
        return Choice("python", f"tiktoken cannot give these ids: {why_not}")
    differing = differing_characters(patterns.canonical(tokenizer.pattern))
    ids = {token: token_id for token_id, token in tokenizer.vocab.items()}
    return Choice(
        "tiktoken",
        "asked for" if engine == "tiktoken" else "tiktoken is installed and gives our ids",
        key,
        pat_str,
        ranks,
        {token: ids[token.encode("utf-8")] for token in tokenizer.special_tokens},
        _character_class(differing),
        whole=not any(a != b and b.startswith(a) for a in tokenizer.special_tokens for b in tokenizer.special_tokens),
        strict=engine == "tiktoken",
        threads=threads,
    )


@lru_cache(maxsize=8)
def differing_characters(pattern: str) -> frozenset[str]:
    """The characters that some Unicode class used by the named `pattern` holds in the `regex`
    package and not in tiktoken's engine, or the other way round (about 0.2 s; kept per process)."""
    import regex
    import tiktoken

    classes = _CLASSES[pattern]
    if not classes:
        return frozenset()
    ranks = {bytes([i]): i for i in range(256)}
    everything = "".join(map(chr, [*range(0xD800), *range(0xE000, 0x110000)]))
    differ: set[str] = set()
    for cls in classes:
        # Text the class does not match is dropped by tiktoken, so its pieces are the class's members.
        enc = tiktoken.Encoding(name="class", pat_str=cls, mergeable_ranks=ranks, special_tokens={})
        theirs = set(enc.decode_bytes(enc.encode_ordinary(everything)).decode("utf-8"))
        differ |= theirs.symmetric_difference(regex.findall(cls, everything))
    return frozenset(differ)


def _character_class(characters: frozenset[str]) -> "str | None":
    """A class of Rust's regex syntax matching exactly `characters` (None for none)."""
    ranges: list[list[int]] = []
    for c in sorted(map(ord, characters)):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    if not ranges:
        return None
    return "[" + "".join(f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges) + "]"


def _first_differing(finder, text: str) -> "tuple[str, int] | None":
    """(the first differing character in `text`, its index), or None when it holds none."""
    if finder is None or text.isascii():
        return None
    found = finder.encode_ordinary(text)
    if not found:
        return None
    c = finder.decode(found)[0]
    return c, text.index(c)


def encode_text(choice: Choice, tokenizer: TokenizerLike, text: str) -> "np.ndarray":
    """The ids of `text` (special tokens allowed, surrogates fixed), as the Python engine gives
    them, by the chosen engine; a uint32 array for tiktoken, `tokenizer.packed_dtype` for ours.

    Raises ValueError under a strict tiktoken choice when a document holds a character whose
    Unicode class differs between the engines."""
    import numpy as np  # here, not above: training imports this module, and needs no NumPy

    if choice.engine == "python":
        return np.frombuffer(tokenizer.encode_packed(text), dtype=tokenizer.packed_dtype)
    return np.concatenate(encode_texts(choice, tokenizer, [text]) or [np.zeros(0, np.uint32)])


def encode_texts(choice: Choice, tokenizer: TokenizerLike, texts: list[str]) -> "list[np.ndarray]":
    """`encode_text` of each text, spread over `choice.threads` threads (tiktoken lets go of the
    GIL while it encodes): the texts, or the documents of a single text."""
    import numpy as np
    if choice.engine == "python":
        return [encode_text(choice, tokenizer, text) for text in texts]
    texts = [fix_surrogates(text) for text in texts]
    encoding, finder = warm_up(choice)
    if choice.threads > 1 and len(texts) == 1:
        return _by_documents(choice, tokenizer, texts)
    allowed = frozenset(choice.special_ids)

    def encode(text: str) -> "np.ndarray":
        # One call per text: tiktoken cuts it at the special tokens, and its ids come back as an
        # array, not as a list of ints to convert (a third of what tiktoken itself takes on prose).
        # Without special tokens `encode_ordinary` is the faster (tiktoken's search for the
        # special tokens then matches an empty string at every position).
        if choice.whole and _first_differing(finder, text) is None:
            if not allowed:
                return np.frombuffer(array("I", encoding.encode_ordinary(text)), dtype=np.uint32)
            return encoding.encode_to_numpy(text, allowed_special=allowed, disallowed_special=())
        return _by_documents(dataclasses.replace(choice, threads=1), tokenizer, [text])[0]

    if choice.threads > 1 and len(texts) > 1:
        with ThreadPoolExecutor(choice.threads) as pool:
            return list(pool.map(encode, texts))
    return [encode(text) for text in texts]


def _by_documents(choice: Choice, tokenizer: TokenizerLike, texts: list[str]) -> "list[np.ndarray]":
    """`encode_texts` of texts (surrogates fixed) cut at the special tokens by us, each document
    between them handed to tiktoken alone, or to ours when it holds a differing character."""
    import numpy as np
    special_re = special_token_regex(tokenizer.special_tokens, keep=True)
    special_ids = choice.special_ids
    # Each text as its parts: documents (even positions) and special tokens (odd ones).
    parts_of = [special_re.split(text) if special_re else [text] for text in texts]
    documents = [part for parts in parts_of for part in parts[::2] if part]
    encode_document = _document_encoder(choice, tokenizer)
    if choice.threads > 1 and len(documents) > 1:
        with ThreadPoolExecutor(choice.threads) as pool:
            encoded = iter(list(pool.map(encode_document, documents)))
    else:
        encoded = map(encode_document, documents)
    results = []
    for parts in parts_of:
        # The ids gathered in one `array`, from tiktoken's lists: a third of what `np.array` of
        # each list takes, and no small array per document to join.
        ids = array("I")
        for i, part in enumerate(parts):
            if i % 2:
                ids.append(special_ids[part])
            elif part:
                ids.extend(next(encoded))
        results.append(np.frombuffer(ids, dtype=np.uint32) if ids else np.zeros(0, np.uint32))
    return results


def _document_encoder(choice: Choice, tokenizer: TokenizerLike):
    """A function from a document (no special tokens, no surrogates) to its ids as a list."""
    import numpy as np
    encoding, finder = warm_up(choice)
    encode_ordinary = encoding.encode_ordinary

    def encode_document(document: str) -> list[int]:
        found = _first_differing(finder, document)
        if found is not None:
            if choice.strict:
                c, where = found
                raise ValueError(
                    f"engine 'tiktoken' cannot give our ids for U+{ord(c):04X} ({c!r}, at character "
                    f"{where} of a document starting {document[:40]!r}): its Unicode class differs "
                    "between the `regex` package and tiktoken's engine; use engine 'auto' (which encodes "
                    "such documents with ours) or 'python'"
                )
            return np.frombuffer(tokenizer.encode_packed(document), dtype=tokenizer.packed_dtype).tolist()
        return encode_ordinary(document)

    return encode_document
