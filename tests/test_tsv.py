r"""One TSV dialect, read as it is written (`text/tsv.py`, `counts.table.read_tsv`): a count file
written by our writer, by Python's `csv`, by pandas or by hand reads back as the pre-tokens and counts
it was written from; a cell quoted the CSV way stands for the text between its quotes, and a `"`
anywhere else is itself."""

import csv
import io
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer, train_bpe_from_counts
from cs336_basics.cli import main
from cs336_basics.counts import table
from cs336_basics.text import tsv
from cs336_basics.train.merge_log import readable_token

EXAMPLES = 150
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# What a pre-token may hold that a TSV reader could get wrong.
AWKWARD = ['"', '""', '"a"', '"a', 'a"', "\t", "\n", "\r", "\r\n", "NA", "nan", "None", "null", "N/A", "\x00",
           "\\", "\\t", "\ufeff", " ", "é", "你好", "1\t2"]
TEXTS = st.lists(st.sampled_from(AWKWARD) | st.text(max_size=4), min_size=1, max_size=4).map("".join).filter(bool)
TOKENS = (st.binary(min_size=1, max_size=10) | TEXTS.map(lambda t: t.encode("utf-8"))
          | st.sampled_from([b"\xff", b"\xe4\xb8", b'"\xff"', b"\x00\t\n"]))
COUNTS = st.dictionaries(TOKENS, st.integers(0, table.INT64_MAX), min_size=1, max_size=6)


def read(tmp_path, data: bytes | str) -> dict[bytes, int]:
    path = tmp_path / "counts.tsv"
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return table.read_tsv(path).word_counts


def csv_text(rows) -> str:
    out = io.StringIO(newline="")
    csv.writer(out, delimiter="\t").writerows(rows)  # lines end with \r\n, csv's default
    return out.getvalue()


def pandas_text(rows) -> str:
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(rows, columns=["pretoken", "count"]).to_csv(sep="\t", index=False, header=False)


@SETTINGS
@given(counts=COUNTS)
def test_our_writer_reads_back(tmp_path, counts):
    path = tmp_path / "counts.tsv"
    table.write_tsv(counts, path)
    assert table.read_tsv(path).word_counts == counts


@SETTINGS
@given(counts=COUNTS, writer=st.sampled_from([csv_text, pandas_text]))
def test_readable_cells_written_by_csv_and_pandas_read_back(tmp_path, counts, writer):
    """Any bytes: the cell is the token's readable text (escapes), quoted by whoever writes it."""
    assert read(tmp_path, writer([(readable_token(w), n) for w, n in counts.items()])) == counts


def reads_two_ways(text: str) -> bool:
    """Whether a raw text, quoted and running over lines, has a first line that is a whole
    `pre-token<TAB>count` line as it stands (the one case a count file refuses rather than guess)."""
    first = tsv.cell(text).split("\n")[0]
    return "\n" in text and re.fullmatch(r"(?s).*\t[0-9]+\r?", first) is not None


@SETTINGS
@given(texts=st.dictionaries(TEXTS.filter(lambda t: "\\" not in t), st.integers(0, 1000), min_size=1, max_size=6),
       writer=st.sampled_from([csv_text, pandas_text]))
def test_raw_text_written_by_csv_and_pandas_reads_back(tmp_path, texts, writer):
    """Text without a backslash (which would start an escape), tabs, line breaks and `"` as they are:
    csv and pandas quote what needs it, and a quoted cell may run over several lines."""
    first = next(iter(texts))
    if first.startswith("\ufeff") and writer([(first, 0)])[0] != '"':
        texts = {"x" + t if t == first else t: n for t, n in texts.items()}  # a byte-order mark would be skipped
    data = writer(list(texts.items()))
    if any(reads_two_ways(t) for t in texts):
        with pytest.raises(ValueError, match="reads two ways"):
            read(tmp_path, data)
    else:
        assert read(tmp_path, data) == {t.encode("utf-8"): n for t, n in texts.items()}


QUOTED = re.compile(r'"(?:[^"]|"")*"', re.S)


@SETTINGS
@given(cell=st.lists(st.sampled_from(['"', "a", "é", "N", "A", " ", ","]), min_size=1, max_size=8).map("".join))
def test_a_quote_outside_a_quoted_cell_is_itself(tmp_path, cell):
    """One line as written by hand: a cell quoted the CSV way is the text between its quotes, any
    other cell (`a"b`, `"a"b`, a lone `"`) is itself."""
    want = tsv.unquote(cell) if QUOTED.fullmatch(cell) else cell
    if not want:
        with pytest.raises(ValueError, match="line 1: the pre-token is empty"):
            read(tmp_path, f"{cell}\t3\n")
    else:
        assert read(tmp_path, f"{cell}\t3\n") == {want.encode("utf-8"): 3}


@pytest.mark.parametrize("line, token", [
    ('"""a"""\t5', b'"a"'),       # merge_log.tsv's writer: the token "a"
    ('"a""b"\t5', b'a"b'),
    ('""""\t5', b'"'),
    ('"a"\t5', b"a"),             # quoted the CSV way, though it need not be
    ('"\t5', b'"'),               # by hand: a lone " is itself
    ('a"b\t5', b'a"b'),
    ('"a"b\t5', b'"a"b'),
    ('."\t5', b'."'),
    ('"\\t\\x00\\\\"\t5', b"\t\x00\\"),   # escapes apply inside a quoted cell too
    ('"a\tb"\t5', b"a\tb"),
    ("a\tb\t5", b"a\tb"),         # unquoted: everything before the last tab
    ("NA\t5", b"NA"),
    ("\ufeffNA\t5", b"NA"),       # a byte-order mark at the start is skipped
])
def test_one_line(tmp_path, line, token):
    assert read(tmp_path, line + "\n") == {token: 5}
    assert read(tmp_path, line + "\r\n") == {token: 5}
    assert read(tmp_path, line) == {token: 5}


def test_a_quoted_cell_runs_over_lines_and_later_lines_are_numbered_right(tmp_path):
    text = '"\n\n"\t5\n"a\r\nb"\t6\n' + '"a\tb\nc"\t1\n' + "x\ty\n"
    with pytest.raises(ValueError, match=r"counts.tsv, line 8: the count 'y' is not a whole number"):
        read(tmp_path, text)
    assert read(tmp_path, text.removesuffix("x\ty\n")) == {b"\n\n": 5, b"a\r\nb": 6, b"a\tb\nc": 1}


def test_legacy_lines_starting_with_a_quote_read_as_they_stand(tmp_path):
    """A file written before quoting, `"` bare: no line closes a quoted cell followed by a tab and a count."""
    assert read(tmp_path, '"\t9\n",\t8\n the\t7\n"\'\t6\n') == {b'"': 9, b'",': 8, b" the": 7, b"\"'": 6}


def test_a_line_that_reads_two_ways_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"counts.tsv, line 2: reads two ways.*line 4"):
        read(tmp_path, 'a\t1\n"\t9\nb\t2\n."\t3\n')


@pytest.mark.parametrize("text, line, message", [
    ("a\t1\n\t5\n", 2, "the pre-token is empty"),
    ('a\t1\n""\t5\n', 2, "the pre-token is empty"),
    ("a\t1\nb\n", 2, "expected pre-token<TAB>count"),
    ('a\t1\n"b\nc\t1\n', 2, "a line that starts with \" opens a quoted pre-token"),
    ("a\t1\nb\t-1\n", 2, "not a whole number"),
    ("a\t1\nb\t\u0661\n", 2, "not a whole number"),  # a digit, but not 0-9
    (f"a\t1\nb\t{1 << 63}\n", 2, "does not fit in 64 bits"),
    ("a\t1\n\\q\t1\n", 2, "a backslash starts no escape"),
    (b"a\t1\n\xff\t1\n", 2, "not UTF-8"),
    (b'a\t1\n"\n\xff"\t1\n', 3, "not UTF-8"),
])
def test_bad_lines_are_named(tmp_path, text, line, message):
    with pytest.raises(ValueError, match=rf"counts.tsv, line {line}: .*{re.escape(message)}"):
        read(tmp_path, text)


def test_the_writer_refuses_what_no_file_can_hold(tmp_path):
    with pytest.raises(ValueError, match="empty pre-token"):
        table.write_tsv({b"": 1}, tmp_path / "c.tsv")
    with pytest.raises(ValueError, match="64 bits"):
        table.write_tsv({b"a": 1 << 63}, tmp_path / "c.tsv")
    assert not (tmp_path / "c.tsv").exists()


def test_bpe_train_counts_reads_a_quoted_token_as_merge_log_writes_it(tmp_path):
    counts = {b'"a"': 50, b'"ab"': 30, b"ab": 20, b'a"b': 7, b"\t\n": 4}
    path = tmp_path / "words.tsv"
    path.write_text("".join(tsv.row([readable_token(w), n]) + "\n" for w, n in counts.items()), encoding="utf-8")
    assert '"""a"""\t50\n' in path.read_text(encoding="utf-8")
    out = tmp_path / "tok"
    assert main(["train", "--counts", str(path), "--vocab-size", "262", "--out", str(out), "--quiet"]) == 0
    _, merges = train_bpe_from_counts(counts, 262)  # a text file names no special tokens
    assert merges[0] == (b'"', b"a")  # read as seven bytes, `"` would pair with `"` first
    assert Tokenizer.from_pretrained(out).merges == merges


# Lines of every kind a count file may hold, good and bad: plain rows (with escapes, `\r\n`, big
# counts), quoted cells running over lines, lines that start with a quote as they stand, and lines
# the reader refuses. Written one after another, the last maybe without its line end.
LINES = st.sampled_from([
    "a\t1\n", " the\t7\r\n", "\\x00\\t\t3\n", "a\tb\t5\n", "é你\t2\n", "x\t0\n", f"big\t{table.INT64_MAX}\n",
    '"a\nb"\t4\n', '"""a"""\t5\n', '"\t9\n', '."\t6\n', '"a\r\n\r\nb"\t8\r\n',
    "\t5\n", "b\n", "\n", "c\t-1\n", f"d\t{1 << 63}\n", "\\q\t1\n", "e\t1\r\r\n", '"open\n',
]) | st.builds(lambda w, n: f"{readable_token(w)}\t{n}\n", TOKENS, st.integers(0, 99))


def read_or_refuse(path) -> dict[bytes, int] | str:
    try:
        return table.read_tsv(path).word_counts
    except ValueError as e:
        return str(e)


@settings(max_examples=EXAMPLES * 2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINES, min_size=1, max_size=12), cut=st.booleans(), bom=st.booleans(),
       bad_byte=st.none() | st.integers(0, 200), block=st.integers(1, 40))
def test_a_block_at_a_time_reads_as_a_line_at_a_time(tmp_path, monkeypatch, lines, cut, bom, bad_byte, block):
    """The oracle is the reader with its fast path off (every line read on its own, as `_add_row`
    reads it): blocks of any size, cut anywhere, read the same rows and refuse the same line."""
    data = (b"\xef\xbb\xbf" if bom else b"") + "".join(lines).encode("utf-8")
    if cut:
        data = data.removesuffix(b"\n")
    if bad_byte is not None:
        data = data[:bad_byte] + b"\xff" + data[bad_byte:]
    path = tmp_path / "counts.tsv"
    path.write_bytes(data)
    monkeypatch.setattr(table, "_ROW_END", re.compile(rb"(?!)"))  # no line is plain: each read on its own
    expected = read_or_refuse(path)
    monkeypatch.undo()
    monkeypatch.setattr(table, "_TSV_BLOCK", block)
    assert read_or_refuse(path) == expected
