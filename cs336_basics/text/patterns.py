r"""Pre-tokenization patterns: the one place that knows them, and the facts the fast paths rest on.

A pattern is a name or a regex. The names are the patterns tiktoken defines (facts, quoted from its
encodings), run by the `regex` package so that pre-tokens equal tiktoken's for the same string:

- `gpt2` (aliases `r50k_base`, `p50k_base`; the default): GPT-2's pattern.
- `cl100k` (alias `cl100k_base`): GPT-4's.
- `o200k` (alias `o200k_base`): GPT-4o's.
- `none`: no pre-tokenization; each document (text between special tokens) is one sequence.
- `superbpe`: SuperBPE's stage-2 pre-tokenization as its authors released it (`SUPERBPE`, below),
  which does not cut at single spaces, so that tokens can span words.
- `superbpe-v1`: the stage-2 pre-tokenization of SuperBPE's preprint (`SUPERBPE_V1`, below).
- any other string is a custom regex for the `regex` package (with its semantics, e.g. `$` also
  matches before a final newline). It must compile, must not match the empty string, and must match
  every character of the text: text it leaves unmatched is an error naming the offset (tiktoken
  drops such text silently). It is code from whoever wrote it (a `tokenizer.json` from elsewhere
  brings its own), so it runs with a time limit per document (`timeouts.custom_timeout`): a regex that
  backtracks catastrophically raises `PatternTimeout` instead of running for ever. The named
  patterns run without one, at full speed.

A pattern runs on each document separately, so an end-of-text anchor (`\s++$` in cl100k) matches at
the end of each document.

**Safe boundaries.** The fast paths cut a document into *chunks* and pre-tokenize each distinct
chunk alone. That is exact only at offsets where no pre-token can span, whatever the text around:

- gpt2: between a non-whitespace character and a whitespace character. No alternative of the
  pattern holds a non-whitespace character followed by a whitespace one (` ?\p{L}+` etc. start with
  the only space they hold; the `\s` alternatives hold whitespace only), the lookahead `(?!\S)`
  is only reached after whitespace, and the pattern has no lookbehind or start anchor.
- cl100k and o200k: between a non-whitespace character and a whitespace character *other than*
  `\r` and `\n`. Here punctuation may take the newlines after it (` ?[^\s\p{L}\p{N}]++[\r\n]*+` in
  cl100k, ` ?[^\s\p{L}\p{N}]+[\r\n/]*` in o200k), so a newline after non-whitespace is not a
  boundary; every other alternative either holds whitespace only, or holds whitespace only as its
  first character (the optional `[^\r\n\p{L}\p{N}]` prefix before letters). The anchor `$` in
  cl100k's `\s++$` and the lookahead `(?!\S)` are only reached after whitespace, so a boundary,
  which has non-whitespace before it, can be neither. No lookbehind, no start anchor.
- none, superbpe, superbpe-v1 and custom regexes: no such fact used; documents are cut only at special tokens.

`tests/test_patterns.py` proves each fact with hypothesis: pre-tokenizing the chunks one by one
gives exactly the pre-tokens of the whole text, and cutting a file at the safe cuts built on these
boundaries changes no pre-token.
"""

import re
from dataclasses import dataclass
from functools import lru_cache

import regex

from cs336_basics.errors import PatternTimeout
from cs336_basics.text import pipelines
from cs336_basics.text.timeouts import custom_timeout

GPT2 = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
CL100K = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)
O200K = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

# SuperBPE's stage 2 as its authors release it (Liu et al. 2025, arXiv:2503.13423; their scripts
# `extend_tokenizer.sh` and `extend_existing_tokenizer.sh`): a Hugging Face `Split` of this regex with
# behavior Isolated, so the matches are pieces and so is the text between them (runs of letters,
# single spaces and lone punctuation, which superwords are made of). Digits go in groups of up to
# three from the left, punctuation runs of two or more stand alone (with the line breaks and slashes
# after them), and so do runs of spaces before a non-space or the end. `isolated` turns such a Split
# into one regex that matches every character; `tests/test_superbpe.py` checks its pieces against
# Hugging Face's Split.
SUPERBPE_SPLIT = r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)"""
SUPERBPE = "superbpe"

# The preprint's first stage 2 (its training code pre-tokenizes with Hugging Face's
# `Digits(individual_digits=False)`, then a `Split` that isolates at the empty regex
# `(?=(\d{3})+(?!\d))`, and nothing else once whitespace pre-tokenization is off): each run of
# numeric characters (\p{N}) is one piece, cut before every place followed by a multiple of three
# decimal digits (\d) up to a non-digit; all other text, spaces included, is one piece.
# `tests/test_superbpe.py` checks the pieces against that Hugging Face pipeline.
SUPERBPE_V1_REGEX = r"""[^\p{N}]+|\p{N}+?(?=(?:\d{3})+(?!\d)|(?!\p{N}))"""
SUPERBPE_V1 = "superbpe-v1"


def isolated(split: str) -> str:
    r"""One regex whose matches, one after another, are the pieces of a Hugging Face `Split` of the
    regex `split` with behavior Isolated: its matches, and each run of text between them.

    A run between matches ends at the first place where `split` matches, so the second alternative
    takes characters while `split` does not match there. `split` runs at the same places of the same
    text either way, so lookarounds see what they would. (Its numbered groups, if any, are counted
    twice: a backreference would be off; refused by `superword_pattern`.)

    >>> import regex; regex.findall(isolated(r"\d+"), "ab12c")
    ['ab', '12', 'c']
    """
    return f"(?:{split})|(?:(?!(?:{split}))[\\s\\S])+"


SUPERBPE_REGEX = isolated(SUPERBPE_SPLIT)
# The same pieces, faster (half the time): `regex.split` on the regex as a group keeps the matches,
# and the empty strings between adjacent ones are dropped.
_SUPERBPE_SPLITTER = regex.compile(f"({SUPERBPE_SPLIT})")

NAMED: dict[str, str | None] = {
    "gpt2": GPT2, "cl100k": CL100K, "o200k": O200K, "none": None, SUPERBPE: SUPERBPE_REGEX,
    SUPERBPE_V1: SUPERBPE_V1_REGEX,
}
ALIASES = {"r50k_base": "gpt2", "p50k_base": "gpt2", "cl100k_base": "cl100k", "o200k_base": "o200k"}

# The characters that `regex` counts as \s (and tiktoken's engine too; a test checks both). Stdlib
# `re` and `str.split()` also count U+001C..U+001F, which would cut differently, so the set is spelled out.
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_WS_NOT_NEWLINE = "\t\x0b\x0c \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_ASCII_WS = "\t\n\x0b\x0c\r "

_A_NAME = re.compile(r"\w+")
_A_STAGE2_NAME = re.compile(r"[\w-]+")  # a superword pattern that looks like a name is one

def canonical(pattern: str) -> str:
    """The canonical name of a pattern ("gpt2", "cl100k", "o200k", "none") or the custom regex itself.

    Raises ValueError for an unknown name (listing the known ones), a regex that does not compile,
    or one that matches the empty string.

    >>> canonical("cl100k_base")
    'cl100k'
    """
    if not isinstance(pattern, str):
        raise ValueError(f"pattern must be a str (a name or a regex), got {pattern!r}")
    if pipelines.is_pipeline(pattern):
        pipelines.get(pattern)  # validated
        return pattern
    if pattern in NAMED:
        return pattern
    if pattern in ALIASES:
        return ALIASES[pattern]
    if _A_NAME.fullmatch(pattern):
        known = ", ".join([*NAMED, *ALIASES])
        raise ValueError(f"unknown pattern name {pattern!r}; the known names are {known} (or give a regex)")
    compiled = _compile_custom(pattern)
    if compiled.fullmatch("") is not None:
        raise ValueError(f"pattern {pattern!r} matches the empty string; every pre-token must hold at least one character")
    return pattern


def regex_string(pattern: str) -> str | None:
    """The regex source of a pattern name, alias or custom regex; None for "none".

    >>> regex_string("none") is None
    True
    """
    name = canonical(pattern)
    if pipelines.is_pipeline(name):
        raise ValueError(
            "the pattern is a Hugging Face pipeline (normalizers and several Split steps), which no single "
            "regex expresses: tiktoken and other one-regex engines cannot run it"
        )
    return NAMED[name] if name in NAMED else name


def superword_pattern(pattern: str) -> str:
    """The pattern of SuperBPE's stage 2 given as `pattern`: a pattern name ("superbpe", the
    default, or "superbpe-v1", or any other, see `canonical`) as it is, or a regex read as a Hugging
    Face `Split` with behavior Isolated, as SuperBPE's authors give theirs: the pattern is then
    `isolated(regex)`, a custom regex whose pieces are that Split's.

    Raises ValueError for an unknown name (a string of letters, digits, `_` and `-` is taken for
    a name), a regex that does not compile or matches the empty string, or one with a capturing
    group (write `(?:...)`).

    >>> superword_pattern("superbpe-v1")
    'superbpe-v1'
    """
    if not isinstance(pattern, str):
        raise ValueError(f"superword pattern must be a str (a name or a regex), got {pattern!r}")
    if pattern in NAMED or pattern in ALIASES or pipelines.is_pipeline(pattern):
        return canonical(pattern)
    if _A_STAGE2_NAME.fullmatch(pattern):
        known = ", ".join([*NAMED, *ALIASES])
        raise ValueError(f"unknown pattern name {pattern!r}; the known names are {known} (or give a regex, "
                         "read as a Hugging Face Split with behavior Isolated)")
    compiled = _compile_custom(pattern)
    if compiled.groups:
        raise ValueError(f"superword pattern {pattern!r} has a capturing group; write (?:...) for its groups")
    if compiled.search("") is not None:
        raise ValueError(f"superword pattern {pattern!r} matches the empty string; every piece must hold at least one character")
    return canonical(isolated(pattern))


def _compile_custom(pattern: str) -> "regex.Pattern[str]":
    try:
        return regex.compile(pattern)
    except (regex.error, TypeError, ValueError, OverflowError, RecursionError) as e:
        raise ValueError(f"pattern {pattern!r} is not a valid regex: {e}") from None


@dataclass(frozen=True, eq=False)
class Pretokenizer:
    """How one pattern cuts a document (text without special tokens) into pre-tokens.

    name:       the canonical name, or the custom regex.
    source:     the regex source (None for "none").
    boundary:   whether the pattern has a safe boundary (see the module docstring): then `chunks`
                cuts there, and `safe_cut_bytes` / `last_boundary` find such offsets.
    """

    name: str
    source: str | None
    compiled: "regex.Pattern[str] | None"
    chunk_re: "re.Pattern[str] | None"
    safe_cut_bytes: "re.Pattern[bytes] | None"  # a non-whitespace ASCII byte before a boundary
    last_boundary: "re.Pattern[str] | None"  # matched from the start, ends at the last boundary
    pipeline: "pipelines.Pipeline | None" = None  # a Hugging Face pipeline (see `pipelines`)

    @property
    def boundary(self) -> bool:
        return self.chunk_re is not None

    def pretokens(self, document: str) -> list[str]:
        """The pre-tokens of a document, exactly; raises ValueError if a custom regex leaves text unmatched."""
        if self.pipeline is not None:
            return self.pipeline.pretokens(self.pipeline.normalize(document))
        if self.compiled is None:
            return [document] if document else []
        if self.name == SUPERBPE:
            return list(filter(None, _SUPERBPE_SPLITTER.split(document)))
        if self.name in NAMED:  # the named patterns match every character (a test checks it)
            return self.compiled.findall(document)
        return self._checked_findall(document)

    def _checked_findall(self, document: str) -> list[str]:
        try:
            return self._checked_findall_now(document)
        except TimeoutError:
            seconds = custom_timeout(len(document))
            raise PatternTimeout(
                f"pattern {_snippet(self.name, 60)} ran for over {seconds:.0f} s on a document of {len(document):,} "
                f"characters starting {_snippet(document[:40])} and was stopped: it backtracks catastrophically "
                "(nested repeats such as (a+)+ do); simplify it"
            ) from None

    def _checked_findall_now(self, document: str) -> list[str]:
        pieces = []
        end = 0
        for m in self.compiled.finditer(document, timeout=custom_timeout(len(document))):
            start = m.start()
            if start != end:
                raise ValueError(
                    f"pattern {self.name!r} leaves {_snippet(document[end:start])} unmatched at character offset {end} "
                    f"of a document starting {_snippet(document[:40])}; extend the pattern so that it matches "
                    "every character (e.g. add |\\s+|. at its end)"
                )
            if m.end() == start:
                raise ValueError(
                    f"pattern {self.name!r} matches the empty string at character offset {start} of a document "
                    f"starting {_snippet(document[:40])}; every pre-token must hold at least one character"
                )
            pieces.append(m.group())
            end = m.end()
        if end != len(document):
            raise ValueError(
                f"pattern {self.name!r} leaves {_snippet(document[end:])} unmatched at character offset {end} "
                f"of a document starting {_snippet(document[:40])}; extend the pattern so that it matches "
                "every character (e.g. add |\\s+|. at its end)"
            )
        return pieces

    def chunks(self, document: str) -> list[str]:
        """Cut a document at the pattern's safe boundaries (not at all without them)."""
        if self.chunk_re is None:
            return [document] if document else []
        return self.chunk_re.findall(document)

    def chunk_pretokens(self, chunk: str) -> list[str]:
        """The pre-tokens of one chunk (see `chunks`), with shortcuts for the common one-word chunk."""
        if self.name == "gpt2":
            if (chunk[1:] if chunk[0] == " " else chunk).isalpha():
                return [chunk]
            return _GPT2_ASCII_RE.findall(chunk) if chunk.isascii() else self.compiled.findall(chunk)
        if self.name == "cl100k":
            # `[^\r\n\p{L}\p{N}]?+\p{L}++`: a space and letters (str.isalpha letters are \p{L}).
            if (chunk[1:] if chunk[0] == " " else chunk).isalpha():
                return [chunk]
            if chunk.isascii():
                return _CL100K_ASCII_RE.findall(chunk)
        elif self.name == "o200k":
            word = chunk[1:] if chunk[0] == " " else chunk
            # An ASCII word with all but maybe its first letter in lower case is one pre-token.
            if word.isascii() and word.isalpha() and (len(word) == 1 or word[1:].islower()):
                return [chunk]
            if chunk.isascii():
                return _O200K_ASCII_RE.findall(chunk)
        return self.pretokens(chunk)


def _snippet(text: str, width: int = 30) -> str:
    return repr(text if len(text) <= width else text[:width] + "…")


# The named patterns restricted to ASCII text (letters A-Z and a-z, digits 0-9; a test checks them
# against the patterns on ASCII text), for stdlib `re`, which is about twice as fast as `regex`.
# Python 3.11's `re` has possessive quantifiers, and its `$` is `regex`'s.
_W = _ASCII_WS
_GPT2_ASCII_RE = re.compile(
    rf"""'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^{_W}A-Za-z0-9]+|[{_W}]+(?![^{_W}])|[{_W}]+"""
)
_CL100K_ASCII_RE = re.compile(
    rf"""'(?i:[sdmt]|ll|ve|re)|[^\r\nA-Za-z0-9]?+[A-Za-z]++|[0-9]{{1,3}}+| ?[^{_W}A-Za-z0-9]++[\r\n]*+|[{_W}]++$"""
    rf"""|[{_W}]*[\r\n]|[{_W}]+(?![^{_W}])|[{_W}]"""
)
_CONTRACTION = "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
_O200K_ASCII_RE = re.compile(
    rf"""[^\r\nA-Za-z0-9]?[A-Z]*[a-z]+{_CONTRACTION}|[^\r\nA-Za-z0-9]?[A-Z]+[a-z]*{_CONTRACTION}|[0-9]{{1,3}}"""
    rf"""| ?[^{_W}A-Za-z0-9]+[\r\n/]*|[{_W}]*[\r\n]+|[{_W}]+(?![^{_W}])|[{_W}]+"""
)
ASCII_RES = {"gpt2": _GPT2_ASCII_RE, "cl100k": _CL100K_ASCII_RE, "o200k": _O200K_ASCII_RE}


def _boundary_regexes(name: str):
    """(chunk_re, safe_cut_bytes, last_boundary) for a pattern with a safe boundary, else Nones."""
    ws = WHITESPACE
    if name == "gpt2":
        chunk_re = re.compile(f"[{ws}]*[^{ws}]+|[{ws}]+")
        after = ws  # any whitespace after non-whitespace
        after_bytes = _ASCII_WS
    elif name in ("cl100k", "o200k"):
        # A chunk: leading whitespace, then non-whitespace runs each followed by whitespace that
        # starts with a newline (no boundary there), then a last non-whitespace run.
        chunk_re = re.compile(f"(?=[\\s\\S])[{ws}]*(?:[^{ws}]+[\r\n][{ws}]*)*[^{ws}]*")
        after = _WS_NOT_NEWLINE
        after_bytes = "\t\x0b\x0c "
    else:
        return None, None, None
    safe_cut_bytes = re.compile(
        b"[^" + _ASCII_WS.encode() + rb"\x80-\xff](?=[" + after_bytes.encode() + b"])"
    )
    last_boundary = re.compile(f"(?s:.*)[^{ws}](?=[{after}])")
    return chunk_re, safe_cut_bytes, last_boundary


# cl100k's chunks (the same cuts, a test checks it), spelled so that stdlib `re` finds them faster: a
# non-whitespace run with what follows it through newlines, or a whitespace run that ends the text.
_PIPELINE_CHUNK_RE = re.compile(f"[{WHITESPACE}]*[^{WHITESPACE}]+(?:[\r\n][{WHITESPACE}]*[^{WHITESPACE}]*)*|[{WHITESPACE}]+")


# The chunks of a pipeline that may also be cut after \r or \n before non-whitespace ("lines", see
# `pipelines`): non-whitespace after whitespace that does not end in \r or \n (or after none), then
# newlines and whitespace, each time followed by more non-whitespace only where that whitespace ends
# in a character other than \r and \n. Or a whitespace run alone. The first alternative is the
# common " word", tried without backtracking.
_TAIL = f"(?:[\r\n](?:[{WHITESPACE}]*[{_WS_NOT_NEWLINE}][^{WHITESPACE}]+|[{WHITESPACE}]*))*"
_LINES_CHUNK_RE = re.compile(
    f"[{_WS_NOT_NEWLINE}]*[^{WHITESPACE}]+{_TAIL}|[{WHITESPACE}]*[{_WS_NOT_NEWLINE}][^{WHITESPACE}]+{_TAIL}"
    f"|[{WHITESPACE}]+"
)
_LINES_LAST_BOUNDARY = re.compile(f"(?s:.*)(?:[^{WHITESPACE}](?=[{_WS_NOT_NEWLINE}])|[\r\n](?=[^{WHITESPACE}]))")


@lru_cache(maxsize=64)
def get(pattern: str) -> Pretokenizer:
    """The Pretokenizer of a pattern name, alias or custom regex (validated; see `canonical`)."""
    name = canonical(pattern)
    if pipelines.is_pipeline(name):
        pipeline = pipelines.get(name)
        if not pipeline.boundary:
            return Pretokenizer(name, None, None, None, None, None, pipeline)
        _, safe_cut_bytes, last_boundary = _boundary_regexes("cl100k")
        if pipeline.boundary == "lines":
            return Pretokenizer(name, None, None, _LINES_CHUNK_RE, safe_cut_bytes, _LINES_LAST_BOUNDARY, pipeline)
        return Pretokenizer(name, None, None, _PIPELINE_CHUNK_RE, safe_cut_bytes, last_boundary, pipeline)
    source = NAMED[name] if name in NAMED else name
    compiled = None if source is None else (regex.compile(source) if name in NAMED else _compile_custom(source))
    return Pretokenizer(name, source, compiled, *_boundary_regexes(name))
