"""The peak memory of a command and every process it starts: the resident memory of the whole process
tree, summed and sampled, as a user's `top` or a job scheduler's memory limit sees it.

    uv run python benchmarks/peak_tree_memory.py -- uv run bpe train corpus.txt --vocab-size 10000 --quiet

Prints the command's own output, then one line: the peak tree memory in MB, the peak of the largest
single process, and the wall time. Samples every `--interval` seconds (default 0.05): a peak shorter
than that can be missed, so the figure is a lower bound, within a few MB for runs of seconds or more.
`uv run` itself is part of the tree; it is a few MB, asleep while the command runs.
"""

import argparse
import subprocess
import sys
import time

import psutil


def tree_rss(process: psutil.Process) -> tuple[int, int]:
    """(the resident bytes of `process` and its descendants, summed; the largest of them)."""
    sizes = []
    try:
        members = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, 0
    for member in members:
        try:
            sizes.append(member.memory_info().rss)
        except psutil.NoSuchProcess:  # ended between the listing and now
            pass
    return sum(sizes), max(sizes, default=0)


def measure(command: list[str], interval: float = 0.05, stdout=None) -> tuple[int, float, float, float]:
    """Run `command` (its output to `stdout`, a file, if given); return (its exit status, peak tree
    MB, peak single-process MB, seconds)."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=stdout)
    watched = psutil.Process(child.pid)
    peak = largest = 0
    while child.poll() is None:
        total, single = tree_rss(watched)
        peak, largest = max(peak, total), max(largest, single)
        time.sleep(interval)
    return child.returncode, peak / 2**20, largest / 2**20, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between samples (default 0.05)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    status, peak, largest, seconds = measure(command, args.interval)
    print(f"peak tree memory {peak:,.0f} MB (largest process {largest:,.0f} MB), {seconds:,.1f} s, exit {status}",
          file=sys.stderr)
    sys.exit(status)


if __name__ == "__main__":
    main()
