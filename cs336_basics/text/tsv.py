r"""The one tab-separated dialect of our files (`merge_log.tsv`, `bpe vocab`, count files): how a cell
is written and how it is read, so that we, pandas and Python's `csv` module read the same text back.

Writing (`cell`, `row`). A cell is its text as it stands, unless the text holds a `"`, a tab, `\n` or
`\r`: then it is quoted the CSV way, `"`, the text with each `"` doubled, `"` (`a"b` is written
`"a""b"`, and a lone `"` as four of them). Cells are separated by tabs and rows end with `\n`. This
is what `csv.writer(f, delimiter="\t")` and `pandas.DataFrame.to_csv(path, sep="\t")` write (their
default, minimal quoting), and what they read back. Written as it is, a `"` would open a quoted
cell that swallows the tabs after it.

Reading. A cell that starts with `"` and is closed by a lone `"` (one not doubled) where the cell
ends, before its tab or at the end of its row, is a quoted cell: it reads as the text between the
two quotes, each `""` there one `"`; tabs and line breaks inside it are text, so a quoted cell may run
over several lines. Any other cell reads as it stands, `"` and all: `a"b`, `"a"b` and a lone `"` are
themselves. `closing_quote` finds where a quoted cell ends, `unquote` gives its text. Reading a
quoted cell needs no knowledge of who wrote it: ours, `csv`'s and pandas' are the same. (A count
file's line that starts with `"` may read both ways, as a quoted cell running on over the next lines
and as a whole line as it stands; `counts.table.read_tsv` refuses such a file rather than guess.)

Tokens add a second layer on top: `train.merge_log.readable_token` turns a token's bytes into text
with no tab or line break (`\t`, `\n`, `\xNN`...), and that text is the cell. So a reader undoes
the quoting first and the escapes second (`counts.table.token_from_readable`).

What quoting cannot do: pandas reads a cell whose whole text is one of its missing-value markers
(`NA`, `null`, `nan`, `None`, `N/A`, `<NA>`...) as missing, quoted or not. Pass
`keep_default_na=False, na_values=[""]`: those cells stay text and only empty cells are missing.
We never read with pandas, so `NA` is always the two letters to us.

`read_rows` reads what `row` wrote, and also tables written before cells were quoted (each line
split at its tabs, a `"` an ordinary character): text that `row` would not have written so, it
reads that older way.
"""

import csv
import io
from collections.abc import Iterable


def cell(value: object) -> str:
    """`str(value)` as one cell: quoted, with its `"` doubled, if it holds `"`, a tab, `\n` or `\r`."""
    text = str(value)
    if '"' in text or "\t" in text or "\n" in text or "\r" in text:
        return '"' + text.replace('"', '""') + '"'
    return text


def row(values: Iterable[object]) -> str:
    """One line of a table (without its line break): the cells of `values`, separated by tabs."""
    return "\t".join(map(cell, values))


def closing_quote(text: str, start: int = 1) -> int | None:
    """Where a quoted cell ends: the index just past the first lone `"` (one not doubled) of `text` at
    or after `start`, or None when `text` holds none. `text` runs from the cell's opening `"` (so
    `start` is 1 there) or goes on with a cell already open (`start` 0 on a line after the first).
    A `""` is never cut between two calls as long as each piece of text ends with a line break."""
    at = start
    while (quote := text.find('"', at)) >= 0:
        if not text.startswith('"', quote + 1):
            return quote + 1
        at = quote + 2
    return None


def unquote(quoted: str) -> str:
    """The text of a quoted cell (`"` ... `"`, as `closing_quote` delimits it): between the quotes,
    each `""` one `"`. The inverse of `cell` for every text it quotes."""
    return quoted[1:-1].replace('""', '"')


def read_rows(text: str) -> list[list[str]]:
    """The cells of each line of a table, in order, from the text of the whole file.

    Text made of lines that `row` writes, each ending with `\n`, is read as `csv` reads it. Any other
    text (a table written before cells were quoted, whose cells may hold a bare `"`; or one whose
    lines end otherwise) is split at line breaks and tabs as it stands, a last empty line left out.
    """
    try:
        rows = [cells or [""] for cells in csv.reader(io.StringIO(text, newline=""), delimiter="\t", strict=True)]
    except csv.Error:
        rows = None
    if rows is not None and "".join(row(cells) + "\n" for cells in rows) == text:
        return rows
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.split("\t") for line in lines]
