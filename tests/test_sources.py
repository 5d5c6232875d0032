"""Corpora as they come (cs336_basics/corpora/sources.py): folders, globs, lists and URLs of .txt, .jsonl and
.parquet files, compressed or not, read in work units by local processes or any executor.

The oracle is the plain `.txt` of the same documents joined by `<|endoftext|>`: training on any
format or any split into files gives the merges of the reference trainer on that text, and encoding
gives `encode` of it.
"""

import bz2
import gzip
import json
import lzma
import os
import random
import subprocess
import sys
from concurrent.futures import Executor, ProcessPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer, train_bpe
from cs336_basics.cli import main
from cs336_basics.corpora import sources
from cs336_basics.errors import WorkerError
from cs336_basics.train.reference import train_bpe_reference

EOT = "<|endoftext|>"
VOCAB = 330


def make_documents(seed: int, n: int) -> list[str]:
    """Documents of words in several scripts, digits, punctuation and all kinds of whitespace."""
    rng = random.Random(seed)
    words = ["the", "cat", "sat", "Straße", "über", "привет", "мир", "中文", "字", "42", "3.14", "don't",
             "it's", "!!", "...", "(x)", "ﬁne", "😀", "naïve", "a", "aa", "aaa"]
    spaces = [" ", " ", " ", "  ", "\n", "\n\n", "\t", "\r\n", " \u3000", "\xa0"]
    docs = []
    for _ in range(n):
        parts = [rng.choice(spaces) if rng.random() < 0.15 else ""]
        for _ in range(rng.randrange(0, 40)):
            parts.append(rng.choice(words))
            parts.append(rng.choice(spaces))
        docs.append("".join(parts).rstrip(" ") if rng.random() < 0.5 else "".join(parts))
    docs[3] = ""  # an empty document
    return docs


DOCS = make_documents(0, 60)
TEXT = EOT.join(DOCS)


def write_txt(path, docs):
    path.write_bytes(EOT.join(docs).encode("utf-8"))


def write_jsonl(path, docs, field="text", opener=open):
    with opener(path, "wt", encoding="utf-8", newline="\n") as f:
        for i, doc in enumerate(docs):
            f.write(json.dumps({"id": i, field: doc}) + "\n")


def write_parquet(path, docs, field="text", row_group_size=7):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": list(range(len(docs))), field: docs}), path, row_group_size=row_group_size)


def zstd_open(path, mode, **kwargs):
    import io

    import zstandard

    return io.TextIOWrapper(zstandard.ZstdCompressor().stream_writer(open(path, "wb")), **kwargs)


WRITERS = {
    "corpus.txt": write_txt,
    "corpus.jsonl": write_jsonl,
    "corpus.parquet": write_parquet,
    "corpus.jsonl.gz": lambda p, d: write_jsonl(p, d, opener=gzip.open),
    "corpus.jsonl.bz2": lambda p, d: write_jsonl(p, d, opener=bz2.open),
    "corpus.jsonl.xz": lambda p, d: write_jsonl(p, d, opener=lzma.open),
    "corpus.jsonl.zst": lambda p, d: write_jsonl(p, d, opener=zstd_open),
    "corpus.txt.gz": lambda p, d: p.write_bytes(gzip.compress(EOT.join(d).encode())),
    "corpus.txt.zst": lambda p, d: p.write_bytes(__import__("zstandard").ZstdCompressor().compress(EOT.join(d).encode())),
}


@pytest.fixture(scope="module")
def expected_merges():
    return train_bpe_reference(TEXT, VOCAB, [EOT])


@pytest.fixture(scope="module")
def tokenizer():
    vocab, merges = train_bpe_reference(TEXT, VOCAB, [EOT])
    return Tokenizer(vocab, merges, [EOT])


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("formats")
    for name, write in WRITERS.items():
        write(folder / name, DOCS)
    return folder


# --- every format trains and encodes like the .txt -------------------------------------------------


@pytest.mark.parametrize("name", list(WRITERS))
@pytest.mark.parametrize("piece_size", [None, 97])
def test_every_format_trains_like_the_txt(corpus_dir, expected_merges, name, piece_size):
    assert train_bpe(corpus_dir / name, VOCAB, [EOT], num_workers=1, piece_size=piece_size) == expected_merges


@pytest.mark.parametrize("name", list(WRITERS))
@pytest.mark.parametrize("piece_size", [1 << 22, 97])
def test_every_format_encodes_like_the_txt(tmp_path, corpus_dir, tokenizer, name, piece_size):
    out = tmp_path / "ids.npy"
    count = tokenizer.encode_file(corpus_dir / name, out, num_workers=1, piece_size=piece_size)
    assert np.load(out).tolist() == tokenizer.encode(TEXT)
    assert count == len(tokenizer.encode(TEXT))


def test_local_workers_equal_one_process(tmp_path, corpus_dir, tokenizer, expected_merges):
    assert train_bpe(corpus_dir, VOCAB, [EOT], num_workers=2, piece_size=300) == expected_merges
    out = tmp_path / "ids.npy"
    tokenizer.encode_file(sorted(corpus_dir.glob("*.parquet")) + [corpus_dir / "corpus.jsonl"], out,
                          num_workers=2, piece_size=300)
    assert np.load(out).tolist() == tokenizer.encode(EOT.join(DOCS + DOCS))


# --- how the corpus is split into files does not matter ---------------------------------------------


def split(docs: list[str], cuts: list[int]) -> list[list[str]]:
    bounds = [0, *sorted(set(cuts)), len(docs)]
    return [docs[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


@settings(max_examples=int(os.environ.get("BPE_FUZZ_EXAMPLES", 15)), deadline=None)
@given(
    cuts=st.lists(st.integers(1, len(DOCS) - 1), max_size=5),
    kinds=st.lists(st.sampled_from(["txt", "jsonl", "parquet", "jsonl.gz", "txt.gz"]), min_size=6, max_size=6),
    piece_size=st.sampled_from([50, 200, 1 << 20]),
)
def test_splitting_into_files_changes_nothing(tmp_path_factory, expected_merges, tokenizer, cuts, kinds, piece_size):
    folder = tmp_path_factory.mktemp("shards")
    for i, shard in enumerate(split(DOCS, cuts)):
        WRITERS[f"corpus.{kinds[i]}"](folder / f"shard-{i:03d}.{kinds[i]}", shard)
    assert train_bpe(folder, VOCAB, [EOT], num_workers=1, piece_size=piece_size) == expected_merges
    out = folder / "ids.npy"
    tokenizer.encode_file(folder, out, num_workers=1, piece_size=piece_size)
    assert np.load(out).tolist() == tokenizer.encode(TEXT)


def test_txt_documents_cut_across_files_are_still_documents(tmp_path, tokenizer):
    # A file boundary is a document boundary: no pre-token or merge spans it.
    (tmp_path / "a.txt").write_text("hello wor", encoding="utf-8")
    (tmp_path / "b.txt").write_text("ld again", encoding="utf-8")
    out = tmp_path / "ids.npy"
    tokenizer.encode_file(tmp_path, out, num_workers=1)
    assert np.load(out).tolist() == tokenizer.encode("hello wor" + EOT + "ld again")
    vocab, merges = train_bpe(tmp_path, 300, [EOT], num_workers=1)
    assert (vocab, merges) == train_bpe_reference("hello wor" + EOT + "ld again", 300, [EOT])


def test_a_record_may_hold_special_tokens(tmp_path, tokenizer):
    docs = ["one" + EOT + "two", "three"]
    write_jsonl(tmp_path / "c.jsonl", docs)
    out = tmp_path / "ids.npy"
    tokenizer.encode_file(tmp_path / "c.jsonl", out, num_workers=1)
    assert np.load(out).tolist() == tokenizer.encode(EOT.join(docs))


def test_without_special_tokens_documents_are_still_apart(tmp_path):
    docs = ["ab ab", "ab", "ab ab ab"]
    write_jsonl(tmp_path / "c.jsonl", docs)
    assert train_bpe(tmp_path / "c.jsonl", 260, [], num_workers=1) == reference_train_bpe_docs(docs, 260)
    vocab, merges = train_bpe(tmp_path / "c.jsonl", 260, [], num_workers=1)
    tok = Tokenizer(vocab, merges)
    out = tmp_path / "ids.npy"
    tok.encode_file(tmp_path / "c.jsonl", out, num_workers=1)
    assert np.load(out).tolist() == [i for d in docs for i in tok.encode(d)]


def reference_train_bpe_docs(docs, vocab_size):
    """The reference trainer on documents kept apart by a marker that is then taken out of the vocab."""
    marker = "<|sep|>"
    vocab, merges = train_bpe_reference(marker.join(docs), vocab_size + 1, [marker])
    del vocab[len(vocab) - 1]
    return vocab, merges


# --- inputs: folders, globs, lists, URLs -----------------------------------------------------------


def test_folders_are_read_recursively_in_sorted_order_and_skip_other_files(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "2.txt").write_text("two")
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "one"}) + "\n")
    (tmp_path / "c.txt").write_text("three")
    (tmp_path / "README.md").write_text("not a corpus")
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "old.txt").write_text("hidden")
    found = sources.resolve(tmp_path)
    assert [os.path.relpath(s.path, tmp_path) for s in found] == ["a.jsonl", os.path.join("b", "2.txt"), "c.txt"]
    assert [s.format for s in found] == ["jsonl", "txt", "txt"]
    globbed = sources.resolve(str(tmp_path / "**" / "*.txt"))
    assert [os.path.relpath(s.path, tmp_path) for s in globbed] == [os.path.join("b", "2.txt"), "c.txt"]
    listed = sources.resolve([tmp_path / "c.txt", tmp_path / "b"])
    assert [os.path.relpath(s.path, tmp_path) for s in listed] == ["c.txt", os.path.join("b", "2.txt")]
    # A file named explicitly is text whatever its suffix (CS336's corpus.en).
    assert sources.resolve(tmp_path / "README.md")[0].format == "txt"


@pytest.mark.parametrize("spec", ["empty", "nothing-*.txt", "missing.txt"])
def test_inputs_that_name_nothing_are_refused(tmp_path, spec):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.md").write_text("x")
    with pytest.raises(FileNotFoundError, match=spec.replace("*", r"\*")):
        train_bpe(str(tmp_path / spec), 300, [EOT])


def test_compressed_parquet_is_refused(tmp_path):
    (tmp_path / "x.parquet.gz").write_bytes(b"")
    with pytest.raises(ValueError, match="compressed Parquet"):
        sources.resolve(tmp_path / "x.parquet.gz")


def test_fsspec_urls(tmp_path, corpus_dir, tokenizer, expected_merges):
    import fsspec

    assert train_bpe(f"file://{corpus_dir}", VOCAB, [EOT], num_workers=2, piece_size=500) == expected_merges
    fs = fsspec.filesystem("memory")
    with fs.open("/corpus/a.jsonl", "wb") as f:
        f.write((corpus_dir / "corpus.jsonl").read_bytes())
    with fs.open("/corpus/b.parquet", "wb") as f:
        f.write((corpus_dir / "corpus.parquet").read_bytes())
    out = tmp_path / "ids.npy"
    tokenizer.encode_file("memory://corpus/*", out, num_workers=1, piece_size=300)
    assert np.load(out).tolist() == tokenizer.encode(EOT.join(DOCS + DOCS))
    with pytest.raises(FileNotFoundError, match="memory://corpus/nope.txt"):
        sources.resolve("memory://corpus/nope.txt")


@pytest.mark.parametrize(
    "module, extra, name",
    [("pyarrow", "parquet", "corpus.parquet"), ("zstandard", "zstd", "corpus.jsonl.zst"), ("fsspec", "fsspec", None)],
)
def test_a_missing_extra_names_it(monkeypatch, corpus_dir, module, extra, name):
    for loaded in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, loaded)
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    spec = corpus_dir / name if name else f"s3://bucket/{name}"
    with pytest.raises(ImportError, match=rf"pip install 'cs336-basics\[{extra}\]'"):
        train_bpe(spec, 300, [EOT], num_workers=1)


# --- bad records name the file and the line or row -------------------------------------------------


@pytest.mark.parametrize(
    "line, message",
    [
        (b'{"id": 7}', "line 5: no 'text' field"),
        (b'{"text": 12}', "line 5: field 'text' holds int, not a string"),
        (b'{"text": "unterminated}', "line 5: not valid JSON"),
        (b'["text"]', "line 5: expected a JSON object"),
        (b'{"text": "caf\xe9"}', "line 5: not valid UTF-8"),
    ],
)
@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("piece_size", [1 << 20, 30])
def test_bad_json_lines_name_the_file_and_line(tmp_path, tokenizer, line, message, compressed, piece_size):
    good = [json.dumps({"text": f"document {i}"}).encode() for i in range(4)]
    data = b"\n".join(good + [line] + good) + b"\n"
    path = tmp_path / ("bad.jsonl.gz" if compressed else "bad.jsonl")
    path.write_bytes(gzip.compress(data) if compressed else data)
    with pytest.raises(ValueError, match=f"{path}: {message}"):
        train_bpe(path, 300, [EOT], num_workers=1, piece_size=piece_size)
    with pytest.raises(ValueError, match=f"{path}: {message}"):
        tokenizer.encode_file(path, tmp_path / "ids.npy", num_workers=2, piece_size=piece_size)
    assert not (tmp_path / "ids.npy").exists()


def test_other_text_fields(tmp_path, tokenizer):
    write_jsonl(tmp_path / "a.jsonl", DOCS[:10], field="content")
    write_parquet(tmp_path / "b.parquet", DOCS[10:20], field="content")
    out = tmp_path / "ids.npy"
    tokenizer.encode_file(tmp_path, out, num_workers=1, text_field="content")
    assert np.load(out).tolist() == tokenizer.encode(EOT.join(DOCS[:20]))
    with pytest.raises(ValueError, match=r"b\.parquet: no column 'text' \(columns: id, content\)"):
        tokenizer.encode_file(tmp_path / "b.parquet", out, num_workers=1)


def test_bad_parquet_rows_and_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["a", "b", "c", None, "e"]}), tmp_path / "nulls.parquet", row_group_size=2)
    with pytest.raises(ValueError, match=r"nulls\.parquet: row 3: 'text' is null"):
        train_bpe(tmp_path / "nulls.parquet", 300, [EOT], num_workers=1, piece_size=1)
    pq.write_table(pa.table({"text": [1, 2]}), tmp_path / "ints.parquet")
    with pytest.raises(ValueError, match=r"ints\.parquet: column 'text' holds int64, not strings"):
        train_bpe(tmp_path / "ints.parquet", 300, [EOT], num_workers=1)
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match=r"junk\.parquet: not a readable Parquet file"):
        train_bpe(tmp_path / "junk.parquet", 300, [EOT], num_workers=1)


def test_bad_utf8_in_compressed_text_names_the_offset(tmp_path):
    path = tmp_path / "bad.txt.gz"
    path.write_bytes(gzip.compress(b"hello world " * 10 + b"\xff oops"))
    with pytest.raises(ValueError, match=r"bad\.txt\.gz: not valid UTF-8 at byte offset 120 of the decompressed text"):
        train_bpe(path, 300, [EOT], num_workers=1)


def test_surrogates_in_json_are_fixed_like_tiktoken(tmp_path, tokenizer):
    path = tmp_path / "s.jsonl"
    path.write_text('{"text": "smile \\ud83d\\ude00 lone \\ud800 end"}\n{"text": "\\udfff"}\n', encoding="utf-8")
    out = tmp_path / "ids.npy"
    tokenizer.encode_file(path, out, num_workers=1)
    assert np.load(out).tolist() == tokenizer.encode("smile \U0001F600 lone \ufffd end" + EOT + "\ufffd")
    vocab, merges = train_bpe(path, 270, [EOT], num_workers=1)
    assert (vocab, merges) == train_bpe_reference("smile \U0001F600 lone \ufffd end" + EOT + "\ufffd", 270, [EOT])


# --- faults: a clear error and no output -----------------------------------------------------------


class FaultyExecutor(Executor):
    """Runs tasks on `inner`, but before task number `at` does `fault()`; `kill` makes that task end
    its worker process instead."""

    def __init__(self, inner: Executor, at: int, fault=None, kill: bool = False):
        self.inner, self.at, self.fault, self.kill, self.n = inner, at, fault, kill, 0

    def submit(self, fn, *args, **kwargs):
        self.n += 1
        if self.n == self.at:
            if self.fault:
                self.fault()
            if self.kill:
                return self.inner.submit(os._exit, 1)
        return self.inner.submit(fn, *args, **kwargs)


def test_a_worker_that_dies_is_a_clear_error_and_no_output(tmp_path, corpus_dir, tokenizer):
    out = tmp_path / "ids.npy"
    with ProcessPoolExecutor(2) as pool:
        with pytest.raises(WorkerError, match="worker process died"):
            tokenizer.encode_file(corpus_dir / "corpus.jsonl", out, executor=FaultyExecutor(pool, 2, kill=True),
                                  piece_size=100)
    assert list(tmp_path.iterdir()) == []
    with ProcessPoolExecutor(2) as pool:
        with pytest.raises(WorkerError, match="worker process died"):
            train_bpe(corpus_dir / "corpus.jsonl", 300, [EOT], executor=FaultyExecutor(pool, 2, kill=True),
                      piece_size=100)


def test_a_file_that_disappears_mid_run_is_a_clear_error_and_no_output(tmp_path, tokenizer):
    for i in range(4):
        write_jsonl(tmp_path / f"shard-{i}.jsonl", DOCS[i::4])
    out = tmp_path / "out" / "ids.npy"
    out.parent.mkdir()
    gone = tmp_path / "shard-3.jsonl"
    with ProcessPoolExecutor(1) as pool:
        with pytest.raises(FileNotFoundError, match="shard-3.jsonl"):
            tokenizer.encode_file(tmp_path, out, executor=FaultyExecutor(pool, 2, fault=gone.unlink), piece_size=10)
    assert list(out.parent.iterdir()) == []


@pytest.mark.slow
def test_bpe_command_reports_bad_records_and_unreachable_schedulers_in_one_line(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "fine"}\n{"body": "no text"}\n')
    assert main(["train", str(path), "--out", str(tmp_path / "tok"), "--vocab-size", "300", "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"bpe: {path}: line 2: no 'text' field (fields: body); name the text field with "
                   "text_field= / --text-field"]
    good = tmp_path / "good.jsonl"
    good.write_text('{"body": "fine text"}\n')
    argv = ["train", str(good), "--text-field", "body", "--out", str(tmp_path / "tok"), "--vocab-size", "300", "--quiet"]
    assert main(argv) == 0
    capsys.readouterr()
    # In a child process: a Dask client leaves a thread behind, and this process forks workers later.
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"}
    run = subprocess.run([sys.executable, "-m", "cs336_basics.cli", *argv, "--dask-scheduler", "tcp://127.0.0.1:9"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 1
    err = run.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bpe: cannot reach the Dask scheduler at tcp://127.0.0.1:9"), err


# --- patterns: work units carry the pattern, and .txt is cut only where it allows -----------------


@pytest.mark.parametrize("pattern", ["cl100k", "none", r"\w+|\s+|[^\w\s]+"])
@pytest.mark.parametrize("name", ["corpus.txt", "corpus.jsonl", "corpus.parquet", "corpus.txt.gz"])
def test_patterns_travel_with_the_work_units(tmp_path, corpus_dir, name, pattern):
    # Few words, so that merges span whitespace (with "none") and punctuation takes newlines (cl100k):
    # a piece cut where the pattern does not allow it changes the merges or the ids.
    rng = random.Random(1)
    docs = ["".join(rng.choice(["the", "cat", "sat", "!!", "a"]) + rng.choice([" ", "\n", " ", "\n\n"])
                    for _ in range(rng.randrange(5, 30))) for _ in range(25)]
    text = EOT.join(docs)
    WRITERS[name](tmp_path / name, docs)
    expected = train_bpe_reference(text, 300, [EOT], pattern)
    assert train_bpe(tmp_path / name, 300, [EOT], pattern=pattern, num_workers=2, piece_size=40) == expected
    tok = Tokenizer(*expected, [EOT], pattern=pattern)
    out = tmp_path / "ids.npy"
    tok.encode_file(tmp_path / name, out, num_workers=1, piece_size=40)
    assert np.load(out).tolist() == tok.encode(text)


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "none", r"\w+|\s+|[^\w\s]+"])
@pytest.mark.parametrize("name", ["corpus.txt", "corpus.txt.gz"])
def test_txt_blocks_are_cut_only_where_the_pattern_allows(tmp_path, name, pattern):
    import regex

    from cs336_basics.text import patterns
    from cs336_basics.train import counting

    rng = random.Random(2)
    docs = ["".join(rng.choice(["the", "cat", "!!", "a"]) + rng.choice([" ", "\n", "  "]) for _ in range(30))
            for _ in range(6)]
    WRITERS[name](tmp_path / name, docs)
    units = sources.plan_units(sources.resolve(tmp_path / name), piece_size=50, special_tokens=[EOT], pattern=pattern)
    _, counts = counting.count_units(units, block_size=7)
    source = patterns.regex_string(pattern)
    expected: dict[str, int] = {}
    for doc in docs:
        for piece in regex.findall(source, doc) if source else [doc]:
            expected[piece] = expected.get(piece, 0) + 1
    assert counts == expected


# --- work units in detail: descriptions, refusals, planning, progress, block cuts ------------------


def _read_all(units, block_size=sources.BLOCK_SIZE):
    """Every (consumed, text, starts_document) triple of each unit, one list per unit."""
    return [list(sources.read_unit(unit, block_size=block_size)) for unit in units]


def _random_words(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(["the", "cat", "sat", "über", "42", "!!", "a"]) + rng.choice([" ", "\n", "  ", ", "])
                   for _ in range(n))


def test_describe_names_one_input_or_the_first_and_how_many_more(tmp_path):
    """describe() gives a path as it is, a list of one as its item, a longer list as 'first and N more'."""
    assert sources.describe("a.txt") == "a.txt"
    assert sources.describe(tmp_path / "b.txt") == str(tmp_path / "b.txt")
    assert sources.describe(["only.txt"]) == "only.txt"
    assert sources.describe(["a.txt", tmp_path, "c.txt"]) == "a.txt and 2 more"
    assert sources.describe(("a.txt", "b.txt")) == "a.txt and 1 more"


def test_refuse_output_among_inputs_with_a_url_folder_a_relative_folder_and_repeated_inputs(tmp_path, monkeypatch):
    """A URL folder written with a trailing slash, a relative folder, and an input listed twice
    before the one the output would replace are all still refused."""
    with pytest.raises(ValueError, match="holds the input"):
        sources.refuse_output_among_inputs("memory://bucket/", ["memory://bucket/a.txt"])
    with pytest.raises(ValueError, match="holds the input"):
        sources.refuse_output_among_inputs(os.sep, [str(tmp_path / "a.txt")])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.txt").write_text("x")
    with pytest.raises(ValueError, match="holds the input"):
        sources.refuse_output_among_inputs("out", [os.path.join("out", "a.txt")])
    (tmp_path / "b.txt").write_text("y")
    with pytest.raises(ValueError, match="is the input"):
        sources.refuse_output_among_inputs("b.txt", [os.path.join("out", "a.txt"), os.path.join("out", "a.txt"), "b.txt"])


def test_jsonl_units_end_just_after_a_newline_even_past_a_long_line(tmp_path):
    """JSON lines are planned into units that each end right after a newline (or at the end of the
    file) and cover it without gaps, also around a blank first line, a line longer than 64 KiB and a
    last line without a newline."""
    lines = [b"", *(json.dumps({"text": f"doc {i}"}).encode() for i in range(5)),
             json.dumps({"text": "x" * 150_000}).encode(), json.dumps({"text": "after"}).encode(),
             json.dumps({"text": "last"}).encode()]
    data = b"\n".join(lines)  # no newline after the last line
    path = tmp_path / "c.jsonl"
    path.write_bytes(data)
    ends = {i + 1 for i, byte in enumerate(data) if byte == ord("\n")} | {len(data)}
    for piece_size in [1, 12, 20, 70_000]:
        units = sources.plan_units(sources.resolve(path), piece_size=piece_size)
        assert units[0].start == 0 and units[-1].end == len(data)
        for unit, following in zip(units, units[1:]):
            assert following.start == unit.end
        for unit in units:
            # The first newline at or after start + piece_size - 1 ends the unit.
            assert unit.end == min([e for e in ends if e >= unit.start + piece_size] or [len(data)]), (piece_size, unit)
        read = [text for records in _read_all(units) for _, text, starts in records if starts]
        assert read == ["doc 0", "doc 1", "doc 2", "doc 3", "doc 4", "x" * 150_000, "after", "last"]


def test_parquet_units_are_runs_of_row_groups_of_at_least_the_piece_size(tmp_path):
    """Parquet row groups are gathered into units until they reach `piece_size` bytes of row
    groups (the last takes the rest), and the units' sizes add up to the file's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "same.parquet"
    pq.write_table(pa.table({"text": ["the same row"] * 56}), path, row_group_size=7)  # 8 equal row groups
    meta = pq.ParquetFile(path).metadata
    group = sum(meta.row_group(0).column(j).total_compressed_size for j in range(meta.num_columns))
    for piece_size in [group + 1, 2 * group]:
        units = sources.plan_units(sources.resolve(path), piece_size=piece_size)
        assert [(u.start, u.end) for u in units] == [(0, 2), (2, 4), (4, 6), (6, 8)]
        assert sum(u.size for u in units) == path.stat().st_size
    units = sources.plan_units(sources.resolve(path), piece_size=group)
    assert [(u.start, u.end) for u in units] == [(i, i + 1) for i in range(8)]


@pytest.mark.parametrize("name", list(WRITERS))
@pytest.mark.parametrize("block_size", [64, 1 << 20])
def test_the_bytes_a_unit_reports_add_up_to_its_size_and_never_go_back(tmp_path, name, block_size):
    """Reading each unit reports bytes consumed that are never negative and add up to the unit's
    size, and the records or text read are the corpus's."""
    WRITERS[name](tmp_path / name, DOCS)
    units = sources.plan_units(sources.resolve(tmp_path / name), piece_size=300, special_tokens=[EOT])
    read = _read_all(units, block_size)
    for unit, triples in zip(units, read):
        assert all(consumed >= 0 for consumed, _, _ in triples)
        assert sum(consumed for consumed, _, _ in triples) == unit.size
    assert sum(u.size for u in units) == (tmp_path / name).stat().st_size
    if name.startswith("corpus.txt"):
        assert "".join(text for triples in read for _, text, _ in triples) == TEXT
        assert not any(starts for triples in read for _, _, starts in triples)
    else:
        assert [text for triples in read for _, text, starts in triples if starts] == DOCS


def test_a_parquet_unit_without_rows_still_reports_its_bytes(tmp_path):
    """A Parquet row group with no rows makes a unit whose bytes are still reported once read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "e.parquet"
    with pq.ParquetWriter(path, pa.schema([("text", pa.string())])) as writer:
        writer.write_table(pa.table({"text": pa.array([], pa.string())}))
        writer.write_table(pa.table({"text": ["a", "b"]}))
    units = sources.plan_units(sources.resolve(path), piece_size=1)
    read = _read_all(units)
    assert [sum(consumed for consumed, _, _ in triples) for triples in read] == [u.size for u in units]
    assert [text for triples in read for _, text, starts in triples if starts] == ["a", "b"]


def test_parquet_progress_is_proportional_to_the_rows_read(tmp_path):
    """A Parquet unit reports, after each batch of rows, its size times the share of its rows read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"text": ["row"] * 40_000}), path, row_group_size=5_000)  # batches of 8192 rows
    meta = pq.ParquetFile(path).metadata
    group = sum(meta.row_group(0).column(j).total_compressed_size for j in range(meta.num_columns))
    units = sources.plan_units(sources.resolve(path), piece_size=2 * group)
    assert [(u.start, u.end) for u in units] == [(0, 2), (2, 4), (4, 6), (6, 8)]
    for unit in units:
        rows = done = 0
        for consumed, _, starts in sources.read_unit(unit):
            rows += starts
            done += consumed
            if not starts:
                assert done == unit.size * rows // 10_000
        assert rows == 10_000 and done == unit.size


@pytest.mark.parametrize("name", ["big.txt.gz", "big.jsonl.gz", "big.txt.zst"])
def test_a_compressed_file_is_read_and_reported_a_block_at_a_time(tmp_path, name):
    """A compressed file much larger than the block comes in many blocks, whose reported bytes grow
    as the compressed file is read rather than all at once at the start or the end."""
    docs = [_random_words(seed, 2_000) for seed in range(20)]
    WRITERS[name.replace("big", "corpus")](tmp_path / name, docs)
    (unit,) = sources.plan_units(sources.resolve(tmp_path / name), piece_size=1 << 30)
    triples = list(sources.read_unit(unit, block_size=4096))
    consumed = [n for n, _, _ in triples if n]
    assert len(consumed) >= 2 and consumed[0] < unit.size
    assert sum(consumed) == unit.size


@pytest.mark.parametrize("specials", [[], [EOT], [EOT, "<a b>"]])
@pytest.mark.parametrize("name", ["corpus.txt", "corpus.txt.gz"])
@pytest.mark.parametrize("block_size", [16, 100, 400])
def test_txt_blocks_keep_every_pre_token_and_special_token_whole(tmp_path, specials, name, block_size):
    """Text blocks of a .txt, plain or compressed, are cut only where the pattern allows and never
    inside a special token, and several come from a text longer than the block."""
    import regex

    from cs336_basics.text import patterns

    docs = [_random_words(seed, 150).replace("cat ", "<a b> ") for seed in range(4)]
    docs[0] = "abcdefghijklm<a b> " + docs[0]  # the first block of 16 bytes ends inside "<a b>"
    text = EOT.join(docs)
    WRITERS[name](tmp_path / name, docs)
    units = sources.plan_units(sources.resolve(tmp_path / name), piece_size=1 << 30, special_tokens=specials)
    blocks = [text for triples in _read_all(units, block_size) for _, text, _ in triples if text]
    assert "".join(blocks) == text and len(blocks) > 3
    if name == "corpus.txt":  # planned in units of about the block size, too
        units = sources.plan_units(sources.resolve(tmp_path / name), piece_size=block_size, special_tokens=specials)
        assert len(units) > 3
        blocks += [text for triples in _read_all(units) for _, text, _ in triples if text]
    source = patterns.regex_string("gpt2")

    def pieces(t):
        parts = regex.split("|".join(map(regex.escape, specials)), t) if specials else [t]
        return [p for part in parts for p in regex.findall(source, part)] + ["special"] * (len(parts) - 1)

    assert sorted(p for block in blocks for p in pieces(block)) == sorted(pieces(text) * (1 + (name == "corpus.txt")))


def test_damage_in_a_compressed_file_names_how_much_text_was_read(tmp_path):
    """The error for a cut-short gzip file gives the decompressed bytes handed on before the damage:
    all the whole blocks that could be decompressed."""
    import zlib

    text = _random_words(3, 20_000).encode()
    packed = gzip.compress(text)
    cut = packed[: len(packed) // 2]
    (tmp_path / "cut.txt.gz").write_bytes(cut)
    recoverable = len(zlib.decompressobj(31).decompress(cut))
    (unit,) = sources.plan_units(sources.resolve(tmp_path / "cut.txt.gz"), piece_size=1)
    with pytest.raises(ValueError, match=r"damaged gzip data after ([\d,]+) bytes") as error:
        for _ in sources.read_unit(unit, block_size=1000):
            pass
    done = int(error.value.args[0].split(" after ")[1].split(" ")[0].replace(",", ""))
    assert recoverable - 1000 < done <= recoverable and done % 1000 == 0



def test_bad_utf8_far_into_compressed_text_names_its_offset(tmp_path):
    """Invalid UTF-8 after many blocks of compressed text is named by its offset in the whole text."""
    good = _random_words(4, 2_000).encode()
    path = tmp_path / "bad.txt.gz"
    path.write_bytes(gzip.compress(good + b"\xff oops"))
    (unit,) = sources.plan_units(sources.resolve(path), piece_size=1)
    with pytest.raises(ValueError, match=rf"not valid UTF-8 at byte offset {len(good)} of the decompressed text"):
        for _ in sources.read_unit(unit, block_size=64):
            pass


@pytest.mark.parametrize("name", ["bad.jsonl", "bad.jsonl.gz"])
def test_a_bad_record_is_named_by_its_line_far_into_the_file(tmp_path, name):
    """A bad record after a blank first line and many short records, read in small blocks, is named
    by its own line number."""
    lines = [b""] + [b'{"text": "%d"}' % i for i in range(60)] + [b"7"] + [b'{"text": "z"}'] * 30
    data = b"\n".join(lines) + b"\n"
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    (unit,) = sources.plan_units(sources.resolve(path), piece_size=1 << 20)
    for block_size in [50, 1 << 20]:
        with pytest.raises(ValueError, match=f"{name}: line 62: expected a JSON object"):
            _read_all([unit], block_size=block_size)
    if not name.endswith(".gz"):  # a bad record right after a blank first line
        path.write_bytes(b"\n7\n")
        (unit,) = sources.plan_units(sources.resolve(path), piece_size=1 << 20)
        with pytest.raises(ValueError, match=f"{name}: line 2: expected a JSON object"):
            _read_all([unit])


def test_a_record_without_the_text_field_lists_the_fields_it_has(tmp_path):
    """A JSON line without the text field is named with the fields it has, or 'none'."""
    path = tmp_path / "f.jsonl"
    for line, fields in [(b"{}", "none"), (b'{"id": 1, "content": "x"}', "id, content")]:
        path.write_bytes(line + b"\n")
        with pytest.raises(ValueError, match=rf"line 1: no 'text' field \(fields: {fields}\)"):
            _read_all(sources.plan_units(sources.resolve(path), piece_size=1 << 20))


@pytest.mark.parametrize("kind", ["large_string", "string_view"])
def test_parquet_text_columns_of_every_string_type_are_read(tmp_path, kind):
    """A Parquet text column of large strings or string views is read like one of strings."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"text": pa.array(["one", "two"], getattr(pa, kind)())}), path)
    units = sources.plan_units(sources.resolve(path), piece_size=1)
    assert [text for triples in _read_all(units) for _, text, starts in triples if starts] == ["one", "two"]


def test_resolving_urls_like_local_paths(tmp_path):
    """A URL names one file (its format from its name, a file named explicitly being text), a folder
    (hidden entries skipped) or a glob; one that names nothing is the same error as a local path's."""
    import errno

    import fsspec

    fs = fsspec.filesystem("memory")
    for name, data in [("a.jsonl.gz", gzip.compress(b'{"text": "a"}\n')), ("corpus.en", b"text"),
                       ("data[1].txt", b"one"), ("b/2.txt", b"two"), (".cache/old.txt", b"hidden"),
                       ("b/.hidden.txt", b"hidden"), ("docs/notes.md", b"not a corpus")]:
        fs.pipe(f"/urls/{name}", data)
    url = "memory://urls"
    assert sources.resolve(f"{url}/a.jsonl.gz") == [sources.Source(f"{url}/a.jsonl.gz", "jsonl", "gzip", fs.size("/urls/a.jsonl.gz"))]
    assert sources.resolve(f"{url}/corpus.en") == [sources.Source(f"{url}/corpus.en", "txt", None, 4)]
    assert sources.resolve(f"{url}/data[1].txt") == [sources.Source(f"{url}/data[1].txt", "txt", None, 3)]
    found = [s.path for s in sources.resolve(url)]
    assert found == [fs.unstrip_protocol(f"/urls/{name}") for name in ["a.jsonl.gz", "b/2.txt", "data[1].txt"]]
    for spec, kind in [(f"{url}/nothing-*.txt", "glob"), (f"{url}/docs/*.md", "glob"), (f"{url}/docs", "folder")]:
        with pytest.raises(FileNotFoundError) as error:
            sources.resolve(spec)
        assert error.value.errno == errno.ENOENT and error.value.filename == spec
        assert error.value.strerror.startswith(f"{kind} with no supported files")
    with pytest.raises(FileNotFoundError) as error:
        sources.resolve(f"{url}/missing.txt")
    assert (error.value.errno, error.value.strerror, error.value.filename) == (
        errno.ENOENT, "No such file or directory", f"{url}/missing.txt")
    with pytest.raises(ValueError, match="nosuchscheme://x/a.txt: Protocol not known"):
        sources.resolve("nosuchscheme://x/a.txt")


def test_resolving_local_files_named_with_glob_characters_or_missing(tmp_path):
    """A local file whose name holds glob characters is that file; a missing one is the OS error;
    a folder with no supported file says so."""
    import errno

    (tmp_path / "data[1].txt").write_text("one")
    (tmp_path / "data1.txt").write_text("other")
    assert [s.path for s in sources.resolve(str(tmp_path / "data[1].txt"))] == [str(tmp_path / "data[1].txt")]
    with pytest.raises(FileNotFoundError) as error:
        sources.resolve(str(tmp_path / "missing.txt"))
    assert error.value.strerror == "No such file or directory"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("x")
    with pytest.raises(FileNotFoundError) as error:
        sources.resolve(tmp_path / "docs")
    assert error.value.errno == errno.ENOENT and error.value.filename == str(tmp_path / "docs")
    assert error.value.strerror.startswith("folder with no supported files")


def test_planning_empty_and_compressed_files_and_an_empty_text_field(tmp_path):
    """An empty .txt is one empty document (refused if it grows before it is read), an empty .jsonl
    has none, a compressed file is one unit of all its bytes, and an empty text field is refused."""
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress(b"some text"))
    size = (tmp_path / "c.txt.gz").stat().st_size
    units = sources.plan_units(sources.resolve(tmp_path), piece_size=1, special_tokens=[EOT])
    assert [(os.path.basename(u.path), u.start, u.end, u.size, u.new_document) for u in units] == [
        ("c.txt.gz", 0, size, size, True), ("empty.txt", 0, 0, 0, True)]
    assert list(sources.read_unit(units[1])) == []
    (tmp_path / "empty.txt").write_bytes(b"grown")
    with pytest.raises(ValueError, match="changed"):
        list(sources.read_unit(units[1]))
    with pytest.raises(ValueError, match="text_field"):
        sources.plan_units(sources.resolve(tmp_path / "c.txt.gz"), piece_size=1, text_field="")
