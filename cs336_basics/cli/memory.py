"""`--min-pretoken-count` and `--max-memory` of `bpe train` and `bpe count`, and the memory estimate
they print before counting (see `train.memory_estimate`)."""

import argparse
from pathlib import Path

from cs336_basics.cli.common import byte_size, positive_int
from cs336_basics.counts import table
from cs336_basics.errors import CommandError
from cs336_basics.train import memory_estimate


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add the two options to a command that counts (or trains)."""
    parser.add_argument("--min-pretoken-count", type=positive_int, metavar="N",
                        help="drop the pre-tokens seen fewer than N times in all before merging: less memory, and the "
                             "merges are exactly those of the counts that are left (default 1: keep all; bpe count "
                             "records N in the table, and training from the table applies it unless given another)")
    parser.add_argument("--max-memory", type=byte_size, metavar="SIZE",
                        help="refuse to start when the estimated peak memory (printed before counting) is above SIZE, "
                             "e.g. 8G")


def check(args: argparse.Namespace, files: list, special_tokens: list[str], pattern: str, workers: int,
          counts: str | None = None, note: str = "", table: bool = False) -> memory_estimate.Estimate:
    """Print the run's estimated peak memory, from a sample of `files` (or the rows of the count
    table or file `counts`; `table`: the run writes a count table, and does not merge); with
    `--max-memory`, refuse the run if the estimate is above it, saying what would lower it. Called
    before any counting."""
    min_count = args.min_pretoken_count or 1
    if counts is not None:
        rows, kept = _rows(Path(counts), min_count)
        estimate = memory_estimate.counts_estimate(rows, workers=workers, kept_share=kept)
    else:
        points, sample_bytes, kept = memory_estimate.sample_growth(
            files, special_tokens, pattern, args.text_field, min_count=min_count)
        if not points:  # no text at all
            return memory_estimate.counts_estimate(0, workers=workers)
        estimate = memory_estimate.estimate(points, sample_bytes, sum(f.size for f in files), workers=workers,
                                            kept_share=kept, table=table)
    print(f"{memory_estimate.describe(estimate)}{note}", flush=True)
    if args.max_memory is not None and estimate.peak_bytes > args.max_memory:
        ways = []
        counting_peak = estimate.counting_bytes >= estimate.merging_bytes
        # The merge loop keeps fewer pre-tokens (a table keeps every count; a count file is read
        # whole, by this process alone, before any is dropped).
        if not table and not (counts is not None and counting_peak):
            ways.append(f"--min-pretoken-count {min_count + 1}" + (" (drops the pre-tokens seen once)" if min_count == 1 else ""))
        if counts is None and workers > 1 and counting_peak:  # each counting worker holds a table
            ways.append("fewer --workers")
        ways.append("a count file of fewer rows" if counts is not None else "a smaller corpus")
        raise CommandError(f"the estimated peak memory, {memory_estimate.readable(estimate.peak_bytes)}, is above "
                           f"--max-memory {memory_estimate.readable(args.max_memory)}: to lower it, give "
                           f"{', or '.join(ways)} (or raise --max-memory)")
    return estimate


def _rows(path: Path, min_count: int, sampled: int = 2000) -> tuple[int, float]:
    """(The rows of a count table or the lines of a pre-token<TAB>count file, the share of them the
    merge loop keeps), read without reading the counts into memory: a table's manifest totals (at
    least its distinct pre-tokens; the share is taken as all of them, since a table's rare
    pre-tokens may add up across its shards), a file's lines counted a block at a time, the share
    from the counts of the first `sampled` lines of each block (a line that does not parse is left
    out of the sample; reading the file later says what is wrong with it)."""
    if path.is_dir():
        return int(table.read_manifest(path).get("totals", {}).get("rows", 0)), 1.0
    lines = seen = kept = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            whole = 1 if lines else 0  # a block after the first may start inside a line
            lines += block.count(b"\n")
            if min_count > 1:
                for line in block.split(b"\n", sampled)[whole:sampled]:
                    count = line.rpartition(b"\t")[2].strip()
                    if count.isdigit():
                        seen += 1
                        kept += int(count) >= min_count
    return lines, kept / seen if seen else 1.0
