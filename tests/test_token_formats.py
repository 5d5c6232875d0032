"""The formats trainers read (`formats/megatron.py`, `formats/llmc.py`): our writers against readers
written here straight from docs/formats.md (struct, byte by byte), on generated documents; our
readers on what our writers wrote; bad input refused with nothing left behind."""

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.formats import llmc, megatron

documents_st = st.lists(st.lists(st.integers(0, 65535), min_size=1, max_size=12), max_size=10)

MEGATRON_DTYPES = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 6: "d", 7: "f", 8: "H"}  # the codes of docs/formats.md


def spec_read_megatron(prefix: Path) -> tuple[list[list[int]], list[list[int]]]:
    """(sequences, documents as lists of sequence indices), read as docs/formats.md describes the files."""
    idx = Path(str(prefix) + ".idx").read_bytes()
    data = Path(str(prefix) + ".bin").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    (version,) = struct.unpack("<Q", idx[9:17])
    assert version == 1
    code = idx[17]
    s, d = struct.unpack("<QQ", idx[18:34])
    at = 34
    lengths = struct.unpack(f"<{s}i", idx[at : at + 4 * s])
    at += 4 * s
    pointers = struct.unpack(f"<{s}q", idx[at : at + 8 * s])
    at += 8 * s
    doc_index = struct.unpack(f"<{d}q", idx[at : at + 8 * d])
    assert at + 8 * d == len(idx)
    fmt = MEGATRON_DTYPES[code]
    size = struct.calcsize(fmt)
    sequences = [list(struct.unpack(f"<{n}{fmt}", data[p : p + n * size])) for n, p in zip(lengths, pointers)]
    assert sum(lengths) * size == len(data)
    documents = [list(range(doc_index[k], doc_index[k + 1])) for k in range(d - 1)]
    return sequences, documents


def spec_read_llmc(path: Path) -> list[int]:
    data = path.read_bytes()
    head = struct.unpack("<256i", data[:1024])
    assert head[0] == 20240520 and head[1] == 1 and not any(head[3:])
    assert len(data) == 1024 + 2 * head[2]
    return list(struct.unpack(f"<{head[2]}H", data[1024:]))


def chunks_with_starts(documents: list[list[int]], cuts: list[int]):
    """The documents' ids cut into chunks at `cuts`, each with the offsets of documents starting in it."""
    ids = [i for doc in documents for i in doc]
    starts = np.cumsum([0] + [len(doc) for doc in documents[:-1]]) if documents else np.zeros(0, dtype=int)
    bounds = [0] + sorted(c for c in set(cuts) if 0 < c < len(ids)) + [len(ids)]
    for a, b in zip(bounds, bounds[1:]):
        yield np.array(ids[a:b], dtype=np.int64), [s - a for s in starts if a <= s < b]


@settings(max_examples=25, deadline=None)
@given(documents=documents_st, cuts=st.lists(st.integers(0, 120), max_size=6), whole=st.booleans())
def test_megatron_writer_matches_the_spec_reader(tmp_path_factory, documents, cuts, whole):
    prefix = tmp_path_factory.mktemp("m") / "train"
    with megatron.MegatronWriter(prefix, np.uint16) as w:
        if whole:
            for doc in documents:
                w.add_document(doc)
        else:
            for ids, starts in chunks_with_starts(documents, cuts):
                w.add(ids, starts)
    sequences, doc_sequences = spec_read_megatron(prefix)
    assert sequences == documents  # one sequence per document
    assert doc_sequences == [[k] for k in range(len(documents))]
    ours = megatron.read(prefix)
    assert ours.ids.tolist() == [i for doc in documents for i in doc]
    assert ours.sequence_lengths.tolist() == [len(doc) for doc in documents]
    assert megatron.check(ours, prefix) == []


@settings(max_examples=15, deadline=None)
@given(documents=documents_st, shard_tokens=st.integers(1, 20), pieces=st.integers(1, 4))
def test_llmc_writer_matches_the_spec_reader(tmp_path_factory, documents, shard_tokens, pieces):
    prefix = tmp_path_factory.mktemp("l") / "train"
    ids = [i for doc in documents for i in doc]
    with llmc.LlmcWriter(prefix, shard_tokens=shard_tokens) as w:
        for part in np.array_split(np.array(ids, dtype=np.int64), pieces):
            w.add(part)
    files = sorted(prefix.parent.glob("train_*.bin"))
    assert files == w.paths == llmc.shard_paths(prefix)
    assert [f.name for f in files] == [f"train_{k:06d}.bin" for k in range(len(files))]
    read_back = [spec_read_llmc(f) for f in files]
    assert [i for shard in read_back for i in shard] == ids
    assert all(len(shard) == shard_tokens for shard in read_back[:-1])  # full shards, then the rest
    assert 0 < len(read_back[-1]) <= shard_tokens or not ids
    assert [i for shard in llmc.read(prefix) for i in shard.tolist()] == ids


def test_megatron_int32_ids_and_the_dtype_megatron_would_choose(tmp_path):
    assert megatron.ids_dtype(65535) == np.uint16 and megatron.ids_dtype(65536) == np.int32
    with megatron.MegatronWriter(tmp_path / "big", megatron.ids_dtype(100_000)) as w:
        w.add_document([100_000, 3, 70_000])
    sequences, _ = spec_read_megatron(tmp_path / "big")
    assert sequences == [[100_000, 3, 70_000]]
    with pytest.raises(ValueError, match="uint32"):
        megatron.MegatronWriter(tmp_path / "x", np.uint32)  # the format has no code for it


def test_llmc_refuses_ids_above_65535_and_leaves_the_old_shards(tmp_path):
    prefix = tmp_path / "train"
    with llmc.LlmcWriter(prefix, shard_tokens=2) as w:
        w.add([1, 2, 3])
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ValueError, match=r"train: token id 65536"):
        with llmc.LlmcWriter(prefix, shard_tokens=2) as w:
            w.add([7, 8, 9, 10, 11])
            w.add([5, 65536])
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporary file, nothing changed


def test_an_error_while_writing_megatron_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with megatron.MegatronWriter(tmp_path / "train") as w:
            w.add_document([1, 2])
            raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="does not fit"):
        with megatron.MegatronWriter(tmp_path / "train", np.uint16) as w:
            w.add_document([70_000])
    with pytest.raises(ValueError, match="before any document starts"):
        with megatron.MegatronWriter(tmp_path / "train") as w:
            w.add([1, 2], starts=[1])
    assert list(tmp_path.iterdir()) == []


def test_a_shorter_llmc_write_removes_the_old_later_shards(tmp_path):
    prefix = tmp_path / "train"
    with llmc.LlmcWriter(prefix, shard_tokens=1) as w:
        w.add([1, 2, 3, 4])
    with llmc.LlmcWriter(prefix, shard_tokens=2) as w:
        w.add([5, 6, 7])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train_000000.bin", "train_000001.bin"]
    assert [x for s in llmc.read(prefix) for x in s.tolist()] == [5, 6, 7]


def test_readers_name_the_file_that_does_not_fit_the_layout(tmp_path):
    with megatron.MegatronWriter(tmp_path / "m") as w:
        w.add_document([1, 2, 3])
    with open(tmp_path / "m.bin", "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(ValueError, match=r"m\.bin.*not from the same write"):
        megatron.read(tmp_path / "m")
    (tmp_path / "n.idx").write_bytes(b"NOTMEGATRON" + bytes(40))
    (tmp_path / "n.bin").write_bytes(b"")
    with pytest.raises(ValueError, match=r"n\.idx: not a Megatron index"):
        megatron.read(tmp_path / "n")
    with pytest.raises(FileNotFoundError, match=r"absent\.idx"):
        megatron.read(tmp_path / "absent")
    with llmc.LlmcWriter(tmp_path / "l") as w:
        w.add([1, 2, 3])
    path = llmc.shard_path(tmp_path / "l", 0)
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(ValueError, match=r"l_000000\.bin: .*3 tokens"):
        llmc.read(tmp_path / "l")
    assert llmc.prefix_of(path) == str(tmp_path / "l") and llmc.prefix_of(tmp_path / "x.bin") is None


# --- tiktoken rank files (cs336_basics/formats/tiktoken.py) ------------------------------------------


def _byte_ranks() -> dict[bytes, int]:
    return {bytes([b]): b for b in range(256)}


def _rank_line(token: bytes, rank: int) -> bytes:
    import base64

    return base64.b64encode(token) + b" %d\n" % rank


def test_rank_files_are_read_line_by_line_past_blank_lines_and_refused_where_malformed():
    """parse_ranks reads every line (blank ones skipped), and names the line of a malformed one:
    fields not split by one space, a third field, base64 with other characters, a repeated rank."""
    from cs336_basics.formats.tiktoken import parse_ranks

    good = _rank_line(b"a", 0) + b"\n" + _rank_line(b"b", 1) + _rank_line(b"ab", 2)
    assert parse_ranks(good) == {b"a": 0, b"b": 1, b"ab": 2}
    for bad, message in [(b"YQ==\t3\n", "line 3 must be 'base64-token rank'"),
                         (b"YQ==  3\n", "line 3 must be 'base64-token rank'"),
                         (b"Yw== 3 4\n", "line 3 must be 'base64-token rank'"),
                         (b"Yw=!= 3\n", "line 3 has invalid base64"),
                         (b"Yw== 1\n", r"line 3 repeats rank 1 \(line 2\)")]:
        with pytest.raises(ValueError, match=f"^f.tiktoken: {message}"):
            parse_ranks(_rank_line(b"a", 0) + _rank_line(b"b", 1) + bad, source="f.tiktoken")


def test_load_ranks_reads_gzip_and_checks_the_hash(tmp_path):
    """load_ranks decompresses a .gz rank file, accepts the right sha256 of its contents and refuses
    another, and names a cut-short gzip file."""
    import gzip
    import hashlib

    from cs336_basics.formats.tiktoken import load_ranks

    data = _rank_line(b"a", 0) + _rank_line(b"b", 1)
    (tmp_path / "r.tiktoken.gz").write_bytes(gzip.compress(data))
    digest = hashlib.sha256(data).hexdigest()
    assert load_ranks(tmp_path / "r.tiktoken.gz", expected_sha256=digest) == {b"a": 0, b"b": 1}
    with pytest.raises(ValueError, match=f"sha256 is {digest}, expected {'0' * 64}"):
        load_ranks(tmp_path / "r.tiktoken.gz", expected_sha256="0" * 64)
    (tmp_path / "cut.tiktoken.gz").write_bytes(gzip.compress(data)[:-6])
    with pytest.raises(ValueError, match=r"cut\.tiktoken\.gz: not a complete gzip file"):
        load_ranks(tmp_path / "cut.tiktoken.gz")


def test_recover_merges_checks_the_bytes_and_the_largest_rank_and_names_what_cannot_be_recovered():
    """recover_merges names the first missing byte, takes ranks up to the largest id and no more,
    and shows the parts (at most 8) that BPE leaves of a token it cannot recover."""
    from cs336_basics.formats.gpt2 import MAX_TOKEN_ID
    from cs336_basics.formats.tiktoken import recover_merges

    ranks = _byte_ranks()
    del ranks[b"c"], ranks[b"z"]
    with pytest.raises(ValueError, match=r"^r: no token for the single byte b'c' \(2 bytes missing\)"):
        recover_merges(ranks, source="r")
    assert recover_merges({**_byte_ranks(), b"ab": MAX_TOKEN_ID}) == [(b"a", b"b")]
    with pytest.raises(ValueError, match=f"rank {MAX_TOKEN_ID + 1} is above the largest id we hold"):
        recover_merges({**_byte_ranks(), b"ab": MAX_TOKEN_ID + 1})
    with pytest.raises(ValueError, match=r"token b'abc' \(rank 256\) cannot be recovered as a merge: BPE with the "
                                         r"lower ranks leaves 3 parts \(b'a' \+ b'b' \+ b'c'\), so"):
        recover_merges({**_byte_ranks(), b"abc": 256})
    shown = " + ".join(repr(bytes([b])) for b in b"abcdefgh") + " + ..."
    with pytest.raises(ValueError, match=f"leaves 9 parts \\({regex_escape(shown)}\\)"):
        recover_merges({**_byte_ranks(), b"abcdefghi": 256})
    with pytest.raises(ValueError, match=r"leaves 8 parts \(b'a' \+ b'b' \+ b'c' \+ b'd' \+ b'e' \+ b'f' \+ b'g' \+ b'h'\)"):
        recover_merges({**_byte_ranks(), b"abcdefgh": 256})


def regex_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_vocab_and_ranks_convert_with_special_tokens_and_refuse_what_tiktoken_cannot_hold():
    """vocab_from_ranks adds special tokens at their ids; ranks_from_vocab refuses a two-byte token no
    merge makes, names the first merge out of id order, and names a missing byte."""
    from cs336_basics.formats.tiktoken import ranks_from_vocab, vocab_from_ranks

    ranks = {**_byte_ranks(), b"ab": 256}
    vocab = vocab_from_ranks(ranks, {"<|end|>": 257})
    assert vocab[257] == b"<|end|>" and vocab[256] == b"ab" and len(vocab) == 258
    assert ranks_from_vocab(vocab, [(b"a", b"b")], ["<|end|>"]) == ranks
    with pytest.raises(ValueError, match=r"token b'ab' \(id 256\) is made by no merge"):
        ranks_from_vocab(vocab, [], ["<|end|>"])
    vocab = {**{b: bytes([b]) for b in range(256)}, 256: b"cd", 257: b"ab"}
    with pytest.raises(ValueError, match=r"merge 1, b'a' \+ b'b', makes id 257"):
        ranks_from_vocab(vocab, [(b"a", b"b"), (b"c", b"d")], [])
    vocab = {**{b: bytes([b]) for b in range(1, 256)}, 256: b"ab"}
    with pytest.raises(ValueError, match=r"the ids cannot be tiktoken ranks: vocabulary: no token for the single byte b'\\x00'"):
        ranks_from_vocab(vocab, [(b"a", b"b")], [])
