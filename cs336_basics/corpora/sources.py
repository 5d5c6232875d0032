"""Reading corpora as they come: files, folders, globs and URLs of text, JSON lines and Parquet.

A corpus is a sequence of *documents*. Where they come from:

- `.txt` (and any file named explicitly whose suffix is not one below): UTF-8 text whose documents
  are separated by the special tokens;
- `.jsonl`: one JSON object per line, the document in its text field (`"text"` by default); blank
  lines are skipped;
- `.parquet`: one document per row, in a string column named by the text field, read one row group
  at a time (never the whole file);
- `.txt` and `.jsonl` compressed with `.gz`, `.bz2`, `.xz` or `.zst`.

Each record (JSON line, Parquet row) is one document, and a file boundary is a document boundary.
A record may itself hold special tokens: it is treated like the same text in a `.txt` file.

`resolve` turns an input spec into files (a file; a folder, whose supported files are taken
recursively in sorted order; a glob; a list of these; and `scheme://` URLs through `fsspec`).
`plan_units` cuts the files into *work units*, small picklable descriptions of a piece of one file,
which a worker opens and reads itself with `read_unit`, so the process that plans never holds the
corpus:

- a `.txt` file is cut at safe cuts (see `cutting`), where no pre-token changes;
- an uncompressed `.jsonl` file is cut after a newline, between records;
- a Parquet file is cut between row groups;
- a compressed file is one unit: it cannot be seeked, and splitting it would need someone to
  decompress it all first. Corpora that come compressed usually come as many shards, one unit each.

Damage is named where it is read: a bad record by its file and line or row, a compressed file that
is cut short or corrupt by its file and how far it was read (zstandard's own reader ends silently
at a cut: ours does not), and a file whose size changed since the plan was made by its file and
both sizes. `refuse_output_among_inputs` is the check every writer makes before it starts, so that
no output is ever written in place of an input.

This module is the way in: other packages ask it for files, work units and their text. Its parts
are `files` (local paths and URLs, opened through `fsspec`), `compression` (decompressing so that
damage names the file) and `readers` (each format's bytes as document text).
"""

import glob
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cs336_basics.corpora import cutting, readers
from cs336_basics.corpora.compression import COMPRESSION_SUFFIXES, decompressed
from cs336_basics.corpora.files import check_unchanged, filesystem, is_url, open_binary
from cs336_basics.text import patterns
from cs336_basics.text.surrogates import fix_surrogates

DEFAULT_TEXT_FIELD = "text"
_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class Source:
    """One input file: where it is, how it is stored, and its size in bytes (as stored)."""

    path: str  # a local path, or a URL for fsspec
    format: str  # "txt", "jsonl" or "parquet"
    compression: str | None  # "gzip", "bz2", "xz", "zstd" or None
    size: int


@dataclass(frozen=True)
class WorkUnit:
    """A piece of one file that a worker reads on its own (see `read_unit`).

    `start`/`end` are byte offsets for uncompressed text and JSON lines, row-group numbers for
    Parquet, and (0, size) for a compressed file. `size` is the bytes of the file the unit stands
    for (progress adds these up to the corpus size). `new_document` is False only for a `.txt` piece
    that continues the previous one. `pattern` is the pre-tokenization pattern, carried so that
    workers cut text where that pattern allows.
    """

    path: str
    format: str
    compression: str | None
    start: int
    end: int
    size: int
    new_document: bool
    text_field: str = DEFAULT_TEXT_FIELD
    special_tokens: tuple[str, ...] = ()
    pattern: str = "gpt2"
    file_size: int | None = None  # the whole file's size when planned: a reader refuses a file that changed


# --- from an input spec to files ---------------------------------------------------------------------


def describe(spec) -> str:
    """A short name for an input spec, for messages."""
    if isinstance(spec, (str, os.PathLike)):
        return str(spec)
    items = [str(s) for s in spec]
    return items[0] if len(items) == 1 else f"{items[0]} and {len(items) - 1} more"


def refuse_output_among_inputs(output: str | os.PathLike, inputs) -> None:
    """Raise ValueError, naming both paths, when writing `output` would put it in place of an input:
    `output` is one of the input files (the same path, or the same file through a link), or a folder
    that holds one. `inputs` are `Source`s, `WorkUnit`s or paths; URLs are compared as written.

    Every writer calls this before it starts (`encode_files`, `bpe encode`, `bpe train`), so that
    `bpe encode X.txt --out X.txt` is refused instead of replacing the corpus with its token array.
    """
    refuse_outputs_among_inputs([output], inputs)


def refuse_outputs_among_inputs(outputs, inputs) -> None:
    """`refuse_output_among_inputs` for each of `outputs` (every file a write may create, replace or
    remove), each input looked at once: a dataset's thousands of files against an llm.c prefix's
    shards cost their sum, not their product."""
    same: dict = {}  # an input's real path (a URL as written) and its (device, inode): the input
    holding: dict[str, str] = {}  # each folder above an input: the first input it holds
    for item in inputs:
        path = os.fspath(getattr(item, "path", item))
        real = path if is_url(path) else os.path.realpath(path)
        same.setdefault(real, path)
        if not is_url(path) and (identity := _identity(path)) is not None:
            same.setdefault(identity, path)
        sep = "/" if is_url(path) else os.sep
        folder = real.rstrip(sep)
        while folder:  # up to the root, whose key is ""
            folder = folder.rpartition(sep)[0]
            if folder in holding:
                break
            holding[folder] = path
    for output in outputs:
        output = os.fspath(output)
        url = is_url(output)
        real = output if url else os.path.realpath(output)
        found = same.get(real) or (None if url else same.get(_identity(output)))
        if found is not None:
            raise ValueError(f"the output {output} is the input {found}: writing it would destroy the input; "
                             "name another output")
        found = holding.get(real.rstrip("/" if url else os.sep))
        if found is not None:
            raise ValueError(f"the output {output} holds the input {found}: writing it could destroy the input; "
                             "name an output outside the inputs")


def _identity(path: str) -> tuple[int, int] | None:
    """The (device, inode) of the file at `path`, through links; None when there is none."""
    try:
        st = os.stat(path)
    except OSError:  # it does not exist (yet)
        return None
    return st.st_dev, st.st_ino


def _format_of(name: str, *, explicit: bool) -> tuple[str, str | None] | None:
    """(format, compression) from a file name; None if a folder or glob should skip it."""
    stem, suffix = os.path.splitext(name.lower())
    compression = COMPRESSION_SUFFIXES.get(suffix)
    if compression:
        suffix = os.path.splitext(stem)[1]
    if suffix == ".parquet":
        if compression:
            raise ValueError(f"{name}: compressed Parquet is not supported (Parquet compresses inside); "
                             "decompress it first")
        return "parquet", None
    if suffix == ".jsonl":
        return "jsonl", compression
    if suffix == ".txt" or explicit:
        return "txt", compression
    return None


def resolve(spec, *, outside: Sequence[str | os.PathLike] = ()) -> list[Source]:
    """The files of an input spec, in order: a file, a folder (its supported files, recursively,
    in sorted order, skipping hidden ones), a glob (matches in sorted order), a `scheme://` URL of
    any of these (with `fsspec`), or a list of these. Raises the OS error for a missing file, FileNotFoundError for a
    folder or glob with no supported file.

    `outside`: the folders a command writes. A folder or glob leaves out what lies in them, so
    that an output folder inside an input folder is never read as input (`bpe count dir/ --out
    dir/counts` run twice counts `dir` twice alike); a file named on its own is kept, for
    `refuse_output_among_inputs` to refuse."""
    items = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    if not items:
        raise ValueError("no input files given")
    outputs = [os.fspath(o) for o in outside]
    sources: list[Source] = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise ValueError(f"an input must be a path or URL string, got {item!r}")
        item = os.fspath(item)
        found = _resolve_url(item) if is_url(item) else _resolve_local(item)
        if outputs and (len(found) != 1 or found[0].path != item):  # a folder or a glob
            # (all of them in an output: kept, so that the refusal names one, not "no supported files")
            found = [f for f in found if not any(_inside(f.path, o) for o in outputs)] or found
        sources.extend(found)
    return sources


def _inside(path: str, folder: str) -> bool:
    """Whether `path` lies in `folder` (through links, for local paths; as written, for URLs)."""
    if is_url(path) or is_url(folder):
        return path.startswith(folder.rstrip("/") + "/")
    return os.path.realpath(path).startswith(os.path.realpath(folder).rstrip(os.sep) + os.sep)


def _resolve_local(item: str) -> list[Source]:
    path = Path(item)
    if path.is_dir():
        names = sorted(str(p) for p in path.rglob("*") if p.is_file() and not _hidden(p.relative_to(path).parts))
        return _matched(item, names, "folder")
    if not path.exists() and _GLOB_CHARS & set(item):
        return _matched(item, sorted(p for p in glob.glob(item, recursive=True) if os.path.isfile(p)), "glob")
    size = cutting.file_size(path)
    fmt, compression = _format_of(path.name, explicit=True)
    return [Source(item, fmt, compression, size)]


def _hidden(parts) -> bool:
    """Whether a path inside a folder is hidden (`.cache/`, `.DS_Store`): folders skip those."""
    return any(part.startswith(".") for part in parts)


def _matched(item: str, names: list[str], kind: str, sizes=None) -> list[Source]:
    sources = []
    for name in names:
        found = _format_of(os.path.basename(name), explicit=False)
        if found:
            size = sizes(name) if sizes else cutting.file_size(name)
            sources.append(Source(name, found[0], found[1], size))
    if not sources:
        raise FileNotFoundError(2, f"{kind} with no supported files (.txt, .jsonl, .parquet, optionally "
                                   ".gz/.bz2/.xz/.zst-compressed)", item)
    return sources


def _resolve_url(url: str) -> list[Source]:
    fs, path = filesystem(url)
    if _GLOB_CHARS & set(path) and not fs.exists(path):
        names = sorted(p for p in fs.glob(path) if fs.isfile(p))
        return _matched(url, [fs.unstrip_protocol(p) for p in names], "glob", sizes=_url_size)
    if fs.isdir(path):
        root = path.rstrip("/") + "/"
        names = sorted(p for p in fs.find(path) if not _hidden(p[len(root):].split("/")))
        return _matched(url, [fs.unstrip_protocol(p) for p in names], "folder", sizes=_url_size)
    if not fs.exists(path):
        raise FileNotFoundError(2, "No such file or directory", url)
    fmt, compression = _format_of(os.path.basename(path), explicit=True)
    return [Source(url, fmt, compression, fs.size(path))]


def _url_size(url: str) -> int:
    fs, path = filesystem(url)
    return fs.size(path)


# --- planning work units ----------------------------------------------------------------------------


def plan_units(
    sources: Sequence[Source],
    *,
    piece_size: int,
    special_tokens: Sequence[str] = (),
    text_field: str = DEFAULT_TEXT_FIELD,
    pattern: str = "gpt2",
) -> list[WorkUnit]:
    """Cut the files into work units of about `piece_size` bytes each (see the module docstring)."""
    if not isinstance(text_field, str) or not text_field:
        raise ValueError(f"text_field must be a non-empty str, got {text_field!r}")
    pattern = patterns.canonical(pattern)
    piece_size = max(int(piece_size), 1)
    specials = tuple(special_tokens)
    units: list[WorkUnit] = []
    for source in sources:
        common = dict(text_field=text_field, special_tokens=specials, pattern=pattern, file_size=source.size)
        if source.size == 0:
            if source.format == "txt" and source.compression is None:  # a file is a document, even empty
                units.append(WorkUnit(source.path, "txt", None, 0, 0, 0, True, **common))
            continue
        if source.compression is not None:
            units.append(WorkUnit(source.path, source.format, source.compression, 0, source.size, source.size,
                                  True, **common))
        elif source.format == "parquet":
            for first, last, size in readers.parquet_row_groups(source.path, source.size, piece_size, text_field):
                units.append(WorkUnit(source.path, "parquet", None, first, last, size, True, **common))
        else:
            for start, end in _plan_bytes(source, piece_size, specials, pattern):
                units.append(WorkUnit(source.path, source.format, None, start, end, end - start,
                                      source.format != "txt" or start == 0, **common))
    return units


def _plan_bytes(source: Source, piece_size: int, specials: tuple[str, ...], pattern: str) -> list[tuple[int, int]]:
    """Byte ranges of an uncompressed file: cut at safe cuts (text) or after a newline (JSON lines)."""
    special_bytes = [s.encode("utf-8") for s in specials]
    boundary = patterns.get(pattern).safe_cut_bytes
    size = source.size
    ranges = []
    start = 0
    with open_binary(source.path) as f:
        while start < size:
            if source.format == "txt":
                end = cutting.find_safe_cut(f, start + piece_size, size, special_bytes, boundary)
            else:
                end = readers.after_newline(f, start + piece_size, size)
            ranges.append((start, end))
            start = end
    return ranges


# --- reading a work unit -----------------------------------------------------------------------------

BLOCK_SIZE = 1 << 22  # bytes of text handed on at a time


def read_unit(unit: WorkUnit, *, block_size: int = BLOCK_SIZE) -> Iterator[tuple[int, str, bool]]:
    """The text of a work unit as (bytes of the file consumed, text, starts_document) triples.

    Text from `.txt` comes in blocks ending at safe cuts, each continuing the one before
    (`starts_document` False); records come one per triple (`starts_document` True). Special
    tokens inside any text still separate documents there. Bad records raise ValueError naming
    the file and the line or row; a file that has gone raises the OS error.
    """
    if unit.format == "parquet":
        yield from readers.read_parquet(unit.path, unit.start, unit.end, unit.size, text_field=unit.text_field,
                                        file_size=unit.file_size)
        return
    text_options = dict(special_tokens=unit.special_tokens, pattern=unit.pattern, block_size=block_size)
    with open_binary(unit.path) as raw:
        check_unchanged(unit.path, unit.file_size, raw)
        if unit.compression is not None:
            stream = decompressed(raw, unit.compression, unit.path)
            if unit.format == "txt":
                yield from readers.read_text_stream(stream, raw, unit.path, unit.size, **text_options)
            else:
                blocks = readers.line_blocks_stream(stream, raw, unit.size, block_size)
                yield from readers.read_jsonl(unit.path, unit.text_field, blocks, first_line=1)
        elif unit.format == "txt":
            yield from readers.read_text(raw, unit.path, unit.start, unit.end, **text_options)
        else:
            blocks = readers.line_blocks(raw, unit.path, unit.start, unit.end, block_size)
            yield from readers.read_jsonl(unit.path, unit.text_field, blocks, first_line=None)


# --- documents from a Python iterable ---------------------------------------------------------------


def document_text(document: object, position: int, text_field: str = DEFAULT_TEXT_FIELD, *,
                  fixed: bool = True) -> str:
    """The text of one document of an iterable, surrogates fixed (unless not `fixed`, for a caller
    that fixes many documents at once): a str, or a mapping (a row of a `datasets` dataset, say)
    whose `text_field` holds one. Anything else is a TypeError, and a mapping without the field a
    ValueError, naming the document's `position`."""
    if isinstance(document, Mapping):
        if text_field not in document:
            fields = ", ".join(map(str, document)) or "none"
            raise ValueError(f"document {position} has no {text_field!r} field (fields: {fields}); name it with text_field=")
        document = document[text_field]
    if not isinstance(document, str):
        raise TypeError(f"document {position} is {type(document).__name__}, not str (or a mapping with a "
                        f"{text_field!r} field holding one)")
    return fix_surrogates(document) if fixed else document
