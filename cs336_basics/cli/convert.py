"""`bpe convert`: write a tokenizer in another format (Hugging Face, tiktoken, GPT-2's two files)."""

import argparse
import sys
from pathlib import Path

from cs336_basics.cli import common
from cs336_basics.cli.common import RunContext
from cs336_basics.errors import CommandError


def register(commands: argparse._SubParsersAction) -> None:
    """Add `bpe convert` to the subcommands."""
    p = commands.add_parser("convert", help="write a tokenizer in another format")
    common.add_tokenizer_option(p, "the tokenizer to convert: a folder, tokenizer.json, .tiktoken file or pretrained "
                                   "name", old_positional=True)
    formats = p.add_mutually_exclusive_group(required=True)
    option = formats.add_argument(
        "--format", choices=["hf", "tiktoken", "gpt2"],
        help="hf: a folder with tokenizer.json (and vocab.json, merges.txt); tiktoken: a .tiktoken rank file; "
             "gpt2: a folder with vocab.json and merges.txt")
    common.add_alias(formats, option, "--to")
    p.add_argument("--out", required=True, metavar="PATH")
    common.add_special_options(p)
    p.set_defaults(run=run_convert)


def run_convert(args: argparse.Namespace, context: RunContext) -> None:
    tokenizer = common.load_tokenizer(args.tokenizer, args.special_token, args.pattern)
    pattern = tokenizer.pattern
    out = Path(args.out)
    names = {"tiktoken": [], "hf": ["vocab.json", "merges.txt", "tokenizer.json"], "gpt2": ["vocab.json", "merges.txt"]}
    common.refuse_outputs_among([out / n for n in names[args.format]] or [out], common.tokenizer_files(args.tokenizer))
    if args.format == "tiktoken":
        if out.is_dir():
            raise CommandError(f"--out {out} is a folder; name the .tiktoken file to write")
        common.writable_dir(out.parent)
        context.watch(out)
        tokenizer.save_tiktoken(out)
        specials = ", ".join(f"{t}={tokenizer.encode(t)[0]}" for t in tokenizer.special_tokens) or "none"
        print(f"wrote {out} ({len(tokenizer.vocab) - len(tokenizer.special_tokens):,} ranks; special tokens, "
              f"not in the file: {specials}; pattern: {pattern})")
        return
    common.writable_dir(out)
    common.refuse_folders_at([out / n for n in names[args.format]])
    if args.format == "hf":
        context.watch(out / "vocab.json", out / "merges.txt", out / "tokenizer.json")
        tokenizer.save_pretrained(out)
        print(f"wrote {out / 'tokenizer.json'}, {out / 'vocab.json'} and {out / 'merges.txt'}")
    else:
        if pattern != "gpt2":
            print(f"bpe: note: vocab.json and merges.txt do not record the pattern {pattern!r}", file=sys.stderr)
        context.watch(out / "vocab.json", out / "merges.txt")
        tokenizer.save(out / "vocab.json", out / "merges.txt")
        print(f"wrote {out / 'vocab.json'} and {out / 'merges.txt'}")
