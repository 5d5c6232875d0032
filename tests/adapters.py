"""The seam between CS336-style tests and this implementation; imports only from cs336_basics."""

from __future__ import annotations

import os
from typing import Any

from cs336_basics.bpe import Tokenizer, train_bpe


def get_tokenizer(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str] | None = None,
) -> Any:
    """A tokenizer for the given vocabulary, merges and special tokens."""
    return Tokenizer(vocab, merges, special_tokens)


def run_train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: list[str],
    **kwargs,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE tokenizer on the file; returns (vocab, merges)."""
    return train_bpe(input_path, vocab_size, special_tokens, **kwargs)
