"""`bpe encode`, `bpe decode` and `bpe inspect`: text to token ids and back."""

import argparse
import os
import sys
import time
from pathlib import Path

from cs336_basics import report
from cs336_basics.bpe import Tokenizer, default_num_workers
from cs336_basics.cli import common
from cs336_basics.cli.common import RunContext, byte_size, positive_int
from cs336_basics.corpora import sources
from cs336_basics.encode import engines
from cs336_basics.errors import CommandError
from cs336_basics.text.surrogates import fix_surrogates
from cs336_basics.train.merge_log import readable_token


def register(commands: argparse._SubParsersAction) -> None:
    """Add `bpe encode`, `bpe decode` and `bpe inspect` to the subcommands."""
    p = commands.add_parser("encode", help="encode text files into one NumPy token array or a dataset directory")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help=f"{common.INPUTS_HELP}, encoded in order")
    common.add_corpus_options(p)
    common.add_tokenizer_option(p, "folder, tokenizer.json, .tiktoken file or pretrained name (e.g. cl100k_base)")
    p.add_argument("--out", required=True, metavar="FILE.npy|DIR|PREFIX",
                   help="the array to write, or (not ending in .npy) a dataset directory of shards, resumable, "
                        "or with --format the prefix of a trainer's files")
    p.add_argument("--format", choices=["megatron", "llmc"],
                   help="write a trainer's format at --out PREFIX, resumable: megatron: PREFIX.bin and PREFIX.idx "
                        "(Megatron-LM, NeMo, GPT-NeoX); llmc: PREFIX_000000.bin ... (llm.c, modded-nanogpt)")
    p.add_argument("--shard-tokens", type=positive_int, metavar="N",
                   help="--format llmc: at most N tokens per shard, balanced (default 100,000,000, as llm.c)")
    p.add_argument("--append-separator", action="store_true",
                   help="end the last document with the separator, as Megatron-LM's --append-eod ends every "
                        "document (by default it ends as the input does)")
    p.add_argument("--shard-size", type=byte_size, metavar="SIZE",
                   help="dataset directory: about this many bytes of ids per shard (default 256M)")
    p.add_argument("--overwrite", action="store_true",
                   help="dataset directory: write it anew even if it was started with other settings")
    p.add_argument("--workers", type=common.worker_count, metavar="N", help="processes (default: all cores, 1 for less than 4M of input)")
    p.add_argument("--dtype", choices=["uint16", "uint32", "int32", "int64"],
                   help="the ids' type (default: uint16 if the vocabulary's ids fit, else uint32)")
    p.add_argument("--engine", choices=["auto", "python", "tiktoken"], default="auto",
                   help="auto (default): tiktoken where it is installed and gives our ids, else ours (and ours for "
                        "a small input); python: ours; tiktoken: tiktoken's BPE over our vocabulary (same ids)")
    p.add_argument("--dropout", type=_probability, default=0.0, metavar="P",
                   help="BPE-dropout: skip each merge with probability P, as Hugging Face's BPE(dropout=P) "
                        "(ours only, never tiktoken; a .npy output)")
    p.add_argument("--seed", type=_seed, metavar="S",
                   help="--dropout: the seed, or without it a random one, which the summary prints; the same "
                        "seed gives the same array whatever --workers")
    common.add_special_options(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run_encode)

    p = commands.add_parser("decode", help="print the text of a token array")
    p.add_argument("array", metavar="FILE.npy")
    common.add_tokenizer_option(p, "folder, tokenizer.json, .tiktoken or a name")
    common.add_special_options(p)
    p.set_defaults(run=run_decode)

    p = commands.add_parser("inspect", help="show how a text is cut into tokens")
    p.add_argument("text")
    p.add_argument("--offsets", action="store_true",
                   help="then one line per token: its character span in the text (start, end), id, token and "
                        "the text it spans (a token holding part of a character spans that character)")
    common.add_tokenizer_option(p, "folder, tokenizer.json, .tiktoken or a name")
    common.add_special_options(p)
    p.set_defaults(run=run_inspect)


# --- encode ------------------------------------------------------------------------------------------


def _probability(text: str) -> float:
    """An argument type: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a probability such as 0.1, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a probability between 0 and 1, got {text}")
    return value


def _seed(text: str) -> int:
    """An argument type: a whole number of at least 0."""
    return common.whole_number(text, 0, bounds="a number of at least 0")


def run_encode(args: argparse.Namespace, context: RunContext) -> None:
    tokenizer = common.load_tokenizer(args.tokenizer, args.special_token, args.pattern)
    if args.shard_tokens is not None and args.format != "llmc":
        raise CommandError("--shard-tokens is for --format llmc")
    if args.append_separator and not tokenizer.special_tokens:
        raise CommandError("--append-separator needs a special token to end the last document with "
                           "(--special-token)")
    if args.seed is not None and not args.dropout:
        raise CommandError("--seed is for --dropout (BPE-dropout's random draws); without it encoding is not random")
    files = common.corpus_files(args.inputs)
    if args.dropout and (args.format or not args.out.lower().endswith(".npy")):
        raise CommandError(f"--dropout writes one .npy array; --out {args.out} is a "
                           f"{'--format ' + args.format + ' prefix' if args.format else 'dataset directory'} "
                           "(write FILE.npy, e.g. a fresh one per epoch with another --seed)")
    if args.format:
        return _encode_format(args, context, tokenizer, files)
    if not args.out.lower().endswith(".npy"):
        return _encode_dataset(args, context, tokenizer, files)
    if args.shard_size is not None or args.overwrite:
        raise CommandError(f"--shard-size and --overwrite are for a dataset directory; --out {args.out} is one array")
    out = Path(args.out)
    common.writable_dir(out.parent)
    if out.is_dir():
        raise CommandError(f"--out {out} is a folder; name the .npy file to write")
    common.refuse_outputs_among([out], files)
    context.watch(out)
    total_bytes, workers, engine = _encode_settings(args, tokenizer, files)
    started = time.perf_counter()
    with common.executor(args) as executor, _progress(args, total_bytes) as bar:
        count = tokenizer.encode_file(
            [f.path for f in files], out, num_workers=workers, executor=executor, text_field=args.text_field,
            dtype=args.dtype, on_progress=lambda done: bar.update(done - bar.n), engine=engine,
            append_separator=args.append_separator,
        )
    seconds = time.perf_counter() - started
    _encode_summary(args, files, f"wrote {out}", count, workers, total_bytes, seconds, engine, tokenizer)


def _encode_settings(args: argparse.Namespace, tokenizer: Tokenizer, files: list) -> tuple:
    """(the corpus's bytes, how many workers, the engine) for `bpe encode`, to either output."""
    total_bytes = sum(f.size for f in files)
    workers = args.workers or default_num_workers(total_bytes)
    return total_bytes, workers, engines.choose(tokenizer, args.engine, input_bytes=total_bytes,
                                                dropout=args.dropout, seed=args.seed)


def _progress(args: argparse.Namespace, total_bytes: int):
    """The progress bar of `bpe encode`, counting input bytes (none with --quiet)."""
    from tqdm import tqdm

    return tqdm(total=total_bytes, unit="B", unit_scale=True, desc="encoding", disable=args.quiet)


def _encode_summary(args, files, wrote: str, count: int, workers: int, encoded_bytes: int, seconds: float,
                    engine, tokenizer: Tokenizer) -> None:
    total_bytes = sum(f.size for f in files)
    where = f"on the Dask cluster at {args.dask_scheduler}" if args.dask_scheduler else f"with {workers} worker(s)"
    print(f"{wrote}: {count:,} tokens from {total_bytes:,} bytes {where}")
    if count and encoded_bytes:
        speed = f"{encoded_bytes / 1e6 / max(seconds, 1e-9):.1f} MB/s"
        if all(f.format == "txt" and f.compression is None for f in files):  # file bytes are text bytes
            text_bytes = _encoded_text_bytes(files, tokenizer, args.append_separator)
            print(f"  {report.on_text(text_bytes, count, sources.describe(args.inputs))}; {speed}")
        else:
            print(f"  {speed} of input files (see `bpe stats` for bytes of text per token)")
    print(f"  engine: {engine.engine} ({engine.reason})")


def _encoded_text_bytes(files: list, tokenizer: Tokenizer, append_separator: bool) -> int:
    """The UTF-8 bytes of the text that `.txt` `files` encode as: their bytes, with the separator (the
    first special token) that joins each two non-empty files, and the one --append-separator adds
    unless the text ends with it, so that bytes per token is that of `encode` of the same text."""
    written = [f for f in files if f.size]
    if not tokenizer.special_tokens or not written:
        return sum(f.size for f in written)
    separator = tokenizer.special_tokens[0].encode("utf-8")
    joins = len(written) - 1
    if append_separator:
        with open(written[-1].path, "rb") as f:
            f.seek(max(written[-1].size - len(separator), 0))
            joins += f.read() != separator
    return sum(f.size for f in written) + joins * len(separator)


def _encode_dataset(args: argparse.Namespace, context: RunContext, tokenizer: Tokenizer, files: list) -> None:
    """`bpe encode ... --out DIR`: a dataset directory (see `datasets.writer`), resumed if started."""
    out = args.out if sources.is_url(args.out) else Path(args.out)
    total_bytes, workers, engine = _encode_settings(args, tokenizer, files)
    started = time.perf_counter()
    with common.executor(args) as executor, _progress(args, total_bytes) as bar:
        try:
            written = tokenizer.encode_dataset(
                args.inputs, out, shard_size=args.shard_size, num_workers=workers, executor=executor,
                text_field=args.text_field, dtype=args.dtype, overwrite=args.overwrite,
                on_progress=lambda done: bar.update(done - bar.n), engine=engine,
                append_separator=args.append_separator,
            )
        except KeyboardInterrupt:
            bar.close()
            context.resumable = out
            raise
    seconds = time.perf_counter() - started
    _encode_summary(args, files, f"wrote {str(out).rstrip('/')}/ ({written.shards:,} shards, {written.documents:,} documents)",
                    written.tokens, workers, written.input_bytes - written.reused_bytes, seconds, engine, tokenizer)
    if written.reused_bytes:
        print(f"  reused {written.reused_bytes:,} of {written.input_bytes:,} input bytes from an earlier run "
              f"({written.reused_shards:,} of {written.shards:,} shards whole)")


def _encode_format(args: argparse.Namespace, context: RunContext, tokenizer: Tokenizer, files: list) -> None:
    """`bpe encode ... --format megatron|llmc --out PREFIX`: through a hidden dataset directory beside
    the prefix, resumed if started (see `datasets.convert.write_format`)."""
    from cs336_basics.datasets.convert import output_paths, work_directory, write_format
    from cs336_basics.formats import llmc

    if sources.is_url(args.out):
        raise CommandError(f"--format {args.format} writes local files; --out {args.out} is a URL "
                           "(write a dataset directory there instead)")
    out = Path(args.out)
    if out.is_dir() or args.out.endswith(("/", os.sep)) or out.suffix.lower() in (".npy", ".bin", ".idx"):
        raise CommandError(f"--out {args.out}: give a prefix such as data/{args.format}/train, a folder and a "
                           f"name without an ending (--format {args.format} adds the files' endings)")
    common.writable_dir(out.parent)
    outputs = output_paths(out, args.format)
    common.refuse_outputs_among([*outputs, work_directory(out)], files)
    context.watch(*outputs)
    total_bytes, workers, engine = _encode_settings(args, tokenizer, files)
    started = time.perf_counter()
    with common.executor(args) as executor, _progress(args, total_bytes) as bar:
        def write_directory(folder: Path):
            return tokenizer.encode_dataset(
                args.inputs, folder, shard_size=args.shard_size, num_workers=workers, executor=executor,
                text_field=args.text_field, dtype=args.dtype, overwrite=args.overwrite,
                on_progress=lambda done: bar.update(done - bar.n), engine=engine)

        converting_started = []

        def converting(done: int, tokens: int) -> None:
            if not converting_started:  # the same bar goes on, counting the tokens written
                converting_started.append(True)
                bar.reset(total=tokens)
                bar.set_description(f"writing {args.format}")
                bar.unit = "tok"
            bar.update(done - bar.n)

        try:
            written, converted = write_format(write_directory, out, args.format,
                                              shard_tokens=args.shard_tokens or llmc.DEFAULT_SHARD_TOKENS,
                                              append_separator=args.append_separator, on_converting=converting)
        except KeyboardInterrupt:
            bar.close()
            context.resumable = out
            raise
    seconds = time.perf_counter() - started
    where = ", ".join(str(p) for p in converted.paths[:2]) + (
        f" ... ({len(converted.paths):,} files)" if len(converted.paths) > 2 else "")
    _encode_summary(args, files, f"wrote {where} ({converted.documents:,} documents)", converted.tokens, workers,
                    written.input_bytes - written.reused_bytes, seconds, engine, tokenizer)
    if written.reused_bytes:
        print(f"  reused {written.reused_bytes:,} of {written.input_bytes:,} input bytes from an earlier run")


# --- decode, inspect ---------------------------------------------------------------------------------


def run_decode(args: argparse.Namespace, context: RunContext) -> None:
    import numpy as np

    tokenizer = common.load_tokenizer(args.tokenizer, args.special_token, args.pattern)
    path = common.readable_file(Path(args.array))
    try:
        ids = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, EOFError, OSError) as e:
        raise CommandError(f"{path} is not a NumPy token array: {e or 'empty file'}") from None
    if not isinstance(ids, np.ndarray):
        raise CommandError(f"{path} is not a NumPy token array (an .npz archive?)")
    if ids.ndim != 1 or ids.dtype.kind not in "ui":
        raise CommandError(f"{path} holds a {ids.dtype} array of shape {ids.shape}; expected 1-D integer ids")
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out = sys.stdout
    for start in range(0, len(ids), 1 << 20):
        out.write(decoder.decode(tokenizer.decode_bytes(ids[start : start + (1 << 20)])))
    out.write(decoder.decode(b"", final=True))


def run_inspect(args: argparse.Namespace, context: RunContext) -> None:
    if args.text != fix_surrogates(args.text):  # bytes the terminal's encoding could not decode
        raise CommandError("the text argument is not valid in this terminal's encoding (it decodes to "
                           "surrogates); set a UTF-8 locale, e.g. LANG=C.UTF-8")
    tokenizer = common.load_tokenizer(args.tokenizer, args.special_token, args.pattern)
    ids, spans = tokenizer.encode_with_offsets(args.text)
    colour = sys.stdout.isatty() and os.environ.get("NO_COLOR") is None
    pieces = []
    for n, token_id in enumerate(ids):
        text = readable_token(tokenizer.vocab[token_id])
        if colour:
            pieces.append(f"\x1b[{(41, 44, 42, 45)[n % 4]};97m{text}\x1b[0m")
        else:
            pieces.append(f"[{text}]")
    print("".join(pieces))
    print(" ".join(map(str, ids)))
    print(f"{len(ids)} tokens, {len(args.text.encode())} bytes")
    if args.offsets:
        _print_offsets(args.text, ids, spans, tokenizer)


def _print_offsets(text: str, ids: list[int], spans: list[tuple[int, int]], tokenizer: Tokenizer) -> None:
    """`bpe inspect --offsets`: a header, then each token's span, id, token and the text it spans, in columns."""
    rows = [("start", "end", "id", "token", "text")] + [
        (str(start), str(end), str(token_id), f"[{readable_token(tokenizer.vocab[token_id])}]",
         f"[{readable_token(text[start:end].encode())}]")
        for token_id, (start, end) in zip(ids, spans)
    ]
    widths = [max(len(row[k]) for row in rows) for k in range(4)]
    for row in rows:
        print("  ".join([*(cell.rjust(w) if k < 3 else cell.ljust(w) for k, (cell, w) in enumerate(zip(row, widths))),
                         row[4]]))
