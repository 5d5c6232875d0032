"""tiktoken's `Encoding` methods on our tokenizer, with tiktoken's meanings, so that code written for
tiktoken (nanoGPT's and llm.c's data preparation: `encode_ordinary`, `eot_token`, `n_vocab`,
`encode(..., allowed_special=...)`) takes a `bpe.Tokenizer` as it is; and the way to tiktoken
itself (`to_tiktoken`, `save_tiktoken`).

`TiktokenMethods` is a base class of `bpe.Tokenizer`, written against what `protocol.TokenizerLike`
names and the constructor it documents. Special tokens, in tiktoken's words:

- `encode(text)` with neither `allowed_special` nor `disallowed_special` keeps CS336's meaning:
  every special token in the text becomes its id (tiktoken's own default raises instead).
- With either given, tiktoken's rules: `allowed_special` ("all" or a set; default none) are the
  special tokens that become their ids; `disallowed_special` ("all", the default, meaning every
  special token not allowed, or a set of any strings) raise ValueError when the text holds one
  (the message's first line is tiktoken's); any other special token is encoded as the text it spells.
- `encode_ordinary(text)` is `encode(text, disallowed_special=())`: no special token at all.

A text is encoded with only some special tokens by a tokenizer like this one whose special tokens
are those allowed (same vocabulary, merges and ids), made once and kept (the last
`KEPT_VARIANTS`). Where special tokens overlap (one begins inside another), tiktoken tries them
in an order of its own and ours takes the longest, as `encode` always does.
"""

import functools
import os
from collections.abc import Collection, Iterable
from typing import Literal

from cs336_basics.text.pretokenize import special_token_regex

# What `allowed_special` and `disallowed_special` take; None means not given.
SpecialChoice = Literal["all"] | Collection[str] | None
ENDOFTEXT = "<|endoftext|>"  # tiktoken's `eot_token` is this special token's id
KEPT_VARIANTS = 8  # tokenizers with fewer special tokens kept per tokenizer (each ~0.1 s to build for GPT-2)


class TiktokenMethods:
    """tiktoken's `Encoding` methods, for a tokenizer with the fields below (see `protocol.TokenizerLike`)
    and the methods `encode`, `encode_batch` and `decode_bytes`."""

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    special_tokens: list[str]
    pattern: str
    cache_size: int
    added_tokens: dict[str, tuple[bool, bool]]
    post_processor: "dict | None"

    # --- encoding ---------------------------------------------------------------------------------

    def encode_ordinary(self, text: str) -> list[int]:
        """The ids of `text` with no special token: text spelling one is encoded as any other text
        (tiktoken's `encode_ordinary`, the same as `encode(text, disallowed_special=())`)."""
        return self._variant(frozenset()).encode(text)

    def encode_ordinary_batch(self, texts: Iterable[str], *, num_threads: int = 8) -> list[list[int]]:
        """`encode_ordinary` of each text, in order (tiktoken's). `num_threads` is taken so that
        tiktoken's calls run; the texts are encoded in this process (threads would not speed up
        pure Python; `encode_batch(..., num_workers=N)` runs processes)."""
        return self._variant(frozenset()).encode_batch(texts)

    def _choose_specials(
        self, texts: list[str], allowed_special: SpecialChoice, disallowed_special: SpecialChoice
    ) -> "TiktokenMethods":
        """The tokenizer that encodes `texts` as tiktoken's `encode` does with these arguments (None:
        tiktoken's default): this one, or one whose special tokens are those allowed. ValueError
        (see `disallowed_message`) for the first text holding a disallowed token (bpe.Tokenizer.encode
        and encode_batch call this when given either argument)."""
        specials = set(self.special_tokens)
        allowed = specials if _is_all(allowed_special) else _token_set(allowed_special or (), "allowed_special")
        if disallowed_special is None or _is_all(disallowed_special):
            disallowed = specials - allowed
        else:
            disallowed = _token_set(disallowed_special, "disallowed_special")
        if disallowed:
            search = _searcher(frozenset(disallowed))
            for text in texts:
                if isinstance(text, str) and (found := search(text)):
                    raise ValueError(disallowed_message(found.group()))
        return self._variant(frozenset(allowed & specials))

    def _encode_batch_choosing(
        self, texts: Iterable[str], allowed_special: SpecialChoice, disallowed_special: SpecialChoice, **options
    ) -> list[list[int]]:
        """`encode_batch` with tiktoken's `allowed_special` and `disallowed_special`: every text is
        checked, in order, before any is encoded."""
        if not isinstance(texts, str):  # a str is refused by encode_batch below
            texts = list(texts)
        variant = self._choose_specials([] if isinstance(texts, str) else texts, allowed_special, disallowed_special)
        return variant.encode_batch(texts, **options)

    def _variant(self, allowed: frozenset) -> "TiktokenMethods":
        """This tokenizer with only the special tokens in `allowed` (the others are text), for encoding:
        the ids of the others are not in its vocabulary."""
        if allowed == frozenset(self.special_tokens):
            return self
        variants = self.__dict__.setdefault("_tiktoken_variants", {})
        if allowed not in variants:
            if len(variants) >= KEPT_VARIANTS:
                del variants[next(iter(variants))]
            kept = [token for token in self.special_tokens if token in allowed]
            flags = {token: pair for token, pair in self.added_tokens.items() if token in allowed}
            # The tokens of the special tokens left out can come from no merge: leaving them out of
            # the vocabulary too keeps the ids ranks, so that tiktoken's engine can still run.
            made = {a + b for a, b in self.merges} | {bytes([b]) for b in range(256)}
            unused = {token.encode("utf-8") for token in self.special_tokens if token not in allowed} - made
            variants[allowed] = type(self)(
                {i: token for i, token in self.vocab.items() if token not in unused}, self.merges, kept,
                pattern=self.pattern, cache_size=self.cache_size, added_tokens=flags,
                post_processor=self.post_processor,
            )
        return variants[allowed]

    def encode_single_token(self, text_or_bytes: "str | bytes") -> int:
        """The id of the one token these bytes (or this text's UTF-8) are, a special token's
        included; KeyError when they are no token (tiktoken's)."""
        token = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else text_or_bytes
        return self._ids[token]

    # --- decoding ---------------------------------------------------------------------------------

    def decode_batch(
        self, batch: Iterable[Iterable[int]], *, errors: str = "replace", num_threads: int = 8
    ) -> list[str]:
        """The text of each sequence of ids, bytes that are not UTF-8 handled by `errors` (tiktoken's;
        `num_threads` as in `encode_ordinary_batch`)."""
        return [self.decode_bytes(ids).decode("utf-8", errors=errors) for ids in batch]

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one id, a special token's included; KeyError for an id not in the vocabulary
        (tiktoken's)."""
        return self.vocab[token]

    def decode_tokens_bytes(self, tokens: Iterable[int]) -> list[bytes]:
        """The bytes of each id, in order (tiktoken's): how a text was cut."""
        return [self.vocab[token] for token in tokens]

    # --- the vocabulary ---------------------------------------------------------------------------

    def token_byte_values(self) -> list[bytes]:
        """Every token's bytes but the special tokens', sorted (tiktoken's: its mergeable tokens)."""
        specials = {token.encode("utf-8") for token in self.special_tokens}
        return sorted(token for token in self.vocab.values() if token not in specials)

    @property
    def eot_token(self) -> int:
        """The id of the special token `<|endoftext|>` (tiktoken's); KeyError when this tokenizer
        does not have it as a special token."""
        try:
            return self._special_ids[ENDOFTEXT]
        except KeyError:
            shown = ", ".join(map(repr, self.special_tokens[:3])) + (", ..." if len(self.special_tokens) > 3 else "")
            raise KeyError(f"{ENDOFTEXT!r} is not a special token of this tokenizer (its special tokens: "
                           f"[{shown}]); tiktoken's eot_token is that token's id") from None

    @property
    def special_tokens_set(self) -> set[str]:
        """The special tokens, as a set (tiktoken's)."""
        return set(self.special_tokens)

    @functools.cached_property
    def max_token_value(self) -> int:
        """The largest id (tiktoken's)."""
        return max(self.vocab)

    @property
    def n_vocab(self) -> int:
        """The largest id plus one, as tiktoken counts (the number of tokens when the ids have no gaps)."""
        return self.max_token_value + 1

    @functools.cached_property
    def _ids(self) -> dict[bytes, int]:
        return {token: token_id for token_id, token in self.vocab.items()}

    @functools.cached_property
    def _special_ids(self) -> dict[str, int]:
        return {token: self._ids[token.encode("utf-8")] for token in self.special_tokens}

    # --- tiktoken itself --------------------------------------------------------------------------

    def to_tiktoken(self, *, name: str = "cs336"):
        """A `tiktoken.Encoding` giving our ids on any text (special tokens allowed with
        `allowed_special="all"`); ValueError when our ids cannot be tiktoken ranks."""
        from cs336_basics.formats import pretrained
        from cs336_basics.text import patterns

        patterns.regex_string(self.pattern)  # a pipeline is refused here, before the ranks are checked
        return pretrained.to_tiktoken(self.vocab, self.merges, self.special_tokens, self.pattern, name=name)

    def save_tiktoken(self, path: "str | os.PathLike") -> None:
        """Write our ids as a `.tiktoken` rank file (special tokens are not part of it), atomically;
        ValueError when the ids cannot be ranks (e.g. a vocabulary imported from Hugging Face)."""
        from cs336_basics.formats.tiktoken import ranks_from_vocab, save_ranks

        save_ranks(ranks_from_vocab(self.vocab, self.merges, self.special_tokens), path)


@functools.lru_cache(maxsize=64)
def _searcher(tokens: frozenset):
    """The `search` of a regex matching any of `tokens` (leftmost, then longest): built once per set,
    as code calls `encode` once per document."""
    return special_token_regex(tokens).search


def _is_all(choice: SpecialChoice) -> bool:
    return isinstance(choice, str) and choice == "all"


def _token_set(choice: Collection[str], name: str) -> set[str]:
    """`choice` as a set of str; TypeError for one str (other than "all") or an item that is not a str."""
    if isinstance(choice, (str, bytes)):
        raise TypeError(f'{name} takes "all" or a set of special tokens, not one {type(choice).__name__}: '
                        f"write {{{choice!r}}}")
    tokens = set(choice)
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"{name} takes special tokens as str, got {token!r} ({type(token).__name__})")
    return tokens


def disallowed_message(token: str) -> str:
    """The message for text holding a disallowed special token: its first line is tiktoken's (code
    matching it works with either), then what to pass instead."""
    return (
        f"Encountered text corresponding to disallowed special token {token!r}.\n"
        f"To encode it as the special token, allow it: allowed_special={{{token!r}}} (or \"all\"). "
        f"To encode it as text, leave it out of disallowed_special: disallowed_special=() for no check."
    )
