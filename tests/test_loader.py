"""`TokenDataset` (datasets/loader.py) against a slow reference that holds every id in memory: the
same tokens, documents and batches for the same rng, whatever the shards and whichever format the
ids come in; every valid start drawn, none past the end; bad shards named."""

import json
import struct
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.datasets import layout
from cs336_basics.datasets.loader import TokenDataset
from cs336_basics.formats import llmc, megatron
from tests.dataset_helpers import write_dataset

documents_st = st.lists(st.lists(st.integers(0, 65535), min_size=1, max_size=10), min_size=1, max_size=8)


def reference_get_batch(ids: np.ndarray, batch_size: int, context_length: int, rng: np.random.Generator):
    """docs/behaviour.md's get_batch on the whole stream in memory, one row at a time."""
    starts = rng.integers(0, len(ids) - context_length, size=batch_size)
    x = np.array([ids[i : i + context_length] for i in starts], dtype=np.int64)
    y = np.array([ids[i + 1 : i + context_length + 1] for i in starts], dtype=np.int64)
    return x, y


def open_as(kind: str, folder, documents: list[list[int]], shard_tokens: int) -> TokenDataset:
    ids = np.array([i for doc in documents for i in doc], dtype=np.uint16)
    if kind == "directory":
        return TokenDataset(write_dataset(folder / "ds", documents, shard_tokens))
    if kind == "npy":
        np.save(folder / "ids.npy", ids)
        return TokenDataset(folder / "ids.npy")
    if kind == "megatron":
        with megatron.MegatronWriter(folder / "m", np.uint16) as w:
            for doc in documents:
                w.add_document(doc)
        return TokenDataset(folder / "m")
    with llmc.LlmcWriter(folder / "l", shard_tokens=shard_tokens) as w:
        w.add(ids)
    return TokenDataset(folder / "l")


@settings(max_examples=25, deadline=None)
@given(
    documents=documents_st, shard_tokens=st.integers(1, 12),
    kind=st.sampled_from(["directory", "npy", "megatron", "llmc"]),
    batch_size=st.integers(1, 5), context_length=st.integers(1, 9), seed=st.integers(0, 2**32),
)
def test_the_loader_equals_the_in_memory_reference(tmp_path_factory, documents, shard_tokens, kind, batch_size,
                                                   context_length, seed):
    ds = open_as(kind, tmp_path_factory.mktemp(kind), documents, shard_tokens)
    ids = np.array([i for doc in documents for i in doc], dtype=np.int64)
    assert len(ds) == len(ids)
    assert ds.read(0, len(ids)).tolist() == ids.tolist()
    if ds.has_documents:
        assert ds.num_documents == len(documents)
        assert [ds.document(i).tolist() for i in range(ds.num_documents)] == documents
    else:
        with pytest.raises(ValueError, match="no document boundaries"):
            _ = ds.num_documents
    if len(ids) < context_length + 1:
        with pytest.raises(ValueError, match="too few for context_length"):
            ds.get_batch(batch_size, context_length, seed)
        return
    expected = reference_get_batch(ids, batch_size, context_length, np.random.default_rng(seed))
    for rng in (np.random.default_rng(seed), seed):  # a Generator, or a seed
        x, y = ds.get_batch(batch_size, context_length, rng)
        assert x.dtype == y.dtype == np.int64 and x.shape == y.shape == (batch_size, context_length)
        assert x.tolist() == expected[0].tolist() and y.tolist() == expected[1].tolist()


@pytest.mark.parametrize("shard_tokens", [3, 7, 100])
def test_every_valid_start_is_drawn_and_none_past_the_end(tmp_path, shard_tokens):
    # ids equal their positions, so a row's first id is its start
    ds = TokenDataset(write_dataset(tmp_path, [list(range(20))], shard_tokens))
    x, y = ds.get_batch(3000, 5, np.random.default_rng(1))
    assert set(x[:, 0].tolist()) == set(range(20 - 5))  # [0, n - m - 1]
    assert (x == x[:, :1] + np.arange(5)).all() and (y == x + 1).all()


def test_a_stream_of_exactly_context_length_plus_one_gives_the_one_batch_there_is(tmp_path):
    ds = TokenDataset(write_dataset(tmp_path, [[4, 5], [6]], 2))
    x, y = ds.get_batch(2, 2, 0)
    assert x.tolist() == [[4, 5], [4, 5]] and y.tolist() == [[5, 6], [5, 6]]
    with pytest.raises(ValueError, match=r"3 tokens, too few for context_length 3"):
        ds.get_batch(1, 3, 0)


def test_opening_ten_thousand_shards_reads_only_the_manifest(tmp_path):
    shards = [{"name": layout.shard_name(k), "units": [k, k + 1], "tokens": 1 + k % 3, "documents": 1,
               "sha256": "", "docs_sha256": ""} for k in range(10_000)]
    tokens = sum(s["tokens"] for s in shards)
    manifest = {"format": layout.FORMAT, "version": layout.FORMAT_VERSION, "tokenizer": {}, "dtype": "uint16",
                "shard_size": 8, "inputs": [], "shards": shards,
                "totals": {"tokens": tokens, "documents": 10_000, "shards": 10_000}}
    (tmp_path / layout.MANIFEST).write_text(json.dumps(manifest))
    started = time.perf_counter()
    ds = TokenDataset(tmp_path)  # no shard file exists: opening must not touch them
    assert time.perf_counter() - started < 1.0
    assert (len(ds), ds.num_documents, ds.num_shards) == (tokens, 10_000, 10_000)
    with pytest.raises(FileNotFoundError, match=r"shard-09999\.npy: a shard the manifest lists is missing"):
        ds.read(tokens - 1, tokens)


def test_verify_names_every_bad_shard_and_only_those(tmp_path):
    documents = [[k] * 3 for k in range(1, 7)]
    directory = write_dataset(tmp_path, documents, 4)  # 18 tokens: shards 0-4
    TokenDataset(directory).verify()
    ids = layout.ids_file(directory, "shard-00001")
    data = bytearray(ids.read_bytes())
    data[-1] ^= 1
    ids.write_bytes(bytes(data))
    layout.docs_file(directory, "shard-00003").unlink()
    with open(layout.ids_file(directory, "shard-00004"), "ab") as f:
        f.write(b"\0")
    with pytest.raises(ValueError) as error:
        TokenDataset(directory).verify()
    message = str(error.value)
    assert "3 problem(s)" in message
    assert "shard-00004: shard-00004.npy has 133 bytes, the manifest says 132" in message
    assert "shard-00001: shard-00001.npy's sha256 differs" in message
    assert "shard-00003: shard-00003.docs.npy is missing" in message
    assert "shard-00000" not in message and "shard-00002" not in message


def test_a_shard_that_disagrees_with_the_manifest_is_named_when_read(tmp_path):
    directory = write_dataset(tmp_path, [[1, 2, 3], [4, 5, 6]], 3)
    np.save(layout.ids_file(directory, "shard-00001"), np.array([4, 5], dtype=np.uint16))
    ds = TokenDataset(directory)
    assert ds.document(0).tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match=r"shard-00001\.npy: 2 tokens, the manifest says 3"):
        ds.document(1)
    with pytest.raises(ValueError, match=r"shard-00001: shard-00001\.npy has 132 bytes, the manifest says 134"):
        ds.verify()


def test_megatron_verify_catches_an_index_that_does_not_lie_back_to_back(tmp_path):
    with megatron.MegatronWriter(tmp_path / "m") as w:
        w.add_document([1, 2])
        w.add_document([3, 4])
    TokenDataset(tmp_path / "m.idx").verify()
    idx = bytearray((tmp_path / "m.idx").read_bytes())
    pointers_at = megatron.FIXED_BYTES + 2 * 4
    idx[pointers_at : pointers_at + 8] = (2).to_bytes(8, "little")  # the first sequence at byte 2, not 0
    (tmp_path / "m.idx").write_bytes(bytes(idx))
    with pytest.raises(ValueError, match="back to back"):
        TokenDataset(tmp_path / "m").verify()


def test_each_way_of_naming_a_dataset_opens_it(tmp_path):
    with megatron.MegatronWriter(tmp_path / "m_000000") as w:  # a Megatron prefix that looks like an llm.c shard
        w.add_document([1, 2])
    with llmc.LlmcWriter(tmp_path / "l", shard_tokens=1) as w:
        w.add([3, 4])
    for path, kind in [("m_000000", "megatron"), ("m_000000.bin", "megatron"), ("m_000000.idx", "megatron"),
                       ("l", "llmc"), ("l_000001.bin", "llmc")]:
        ds = TokenDataset(tmp_path / path)
        assert ds.kind == kind and len(ds) == 2, path


def test_paths_that_hold_no_dataset_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nothing: no token dataset there"):
        TokenDataset(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match=r"no manifest\.json"):
        TokenDataset(tmp_path)
    manifest = {"format": layout.FORMAT, "version": layout.FORMAT_VERSION, "dtype": "uint16", "shards": [{}]}
    (tmp_path / layout.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"manifest\.json: malformed manifest \(KeyError"):
        TokenDataset(tmp_path)
    manifest["shards"] = [{"name": "shard-00000", "tokens": -1, "documents": 0}]
    (tmp_path / layout.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"manifest\.json: malformed manifest .*negative"):
        TokenDataset(tmp_path)
    np.save(tmp_path / "x.npy", np.zeros((2, 2), dtype=np.uint16))
    with pytest.raises(ValueError, match=r"x\.npy: .*expected 1-D integer ids"):
        TokenDataset(tmp_path / "x.npy")
    np.save(tmp_path / "t.npy", np.arange(10, dtype=np.uint16))
    (tmp_path / "t.npy").write_bytes((tmp_path / "t.npy").read_bytes()[:-4])
    with pytest.raises(ValueError, match=r"t\.npy: .*truncated"):
        TokenDataset(tmp_path / "t.npy")


def test_device_gives_torch_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    ds = TokenDataset(write_dataset(tmp_path, [list(range(30))], 7))
    x, y = ds.get_batch(4, 5, 3, device="cpu")
    ex, ey = ds.get_batch(4, 5, 3)
    assert isinstance(x, torch.Tensor) and x.dtype == torch.int64
    assert x.tolist() == ex.tolist() and y.tolist() == ey.tolist()


def test_megatron_files_with_several_sequences_per_document_read_as_whole_documents(tmp_path):
    """Files written by others may split a document into sentences: built here from docs/formats.md's layout."""
    sequences = [[1, 2], [3], [4, 5, 6]]  # document 0 is sequences 0 and 1, document 1 is sequence 2
    lengths = [len(s) for s in sequences]
    pointers = [0, 4, 6]  # bytes, uint16 ids
    idx = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, 3, 3)
    idx += struct.pack("<3i", *lengths) + struct.pack("<3q", *pointers) + struct.pack("<3q", 0, 2, 3)
    (tmp_path / "s.idx").write_bytes(idx)
    (tmp_path / "s.bin").write_bytes(struct.pack("<6H", 1, 2, 3, 4, 5, 6))
    ds = TokenDataset(tmp_path / "s")
    ds.verify()
    assert (len(ds), ds.num_documents) == (6, 2)
    assert ds.document(0).tolist() == [1, 2, 3] and ds.document(1).tolist() == [4, 5, 6]
