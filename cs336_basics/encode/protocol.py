"""What `encode/` and `datasets/` need of a tokenizer, written down once: `TokenizerLike`.

`bpe.Tokenizer` is the one implementation; the packages below the face cannot import it (imports
flow up to it, not down from it), so they take any object of this shape. Workers rebuild one from
`token_arrays.tokenizer_state`: its class called as `cls(vocab, merges, special_tokens,
pattern=..., cache_size=..., added_tokens=..., post_processor=...)` (the last two only when set).
"""

from typing import Protocol

from cs336_basics.encode.encoder import EncodeCache


class TokenizerLike(Protocol):
    """A byte-level BPE tokenizer, as the corpus encoders and dataset writers use it."""

    vocab: dict[int, bytes]  # id -> token bytes, the special tokens included
    merges: list[tuple[bytes, bytes]]  # in rank order
    special_tokens: list[str]  # the first one separates documents
    pattern: str  # canonical (see `text.patterns.canonical`)
    packed_dtype: str  # "=u2" or "=u4": how `encode_packed` packs ids
    cache_size: int  # entries per generation of `cache`
    # The special tokens before which a text may be cut, each side encoded alone (work units are
    # planned with them).
    cut_tokens: list[str]
    cache: EncodeCache  # learns and shares the words it encodes (see `token_arrays`)
    # A tokenizer.json's added-token flags and post-processor (see `formats.definition`): workers
    # rebuild the tokenizer with them, and a dataset's identity covers them.
    added_tokens: dict[str, tuple[bool, bool]]
    post_processor: "dict | None"

    def encode(self, text: str) -> list[int]:
        """The ids of `text`, special tokens in it becoming their ids."""
        ...

    def encode_packed(self, text: str) -> bytes:
        """The ids of `encode(text)` packed as native unsigned ints of `packed_dtype`."""
        ...
