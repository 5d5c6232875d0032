"""`bpe stats` and `bpe vocab`: measure tokenizers on a corpus, and list a vocabulary with its counts."""

import argparse

from cs336_basics import report
from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import common
from cs336_basics.cli.common import RunContext, positive_int
from cs336_basics.corpora import sources
from cs336_basics.encode import engines
from cs336_basics.errors import CommandError


def register(commands: argparse._SubParsersAction) -> None:
    """Add `bpe stats` and `bpe vocab` to the subcommands."""
    p = commands.add_parser("stats", help="bytes and characters per token and kinds of tokens on a corpus")
    p.add_argument("input", help="a file, folder, glob or URL (as for train)")
    common.add_corpus_options(p, dask=False)
    common.add_tokenizer_option(p, "folder, tokenizer.json, .tiktoken or a name (e.g. cl100k_base); repeat to compare",
                                repeat=True)
    p.add_argument("--engine", choices=["auto", "python", "tiktoken"], default="auto",
                   help="what encodes the corpus, as for encode (the numbers are the same with each)")
    common.add_special_options(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run_stats)

    p = commands.add_parser("vocab", help="list every token with the merge that made it, that merge's count, its "
                                          "occurrences and whether it is under-trained")
    common.add_tokenizer_option(p, "a tokenizer folder (counts come from its merge_log.tsv, if any), tokenizer.json, "
                                   ".tiktoken or a name (e.g. gpt2)", old_positional=True)
    p.add_argument("--under-trained", action="store_true", help="list only the under-trained tokens, fewest first")
    p.add_argument("--min-count", type=positive_int, metavar="N", help=common.MIN_COUNT_HELP)
    p.add_argument("--sort", choices=["id", "length"],
                   help="list the tokens in id order, or by length: longest first, ties in id order (without "
                        "--sort: id order, or fewest occurrences first with --under-trained)")
    p.add_argument("--text", action="append", metavar="INPUT",
                   help="count occurrences on this text instead of the training corpus (e.g. for a pretrained "
                        "tokenizer); repeatable")
    common.add_corpus_options(p, dask=False)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    common.add_special_options(p)
    p.set_defaults(run=run_vocab)


def run_stats(args: argparse.Namespace, context: RunContext) -> None:
    labels = common.column_names(args.tokenizer)
    tokenizers = [(label, common.load_tokenizer(name, args.special_token, args.pattern))
                  for label, name in zip(labels, args.tokenizer)]
    files = common.corpus_files([args.input])
    path = sources.describe(args.input)
    size = sum(f.size for f in files)
    choices = []
    for (name, tokenizer), source in zip(tokenizers, args.tokenizer):
        try:
            choices.append(engines.choose(tokenizer, args.engine, input_bytes=size))
        except ValueError as e:  # tiktoken asked for, and it cannot give this tokenizer's ids
            raise CommandError(f"{common.labelled(name, source)}: {e}") from None
    from tqdm import tqdm

    # With several files each is measured on its own too (a folder often holds one language per file).
    per_file: list[list[report.TextStats]] = [[] for _ in files]
    columns = []
    # disable=None: no bar when stderr is not a terminal, so a failure stays one line in logs.
    quiet = True if args.quiet else None
    with tqdm(total=size * len(tokenizers), unit="B", unit_scale=True, desc="encoding", disable=quiet) as bar:
        for (name, tokenizer), engine in zip(tokenizers, choices):
            total = report.TextStats()
            for k, f in enumerate(files):
                done = bar.n
                stats = _measure_corpus(tokenizer, [f], args.text_field, lambda n: bar.update(done + n - bar.n),
                                        engine)
                per_file[k].append(stats)
                total.update(stats)
            columns.append((name, total))
    if len(files) > 1:
        for f, stats in zip(files, per_file):
            print(f"{f.path}: {stats[0].bytes:,} bytes, {stats[0].chars:,} characters")
            print(report.stats_table([(name, s) for (name, _), s in zip(tokenizers, stats)]))
            print()
        print("all files:", end=" ")
    first = columns[0][1]
    print(f"{path}: {first.bytes:,} bytes, {first.chars:,} characters")
    print(report.stats_table(columns))
    for (name, _), engine, source in zip(tokenizers, choices, args.tokenizer):
        print(f"  engine for {common.labelled(name, source)}: {engine.engine} ({engine.reason})")


def _measure_corpus(tokenizer: Tokenizer, files: list, text_field: str, on_progress,
                    engine: "engines.Choice | None" = None) -> "report.TextStats":
    """`report.TextStats` of a corpus of any format (see `sources`): each document or block of text
    is measured as it is read, so memory stays flat. The ids come from `engine` (a `Choice` of
    `engines.choose`; the Python engine when None), which gives the same ids as `encode`."""
    engine = engine or engines.choose(tokenizer, "python")
    stats = report.TextStats()
    units = sources.plan_units(files, piece_size=1 << 22, special_tokens=tokenizer.cut_tokens,
                               text_field=text_field, pattern=tokenizer.pattern)
    done = 0
    for unit in units:
        for consumed, text, _ in sources.read_unit(unit):
            if text:
                stats.add(tokenizer, text, engines.encode_text(engine, tokenizer, text).tolist())
            done += consumed
            on_progress(done)
    return stats


def run_vocab(args: argparse.Namespace, context: RunContext) -> None:
    tokenizer = common.load_tokenizer(args.tokenizer, args.special_token, args.pattern)
    log = common.merge_log_of(args.tokenizer, tokenizer)
    occurrences = None
    if args.text:
        quiet = True if args.quiet else None
        files = common.corpus_files(args.text)
        from tqdm import tqdm

        with tqdm(total=sum(f.size for f in files), unit="B", unit_scale=True, desc="encoding", disable=quiet) as bar:
            occurrences = _measure_corpus(tokenizer, files, args.text_field, lambda n: bar.update(n - bar.n)).counts
    elif args.under_trained and (log is None or log.occurrences is None):
        raise CommandError(f"{args.tokenizer} has no merge log with each token's occurrences (bpe train writes it); "
                           "give --text FILE to count them on a text")
    entries = report.vocab_entries(tokenizer, log, occurrences=occurrences, min_count=args.min_count)
    if args.under_trained:
        entries = report.under_trained(entries)
    if args.sort == "id":
        entries = sorted(entries, key=lambda e: e.id)
    elif args.sort == "length":
        entries = sorted(entries, key=lambda e: (-len(e.token), e.id))
    for line in report.vocab_tsv_lines(entries):
        print(line)
