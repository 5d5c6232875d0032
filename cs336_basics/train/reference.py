"""The reference trainer: byte-level BPE as plainly as it can be written, and its definition.

Every fast path of the trainer (parallel counting, the pair index and queue, shards, long words,
forced merges) is tested against this module and must give exactly its merges; docs/behaviour.md
states the rules in words. It recounts every pair at every step: to train, use `bpe.train_bpe`.
"""

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import regex

from cs336_basics.text import patterns

Pair = tuple[bytes, bytes]


def split_documents(text: str, special_tokens: Sequence[str]) -> list[str]:
    """The text between special tokens, which are matched literally, longest first, and dropped."""
    longest_first = sorted(special_tokens, key=len, reverse=True)
    return regex.split("|".join(map(regex.escape, longest_first)), text) if special_tokens else [text]


def pretokens(document: str, pattern: str = "gpt2") -> list[str]:
    """The pre-tokens of one document; `pattern` is a name ("gpt2", "none", ...) or a regex."""
    source = patterns.regex_string(pattern) or r"[\s\S]+"  # "none": the whole document is one pre-token
    return regex.findall(source, document)


def count_pretokens(text: str, special_tokens: Sequence[str], pattern: str = "gpt2") -> Counter[bytes]:
    """How often each pre-token occurs in `text`, as UTF-8 bytes."""
    documents = split_documents(text, special_tokens)
    return Counter(piece.encode("utf-8") for document in documents for piece in pretokens(document, pattern))


def merge_word(word: tuple[bytes, ...], pair: Pair) -> tuple[bytes, ...]:
    """`word` with each occurrence of `pair` joined into one token, left to right, never overlapping."""
    out, i = [], 0
    while i < len(word):
        joined = word[i : i + 2] == pair
        out.append(pair[0] + pair[1] if joined else word[i])
        i += 2 if joined else 1
    return tuple(out)


def learn_merges(word_counts: Mapping[bytes, int], num_merges: int, forced: Sequence[Pair] = (),
                 allows: Callable[[bytes], bool] | None = None) -> tuple[list, list]:
    """Up to `num_merges` merges learned from pre-token counts, the first ones `forced` (made as a
    chosen merge is, whatever their count), and per merge the chosen pair's count and the corpus's
    length in tokens after it. With `allows` (SuperBPE's limits), only pairs whose joined token it
    allows are chosen (the forced ones are not tested). Stops early when no pair is left."""
    words = {tuple(bytes([b]) for b in word): n for word, n in word_counts.items()}
    merges, log = [], []
    while len(merges) < num_merges:
        pairs: Counter[Pair] = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):  # overlapping: (a, a, a) holds (a, a) twice
                pairs[pair] += n
        if allows is not None and len(merges) >= len(forced):
            pairs = Counter({pair: n for pair, n in pairs.items() if allows(pair[0] + pair[1])})
        if len(merges) < len(forced):
            best = forced[len(merges)]
        elif not pairs:
            break
        else:  # the most frequent pair; a tie goes to the greatest (left bytes, right bytes)
            best = max(pairs, key=lambda pair: (pairs[pair], pair))
        words = {merge_word(word, best): n for word, n in words.items()}
        merges.append(best)
        log.append((pairs[best], sum(len(word) * n for word, n in words.items())))
    return merges, log


def train_bpe_reference(text: str, vocab_size: int, special_tokens: Sequence[str], pattern: str = "gpt2",
                        *, merge_log: list | None = None) -> tuple[dict[int, bytes], list[Pair]]:
    """`(vocab, merges)` as `bpe.train_bpe` gives them for a file holding `text`: ids 0-255 are the
    bytes, then one per merge in order, then the special tokens; `merge_log` receives the log."""
    num_merges = vocab_size - 256 - len(special_tokens)
    merges, log = learn_merges(count_pretokens(text, special_tokens, pattern), num_merges)
    if merge_log is not None:
        merge_log.extend(log)
    tokens = [bytes([b]) for b in range(256)] + [left + right for left, right in merges]
    return dict(enumerate(tokens + [token.encode("utf-8") for token in special_tokens])), merges
