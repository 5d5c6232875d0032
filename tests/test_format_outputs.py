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
from cs336_basics.datasets.convert import convert_dataset
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
    (tmp_path / "l_000000.bin").mkdir()  # os.replace(temp, a folder) fails naming both
    assert main(["dataset", "convert", str(directory), "--format", "llmc", "--out", str(tmp_path / "l"),
                 "--quiet"]) == 1
    err = capsys.readouterr().err
    assert no_temp_name(err), err
    assert "Is a directory" in err and "l_000000.bin" in err and len(err.strip().splitlines()) == 1


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
