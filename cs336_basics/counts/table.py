r"""A count table on disk: what it holds, reading it back, and adding tables up.

A table is a folder:

    manifest.json          {"format": "cs336-count-table", "version": 1, "pattern", "special_tokens",
                            "text_field", "piece_size", "inputs": [{"path", "size", "mtime_ns"}],
                            "shards": [{"name", "rows", "bytes", "sha256", "input_bytes",
                            "occurrences", "pretoken_bytes"}], "totals": {...}}
    shard-00000.parquet    two columns: `pretoken` (binary: the pre-token's bytes) and `count` (int64)
    ...

Each shard holds the counts of one stretch of the corpus, its rows sorted by pre-token, so a
pre-token may be in several shards: the table's count of a pre-token is the sum over its shards.
Parquet, because Spark, DuckDB, pandas and any engine write it: counts made elsewhere meet ours by
being written with those two columns (a string column is read as UTF-8; any integer type for the
counts). The manifest's checksums let a reader refuse a changed or corrupt shard by name.

A plain text file of `pre-token<TAB>count` lines is read too (`read_tsv`) and written (`write_tsv`):
the pre-token shown as `train.merge_log.readable_token` shows tokens, in a cell of `text.tsv`'s
dialect, as `merge_log.tsv` writes them; so a file written by `csv` or pandas reads right as well.

Counts are Python ints in memory and int64 on disk: nothing on the way packs them smaller.
"""

import hashlib
import io
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from cs336_basics.datasets import shard_folder
from cs336_basics.errors import missing_extra
from cs336_basics.formats import staged
from cs336_basics.text import patterns, tsv
from cs336_basics.text.pretokenize import validate_special_tokens
from cs336_basics.train.merge_log import readable_token

FORMAT = "cs336-count-table"
VERSION = 1
MANIFEST = shard_folder.MANIFEST
WORK = shard_folder.WORK  # the plan and the shards' records of an unfinished run (see `writer`)
LOCK = shard_folder.LOCK
TOTAL_KEYS = ("input_bytes", "occurrences", "pretoken_bytes", "rows")  # the manifest's `totals`, with `shards`
INT64_MAX = (1 << 63) - 1
BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark, which some editors put at the start of a text file
# Rows per shard when a whole table is written at once (`merge_tables`).
MERGED_SHARD_ROWS = 1 << 22
# The special tokens of counts that record none (a pre-token<TAB>count file, a mapping): what `bpe`
# cuts documents at by default.
DEFAULT_SPECIAL_TOKENS = ("<|endoftext|>",)


@dataclass(frozen=True)
class Counts:
    """Pre-token counts read from a table, a text file or a mapping, with what they were counted with
    (None where the source does not say: a text file, a mapping). `min_count`: the
    `min_pretoken_count` a table was counted with (1 for none), which training applies by default;
    the table holds every count, so that tables still add up exactly."""

    word_counts: dict[bytes, int]
    pattern: str | None
    special_tokens: list[str] | None
    input_bytes: int | None
    min_count: int = 1


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.parquet"


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise missing_extra("parquet", "count tables", package="pyarrow",
                            instead="or train from a pre-token<TAB>count text file") from None
    return pyarrow, pyarrow.parquet


# --- shards --------------------------------------------------------------------------------------------


def shard_data(words: list[bytes], counts: list[int]) -> bytes:
    """The Parquet file of one shard: `words` (sorted, distinct) and their counts."""
    pa, pq = _pyarrow()
    if counts and max(counts) > INT64_MAX:
        raise ValueError(f"a count of {max(counts)} does not fit in 64 bits")
    table = pa.table({"pretoken": pa.array(words, pa.binary()), "count": pa.array(counts, pa.int64())})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def shard_record(name: str, data: bytes, words: list[bytes], counts: list[int]) -> dict:
    """A shard's manifest entry (without what the writer adds about the input)."""
    return {
        "name": name,
        "rows": len(words),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "occurrences": sum(counts),
        "pretoken_bytes": sum(len(w) * n for w, n in zip(words, counts)),
    }


def write_shard(folder: Path, name: str, words: list[bytes], counts: list[int]) -> dict:
    """Write one shard, all or nothing (see `staged.replacing`); return its record."""
    data = shard_data(words, counts)
    with staged.replacing(folder / name) as f:
        f.write(data)
    return shard_record(name, data, words, counts)


def read_shard(path: Path, entry: dict | None = None) -> tuple[list[bytes], list[int]]:
    """The pre-tokens and counts of one shard, checked against its manifest `entry` when given;
    ValueError naming the file for anything wrong."""
    pa, pq = _pyarrow()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"{path}: the shard is missing (the manifest lists it)") from None
    if entry is not None and (len(data) != entry.get("bytes") or hashlib.sha256(data).hexdigest() != entry.get("sha256")):
        raise ValueError(f"{path}: the shard is not the one the manifest lists (its size or sha256 differs): "
                         "corrupt or changed; count the corpus again")
    try:
        table = pq.ParquetFile(pa.BufferReader(data)).read()  # not read_table: it imports pandas (2 s)
    except (pa.ArrowException, OSError) as e:
        raise ValueError(f"{path}: not a Parquet count shard ({e})") from None
    names = table.column_names
    if "pretoken" not in names or "count" not in names:
        raise ValueError(f"{path}: a count shard has the columns 'pretoken' and 'count'; this one has {names}")
    words_col, counts_col = table.column("pretoken"), table.column("count")
    if not (pa.types.is_binary(words_col.type) or pa.types.is_large_binary(words_col.type)
            or pa.types.is_string(words_col.type) or pa.types.is_large_string(words_col.type)):
        raise ValueError(f"{path}: column 'pretoken' must be binary or string, not {words_col.type}")
    if not pa.types.is_integer(counts_col.type):
        raise ValueError(f"{path}: column 'count' must hold integers, not {counts_col.type}")
    if words_col.null_count or counts_col.null_count:
        raise ValueError(f"{path}: the columns 'pretoken' and 'count' must not hold nulls")
    words = words_col.to_pylist()
    if words and isinstance(words[0], str):
        words = [w.encode("utf-8") for w in words]
    counts = counts_col.to_pylist()
    if counts and min(counts) < 0:
        raise ValueError(f"{path}: a count is negative ({min(counts)})")
    if counts and max(counts) > INT64_MAX:  # an unsigned column written elsewhere
        raise ValueError(f"{path}: the count {max(counts)} does not fit in 64 bits")
    return words, counts


# --- the manifest --------------------------------------------------------------------------------------


def read_manifest(folder: Path) -> dict:
    """The manifest of the table in `folder`, checked; ValueError naming the file otherwise."""
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{folder}: not a count table (no {MANIFEST}; an unfinished `bpe count` is finished "
                         "by running it again)") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{path}: not a count table's manifest ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{path}: not a count table's manifest (format {FORMAT!r} expected)")
    if type(manifest.get("version")) is not int or manifest["version"] > VERSION:
        raise ValueError(f"{path}: format version {manifest.get('version')!r}, newer than this cs336-basics reads "
                         f"({VERSION}); upgrade")
    shards = manifest.get("shards")
    if (not isinstance(shards, list) or not all(isinstance(s, dict) and isinstance(s.get("name"), str) for s in shards)
            or not isinstance(manifest.get("pattern"), str) or not isinstance(manifest.get("special_tokens"), list)):
        raise ValueError(f"{path}: a count table's manifest lists its pattern, special tokens and shards")
    seen = set()
    for entry in shards:
        if "/" in entry["name"] or "\\" in entry["name"] or entry["name"].startswith("."):
            raise ValueError(f"{path}: shard name {entry['name']!r} is not a file in the table's folder")
        if entry["name"] in seen:
            raise ValueError(f"{path}: the shard {entry['name']} is listed twice; its counts would be added twice")
        seen.add(entry["name"])
    return manifest


def totals(entries: Iterable[dict]) -> dict:
    """The manifest's `totals` of its shard entries."""
    return shard_folder.totals(entries, TOTAL_KEYS)


def manifest_text(head: dict, entries: list[dict]) -> str:
    return json.dumps({**head, "shards": entries, "totals": totals(entries)}, indent=1) + "\n"


# --- reading counts ------------------------------------------------------------------------------------


def read_table(folder: Path) -> Counts:
    """The counts of the table in `folder`: each shard checked against its manifest entry (its size
    and sha256, and what the entry says it holds), the manifest's totals against the shards' sum,
    and a pre-token's rows added up wherever they are (also two rows of one shard)."""
    manifest = read_manifest(folder)
    total: dict[bytes, int] = {}
    get = total.get
    held = []
    for entry in manifest["shards"]:
        words, counts = read_shard(folder / entry["name"], entry)
        for word, n in zip(words, counts):
            total[word] = get(word, 0) + n
        held.append({**entry, "rows": len(words), "occurrences": sum(counts),
                     "pretoken_bytes": sum(len(w) * n for w, n in zip(words, counts))})
    _check_totals(folder / MANIFEST, manifest, held)
    return Counts(total, manifest["pattern"], list(manifest["special_tokens"]),
                  manifest.get("totals", {}).get("input_bytes"), recorded_min_count(manifest))


def recorded_min_count(manifest: dict) -> int:
    """The `min_pretoken_count` a table's manifest records (see `writer.count_corpus`): 1 if none."""
    n = manifest.get("min_pretoken_count", 1)
    if type(n) is not int or n < 1:
        raise ValueError(f"the manifest's min_pretoken_count must be a positive whole number, got {n!r}")
    return n


def _check_totals(path: Path, manifest: dict, held: list[dict]) -> None:
    """ValueError naming `path` when an entry says other than its shard holds (`held`: the entries
    with what was read) or the manifest's totals are not the sum of its shards (a shard left out,
    or totals edited). What a manifest written elsewhere leaves out is not checked."""
    for entry, read in zip(manifest["shards"], held):
        for key in ("rows", "occurrences", "pretoken_bytes"):
            if key in entry and entry[key] != read[key]:
                raise ValueError(f"{path}: the shard {entry['name']} holds {read[key]} {key.replace('_', ' ')}, "
                                 f"its entry says {entry[key]}; count the corpus again")
    listed = manifest.get("totals")
    if not isinstance(listed, dict):
        return
    for key, value in totals(held).items():
        if key in listed and listed[key] != value and (key == "shards" or all(key in e for e in held)):
            raise ValueError(f"{path}: the totals say {listed[key]} {key.replace('_', ' ')}, the shards it lists "
                             f"hold {value} (a shard left out, or the manifest edited); count the corpus again")


_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([\\tnr]))")
_SIMPLE = {"\\": b"\\", "t": b"\t", "n": b"\n", "r": b"\r"}


def token_from_readable(text: str) -> bytes:
    r"""The bytes of a token written by `readable_token`: `\\`, `\t`, `\n`, `\r`, `\xNN` (a byte),
    `\uNNNN` and `\UNNNNNNNN` (a character, in UTF-8); any other character stands for itself.
    ValueError for a backslash that starts none of these."""
    if "\\" not in text:
        return text.encode("utf-8")
    out = bytearray()
    at = 0
    for m in _ESCAPE.finditer(text):
        plain = text[at:m.start()]
        if "\\" in plain:
            break
        out += plain.encode("utf-8")
        byte, char4, char8, simple = m.groups()
        if byte is not None:
            out.append(int(byte, 16))
        elif simple is not None:
            out += _SIMPLE[simple]
        else:
            code = int(char4 or char8, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise ValueError(f"\\u escape {m.group(0)} is not a character")
            out += chr(code).encode("utf-8")
        at = m.end()
    rest = text[at:]
    if "\\" in rest:
        shown = rest[rest.index("\\"):][:10]
        raise ValueError(f"a backslash starts no escape at '{shown}' (\\\\, \\t, \\n, \\r, \\xNN, \\uNNNN, \\UNNNNNNNN)")
    return bytes(out + rest.encode("utf-8"))


def _is_count(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _line(raw: bytes, path: Path, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}, line {number}: not UTF-8 (write other bytes as \\xNN)") from None


def _closing(f: BinaryIO, path: Path, number: int) -> tuple[int, int, str] | None:
    """Where a quoted cell left open at the end of line `number` closes, reading on from `f`'s
    position: (the line's number, the index just past its closing quote, the line's text); None when
    the file ends first."""
    while raw := f.readline():
        number += 1
        text = _line(raw, path, number)
        if (end := tsv.closing_quote(text, 0)) is not None:
            return number, end, text
    return None


def _quoted_record(f: BinaryIO, path: Path, number: int, line: str) -> tuple[int, str, str | None]:
    """The record that starts with line `number`, `line` (its text, which starts with `"`): (the
    number of its last line, the text of its pre-token cell, the text of its count or None when the
    line has no tab). Reads on from `f` when the cell's quote runs on over the next lines."""
    whole = line.removesuffix("\n").removesuffix("\r")
    cell, tab, count = whole.rpartition("\t")
    as_it_stands = number, cell, count if tab else None
    end = tsv.closing_quote(line)
    if end is not None:  # closes on this line: a quoted cell if a tab and the count follow
        if whole[end:end + 1] == "\t" and _is_count(whole[end + 1:]):
            return number, tsv.unquote(whole[:end]), whole[end + 1:]
        return as_it_stands
    at = f.tell()  # the cell may hold line breaks: find where it closes
    closing = _closing(f, path, number)
    if closing is not None:
        last, end, text = closing
        after = text[end:].removesuffix("\n").removesuffix("\r")
        if after[:1] == "\t" and _is_count(after[1:]):
            if tab and _is_count(count):
                raise ValueError(f"{path}, line {number}: reads two ways: as the pre-token {cell!r} (the line as "
                                 f"it stands) and as a quoted pre-token that runs on to line {last}; write a "
                                 'pre-token that starts with " quoted ("""" for ") or as \\x22')
            f.seek(at)
            middle = "".join(_line(f.readline(), path, n) for n in range(number + 1, last))
            f.readline()
            return last, tsv.unquote(line + middle + text[:end]), after[1:]
    f.seek(at)  # not a quoted cell: the line as it stands
    if not (tab and _is_count(count)):
        raise ValueError(f"{path}, line {number}: expected pre-token<TAB>count; a line that starts with \" opens "
                         'a quoted pre-token, which a lone ", a tab and the count close')
    return as_it_stands


# A count file is read this many bytes at a time (and on to the end of the last line).
_TSV_BLOCK = 1 << 24
# What ends a plain row: the tab before its count, the count, the line's end. A line of one matches
# where its last tab is, since no digit is a tab.
_ROW_END = re.compile(rb"\t([0-9]+)\r?\n")


def _add_lines(total: dict[bytes, int], lines: bytes, path: Path, number: int) -> int:
    """Add the rows of `lines` (whole lines, numbered from `number + 1`, none starting with a quote)
    to `total`; return the number of the last. Plain rows, nearly every row of a count file, are
    read a block at a time in C (some 0.5 us a row, where a line at a time took 1.5); a block that
    holds any other line is read a line at a time, which says what is wrong with it."""
    if not lines:
        return number
    if not lines.endswith(b"\n"):  # the file's last line
        lines += b"\n"
    parts = _ROW_END.split(lines)
    cells, counts = parts[0:-1:2], parts[1::2]
    plain = len(counts) == lines.count(b"\n") and b"" not in cells and max(map(len, counts)) < 19
    try:
        if plain:
            lines.decode("utf-8")  # checked: the cells are kept as their bytes
            if b"\\" in lines:
                cells = [token_from_readable(cell.decode("utf-8")) if b"\\" in cell else cell for cell in cells]
    except ValueError:  # not UTF-8, or a bad escape
        plain = False
    if not plain:
        for raw in io.BytesIO(lines):
            number += 1
            cell, tab, count = _line(raw.rstrip(b"\n").removesuffix(b"\r"), path, number).rpartition("\t")
            _add_row(total, cell, count if tab else None, path, number)
        return number
    get = total.get
    for cell, count in zip(cells, map(int, counts)):
        total[cell] = get(cell, 0) + count
    return number + len(counts)


def _add_row(total: dict[bytes, int], cell: str, count: str | None, path: Path, number: int) -> None:
    """Add the row of line `number` (its pre-token cell's text and its count's, None for none) to
    `total`; ValueError naming the line for a bad one."""
    try:
        if count is None:
            raise ValueError("expected pre-token<TAB>count")
        if not _is_count(count):
            raise ValueError(f"the count {count!r} is not a whole number")
        n = int(count)
        if n > INT64_MAX:
            raise ValueError(f"the count {n} does not fit in 64 bits")
        if not cell:
            raise ValueError("the pre-token is empty (a pre-token holds at least one byte)")
        key = token_from_readable(cell)
    except ValueError as e:
        raise ValueError(f"{path}, line {number}: {e}") from None
    total[key] = total.get(key, 0) + n


def read_tsv(path: Path) -> Counts:
    r"""The counts in a text file of `pre-token<TAB>count` lines. ValueError naming the file and line
    for a bad line.

    The file is UTF-8 (a byte-order mark at its start is skipped); lines end with `\n` or `\r\n`.
    Each line is a pre-token cell, a tab and the count, a whole number of at most 64 bits. The cell
    is read as `text.tsv` reads cells: one that starts with `"` and that a lone `"` closes right
    before the tab is quoted, and stands for the text between its quotes (`""` for `"`; it may hold
    tabs and line breaks, so it may run over several lines); any other cell is everything before the
    line's last tab, as it stands. The cell's text then goes through `token_from_readable` (`\t`,
    `\xNN`...), which gives the pre-token's bytes; an empty pre-token is refused. A pre-token
    written twice counts twice.

    A line that starts with `"` but is not closed so on that line may be both a whole line as it
    stands and the start of a quoted cell that runs on; such a file is refused, naming the line.
    So the files of `write_tsv`, and those `csv` and pandas (`to_csv(sep="\t", header=False,
    index=False)`) write from readable tokens, read back as written; so do lines written by hand,
    `"` and all, and raw text that holds no backslash, whoever quoted it.
    """
    total: dict[bytes, int] = {}
    with open(path, "rb") as f:
        if f.read(len(BOM)) != BOM:
            f.seek(0)
        number = 0  # the lines read so far
        while block := f.read(_TSV_BLOCK) + f.readline():  # whole lines
            end = f.tell()  # where the block ends in the file
            while block:
                quoted = 0 if block.startswith(b'"') else block.find(b'\n"') + 1 or len(block)
                number = _add_lines(total, block[:quoted], path, number)
                if quoted == len(block):
                    break
                # A line that starts with a quote: a record read on its own, from the file (its
                # cell may run on over the next lines, maybe past the block).
                start = end - len(block)
                f.seek(start + quoted)
                first = number + 1
                number, cell, count = _quoted_record(f, path, first, _line(f.readline(), path, first))
                _add_row(total, cell, count, path, first)
                block = block[f.tell() - start:]
                f.seek(max(f.tell(), end))
    return Counts(total, None, None, None)


def write_tsv(counts: Mapping[bytes, int], path: "str | os.PathLike") -> None:
    """Write `counts` as a text file of `pre-token<TAB>count` lines that `read_tsv` reads back equal:
    each pre-token as `readable_token` shows it, in a cell as `text.tsv` writes it (quoted when it
    holds `"`), in the order of `counts`. Written all or nothing."""
    counts = read_counts(counts).word_counts  # checked: bytes to whole numbers of 64 bits
    if b"" in counts:
        raise ValueError("the empty pre-token cannot be written to a count file (a pre-token holds at least one byte)")
    with staged.replacing(path, fsync=False) as f:
        for word, n in counts.items():
            f.write((tsv.row([readable_token(word), n]) + "\n").encode("utf-8"))


def read_counts(source: "str | os.PathLike | Mapping[bytes, int]") -> Counts:
    """The counts of a table folder, a `pre-token<TAB>count` file, or a mapping of pre-token bytes to counts."""
    if isinstance(source, Mapping):
        for word, n in source.items():
            if not isinstance(word, bytes) or type(n) is not int or not 0 <= n <= INT64_MAX:
                raise ValueError(f"counts map pre-token bytes to whole numbers of 64 bits; got {word!r}: {n!r}")
        return Counts(dict(source), None, None, None)
    path = Path(source)
    if path.is_dir():
        return read_table(path)
    if not path.exists():
        raise FileNotFoundError(2, f"count table not found: {path}")
    return read_tsv(path)


def counted_with(source: "str | os.PathLike") -> tuple[list[str] | None, str | None]:
    """(special tokens, pattern) a table was counted with, read from its manifest; (None, None)
    for a text file, which does not say."""
    path = Path(source)
    if not path.is_dir():
        return None, None
    manifest = read_manifest(path)
    return list(manifest["special_tokens"]), manifest["pattern"]


def agreed(counts: Counts, source, special_tokens, pattern) -> tuple[list[str], str]:
    """The special tokens and pattern to train with: those given, which must equal the table's, or
    else the table's (for a text file or a mapping, which record none: `DEFAULT_SPECIAL_TOKENS` and
    "gpt2", as for a corpus)."""
    if special_tokens is not None:
        special_tokens = validate_special_tokens(special_tokens)
        if counts.special_tokens is not None and special_tokens != counts.special_tokens:
            raise ValueError(f"{source} was counted with the special tokens {counts.special_tokens}, not "
                             f"{special_tokens}: pass those (or none), or count the corpus again")
    if pattern is not None:
        pattern = patterns.canonical(pattern)
        if counts.pattern is not None and pattern != counts.pattern:
            raise ValueError(f"{source} was counted with the pattern {counts.pattern!r}, not {pattern!r}: "
                             "pass that one (or none), or count the corpus again")
    if special_tokens is None:
        special_tokens = list(DEFAULT_SPECIAL_TOKENS) if counts.special_tokens is None else counts.special_tokens
    return special_tokens, pattern if pattern is not None else counts.pattern or "gpt2"


# --- adding tables up ----------------------------------------------------------------------------------


def merge_tables(folders: list["str | os.PathLike"], out: "str | os.PathLike") -> dict:
    """Add up the tables in `folders` into a new table at `out` (a folder that does not exist or is
    empty), exactly; return its manifest. Tables counted with other patterns or special tokens
    are refused, naming both. The output is written all or nothing."""
    if not folders:
        raise ValueError("merging count tables needs at least one table")
    folders = [Path(f) for f in folders]
    out = Path(out)
    manifests = [read_manifest(f) for f in folders]
    first = manifests[0]
    for folder, manifest in zip(folders[1:], manifests[1:]):
        for key, what in (("pattern", "pattern"), ("special_tokens", "special tokens")):
            if manifest[key] != first[key]:
                raise ValueError(f"{folder} was counted with the {what} {manifest[key]!r} but {folders[0]} with "
                                 f"{first[key]!r}: tables of different {what} cannot be added up")
    for folder in folders:
        if out.resolve() == folder.resolve():
            raise ValueError(f"{out} is one of the tables to merge; write the sum to a new folder")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} exists and is not an empty folder; write the sum to a new folder")
    total: dict[bytes, int] = {}
    for folder in folders:
        counts = read_table(folder).word_counts
        get = total.get
        for word, n in counts.items():
            total[word] = get(word, 0) + n
        del counts
    words = sorted(total)
    counts = [total[w] for w in words]
    del total
    head = {"format": FORMAT, "version": VERSION, "pattern": first["pattern"], "special_tokens": first["special_tokens"],
            "text_field": first.get("text_field"), "piece_size": None,
            "inputs": [i for m in manifests for i in m.get("inputs", [])],
            "merged_from": [str(f) for f in folders]}
    if max(map(recorded_min_count, manifests)) > 1:  # the largest asked for: the sum still holds every count
        head["min_pretoken_count"] = max(map(recorded_min_count, manifests))
    input_bytes = sum(m.get("totals", {}).get("input_bytes", 0) for m in manifests)
    entries = []
    with staged.folders_for([out / MANIFEST]), staged.StagedFiles() as files:
        for index, start in enumerate(range(0, max(len(words), 1), MERGED_SHARD_ROWS)):
            part_words, part_counts = words[start:start + MERGED_SHARD_ROWS], counts[start:start + MERGED_SHARD_ROWS]
            data = shard_data(part_words, part_counts)
            files.open(out / shard_name(index)).write(data)
            entries.append({**shard_record(shard_name(index), data, part_words, part_counts),
                            "input_bytes": input_bytes if index == 0 else 0})
        text = manifest_text(head, entries)
        files.open(out / MANIFEST).write(text.encode("utf-8"))  # renamed last: the table is there once it is
        files.commit()
    return json.loads(text)
