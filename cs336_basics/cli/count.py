"""`bpe count`: count the pre-tokens of a corpus into a count table, or add tables up (`--add`)."""

import argparse
from pathlib import Path

from cs336_basics.cli import common, memory
from cs336_basics.cli.common import DEFAULT_SPECIAL, RunContext, byte_size
from cs336_basics.corpora import executors, sources
from cs336_basics.errors import CommandError
from cs336_basics.train import trainer


def register(commands: argparse._SubParsersAction) -> None:
    """Add `bpe count` to the subcommands."""
    p = commands.add_parser(
        "count", help="count the pre-tokens of a corpus into a count table (train from it with bpe train --counts)")
    p.add_argument("inputs", nargs="*", metavar="INPUT", help=common.INPUTS_HELP)
    adding = p.add_mutually_exclusive_group()
    option = adding.add_argument("--add", nargs="+", metavar="TABLE",
                                 help="add up these count tables into --out instead of counting")
    common.add_alias(adding, option, "--merge")
    p.add_argument("--out", required=True, metavar="DIR", help="the count table's folder")
    common.add_corpus_options(p)
    common.add_special_options(p)
    p.add_argument("--workers", type=common.worker_count, metavar="N",
                   help="processes for counting (default: all cores, 1 for less than 4M of input)")
    p.add_argument("--piece-size", type=byte_size, metavar="SIZE",
                   help="input bytes per shard, e.g. 64M (default: the input over the workers, so one shard per "
                        "worker, at least 1M and at most 1G; when resuming, as the unfinished table planned)")
    p.add_argument("--overwrite", action="store_true", help="count anew into a folder holding a table of other settings")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    memory.add_options(p)
    p.set_defaults(run=run_count)


def run_count(args: argparse.Namespace, context: RunContext) -> None:
    from cs336_basics.counts import table, writer

    out = Path(args.out)
    if args.add:
        if args.inputs:
            raise CommandError("bpe count takes either INPUT... to count or --add TABLE..., not both")
        manifest = table.merge_tables(args.add, common.writable_dir(out))
        totals = manifest["totals"]
        print(f"added up {len(args.add)} count tables into {out}: {totals['occurrences']:,} pre-tokens "
              f"({totals['rows']:,} distinct) from {totals['input_bytes']:,} bytes of input")
        return
    if not args.inputs:
        raise CommandError("bpe count needs INPUT... to count (or --add TABLE... to add tables up)")
    files = common.corpus_files(args.inputs, outside=[out])
    common.refuse_outputs_among([out], files)
    specials = args.special_token if args.special_token is not None else [DEFAULT_SPECIAL]
    size = sum(f.size for f in files)
    workers = args.workers or executors.default_num_workers(size)
    memory.check(args, files, specials, args.pattern or "gpt2", workers, table=True)
    context.resumable = out
    with common.executor(args) as executor, trainer.progress_bar(
        not args.quiet, total=size, unit="B", unit_scale=True, desc="counting"
    ) as bar:
        counted = writer.count_corpus(
            [f.path for f in files], common.writable_dir(out), special_tokens=specials, pattern=args.pattern or "gpt2",
            num_workers=workers, executor=executor, piece_size=args.piece_size, text_field=args.text_field,
            overwrite=args.overwrite, on_progress=(lambda done: bar.update(done - bar.n)) if bar else None,
            files=files, min_pretoken_count=args.min_pretoken_count or 1,
        )
    reused = f" ({counted.reused_shards} kept from an earlier run)" if counted.reused_shards else ""
    print(f"counted {sources.describe(args.inputs)} ({counted.input_bytes:,} bytes) into {out}: "
          f"{counted.shards} shard(s){reused}, {counted.occurrences:,} pre-tokens; "
          f"train with: bpe train --counts {out} --vocab-size N")
