"""The memory figures of issue 41 side by side: for each corpus (or count file), `bpe train`'s
estimate against its measured peak tree memory, and what `--min-pretoken-count 2` saves and changes.

    uv run python benchmarks/bench_memory.py /tmp/base32.txt /tmp/web256.txt --counts /tmp/web10m.tsv \
        [--vocab-size 32000] [--workers 2] [--min-counts 1,2]

Each run is the command a user runs (`python -m cs336_basics.cli train ... --quiet`), measured by
`peak_tree_memory.measure` (the whole process tree, sampled). Per corpus and N it prints the
estimate the command printed before counting, the measured peak, their ratio, the distinct
pre-tokens, and for N > 1 the peak as a share of N = 1's and how the first merges compare: how many
of N = 1's merges are not among N's, and the first rank where the two lists differ. Make the
corpora as docs/performance.md ("The corpora") says, the count file with make_web_counts.py; put
them outside the repository. Times are printed but mean little on a busy
machine; the memory figures do not depend on what else runs.
"""

import argparse
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peak_tree_memory import measure

UNITS = {"MB": 2**20, "GB": 2**30}


def train(source: str, counts: bool, vocab_size: int, workers: int, min_count: int, out: Path) -> dict:
    """One measured `bpe train` run: its estimate, distinct pre-tokens, peak and merges."""
    command = [sys.executable, "-m", "cs336_basics.cli", "train", *(["--counts", source] if counts else [source]),
               "--vocab-size", str(vocab_size), "--workers", str(workers), "--quiet",
               "--min-pretoken-count", str(min_count), "--out", str(out)]
    log = out.with_suffix(".log")
    with open(log, "w") as f:
        status, peak, _, seconds = measure(command, stdout=f)
    text = log.read_text()
    if status != 0:
        sys.exit(f"{' '.join(command)} failed:\n{text}")
    estimate = re.search(r"estimated peak memory ([\d.]+) (MB|GB)", text)
    distinct = re.search(r"\(([\d,]+) distinct", text)
    merges = (out / "merges.txt").read_text(encoding="utf-8").splitlines()[1:]
    return {"estimate": float(estimate[1]) * UNITS[estimate[2]] / 2**20, "peak": peak, "seconds": seconds,
            "distinct": int(distinct[1].replace(",", "")), "merges": merges}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", help="text corpora")
    parser.add_argument("--counts", action="append", default=[], help="a count file or table (repeatable)")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--min-counts", default="1,2", help="the --min-pretoken-count values to run (default 1,2)")
    args = parser.parse_args()
    min_counts = [int(n) for n in args.min_counts.split(",")]
    sources = [(c, False) for c in args.corpora] + [(c, True) for c in args.counts]
    print(f"{'input':<28} {'N':>2} {'distinct':>11} {'estimate MB':>12} {'peak MB':>9} {'est/peak':>9} "
          f"{'peak/N=1':>9} {'merges not in N=1':>18} {'first differing rank':>21} {'s':>7}")
    with tempfile.TemporaryDirectory(prefix="bench_memory_") as work:
        for source, counts in sources:
            runs = {}
            for n in min_counts:
                run = runs[n] = train(source, counts, args.vocab_size, args.workers, n, Path(work) / f"{len(runs)}_{n}")
                base = runs.get(min_counts[0])
                share = f"{run['peak'] / base['peak']:.2f}" if n != min_counts[0] else ""
                changed = first = ""
                if n != min_counts[0]:
                    changed = str(len(set(base["merges"]) - set(run["merges"])))
                    first = str(next((i + 1 for i, (a, b) in enumerate(zip(base["merges"], run["merges"])) if a != b),
                                     "none"))
                print(f"{Path(source).name:<28} {n:>2} {run['distinct']:>11,} {run['estimate']:>12,.0f} "
                      f"{run['peak']:>9,.0f} {run['estimate'] / run['peak']:>9.2f} {share:>9} {changed:>18} "
                      f"{first:>21} {run['seconds']:>7.0f}", flush=True)


if __name__ == "__main__":
    main()
