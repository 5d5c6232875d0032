"""Time our trainer against the reference trainer (`cs336_basics/train/reference.py`) on a small corpus.

    uv run python benchmarks/bench_train_small.py [CORPUS] [--vocab-size 500] [--runs 5]

CORPUS defaults to tests/fixtures/english.txt (133 KB), the corpus of the CS336-style speed test.
Both run in this process, interleaved; it prints each one's median, min and max seconds and the
ratio of the medians, and checks that both give the same merges.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

from cs336_basics.bpe import train_bpe
from cs336_basics.train.reference import train_bpe_reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", default="tests/fixtures/english.txt")
    parser.add_argument("--vocab-size", type=int, default=500)
    parser.add_argument("--special-token", action="append", default=None)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    specials = args.special_token or ["<|endoftext|>"]

    times: dict[str, list[float]] = {"ours": [], "reference": []}
    results = {}
    for _ in range(args.runs):
        start = time.perf_counter()
        results["ours"] = train_bpe(args.corpus, args.vocab_size, specials)
        times["ours"].append(time.perf_counter() - start)
        start = time.perf_counter()
        text = Path(args.corpus).read_bytes().decode("utf-8")
        results["reference"] = train_bpe_reference(text, args.vocab_size, specials)
        times["reference"].append(time.perf_counter() - start)

    print(f"{args.corpus}: vocab {args.vocab_size}, {args.runs} runs each")
    for name, ts in times.items():
        print(f"  {name:10s} median {statistics.median(ts):8.4f} s   min {min(ts):8.4f}   max {max(ts):8.4f}")
    ratio = statistics.median(times["ours"]) / statistics.median(times["reference"])
    print(f"  ours/reference: {ratio:.3f}x the time")
    same = results["ours"][1] == results["reference"][1]
    print(f"  same merges: {'yes' if same else 'NO'}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
