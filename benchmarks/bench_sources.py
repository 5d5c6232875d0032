"""Training and encoding the same documents stored as .txt, .jsonl.gz and .parquet, and on a Dask
LocalCluster against local processes.

    uv run python benchmarks/bench_sources.py CORPUS.txt [--vocab-size 10000] [--runs 2] [--workers 2]

CORPUS.txt holds documents separated by `<|endoftext|>`. The other formats are written from it into a
temporary folder (deleted at the end): one `.jsonl.gz`, the same split into 8 `.jsonl.gz` shards,
and one `.parquet` with row groups of about 4 MB. Each contender runs once per round, in turn, in this
process; the script prints medians and ratios against `.txt` with local processes (the anchor), and
checks that every contender gives the anchor's merges and ids.
"""

import argparse
import gzip
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from cs336_basics.bpe import Tokenizer, train_bpe

EOT = "<|endoftext|>"


def write_formats(corpus: Path, folder: Path) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = corpus.read_text(encoding="utf-8").split(EOT)
    paths = {"txt": folder / "corpus.txt", "jsonl.gz": folder / "corpus.jsonl.gz",
             "jsonl.gz x8": folder / "shards", "parquet": folder / "corpus.parquet"}
    paths["txt"].write_text(EOT.join(docs), encoding="utf-8")
    lines = [json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs]
    with gzip.open(paths["jsonl.gz"], "wt", encoding="utf-8", compresslevel=6) as f:
        f.writelines(lines)
    paths["jsonl.gz x8"].mkdir()
    per = -(-len(lines) // 8)
    for i in range(8):
        with gzip.open(paths["jsonl.gz x8"] / f"shard-{i}.jsonl.gz", "wt", encoding="utf-8", compresslevel=6) as f:
            f.writelines(lines[i * per : (i + 1) * per])
    rows = max(1, len(docs) * (4 << 20) // max(paths["txt"].stat().st_size, 1))
    pq.write_table(pa.table({"text": docs}), paths["parquet"], row_group_size=rows)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    import distributed

    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:
        folder = Path(scratch)
        paths = write_formats(args.corpus, folder)
        for name, p in paths.items():
            size = sum(f.stat().st_size for f in p.rglob("*")) if p.is_dir() else p.stat().st_size
            print(f"{name:12s} {size / 1e6:8.1f} MB on disk")
        cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=40)
        client = distributed.Client(cluster)
        contenders = {f"{name}, local": (p, None) for name, p in paths.items()}
        contenders["txt, Dask LocalCluster"] = (paths["txt"], client.get_executor())
        contenders["parquet, Dask LocalCluster"] = (paths["parquet"], client.get_executor())

        train_times = {name: [] for name in contenders}
        encode_times = {name: [] for name in contenders}
        anchor = "txt, local"
        reference = None
        tokenizer = None
        for _ in range(args.runs):
            for name, (path, executor) in contenders.items():
                start = time.perf_counter()
                result = train_bpe(path, args.vocab_size, [EOT], num_workers=args.workers, executor=executor)
                train_times[name].append(time.perf_counter() - start)
                if reference is None:
                    reference = result
                    tokenizer = Tokenizer(*result, [EOT])
                assert result == reference, f"{name}: different merges"
            for name, (path, executor) in contenders.items():
                out = folder / "ids.npy"
                start = time.perf_counter()
                tokenizer.encode_file(path, out, num_workers=args.workers, executor=executor)
                encode_times[name].append(time.perf_counter() - start)
                ids = np.load(out)
                if name == anchor:
                    expected = ids
                elif len(ids) != len(expected) or not np.array_equal(ids, expected):
                    raise AssertionError(f"{name}: different ids")
        client.close()
        cluster.close()

    mb = args.corpus.stat().st_size / 1e6
    print(f"\n{args.corpus} ({mb:.1f} MB), vocab {args.vocab_size}, {args.workers} workers, {args.runs} runs; "
          f"same merges and ids everywhere")
    for title, times in (("training", train_times), ("encoding", encode_times)):
        base = statistics.median(times[anchor])
        print(f"{title}:")
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"  {name:28s} median {m:7.2f} s  ({mb / m:5.1f} MB/s)  {m / base:5.2f}x the .txt/local time")


if __name__ == "__main__":
    main()
