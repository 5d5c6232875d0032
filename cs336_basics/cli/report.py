"""`bpe report` and `bpe serve`: a tokenizer's page written to a file, and a live page comparing
tokenizers on text typed in a browser."""

import argparse
import sys
from pathlib import Path

from cs336_basics import report
from cs336_basics.cli import common
from cs336_basics.cli.common import RunContext, byte_size, positive_int
from cs336_basics.errors import CommandError
from cs336_basics.formats import pretrained
from cs336_basics.formats.staged import atomic_write_texts


def register(commands: argparse._SubParsersAction) -> None:
    """Add `bpe report` and `bpe serve` to the subcommands."""
    p = commands.add_parser("report",
                            help="write an HTML page on what the tokenizer learned (needs the `report` extra)")
    # The tokenizer was once the first positional argument, and --tokenizer only named the others:
    # `report_sources` still reads `bpe report DIR [TEXT ...] [--tokenizer OTHER ...]` so.
    p.add_argument("texts", nargs="*", metavar="TEXT", help="held-out UTF-8 text to measure and show")
    option = common.add_tokenizer_option(
        p, "the tokenizer to report on: a folder (the training curve needs its merge_log.tsv), tokenizer.json, "
           ".tiktoken or a name; repeat to compare it with others (compared by default with gpt2, cl100k_base and "
           "o200k_base, where they load)", required=False, repeat=True)
    option.needed = True  # unless given the old way (see `cli._Parser`)
    p.add_argument("--out", default="report.html", metavar="FILE.html", help="the page to write (default: report.html)")
    p.add_argument("--sample-bytes", type=byte_size, default=1 << 20, metavar="SIZE",
                   help="read at most this many bytes of each TEXT (default 1M)")
    p.add_argument("--min-count", type=positive_int, metavar="N", help=common.MIN_COUNT_HELP)
    common.add_special_options(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run_report)

    p = commands.add_parser("serve", help="a local web page: type text, see it cut by several tokenizers side by side")
    common.add_tokenizer_option(p, "folder, tokenizer.json, .tiktoken or a name; repeat to compare (default: "
                                   "out/tokenizer if it exists, gpt2 and cl100k_base)", required=False, repeat=True)
    p.add_argument("--port", type=common.port_number, default=8000, help="the port (default 8000; 0 takes a free one)")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1, this machine only)")
    p.add_argument("--allow-remote", action="store_true", help="allow a --host other machines can reach")
    p.add_argument("--max-bytes", type=byte_size, default=100_000, metavar="SIZE",
                   help="the longest text a request may send, in bytes (default 100000)")
    common.add_special_options(p)
    p.set_defaults(run=run_serve)


def report_sources(args: argparse.Namespace) -> tuple[str, list[str], list[str]]:
    """(the tokenizer to report on, the ones to compare it with, the texts) of `bpe report`: from
    `--tokenizer T [--tokenizer OTHER ...] [TEXT ...]`, or the old `DIR [TEXT ...] [--tokenizer
    OTHER ...]`, read so when there is no --tokenizer or when the first positional argument cannot
    be a text (a folder, a pretrained name, a .json or .tiktoken file: what DIR used to name)."""
    given, positionals = args.tokenizer or [], args.texts
    if positionals and (not given or _names_a_tokenizer(positionals[0])):
        return positionals[0], given, positionals[1:]
    if not given:
        raise common.usage_error("report", "the following arguments are required: -t/--tokenizer")
    return given[0], given[1:], positionals


def _names_a_tokenizer(source: str) -> bool:
    path = Path(source)
    if path.is_dir() or (source in pretrained.NAMES and not path.is_file()):
        return True
    return path.name.endswith((".json", ".tiktoken", ".tiktoken.gz"))


def run_report(args: argparse.Namespace, context: RunContext) -> None:
    source, others, text_paths = report_sources(args)
    args.tokenizer = [source, *others]  # so that an error names them as given
    out = Path(args.out)
    common.writable_dir(out.parent)
    if out.is_dir():
        raise CommandError(f"--out {out} is a folder; name the .html file to write")
    tokenizer_files = [f for t in args.tokenizer for f in common.tokenizer_files(t)]
    common.refuse_outputs_among([out], [*text_paths, *tokenizer_files])
    context.watch(out)
    tokenizer = common.load_tokenizer(source, args.special_token, args.pattern)
    compare: list = report.PRETRAINED  # loaded by the page, which says why one is not available
    if others:  # given by the user: each must load (they bring their own pattern and special tokens)
        labels = common.column_names(others, taken=(common.short_name(source),))
        compare = [(label, common.load_tokenizer(other, None)) for label, other in zip(labels, others)]
    texts = [report.read_sample(common.readable_file(Path(p)), args.sample_bytes) for p in text_paths]
    page = report.build_report(
        tokenizer, name=common.short_name(source), path=source, log=common.merge_log_of(source, tokenizer),
        texts=texts, min_count=args.min_count, progress=not args.quiet, pretrained=compare,
    )
    atomic_write_texts({out: page})
    print(f"wrote {out}")


def run_serve(args: argparse.Namespace, context: RunContext) -> None:
    from cs336_basics import serve

    names = args.tokenizer
    if not names:  # ours where `bpe train` puts it by default, beside GPT-2's and GPT-4's when they load
        names = [n for n in ("out/tokenizer", "gpt2", "cl100k_base") if n != "out/tokenizer" or Path(n).is_dir()]
    served = []
    for name, label in zip(names, common.column_names(names)):
        try:
            tokenizer = common.load_tokenizer(name, args.special_token, args.pattern)
        except (ValueError, OSError) as e:
            if args.tokenizer:
                raise
            print(f"bpe: note: leaving out {name}: {e}", file=sys.stderr)
            continue
        log = common.merge_log_of(name, tokenizer) if Path(name).is_dir() else None
        served.append(serve.Served(label, tokenizer, log))
    if not served:
        raise CommandError("no tokenizer to serve: give --tokenizer DIR (or a name such as gpt2)")
    try:
        server = serve.make_server(served, host=args.host, port=args.port, allow_remote=args.allow_remote,
                                   max_bytes=args.max_bytes)
    except OSError as e:
        raise CommandError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    host, port = server.server_address[:2]
    print(f"serving {', '.join(s.name for s in served)} on http://{host}:{port}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print("bpe serve: stopped", flush=True)
