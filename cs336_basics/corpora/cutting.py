"""Cutting a text file into pieces that can be processed apart.

A *safe cut* is a byte offset where cutting the file changes neither the documents nor the
pre-tokens: the start of a special token, or a safe boundary of the pattern between two ASCII
characters (see `patterns`; for GPT-2, the start of an ASCII whitespace run that follows an ASCII
non-whitespace character) — in both cases only when no occurrence of any special token spans the
offset. A pattern without a safe boundary (a custom regex, or "none") is cut at special tokens only. Every piece between safe
cuts therefore yields exactly the pre-tokens that the whole file yields there, so the counts, and the
merges learned from them, do not depend on how the file is cut or how many processes count it.
"""

import os
import re
from collections.abc import Iterator
from pathlib import Path

from cs336_basics.text import patterns
from cs336_basics.text.pretokenize import spanned_by_special

# GPT-2's: a non-whitespace ASCII byte followed by an ASCII whitespace byte: cut after the first.
_WS_BOUNDARY = patterns.get("gpt2").safe_cut_bytes

SEARCH_WINDOW = 1 << 16
FIRST_WINDOW = 1 << 10


def _safe_cuts_in(
    window: bytes, lo: int, specials: list[bytes], boundary: re.Pattern[bytes] | None
) -> Iterator[int]:
    """Candidate cut offsets in `window[lo:]`, in increasing order, not yet checked for coverage."""
    candidates = [m.end() for m in boundary.finditer(window, max(lo - 1, 0))] if boundary is not None else []
    for s in specials:
        i = window.find(s, lo)
        while i != -1:
            candidates.append(i)
            i = window.find(s, i + 1)
    return iter(sorted(c for c in set(candidates) if c >= lo))



def find_safe_cut(
    f, target: int, stop: int, specials: list[bytes], boundary: re.Pattern[bytes] | None = _WS_BOUNDARY
) -> int:
    """The first safe cut c with target <= c < stop in the open binary file `f`; `stop` if there is none.

    `stop` must be a safe cut itself or the end of the file. `boundary` finds the byte before each
    safe boundary of the pattern (`Pretokenizer.safe_cut_bytes`; GPT-2's by default, None for none).
    """
    margin = max((len(s) for s in specials), default=1)
    f.seek(0, os.SEEK_END)
    size = f.tell()
    pos = max(target, 1)
    span = min(FIRST_WINDOW, SEARCH_WINDOW)  # most cuts are a few bytes away: look near first
    while pos < stop:
        start = max(pos - margin, 0)
        f.seek(start)
        window = f.read(span + 2 * margin)
        span = SEARCH_WINDOW
        at_eof = start + len(window) >= size
        # A candidate needs `margin` bytes after it in the window, to see any special token spanning it.
        limit = len(window) if at_eof else len(window) - margin
        for c in _safe_cuts_in(window, pos - start, specials, boundary):
            if c >= limit or start + c >= stop:
                break
            if not spanned_by_special(window, c, specials):
                return start + c
        if at_eof:
            break
        pos = start + limit
    return stop


def read_text(f, path, start: int, end: int) -> str:
    """Decode bytes [start, end) of the open file as UTF-8, naming the offset of any bad byte."""
    f.seek(start)
    data = f.read(end - start)
    if len(data) != end - start:
        raise ValueError(f"{path}: the file ended at byte {start + len(data):,}, before the expected {end:,}: "
                         "did it change while being read?")
    return decode_utf8(data, path, start)


def decode_utf8(data: bytes, path, offset: int, where: str = "") -> str:
    """`data`, read from `path` at byte `offset`, decoded as UTF-8; ValueError naming the offset of
    any bad byte (and `where`, e.g. "of the decompressed text")."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path}: not valid UTF-8 at byte offset {offset + e.start}{' ' + where if where else ''} "
            f"({e.reason}); convert the file to UTF-8 first"
        ) from None


def file_size(path: str | os.PathLike) -> int:
    """The size of a readable regular file; raises the OS error (with the path) otherwise."""
    p = Path(path)
    with open(p, "rb"):
        pass
    if p.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(p))
    return p.stat().st_size
