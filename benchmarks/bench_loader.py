"""How fast `TokenDataset` draws batches and opens many shards.

    uv run python benchmarks/bench_loader.py                    # builds a ~1 GB dataset of random ids
    uv run python benchmarks/bench_loader.py --size-mb 10       # a quick check
    uv run python benchmarks/bench_loader.py --path data/train/ # an existing dataset (any format)

Times `get_batch(32, 1024)` (median and 90th percentile over --calls calls, after a warm-up; the
dataset's pages are then in the page cache, as in training), and opening a dataset directory of
--tiny-shards tiny shards (median of 5 opens), then one batch from it. The generated datasets are
written with plain numpy and json, straight by `datasets/layout.py`, into a temporary folder under
--workdir that is deleted at the end.
"""

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from cs336_basics.datasets import layout
from cs336_basics.datasets.loader import TokenDataset

CHUNK = 1 << 22  # tokens generated at a time


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def write_random_dataset(directory: Path, tokens: int, shard_tokens: int, seed: int = 0) -> None:
    """Random uint16 ids, documents of random lengths (mean 512 tokens), shards of `shard_tokens`."""
    rng = np.random.default_rng(seed)
    shards = []
    documents = 0
    for index, first in enumerate(range(0, tokens, shard_tokens)):
        count = min(shard_tokens, tokens - first)
        name = layout.shard_name(index)
        path = layout.ids_file(directory, name)
        if count <= CHUNK:
            np.save(path, rng.integers(0, 50_000, size=count, dtype=np.uint16))
        else:  # an .npy header, then the ids written a chunk at a time, so memory stays small
            array = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint16, shape=(count,))
            for at in range(0, count, CHUNK):
                array[at : at + CHUNK] = rng.integers(0, 50_000, size=min(CHUNK, count - at), dtype=np.uint16)
            array.flush()
            del array
        starts = np.cumsum(rng.geometric(1 / 512, size=count // 256 + 2))
        starts = np.concatenate([[0] if index == 0 else [], starts[starts < count]]).astype(np.int64)
        np.save(layout.docs_file(directory, name), starts)
        documents += len(starts)
        shards.append({"name": name, "units": [index, index + 1], "tokens": count, "documents": len(starts),
                       "sha256": _sha256(path), "docs_sha256": _sha256(layout.docs_file(directory, name))})
    manifest = {
        "format": layout.FORMAT, "version": layout.FORMAT_VERSION,
        "tokenizer": {"sha256": None, "pattern": "gpt2", "special_tokens": [], "vocab_size": 50_000,
                      "separator_id": None},
        "dtype": "uint16", "shard_size": shard_tokens * 2, "inputs": [], "shards": shards,
        "totals": {"tokens": tokens, "documents": documents, "shards": len(shards)},
    }
    (directory / layout.MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")


def time_batches(dataset: TokenDataset, batch_size: int, context_length: int, calls: int) -> list[float]:
    rng = np.random.default_rng(0)
    for _ in range(min(calls, 50)):  # warm-up: maps the shards, fills the page cache
        dataset.get_batch(batch_size, context_length, rng)
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        dataset.get_batch(batch_size, context_length, rng)
        times.append(time.perf_counter() - started)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", help="an existing dataset to time (default: generate one)")
    parser.add_argument("--size-mb", type=float, default=1024, help="size of the generated dataset (default 1024)")
    parser.add_argument("--shard-mb", type=float, default=128, help="size of its shards (default 128)")
    parser.add_argument("--calls", type=int, default=2000, help="get_batch calls timed (default 2000)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--context-length", type=int, default=1024)
    parser.add_argument("--tiny-shards", type=int, default=10_000, help="shards of the opening test (default 10000)")
    parser.add_argument("--workdir", default=".", help="where to make the temporary folder (default: here)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="bench_loader.") as tmp:
        tmp = Path(tmp)
        if args.path:
            path = Path(args.path)
        else:
            path = tmp / "big"
            path.mkdir()
            tokens = int(args.size_mb * 1e6) // 2
            started = time.perf_counter()
            write_random_dataset(path, tokens, max(1, int(args.shard_mb * 1e6) // 2))
            print(f"wrote {path}: {tokens:,} uint16 tokens in {time.perf_counter() - started:.1f} s")
        dataset = TokenDataset(path)
        print(f"{path}: {dataset.kind}, {len(dataset):,} tokens, {dataset.num_shards} shard(s)")
        times = time_batches(dataset, args.batch_size, args.context_length, args.calls)
        times.sort()
        print(f"get_batch({args.batch_size}, {args.context_length}): median {statistics.median(times) * 1e3:.3f} ms, "
              f"p90 {times[int(len(times) * 0.9)] * 1e3:.3f} ms over {len(times)} calls")

        tiny = tmp / "tiny"
        tiny.mkdir()
        started = time.perf_counter()
        write_random_dataset(tiny, args.tiny_shards * 2000, 2000, seed=1)
        print(f"wrote {tiny}: {args.tiny_shards:,} shards of 2,000 tokens in {time.perf_counter() - started:.1f} s")
        opens = []
        for _ in range(5):
            started = time.perf_counter()
            small = TokenDataset(tiny)
            opens.append(time.perf_counter() - started)
        started = time.perf_counter()
        small.get_batch(args.batch_size, args.context_length, 0)
        first = time.perf_counter() - started
        print(f"opening {small.num_shards:,} shards: median {statistics.median(opens) * 1e3:.1f} ms "
              f"(then the first batch, mapping its shards: {first * 1e3:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
