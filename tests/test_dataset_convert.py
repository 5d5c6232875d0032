"""Converting a dataset directory (`datasets/convert.py`) and the `bpe dataset` commands: the same ids
and documents in the trainers' formats, read back by test_token_formats' readers (written from docs/formats.md); a bad
shard stops the conversion with nothing written."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.cli import main
from cs336_basics.datasets import convert, layout
from cs336_basics.datasets.convert import convert_dataset
from tests.dataset_helpers import write_dataset
from tests.test_token_formats import spec_read_llmc, spec_read_megatron

documents_st = st.lists(st.lists(st.integers(0, 65535), min_size=1, max_size=10), max_size=8)


@settings(max_examples=6, deadline=None)
@given(documents=documents_st, shard_tokens=st.integers(1, 9), llmc_tokens=st.integers(1, 9), chunk=st.integers(1, 5))
def test_conversion_keeps_ids_and_documents_across_shard_edges(tmp_path_factory, documents, shard_tokens, llmc_tokens,
                                                               chunk):
    folder = tmp_path_factory.mktemp("c")
    directory = write_dataset(folder / "ds", documents, shard_tokens)
    before, convert.CHUNK_TOKENS = convert.CHUNK_TOKENS, chunk  # shards streamed in pieces, too
    try:
        done = convert_dataset(directory, folder / "m", "megatron")
    finally:
        convert.CHUNK_TOKENS = before
    sequences, doc_sequences = spec_read_megatron(folder / "m")
    assert sequences == documents and doc_sequences == [[k] for k in range(len(documents))]
    assert (done.tokens, done.documents) == (sum(map(len, documents)), len(documents))
    done = convert_dataset(directory, folder / "l", "llmc", shard_tokens=llmc_tokens)
    assert [i for p in done.paths for i in spec_read_llmc(p)] == [i for doc in documents for i in doc]


def test_uint32_datasets_become_int32_megatron_and_are_refused_by_llmc(tmp_path):
    directory = write_dataset(tmp_path / "ds", [[70_000, 1], [2]], 2, dtype="uint32", vocab_size=100_000)
    convert_dataset(directory, tmp_path / "m", "megatron")
    assert spec_read_megatron(tmp_path / "m")[0] == [[70_000, 1], [2]]
    assert (tmp_path / "m.idx").read_bytes()[17] == 4  # int32
    with pytest.raises(ValueError, match="token id 70000 does not fit llm.c"):
        convert_dataset(directory, tmp_path / "l", "llmc")
    assert not list(tmp_path.glob("l*")) and not list(tmp_path.glob(".l*"))


def test_a_bad_shard_stops_the_conversion_with_nothing_written(tmp_path):
    directory = write_dataset(tmp_path / "ds", [[1, 2, 3], [4, 5], [6]], 2)
    path = layout.ids_file(directory, "shard-00002")
    np.save(path, np.array([9, 9], dtype=np.uint16))
    with pytest.raises(ValueError, match=r"shard-00002: shard-00002\.npy's sha256 differs"):
        convert_dataset(directory, tmp_path / "m", "megatron")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_bpe_dataset_info_verify_convert(tmp_path, capsys):
    directory = write_dataset(tmp_path / "ds", [[1, 2, 3], [4, 5], [6]], 2)
    assert main(["dataset", "info", str(directory)]) == 0
    out = capsys.readouterr().out
    assert "tokens     6" in out and "documents  3" in out and "shards     3" in out and "uint16" in out
    assert "pattern gpt2" in out
    assert main(["dataset", "verify", str(directory)]) == 0
    assert "ok" in capsys.readouterr().out
    assert main(["dataset", "convert", str(directory), "--format", "megatron", "--out", str(tmp_path / "m"),
                 "--quiet"]) == 0
    assert "6 tokens, 3 documents" in capsys.readouterr().out
    assert spec_read_megatron(tmp_path / "m")[0] == [[1, 2, 3], [4, 5], [6]]
    assert main(["dataset", "info", str(tmp_path / "m")]) == 0
    assert "megatron" in capsys.readouterr().out
    assert main(["dataset", "convert", str(directory), "--format", "llmc", "--out", str(tmp_path / "l"),
                 "--shard-tokens", "4", "--quiet"]) == 0
    capsys.readouterr()
    assert spec_read_llmc(tmp_path / "l_000001.bin") == [4, 5, 6]  # 6 tokens in shards of at most 4: 3 and 3
    layout.docs_file(directory, "shard-00001").unlink()
    assert main(["dataset", "verify", str(directory)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bpe: ") and "shard-00001.docs.npy is missing" in err[0]
    assert main(["dataset", "info", str(tmp_path / "nothing")]) == 1
    assert "no token dataset there" in capsys.readouterr().err


def test_bpe_dataset_convert_errors_are_one_line_and_write_nothing(tmp_path, capsys):
    directory = write_dataset(tmp_path / "ds", [[70_000, 1], [2]], 2, dtype="uint32", vocab_size=100_000)
    out = tmp_path / "out"
    out.mkdir()
    assert main(["dataset", "convert", str(directory), "--format", "llmc", "--out", str(out / "l"), "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "token id 70000 does not fit llm.c" in err[0]
    assert list(out.iterdir()) == []
    assert main(["dataset", "convert", str(directory), "--format", "megatron", "--out", str(out), "--quiet"]) == 1
    assert "is a folder; give a prefix" in capsys.readouterr().err
    np.save(tmp_path / "t.npy", np.arange(5, dtype=np.uint16))
    assert main(["dataset", "convert", str(tmp_path / "t.npy"), "--format", "megatron", "--out", str(out / "m")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "t.npy: a .npy token array; convert reads a dataset directory" in err[0]
    assert list(out.iterdir()) == []


def test_convert_makes_the_output_folder_and_a_failed_one_leaves_none(tmp_path, capsys):
    directory = write_dataset(tmp_path / "ds", [[1, 2, 3], [4, 5], [6]], 2)
    out = tmp_path / "data" / "megatron" / "train"
    assert main(["dataset", "convert", str(directory), "--format", "megatron", "--out", str(out), "--quiet"]) == 0
    assert spec_read_megatron(out)[0] == [[1, 2, 3], [4, 5], [6]]
    assert main(["dataset", "convert", str(directory), "--format", "llmc", "--out", str(tmp_path / "l" / "train"),
                 "--quiet"]) == 0
    assert spec_read_llmc(tmp_path / "l" / "train_000000.bin") == [1, 2, 3, 4, 5, 6]
    big = write_dataset(tmp_path / "big", [[70_000]], 2, dtype="uint32", vocab_size=100_000)
    assert main(["dataset", "convert", str(big), "--format", "llmc", "--out", str(tmp_path / "new" / "l"), "--quiet"]) == 1
    assert not (tmp_path / "new").exists()  # the folder made for the write went with it


def test_llmc_shards_are_balanced_so_none_is_tiny(tmp_path):
    # The case, scaled down: 3,007,532 tokens in shards of at most 1,000,000 left 7,532 in the last.
    total, shard_tokens = 3_007_532 // 100, 1_000_000 // 100
    directory = write_dataset(tmp_path / "ds", [list(range(1, total + 1))], 4096)
    done = convert_dataset(directory, tmp_path / "l", "llmc", shard_tokens=shard_tokens)
    sizes = [len(spec_read_llmc(p)) for p in done.paths]
    assert len(sizes) == 4 and sum(sizes) == total and max(sizes) <= shard_tokens
    assert max(sizes) - min(sizes) <= 1
    assert [i for p in done.paths for i in spec_read_llmc(p)] == list(range(1, total + 1))


@given(total=st.integers(0, 200), shard_tokens=st.integers(1, 50))
def test_balanced_shard_tokens_makes_the_fewest_shards_of_about_equal_size(total, shard_tokens):
    from cs336_basics.formats.llmc import balanced_shard_tokens

    per = balanced_shard_tokens(total, shard_tokens)
    count = max(-(-total // per), 1)
    assert 1 <= per <= shard_tokens and count == max(-(-total // shard_tokens), 1)
    sizes = [min(per, total - k * per) for k in range(count)]
    assert sum(sizes) == total and (total == 0 or min(sizes) >= per - count)


def test_kinds_are_named_in_words(tmp_path, capsys):
    from cs336_basics.datasets.loader import TokenDataset

    directory = write_dataset(tmp_path / "ds", [[1, 2, 3], [4, 5]], 2)
    convert_dataset(directory, tmp_path / "l", "llmc")
    with pytest.raises(ValueError, match="an llm.c dataset records no document boundaries"):
        TokenDataset(tmp_path / "l").num_documents
    assert main(["dataset", "convert", str(tmp_path / "l"), "--format", "megatron", "--out", str(tmp_path / "m")]) == 1
    assert "l: an llm.c dataset; convert reads a dataset directory" in capsys.readouterr().err
