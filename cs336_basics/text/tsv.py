r"""The cells of the tab-separated tables we write (`merge_log.tsv`, `bpe vocab`), so that we, pandas
and Python's `csv` module all read the same text back.

The fact it rests on: `pandas.read_csv(path, sep="\t")` and `csv.reader(f, delimiter="\t")` both
read quotes the CSV way by default: a cell that starts with `"` is quoted, runs to the next lone
`"`, and `""` inside it stands for one `"`. So a cell is written as it is unless it holds a `"`, a
tab or a line break; then it is written quoted, its `"` doubled (what `csv` itself writes). Written
as it is, a token `"` would open a quoted cell that swallows the tabs after it.

What quoting cannot do: pandas reads a cell whose whole text is one of its missing-value markers
(`NA`, `null`, `nan`, `None`, `N/A`, `<NA>`...) as missing, quoted or not. Pass
`keep_default_na=False, na_values=[""]`: those cells stay text and only empty cells are missing.

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
