"""Reading the bytes of each corpus format as document text, and where JSON lines and Parquet can be cut.

Every reader yields (bytes of the file consumed, text, starts_document) triples, the form
`sources.read_unit` hands on:

- text (`read_text`, or `read_text_stream` once decompressed) comes in blocks ending at safe cuts
  (see `cutting`), each continuing the one before;
- JSON lines (`read_jsonl`, over the blocks of whole lines `line_blocks` or `line_blocks_stream`
  give) and Parquet rows (`read_parquet`) are records, one document each, followed by a triple that
  reports the bytes consumed.

A bad record raises ValueError naming the file and the line or row. A JSON-lines piece is cut just
after a newline (`after_newline`), a Parquet file between row groups (`parquet_row_groups`).
"""

import io
import json
from collections.abc import Iterator, Sequence

from cs336_basics.corpora import cutting
from cs336_basics.corpora.files import check_unchanged, open_binary
from cs336_basics.errors import missing_extra
from cs336_basics.text import patterns
from cs336_basics.text.surrogates import fix_surrogates

Triples = Iterator[tuple[int, str, bool]]

# --- text -------------------------------------------------------------------------------------------


def read_text(raw, path: str, start: int, end: int, *, special_tokens: Sequence[str], pattern: str,
              block_size: int) -> Triples:
    """Bytes [start, end) of the uncompressed text file `raw` (at `path`), in blocks of about
    `block_size` bytes ending at safe cuts; none starts a document."""
    specials = [s.encode("utf-8") for s in special_tokens]
    boundary = patterns.get(pattern).safe_cut_bytes
    pos = start
    while pos < end:
        cut = cutting.find_safe_cut(raw, pos + block_size, end, specials, boundary)
        yield cut - pos, cutting.read_text(raw, path, pos, cut), False
        pos = cut


def read_text_stream(stream, raw, path: str, size: int, *, special_tokens: Sequence[str], pattern: str,
                     block_size: int) -> Triples:
    """Decompressed text, in blocks cut at safe cuts found in a buffer (the stream cannot seek). The
    bytes consumed are of the compressed file `raw` (`size` bytes)."""
    specials = [s.encode("utf-8") for s in special_tokens]
    boundary = patterns.get(pattern).safe_cut_bytes
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
            text = cutting.decode_utf8(buffer[:cut], path, offset, "of the decompressed text")
            done = min(raw.tell(), size) if data else size
            yield done - reported, text, False
            reported = done
            offset += cut
            buffer = buffer[cut:]
        if not data:
            return


# --- JSON lines -------------------------------------------------------------------------------------


def after_newline(f, target: int, size: int) -> int:
    """The offset just after the first newline at or after `target - 1` in the binary file `f` of
    `size` bytes; `size` if there is none."""
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


def line_blocks(f, path: str, start: int, end: int, block_size: int) -> Iterator[tuple[int, int, bytes]]:
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
                cut = after_newline(f, pos + len(data), end) - pos
                f.seek(pos)
                data = f.read(cut)
            data = data[:cut]
        yield pos, len(data), data
        pos += len(data)


def line_blocks_stream(stream, raw, size: int, block_size: int) -> Iterator[tuple[int, int, bytes]]:
    """The same for a decompressed stream; bytes consumed are of the compressed file `raw` (`size` bytes)."""
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


def read_jsonl(path: str, text_field: str, blocks: Iterator[tuple[int, int, bytes]], first_line: int | None) -> Triples:
    """The records of the JSON lines in `blocks` (from `line_blocks` or `line_blocks_stream`), one
    document each: the string in `text_field`, surrogates fixed. `first_line` is the line number of
    the first line, or None to count it (only when an error needs it) from the start of the file."""
    line_no = first_line
    for offset, consumed, data in blocks:
        lines = data.split(b"\n")
        if not lines[-1]:
            lines.pop()
        line_offset = offset
        for i, line in enumerate(lines):
            if line.strip():
                try:
                    yield 0, fix_surrogates(_record_text(line, text_field)), True
                except ValueError as e:
                    where = _line_ref(path, line_offset, None if line_no is None else line_no + i)
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


def _line_ref(path: str, offset: int, line_no: int | None) -> str:
    """'path: line N'. For a piece read from the middle of a file the line number is found by
    counting newlines from the start, which is done only for an error message."""
    if line_no is None:
        line_no = 1
        with open_binary(path) as f:
            remaining = offset
            while remaining > 0:
                data = f.read(min(remaining, 1 << 20))
                if not data:
                    break
                line_no += data.count(b"\n")
                remaining -= len(data)
    return f"{path}: line {line_no}"


# --- Parquet ----------------------------------------------------------------------------------------


def _parquet():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise missing_extra("parquet", "reading Parquet files", package="pyarrow") from None
    return pq


def parquet_row_groups(path: str, size: int, piece_size: int, text_field: str) -> list[tuple[int, int, int]]:
    """(first row group, end row group, bytes) for runs of row groups of about `piece_size` bytes of
    the Parquet file at `path` (`size` bytes); the bytes of the runs add up to `size`."""
    pq = _parquet()
    with open_binary(path) as f:
        try:
            meta = pq.ParquetFile(f).metadata
        except Exception as e:  # pyarrow raises its own error types for a damaged file
            raise ValueError(f"{path}: not a readable Parquet file: {e}") from None
        _check_parquet_column(path, meta.schema.to_arrow_schema(), text_field)
        sizes = [
            sum(meta.row_group(i).column(j).total_compressed_size for j in range(meta.num_columns))
            for i in range(meta.num_row_groups)
        ]
    runs = []
    first = 0
    acc = 0
    for i, group_size in enumerate(sizes):
        acc += group_size
        if acc >= piece_size or i == len(sizes) - 1:
            runs.append([first, i + 1, acc])
            first, acc = i + 1, 0
    if runs:  # the header and footer count with the last run, so the sizes add up to the file's
        runs[-1][2] += size - sum(sizes)
    return [tuple(r) for r in runs]


def _check_parquet_column(path: str, schema, text_field: str) -> None:
    import pyarrow as pa

    if text_field not in schema.names:
        raise ValueError(f"{path}: no column {text_field!r} (columns: {', '.join(schema.names)}); "
                         "name the text column with text_field= / --text-field")
    kind = schema.field(text_field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise ValueError(f"{path}: column {text_field!r} holds {kind}, not strings")


def read_parquet(path: str, start: int, end: int, size: int, *, text_field: str, file_size: int | None) -> Triples:
    """The rows of row groups [start, end) of the Parquet file at `path`, one document each (the
    string in column `text_field`, surrogates fixed); `size` bytes are reported in proportion to the
    rows read. The file must still be `file_size` bytes long (see `files.check_unchanged`)."""
    pq = _parquet()
    with open_binary(path) as f:
        check_unchanged(path, file_size, f)
        try:
            pf = pq.ParquetFile(f)
        except Exception as e:  # pyarrow raises its own error types for a damaged file
            raise ValueError(f"{path}: not a readable Parquet file: {e}") from None
        meta = pf.metadata
        row = sum(meta.row_group(i).num_rows for i in range(start))
        _check_parquet_column(path, pf.schema_arrow, text_field)
        total_rows = sum(meta.row_group(i).num_rows for i in range(start, end)) or 1
        done_rows = reported = 0
        batches = pf.iter_batches(batch_size=8192, row_groups=range(start, end), columns=[text_field])
        while True:
            try:
                batch = next(batches, None)
            except Exception as e:
                raise ValueError(f"{path}: damaged Parquet data after row {row}: {e}") from None
            if batch is None:
                break
            texts = batch.column(0).to_pylist()
            for i, text in enumerate(texts):
                if text is None:
                    raise ValueError(f"{path}: row {row + i}: {text_field!r} is null, not a string")
                yield 0, fix_surrogates(text), True
            row += len(texts)
            done_rows += len(texts)
            done = size * done_rows // total_rows
            yield done - reported, "", False
            reported = done
        if reported < size:
            yield size - reported, "", False
