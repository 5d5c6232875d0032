"""How much memory a training run will need, guessed from a small sample of its corpus before any
counting (`bpe train` and `bpe count` print it; `--max-memory` refuses a run above a limit).

A run's peak is set by its distinct pre-tokens: the merge loop holds every one of them (in this
process's count dict and, as token ids, in the merge shards), and counting holds each worker's
distinct chunks and pre-tokens. So the estimate is

1. the sample's growth: pre-tokens are counted over pieces spread evenly through the corpus, noting
   after each piece how many were seen and how many were distinct (`sample_growth`);
2. Heaps' law, distinct = K * seen ** beta, fitted to those points (`heaps_fit`) and extrapolated
   to the whole corpus (its bytes times the sample's pre-tokens per byte);
3. bytes per distinct pre-token, measured on this code (`MERGE_BYTES_PER_DISTINCT` for the merge
   loop, `MERGE_BYTES_PER_DISTINCT_WEB` once its shards hold every word as a long word,
   `COUNT_BYTES_PER_DISTINCT` for a counting worker, `READ_BYTES_PER_ROW` for reading a count
   file), plus each process's interpreter.

With `min_pretoken_count` N, only the pre-tokens seen at least N times reach the merge loop: their
share of the distinct ones is taken from the sample (a share that changes little with the size of
a corpus whose words follow Zipf's law). Everything here is a pure function of numbers except
`sample_growth`, which reads the sample.
"""

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from cs336_basics.corpora import sources
from cs336_basics.text import patterns
from cs336_basics.text.pretokenize import special_token_regex, split_on_special_tokens
from cs336_basics.train.merge import ALL_LONG_WORDS
from cs336_basics.train.trainer import PARALLEL_MIN_WORDS

# Bytes of tree memory per distinct pre-token reaching the merge loop (the count dict in this
# process, the words, pair counts and index in the shards), with 2 shards: 420 at 45 M distinct
# pre-tokens (issue 41's simulated 100 GB), 366 at 8.4 M (benchmarks/make_web_counts.py --new-words
# 10M), some 400 at 276 k (the 32 MB benchmark corpus). A change
# to the merge loop's memory (`merge`) changes it: measure it again then (benchmarks/peak_tree_memory.py).
MERGE_BYTES_PER_DISTINCT = 420
# The same where each shard holds `merge.ALL_LONG_WORDS` pre-tokens or more, all as long words (the
# whole tree's peak, 2 shards): 164 at 32.4 M distinct pre-tokens and 198 at 8.4 M (the 32 MB
# corpus's counts times 3,000 plus random web-like words, benchmarks/make_web_counts.py).
MERGE_BYTES_PER_DISTINCT_WEB = 175
# Bytes per distinct pre-token a counting process holds (its chunk table and pre-token counts), and
# this process again when it adds the workers' counts up (they are not all at their largest at
# once): fitted to the counting peak of `bpe train --min-pretoken-count 2` on 256 MB of web-like
# text (257 MB of tree memory, 795 k distinct pre-tokens, 2 workers), where counting sets the peak.
COUNT_BYTES_PER_DISTINCT = 75
# Bytes per row this process holds while it reads a count file or table into one dict (a bytes key
# and its count), every row at once, before `--min-pretoken-count` drops any: 3,854 MB for 32.4 M
# rows (benchmarks/make_web_counts.py --new-words 45M), some 123 bytes a row.
READ_BYTES_PER_ROW = 120
# Resident memory of one process of ours before it holds any counts (the interpreter and the package).
PROCESS_BYTES = 40 << 20
# The sample: this many pieces of the corpus, each about this many bytes, spread evenly through it.
SAMPLE_PIECES = 16
SAMPLE_PIECE_BYTES = 1 << 18


@dataclass(frozen=True)
class Estimate:
    """A run's estimated peak memory (`peak_bytes`) and what it rests on: the corpus's distinct
    pre-tokens (`distinct`, extrapolated), how many of them the merge loop keeps (`kept`), the
    Heaps' law fit (`k`, `beta`), and the peaks of counting and of merging."""

    distinct: int
    kept: int
    k: float
    beta: float
    counting_bytes: int
    merging_bytes: int

    @property
    def peak_bytes(self) -> int:
        return max(self.counting_bytes, self.merging_bytes)


def heaps_fit(points: Sequence[tuple[int, int]]) -> tuple[float, float]:
    """(K, beta) of Heaps' law, distinct = K * seen ** beta, fitted by least squares on the logs of
    `points` ((seen, distinct) pairs, seen > 0). With one point (or all at one `seen`) beta is 1:
    every pre-token new, the most it can be. Beta is kept within [0, 1]."""
    points = [(s, d) for s, d in points if s > 0 and d > 0]
    if not points:
        raise ValueError("a Heaps' law fit needs at least one point with pre-tokens seen")
    xs = [math.log(s) for s, _ in points]
    ys = [math.log(d) for _, d in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    beta = 1.0 if spread == 0 else sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread
    beta = min(max(beta, 0.0), 1.0)
    return math.exp(mean_y - beta * mean_x), beta


def extrapolated_distinct(points: Sequence[tuple[int, int]], seen: float) -> int:
    """The distinct pre-tokens among `seen` pre-tokens, by the Heaps' law fit of `points`: never
    fewer than the sample held, nor more than `seen`."""
    k, beta = heaps_fit(points)
    most = max(d for _, d in points)
    return int(min(max(k * seen ** beta, most), max(seen, most)))


def estimate(points: Sequence[tuple[int, int]], sample_bytes: int, corpus_bytes: int, *, workers: int,
             kept_share: float = 1.0, table: bool = False) -> Estimate:
    """The peak memory of a run over `corpus_bytes` of text by `workers` processes, from the sample's
    growth `points` ((pre-tokens seen, distinct) after each piece; its last point covers
    `sample_bytes`). `kept_share`: the share of distinct pre-tokens the merge loop keeps (see
    `min_pretoken_count`). Counting: each worker's share of the corpus has its own distinct
    pre-tokens, and this process adds them all up at the end. Merging: see `merging_bytes`. With
    `table` (`bpe count`), no merging, and no adding up: each piece's counts go to its own shard."""
    if sample_bytes <= 0 or not points:
        raise ValueError("an estimate needs a sample with some text")
    seen_per_byte = points[-1][0] / sample_bytes
    distinct = extrapolated_distinct(points, seen_per_byte * corpus_bytes)
    per_worker = extrapolated_distinct(points, seen_per_byte * corpus_bytes / workers)
    kept = int(distinct * kept_share)
    counting = workers * (PROCESS_BYTES + per_worker * COUNT_BYTES_PER_DISTINCT)
    k, beta = heaps_fit(points)
    if table:
        return Estimate(distinct, kept, k, beta, counting, 0)
    counting += distinct * COUNT_BYTES_PER_DISTINCT
    return Estimate(distinct, kept, k, beta, counting, merging_bytes(kept, workers))


def merging_bytes(kept: int, workers: int) -> int:
    """The merge loop's peak over `kept` distinct pre-tokens: one process per shard (`workers` of
    them from `trainer.PARALLEL_MIN_WORDS` pre-tokens on, else this one alone)."""
    shards = workers if kept >= PARALLEL_MIN_WORDS else 1
    per_distinct = MERGE_BYTES_PER_DISTINCT_WEB if kept // shards >= ALL_LONG_WORDS else MERGE_BYTES_PER_DISTINCT
    return shards * PROCESS_BYTES + kept * per_distinct


def counts_estimate(distinct: int, *, workers: int, kept_share: float = 1.0) -> Estimate:
    """The peak memory of training from counts made before (`--counts`), whose `distinct`
    pre-tokens are known: reading them (every row, before any is dropped), then merging the
    `kept_share` of them that is kept."""
    kept = int(distinct * kept_share)
    return Estimate(distinct, kept, float(distinct), 0.0, PROCESS_BYTES + distinct * READ_BYTES_PER_ROW,
                    merging_bytes(kept, workers))


def sample_growth(files: Sequence[sources.Source], special_tokens: Sequence[str], pattern: str, text_field: str,
                  *, pieces: int = SAMPLE_PIECES, piece_bytes: int = SAMPLE_PIECE_BYTES,
                  min_count: int = 1) -> tuple[list[tuple[int, int]], int, float]:
    """Read about `pieces` pieces of `piece_bytes` spread evenly through the corpus and count their
    pre-tokens: (the (seen, distinct) points after each piece, the sample's bytes, the share of its
    distinct pre-tokens seen at least `min_count` times)."""
    size = sum(f.size for f in files)
    units = sources.plan_units(files, piece_size=max(size // pieces, piece_bytes), special_tokens=special_tokens,
                               text_field=text_field, pattern=pattern)
    step = max(len(units) / pieces, 1.0)
    chosen = [units[int(i * step)] for i in range(min(pieces, len(units)))]
    pretokenizer = patterns.get(pattern)
    special_re = special_token_regex(special_tokens)
    counts: Counter[str] = Counter()
    points: list[tuple[int, int]] = []
    seen = sample_bytes = 0
    for unit in chosen:
        read = 0
        for _, text, _ in sources.read_unit(unit, block_size=piece_bytes):
            for document in split_on_special_tokens(text, special_re):
                found = pretokenizer.pretokens(document)
                counts.update(found)
                seen += len(found)
            read += len(text.encode("utf-8"))
            if read >= piece_bytes:
                break
        sample_bytes += read
        if seen:
            points.append((seen, len(counts)))
    kept = sum(1 for n in counts.values() if n >= min_count) / len(counts) if counts else 1.0
    return points, sample_bytes, kept


def describe(estimate: Estimate) -> str:
    """One line for a command's output: the peak and what it rests on."""
    kept = f", {estimate.kept:,} of them kept" if estimate.kept != estimate.distinct else ""
    merging = f", merging {readable(estimate.merging_bytes)}" if estimate.merging_bytes else ""
    return (f"estimated peak memory {readable(estimate.peak_bytes)} (about {estimate.distinct:,} distinct "
            f"pre-tokens{kept}; counting {readable(estimate.counting_bytes)}{merging})")


def readable(size: int) -> str:
    """A size in GB from 1 GB (2**30 bytes), in MB from 1 MB, else in KB (a --max-memory as small as 1K).

    >>> readable(3 << 30), readable(200 << 20), readable(1024)
    ('3.0 GB', '200 MB', '1 KB')
    """
    if size >= 1 << 30:
        return f"{size / 2**30:.1f} GB"
    return f"{size / 2**20:.0f} MB" if size >= 1 << 20 else f"{size / 2**10:.0f} KB"
