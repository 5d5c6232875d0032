"""Where each token sits in the text, in characters: tiktoken's `decode_with_offsets` and Hugging
Face's `Encoding.offsets`, on our `Tokenizer` (which inherits `OffsetMethods`).

Both count Unicode characters (code points, Python's `str` indices), not bytes. A byte-level token
need not hold whole characters: a character of 2 to 4 UTF-8 bytes may be split between tokens. Then
a token is placed on the characters its bytes belong to: its start is the index of the character
holding its first byte, its end one past the character holding its last byte. So every token that
holds part of a character spans that whole character, and tokens may share a character; a token of
whole characters spans exactly them. In UTF-8 a byte `0x80`-`0xBF` continues a character and every
other byte begins one, which is all the counting needs (tiktoken counts the same way).
"""

import codecs
from collections.abc import Iterable, Sequence

from cs336_basics.formats.hf import template_ids
from cs336_basics.text.surrogates import fix_surrogates

_CONTINUATION = bytes(range(0x80, 0xC0))  # the bytes that continue a UTF-8 character
_CONTINUATION_SET = frozenset(bytes([b]) for b in _CONTINUATION)  # the same, as 1-byte strings


def token_spans(tokens: Iterable[bytes]) -> list[tuple[int, int]]:
    """Each token's `(start, end)` in the characters of the text that the tokens' bytes make
    together, which must be valid UTF-8 (see the module's docstring for a token holding part of a
    character). Start is tiktoken's offset, end as Hugging Face's.

    >>> token_spans([b"h\\xc3", b"\\xa9", b"llo"])  # "héllo", é split in two
    [(0, 2), (1, 2), (2, 5)]
    """
    spans = []
    chars = 0  # characters begun so far
    for token in tokens:
        start = chars - (token[:1] in _CONTINUATION_SET)  # it starts inside the last character begun
        chars += len(token.translate(None, _CONTINUATION))
        spans.append((start, chars))
    return spans


def replaced_offsets(tokens: Sequence[bytes]) -> tuple[str, list[int]]:
    """The text of the tokens' bytes decoded with `errors="replace"` (each maximal invalid sequence
    becomes one U+FFFD, as Python does), and each token's start in it: the index of the character
    holding its first byte, a U+FFFD holding the bytes it replaces."""
    data = b"".join(tokens)
    char_of_byte = [0] * len(data)
    pieces, chars, at = [], 0, 0
    view = memoryview(data)
    while at < len(data):
        try:
            text, _ = codecs.utf_8_decode(view[at:], "strict", True)
            end, bad = len(data), None
        except UnicodeDecodeError as e:
            text, _ = codecs.utf_8_decode(view[at:at + e.start], "strict", True)
            end, bad = at + e.start, at + e.end
        pieces.append(text)
        for position in range(at, end):
            chars += data[position] not in _CONTINUATION
            char_of_byte[position] = chars - 1
        at = end
        if bad is not None:
            pieces.append("\ufffd")
            char_of_byte[end:bad] = [chars] * (bad - end)
            chars += 1
            at = bad
    starts, at = [], 0
    for token in tokens:
        starts.append(char_of_byte[at])  # every token has a byte
        at += len(token)
    return "".join(pieces), starts


def _original_index(text: str) -> list[int]:
    """For each character of `fix_surrogates(text)`, and for its end, the index in `text` where it
    starts: a surrogate pair is one character there and two here."""
    index, i = [], 0
    while i < len(text):
        index.append(i)
        pair = "\ud800" <= text[i] <= "\udbff" and i + 1 < len(text) and "\udc00" <= text[i + 1] <= "\udfff"
        i += 2 if pair else 1
    index.append(len(text))
    return index


class OffsetMethods:
    """`decode_with_offsets` and `encode_with_offsets`, for `Tokenizer` (which gives `encode`,
    `decode_bytes`, `vocab` and `post_processor`)."""

    def decode_with_offsets(self, ids: Iterable[int], *, errors: str = "strict") -> tuple[str, list[int]]:
        """The text of `ids` and each token's start in it as a character index, as tiktoken's
        `decode_with_offsets`: a token that starts inside a character (its first byte continues one
        begun by an earlier token) gets that character's index.

        Bytes that are not valid UTF-8 raise `UnicodeDecodeError`, as in tiktoken (whose offsets
        are defined only for valid text); `errors="replace"` decodes them as `decode` does instead,
        each invalid sequence one U+FFFD, and a token starting among the bytes a U+FFFD replaces
        gets its index. Ids not in the vocabulary raise ValueError as in `decode`.

        >>> tok.decode_with_offsets(tok.encode("hello world"))  # doctest: +SKIP
        ('hello world', [0, 5])
        """
        if errors not in ("strict", "replace"):
            raise ValueError(f'errors must be "strict" or "replace", got {errors!r}')
        if getattr(ids, "ndim", None) == 0:
            self.decode_bytes(ids)  # refuses a 0-d array, saying how to pass one id
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        data = self.decode_bytes(ids)  # checks the ids
        tokens = [self.vocab[i] for i in ids]
        if errors == "replace":
            return replaced_offsets(tokens)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            reason = f"{e.reason}; errors=\"replace\" decodes it as U+FFFD"
            raise UnicodeDecodeError("utf-8", data, e.start, e.end, reason) from None
        return text, [start for start, _ in token_spans(tokens)]

    def encode_with_offsets(
        self, text: str, *, add_special_tokens: bool = False
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """`(ids, spans)`: the ids of `encode(text)` and each token's `(start, end)` character span
        in `text`, as Hugging Face's `Encoding.offsets` on the tokenizer.json `save_pretrained`
        writes, which trims none: `text[start:end]` is what the token encodes. (Under a ByteLevel
        post-processor with `trim_offsets` on, Hugging Face leaves a token's leading spaces out of
        its span; spans here are never trimmed.) A token holding only part of a character (a
        byte-level BPE may split one between tokens) spans that whole character, so such tokens
        share a span; a special token spans its text. The tokens that `add_special_tokens=True`
        adds (see `encode`) span `(0, 0)`, as in Hugging Face.

        Indices are into `text` as given: a surrogate pair (one character to `encode`) spans both
        its halves, a lone surrogate (encoded as U+FFFD) itself. ValueError for a tokenizer whose
        normalizer changes `text` (the tokens then encode other characters; not supported).

        >>> tok.encode_with_offsets("hello world")  # doctest: +SKIP
        ([31373, 995], [(0, 5), (5, 11)])
        """
        if not isinstance(text, str):
            raise TypeError(f"encode_with_offsets takes a str, got {type(text).__name__}")
        valid = fix_surrogates(text)
        ids = self.encode(valid)
        tokens = [self.vocab[i] for i in ids]
        if b"".join(tokens) != valid.encode("utf-8"):
            raise ValueError("encode_with_offsets: this tokenizer's normalizer changes the text, so its tokens "
                             "are not spans of it (not supported); normalize the text first as the tokenizer does "
                             "(e.g. unicodedata.normalize(\"NFC\", text)) and take the offsets in that")
        spans = token_spans(tokens)
        if valid is not text:
            index = _original_index(text)
            spans = [(index[start], index[end]) for start, end in spans]
        if add_special_tokens:
            before, after = template_ids(self.post_processor)
            ids = [*before, *ids, *after]
            spans = [(0, 0)] * len(before) + spans + [(0, 0)] * len(after)
        return ids, spans
