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
"""

import bz2
import glob
import gzip
import io
import json
import lzma
import os
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cs336_basics.corpora import cutting
from cs336_basics.errors import missing_extra
from cs336_basics.text import patterns
from cs336_basics.text.surrogates import fix_surrogates

COMPRESSION_SUFFIXES = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
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


def is_url(path: str) -> bool:
    return "://" in path


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
    output = os.fspath(output)
    out_real = output if is_url(output) else os.path.realpath(output)
    seen = set()
    for item in inputs:
        path = os.fspath(getattr(item, "path", item))
        if path in seen:
            continue
        seen.add(path)
        if is_url(path) or is_url(output):
            same, inside = path == output, path.startswith(output.rstrip("/") + "/")
        else:
            real = os.path.realpath(path)
            same = real == out_real or _same_file(path, output)
            inside = real.startswith(out_real.rstrip(os.sep) + os.sep)
        if same:
            raise ValueError(f"the output {output} is the input {path}: writing it would destroy the input; "
                             "name another output")
        if inside:
            raise ValueError(f"the output {output} holds the input {path}: writing it could destroy the input; "
                             "name an output outside the inputs")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


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


def resolve(spec) -> list[Source]:
    """The files of an input spec, in order: a file, a folder (its supported files, recursively,
    in sorted order, skipping hidden ones), a glob (matches in sorted order), a `scheme://` URL of
    any of these (with `fsspec`), or a list of these. Raises the OS error for a missing file, FileNotFoundError for a
    folder or glob with no supported file."""
    items = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    if not items:
        raise ValueError("no input files given")
    sources: list[Source] = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise ValueError(f"an input must be a path or URL string, got {item!r}")
        item = os.fspath(item)
        found = _resolve_url(item) if is_url(item) else _resolve_local(item)
        sources.extend(found)
    return sources


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


def _filesystem(url: str):
    try:
        import fsspec
    except ImportError:
        raise missing_extra("fsspec", f"reading {url}") from None
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as e:  # the filesystem's own package (s3fs, gcsfs...) is missing
        raise ImportError(f"{url}: {e}") from None
    except ValueError as e:
        raise ValueError(f"{url}: {e}") from None


def _resolve_url(url: str) -> list[Source]:
    fs, path = _filesystem(url)
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
    fs, path = _filesystem(url)
    return fs.size(path)


# --- opening -----------------------------------------------------------------------------------------


def open_binary(path: str):
    """The file at a local path or URL, opened for binary reading (seekable)."""
    if is_url(path):
        fs, p = _filesystem(path)
        return fs.open(p, "rb")
    return open(path, "rb")


def _decompressed(f, compression: str | None, path: str):
    """The decompressed stream of `f`, whose reads raise ValueError naming `path` and how far it got
    when the data is damaged or cut short (see `_Decompressed`)."""
    if compression is None:
        return f
    if compression == "gzip":
        stream = gzip.GzipFile(fileobj=f, mode="rb")
    elif compression == "bz2":
        stream = bz2.BZ2File(f, mode="rb")
    elif compression == "xz":
        stream = lzma.LZMAFile(f, mode="rb")
    else:
        stream = _ZstdFrames(f, path)
    return _Decompressed(stream, path, compression)


class _Decompressed:
    """A decompressed stream whose errors name the file: the standard library's readers raise a bare
    `EOFError` for a file cut short and `OSError`s without the file's name for corrupt data."""

    def __init__(self, stream, path: str, compression: str):
        self.stream, self.path, self.compression = stream, path, compression
        self.done = 0  # bytes of decompressed data read so far

    def read(self, n: int) -> bytes:
        try:
            data = self.stream.read(n)
        except (EOFError, OSError, zlib.error, lzma.LZMAError, _ZstdFrames.Error) as e:
            raise ValueError(
                f"{self.path}: damaged {self.compression} data after {self.done:,} bytes of decompressed "
                f"text ({e or type(e).__name__}); the file is cut short or corrupt"
            ) from None
        self.done += len(data)
        return data


# Compressed bytes handed to zstd at a time: a small input bounds what one call can produce
# (each block of a few bytes may stand for 128 KiB).
_ZSTD_INPUT = 1 << 10


class _ZstdFrames:
    """The frames of a `.zst` file decompressed one after another, through `zstandard`'s decompressor
    objects, which say whether a frame is complete (its stream reader stops silently at a cut)."""

    class Error(Exception):
        pass

    def __init__(self, raw, path: str):
        try:
            import zstandard
        except ImportError:
            raise missing_extra("zstd", f"reading {path}", package="zstandard") from None
        self.raw = raw
        self.new = zstandard.ZstdDecompressor().decompressobj
        self.zstd_error = zstandard.ZstdError
        self.frame = None  # the decompressor of the frame being read, if one is open
        self.pending = bytearray()

    def read(self, n: int) -> bytes:
        while len(self.pending) < n:
            rest = b""
            if self.frame is not None and self.frame.eof:
                rest, self.frame = self.frame.unused_data, None
            chunk = rest or self.raw.read(_ZSTD_INPUT)
            if not chunk:
                if self.frame is not None:
                    raise self.Error("the file ends inside a zstd frame")
                break
            if self.frame is None:
                self.frame = self.new()
            try:
                self.pending += self.frame.decompress(chunk)
            except self.zstd_error as e:
                raise self.Error(str(e)) from None
        data = bytes(self.pending[:n])
        del self.pending[:n]
        return data


def _parquet():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise missing_extra("parquet", "reading Parquet files", package="pyarrow") from None
    return pq


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
            for first, last, size in _plan_parquet(source, piece_size, text_field):
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
                end = _after_newline(f, start + piece_size, size)
            ranges.append((start, end))
            start = end
    return ranges


def _after_newline(f, target: int, size: int) -> int:
    """The offset just after the first newline at or after `target - 1`; `size` if there is none."""
    pos = max(target - 1, 0)
    while pos < size:
        f.seek(pos)
        block = f.read(1 << 16)
        i = block.find(b"\n")
        if i != -1:
            return pos + i + 1
        if not block:
            break
        pos += len(block)
    return size


def _plan_parquet(source: Source, piece_size: int, text_field: str) -> list[tuple[int, int, int]]:
    """(first row group, end row group, bytes) for runs of row groups of about `piece_size` bytes."""
    pq = _parquet()
    with open_binary(source.path) as f:
        try:
            meta = pq.ParquetFile(f).metadata
        except Exception as e:  # pyarrow raises its own error types for a damaged file
            raise ValueError(f"{source.path}: not a readable Parquet file: {e}") from None
        _check_parquet_column(source.path, meta.schema.to_arrow_schema(), text_field)
        sizes = [
            sum(meta.row_group(i).column(j).total_compressed_size for j in range(meta.num_columns))
            for i in range(meta.num_row_groups)
        ]
    runs = []
    first = 0
    acc = 0
    for i, size in enumerate(sizes):
        acc += size
        if acc >= piece_size or i == len(sizes) - 1:
            runs.append([first, i + 1, acc])
            first, acc = i + 1, 0
    if runs:  # the header and footer count with the last run, so the sizes add up to the file's
        runs[-1][2] += source.size - sum(sizes)
    return [tuple(r) for r in runs]


def _check_parquet_column(path: str, schema, text_field: str) -> None:
    import pyarrow as pa

    if text_field not in schema.names:
        raise ValueError(f"{path}: no column {text_field!r} (columns: {', '.join(schema.names)}); "
                         "name the text column with text_field= / --text-field")
    kind = schema.field(text_field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise ValueError(f"{path}: column {text_field!r} holds {kind}, not strings")


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
        yield from _read_parquet(unit)
        return
    with open_binary(unit.path) as raw:
        _check_unchanged(unit, raw)
        if unit.compression is not None:
            stream = _decompressed(raw, unit.compression, unit.path)
            if unit.format == "txt":
                yield from _read_text_stream(unit, stream, raw, block_size)
            else:
                yield from _read_jsonl(unit, _line_blocks_stream(stream, raw, unit.size, block_size), first_line=1)
        elif unit.format == "txt":
            specials = [s.encode("utf-8") for s in unit.special_tokens]
            boundary = patterns.get(unit.pattern).safe_cut_bytes
            pos = unit.start
            while pos < unit.end:
                cut = cutting.find_safe_cut(raw, pos + block_size, unit.end, specials, boundary)
                yield cut - pos, cutting.read_text(raw, unit.path, pos, cut), False
                pos = cut
        else:
            yield from _read_jsonl(unit, _line_blocks(raw, unit.path, unit.start, unit.end, block_size), first_line=None)


def _check_unchanged(unit: WorkUnit, f) -> None:
    """Refuse a file whose size is not what it was when the work was planned (it changed since)."""
    if unit.file_size is None:
        return
    size = f.seek(0, os.SEEK_END)
    f.seek(0)
    if size != unit.file_size:
        raise ValueError(f"{unit.path}: the file changed while the corpus was being read: it was {unit.file_size:,} "
                         f"bytes and is now {size:,}; read it again once it is complete")


def _read_text_stream(unit: WorkUnit, stream, raw, block_size: int) -> Iterator[tuple[int, str, bool]]:
    """Decompressed text, in blocks cut at safe cuts found in a buffer (the stream cannot seek)."""
    specials = [s.encode("utf-8") for s in unit.special_tokens]
    boundary = patterns.get(unit.pattern).safe_cut_bytes
    margin = max((len(s) for s in specials), default=1)
    buffer = b""
    offset = 0  # of buffer[0] in the decompressed text
    reported = 0
    while True:
        data = stream.read(block_size)
        buffer += data
        if data and len(buffer) < block_size:
            continue
        if data:
            stop = len(buffer) - margin  # a cut needs `margin` bytes after it to rule out a special token
            cut = cutting.find_safe_cut(io.BytesIO(buffer), max(stop - cutting.SEARCH_WINDOW, 0), stop, specials, boundary)
            if cut >= stop:
                continue  # no cut in the tail yet: read more
        else:
            cut = len(buffer)
        if cut or not data:
            text = cutting.decode_utf8(buffer[:cut], unit.path, offset, "of the decompressed text")
            done = min(raw.tell(), unit.size) if data else unit.size
            yield done - reported, text, False
            reported = done
            offset += cut
            buffer = buffer[cut:]
        if not data:
            return


def _line_blocks(f, path: str, start: int, end: int, block_size: int) -> Iterator[tuple[int, int, bytes]]:
    """(offset, bytes consumed, data) for blocks of whole lines of bytes [start, end) of the file at `path`."""
    pos = start
    while pos < end:
        f.seek(pos)
        data = f.read(min(block_size, end - pos))
        if not data:
            raise ValueError(f"{path}: the file ended at byte {pos:,}, before the expected {end:,}: "
                             "did it change while being read?")
        if pos + len(data) < end:
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # a line longer than the block: read on to its end
                cut = _after_newline(f, pos + len(data), end) - pos
                f.seek(pos)
                data = f.read(cut)
            data = data[:cut]
        yield pos, len(data), data
        pos += len(data)


def _line_blocks_stream(stream, raw, size: int, block_size: int) -> Iterator[tuple[int, int, bytes]]:
    """The same for a decompressed stream; bytes consumed are of the compressed file (`size` bytes)."""
    buffer = b""
    offset = 0
    reported = 0
    while True:
        data = stream.read(block_size)
        buffer += data
        cut = buffer.rfind(b"\n") + 1 if data else len(buffer)
        if cut or not data:
            done = min(raw.tell(), size) if data else size
            yield offset, done - reported, buffer[:cut]
            reported = done
            offset += cut
            buffer = buffer[cut:]
        if not data:
            return


def _read_jsonl(unit: WorkUnit, blocks, first_line: int | None) -> Iterator[tuple[int, str, bool]]:
    """Records of JSON lines. `first_line` is the line number of the first line, or None to count
    it (only when an error needs it) from the start of the file."""
    field = unit.text_field
    line_no = first_line
    for offset, consumed, data in blocks:
        lines = data.split(b"\n")
        if not lines[-1]:
            lines.pop()
        line_offset = offset
        for i, line in enumerate(lines):
            if line.strip():
                try:
                    yield 0, fix_surrogates(_record_text(line, field)), True
                except ValueError as e:
                    where = _line_ref(unit, line_offset, None if line_no is None else line_no + i)
                    raise ValueError(f"{where}: {e}") from None
            line_offset += len(line) + 1
        if line_no is not None:
            line_no += len(lines)
        yield consumed, "", False


def _record_text(line: bytes, field: str) -> str:
    """The text field of one JSON line; ValueError saying what is wrong with it."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not valid UTF-8 at byte {e.start} of the line ({e.reason})") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object with a {field!r} field, got {type(record).__name__}")
    if field not in record:
        fields = ", ".join(map(str, record)) or "none"
        raise ValueError(f"no {field!r} field (fields: {fields}); name the text field with text_field= / --text-field")
    value = record[field]
    if not isinstance(value, str):
        raise ValueError(f"field {field!r} holds {type(value).__name__}, not a string")
    return value


def _line_ref(unit: WorkUnit, offset: int, line_no: int | None) -> str:
    """'path: line N'. For a piece read from the middle of a file the line number is found by
    counting newlines from the start, which is done only for an error message."""
    if line_no is None:
        line_no = 1
        with open_binary(unit.path) as f:
            remaining = offset
            while remaining > 0:
                data = f.read(min(remaining, 1 << 20))
                if not data:
                    break
                line_no += data.count(b"\n")
                remaining -= len(data)
    return f"{unit.path}: line {line_no}"


def _read_parquet(unit: WorkUnit) -> Iterator[tuple[int, str, bool]]:
    pq = _parquet()
    field = unit.text_field
    with open_binary(unit.path) as f:
        _check_unchanged(unit, f)
        try:
            pf = pq.ParquetFile(f)
        except Exception as e:  # pyarrow raises its own error types for a damaged file
            raise ValueError(f"{unit.path}: not a readable Parquet file: {e}") from None
        meta = pf.metadata
        row = sum(meta.row_group(i).num_rows for i in range(unit.start))
        _check_parquet_column(unit.path, pf.schema_arrow, field)
        total_rows = sum(meta.row_group(i).num_rows for i in range(unit.start, unit.end)) or 1
        done_rows = reported = 0
        batches = pf.iter_batches(batch_size=8192, row_groups=range(unit.start, unit.end), columns=[field])
        while True:
            try:
                batch = next(batches, None)
            except Exception as e:
                raise ValueError(f"{unit.path}: damaged Parquet data after row {row}: {e}") from None
            if batch is None:
                break
            texts = batch.column(0).to_pylist()
            for i, text in enumerate(texts):
                if text is None:
                    raise ValueError(f"{unit.path}: row {row + i}: {field!r} is null, not a string")
                yield 0, fix_surrogates(text), True
            row += len(texts)
            done_rows += len(texts)
            done = unit.size * done_rows // total_rows
            yield done - reported, "", False
            reported = done
        if reported < unit.size:
            yield unit.size - reported, "", False


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
