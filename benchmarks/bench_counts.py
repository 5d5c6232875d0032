"""Time count tables against training from the text, side by side in one run.

    uv run python benchmarks/bench_counts.py CORPUS [--vocab-size 32000] [--workers 2] [--runs 2] [--table DIR]

Each run, in fresh subprocesses one after another: `train_bpe` on the text (its counting phase and
total), `bpe count`'s `count_corpus` writing a table to DIR (default: a temporary folder beside the
corpus, removed at the end; counted anew each run), and `train_bpe_from_counts` on that table. It
prints the medians and the three ratios of issue 32: training from the table / from the text
(target at most 0.4), writing the table / the counting phase of training on the text (at most
1.05), and the table's size on disk / the corpus's (at most 0.3).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPECIAL = "<|endoftext|>"


def child(kind: str, corpus: str, table: str, vocab_size: int, workers: int) -> dict:
    if kind == "text":
        from cs336_basics.bpe import train_bpe

        stats: dict = {}
        started = time.perf_counter()
        train_bpe(corpus, vocab_size, [SPECIAL], num_workers=workers, stats=stats)
        return {"seconds": time.perf_counter() - started, "count_seconds": stats["count_seconds"]}
    if kind == "count":
        from cs336_basics.counts import writer

        shutil.rmtree(table, ignore_errors=True)
        started = time.perf_counter()
        writer.count_corpus([corpus], table, special_tokens=[SPECIAL], num_workers=workers)
        seconds = time.perf_counter() - started
        size = sum(p.stat().st_size for p in Path(table).iterdir() if p.is_file())
        return {"seconds": seconds, "table_bytes": size}
    from cs336_basics.bpe import train_bpe_from_counts

    stats = {}
    started = time.perf_counter()
    train_bpe_from_counts(table, vocab_size, num_workers=workers, stats=stats)
    return {"seconds": time.perf_counter() - started, "read_seconds": stats["count_seconds"]}


def run_child(kind: str, args) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, args.corpus, "--table", args.table,
                          "--vocab-size", str(args.vocab_size), "--workers", str(args.workers)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus")
    parser.add_argument("--vocab-size", type=int, default=32_000)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--table")
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.corpus, args.table, args.vocab_size, args.workers)))
        return
    owned = args.table is None
    if owned:
        args.table = tempfile.mkdtemp(prefix=".bench-counts-", dir=Path(args.corpus).resolve().parent)
    results: dict[str, list[dict]] = {"text": [], "count": [], "table": []}
    try:
        for run in range(args.runs):
            for kind in results:
                results[kind].append(run_child(kind, args))
                print(f"run {run + 1}: {kind}: {results[kind][-1]}", flush=True)
    finally:
        if owned:
            shutil.rmtree(args.table, ignore_errors=True)

    def median(kind: str, key: str = "seconds") -> float:
        return statistics.median(r[key] for r in results[kind])

    corpus_bytes = os.path.getsize(args.corpus)
    text, counting, count, table = median("text"), median("text", "count_seconds"), median("count"), median("table")
    print(f"training from the text      {text:8.2f} s (counting phase {counting:.2f} s)")
    print(f"writing the count table     {count:8.2f} s  = {count / counting:.2f}x the counting phase (target <= 1.05)")
    print(f"training from the table     {table:8.2f} s  = {table / text:.2f}x training from the text (target <= 0.4)"
          f"; reading it {median('table', 'read_seconds'):.2f} s")
    size = median("count", "table_bytes")
    print(f"table on disk               {size / 1e6:8.1f} MB = {size / corpus_bytes:.3f}x the corpus (target <= 0.3)")


if __name__ == "__main__":
    main()
