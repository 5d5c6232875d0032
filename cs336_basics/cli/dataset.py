"""`bpe dataset info|verify|convert`: look at, check and convert token datasets."""

import argparse
from pathlib import Path

from cs336_basics.cli import common
from cs336_basics.cli.common import RunContext, positive_int
from cs336_basics.errors import CommandError


def register(commands: argparse._SubParsersAction) -> None:
    """Add `bpe dataset` and its own subcommands to the subcommands."""
    dataset_help = "a dataset directory, a .npy token array, a Megatron prefix or llm.c shards' prefix"
    group = commands.add_parser("dataset", help="look at, check and convert token datasets")
    subcommands = group.add_subparsers(dest="dataset_command", required=True)
    p = subcommands.add_parser("info", help="tokens, documents, shards, dtype and tokenizer of a dataset")
    p.add_argument("dataset", metavar="DATASET", help=dataset_help)
    p.set_defaults(run=run_dataset_info)
    p = subcommands.add_parser("verify", help="check every shard against the manifest (size, sha256)")
    p.add_argument("dataset", metavar="DATASET", help=dataset_help)
    p.set_defaults(run=run_dataset_verify)
    p = subcommands.add_parser("convert", help="write a dataset directory in a format trainers read")
    p.add_argument("dataset", metavar="DIR", help="a dataset directory (written by `bpe encode --out DIR/`)")
    p.add_argument("--format", required=True, choices=["megatron", "llmc"],
                   help="megatron: PREFIX.bin and PREFIX.idx (Megatron-LM, NeMo, GPT-NeoX); "
                        "llmc: PREFIX_000000.bin ... (llm.c, modded-nanogpt)")
    p.add_argument("--out", required=True, metavar="PREFIX", help="where to write, without extension")
    p.add_argument("--shard-tokens", type=positive_int, default=10**8, metavar="N",
                   help="llmc: at most N tokens per shard, balanced so none is small (default 100,000,000, as llm.c)")
    p.add_argument("--append-separator", action="store_true",
                   help="end the last document with the separator if it does not end with one, as Megatron-LM's "
                        "--append-eod ends every document")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run_dataset_convert)


def _open_dataset(path: str):
    from cs336_basics.datasets.loader import TokenDataset

    return TokenDataset(path)


def run_dataset_info(args: argparse.Namespace, context: RunContext) -> None:
    ds = _open_dataset(args.dataset)
    print(f"{ds.path}: {ds.kind}")
    print(f"  tokens     {len(ds):,}")
    print(f"  documents  {ds.num_documents:,}" if ds.has_documents else "  documents  (not recorded by this format)")
    print(f"  shards     {ds.num_shards:,}")
    print(f"  dtype      {ds.dtype}")
    if ds.manifest is not None:
        tok = ds.manifest.get("tokenizer")
        tok = tok if isinstance(tok, dict) else {}
        specials = ", ".join(tok.get("special_tokens") or []) or "none"
        print(f"  tokenizer  vocab {tok.get('vocab_size')}, pattern {tok.get('pattern')}, special tokens {specials}, "
              f"separator id {tok.get('separator_id')}, tokenizer.json sha256 {str(tok.get('sha256'))[:12]}...")


def run_dataset_verify(args: argparse.Namespace, context: RunContext) -> None:
    ds = _open_dataset(args.dataset)
    ds.verify()
    checked = "headers and sizes agree"
    if ds.kind == "directory":
        checked = "every shard's size and sha256 match the manifest"
    print(f"{ds.path}: ok ({len(ds):,} tokens in {ds.num_shards:,} shard(s); {checked})")


def run_dataset_convert(args: argparse.Namespace, context: RunContext) -> None:
    from cs336_basics.datasets.convert import convert_dataset
    from cs336_basics.formats import llmc, megatron

    out = Path(args.out)
    if out.is_dir():
        raise CommandError(f"--out {out} is a folder; give a prefix such as {out / 'train'}")
    common.writable_dir(out.parent)
    if args.format == "megatron":
        context.watch(*megatron.paths(out))
    else:
        present = 0
        while llmc.shard_path(out, present).is_file():
            present += 1
        context.watch(*(llmc.shard_path(out, k) for k in range(present + 1)))
    from tqdm import tqdm

    from cs336_basics.datasets.loader import KIND_NAMES

    ds = _open_dataset(args.dataset)
    if ds.kind != "directory":
        raise CommandError(f"{args.dataset}: {KIND_NAMES[ds.kind]}; convert reads a dataset directory "
                           "(written by `bpe encode --out DIR/`)")
    with tqdm(total=len(ds), unit="tok", unit_scale=True, desc="converting", disable=args.quiet) as bar:
        done = convert_dataset(args.dataset, out, args.format, shard_tokens=args.shard_tokens,
                               append_separator=args.append_separator, on_progress=lambda n: bar.update(n - bar.n))
    where = ", ".join(str(p) for p in done.paths[:2])
    if len(done.paths) > 2:
        where += f" ... ({len(done.paths)} files)"
    print(f"wrote {where}: {done.tokens:,} tokens, {done.documents:,} documents")
