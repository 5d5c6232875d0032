"""Measuring how a tokenizer cuts text: kinds of tokens, bytes and characters per token, and the
measures papers use (fertility, Rényi and Shannon efficiency, vocabulary use; see `TextStats` and
docs/looking-inside.md, "Measures"), with the plain-text table of `bpe stats`.

Bytes per token is the compression figure every command prints (`bpe train`, `encode`, `stats`,
`report`, the live page): the UTF-8 bytes of a text divided by the number of tokens `encode` gives
for it, a special token in the text counting as its bytes and one token; for one `.txt` file, the
file's size over the length of its token array. Each place says which text it measured and how big
it is (`on_text`), so two figures on the same text are the same number.
"""

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from cs336_basics.bpe import Tokenizer
from cs336_basics.text.surrogates import fix_surrogates

KINDS = {
    "word": "whole words (letters, maybe after a space)",
    "text": "other whole characters (digits, punctuation, space, mixed)",
    "partial": "part of one UTF-8 character",
    "crossing": "crossing a character boundary",
}


def classify_token(token: bytes) -> str:
    """'word', 'text' (whole characters), 'partial' (a piece of one UTF-8 character) or 'crossing'."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        lead = [b for b in token if b & 0xC0 != 0x80]
        if len(lead) <= 1 and (not lead or token[0] == lead[0]):
            return "partial"
        return "crossing"
    return "word" if text.lstrip(" ").isalpha() else "text"


_SPANNING = re.compile(r"\S\s+\S")


def spans_words(token: bytes) -> bool:
    """Whether a token holds whitespace between two other characters ("of the", "by the way"), as
    SuperBPE's superword tokens do; " the" or "the\n" do not. Bytes that are not UTF-8 count as
    other characters."""
    return _SPANNING.search(token.decode("utf-8", errors="replace")) is not None


# SuperBPE's released recipe makes no token of more than this many words (see `word_count`); the
# measures show the share of superword tokens that hold more.
SUPERWORD_MAX_WORDS = 4


def word_count(token: bytes) -> int:
    """The words of a token as SuperBPE's limit counts them: the non-empty parts between its spaces.

    >>> word_count(b" of the"), word_count(b"a  b:c"), word_count(b"   ")
    (2, 2, 0)
    """
    return len([w for w in token.split(b" ") if w])


RENYI_ALPHA = 2.5  # Zouhar et al. (2023) found this order of Rényi efficiency to track downstream quality best


@dataclass
class TextStats:
    """How a tokenizer cuts some text: its size in bytes, characters, tokens and whitespace-separated
    words, how many tokens each word overlaps, how often each token occurs, and kinds of tokens.

    The measures papers use are properties; see docs/looking-inside.md, "Measures", for their definitions and sources.
    """

    bytes: int = 0
    chars: int = 0
    tokens: int = 0
    kinds: Counter = field(default_factory=Counter)
    words: int = 0
    word_tokens: int = 0  # summed over words: the tokens that hold part of the word
    split_words: int = 0  # words that two or more tokens share
    counts: Counter = field(default_factory=Counter)  # token id -> occurrences
    vocab_size: int = 0
    spanning: int = 0  # tokens of the text that span words (see `spans_words`)
    spanning_vocab: int = 0  # tokens of the vocabulary that do
    many_words: int = 0  # tokens of the text of more than SUPERWORD_MAX_WORDS words (all of them span words)

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else 0.0

    @property
    def chars_per_token(self) -> float:
        return self.chars / self.tokens if self.tokens else 0.0

    @property
    def fertility(self) -> float:
        """Tokens per whitespace-separated word (a token shared by two words counts for both)."""
        return self.word_tokens / self.words if self.words else 0.0

    @property
    def split_share(self) -> float:
        """The share of words cut into two or more tokens."""
        return self.split_words / self.words if self.words else 0.0

    @property
    def spanning_share(self) -> float:
        """The share of the text's tokens that span words (superword tokens, see `spans_words`)."""
        return self.spanning / self.tokens if self.tokens else 0.0

    @property
    def many_words_share(self) -> float:
        """The share of the text's superword tokens (tokens spanning words) that hold more than
        `SUPERWORD_MAX_WORDS` words (see `word_count`): 0 for SuperBPE's released recipe."""
        return self.many_words / self.spanning if self.spanning else 0.0

    @property
    def shannon_efficiency(self) -> float:
        return efficiency(self.counts, self.vocab_size, 1.0)

    @property
    def renyi_efficiency(self) -> float:
        return efficiency(self.counts, self.vocab_size, RENYI_ALPHA)

    @property
    def vocab_used(self) -> float:
        """The share of the vocabulary that occurs at least once."""
        return len(self.counts) / self.vocab_size if self.vocab_size else 0.0

    @property
    def half_of_tokens(self) -> int:
        """How many of the most frequent tokens make up half of all tokens."""
        return tokens_for_share(self.counts, 0.5)

    def add(self, tokenizer: Tokenizer, text: str, ids: "Sequence[int] | None" = None) -> None:
        """Count `text` in, with its `ids`: what `tokenizer.encode(text)` gives (computed here when
        None; a caller may pass them from another engine, see `engines.encode_text`, which gives
        the same ids)."""
        text = fix_surrogates(text)  # as encode reads them, so that bytes and word offsets agree with the ids
        if ids is None:
            ids = tokenizer.encode(text)
        vocab = tokenizer.vocab
        self.bytes += len(text.encode("utf-8"))
        self.chars += len(text)
        self.tokens += len(ids)
        self.vocab_size = len(vocab)
        self.kinds.update(classify_token(vocab[i]) for i in ids)
        self.counts.update(ids)
        spanning, many_words = _spanning_ids(tokenizer)
        self.spanning += sum(map(spanning.__contains__, ids))
        self.many_words += sum(map(many_words.__contains__, ids)) if many_words else 0
        self.spanning_vocab = len(spanning)
        per_word = tokens_per_word(text, [len(vocab[i]) for i in ids])
        self.words += len(per_word)
        self.word_tokens += sum(per_word)
        self.split_words += sum(n >= 2 for n in per_word)

    def update(self, other: "TextStats") -> None:
        """Count in the text measured by `other` (with the same tokenizer)."""
        for name in ("bytes", "chars", "tokens", "words", "word_tokens", "split_words", "spanning", "many_words"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.kinds.update(other.kinds)
        self.counts.update(other.counts)
        self.vocab_size = other.vocab_size or self.vocab_size
        self.spanning_vocab = other.spanning_vocab or self.spanning_vocab


def _spanning_ids(tokenizer: Tokenizer) -> tuple[frozenset[int], frozenset[int]]:
    """The ids of the tokens of `tokenizer` that span words, and of those that hold more than
    `SUPERWORD_MAX_WORDS` words, found once per tokenizer."""
    found = _spanning_cache.get(id(tokenizer))
    if found is None or found[0] is not tokenizer:
        specials = {t.encode("utf-8") for t in tokenizer.special_tokens}
        ids = frozenset(i for i, t in tokenizer.vocab.items() if t not in specials and spans_words(t))
        many = frozenset(i for i in ids if word_count(tokenizer.vocab[i]) > SUPERWORD_MAX_WORDS)
        _spanning_cache.clear()  # one tokenizer at a time is the common case; keeps nothing alive for long
        _spanning_cache[id(tokenizer)] = found = (tokenizer, ids, many)
    return found[1], found[2]


_spanning_cache: dict[int, tuple[Tokenizer, frozenset[int], frozenset[int]]] = {}


def tokens_per_word(text: str, token_lengths: list[int]) -> list[int]:
    """For each whitespace-separated word of `text` (a run of non-whitespace), how many tokens hold
    at least one of its bytes, given the byte length of each token of `text` in order.

    >>> tokens_per_word("ab cd", [2, 1, 2])   # "ab", " ", "cd"
    [1, 1]
    >>> tokens_per_word("ab cd", [1, 2, 2])   # "a", "b ", "cd": "b " holds part of one word only
    [2, 1]
    """
    import numpy as np

    ends = np.cumsum(np.asarray(token_lengths, dtype=np.int64))
    starts, stops = [], []
    offset, last = 0, 0  # byte offset of character `last` of text
    for match in _WORD.finditer(text):
        offset += len(text[last : match.start()].encode("utf-8"))
        starts.append(offset)
        offset += len(match.group().encode("utf-8"))
        stops.append(offset)
        last = match.end()
    if not starts:
        return []
    # Token k spans bytes [ends[k-1], ends[k]); the first token to hold a word's bytes is the first
    # ending after its start, the last is the first ending at or after its end.
    first = np.searchsorted(ends, np.asarray(starts), side="right")
    final = np.searchsorted(ends, np.asarray(stops), side="left")
    return (final - first + 1).tolist()


_WORD = re.compile(r"\S+")


def efficiency(counts: Counter, vocab_size: int, alpha: float) -> float:
    """Rényi efficiency of order `alpha` of the token distribution: its Rényi entropy divided by the
    entropy of the uniform distribution over the vocabulary, log |V| (Zouhar et al., 2023). Order 1
    is Shannon's entropy. 1.0 when every token of the vocabulary is equally frequent."""
    total = sum(counts.values())
    if not total or vocab_size < 2:
        return 0.0
    probs = [n / total for n in counts.values() if n]
    if alpha == 1.0:
        entropy = -sum(p * math.log(p) for p in probs)
    else:
        entropy = math.log(sum(p**alpha for p in probs)) / (1 - alpha)
    return entropy / math.log(vocab_size)


def tokens_for_share(counts: Counter, share: float) -> int:
    """The fewest tokens, most frequent first, whose occurrences make up at least `share` of all."""
    total = sum(counts.values())
    done = 0
    for k, n in enumerate(sorted(counts.values(), reverse=True), start=1):
        done += n
        if done >= share * total:
            return k
    return 0


def size_label(size: int) -> str:
    """A size in bytes as people read it (powers of 1000): '870 bytes', '87.0 KB', '2.1 MB', '1.3 GB'."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size:,} bytes"


def on_text(text_bytes: int, tokens: int, name: str, part: str = "all") -> str:
    """Bytes per token (see the module's docstring) with the text it was measured on: `part` of it
    ("all", "the first", "the last") and its size, e.g. '3.41 bytes per token on all 87.0 KB of corpus.txt'."""
    figure = text_bytes / tokens if tokens else 0.0
    return f"{figure:.2f} bytes per token on {part} {size_label(text_bytes)} of {name}"


def measure_rows(columns: list[TextStats]) -> list[tuple[str, list[str]]]:
    """The measures papers use, one row each, formatted for each column (see docs/looking-inside.md, "Measures")."""
    return [
        ("tokens per word (fertility)", [f"{s.fertility:.2f}" for s in columns]),
        ("words cut in 2+ tokens (%)", [f"{100 * s.split_share:.2f}" for s in columns]),
        ("tokens spanning words (%)", [f"{100 * s.spanning_share:.2f}" for s in columns]),
        ("vocabulary spanning words", [f"{s.spanning_vocab:,}" for s in columns]),
        (f"superwords of {SUPERWORD_MAX_WORDS + 1}+ words (%)", [f"{100 * s.many_words_share:.2f}" for s in columns]),
        (f"Rényi efficiency (α = {RENYI_ALPHA})", [f"{s.renyi_efficiency:.3f}" for s in columns]),
        ("Shannon efficiency", [f"{s.shannon_efficiency:.3f}" for s in columns]),
        ("vocabulary used (%)", [f"{100 * s.vocab_used:.2f}" for s in columns]),
        ("tokens making half of all", [f"{s.half_of_tokens:,}" for s in columns]),
    ]


def stats_table(columns: list[tuple[str, TextStats]]) -> str:
    """A table with one column per tokenizer: tokens, bytes and characters per token, kinds (in %)."""
    rows = [
        ("tokens", [f"{s.tokens:,}" for _, s in columns]),
        ("bytes per token", [f"{s.bytes_per_token:.2f}" for _, s in columns]),
        ("characters per token", [f"{s.chars_per_token:.2f}" for _, s in columns]),
    ]
    for kind, label in KINDS.items():
        rows.append((f"% {label}", [f"{100 * s.kinds[kind] / max(s.tokens, 1):.2f}" for _, s in columns]))
    rows += measure_rows([s for _, s in columns])
    label_width = max(len(label) for label, _ in rows)
    widths = [max(len(name), *(len(values[i]) for _, values in rows)) for i, (name, _) in enumerate(columns)]
    lines = [" " * label_width + "".join(f"  {name:>{w}}" for (name, _), w in zip(columns, widths))]
    for label, values in rows:
        lines.append(f"{label:<{label_width}}" + "".join(f"  {v:>{w}}" for v, w in zip(values, widths)))
    return "\n".join(lines)
