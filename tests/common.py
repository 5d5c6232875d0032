"""Paths and helpers shared by the tests (the names CS336's own tests use)."""

import pathlib
from functools import lru_cache

FIXTURES_PATH = (pathlib.Path(__file__).resolve().parent) / "fixtures"


@lru_cache
def gpt2_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table from each byte to a printable character, computed from its definition.

    Printable Latin-1 bytes stand for themselves; the remaining 68 bytes map, in byte order, to the
    code points 256, 257, ... (so the space becomes 'Ġ').
    """
    keep = [b for b in range(256) if chr(b).isprintable() and chr(b) != " " and b != 0xAD]
    table = {b: chr(b) for b in keep}
    for n, b in enumerate(b for b in range(256) if b not in table):
        table[b] = chr(256 + n)
    return table
