r"""Hugging Face pre-tokenization pipelines: normalizers and `Split` steps, run exactly as `tokenizers` runs them.

A `tokenizer.json` of a recent open model (DeepSeek, Qwen2, Llama 3, OLMo, SmolLM) cuts text with a
*pipeline* rather than one regex: a normalizer (Unicode normal forms), then a sequence of `Split`
steps, each applied to every piece the steps before it made, then `ByteLevel`. Such a pipeline is a
pattern too, spelled as a string so that it travels wherever a pattern name does (saved files,
dataset manifests, worker tasks): `PREFIX` followed by a canonical JSON object (see `Pipeline.spec`).
`patterns.canonical` and `patterns.get` accept it; the named patterns and custom regexes are
untouched.

The spec holds how a `tokenizer.json` cuts text into pre-tokens, and nothing else: its added
tokens' flags and its post-processor are not pre-tokenization and travel beside the pattern (see
`formats.definition.TokenizerDefinition`; `added_tokens` matches them). The spec's keys:

- `normalizers`: a list of "NFC", "NFKC", "NFD", "NFKD", applied in order with `unicodedata`
  (Python's Unicode version, which may differ from the one `tokenizers` was built with);
- `steps`: the `Split` steps, each `{"regex": R}` or `{"string": S}` with a `behavior` and `invert`,
  then `{"byte_level": use_regex}` (ByteLevel with its GPT-2 regex is one more Isolated split). R is
  kept in Oniguruma's spelling, as the file has it, and run by the `regex` package after
  `from_oniguruma`;
- `ignore_merges`: a pre-token that is itself in the model's vocabulary is taken whole (it
  decides what becomes of a pre-token, so it stays with them).

How a `Split` cuts one piece, as `tokenizers` does (learned by experiment and checked by
`tests/test_open_models.py` against it): the regex runs on the piece alone (lookaheads stop at its
end), giving matches and the text between them; with `invert` the two swap roles. Then:
Isolated keeps each as a piece; Contiguous joins adjacent matches; MergedWithPrevious appends each
match to the piece before it (unless that piece is itself a match); MergedWithNext prepends each to
the piece after it (likewise). Removed drops text and is refused. A regex that matches the empty
string somewhere is refused where it does (Oniguruma's handling of empty matches is its own).

**Safe boundaries.** A pipeline without normalizers whose every step is Isolated and not inverted,
and whose every regex has the boundary property of cl100k and o200k (see `patterns`), may cut a
document between a non-whitespace character and a whitespace character other than `\r` and `\n`:
each step's pieces are unions of the pieces of the two sides, so every later step sees the same
pieces. Which regexes have that property is not decided here by analysis: only regexes listed in
`BOUNDARY_REGEXES` (each checked by a hypothesis test, as the named patterns are) enable it.

DeepSeek's three regexes (`LINE_BOUNDARY_REGEXES`) may also be cut after `\r` or `\n` before a
non-whitespace character, which matters for text without spaces (Chinese: a paragraph would be one
chunk otherwise). No match holds a newline followed by non-whitespace: runs of digits, of CJK and of
letters hold no whitespace; a letter run's one leading character is not `\r` or `\n`; punctuation
takes the newlines *after* it and nothing more; whitespace runs (`\s*[\r\n]+`, tried before
`\s+(?!\S)`) end where the non-whitespace starts. A whitespace run ending in a newline is
`\s*[\r\n]+` whole, whether the text goes on or not, so its lookahead sees nothing past the cut.
"""

import json
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain

import regex

from cs336_basics.errors import PatternTimeout
from cs336_basics.text.timeouts import custom_timeout
PREFIX = "hf-pipeline:"

NORMALIZERS = ("NFC", "NFKC", "NFD", "NFKD")
BEHAVIORS = ("Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")

# What `ByteLevel` with `use_regex` runs: GPT-2's pattern (the same as `patterns.GPT2`).
BYTE_LEVEL_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# `tokenizers` runs Split regexes with Oniguruma, which reads `X{n,m}+` as `(?:X{n,m})+`, where the
# `regex` package and tiktoken read a possessive `X{n,m}`: as written, cl100k's `\p{N}{1,3}+` would
# keep "2019" whole instead of cutting "201" "9". So what we write spells it as an atomic group,
# which both engines read alike, and what we read is turned into the `regex` spelling of what
# Oniguruma does. X is one atom: a \p{..} class, an escape, a [...] set or one plain character.
_ATOM = r"(\\[pP]\{[^}]*\}|\\.|\[(?:\\.|[^\]\\])*\]|[^\\()\[\]{}|])"
_BOUNDED_PLUS = regex.compile(_ATOM + r"\{(\d+(?:,\d*)?)\}\+")
_GROUP_BOUNDED_PLUS = regex.compile(r"\)\{\d+(?:,\d*)?\}\+")


def for_oniguruma(source: str) -> str:
    """A `regex`-package regex spelled so that Oniguruma reads it alike (see above)."""
    if _GROUP_BOUNDED_PLUS.search(source):
        raise ValueError(f"pattern {source!r} repeats a group with {{n,m}}+, which Hugging Face's regex engine reads differently")
    return _BOUNDED_PLUS.sub(r"(?>\1{\2})", source)


def from_oniguruma(source: str, where: str) -> str:
    """The `regex`-package spelling of an Oniguruma regex from a file; ValueError naming `where`
    for what we do not reproduce."""
    if _GROUP_BOUNDED_PLUS.search(source):
        raise ValueError(f"{where}: Split regex repeats a group with {{n,m}}+, which we do not reproduce")
    return _BOUNDED_PLUS.sub(r"(?:\1{\2})+", source)


# DeepSeek's regexes, in Oniguruma's spelling as its tokenizer.json has them, whose boundaries (see
# the module docstring) `tests/test_open_models.py` checks. A digit run or a run of CJK and kana
# never holds whitespace; the third has cl100k's shape (a letter run with at most one character
# before it that is not \r or \n, punctuation that may take newlines after it, whitespace runs).
LINE_BOUNDARY_REGEXES = frozenset({
    r"\p{N}{1,3}",
    "[一-龥\u3040-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
})
BOUNDARY_REGEXES = LINE_BOUNDARY_REGEXES | {BYTE_LEVEL_REGEX}  # GPT-2's boundary (see `patterns`) takes in cl100k's


# The characters that Python's `unicodedata` (its Unicode version is the key) normalizes otherwise
# than `tokenizers` 0.23 does under NFC, NFKC, NFD or NFKD, alone or next to a combining mark, and the
# parts of a decomposition that the two compose otherwise: characters assigned in Unicode 12.1 to
# 14.0 with a decomposition or a combining class, which its tables do not know. A slow test
# recomputes the set from `tokenizers` itself. For another Unicode version the set
# is not known, and normalizers are refused.
NORMALIZED_OTHERWISE: dict[str, tuple[tuple[int, int], ...]] = {
    "14.0.0": (
        (0x07FD, 0x07FD), (0x0898, 0x089F), (0x08CA, 0x08D3), (0x09FE, 0x09FE), (0x0C3C, 0x0C3C),
        (0x0D3B, 0x0D3C), (0x0EBA, 0x0EBA), (0x1715, 0x1715), (0x1ABF, 0x1ACE), (0x1DF6, 0x1DFA),
        (0x32FF, 0x32FF), (0xA7F2, 0xA7F4), (0xA82C, 0xA82C), (0xAB69, 0xAB69), (0x10781, 0x10785),
        (0x10787, 0x107B0), (0x107B2, 0x107BA), (0x10D24, 0x10D27), (0x10EAB, 0x10EAC), (0x10F46, 0x10F50),
        (0x10F82, 0x10F85), (0x11070, 0x11070), (0x1133B, 0x1133B), (0x1145E, 0x1145E), (0x11839, 0x1183A),
        (0x11930, 0x11930), (0x11935, 0x11935), (0x11938, 0x11938), (0x1193D, 0x1193E), (0x11943, 0x11943), (0x119E0, 0x119E0), (0x11A34, 0x11A34),
        (0x11A47, 0x11A47), (0x11A99, 0x11A99), (0x11D42, 0x11D42), (0x11D44, 0x11D45), (0x11D97, 0x11D97),
        (0x16FF0, 0x16FF1), (0x1E130, 0x1E136), (0x1E2AE, 0x1E2AE), (0x1E2EC, 0x1E2EF), (0x1F16C, 0x1F16C),
        (0x1FBF0, 0x1FBF9),
    ),
}
_NORMALIZED_OTHERWISE_RE = re.compile(
    "[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in NORMALIZED_OTHERWISE.get(unicodedata.unidata_version, ())) + "]"
    if unicodedata.unidata_version in NORMALIZED_OTHERWISE else "(?!)"
)


@dataclass(frozen=True)
class SplitStep:
    """One `Split` (or ByteLevel's regex): `compiled` in the `regex` package, `behavior`, `invert`."""

    source: str  # as in the file: Oniguruma's spelling, or the literal string
    literal: bool
    behavior: str
    invert: bool
    compiled: "regex.Pattern[str]"
    # For an Isolated step of a regex known never to match the empty string (one of
    # `BOUNDARY_REGEXES`), the regex as one group: its `split` gives the pieces, and empty strings
    # between adjacent matches, in C.
    splitter: "regex.Pattern[str] | None" = None

    def pieces(self, piece: str) -> list[str]:
        """The pieces `tokenizers` makes of one piece (see the module docstring)."""
        try:
            spans = self._spans(piece)
        except TimeoutError:
            raise PatternTimeout(
                f"Split regex {self.source[:60]!r} ran for over {custom_timeout(len(piece)):.0f} s on a piece of "
                f"{len(piece):,} characters starting {piece[:40]!r} and was stopped: it backtracks "
                "catastrophically (nested repeats such as (a+)+ do)"
            ) from None
        behavior = self.behavior
        if behavior == "Isolated":
            kept = spans
        elif behavior == "Contiguous":  # adjacent spans of the same kind join
            kept = []
            previous = False
            for span in spans:
                if kept and span[2] == previous:
                    kept[-1][1] = span[1]
                else:
                    kept.append(span)
                previous = span[2]
        elif behavior == "MergedWithPrevious":  # a match after a non-match joins it
            kept = []
            previous = False
            for span in spans:
                if span[2] and not previous and kept:
                    kept[-1][1] = span[1]
                else:
                    kept.append(span)
                previous = span[2]
        else:  # MergedWithNext: the same from the right
            kept = []
            previous = False
            for span in reversed(spans):
                if span[2] and not previous and kept:
                    kept[-1][0] = span[0]
                else:
                    kept.append(span)
                previous = span[2]
            kept.reverse()
        return [piece[start:stop] for start, stop, _ in kept]

    def _spans(self, piece: str) -> list[list]:
        """[start, end, is_match] of the matches and the text between them, in order; with `invert`
        the text between counts as the matches. A regex from a file runs with a time limit (see
        `timeouts.custom_timeout`); ours (`BOUNDARY_REGEXES`) without."""
        if self.source in BOUNDARY_REGEXES:
            matches = self.compiled.finditer(piece)
        else:
            matches = self.compiled.finditer(piece, timeout=custom_timeout(len(piece)))
        spans: list[list] = []
        end = 0
        flag = self.invert
        for m in matches:
            start, stop = m.span()
            if start == stop:
                raise ValueError(
                    f"Split regex {self.source!r} matches the empty string at character {start} of a piece "
                    f"starting {piece[:40]!r}; Hugging Face's engine treats empty matches its own way, which we "
                    "do not reproduce"
                )
            if start != end:
                spans.append([end, start, flag])
            spans.append([start, stop, not flag])
            end = stop
        if end != len(piece):
            spans.append([end, len(piece), flag])
        return spans


@dataclass(frozen=True, eq=False)
class Pipeline:
    """A parsed spec (see the module docstring); build it with `get`."""

    spec: str
    normalizers: tuple[str, ...]
    steps: tuple[SplitStep, ...]
    ignore_merges: bool
    boundary: "str | None"  # None, "cl100k" or "lines" (cl100k's and after a newline; see the module docstring)

    def normalize(self, text: str) -> str:
        """The text after the normalizers (the text itself when there are none).

        Raises ValueError for text holding a character that Python's `unicodedata` normalizes
        otherwise than `tokenizers` does (see `NORMALIZED_OTHERWISE`): refused, not approximated.
        """
        if not self.normalizers:
            return text
        found = _NORMALIZED_OTHERWISE_RE.search(text)
        if found is not None:
            c = found.group()
            raise ValueError(
                f"U+{ord(c):04X} ({c!r}, at character {found.start()} of text starting {text[:40]!r}) is normalized "
                f"otherwise by Python's Unicode {unicodedata.unidata_version} tables than by Hugging Face tokenizers' "
                "(it is newer than theirs); text holding it is refused under a normalizer"
            )
        for form in self.normalizers:
            text = unicodedata.normalize(form, text)
        return text

    def pretokens(self, text: str) -> list[str]:
        """The pre-tokens of normalized text that holds no added token: every step, in order."""
        pieces = [text] if text else []
        for step in self.steps:
            if step.splitter is not None:
                pieces = list(filter(None, chain.from_iterable(map(step.splitter.split, pieces))))
                continue
            out: list[str] = []
            split = step.pieces
            for piece in pieces:
                out += split(piece)
            pieces = out
        return pieces


def is_pipeline(pattern: object) -> bool:
    return isinstance(pattern, str) and pattern.startswith(PREFIX)


def make_spec(
    normalizers: list[str],
    steps: list[dict],
    *,
    ignore_merges: bool = False,
) -> str:
    """The canonical pattern string of a pipeline (validated: ValueError for what is not supported)."""
    spec = {
        "normalizers": list(normalizers),
        "steps": [dict(step) for step in steps],
        "ignore_merges": bool(ignore_merges),
    }
    text = PREFIX + json.dumps(spec, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    get(text)
    return text


@lru_cache(maxsize=64)
def get(pattern: str) -> Pipeline:
    """The Pipeline of a spec string; ValueError naming what is wrong or not supported."""
    if not is_pipeline(pattern):
        raise ValueError(f"not a pipeline spec: {pattern[:60]!r}")
    try:
        spec = json.loads(pattern[len(PREFIX):])
    except (json.JSONDecodeError, RecursionError):
        raise ValueError(f"pipeline spec is not valid JSON: {pattern[:80]!r}") from None
    if not isinstance(spec, dict) or set(spec) != {"normalizers", "steps", "ignore_merges"}:
        raise ValueError(f"pipeline spec needs exactly the keys normalizers, steps, ignore_merges: {pattern[:80]!r}")
    normalizers = spec["normalizers"]
    if not isinstance(normalizers, list) or any(form not in NORMALIZERS for form in normalizers):
        raise ValueError(f"pipeline normalizers must be a list of {', '.join(NORMALIZERS)}, got {normalizers!r}")
    if normalizers and unicodedata.unidata_version not in NORMALIZED_OTHERWISE:
        raise ValueError(
            f"normalizer {'+'.join(normalizers)} needs Python's Unicode tables {', '.join(NORMALIZED_OTHERWISE)} "
            f"(Python 3.11), for which the characters that Hugging Face tokenizers normalizes otherwise are known; "
            f"this Python has {unicodedata.unidata_version}"
        )
    raw_steps = spec["steps"]
    if not isinstance(raw_steps, list) or not raw_steps or raw_steps[-1].keys() != {"byte_level"}:
        raise ValueError("pipeline steps must end with {\"byte_level\": use_regex}")
    steps = []
    for raw in raw_steps[:-1]:
        steps.append(_step(raw))
    if raw_steps[-1]["byte_level"]:
        steps.append(_step({"regex": BYTE_LEVEL_REGEX, "behavior": "Isolated", "invert": False}))
    boundary = None
    plain = not normalizers and bool(steps) and all(s.behavior == "Isolated" and not s.invert and not s.literal for s in steps)
    if plain and all(s.source in LINE_BOUNDARY_REGEXES for s in steps):
        boundary = "lines"
    elif plain and all(s.source in BOUNDARY_REGEXES for s in steps):
        boundary = "cl100k"
    return Pipeline(pattern, tuple(normalizers), tuple(steps), bool(spec["ignore_merges"]), boundary)


def engine_difference(source: str) -> str | None:
    """What in an Oniguruma regex the `regex` package reads otherwise, or None. Oniguruma (as
    `tokenizers` runs it) reads `^` and `$` as line anchors, `\\Z` as before any final newline,
    `\\h` as a hexadecimal digit, `\\w` (and so `\\b`) with other characters (², ½, U+200D), and a
    `[` inside a set as a nested set. `\\s++$`, which ends a whitespace run that only the end of the
    text can follow, means the same in both."""
    i, n, in_set = 0, len(source), False
    while i < n:
        c = source[i]
        if c == "\\" and i + 1 < n:
            e = source[i + 1]
            if e in "wWhH" or (not in_set and e in "bBZ"):
                return f"\\{e}"
            if e in "pPx" and source.startswith("{", i + 2):
                i = source.find("}", i) + 1 or n
                continue
            i += 2
            continue
        if in_set:
            if c == "[" and source.startswith("[:", i):
                i = source.find(":]", i) + 2 if ":]" in source[i:] else n
                continue
            if c == "[":
                return "a [ inside a set"
            if c == "]":
                in_set = False
        elif c == "[":
            in_set = True
            i += 1
            if source.startswith("^", i):
                i += 1
            if source.startswith("]", i):
                i += 1
            continue
        elif c == "^" or (c == "$" and not source[:i].endswith("\\s++")):
            return c
        i += 1
    return None


def _step(raw: object) -> SplitStep:
    if not isinstance(raw, dict) or not ({"regex"} <= raw.keys() or {"string"} <= raw.keys()):
        raise ValueError(f"pipeline step must hold a regex or a string: {raw!r}")
    behavior, invert = raw.get("behavior"), raw.get("invert")
    if behavior not in BEHAVIORS or type(invert) is not bool:
        raise ValueError(f"Split behavior {behavior!r} (invert {invert!r}) is not supported; "
                         f"the supported ones are {', '.join(BEHAVIORS)}")
    if "regex" in raw:
        source, literal = raw["regex"], False
        if not isinstance(source, str):
            raise ValueError(f"Split regex must be a string, got {source!r}")
        converted = from_oniguruma(source, "pipeline")
        different = engine_difference(source)
        if different is not None:
            raise ValueError(
                f"Split regex {source!r} uses {different}, which Hugging Face's regex engine (Oniguruma) reads "
                "otherwise than the regex package"
            )
    else:
        source, literal = raw["string"], True
        if not isinstance(source, str) or not source:
            raise ValueError(f"Split string must be a non-empty string, got {source!r}")
        converted = regex.escape(source)
    try:
        compiled = regex.compile(converted)
    except (regex.error, TypeError, ValueError, OverflowError, RecursionError) as e:
        raise ValueError(f"Split regex {source!r} is not a valid regex: {e}") from None
    if compiled.fullmatch("") is not None:
        raise ValueError(f"Split regex {source!r} matches the empty string, which Hugging Face's engine treats its own way")
    splitter = None
    if behavior == "Isolated" and not invert and not literal and source in BOUNDARY_REGEXES and compiled.groups == 0:
        splitter = regex.compile(f"({converted})")
    return SplitStep(source, literal, behavior, invert, compiled, splitter)
