"""What the commands of `bpe` share: the run context, the options several commands take (with the
hidden aliases that keep older spellings working), the argument types and checks, loading a
`--tokenizer`, and naming tokenizers in tables."""

import argparse
import contextlib
import os
import tempfile
from pathlib import Path

from cs336_basics import report
from cs336_basics.bpe import Tokenizer
from cs336_basics.corpora import executors, sources
from cs336_basics.errors import CommandError
from cs336_basics.formats import pretrained
from cs336_basics.text import patterns
from cs336_basics.train.merge_log import MergeLog, read_merge_log

DEFAULT_SPECIAL = "<|endoftext|>"

INPUTS_HELP = "files, folders, globs or URLs of .txt, .jsonl and .parquet (.txt and .jsonl may be .gz/.bz2/.xz/.zst)"
MIN_COUNT_HELP = ("a token with fewer occurrences is under-trained (default: 0.0001%% of all tokens, "
                  "or 10 if that is more)")


class UsageError(Exception):
    """Words on the command line that do not parse (exit status 2)."""


def usage_error(command: str, message: str) -> UsageError:
    """The error `bpe COMMAND` gives for `message`, worded as argparse's own (see `cli._Parser`)."""
    return UsageError(f"bpe: {message} (see bpe {command} --help)")


class RunContext:
    """What one run of `bpe` writes, so that an interrupt can say what it left: the output files
    with how each was before the command (`watch`), and a dataset directory being written, which an
    interrupt leaves resumable (`resumable`)."""

    def __init__(self) -> None:
        self._before: dict[Path, tuple[int, int] | None] = {}
        self.resumable: Path | str | None = None

    def watch(self, *paths: Path) -> None:
        """Note how each of `paths` is now (or that it is absent), before the command writes it."""
        for path in paths:
            self._before[path] = _identity(path)

    def changed(self) -> list[Path]:
        """The watched paths that are not as they were when watched."""
        return [path for path, before in self._before.items() if _identity(path) != before]


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


# --- options -----------------------------------------------------------------------------------------


def add_special_options(parser: argparse.ArgumentParser) -> None:
    """--special-token and --pattern, for the commands that load or train a tokenizer."""
    parser.add_argument(
        "--special-token", action="append", metavar="TOKEN",
        help=f"a special token (repeat for more; default: {DEFAULT_SPECIAL})",
    )
    parser.add_argument(
        "--pattern", metavar="NAME|REGEX",
        help="pre-tokenization: gpt2 (default), cl100k, o200k, none (whole documents) or a regex",
    )


def add_corpus_options(parser: argparse.ArgumentParser, dask: bool = True) -> None:
    """--text-field, and --dask-scheduler unless `dask` is False, for the commands that read a corpus."""
    parser.add_argument("--text-field", default="text", metavar="NAME",
                        help="the JSON field or Parquet column holding the text (default: text)")
    if dask:
        parser.add_argument("--dask-scheduler", metavar="ADDRESS",
                            help="run on the Dask cluster with this scheduler (e.g. tcp://scheduler:8786)")


def add_tokenizer_option(parser: argparse.ArgumentParser, help: str, *, required: bool = True,
                         repeat: bool = False, old_positional: bool = False) -> argparse.Action:
    """-t/--tokenizer DIR (`args.tokenizer`; a list with `repeat`). With `old_positional` (not with
    `repeat`) the tokenizer may instead be given as the command's positional argument, as before
    `--tokenizer` was its name there: a hidden alias, so old scripts still run; giving both is an
    error, and with `required` giving neither. Returns the option's action."""
    if not old_positional:
        return parser.add_argument("-t", "--tokenizer", required=required, action="append" if repeat else "store",
                                   metavar="DIR", help=help)
    group = parser.add_mutually_exclusive_group(required=required)
    option = group.add_argument("-t", "--tokenizer", metavar="DIR", help=help)
    group.add_argument("old_tokenizer", nargs="?", metavar="DIR", action=_StoreInto, dest_of=option,
                       help=argparse.SUPPRESS)
    option.needed = required  # shown without brackets in the usage line (see `cli._Parser`)
    return option


class _StoreInto(argparse.Action):
    """A hidden alias: stores its value where the option `dest_of` stores its own."""

    def __init__(self, *args, dest_of: argparse.Action, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.dest_of = dest_of

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if values is not None:  # None: a positional alias left out
            setattr(namespace, self.dest_of.dest, values)


def add_alias(parser: argparse.ArgumentParser, option: argparse.Action, *names: str) -> None:
    """`names`, hidden from --help, as other spellings of `option` (its old names). The two are
    put in one mutually exclusive group by the caller when giving both should be an error."""
    parser.add_argument(*names, dest=option.dest, nargs=option.nargs, choices=option.choices, type=option.type,
                        metavar=option.metavar, help=argparse.SUPPRESS)


def whole_number(text: str, low: int, high: int | None = None, *, what: str = "a whole number",
                 bounds: str = "") -> int:
    """`text` read as a whole number from `low` to `high` (unbounded when None), for an argument type;
    otherwise argparse's error saying what was expected (`what`, then `bounds` for one out of range)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"expected {bounds or what}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argument type: a whole number of at least 1."""
    return whole_number(text, 1, bounds="a positive number")


# More processes than any machine has cores: past this, --workers is a slip (10**30 would fork a
# process per byte of a small corpus, or overflow a semaphore), not a wish.
MAX_WORKERS = 1024


def worker_count(text: str) -> int:
    """An argument type, the one of every --workers: a whole number from 1 to `MAX_WORKERS`."""
    value = positive_int(text)
    if value > MAX_WORKERS:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        raise argparse.ArgumentTypeError(f"expected at most {MAX_WORKERS} processes, got {value} (this machine "
                                         f"has {cores} cores)")
    return value


def port_number(text: str) -> int:
    """An argument type: a TCP port, 0 (any free one) to 65535."""
    return whole_number(text, 0, 65535, what="a port number", bounds="a port from 0 (any free one) to 65535")


SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def byte_size(text: str) -> int:
    """An argument type, the one of every size option: a number of bytes, with K, M, G or T for
    2**10, 2**20, 2**30 or 2**40 of them (`4096`, `64K`, `256M`, `1.5G`; `KiB`, `MB` and lower case
    read the same), at least 1."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (t[:-1], t[-1]) if t and t[-1] in SIZE_UNITS else (t, "")
    try:
        value = int(float(number) * SIZE_UNITS[unit])
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"expected a size such as 4096, 64K, 256M or 1G, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a size of at least 1 byte, got {text!r}")
    return value


# --- inputs and outputs ------------------------------------------------------------------------------


def writable_dir(path: Path) -> Path:
    """Check that `path` is a folder, or can be made one, where files can be created. Nothing is
    created: the writers make the folder when they write (see `staged.folders_for`), so a run that
    fails or is killed before then leaves no empty folder."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(existing))
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise CommandError(f"cannot write to the output folder {path}: {e.strerror or e}") from None
    return path


def readable_file(path: Path) -> Path:
    """`path`, checked to be a file this process can read."""
    if not path.exists():
        raise CommandError(f"input file not found: {path}")
    if path.is_dir():
        raise CommandError(f"input is a folder, not a file: {path}")
    if not os.access(path, os.R_OK):
        raise CommandError(f"input file is not readable: {path}")
    return path


def corpus_files(inputs: list[str], outside: list[Path] = ()) -> list:
    """The files of the command's inputs, those in the command's output folders `outside` left out
    of folders and globs (see `sources.resolve`)."""
    for item in inputs:
        if not sources.is_url(item) and not set("*?[") & set(item):
            path = Path(item)
            if not path.exists():
                raise CommandError(f"input file not found: {path}")
            if not path.is_dir() and not os.access(path, os.R_OK):
                raise CommandError(f"input file is not readable: {path}")
    return sources.resolve(inputs, outside=outside)


def executor(args: argparse.Namespace):
    """The Dask cluster's executor with --dask-scheduler, else None (local processes)."""
    if getattr(args, "dask_scheduler", None):
        return executors.dask_executor(args.dask_scheduler)
    return contextlib.nullcontext()


def tokenizer_files(source: str) -> list[Path]:
    """The files a `--tokenizer` (or convert's SRC) reads: none for a pretrained name."""
    path = Path(source)
    names = ("tokenizer.json", "vocab.json", "merges.txt", "merge_log.tsv")
    return [path / n for n in names if (path / n).is_file()] if path.is_dir() else [path] if path.is_file() else []


def refuse_folders_at(outputs: list[Path]) -> None:
    """Refuse, before any work, to write a file where a folder stands (its rename would fail at
    the end, after the work, naming a temporary file, with the outputs renamed before it replaced)."""
    for path in outputs:
        if path.is_dir():
            raise CommandError(f"{path} is a folder, where a file is to be written: move it away or choose "
                               "another --out")


def refuse_outputs_among(outputs: list[Path], inputs: list) -> None:
    """Refuse, before any work, to write an output that is one of the inputs."""
    sources.refuse_outputs_among_inputs(outputs, inputs)


# --- tokenizers --------------------------------------------------------------------------------------


def load_tokenizer(source: str, special_tokens: list[str] | None, pattern: str | None = None) -> Tokenizer:
    """The tokenizer named by `--tokenizer`: a pretrained name (gpt2, cl100k_base, ...), a folder, a
    tokenizer.json or a .tiktoken file. A folder with a tokenizer.json brings its own pattern and
    special tokens; one with only vocab.json and merges.txt gets the GPT-2 pattern and, unless
    --special-token says otherwise, <|endoftext|>. `pattern` (from --pattern) overrides the GPT-2
    default of vocab.json and merges.txt or of a .tiktoken file; a tokenizer.json must agree with it."""
    if pattern is not None:
        pattern = patterns.canonical(pattern)
    if source in pretrained.NAMES:
        if special_tokens is not None:
            raise CommandError(f"{source} has its own special tokens; drop --special-token")
        if pattern is not None:
            raise CommandError(f"{source} has its own pattern; drop --pattern")
        return Tokenizer.from_pretrained(source)
    path = Path(source)
    if not path.exists():
        raise CommandError(
            f"tokenizer file not found: {source} (expected a folder with tokenizer.json or vocab.json and "
            f"merges.txt, as `bpe train --out {source}` writes; a tokenizer.json; a .tiktoken file; "
            f"or one of {', '.join(pretrained.NAMES)})"
        )
    if path.is_dir() and not (path / "tokenizer.json").is_file():
        for p in (path / "vocab.json", path / "merges.txt"):
            if not p.is_file():
                raise CommandError(f"tokenizer file not found: {p} (train one with `bpe train --out {source}`)")
        specials = special_tokens if special_tokens is not None else [DEFAULT_SPECIAL]
        return Tokenizer.from_pretrained(path, special_tokens=specials, pattern=pattern)
    return Tokenizer.from_pretrained(path, special_tokens=special_tokens, pattern=pattern)


def merge_log_of(folder: str, tokenizer: Tokenizer) -> MergeLog | None:
    """The merge log saved beside the tokenizer in `folder`, if there is one, checked to be its own."""
    path = Path(folder) / "merge_log.tsv"
    if not path.is_file():
        return None
    log = read_merge_log(path)
    try:
        report.check_merge_log(tokenizer, log)
    except ValueError as e:
        raise CommandError(f"{path}: {e}") from None
    return log


def short_name(source: str) -> str:
    """What a page calls a tokenizer: its folder's or file's name (the path goes in the summary)."""
    return Path(source).name or Path(source).resolve().name or source


def column_name(source: str) -> str:
    """What a table calls the tokenizer `--tokenizer source` loads: a pretrained name as it is; an
    open model's rank file that we know (see `pretrained.KNOWN_RANK_FILES`) by its model's name; a
    file named tokenizer.json by its folder's name; any other file or folder by its name."""
    path = Path(source)
    if source in pretrained.NAMES or not path.exists():
        return source
    if path.is_file() and (path.suffix == ".tiktoken" or path.name.endswith(".tiktoken.gz")):
        known = pretrained.known_rank_file(path)
        if known is not None:
            return known.name
    if path.is_file() and path.name == "tokenizer.json":
        return short_name(str(path.resolve().parent))
    return short_name(source)


def column_names(sources: list[str], taken: tuple[str, ...] = ()) -> list[str]:
    """`column_name` of each source; where two would share one (or one is in `taken`), the
    source as given instead."""
    names = [column_name(s) for s in sources]
    return [n if names.count(n) == 1 and n not in taken else s for n, s in zip(names, sources)]


def labelled(name: str, source: str) -> str:
    """A tokenizer's column name, with the source it was loaded from when they differ."""
    return name if name == source else f"{name} ({source})"
