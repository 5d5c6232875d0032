"""Time BPE training: our `train_bpe` against Hugging Face `tokenizers` and `rustbpe`.

Run it with:

    uv run --group bench python benchmarks/bench_train.py CORPUS [--vocab-size 10000] [--special-token "<|endoftext|>"]
        [--runs 3] [--workers N] [--only ours,hf,rustbpe,rustbpe-stream,ours-iter] [--phases] [--check-merges]
        [--pattern NAME] [--superword-share 0.8] [--superword-pattern superbpe-v1]

    e.g. uv run --group bench python benchmarks/bench_train.py /tmp/bench/corpus32.txt --runs 3 --phases

Each trainer runs in a fresh subprocess (this script with `--child NAME`), interleaved: ours, hf,
rustbpe, ours, hf, rustbpe, ... The child times only the training call (not the imports) and prints
the result as one line of JSON. Meanwhile the parent polls, every 50 ms, the RSS of the child and all
its descendants and keeps the largest sum.

It prints one line per run, then a table with, per trainer: median, min and max wall seconds, the
median CPU seconds (user + system, of all the trainer's threads and worker processes), the median
peak RSS summed over the process tree, the median ru_maxrss of the child process itself, and the
number of merges learned; then the ratios ours/hf and ours/rustbpe of the medians. On a machine
shared with other work, the wall clock moves with the neighbours; the CPU time shows the work done
(though it too grows when they crowd the processor's cache, and ours includes the up to 2 ms that
each of its two merge processes polls for the other's message before it sleeps).
`--phases` adds one more child that times our two phases (counting pre-tokens, then merging)
separately. `--check-merges` then trains ours with 1 and with 2 workers and checks that the merges
are identical (exit status 1 if not).

Things to keep in mind when reading the numbers:
- ours and hf are given the file path, so reading the file is part of their time; rustbpe takes an
  iterator of documents, so its child reads the file and splits it on the special tokens before the
  clock starts (and keeps the whole text in memory, which counts toward its RSS). `rustbpe-stream`
  (not run by default; ask for it with --only) is rustbpe given a generator that reads the file 1 MiB
  at a time and yields its documents, so its reading is timed and its memory is its own: the anchor
  for corpora of gigabytes. `ours-iter` (also asked for with --only) is our `train_bpe_from_iterator`
  given that same generator; the script prints its time and memory against `ours` on the file.
- hf reads the file line by line, so a whitespace run containing a newline is cut at the newline;
  its pre-token counts, hence merges, can differ slightly from ours and rustbpe's.
- Forked worker processes share memory pages with their parent; summing RSS counts those pages once
  per process, so the tree RSS overestimates the memory of multi-process trainers (ours).
- `--workers N` is passed to ours as `num_workers` and to the anchors as RAYON_NUM_THREADS.
- rustbpe's vocab_size has no room for special tokens, so it is given vocab_size minus their number:
  all three learn the same number of merges.
- `--pattern` (gpt2, cl100k, o200k, none or a regex; default gpt2) is given to ours and, as its
  regex, to rustbpe ("none" as `[\s\S]+`, one piece per document). hf runs with gpt2 only.
"""

import argparse
import importlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

import psutil

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
TRAINERS = ["ours", "hf", "rustbpe", "rustbpe-stream", "ours-iter", "ours-superbpe"]
DEFAULT_TRAINERS = ["ours", "hf", "rustbpe"]
MODULES = {"ours": "cs336_basics.bpe", "hf": "tokenizers", "rustbpe": "rustbpe", "rustbpe-stream": "rustbpe",
           "ours-iter": "cs336_basics.bpe", "ours-superbpe": "cs336_basics.bpe"}
POLL_SECONDS = 0.05
MIB = 1 << 20


# ---------------------------------------------------------------------------------------------
# The trainers. Each runs inside a child process and returns a dict with at least "seconds".


def cpu_seconds() -> float:
    """CPU time (user + system) of this process's threads and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(call) -> tuple[object, dict]:
    """Run `call()`; return its result and {"seconds": wall time, "cpu_seconds": CPU time}, the CPU
    time summed over this process's threads and the worker processes it started and waited for."""
    start, start_cpu = time.perf_counter(), cpu_seconds()
    result = call()
    return result, {"seconds": time.perf_counter() - start, "cpu_seconds": cpu_seconds() - start_cpu}


def train_ours(path: str, vocab_size: int, special_tokens: list[str], workers: int | None, pattern: str) -> dict:
    """Our train_bpe on the file; the timed call reads the file itself."""
    from cs336_basics.bpe import train_bpe

    (_, merges), times = timed(lambda: train_bpe(path, vocab_size, special_tokens, num_workers=workers, pattern=pattern))
    return {**times, "merges": len(merges)}


def train_ours_superbpe(path: str, vocab_size: int, special_tokens: list[str], workers: int | None, pattern: str) -> dict:
    """Our train_bpe with SuperBPE's two stages, the transition at --superword-share of the vocabulary
    (passed in the environment, as the children take the common arguments only)."""
    from cs336_basics.bpe import train_bpe

    transition = int(vocab_size * float(os.environ.get("BENCH_SUPERWORD_SHARE", "0.8")))
    stage2 = os.environ.get("BENCH_SUPERWORD_PATTERN")  # given only when asked: older commits lack the option
    options = {"superword_pattern": stage2} if stage2 else {}
    (_, merges), times = timed(lambda: train_bpe(path, vocab_size, special_tokens, num_workers=workers,
                                                 superword_from=transition, **options))
    return {**times, "merges": len(merges), "transition": transition}


def train_ours_from_iterator(path: str, vocab_size: int, special_tokens: list[str], workers: int | None,
                             pattern: str) -> dict:
    """Our train_bpe_from_iterator given the documents of the file as a generator that reads it
    1 MiB at a time (timed, as `rustbpe-stream` is): the same documents as `ours` reads."""
    from cs336_basics.bpe import train_bpe_from_iterator

    documents = streamed_documents(path, special_tokens)
    (_, merges), times = timed(lambda: train_bpe_from_iterator(documents, vocab_size, special_tokens,
                                                               num_workers=workers, pattern=pattern))
    return {**times, "merges": len(merges)}


def train_hf(path: str, vocab_size: int, special_tokens: list[str], workers: int | None, pattern: str) -> dict:
    """Hugging Face tokenizers' BpeTrainer on the file; the timed call reads the file itself."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    # Cut the documents at the special tokens (dropping them), then apply the GPT-2 pattern.
    split_specials = [pre_tokenizers.Split(token, behavior="removed") for token in special_tokens]
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(split_specials + [byte_level])
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_tokens,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=0,
    )

    _, times = timed(lambda: tokenizer.train([path], trainer))
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return {**times, "merges": len(merges)}


def train_rustbpe(path: str, vocab_size: int, special_tokens: list[str], workers: int | None, pattern: str,
                  stream: bool = False) -> dict:
    """rustbpe on the documents of the file, which are read and split before the clock starts; with
    `stream`, read and split as it trains (timed), so it never holds the whole text."""
    import rustbpe

    from cs336_basics.text.patterns import regex_string

    pattern_regex = regex_string(pattern) or r"[\s\S]+"  # "none": each document is one piece

    if stream:
        documents = streamed_documents(path, special_tokens)
    else:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
        documents = iter(re.split("|".join(map(re.escape, special_tokens)), text) if special_tokens else [text])
        del text
    tokenizer = rustbpe.Tokenizer()

    _, times = timed(lambda: tokenizer.train_from_iterator(documents, vocab_size - len(special_tokens), pattern=pattern_regex))
    return {**times, "merges": tokenizer.vocab_size - 256}


def streamed_documents(path: str, special_tokens: list[str], block_size: int = 1 << 20):
    """The documents of the file, read 1 MiB at a time: what a trainer that streams would be given."""
    special_re = re.compile("|".join(map(re.escape, special_tokens))) if special_tokens else None
    rest = ""
    with open(path, encoding="utf-8", newline="") as f:
        while block := f.read(block_size):
            documents = special_re.split(rest + block) if special_re else [rest + block]
            rest = documents.pop()  # may continue in the next block (or be a special token's start)
            yield from documents
    if rest or not special_tokens:
        yield rest


def train_rustbpe_streamed(path: str, vocab_size: int, special_tokens: list[str], workers: int | None,
                           pattern: str) -> dict:
    return train_rustbpe(path, vocab_size, special_tokens, workers, pattern, stream=True)


def ours_phases(path: str, vocab_size: int, special_tokens: list[str], workers: int | None, pattern: str) -> dict:
    """Our two training phases timed separately, doing what train_bpe does."""
    from cs336_basics.corpora.executors import default_num_workers
    from cs336_basics.train.trainer import PARALLEL_MIN_WORDS
    from cs336_basics.corpora import sources
    from cs336_basics.train import counting
    from cs336_basics.train.merge import train_merges

    files = sources.resolve(path)
    size = sum(f.size for f in files)
    if workers is None:
        workers = default_num_workers(size)
    start = time.perf_counter()
    piece_size = counting.default_piece_size(size, workers, local=True)
    units = sources.plan_units(files, piece_size=piece_size, special_tokens=special_tokens, pattern=pattern)
    counts = counting.count_pretokens(units, num_workers=workers, task_size=piece_size)
    counted = time.perf_counter()
    distinct = len(counts)
    num_shards = workers if distinct >= PARALLEL_MIN_WORDS else 1  # as train_bpe shards the loop
    handed_over = [counts]  # the only reference, as train_bpe gives it, so that it is freed early
    del counts
    merges = train_merges(handed_over.pop(), vocab_size - 256 - len(special_tokens), num_shards=num_shards)
    merged = time.perf_counter()
    return {
        "seconds": merged - start,
        "count_pretokens": counted - start,
        "train_merges": merged - counted,
        "distinct_pretokens": distinct,
        "workers": workers,
        "merges": len(merges),
    }


CHILD_FUNCTIONS = {"ours": train_ours, "hf": train_hf, "rustbpe": train_rustbpe, "rustbpe-stream": train_rustbpe_streamed,
                   "ours-iter": train_ours_from_iterator, "phases": ours_phases, "ours-superbpe": train_ours_superbpe}


def run_child(name: str, args: argparse.Namespace) -> None:
    """Child mode: train once and print the result as one JSON line on stdout."""
    result = CHILD_FUNCTIONS[name](args.corpus, args.vocab_size, args.special_tokens, args.workers, args.pattern)
    result["ru_maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps(result), flush=True)


# ---------------------------------------------------------------------------------------------
# The parent: starting children, watching their memory, printing the results.


def tree_rss(process: psutil.Process) -> int:
    """The RSS in bytes of a process plus all its descendants (0 once it has exited)."""
    try:
        processes = [process] + process.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in processes:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:  # exited between the listing and now
            pass
    return total


def measure(name: str, args: argparse.Namespace) -> dict:
    """Run `name` in a fresh child process; return its JSON result plus the peak tree RSS."""
    command = [sys.executable, os.path.abspath(__file__), args.corpus, "--child", name]
    command += ["--vocab-size", str(args.vocab_size), "--pattern", args.pattern]
    for token in args.special_tokens:
        command += ["--special-token", token]
    env = dict(os.environ)
    env["BENCH_SUPERWORD_SHARE"] = str(args.superword_share)
    if args.superword_pattern:
        env["BENCH_SUPERWORD_PATTERN"] = args.superword_pattern
    if args.workers is not None:
        command += ["--workers", str(args.workers)]
        env["RAYON_NUM_THREADS"] = str(args.workers)

    # The child prints a single short line, so its stdout pipe cannot fill up while we poll.
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    watched = psutil.Process(child.pid)
    peak = 0
    while child.poll() is None:
        peak = max(peak, tree_rss(watched))
        time.sleep(POLL_SECONDS)
    output = child.stdout.read()
    if child.returncode != 0:
        sys.exit(f"{name}: child process failed with exit status {child.returncode}")
    result = json.loads(output.strip().splitlines()[-1])
    result["tree_rss_mib"] = peak / MIB
    return result


def importable(name: str) -> bool:
    """Whether the module a trainer needs imports; prints a note if not."""
    try:
        importlib.import_module(MODULES[name])
    except ImportError as e:
        print(f"note: skipping {name}: cannot import {MODULES[name]} ({e})")
        return False
    return True


def print_table(results: dict[str, list[dict]]) -> None:
    """Median/min/max seconds and median memory per trainer, then the ratios of the medians."""
    print(f"\n{'trainer':<14} {'median s':>9} {'min s':>8} {'max s':>8} {'CPU s':>7} {'tree RSS MiB':>13} "
          f"{'ru_maxrss MiB':>14} {'merges':>7}")
    medians = {}
    for name, runs in results.items():
        seconds = [r["seconds"] for r in runs]
        cpu = statistics.median(r["cpu_seconds"] for r in runs)
        tree = statistics.median(r["tree_rss_mib"] for r in runs)
        own = statistics.median(r["ru_maxrss_mib"] for r in runs)
        medians[name] = (statistics.median(seconds), tree, cpu)
        print(f"{name:<14} {medians[name][0]:>9.2f} {min(seconds):>8.2f} {max(seconds):>8.2f} {cpu:>7.2f} "
              f"{tree:>13.0f} {own:>14.0f} {runs[0]['merges']:>7}")
    if "ours" not in medians:
        return
    print()
    if "ours-iter" in medians:
        iterator = medians["ours-iter"]
        print(f"ours-iter/ours (training from an iterator of the same documents against the file): "
              f"{iterator[0] / medians['ours'][0]:.2f}x the time, {iterator[1] / medians['ours'][1]:.2f}x the tree RSS, "
              f"{iterator[2] / medians['ours'][2]:.2f}x the CPU time (medians)")
    for anchor in ("hf", "rustbpe", "rustbpe-stream"):
        if anchor in medians:
            time_ratio = medians["ours"][0] / medians[anchor][0]
            rss_ratio = medians["ours"][1] / medians[anchor][1]
            cpu_ratio = medians["ours"][2] / medians[anchor][2]
            print(f"ours/{anchor}: {time_ratio:.2f}x the time, {rss_ratio:.2f}x the tree RSS, "
                  f"{cpu_ratio:.2f}x the CPU time (medians)")


def print_phases(args: argparse.Namespace) -> None:
    """Run our phases once in a fresh child and print their times."""
    r = measure("phases", args)
    print(f"\nour phases (one run, {r['workers']} workers, {r['distinct_pretokens']} distinct pre-tokens):")
    print(f"  count_pretokens {r['count_pretokens']:8.2f} s")
    print(f"  train_merges    {r['train_merges']:8.2f} s")
    print(f"  total           {r['seconds']:8.2f} s   (tree RSS {r['tree_rss_mib']:.0f} MiB)")


def check_merges(args: argparse.Namespace) -> bool:
    """Train ours with 1 and with 2 workers (in this process); report whether the merges agree."""
    from cs336_basics.bpe import train_bpe

    _, one = train_bpe(args.corpus, args.vocab_size, args.special_tokens, num_workers=1, pattern=args.pattern)
    _, two = train_bpe(args.corpus, args.vocab_size, args.special_tokens, num_workers=2, pattern=args.pattern)
    if one == two:
        print(f"\ncheck-merges: the {len(one)} merges are identical with 1 and 2 workers")
        return True
    first = next((i for i, (a, b) in enumerate(zip(one, two)) if a != b), min(len(one), len(two)))
    print(f"\ncheck-merges: FAILED, {len(one)} merges with 1 worker, {len(two)} with 2; "
          f"first difference at merge {first}: {one[first:first + 1]} vs {two[first:first + 1]}")
    return False


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="UTF-8 text file")
    parser.add_argument("--vocab-size", type=int, default=10000)
    parser.add_argument("--special-token", dest="special_tokens", action="append",
                        help='repeatable; default "<|endoftext|>"')
    parser.add_argument("--runs", type=int, default=3, help="timed runs per trainer")
    parser.add_argument("--workers", type=int, default=None, help="processes (ours) / threads (anchors)")
    parser.add_argument("--only", default=",".join(DEFAULT_TRAINERS),
                        help="comma-separated subset of ours,hf,rustbpe,rustbpe-stream,ours-iter")
    parser.add_argument("--phases", action="store_true", help="also time our phases in one extra run")
    parser.add_argument("--check-merges", action="store_true", help="check ours gives the same merges with 1 and 2 workers")
    parser.add_argument("--pattern", default="gpt2", help="pre-tokenization pattern: gpt2, cl100k, o200k, none or a regex")
    parser.add_argument("--superword-share", type=float, default=0.8,
                        help="ours-superbpe (asked for with --only): the SuperBPE transition as a share of the vocabulary")
    parser.add_argument("--superword-pattern", default=None,
                        help="ours-superbpe: its stage-2 pattern (default: train_bpe's, superbpe as released; "
                             "superbpe-v1 for the preprint's recipe)")
    parser.add_argument("--child", choices=sorted(CHILD_FUNCTIONS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.special_tokens is None:
        args.special_tokens = ["<|endoftext|>"]
    return args


def main() -> None:
    args = parse_args()
    if args.child:
        run_child(args.child, args)
        return

    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = sorted(set(names) - set(TRAINERS))
    if unknown:
        sys.exit(f"--only: unknown trainer(s) {unknown}; choose from {TRAINERS}")
    if args.pattern != "gpt2" and "hf" in names:
        print("note: skipping hf: it runs with the gpt2 pattern only")
        names.remove("hf")
    names = [n for n in names if importable(n)]

    size_mb = os.path.getsize(args.corpus) / 1e6
    print(f"corpus {args.corpus} ({size_mb:.1f} MB), vocab_size {args.vocab_size}, "
          f"special tokens {args.special_tokens}, pattern {args.pattern}, workers {args.workers or 'default'}, "
          f"{os.cpu_count()} CPUs, {args.runs} runs")
    print("(ours and hf read the file inside the timed call; rustbpe's file reading is not timed)\n")

    results: dict[str, list[dict]] = {name: [] for name in names}
    for run in range(1, args.runs + 1):
        for name in names:
            r = measure(name, args)
            results[name].append(r)
            print(f"run {run}/{args.runs} {name:<14} {r['seconds']:8.2f} s  CPU {r['cpu_seconds']:7.2f} s  "
                  f"tree RSS {r['tree_rss_mib']:6.0f} MiB  merges {r['merges']}", flush=True)
    if args.runs > 0 and names:
        print_table(results)
    if args.phases:
        print_phases(args)
    if args.check_merges and not check_merges(args):
        sys.exit(1)


if __name__ == "__main__":
    main()
