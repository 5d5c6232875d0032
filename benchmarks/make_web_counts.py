"""Make a count file standing for a web-scale corpus, without writing the corpus: a base corpus's
pre-tokens with their counts times `--factor`, plus `--new-words` words that web text keeps coining.

    uv run python benchmarks/make_web_counts.py --new-words 10M --factor 3000 BASE.txt OUT.tsv [--seed 0]
    uv run bpe train --counts OUT.tsv --vocab-size 32000 --out out/web

Web text's vocabulary never stops growing (Heaps' law: after n words some K * n ** beta of them were
new), and the new ones are rare: a name, a typo, a word glued to a number. Repeating a real corpus
gives its frequent words their real counts and contexts, but none of that tail, which is what fills
the merge loop's memory. So each new word here is coined from two words of the base corpus, drawn
as often as they occur there: the start of one, one to three letters taken from either, and the end
of the other ("develop" and "fortunes" may give "devesrtunes"); some are capitalized, some followed
by a number, as on the web. Each is seen a few times at most: its count is drawn from a power law
(P(count >= c) = c ** -1.5), so about two thirds are seen once and four in five at most twice. A
new word is written as its pre-tokens (" Devesrtunes", "42"), each with the word's count.

The issue "Web scale on one machine" uses BASE = the 32 MB benchmark corpus (build_corpus.py) and
--factor 3000: about 100 GB of text; Heaps' law with the web-like corpus's constants gives some 45 M
new words at 100 GB and about 10 M at 10 GB. The file is written with `counts.table.write_tsv`;
the same seed gives the same file. Memory: this script holds all the counts (some 150 bytes per
distinct pre-token); generated data belongs outside the repository (e.g. under /tmp).
"""

import argparse
import random
import sys
import time
from itertools import accumulate

from cs336_basics.corpora import sources
from cs336_basics.counts.table import write_tsv
from cs336_basics.text import patterns
from cs336_basics.train import counting

# Words of the base corpus a new word may be coined from: letters only, at least this long.
MIN_PARENT_LETTERS = 3
# The tail of the counts' power law: P(count >= c) = c ** -TAIL.
TAIL = 1.5
MOST_COUNT = 1000
NUMBER_SHARE, CAPITAL_SHARE = 0.15, 0.10


def amount(text: str) -> int:
    """A count such as 10M, 45M, 2.5k or 1000 (K, M, G: thousands, millions, billions)."""
    scale = {"K": 10**3, "M": 10**6, "G": 10**9}.get(text[-1:].upper(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def base_counts(path: str, special_tokens: list[str], workers: int) -> dict[bytes, int]:
    """The pre-token counts (GPT-2 pattern) of the base corpus."""
    files = sources.resolve(path)
    size = sum(f.size for f in files)
    piece = counting.default_piece_size(size, workers, local=True)
    units = sources.plan_units(files, piece_size=piece, special_tokens=special_tokens, pattern="gpt2")
    return counting.count_pretokens(units, num_workers=workers, task_size=piece)


def coin(rng: random.Random, first: str, second: str) -> str:
    """A new word: the start of `first`, one to three letters of either word, the end of `second`;
    sometimes capitalized or followed by a number."""
    head = first[:rng.randint(1, len(first) - 1)]
    tail = second[rng.randint(1, len(second) - 1):]
    letters = first + second
    word = head + "".join(letters[rng.randrange(len(letters))] for _ in range(rng.randint(1, 3))) + tail
    roll = rng.random()
    if roll < NUMBER_SHARE:
        word += str(rng.randrange(10 ** rng.randint(1, 4)))
    elif roll < NUMBER_SHARE + CAPITAL_SHARE:
        word = word[0].upper() + word[1:]
    return word


def rare_count(rng: random.Random) -> int:
    """How often a new word is seen: P(count >= c) = c ** -TAIL, at most MOST_COUNT."""
    return min(int((1.0 - rng.random()) ** (-1 / TAIL)), MOST_COUNT)


def add_new_words(counts: dict[bytes, int], parents: list[str], weights: list[int], how_many: int,
                  rng: random.Random, batch: int = 1 << 16) -> None:
    """Coin `how_many` words from `parents` (drawn as often as `weights` say) into `counts`."""
    cumulative = list(accumulate(weights))
    split = patterns.get("gpt2").pretokens
    made = 0
    while made < how_many:
        n = min(batch, how_many - made)
        firsts = rng.choices(parents, cum_weights=cumulative, k=n)
        seconds = rng.choices(parents, cum_weights=cumulative, k=n)
        for first, second in zip(firsts, seconds):
            times = rare_count(rng)
            for pretoken in split(" " + coin(rng, first, second)):
                key = pretoken.encode("utf-8")
                counts[key] = counts.get(key, 0) + times
        made += n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the base corpus (.txt, documents joined by <|endoftext|>)")
    parser.add_argument("out", help="the count file to write (pre-token<TAB>count lines)")
    parser.add_argument("--new-words", type=amount, default=amount("10M"), help="new words to coin (default 10M)")
    parser.add_argument("--factor", type=int, default=3000, help="the base's counts are multiplied by this (default 3000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2, help="processes counting the base corpus (default 2)")
    args = parser.parse_args()
    started = time.perf_counter()
    counts = base_counts(args.base, ["<|endoftext|>"], args.workers)
    base_distinct = len(counts)
    for word in counts:
        counts[word] *= args.factor
    parents, weights = [], []
    for word, n in sorted(counts.items()):  # in a fixed order: the workers' may vary
        text = word.decode("utf-8").removeprefix(" ")
        if len(text) >= MIN_PARENT_LETTERS and text.isalpha():
            parents.append(text)
            weights.append(n)
    add_new_words(counts, parents, weights, args.new_words, random.Random(args.seed))
    counts = {word: counts[word] for word in sorted(counts)}  # the same file for the same seed
    write_tsv(counts, args.out)
    stands_for = sum(len(w) * n for w, n in counts.items())
    print(f"{args.out}: {len(counts):,} distinct pre-tokens ({base_distinct:,} from the base, x{args.factor:,}; "
          f"{len(counts) - base_distinct:,} new from {args.new_words:,} coined words), standing for "
          f"{stands_for / 1e9:,.1f} GB of text, in {time.perf_counter() - started:,.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
