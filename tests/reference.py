"""Test scaffolding around the reference trainer, and a slow twin of the encoder.

The reference trainer is library code, `cs336_basics.train.reference`: the definition every fast
path is tested against. What is here only feeds it (`reference_words`, for a pre-tokenizer given as
a function; SuperBPE's stage 2, from its definition and without a regex), encodes as
docs/behaviour.md says, one merge at a time and sharing no code with `cs336_basics.encode`, and
writes the reference files: `uv run python -m tests.reference` rewrites tests/fixtures/reference/.
"""

from collections import Counter
from collections.abc import Callable

import regex

from cs336_basics.train.reference import learn_merges, merge_word, pretokens, split_documents, train_bpe_reference


def reference_words(text: str, special_tokens: list[str], cut: Callable[[str], list[str]] = pretokens) -> Counter:
    """How often each pre-token of `text` occurs, as bytes; `cut(document)` gives one document's
    pre-tokens (GPT-2's pattern by default)."""
    return Counter(p.encode("utf-8") for document in split_documents(text, special_tokens) for p in cut(document))


def reference_superbpe_pretokens(document: str) -> list[str]:
    """The stage-2 pieces of SuperBPE's preprint (pattern "superbpe-v1"), from their definition and without a regex: each run of numeric
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
    text: str, vocab_size: int, special_tokens: list[str], transition: int, cut: Callable[[str], list[str]] = pretokens,
    stage2: Callable[[str], list[str]] = reference_superbpe_pretokens, allows: Callable[[bytes], bool] | None = None,
) -> list[tuple[bytes, bytes]]:
    """SuperBPE's merges: stage 1 trains to vocabulary size `transition` with `cut`; stage 2 cuts
    the text again with `stage2` (by default the preprint's pieces), forces the stage-1 merges and
    goes on, choosing only pairs whose token `allows` allows (all without it)."""
    extra = 256 + len(special_tokens)
    stage1, _ = learn_merges(reference_words(text, special_tokens, cut), transition - extra)
    words = reference_words(text, special_tokens, stage2)
    return learn_merges(words, vocab_size - extra, stage1, allows)[0]


def reference_encode(
    text: str,
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str],
    pattern: str = "gpt2",
) -> list[int]:
    """Encode as docs/behaviour.md says: specials (longest first), pre-tokens (`pattern` is a name or
    a regex, as for `cs336_basics.train.reference.pretokens`), merges lowest rank first."""
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
        for pretoken in pretokens(part, pattern):
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
        vocab, merges = train_bpe_reference(text, vocab_size, specials)
        write_gpt2_files(vocab, merges, out / f"{name}-vocab.json", out / f"{name}-merges.txt")
        print(f"{name}: {len(vocab)} tokens, {len(merges)} merges")


if __name__ == "__main__":
    main()
