"""The `bpe` command: train a tokenizer, encode files to token arrays, decode, inspect and measure.

    bpe train [INPUT...] --vocab-size N --special-token TOKEN ... --out DIR [--workers N] [--pattern NAME]
    bpe count INPUT... --out COUNTS/ ;  bpe count --add A/ B/ --out C/ ;  bpe train --counts COUNTS/ --vocab-size N
    bpe encode --tokenizer DIR INPUT... --out FILE.npy [--workers N]
    bpe encode --tokenizer DIR INPUT... --out DIR [--shard-size 256M] [--overwrite]
    bpe encode --tokenizer DIR INPUT... --format megatron|llmc --out PREFIX [--shard-tokens N]
    (any encode: --append-separator ends the last document with the separator)

An INPUT is a file, folder, glob or URL of .txt, .jsonl or .parquet files (see `sources`);
`--text-field` names the JSON field or Parquet column, `--dask-scheduler ADDRESS` runs the work on
a Dask cluster.
    bpe decode --tokenizer DIR FILE.npy
    bpe inspect --tokenizer DIR "some text"
    bpe stats --tokenizer DIR [--tokenizer DIR2 ...] INPUT [--engine auto|python|tiktoken]
    bpe vocab --tokenizer DIR
    bpe report --tokenizer DIR [--tokenizer OTHER ...] [TEXT ...] --out report.html
    bpe serve [--tokenizer DIR ...] [--port N]
    bpe convert --tokenizer DIR --format hf|tiktoken|gpt2 --out PATH
    bpe dataset info DATASET
    bpe dataset verify DATASET
    bpe dataset convert DIR --format megatron|llmc --out PREFIX [--shard-tokens N] [--append-separator]

--tokenizer (or -t) takes a folder, a tokenizer.json, a .tiktoken file (an open model's that we
know, such as Qwen's, brings its pattern and special tokens), or a pretrained name (gpt2, r50k_base,
p50k_base, cl100k_base, o200k_base; read through tiktoken). A size (--shard-size, --piece-size, ...)
is a number of bytes, with K, M or G for 2**10, 2**20 or 2**30 of them (4096, 64M, 1G). The older
spellings (`bpe vocab DIR`, `bpe report DIR`, `bpe convert SRC --to`, `bpe count --merge`) still
work, hidden from --help.

Every failure ends the command with one line on stderr (`bpe: ...`) and the exit status
docs/cli.md's table gives: 1 for an error, 2 for words that do not parse; Ctrl-C and SIGTERM leave no partly
written output (and no temporary file) and exit with 130 and 143.

Each command is a module of this package (`train`; `encode` with decode and inspect; `stats` with
vocab; `report` with serve; `convert`; `dataset`) that adds its own subparser (`register`) and whose
`run_*` functions take the parsed arguments and the run's `common.RunContext`; what they share is
in `common`. This module holds `main`, the one place where an error becomes a line and a status.
"""

import argparse
import contextlib
import os
import signal
import sys
import threading

from cs336_basics.cli import convert, count, dataset, encode, report, stats, train
from cs336_basics.cli.common import RunContext, UsageError
from cs336_basics.errors import BpeError, PatternTimeout

# The commands, in the order `bpe --help` lists them.
COMMANDS = (train, encode, stats, report, convert, dataset, count)


class Terminated(KeyboardInterrupt):
    """SIGTERM (sent by `kill`, systemd, Slurm, Kubernetes), raised where the command is, so that it
    cleans up exactly as after Ctrl-C: temporary files removed, workers stopped, no output half-made."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(f"bpe: {message} (see {self.prog} --help)")

    def format_usage(self) -> str:
        with _needed_shown_required(self):
            return super().format_usage()

    def format_help(self) -> str:
        with _needed_shown_required(self):
            return super().format_help()


@contextlib.contextmanager
def _needed_shown_required(parser: argparse.ArgumentParser):
    """While --help is written, an option that must be given either as itself or through a hidden
    alias (`action.needed`, see `common.add_tokenizer_option`) counts as required, so the usage line
    does not bracket it. argparse cannot mark it required: it would then refuse the alias alone."""
    needed = [a for a in parser._actions if getattr(a, "needed", False) and not a.required]
    for action in needed:
        action.required = True
    try:
        yield
    finally:
        for action in needed:
            action.required = False


def build_parser() -> argparse.ArgumentParser:
    """The parser of `bpe`, each command adding its own subparser. Building it has no side effects
    (nothing is read, written or imported beyond this package), so docs can be made from it."""
    parser = _Parser(prog="bpe", description="Byte-level BPE: train, encode, decode, inspect.")
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `bpe` with `argv` (default: the process's arguments) and return its exit status: 0, 1
    for an error (said in one line on stderr), 2 for words that do not parse, 130 after Ctrl-C, 143
    after SIGTERM. With `argv` None, `main` is the process's command: SIGTERM keeps its meaning
    until the process ends (one that arrives as it exits ends it with 143 and the line)."""
    context = RunContext()
    with _sigterm_as_interrupt(context, to_the_end=argv is None):
        status = _main(argv, context)
        if status == 0:
            context.resumable = None  # finished: nothing is left to resume
        return status


def _main(argv: list[str] | None, context: RunContext) -> int:
    try:
        args = build_parser().parse_args(argv)
        args.run(args, context)
    except UsageError as e:
        print(e, file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        return _interrupted(e, context)
    except PatternTimeout as e:  # a regex from the tokenizer's files (or --pattern) ran too long
        source = getattr(args, "tokenizer", None)
        if source and not args.pattern:
            e = f"the pattern of {source if isinstance(source, str) else ', '.join(source)}: {e}"
        print(f"bpe: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `bpe decode ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (BpeError, ValueError, OSError, ImportError) as e:
        if isinstance(e, ImportError) and _caused_by_interrupt(e):
            # Ctrl-C during an import (numpy reports it as an ImportError)
            return _interrupted(_caused_by_interrupt(e), context)
        print(f"bpe: {e}", file=sys.stderr)
        return 1
    return 0


@contextlib.contextmanager
def _sigterm_as_interrupt(context: RunContext, *, to_the_end: bool):
    """While the command runs, SIGTERM raises `Terminated` in this process. With `to_the_end` the
    handler stays once the command has ended: a SIGTERM while the process exits (joining threads,
    running atexit) then ends it at once with 143 and the line, where the default would end it
    with -15 and no word. Forked workers inherit the handler: there it restores the default and
    ends the worker, as SIGTERM would have."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (and only it receives signals)
        return
    main_pid = os.getpid()
    ended = False

    def handler(signum, frame):
        if os.getpid() != main_pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if not ended:
            raise Terminated()
        with contextlib.suppress(Exception):  # e.g. its reader has gone
            sys.stdout.flush()
        with contextlib.suppress(Exception):  # e.g. a write to stderr that the signal interrupted
            _interrupted(Terminated(), context)
            sys.stderr.flush()
        os._exit(143)  # at once: the exit it interrupted is not taken up again

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        ended = True
        if not to_the_end:
            signal.signal(signal.SIGTERM, previous)


def _interrupted(error: BaseException | None, context: RunContext) -> int:
    what, status = ("terminated (SIGTERM)", 143) if isinstance(error, Terminated) else ("interrupted", 130)
    written = context.changed()
    if context.resumable is not None:
        print(f"bpe: {what}; run the same command again to finish {context.resumable} "
              "(what is finished is kept)", file=sys.stderr)
    elif written:
        print(f"bpe: {what} after the output was complete: {', '.join(map(str, written))}", file=sys.stderr)
    else:
        print(f"bpe: {what}; no output was written", file=sys.stderr)
    return status


def _caused_by_interrupt(error: BaseException) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt (or `Terminated`) among the exceptions that led to `error`, if any."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None
