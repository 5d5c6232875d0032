"""Where a tokenizer comes from and goes to: pretrained names, tokenizer directories, other formats.

`load` takes what `Tokenizer.from_pretrained` takes; `save` writes a tokenizer directory:

    DIR/vocab.json       GPT-2's format (see `gpt2`), as `Tokenizer.save` writes it
    DIR/merges.txt       GPT-2's format, its first line naming the sha256 of the other two
    DIR/tokenizer.json   Hugging Face's format (see `hf`): the same vocabulary and merges, the
                         pre-tokenization pattern and the special tokens

The three files are written to temporary files first and renamed into place together. Loading a
directory reads its tokenizer.json, after checking that the three come from one save; a directory
without one (written by `Tokenizer.save`, or GPT-2's own files) has the GPT-2 pattern.

The pretrained encodings people know (GPT-2, GPT-3, Codex, GPT-4, GPT-4o) come through tiktoken.

Their rank files come from tiktoken's own loader, so they are read from its cache
(`TIKTOKEN_CACHE_DIR`, by default a folder in the temporary directory) or downloaded by it, with
its hash checks. tiktoken is an optional extra: `pip install 'cs336-basics[tiktoken]'`.

The merges are recovered from the ranks (`tiktoken.recover_merges`) and the ids are the
ranks, so encoding gives tiktoken's ids.
"""

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from cs336_basics.formats import gpt2, hf, staged
from cs336_basics.formats.tiktoken import load_ranks, ranks_from_vocab, recover_merges, vocab_from_ranks
from cs336_basics.text import patterns


@dataclass(frozen=True)
class Encoding:
    """What a tokenizer needs: ids -> bytes, merges in rank order, special tokens, pattern name."""

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    special_tokens: list[str]
    pattern: str


# tiktoken's names of the encodings we load. gpt2 and r50k_base are the same encoding; p50k_base adds
# tokens for runs of 2 to 25 spaces. Each name is also the name of its pattern (see `patterns`).
NAMES = ("gpt2", "r50k_base", "p50k_base", "cl100k_base", "o200k_base")


def _tiktoken():
    try:
        import tiktoken
    except ImportError:
        raise ImportError(
            "the pretrained encodings are read through tiktoken, which is not installed: "
            "pip install 'cs336-basics[tiktoken]' (or pip install tiktoken)"
        ) from None
    return tiktoken


# Recovering the merges of o200k_base takes seconds: done once per process and name.
_recovered: dict[str, Encoding] = {}


def load_encoding(name: str) -> Encoding:
    """The encoding `name` (one of `NAMES`), with tiktoken's ranks as ids and its special tokens.

    The result is shared between calls: do not change its dict and list.
    """
    if name not in NAMES:
        raise ValueError(f"unknown pretrained encoding {name!r}; known: {', '.join(NAMES)}")
    if name not in _recovered:
        _recovered[name] = _load_encoding(name)
    return _recovered[name]


def _load_encoding(name: str) -> Encoding:
    tiktoken = _tiktoken()
    try:
        encoding = tiktoken.get_encoding(name)
    except Exception as e:  # tiktoken reports a failed download or a bad hash in many ways
        raise ValueError(
            f"cannot get the rank file of {name} through tiktoken ({type(e).__name__}: {e}); it downloads "
            "it once into TIKTOKEN_CACHE_DIR, so set that to a folder holding it when offline"
        ) from None
    ranks = encoding._mergeable_ranks
    specials = dict(encoding._special_tokens)
    return Encoding(
        vocab=vocab_from_ranks(ranks, specials),
        merges=recover_merges(ranks, source=name),
        special_tokens=list(specials),
        pattern=patterns.canonical(name),
    )


def _special_ids(special_tokens: "list[str] | dict[str, int] | None", next_id: int) -> dict[str, int]:
    if special_tokens is None:
        return {}
    if isinstance(special_tokens, dict):
        return dict(special_tokens)
    if isinstance(special_tokens, (str, bytes)):
        raise ValueError(f"special_tokens must be a list or a dict, not one string: write [{special_tokens!r}]")
    return {token: next_id + n for n, token in enumerate(special_tokens)}


def load(
    name_or_path: "str | os.PathLike",
    *,
    pattern: str | None = None,
    special_tokens: "list[str] | dict[str, int] | None" = None,
    sha256: str | None = None,
) -> Encoding:
    """What `Tokenizer.from_pretrained` loads (see there); ValueError naming the file on bad input.

    `special_tokens` given for a directory or tokenizer.json replace the file's own.
    """
    if isinstance(name_or_path, str) and name_or_path in NAMES:
        if pattern is not None or special_tokens is not None or sha256 is not None:
            raise ValueError(f"{name_or_path} brings its own pattern and special tokens; give neither")
        return load_encoding(name_or_path)
    path = Path(name_or_path)
    if not path.exists():
        raise FileNotFoundError(
            f"no tokenizer at {path}: expected a folder, a tokenizer.json, a .tiktoken file "
            f"or one of the names {', '.join(NAMES)}"
        )
    if path.suffix == ".tiktoken" or path.name.endswith(".tiktoken.gz"):
        ranks = load_ranks(path, expected_sha256=sha256)
        specials = _special_ids(special_tokens, max(ranks.values()) + 1)
        try:
            vocab = vocab_from_ranks(ranks, specials)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        merges = recover_merges(ranks, source=str(path))
        return Encoding(vocab, merges, list(specials), pattern or "gpt2")
    if sha256 is not None:
        raise ValueError("sha256 is checked for .tiktoken files only")
    if path.is_dir() and not (path / "tokenizer.json").is_file():
        vocab_path, merges_path = path / "vocab.json", path / "merges.txt"
        for p in (vocab_path, merges_path):
            if not p.is_file():
                raise FileNotFoundError(f"no tokenizer.json and no {p.name} in {path}")
        specials = list(special_tokens or [])
        vocab, merges = gpt2.load_vocab_and_merges(vocab_path, merges_path, specials)
        return Encoding(vocab, merges, specials, pattern or "gpt2")
    json_path = path / "tokenizer.json" if path.is_dir() else path
    if path.is_dir():
        _check_same_save(path)
    vocab, merges, specials, own_pattern = hf.parse_tokenizer_json(json_path.read_bytes(), source=str(json_path))
    if pattern is not None and patterns.canonical(pattern) != own_pattern:
        raise ValueError(f"{json_path} has the pattern {own_pattern!r}; it cannot be loaded with pattern={pattern!r}")
    if special_tokens is not None:
        specials = list(special_tokens)
    return Encoding(vocab, merges, specials, own_pattern)


def _check_same_save(directory: Path) -> None:
    """Refuse a directory whose files come from different saves: merges.txt names the sha256 of
    the others (a SIGKILL between the renames of a save is the only way to get there)."""
    merges_path = directory / "merges.txt"
    if not merges_path.is_file():
        return
    for name, digest in gpt2.companion_hashes(merges_path).items():
        other = directory / name
        if other.is_file() and hashlib.sha256(other.read_bytes()).hexdigest() != digest:
            raise ValueError(
                f"{merges_path} was written with another {name} than {other} (an interrupted save?); save again"
            )


def save(
    directory: "str | os.PathLike",
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str],
    pattern: str,
    *,
    extra_files: dict[str, str] | None = None,
) -> None:
    """Write the tokenizer directory (see the module docstring), creating it if needed (only when
    writing: a failed save leaves no empty folder), with any `extra_files` (name -> text) in the same
    atomic write."""
    directory = Path(directory)
    hf_text = hf.tokenizer_json(vocab, merges, special_tokens, pattern)
    vocab_text, merges_text = gpt2.vocab_and_merges_texts(
        vocab, merges, special_tokens, companions={"tokenizer.json": hf_text}
    )
    texts = {"vocab.json": vocab_text, "merges.txt": merges_text, "tokenizer.json": hf_text, **(extra_files or {})}
    staged.atomic_write_texts({directory / name: text for name, text in texts.items()})


def to_tiktoken(
    vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: list[str], pattern: str, *, name: str
):
    """A `tiktoken.Encoding` with our ids as ranks, our pattern and special tokens (see
    `Tokenizer.to_tiktoken`)."""
    tiktoken = _tiktoken()
    ranks = ranks_from_vocab(vocab, merges, special_tokens)
    ids = {token: token_id for token_id, token in vocab.items()}
    regex_source = patterns.regex_string(pattern)
    if regex_source is None:  # "none": each document is one piece
        regex_source = r"[\s\S]+"
    return tiktoken.Encoding(
        name=name,
        pat_str=regex_source,
        mergeable_ranks=ranks,
        special_tokens={token: ids[token.encode("utf-8")] for token in special_tokens},
    )

