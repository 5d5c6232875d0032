"""Time `bpe encode --out DIR/` (a dataset directory) against `bpe encode --out X.npy` (one array).

Run it with:

    uv run python benchmarks/bench_dataset.py CORPUS --tokenizer DIR [--runs 3] [--workers 2]
                                              [--shard-size 256M] [--scratch FOLDER]

    e.g. uv run python benchmarks/bench_dataset.py /data/corpus1g.txt --tokenizer out/tinystories

Each run times both commands, one after the other (which one first alternates), each in its own
process with `--workers` worker processes, writing into a fresh folder under `--scratch` (default: a
temporary folder beside nothing in particular; put it on the disk you care about). It prints:

- the median wall time of each and the ratio directory / array (target: at most 1.05);
- the peak resident memory of the command's own process (its workers not counted: ru_maxrss of
  the process itself, reported by it when it ends) for each, beside the corpus size (target for
  the directory: under 300 MB whatever the corpus size);
- a resume: the directory command killed (SIGKILL, with its workers) at half its median time, then
  run again; the time of that second run over the median full run (target: at most 0.8), and its
  CPU time (the command and its workers, user + system) over the median full run's, which a busy
  machine moves less, beside how many input bytes it reused;
- whether the concatenated shards equal the array (they must; exit status 1 if not).
"""

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def child(argv: list[str]) -> int:
    """Run `bpe` with `argv` in this process, then print this process's own peak memory."""
    from cs336_basics.cli import main

    status = main(argv)
    scale = 1024 if sys.platform != "darwin" else 1
    print(f"bench_dataset: peak_rss_bytes {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale}",
          file=sys.stderr)
    return status


def children_cpu() -> float:
    """CPU seconds (user + system) of the child processes that have ended and were waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_command(argv: list[str], *, kill_after: float | None = None) -> tuple[float, int | None, str, float]:
    """(seconds, own peak memory in bytes or None, stdout, CPU seconds of the command and of its
    workers) of one `bpe` command in a new process; with `kill_after`, SIGKILL it and its workers
    after that many seconds."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    started, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.Popen([sys.executable, __file__, "--child", *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=kill_after)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return time.perf_counter() - started, None, out, children_cpu() - cpu
    seconds, cpu = time.perf_counter() - started, children_cpu() - cpu
    if proc.returncode != 0:
        sys.exit(f"bpe {' '.join(argv)} failed ({proc.returncode}):\n{err}")
    peak = [int(line.split()[-1]) for line in err.splitlines() if line.startswith("bench_dataset: peak_rss_bytes")]
    return seconds, (peak[0] if peak else None), out, cpu


def same_ids(npy: Path, directory: Path) -> bool:
    from cs336_basics.datasets import layout

    whole = np.load(npy, mmap_mode="r")
    offset = 0
    for entry in layout.read_manifest(directory)["shards"]:
        shard = np.load(layout.ids_file(directory, entry["name"]), mmap_mode="r")
        if not np.array_equal(whole[offset : offset + len(shard)], shard):
            return False
        offset += len(shard)
    return offset == len(whole)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus")
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shard-size", default="256M")
    parser.add_argument("--engine", default="auto", choices=["auto", "python", "tiktoken"])
    parser.add_argument("--scratch", default=None, help="folder for the outputs (default: a temporary one)")
    args = parser.parse_args()

    corpus_bytes = sum(p.stat().st_size for p in Path(args.corpus).rglob("*") if p.is_file()) \
        if Path(args.corpus).is_dir() else Path(args.corpus).stat().st_size
    common = ["encode", "--tokenizer", args.tokenizer, args.corpus, "--workers", str(args.workers), "--quiet",
              "--engine", args.engine]
    times: dict[str, list[float]] = {"npy": [], "dir": []}
    peaks: dict[str, list[int]] = {"npy": [], "dir": []}
    cpus: dict[str, list[float]] = {"npy": [], "dir": []}
    with tempfile.TemporaryDirectory(dir=args.scratch, prefix="bench-dataset-") as scratch:
        scratch = Path(scratch)
        for run in range(args.runs):
            for kind in (["npy", "dir"] if run % 2 == 0 else ["dir", "npy"]):
                out = scratch / (f"run{run}.npy" if kind == "npy" else f"run{run}")
                extra = ["--shard-size", args.shard_size] if kind == "dir" else []
                seconds, peak, _, cpu = run_command([*common, "--out", str(out), *extra])
                times[kind].append(seconds)
                cpus[kind].append(cpu)
                if peak:
                    peaks[kind].append(peak)
                print(f"run {run + 1} {kind}: {seconds:.2f} s, own peak {peak / 1e6 if peak else float('nan'):.0f} MB",
                      flush=True)
        identical = same_ids(scratch / "run0.npy", scratch / "run0")

        full = statistics.median(times["dir"])
        resumed_dir = scratch / "resumed"
        dir_args = [*common, "--out", str(resumed_dir), "--shard-size", args.shard_size]
        killed_at, _, _, _ = run_command(dir_args, kill_after=full / 2)
        resume_seconds, _, resume_out, resume_cpu = run_command(dir_args)
        identical = identical and same_ids(scratch / "run0.npy", resumed_dir)

    npy, directory = statistics.median(times["npy"]), statistics.median(times["dir"])
    print(f"\ncorpus: {corpus_bytes / 1e6:.1f} MB, {args.workers} workers, shard size {args.shard_size}, "
          f"{args.runs} runs")
    print(f"one .npy:           median {npy:8.2f} s, own peak {max(peaks['npy'], default=0) / 1e6:6.0f} MB")
    print(f"dataset directory:  median {directory:8.2f} s, own peak {max(peaks['dir'], default=0) / 1e6:6.0f} MB"
          f"  ({directory / npy:.3f}x the .npy; target <= 1.05x; peak target < 300 MB)")
    print(f"resume after SIGKILL at {killed_at:.1f} s: {resume_seconds:.2f} s, "
          f"{resume_seconds / full:.2f}x a full run (target <= 0.8x); CPU {resume_cpu:.1f} s, "
          f"{resume_cpu / statistics.median(cpus['dir']):.2f}x a full run's")
    print("".join(f"  {line.strip()}\n" for line in resume_out.splitlines() if "reused" in line), end="")
    print(f"shards equal the .npy: {identical}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
