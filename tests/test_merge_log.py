"""The merge log (each merge's count and the corpus length after it), checked against the slow
reference trainer and against encoding; its TSV file; the readable form of tokens; the curve."""

import csv
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer, train_bpe
from cs336_basics.cli import main
from cs336_basics.report import truncated
from cs336_basics.train.merge import train_merges
from cs336_basics.text import tsv
from cs336_basics.train.merge_log import (
    COLUMNS,
    MergeLog,
    compression_curve,
    merge_log_tsv,
    read_merge_log,
    readable_token,
)
from cs336_basics.train.reference import count_pretokens, learn_merges, train_bpe_reference
from tests.common import FIXTURES_PATH
from tests.reference import REFERENCE_RUNS

EXAMPLES = int(os.environ.get("BPE_FUZZ_EXAMPLES", 0)) or 200
EOT = "<|endoftext|>"


def train_text(tmp_path, text: str, vocab_size: int, specials: list[str], **kwargs):
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    log: list[tuple[int, int]] = []
    vocab, merges = train_bpe(path, vocab_size, specials, merge_log=log, **kwargs)
    return vocab, merges, log


# --- examples worked on paper ----------------------------------------------------------------------


def test_overlapping_pair_counts_twice_but_merges_once(tmp_path):
    # "aaa": (a, a) occurs twice (overlapping), merging gives "aa a", then "aaa".
    _, merges, log = train_text(tmp_path, "aaa", 300, [])
    assert merges == [(b"a", b"a"), (b"aa", b"a")]
    assert log == [(2, 2), (1, 1)]


def test_counts_weigh_pretokens_and_skip_special_tokens(tmp_path):
    # Pre-tokens "ab", "ab", " ab": 7 bytes (the special token is not counted); (a, b) occurs 3 times
    # and each occurrence saves one token: 7 - 3 = 4.
    _, merges, log = train_text(tmp_path, f"ab{EOT}ab ab", 258, [EOT])
    assert merges == [(b"a", b"b")]
    assert log == [(3, 4)]


def test_empty_corpus_gives_an_empty_log(tmp_path):
    assert train_text(tmp_path, "", 400, [EOT])[2] == []


# --- against the slow reference --------------------------------------------------------------------

PIECES = ["aaaa", "aaa", "  ", "    ", "\n\n\n", "abab", "the", " the", "café", "中中中", "😀😀", "11111", "!!!", EOT]


@st.composite
def corpora(draw):
    specials = draw(st.sampled_from([[], [EOT]]))
    pieces = st.sampled_from(PIECES) | st.text(alphabet="ab a\n中", min_size=1, max_size=6)
    text = "".join(draw(st.lists(pieces, max_size=30)))
    vocab_size = 256 + len(specials) + draw(st.integers(0, 80))
    return text, vocab_size, specials


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpora())
def test_log_matches_reference_on_generated_corpora(tmp_path, case):
    text, vocab_size, specials = case
    reference_log: list[tuple[int, int]] = []
    expected = train_bpe_reference(text, vocab_size, specials, merge_log=reference_log)
    vocab, merges, log = train_text(tmp_path, text, vocab_size, specials)
    assert (vocab, merges) == expected
    assert log == reference_log


@pytest.mark.parametrize("name", ["english", "code", "chinese"])
def test_log_matches_reference_on_fixtures(name):
    path = FIXTURES_PATH / f"{name}.txt"
    specials = REFERENCE_RUNS[name][1]
    reference_log: list[tuple[int, int]] = []
    train_bpe_reference(path.read_bytes().decode("utf-8"), 420, specials, merge_log=reference_log)
    log: list[tuple[int, int]] = []
    train_bpe(path, 420, specials, merge_log=log, num_workers=2, piece_size=5000)
    assert log == reference_log




@pytest.mark.slow
@pytest.mark.parametrize("num_shards", [1, 2, 3])
def test_sharded_merge_loop_logs_the_same(num_shards):
    # train_bpe shards only large corpora, so drive the merge loop directly. The code fixture has
    # runs of spaces, whose pairs overlap: there count and shrink differ.
    text = (FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8") + (FIXTURES_PATH / "code.txt").read_text()
    counts = count_pretokens(text, [EOT])
    steps: list[tuple[int, int]] = []
    train_merges(counts, 300, num_shards=num_shards, merge_log=steps)
    expected = learn_merges(counts, 300)[1]
    tokens = sum(len(w) * n for w, n in counts.items())
    got = []
    for count, shrink in steps:
        tokens -= shrink
        got.append((count, tokens))
    assert got == expected
    assert any(count != shrink for count, shrink in steps)  # overlaps were exercised


# --- the log is what encoding gives: the curve without re-encoding ---------------------------------


@pytest.mark.parametrize("name", ["english", "code"])
def test_tokens_equal_the_length_of_the_encoded_corpus(name):
    path = FIXTURES_PATH / f"{name}.txt"
    specials = REFERENCE_RUNS[name][1]
    text = path.read_bytes().decode("utf-8")
    log: list[tuple[int, int]] = []
    stats: dict = {}
    vocab, merges = train_bpe(path, 700, specials, merge_log=log, stats=stats)
    tokenizer = Tokenizer(vocab, merges, specials)
    num_specials = sum(text.count(t) for t in specials)
    corpus_bytes = len(text.encode()) - num_specials * len(EOT)
    assert stats["pretoken_bytes"] == corpus_bytes
    for k in [0, 1, 5, 50, len(merges) // 2, len(merges)]:
        length = len(truncated(tokenizer, k).encode(text)) - num_specials
        assert length == (log[k - 1][1] if k else corpus_bytes)
    curve = compression_curve(MergeLog(corpus_bytes, log), base_vocab_size=256 + len(specials))
    assert curve[0] == (256 + len(specials), 1.0)
    assert [size for size, _ in curve] == list(range(256 + len(specials), len(vocab) + 1))
    assert [bpt for _, bpt in curve[1:]] == [corpus_bytes / tokens for _, tokens in log]
    assert all(a[1] < b[1] for a, b in zip(curve, curve[1:]))  # every merge shortens the corpus


# --- merge_log.tsv ---------------------------------------------------------------------------------


def test_bpe_train_writes_the_merge_log(tmp_path, capsys):
    path = FIXTURES_PATH / "code.txt"
    assert main(["train", str(path), "--vocab-size", "400", "--special-token", EOT, "--out", str(tmp_path), "--quiet"]) == 0
    assert "merge_log.tsv" in capsys.readouterr().out
    lines = (tmp_path / "merge_log.tsv").read_text(encoding="utf-8").splitlines()
    with open(tmp_path / "merge_log.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))  # as csv reads it: the token `"` is a quoted cell
    assert len(rows) == len(lines)
    assert rows[0] == COLUMNS + ["occurrences"]
    assert COLUMNS == ["rank", "id", "left", "right", "token", "count", "tokens"]
    reference_log: list[tuple[int, int]] = []
    _, merges = train_bpe_reference(path.read_bytes().decode("utf-8"), 400, [EOT], merge_log=reference_log)
    assert len(lines) == 2 + 256 + len(merges)
    text = path.read_bytes().decode("utf-8")
    corpus_bytes = len(text.encode()) - text.count(EOT) * len(EOT)
    assert rows[1] == [""] * 6 + [str(corpus_bytes), ""]  # the corpus before any merge
    # The bytes' rows: id, token and occurrences (checked against encoding in test_under_trained.py).
    assert [row[:7] for row in rows[2:258]] == [["", str(b), "", "", readable_token(bytes([b])), "", ""]
                                                for b in range(256)]
    for rank, (row, (left, right), (count, tokens)) in enumerate(zip(rows[258:], merges, reference_log)):
        expected = [str(rank), str(256 + rank), readable_token(left), readable_token(right),
                    readable_token(left + right), str(count), str(tokens)]
        assert row[:7] == expected
    merged = [readable_token(left + right) for left, right in merges]
    occurrences = [int(row[7]) for row in rows[2:]]
    assert read_merge_log(tmp_path / "merge_log.tsv") == MergeLog(corpus_bytes, reference_log, merged, occurrences)


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "line 1: expected the header"),
        ("rank\tid\n", "line 1: expected the header"),
        ("\t".join(COLUMNS) + "\n0\t256\ta\tb\tab\t2\t3\n", "line 2: expected the corpus length before any merge"),
        ("\t".join(COLUMNS) + "\n\t\t\t\t\t\t5\n0\t256\ta\tb\tab\tmany\t3\n", "line 3: expected 7 tab-separated fields"),
        ("\t".join(COLUMNS) + "\n\t\t\t\t\t\t5\n1\t257\ta\tb\tab\t2\t3\n", "line 3: rank 1 where 0 was expected"),
    ],
)
def test_bad_merge_log_names_file_and_line(tmp_path, content, message):
    path = tmp_path / "merge_log.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(message)) as e:
        read_merge_log(path)
    assert str(path) in str(e.value)


# --- merge_log.tsv read by pandas and csv ---------------------------------------------------------

# What pandas reads as a missing value by default, quoted or not (its documented `na_values`).
PANDAS_NA = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
             "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
TRICKY = [b'"', b'""', b'"NA"', b'a"b', b"NA", b"null", b"nan", b"NaN", b"None", b"N/A", b"#N/A", b"<NA>", b"",
          b" ", b"  ", b"\t", b"\n", b"\r\n", b"1", b"1.5", b"-nan", b"#", b"\\", b"\xef\xbb\xbf", b",", b"'"]
tokens = st.sampled_from(TRICKY) | st.binary(max_size=4)
# A token is never empty: an empty piece joins a drawn neighbour.
merge_pairs = st.lists(st.tuples(tokens, tokens).filter(lambda p: p[0] and p[1]), max_size=8)


def write_log(tmp_path, merges, occurrences=True):
    steps = [(7 + i, 100 - i) for i in range(len(merges))]
    counts = list(range(256 + len(merges))) if occurrences else None
    log = MergeLog(1000, steps, None, counts)
    path = tmp_path / "merge_log.tsv"
    path.write_text(merge_log_tsv(merges, log), encoding="utf-8")
    return path, log


def shown_cells(merges, occurrences=True):
    """The left, right and token cells of each row after the header, as `readable_token` shows them."""
    rows = [("", "", "")] + ([("", "", readable_token(bytes([b]))) for b in range(256)] if occurrences else [])
    return rows + [(readable_token(left), readable_token(right), readable_token(left + right)) for left, right in merges]


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(merges=merge_pairs, occurrences=st.booleans())
def test_merge_log_reads_the_same_with_ours_csv_and_pandas(tmp_path, merges, occurrences):
    pd = pytest.importorskip("pandas")
    path, log = write_log(tmp_path, merges, occurrences)
    expected = shown_cells(merges, occurrences)
    merged = [token for _, _, token in expected[257 if occurrences else 1:]]
    assert read_merge_log(path) == MergeLog(log.corpus_bytes, log.steps, merged, log.occurrences)

    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [(r["left"], r["right"], r["token"]) for r in rows] == expected
    assert [r["count"] for r in rows[len(rows) - len(merges):]] == [str(c) for c, _ in log.steps]

    # The call docs/looking-inside.md gives: missing-value markers stay text, empty cells are missing.
    table = pd.read_csv(path, sep="\t", keep_default_na=False, na_values=[""])
    assert list(table.columns) == (COLUMNS + ["occurrences"] if occurrences else COLUMNS)
    assert len(table) == len(expected)
    assert list(table["tokens"])[:1] + list(table["count"])[len(table) - len(merges):] == [1000] + [c for c, _ in log.steps]
    as_text = pd.read_csv(path, sep="\t", keep_default_na=False, na_values=[""],
                          dtype={"left": str, "right": str, "token": str})
    cells = as_text[["left", "right", "token"]].fillna("").itertuples(index=False, name=None)
    assert list(cells) == expected
    if occurrences:  # the bytes' rows make the token column text even without dtype=
        assert list(table["token"].fillna("")) == [token for _, _, token in expected]

    # pandas' defaults: every row and column reads right; only what pandas calls missing is NaN.
    default = pd.read_csv(path, sep="\t")
    assert default.shape == table.shape
    if occurrences:
        for got, (_, _, want) in zip(default["token"], expected):
            assert (pd.isna(got) and want in PANDAS_NA) or got == want


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.text(max_size=5) | st.sampled_from(sorted(PANDAS_NA) + ['"', "\t", "\n", "\r", '"\t"']),
                         min_size=2, max_size=2), min_size=1, max_size=6))
def test_any_cells_round_trip_through_tsv_csv_and_pandas(tmp_path, table):
    pd = pytest.importorskip("pandas")
    text = "".join(tsv.row(r) + "\n" for r in [["a", "b"]] + table)
    assert tsv.read_rows(text) == [["a", "b"]] + table
    path = tmp_path / "table.tsv"
    path.write_text(text, encoding="utf-8", newline="")
    with open(path, encoding="utf-8", newline="") as f:
        assert list(csv.reader(f, delimiter="\t")) == [["a", "b"]] + table
    read = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False, skip_blank_lines=False)
    assert [list(r) for r in read.itertuples(index=False, name=None)] == table


@pytest.mark.parametrize("cell, written", [("a", "a"), ('"', '""""'), ('a"b', '"a""b"'), ("a\tb", '"a\tb"'),
                                           ("a\nb", '"a\nb"'), ("NA", "NA"), ("", ""), (12, "12")])
def test_tsv_quotes_only_cells_that_need_it(cell, written):
    assert tsv.cell(cell) == written


def test_merge_logs_written_before_quoting_still_read(tmp_path):
    # Written the old way: cells as they are, a token `"` bare. The merges make `""` and `""""`, whose
    # cells would also be valid quoted cells: the bare `"` cells show the file is of the old kind.
    merges = [(b'"', b'"'), (b'""', b'""'), (b"N", b"A")]
    shown = shown_cells(merges)
    header, start = COLUMNS + ["occurrences"], [""] * 6 + ["1000", ""]
    bytes_rows = [["", b, "", "", shown[1 + b][2], "", "", b] for b in range(256)]
    merge_rows = [[rank, 256 + rank, *shown[257 + rank], 7 + rank, 100 - rank, 256 + rank] for rank in range(3)]
    new, log = write_log(tmp_path, merges)
    expected = MergeLog(1000, [(7, 100), (8, 99), (9, 98)], ['""', '""""', "NA"], log.occurrences)
    assert read_merge_log(new) == expected
    for rows, want in [([header, start, *bytes_rows, *merge_rows], expected),
                       ([r[:7] for r in [header, start, *merge_rows]], MergeLog(1000, expected.steps, expected.merged))]:
        old = tmp_path / "old.tsv"
        old.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")
        assert old.read_text(encoding="utf-8") != new.read_text(encoding="utf-8")
        assert read_merge_log(old) == want


# --- readable tokens -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "token, shown",
    [
        (b" the", " the"), ("日本".encode(), "日本"), (b"\xe6\x97", r"\xe6\x97"), (b" \xe6", r" \xe6"),
        (b"a\tb\nc\r", r"a\tb\nc\r"), (b"back\\slash", r"back\\slash"), (b"\x00\x1f\x7f", r"\x00\x1f\x7f"),
        ("\u0085".encode(), r"\u0085"), ("\u00a0".encode(), r"\u00a0"), ("\U000e0001".encode(), r"\U000e0001"),
        (b"\xed\xa0\x80", r"\xed\xa0\x80"),  # an encoded surrogate is not UTF-8
    ],
)
def test_readable_token_examples(token, shown):
    assert readable_token(token) == shown


def unescape(shown: str) -> bytes:
    """The inverse of readable_token, written independently from its documented escapes."""
    out = bytearray()
    for m in re.finditer(r"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8})|(.))|(.)", shown, re.S):
        hex2, hex4, hex8, escaped, plain = m.groups()
        if hex2:
            out.append(int(hex2, 16))
        elif hex4 or hex8:
            out += chr(int(hex4 or hex8, 16)).encode()
        elif escaped:
            out += {"\\": b"\\", "t": b"\t", "n": b"\n", "r": b"\r"}[escaped]
        else:
            out += plain.encode()
    return bytes(out)


@settings(max_examples=EXAMPLES)
@given(st.binary(max_size=12) | st.text(max_size=6).map(lambda s: s.encode("utf-8", "surrogatepass")))
def test_readable_token_is_one_line_and_can_be_read_back(token):
    shown = readable_token(token)
    assert "\t" not in shown and "\n" not in shown and "\r" not in shown
    assert unescape(shown) == token


def test_inspect_shows_tokens_readably(tmp_path, capsys):
    assert main(["train", str(FIXTURES_PATH / "english.txt"), "--vocab-size", "300", "--out", str(tmp_path), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["inspect", "--tokenizer", str(tmp_path), "a\tb\n日"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == r"[a][\t][b][\n][\xe6][\x97][\xa5]"
