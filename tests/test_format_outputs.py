"""Token formats written in one step and what a user sees when a write fails: `bpe encode --format
megatron|llmc` gives the bytes of `bpe dataset convert` (and resumes as a dataset directory does),
`--append-separator` ends the last document with the separator in every format, and no message
ever names one of our temporary files (`.NAME.XXXXXXXX.tmp`, see `formats/staged.py`)."""

import errno
import os
import re

import numpy as np
import pytest

from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import main
from cs336_basics.datasets.convert import convert_dataset, write_format
from cs336_basics.formats import staged
from tests.dataset_helpers import write_dataset
from tests.test_token_formats import spec_read_llmc, spec_read_megatron

EOT = "<|endoftext|>"
TEMP_NAME = re.compile(r"\.[^/' ]+\.[a-z0-9_]{6,}\.tmp")


def no_temp_name(text: str) -> bool:
    return ".tmp" not in text and not TEMP_NAME.search(text)


@pytest.fixture(scope="module")
def tokenizer():
    vocab = {i: bytes([i]) for i in range(256)}
    merges = [(b"t", b"h"), (b"th", b"e"), (b" ", b"the"), (b"a", b"n"), (b"an", b"d")]
    for k, (a, b) in enumerate(merges):
        vocab[256 + k] = a + b
    vocab[len(vocab)] = EOT.encode()
    return Tokenizer(vocab, merges, [EOT])


# --- no temporary file in a message --------------------------------------------------------------------


def test_a_rename_that_fails_names_the_final_path(tmp_path, capsys):
    directory = write_dataset(tmp_path / "ds", [[1, 2, 3], [4, 5]], 2)
    (tmp_path / "l_000000.bin").mkdir()  # os.replace(temp, a folder) would fail naming both: refused first
    assert main(["dataset", "convert", str(directory), "--format", "llmc", "--out", str(tmp_path / "l"),
                 "--quiet"]) == 1
    err = capsys.readouterr().err
    assert no_temp_name(err), err
    assert f"{tmp_path / 'l_000000.bin'} is a folder" in err and len(err.strip().splitlines()) == 1


def test_a_missing_folder_names_the_final_path(tmp_path, tokenizer):
    (tmp_path / "in.txt").write_text("the and the")
    with pytest.raises(FileNotFoundError) as caught:  # Python callers get no folder made for them
        with staged.replacing(tmp_path / "missing" / "x.npy"):
            pass
    assert no_temp_name(str(caught.value)) and str(tmp_path / "missing" / "x.npy") in str(caught.value)
    with pytest.raises(FileNotFoundError) as caught:
        staged.StagedFiles().open(tmp_path / "missing" / "y.bin")
    assert no_temp_name(str(caught.value)) and "y.bin" in str(caught.value)


@pytest.mark.parametrize("fmt", ["megatron", "llmc"])
def test_a_full_disk_while_syncing_or_writing_names_the_output(tmp_path, monkeypatch, capsys, fmt):
    directory = write_dataset(tmp_path / "ds", [[1, 2, 3], [4, 5]], 2)

    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as m:
        m.setattr(staged.os, "fsync", full)
        assert main(["dataset", "convert", str(directory), "--format", fmt, "--out", str(tmp_path / "o" / "t"),
                     "--quiet"]) == 1
    err = capsys.readouterr().err
    assert no_temp_name(err) and "No space left on device" in err and str(tmp_path / "o" / "t") in err, err
    assert not (tmp_path / "o").exists()
    with monkeypatch.context() as m:  # a rename that fails, from Python
        m.setattr(staged.os, "replace", lambda a, b: (_ for _ in ()).throw(OSError(errno.EXDEV, "Cross-device", a, b)))
        with pytest.raises(OSError) as caught:
            convert_dataset(directory, tmp_path / "p", fmt)
    assert no_temp_name(str(caught.value)) and "Cross-device" in str(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


# --- bpe encode --format ---------------------------------------------------------------------------------

DOCS = ["the and the", "hand in hand", "", "then the end", "a b c " * 40, "and"]


@pytest.fixture
def setup(tmp_path, tokenizer):
    tokenizer.save_pretrained(tmp_path / "tok")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt").write_text(EOT.join(DOCS[:4]))
    (tmp_path / "c" / "b.txt").write_text(EOT.join(DOCS[4:]))
    return tmp_path


def encode(setup, *extra: str) -> int:
    return main(["encode", "--tokenizer", str(setup / "tok"), str(setup / "c"), "--quiet", "--workers", "2",
                 "--shard-size", "64", *extra])


def files_at(folder, prefix: str) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.glob(prefix + "*"))}


@pytest.mark.parametrize("fmt", ["megatron", "llmc"])
@pytest.mark.parametrize("append", [False, True])
def test_encode_format_writes_the_bytes_of_dataset_convert(setup, capsys, fmt, append):
    flags = ["--append-separator"] if append else []
    more = ["--shard-tokens", "40"] if fmt == "llmc" else []
    assert encode(setup, "--out", str(setup / "ds")) == 0
    assert main(["dataset", "convert", str(setup / "ds"), "--format", fmt, "--out", str(setup / "two" / "t"),
                 "--quiet", *more, *flags]) == 0
    assert encode(setup, "--format", fmt, "--out", str(setup / "one" / "t"), *more, *flags) == 0
    assert "wrote" in capsys.readouterr().out
    assert files_at(setup / "one", "t") == files_at(setup / "two", "t") and files_at(setup / "one", "t")
    assert sorted(p.name for p in (setup / "one").iterdir()) == sorted(files_at(setup / "one", "t"))  # nothing else


def test_encode_format_resumes_after_a_stop_and_names_no_hidden_folder(setup, capsys, monkeypatch):
    from cs336_basics.datasets import convert

    assert encode(setup, "--format", "megatron", "--out", str(setup / "whole" / "t")) == 0
    calls = []

    def stop_converting(*args, **kwargs):
        calls.append(1)
        raise KeyboardInterrupt  # Ctrl-C once the dataset directory is written

    with monkeypatch.context() as m:
        m.setattr(convert, "convert_dataset", stop_converting)
        assert encode(setup, "--format", "megatron", "--out", str(setup / "o" / "t")) == 130
    err = capsys.readouterr().err
    assert "run the same command again to finish" in err and str(setup / "o" / "t") in err and ".dataset" not in err
    assert not list((setup / "o").glob("t.*"))  # nothing at the prefix yet; the work is kept (hidden)
    assert encode(setup, "--format", "megatron", "--out", str(setup / "o" / "t")) == 0
    assert "reused" in capsys.readouterr().out
    assert files_at(setup / "o", "t") == files_at(setup / "whole", "t")
    assert sorted(p.name for p in (setup / "o").iterdir()) == ["t.bin", "t.idx"]
    # Started with another tokenizer: refused naming the prefix, not the hidden folder.
    (setup / "o" / ".t.dataset").mkdir()
    with monkeypatch.context() as m:
        m.setattr(convert, "convert_dataset", stop_converting)
        assert encode(setup, "--format", "megatron", "--out", str(setup / "o" / "t")) == 130
    capsys.readouterr()
    assert main(["encode", "--tokenizer", str(setup / "tok"), str(setup / "c"), "--quiet", "--workers", "1",
                 "--shard-size", "64", "--special-token", "<|other|>", "--format", "megatron",
                 "--out", str(setup / "o" / "t")]) == 1
    err = capsys.readouterr().err
    assert "other settings" in err and no_temp_name(err) and ".t.dataset" not in err, err
    assert str(setup / "o" / "t") in err and "--overwrite" in err


def test_encode_format_refuses_what_does_not_go_together(setup, capsys):
    assert encode(setup, "--format", "llmc", "--out", str(setup / "x.npy")) == 1
    assert "give a prefix" in capsys.readouterr().err
    assert encode(setup, "--shard-tokens", "5", "--out", str(setup / "d")) == 1
    assert "--shard-tokens is for --format llmc" in capsys.readouterr().err
    assert not (setup / "d").exists() and not (setup / "x.npy").exists()


# --- --append-separator ------------------------------------------------------------------------------------


def ids_of(path) -> list[int]:
    from cs336_basics.datasets.loader import TokenDataset

    ds = TokenDataset(path)
    return [int(i) for k in range(ds.num_shards) for i in ds.shard_ids(k)]


@pytest.mark.parametrize("docs", [DOCS, DOCS[:3], ["x" * 300] * 3 + [f"ends{EOT}"], [""]])
def test_append_separator_ends_the_last_document_in_every_output(tmp_path, tokenizer, docs):
    """The oracle: the ids without the option, and one separator after them unless they are empty or
    end with one; the documents stay the same (the separator is the last one's last token)."""
    sep = tokenizer.encode(EOT)[0]
    (tmp_path / "c.txt").write_text(EOT.join(docs))
    plain = tokenizer.encode(EOT.join(docs))
    expected = plain + [sep] if plain and plain[-1] != sep else plain
    kw = dict(shard_size=16, num_workers=2)
    tokenizer.encode_file(tmp_path / "c.txt", tmp_path / "a.npy", num_workers=2, append_separator=True)
    assert np.load(tmp_path / "a.npy").tolist() == expected
    tokenizer.encode_dataset(tmp_path / "c.txt", tmp_path / "plain", **kw)
    tokenizer.encode_dataset(tmp_path / "c.txt", tmp_path / "files", append_separator=True, **kw)
    tokenizer.encode_dataset_from_iterator(docs, tmp_path / "iter", append_separator=True, piece_size=20, **kw)
    from cs336_basics.datasets.loader import TokenDataset

    for name in ("files", "iter"):
        assert ids_of(tmp_path / name) == expected, name
        ds, before = TokenDataset(tmp_path / name), TokenDataset(tmp_path / "plain")
        assert [ds.document(i).tolist() for i in range(ds.num_documents)] == [
            (before.document(i).tolist() + ([sep] if i == before.num_documents - 1 and expected != plain else []))
            for i in range(before.num_documents)], name
        ds.verify()
    for fmt in ("megatron", "llmc"):
        convert_dataset(tmp_path / "plain", tmp_path / fmt, fmt, shard_tokens=7, append_separator=True)
        write_format(
            lambda d: tokenizer.encode_dataset_from_iterator(docs, d, piece_size=20, **kw), tmp_path / f"i{fmt}",
            fmt, shard_tokens=7, append_separator=True)
        for prefix in (tmp_path / fmt, tmp_path / f"i{fmt}"):
            if fmt == "megatron":
                sequences, _ = spec_read_megatron(prefix)
                assert [i for s in sequences for i in s] == expected
                assert len(sequences) == TokenDataset(tmp_path / "plain").num_documents
            else:
                assert [i for p in sorted(tmp_path.glob(prefix.name + "_*.bin")) for i in spec_read_llmc(p)] == expected


def test_append_separator_is_refused_without_a_special_token_and_a_change_is_named(setup, capsys):
    assert encode(setup, "--append-separator", "--special-token", "", "--out", str(setup / "d")) in (1, 2)
    capsys.readouterr()
    assert encode(setup, "--out", str(setup / "d")) == 0
    assert encode(setup, "--append-separator", "--out", str(setup / "d")) == 1
    err = capsys.readouterr().err
    assert "other settings" in err and "without --append-separator, now with --append-separator" in err
    assert encode(setup, "--append-separator", "--out", str(setup / "d"), "--overwrite") == 0
    assert ids_of(setup / "d")[-1] == 261  # the separator (the corpus ends with "and")
