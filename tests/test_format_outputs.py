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
