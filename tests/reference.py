"""Slow, obviously correct twins of the trainer and the encoder, written straight from SPEC.md.

Run `uv run python -m tests.reference` to rewrite the reference files in tests/fixtures/reference/.

They recount everything at every step and share no code with `cs336_basics`, so the fast paths can
be checked against them on generated input.
"""

from collections import Counter

import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def split_documents(text: str, special_tokens: list[str]) -> list[str]:
    """Cut text at special tokens (longest first), dropping them."""
    if not special_tokens:
        return [text]
    pattern = "|".join(regex.escape(t) for t in sorted(special_tokens, key=len, reverse=True))
    return regex.split(pattern, text)


def reference_pretokens(document: str, pattern: str | None = GPT2_PATTERN) -> list[str]:
    """The pre-tokens of one document: the regex's matches, or the whole document when `pattern` is None."""
    if pattern is None:
        return [document] if document else []
    return regex.findall(pattern, document)


def reference_train_bpe(
    text: str,
    vocab_size: int,
    special_tokens: list[str],
    pattern: str | None = GPT2_PATTERN,
    *,
    merge_log: list[tuple[int, int]] | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train BPE on `text` exactly as SPEC.md says, recounting every pair at every step.

    `pattern` is the pre-tokenization regex (its source, not a name), or None for no pre-tokenization.
    A `merge_log` list receives, per merge, the pair's count and the corpus length in tokens after it.
    """
    words: Counter[tuple[bytes, ...]] = Counter()
    for document in split_documents(text, special_tokens):
        for pretoken in reference_pretokens(document, pattern):
            words[tuple(bytes([b]) for b in pretoken.encode("utf-8"))] += 1

    vocab = {i: bytes([i]) for i in range(256)}
    merges: list[tuple[bytes, bytes]] = []
    while len(vocab) + len(special_tokens) < vocab_size:
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):  # overlapping: b"aaa" holds (a, a) twice
                pairs[pair] += n
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair))  # ties: the greatest (left, right)
        merges.append(best)
        vocab[len(vocab)] = best[0] + best[1]
        words = Counter({merge_word(word, best): n for word, n in words.items()})
        if merge_log is not None:
            merge_log.append((pairs[best], sum(len(word) * n for word, n in words.items())))
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges


def merge_word(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    """Replace the non-overlapping occurrences of `pair` in `word`, left to right."""
    out = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def reference_train_from_counts(
    word_counts: dict[bytes, int], num_merges: int
) -> tuple[list[tuple[bytes, bytes]], list[tuple[int, int]]]:
    """Merges learned from pre-token counts, and the merge log: for each merge, the chosen pair's
    count and the corpus length in tokens after it (see SPEC's Merge log)."""
    words = Counter({tuple(bytes([b]) for b in w): n for w, n in word_counts.items()})
    merges: list[tuple[bytes, bytes]] = []
    log: list[tuple[int, int]] = []
    for _ in range(num_merges):
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += n
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        words = Counter({merge_word(w, best): n for w, n in words.items()})
        merges.append(best)
        log.append((pairs[best], sum(len(w) * n for w, n in words.items())))
    return merges, log


def reference_words(text: str, special_tokens: list[str], pretokens=reference_pretokens) -> Counter:
    """The pre-tokens of `text` as tuples of single bytes, with their counts; `pretokens(document)`
    cuts one document (GPT-2's pattern by default)."""
    words: Counter[tuple[bytes, ...]] = Counter()
    for document in split_documents(text, special_tokens):
        for pretoken in pretokens(document):
            words[tuple(bytes([b]) for b in pretoken.encode("utf-8"))] += 1
    return words


def reference_forced_merges(
    words: Counter, num_merges: int, forced: list[tuple[bytes, bytes]] = ()
) -> list[tuple[bytes, bytes]]:
    """SPEC's "Training from what exists": the first merges are `forced` (made as a chosen merge is,
    counted or not), then the usual rule chooses, recounting every pair at every step."""
    merges: list[tuple[bytes, bytes]] = []
    while len(merges) < num_merges:
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += n
        if len(merges) < len(forced):
            best = forced[len(merges)]
        elif not pairs:
            break
        else:
            best = max(pairs, key=lambda pair: (pairs[pair], pair))
        merges.append(best)
        words = Counter({merge_word(word, best): n for word, n in words.items()})
    return merges


def reference_superbpe_pretokens(document: str) -> list[str]:
    """SuperBPE's stage-2 pieces, from their definition and without a regex: each run of numeric
    characters (Unicode category N*) is cut before every position from which a run of decimal
    digits (Nd) of a length divisible by three reaches a character that is not one; the rest of the
    text, spaces included, is cut only where such runs begin and end."""
    import unicodedata

    numeric = [unicodedata.category(c).startswith("N") for c in document]
    digit = [unicodedata.category(c) == "Nd" for c in document]
    pieces: list[str] = []
    start = 0
    for i in range(1, len(document) + 1):
        if i == len(document) or numeric[i] != numeric[i - 1]:
            cut = True
        elif numeric[i]:
            run = 0
            while i + run < len(document) and digit[i + run]:
                run += 1
            cut = run > 0 and run % 3 == 0
        else:
            cut = False
        if cut:
            pieces.append(document[start:i])
            start = i
    return pieces


def reference_superbpe(
    text: str, vocab_size: int, special_tokens: list[str], transition: int, pretokens=reference_pretokens
) -> list[tuple[bytes, bytes]]:
    """SuperBPE's merges: stage 1 trains to vocabulary size `transition` with `pretokens`; stage 2
    cuts the text again into `reference_superbpe_pretokens`, forces the stage-1 merges and goes on."""
    extra = 256 + len(special_tokens)
    stage1 = reference_forced_merges(reference_words(text, special_tokens, pretokens), transition - extra)
    words = reference_words(text, special_tokens, reference_superbpe_pretokens)
    return reference_forced_merges(words, vocab_size - extra, stage1)


def reference_encode(
    text: str,
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str],
    pattern: str | None = GPT2_PATTERN,
) -> list[int]:
    """Encode as SPEC.md says: specials (longest first), pre-tokens (GPT-2's by default; see
    `reference_pretokens`), merges lowest rank first."""
    ids = {token: i for i, token in vocab.items()}
    rank = merge_ranks(merges)
    out: list[int] = []
    if special_tokens:
        specials = "(" + "|".join(regex.escape(t) for t in sorted(special_tokens, key=len, reverse=True)) + ")"
        parts = regex.split(specials, text)
    else:
        parts = [text]
    for i, part in enumerate(parts):
        if i % 2:
            out.append(ids[part.encode("utf-8")])
            continue
        for pretoken in reference_pretokens(part, pattern):
            out.extend(ids[token] for token in reference_bpe(pretoken.encode("utf-8"), rank))
    return out


def merge_ranks(merges: list[tuple[bytes, bytes]]) -> dict[tuple[bytes, bytes], int]:
    """Each merge's rank, its first position in the list."""
    return {pair: r for r, pair in reversed(list(enumerate(merges)))}


def reference_bpe(data: bytes, rank: dict[tuple[bytes, bytes], int]) -> tuple[bytes, ...]:
    """The tokens of one pre-token: merge the lowest-ranked adjacent pair (see `merge_ranks`),
    leftmost first, until no pair is a merge."""
    word = tuple(bytes([b]) for b in data)
    while len(word) > 1:
        candidates = [pair for pair in zip(word, word[1:]) if pair in rank]
        if not candidates:
            break
        word = merge_word(word, min(candidates, key=rank.__getitem__))
    return word


def write_gpt2_files(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], vocab_path, merges_path) -> None:
    """Write vocab.json and merges.txt in the GPT-2 format (byte-to-unicode spelling), simply."""
    import json

    from tests.common import gpt2_bytes_to_unicode

    table = gpt2_bytes_to_unicode()

    def spell(token: bytes) -> str:
        return "".join(table[b] for b in token)

    with open(vocab_path, "w", encoding="utf-8") as f:
        json.dump({spell(token): i for i, token in vocab.items()}, f, ensure_ascii=False, indent=1)
    with open(merges_path, "w", encoding="utf-8") as f:
        f.writelines(f"{spell(a)} {spell(b)}\n" for a, b in merges)


def read_gpt2_files(vocab_path, merges_path) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Read what `write_gpt2_files` writes (the way CS336's tests read their reference files)."""
    import json

    from tests.common import gpt2_bytes_to_unicode

    back = {c: b for b, c in gpt2_bytes_to_unicode().items()}
    with open(vocab_path, encoding="utf-8") as f:
        vocab = {i: bytes(back[c] for c in token) for token, i in json.load(f).items()}
    with open(merges_path, encoding="utf-8") as f:
        merges = [tuple(bytes(back[c] for c in t) for t in line.rstrip("\n").split(" ")) for line in f if line.strip()]
    return vocab, merges


# The fixture corpora, the vocabulary sizes their reference files were made at, and their special tokens.
REFERENCE_RUNS = {
    "english": (500, ["<|endoftext|>"]),
    "german": (400, ["<|endoftext|>"]),
    "chinese": (400, []),
    "emoji_chat": (400, []),
    "code": (500, []),
}


def main() -> None:
    """Write tests/fixtures/reference/NAME-vocab.json and NAME-merges.txt with the slow trainer."""
    import pathlib

    fixtures = pathlib.Path(__file__).resolve().parent / "fixtures"
    out = fixtures / "reference"
    out.mkdir(exist_ok=True)
    for name, (vocab_size, specials) in REFERENCE_RUNS.items():
        text = (fixtures / f"{name}.txt").read_bytes().decode("utf-8")
        vocab, merges = reference_train_bpe(text, vocab_size, specials)
        write_gpt2_files(vocab, merges, out / f"{name}-vocab.json", out / f"{name}-merges.txt")
        print(f"{name}: {len(vocab)} tokens, {len(merges)} merges")


if __name__ == "__main__":
    main()
