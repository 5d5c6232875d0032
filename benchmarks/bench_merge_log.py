"""What the merge log costs in training time: train_bpe with and without `merge_log`, same run.

    uv run python benchmarks/bench_merge_log.py CORPUS.txt [--vocab-size 10000] [--runs 2] [--baseline DIR]

Each run is a fresh process (so no run inherits another's memory), the contenders alternate, and it
prints each one's median total and merge-phase seconds and the ratios of the medians to "no log".
`--baseline DIR` adds a third contender: the package as it is in DIR (for example a checkout of the
commit before the merge log, made with `git worktree add /tmp/base COMMIT`), which shows what the
always-on part (the shards reporting how much their words shrank) costs.

    uv run python benchmarks/bench_merge_log.py CORPUS.txt --merge-loop [--runs 5] [--baseline DIR]

times only the merge loop, in this process and one shard, on pre-token counts made once: CPU seconds
(less disturbed by other load than wall time) of `train_merges` with and without the log, and of
DIR's `merge.py` if given.
"""

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Runs in the child: train once and print the seconds as JSON.
CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from cs336_basics.bpe import train_bpe
corpus, vocab_size, with_log = sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
stats, log = {}, []
options = {"merge_log": log} if with_log else {}
start = time.perf_counter()
vocab, merges = train_bpe(corpus, vocab_size, ["<|endoftext|>"], stats=stats, **options)
total = time.perf_counter() - start
print(json.dumps({"total": total, "merge": stats["merge_seconds"], "merges": len(merges), "log": len(log)}))
"""


def run(source: Path, corpus: str, vocab_size: int, with_log: bool) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(source), corpus, str(vocab_size), "1" if with_log else "0"],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def merge_loop_only(args) -> None:
    sys.path.insert(0, str(REPO))
    from cs336_basics.corpora import sources
    from cs336_basics.train import counting
    from cs336_basics.train.merge import train_merges

    units = sources.plan_units(sources.resolve(args.corpus), piece_size=1 << 30, special_tokens=["<|endoftext|>"])
    word_counts = counting.count_pretokens(units, num_workers=1, task_size=1 << 30)
    num_merges = args.vocab_size - 257
    contenders = {
        "no log": lambda: train_merges(word_counts, num_merges),
        "with log": lambda: train_merges(word_counts, num_merges, merge_log=[]),
    }
    if args.baseline:
        spec = importlib.util.spec_from_file_location("baseline_merge", args.baseline / "cs336_basics" / "merge.py")
        baseline = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(baseline)
        contenders["baseline"] = lambda: baseline.train_merges(word_counts, num_merges)
    times: dict[str, list[float]] = {name: [] for name in contenders}
    results = {}
    for _ in range(args.runs):
        for name, run_one in contenders.items():
            start = time.process_time()
            results[name] = run_one()
            times[name].append(time.process_time() - start)
            print(f"  {name:9s} {times[name][-1]:6.2f} CPU s", flush=True)
    assert all(r == results["no log"] for r in results.values()), "the merges must not change"
    base = statistics.median(times["no log"])
    print(f"{args.corpus}: merge loop only, {num_merges} merges, {args.runs} runs each (medians of CPU seconds)")
    for name, ts in times.items():
        print(f"  {name:9s} {statistics.median(ts):6.2f} s ({statistics.median(ts) / base:.3f}x)   min {min(ts):6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--baseline", type=Path, help="a folder holding an older cs336_basics to compare with")
    parser.add_argument("--merge-loop", action="store_true", help="time only the merge loop, in this process")
    args = parser.parse_args()
    if args.merge_loop:
        return merge_loop_only(args)

    contenders = {"no log": (REPO, False), "with log": (REPO, True)}
    if args.baseline:
        contenders["baseline"] = (args.baseline.resolve(), False)
    results: dict[str, list[dict]] = {name: [] for name in contenders}
    for _ in range(args.runs):
        for name, (source, with_log) in contenders.items():
            result = run(source, args.corpus, args.vocab_size, with_log)
            results[name].append(result)
            print(f"  {name:9s} total {result['total']:7.2f} s   merging {result['merge']:6.2f} s", flush=True)

    print(f"{args.corpus}: vocab {args.vocab_size}, {args.runs} runs each (medians)")
    medians = {
        name: (statistics.median(r["total"] for r in rs), statistics.median(r["merge"] for r in rs))
        for name, rs in results.items()
    }
    base_total, base_merge = medians["no log"]
    for name, (total, merge) in medians.items():
        print(f"  {name:9s} total {total:7.2f} s ({total / base_total:.3f}x)   "
              f"merging {merge:6.2f} s ({merge / base_merge:.3f}x)")
    assert all(r["log"] == r["merges"] for r in results["with log"]), "the log must have one entry per merge"


if __name__ == "__main__":
    main()
