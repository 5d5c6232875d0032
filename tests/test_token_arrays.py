"""Whole corpora into one token array (cs336_basics/encode/token_arrays.py), beyond what the engine
and source tests check: progress, dtypes, units without documents, tokenizers rebuilt on another
executor, ids past 16 signed bits in worker processes, and the files workers share their cache through.

The oracle is `Tokenizer.encode` of the documents joined by the first special token.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from cs336_basics.bpe import Tokenizer
from cs336_basics.encode.token_arrays import _SharedCache, pack_entries
from cs336_basics.train.reference import train_bpe_reference
from tests.test_encode_batches import remapped

EOT = "<|endoftext|>"
DOCS = [f"the cat {i} sat on the mat, did it? " * (1 + i % 3) for i in range(12)]


@pytest.fixture(scope="module")
def learned():
    return train_bpe_reference(EOT.join(DOCS), 320, [EOT])


def _corpus(folder):
    """a.txt (four documents), e.parquet (a row group with no rows, then four), c.jsonl (four)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    (folder / "a.txt").write_text(EOT.join(DOCS[:4]), encoding="utf-8")
    with pq.ParquetWriter(folder / "e.parquet", pa.schema([("text", pa.string())])) as writer:
        writer.write_table(pa.table({"text": pa.array([], pa.string())}))
        writer.write_table(pa.table({"text": DOCS[4:8]}))
    import json

    (folder / "c.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in DOCS[8:]), encoding="utf-8")
    return sum(p.stat().st_size for p in folder.iterdir())


@pytest.mark.parametrize("engine", ["python", "tiktoken"])
@pytest.mark.parametrize("dtype", [None, "uint32", "int64"])
def test_one_process_writes_encode_of_the_joined_documents_and_reports_every_byte(tmp_path, learned, engine, dtype):
    """In this process, with either engine and any dtype, the array is encode of the documents
    joined by the special token (a unit without rows adds no separator), and progress grows to the
    corpus's bytes."""
    tokenizer = Tokenizer(*learned, [EOT])
    size = _corpus(tmp_path / "in")
    seen: list[int] = []
    out = tmp_path / "ids.npy"
    count = tokenizer.encode_file(tmp_path / "in", out, num_workers=1, piece_size=1, dtype=dtype,
                                  on_progress=seen.append, engine=engine)
    # Files in sorted order: a.txt, c.jsonl, e.parquet.
    expected = tokenizer.encode(EOT.join(DOCS[:4] + DOCS[8:] + DOCS[4:8]))
    array = np.load(out)
    assert array.tolist() == expected and count == len(expected)
    assert array.dtype == np.dtype(dtype or np.uint16)
    assert len(seen) > 3 and seen == sorted(seen) and seen[-1] == size


def test_local_workers_with_the_tiktoken_engine_write_the_same_array(tmp_path, learned):
    """Local worker processes encoding with tiktoken give the array of encode."""
    tokenizer = Tokenizer(*learned, [EOT])
    _corpus(tmp_path / "in")
    out = tmp_path / "ids.npy"
    tokenizer.encode_file(tmp_path / "in", out, num_workers=2, piece_size=60, engine="tiktoken")
    assert np.load(out).tolist() == tokenizer.encode(EOT.join(DOCS[:4] + DOCS[8:] + DOCS[4:8]))


def test_another_executor_rebuilds_each_tokenizer_with_its_own_pattern_and_merges(tmp_path, learned):
    """On an executor of threads, each of two tokenizers with the same vocabulary (one with another
    pattern, one with fewer merges) is rebuilt as itself: each array equals its own encode."""
    vocab, merges = learned
    text = EOT.join(DOCS)
    (tmp_path / "c.txt").write_text(text, encoding="utf-8")
    tokenizers = [Tokenizer(vocab, merges, [EOT]), Tokenizer(vocab, merges[: len(merges) // 2], [EOT]),
                  Tokenizer(vocab, merges, [EOT], pattern="cl100k")]
    assert len({tuple(t.encode(text)) for t in tokenizers}) == 3
    with ThreadPoolExecutor(2) as pool:
        for tokenizer in tokenizers:
            out = tmp_path / "ids.npy"
            tokenizer.encode_file(tmp_path / "c.txt", out, executor=pool, piece_size=100, engine="python")
            assert np.load(out).tolist() == tokenizer.encode(text)


@pytest.mark.parametrize("first_id", [40_000, 70_000])
def test_encode_batch_in_processes_keeps_ids_above_32767(learned, first_id):
    """encode_batch by worker processes gives encode's ids also above the signed 16-bit range and past 16 bits."""
    vocab, merges = learned
    tokenizer = Tokenizer(remapped(vocab, merges, first_id), merges, [EOT])
    texts = DOCS[:6]
    got = tokenizer.encode_batch(texts, num_workers=2, engine="python")
    assert got == [tokenizer.encode(t) for t in texts] and max(map(max, got)) > first_id


class _Learner:
    """Stands for an encode cache: keeps what it is taught."""

    def __init__(self):
        self.learned: dict[str, bytes] = {}

    def learn(self, entries):
        self.learned.update(entries)


class _Teacher:
    def __init__(self, entries):
        self.entries = entries

    def take_learned(self):
        entries, self.entries = self.entries, {}
        return entries


def test_absorb_reads_every_complete_record_of_every_other_worker(tmp_path):
    """A worker takes in all the records the others completed (several per file, from every file
    but its own), and a record still being written only once it is complete."""
    names = ["a.cache", "m.cache", "z.cache", "b.cache", "y.cache"]
    shares = {name: _SharedCache(tmp_path, name) for name in names}
    expected = {}
    for i, name in enumerate(names[1:]):
        for j in range(3):  # three records in each file
            entries = {f"{name} {j} {k}": bytes([i, j, k]) for k in range(2 + j)}
            shares[name].publish(_Teacher(entries))
            expected.update(entries)
    reader = _Learner()
    shares["a.cache"].publish(_Teacher({"own": b"x"}))
    shares["a.cache"].absorb(reader)
    assert reader.learned == expected
    record = pack_entries({"late": b"L"})
    with open(tmp_path / "z.cache", "ab") as f:  # a record still being written: 3 bytes to come
        f.write(len(record).to_bytes(8, "little") + record[:-3])
    shares["a.cache"].absorb(reader)
    assert reader.learned == expected
    with open(tmp_path / "z.cache", "ab") as f:
        f.write(record[-3:])
    shares["a.cache"].absorb(reader)
    assert reader.learned == {**expected, "late": b"L"}


def test_without_special_tokens_documents_are_simply_concatenated(tmp_path, learned):
    """A tokenizer without special tokens writes the files' ids one after another, nothing between."""
    vocab, merges = learned
    tokenizer = Tokenizer(vocab, merges)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text(DOCS[0], encoding="utf-8")
    (tmp_path / "in" / "b.txt").write_text(DOCS[1], encoding="utf-8")
    out = tmp_path / "ids.npy"
    tokenizer.encode_file(tmp_path / "in", out, num_workers=1, engine="python")
    assert np.load(out).tolist() == tokenizer.encode(DOCS[0]) + tokenizer.encode(DOCS[1])


def test_encode_files_with_its_defaults(tmp_path, learned):
    """encode_files called with only a tokenizer, units and an output encodes in this process with Python."""
    from cs336_basics.corpora import sources
    from cs336_basics.encode.token_arrays import encode_files

    tokenizer = Tokenizer(*learned, [EOT])
    (tmp_path / "c.txt").write_text(EOT.join(DOCS), encoding="utf-8")
    units = sources.plan_units(sources.resolve(tmp_path / "c.txt"), piece_size=100, special_tokens=[EOT])
    out = tmp_path / "ids.npy"
    assert encode_files(tokenizer, units, out) == len(tokenizer.encode(EOT.join(DOCS)))
    assert np.load(out).tolist() == tokenizer.encode(EOT.join(DOCS))


def test_a_requested_dtype_holds_ids_up_to_its_maximum_and_must_be_an_integer_type():
    """A requested dtype is taken when its largest value is the top id; one too small, or not an integer type, is refused."""
    from cs336_basics.encode.token_arrays import choose_dtype

    assert choose_dtype(65535, "uint16") == np.uint16 and choose_dtype(65535) == np.uint16
    assert choose_dtype(65536) == np.uint32
    for requested, top in [("uint16", 65536), ("float64", 10), ("int8", 128)]:
        with pytest.raises(ValueError, match=f"dtype {requested} cannot hold token id {top}"):
            choose_dtype(top, requested)


def test_a_local_worker_joins_the_shared_cache_and_learns(tmp_path, learned, monkeypatch):
    """A local worker started with a share folder learns what it computes, to publish it to the
    others: a worker that silently stopped sharing would only be slower, so this is checked here."""
    from cs336_basics.encode import token_arrays

    tokenizer = Tokenizer(*learned, ["<|endoftext|>"])
    monkeypatch.setattr(token_arrays, "_shared", None)
    monkeypatch.setattr(token_arrays, "_worker_tokenizers", {})
    key, state = token_arrays.tokenizer_state(tokenizer)
    token_arrays.init_worker(key, state, str(tmp_path))
    assert token_arrays._shared is not None
    worker_tokenizer = token_arrays._worker_tokenizers[key]
    worker_tokenizer.encode("hello there, world")
    assert worker_tokenizer.cache.take_learned()
