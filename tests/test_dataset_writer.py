"""Writing a dataset directory (cs336_basics/datasets/writer.py): `Tokenizer.encode_dataset` and
`bpe encode ... --out DIR`.

The oracle is `encode_file` to one `.npy`: the shards, concatenated, must hold exactly its ids, and
the document starts must be 0 and the position after each separator id. A run stopped anywhere
(SIGKILL, SIGINT, a dead worker, a full disk) and run again must leave a directory byte-identical
to an uninterrupted run. `BPE_FUZZ_EXAMPLES` raises the number of random kill points per way of
stopping (default 1), `BPE_FUZZ_SEED` draws other ones.
"""

import contextlib
import errno
import hashlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import errors
from cs336_basics.bpe import Tokenizer, train_bpe
from cs336_basics.cli import main
from cs336_basics.datasets import layout
from cs336_basics.datasets.shard_folder import LOCK, locked
from cs336_basics.formats import staged
from tests.kill_target import release
from tests.test_sources import DOCS, EOT, VOCAB, WRITERS, write_jsonl, write_txt

ROOT = Path(__file__).resolve().parent.parent
KILL_TARGET = Path(__file__).resolve().parent / "kill_target.py"
KILL_POINTS = int(os.environ.get("BPE_FUZZ_EXAMPLES", "1"))


@pytest.fixture(scope="module")
def tokenizer():
    vocab, merges = train_bpe_on(DOCS)
    return Tokenizer(vocab, merges, [EOT])


def train_bpe_on(docs):
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "train.txt"
        write_txt(path, docs)
        return train_bpe(path, VOCAB, [EOT])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A folder of .txt and .jsonl files, with an empty document, a file of blank lines only (a work
    unit that reads no document) and text holding the separator."""
    folder = tmp_path_factory.mktemp("corpus")
    write_txt(folder / "a.txt", DOCS[:20])
    write_jsonl(folder / "b.jsonl", DOCS[20:40])
    (folder / "c.jsonl").write_text("\n\n  \n")
    write_txt(folder / "d.txt", DOCS[40:] + [""])  # ends with the separator
    return folder


def oracle(tokenizer, inputs, tmp_path: Path) -> tuple[list[int], list[int]]:
    """The ids `encode_file` writes, and where documents start in them."""
    out = tmp_path / "oracle.npy"
    tokenizer.encode_file(inputs, out, num_workers=1)
    ids = np.load(out).tolist()
    out.unlink()
    separator = tokenizer.encode(EOT)[0] if tokenizer.special_tokens else None
    starts = [p for p in range(len(ids)) if p == 0 or ids[p - 1] == separator]
    return ids, starts


def read_dataset(directory: Path) -> tuple[list[int], list[int], dict]:
    """The concatenated ids and global document starts of a finished dataset, and its manifest."""
    manifest = layout.read_manifest(directory)
    ids, starts, offset = [], [], 0
    for entry in manifest["shards"]:
        shard = np.load(layout.ids_file(directory, entry["name"]))
        docs = np.load(layout.docs_file(directory, entry["name"]))
        assert shard.dtype == np.dtype(manifest["dtype"]) and docs.dtype == np.int64
        assert len(shard) == entry["tokens"] and len(docs) == entry["documents"]
        ids += shard.tolist()
        starts += (docs + offset).tolist()
        offset += len(shard)
    assert manifest["totals"] == {"tokens": len(ids), "documents": len(starts), "shards": len(manifest["shards"])}
    return ids, starts, manifest


def files_of(directory: Path) -> dict[str, bytes]:
    """Every file of a directory (hidden ones too) by its relative path, with its bytes."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# --- what is written -----------------------------------------------------------------------------------


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(st.sampled_from(DOCS[:12] + ["", EOT, f"x{EOT}", "\n"]), min_size=0, max_size=12),
    kinds=st.lists(st.sampled_from(["txt", "jsonl", "blank", "parquet", "txt.gz", "jsonl.gz"]), min_size=1, max_size=4),
    shard_size=st.integers(1, 400),
)
def test_shards_concatenate_to_encode_file(tmp_path_factory, tokenizer, docs, kinds, shard_size):
    tmp = tmp_path_factory.mktemp("gen")
    corpus = tmp / "corpus"
    corpus.mkdir()
    per_file = -(-len(docs) // len(kinds)) if docs else 0
    for i, kind in enumerate(kinds):
        part = docs[i * per_file : (i + 1) * per_file]
        if kind == "blank":  # a unit that reads no document
            (corpus / f"{i}.jsonl").write_text("\n \n")
        elif kind == "parquet":  # row groups of 3, or one row group of no rows
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({"text": pa.array(part, pa.string())}), corpus / f"{i}.parquet", row_group_size=3)
        else:
            WRITERS[f"corpus.{kind}"](corpus / f"{i}.{kind}", part)
    ids, starts = oracle(tokenizer, corpus, tmp)
    written = tokenizer.encode_dataset(corpus, tmp / "ds", shard_size=shard_size, num_workers=1)
    got_ids, got_starts, manifest = read_dataset(tmp / "ds")
    assert got_ids == ids
    assert got_starts == starts
    assert (written.tokens, written.documents) == (len(ids), len(starts))
    assert sorted(os.listdir(tmp / "ds")) == sorted(
        [layout.MANIFEST]
        + [f"{e['name']}{suffix}" for e in manifest["shards"] for suffix in (".npy", ".docs.npy")]
    )


def test_the_manifest_says_what_the_dataset_is(tmp_path, tokenizer, corpus):
    tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=300, num_workers=1)
    manifest = json.loads((tmp_path / "ds" / layout.MANIFEST).read_text())
    assert list(manifest) == ["format", "version", "tokenizer", "dtype", "shard_size", "piece_size", "inputs",
                              "shards", "totals"]
    assert manifest["tokenizer"]["separator_id"] == tokenizer.encode(EOT)[0]
    assert manifest["tokenizer"]["special_tokens"] == [EOT] and manifest["tokenizer"]["pattern"] == "gpt2"
    assert manifest["dtype"] == "uint16"
    names = ["a.txt", "b.jsonl", "c.jsonl", "d.txt"]
    assert [i["path"] for i in manifest["inputs"]] == [str(corpus / n) for n in names]
    units = [s["units"] for s in manifest["shards"]]
    assert units[0][0] == 0 and all(a[1] == b[0] for a, b in itertools.pairwise(units))
    assert units[-1][1] == sum(i["units"] for i in manifest["inputs"])
    for entry in manifest["shards"]:
        data = layout.ids_file(tmp_path / "ds", entry["name"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert len(manifest["shards"]) > 3  # the shard size cut it


def test_without_special_tokens_there_is_one_document(tmp_path, tokenizer, corpus):
    plain = Tokenizer(tokenizer.vocab, tokenizer.merges, [])
    plain.encode_dataset(corpus, tmp_path / "ds", shard_size=200, num_workers=1)
    ids, starts, manifest = read_dataset(tmp_path / "ds")
    assert (ids, starts) == oracle(plain, corpus, tmp_path) and starts == [0]
    assert manifest["tokenizer"]["separator_id"] is None and len(manifest["shards"]) > 1


def test_ids_too_large_for_uint16_give_uint32(tmp_path):
    vocab = {i: bytes([i]) for i in range(256)} | {70_000: b"ab"}
    tokenizer = Tokenizer(vocab, [(b"a", b"b")], [EOT])
    (tmp_path / "c.txt").write_text(f"abab{EOT}ba")
    tokenizer.encode_dataset(tmp_path / "c.txt", tmp_path / "ds", shard_size=4, num_workers=1)
    ids, _, manifest = read_dataset(tmp_path / "ds")
    assert manifest["dtype"] == "uint32" and ids == tokenizer.encode(f"abab{EOT}ba")


def test_local_workers_write_the_same_bytes_as_one_process(tmp_path, tokenizer, corpus):
    tokenizer.encode_dataset(corpus, tmp_path / "one", shard_size=200, num_workers=1)
    tokenizer.encode_dataset(corpus, tmp_path / "two", shard_size=200, num_workers=2)
    assert files_of(tmp_path / "two") == files_of(tmp_path / "one")
    assert read_dataset(tmp_path / "one")[:2] == oracle(tokenizer, corpus, tmp_path)


def test_the_command_writes_a_dataset_directory(tmp_path, tokenizer, corpus, capsys):
    tokenizer.save_pretrained(tmp_path / "tok")
    argv = ["encode", "--tokenizer", str(tmp_path / "tok"), str(corpus), "--out", str(tmp_path / "ds"),
            "--shard-size", "300", "--workers", "1", "--quiet"]
    assert main(argv) == 0
    assert read_dataset(tmp_path / "ds")[:2] == oracle(tokenizer, corpus, tmp_path)
    assert "shards" in capsys.readouterr().out
    assert main(argv) == 0
    assert f"reused {sum(f.stat().st_size for f in corpus.iterdir()):,} of" in capsys.readouterr().out
    assert main([*argv[:6], "--shard-size", "1K", "--quiet"]) == 1
    assert "shard size changed (300, now 1024)" in capsys.readouterr().err


# --- resume ---------------------------------------------------------------------------------------------


def test_a_second_run_reuses_everything_and_changes_nothing(tmp_path, tokenizer, corpus):
    first = tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=200, num_workers=1)
    before = files_of(tmp_path / "ds")
    seen = []
    again = tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=200, num_workers=1, on_progress=seen.append)
    assert files_of(tmp_path / "ds") == before
    assert again.reused_shards == first.shards and again.reused_bytes == again.input_bytes
    assert seen[-1] == again.input_bytes


def test_a_shard_changed_on_disk_is_written_again(tmp_path, tokenizer, corpus):
    tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=200, num_workers=1)
    before = files_of(tmp_path / "ds")
    shard = tmp_path / "ds" / "shard-00002.npy"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1  # same size, other bytes
    shard.write_bytes(data)
    (tmp_path / "ds" / "shard-00003.docs.npy").unlink()
    seen = []
    written = tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=200, num_workers=1, on_progress=seen.append)
    assert files_of(tmp_path / "ds") == before
    assert written.reused_shards == written.shards - 2
    # Progress counts the two shards kept before the changed one as done, one call each.
    manifest = layout.read_manifest(tmp_path / "ds")
    assert seen[1] == sum(u.size for u in _units(tokenizer, corpus, manifest)[: manifest["shards"][2]["units"][0]])
    assert seen == sorted(seen) and seen[-1] == written.input_bytes


def test_a_resume_encodes_only_what_no_shard_or_part_on_disk_holds(tmp_path, tokenizer, corpus, monkeypatch):
    """Stopped inside a shard (at a point the run reports: its progress after a unit), the run leaves
    the finished shards and the parts of the unfinished one; the next run encodes every other unit
    once and no unit twice, and says it reused the rest."""
    from cs336_basics.datasets import writer

    class Stop(Exception):
        pass

    whole = tokenizer.encode_dataset(corpus, tmp_path / "whole", shard_size=200, num_workers=1)
    manifest = layout.read_manifest(tmp_path / "whole")
    units = _units(tokenizer, corpus, manifest)
    first, stop = next(e["units"] for e in manifest["shards"][1:] if e["units"][1] - e["units"][0] >= 3)
    last_done = first + 1  # inside the shard: its first two parts are on disk, not the shard

    def stop_after(done: int) -> None:
        if done == sum(u.size for u in units[: last_done + 1]):
            raise Stop

    with pytest.raises(Stop):
        tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=200, num_workers=1, on_progress=stop_after)
    assert not (tmp_path / "ds" / layout.MANIFEST).exists()
    encoded = []
    real = writer.encode_unit

    def counted(tok, unit, *args):
        encoded.append(unit)
        return real(tok, unit, *args)

    monkeypatch.setattr(writer, "encode_unit", counted)
    written = tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=200, num_workers=1)
    assert encoded == units[last_done + 1 :]
    assert written.reused_bytes == sum(u.size for u in units[: last_done + 1])
    assert written.reused_shards == manifest["shards"].index(next(e for e in manifest["shards"] if e["units"][0] == first))
    assert files_of(tmp_path / "ds") == files_of(tmp_path / "whole") and written.tokens == whole.tokens


def _units(tokenizer, corpus, manifest):
    from cs336_basics.corpora import sources

    return sources.plan_units(sources.resolve(corpus), piece_size=manifest["piece_size"],
                              special_tokens=tokenizer.special_tokens, pattern=tokenizer.pattern)


@pytest.mark.parametrize("change", ["tokenizer", "pattern", "input", "shard size"])
def test_other_settings_are_refused_unless_overwrite(tmp_path, tokenizer, change):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_txt(corpus / "a.txt", DOCS[:10])
    tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=200, num_workers=1)
    before = files_of(tmp_path / "ds")
    tok, shard_size = tokenizer, 200
    if change == "tokenizer":
        tok = Tokenizer(tokenizer.vocab, tokenizer.merges[:-1], [EOT])
        message = "the tokenizer changed"
    elif change == "pattern":
        tok = Tokenizer(tokenizer.vocab, tokenizer.merges, [EOT], pattern="cl100k")
        message = "the pattern changed ('gpt2', now 'cl100k')"
    elif change == "input":
        os.utime(corpus / "a.txt", ns=(0, 12345))
        message = f"input {corpus / 'a.txt'} changed (it was modified since)"
    else:
        shard_size = 100
        message = "the shard size changed (200, now 100)"
    with pytest.raises(ValueError, match=f"{tmp_path / 'ds'} was written with other settings: .*" + repr(message)[1:-1]
                       .replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        tok.encode_dataset(corpus, tmp_path / "ds", shard_size=shard_size, num_workers=1)
    assert files_of(tmp_path / "ds") == before
    tok.encode_dataset(corpus, tmp_path / "ds", shard_size=shard_size, num_workers=1, overwrite=True)
    assert read_dataset(tmp_path / "ds")[:2] == oracle(tok, corpus, tmp_path)


def test_a_newer_format_version_is_refused(tmp_path, tokenizer, corpus):
    tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=300, num_workers=1)
    path = tmp_path / "ds" / layout.MANIFEST
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "version": layout.FORMAT_VERSION + 1}))
    before = files_of(tmp_path / "ds")
    with pytest.raises(ValueError, match=f"{path}: dataset format version {layout.FORMAT_VERSION + 1}"):
        tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=300, num_workers=1)
    assert files_of(tmp_path / "ds") == before


def test_a_manifest_of_format_version_1_still_reads_and_its_resume_is_refused_naming_the_version(
    tmp_path, tokenizer, corpus
):
    """Version 2 moved a pipeline's added tokens and post-processor out of the pattern (see `layout`).
    A version-1 dataset reads as it did; resuming it is refused, naming the change, until overwritten."""
    from cs336_basics.datasets.loader import TokenDataset

    tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=300, num_workers=1)
    path = tmp_path / "ds" / layout.MANIFEST
    path.write_text(json.dumps({**json.loads(path.read_text()), "version": 1}))
    ids, starts, manifest = read_dataset(tmp_path / "ds")
    assert manifest["version"] == 1 and (ids, starts) == oracle(tokenizer, corpus, tmp_path)
    loaded = TokenDataset(tmp_path / "ds")
    assert loaded.read(0, len(loaded)).tolist() == ids
    loaded.verify()
    before = files_of(tmp_path / "ds")
    with pytest.raises(ValueError, match=rf"the format version changed \(1, now {layout.FORMAT_VERSION}\)"):
        tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=300, num_workers=1)
    assert files_of(tmp_path / "ds") == before
    tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=300, num_workers=1, overwrite=True)
    assert read_dataset(tmp_path / "ds")[2]["version"] == layout.FORMAT_VERSION


# --- faults ---------------------------------------------------------------------------------------------


def test_output_inside_an_input_folder_or_equal_to_an_input_is_refused(tmp_path, tokenizer):
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    write_txt(corpus / "sub" / "a.txt", DOCS[:5])
    before = files_of(corpus)
    for inputs, out, message in [
        (corpus, corpus, "is inside the input folder"),
        (corpus, corpus / "sub" / "ds", "is inside the input folder"),
        ([corpus / "sub" / "a.txt"], corpus / "sub" / "a.txt", "is a file, not a folder"),
        (corpus / "sub", corpus / "sub" / "a.txt", "is a file, not a folder"),
        ([corpus / "sub" / "a.txt"], corpus / "sub", "is inside the dataset folder"),
        ([corpus / "sub" / "a.txt"], corpus, "is inside the dataset folder"),
        (corpus, f"file://{corpus}/sub/ds", "is inside the input folder"),
        ([corpus / "sub" / "a.txt"], f"file://{corpus}", "is inside the dataset folder"),
    ]:
        with pytest.raises(ValueError, match=message):
            tokenizer.encode_dataset(inputs, out, num_workers=1)
        assert files_of(corpus) == before


def test_an_output_that_cannot_be_written_names_it(tmp_path, tokenizer, corpus, capsys):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match=f"cannot write the dataset folder {tmp_path / 'file' / 'ds'}"):
        tokenizer.encode_dataset(corpus, tmp_path / "file" / "ds", num_workers=1)
    tokenizer.save_pretrained(tmp_path / "tok")
    assert main(["encode", "--tokenizer", str(tmp_path / "tok"), str(corpus), "--out", str(tmp_path / "file" / "ds"),
                 "--quiet"]) == 1
    assert f"cannot write the dataset folder {tmp_path / 'file' / 'ds'}" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_refused(tmp_path, tokenizer, corpus):
    (tmp_path / "ro").mkdir(mode=0o500)
    with pytest.raises(OSError, match=f"cannot write the dataset folder {tmp_path / 'ro' / 'ds'}"):
        tokenizer.encode_dataset(corpus, tmp_path / "ro" / "ds", num_workers=1)


def test_a_folder_holding_other_files_is_refused(tmp_path, tokenizer, corpus):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.md").write_text("mine")
    with pytest.raises(ValueError, match="holds files that are not a dataset's"):
        tokenizer.encode_dataset(corpus, tmp_path / "home", num_workers=1)
    assert os.listdir(tmp_path / "home") == ["notes.md"]


class _FullDisk:
    """Files that take `budget` bytes in all, then fail as a full disk does."""

    def __init__(self, budget: int):
        self.budget = budget

    def __call__(self, fd: int):
        disk = self
        f = os.fdopen(fd, "wb")
        write = f.write

        class Limited:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                f.close()

            def write(self, data):
                if len(data) > disk.budget:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                disk.budget -= len(data)
                return write(data)

            def __getattr__(self, name):
                return getattr(f, name)

        return Limited()


@pytest.mark.parametrize("budget", [0, 700, 3000, 9000])
def test_a_full_disk_names_the_file_and_a_second_run_finishes(tmp_path, tokenizer, corpus, monkeypatch, budget):
    tokenizer.encode_dataset(corpus, tmp_path / "whole", shard_size=200, num_workers=1)
    with monkeypatch.context() as m:
        m.setattr(staged, "_open_temp", _FullDisk(budget))
        with pytest.raises(OSError, match=f"writing {tmp_path / 'ds'}/.*No space left on device"):
            tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=200, num_workers=1)
    assert not (tmp_path / "ds" / layout.MANIFEST).exists()
    assert not [p for p in (tmp_path / "ds").rglob("*.tmp")]
    written = tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=200, num_workers=1)
    assert files_of(tmp_path / "ds") == files_of(tmp_path / "whole")
    if budget == 0:
        assert written.reused_bytes == 0
    elif budget >= 3000:  # past the plan and a few parts
        assert written.reused_bytes > 0


@pytest.mark.parametrize("limit", [1500, 3000])
def test_a_file_size_limit_in_the_workers_names_the_file_and_a_second_run_finishes(tmp_path, tokenizer, corpus, limit):
    """The same with a real OS error, in worker processes: files may not grow past `limit` bytes
    (RLIMIT_FSIZE, SIGXFSZ ignored, so a write fails with EFBIG)."""
    import resource

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    tokenizer.save_pretrained(tmp_path / "tok")
    tokenizer.encode_dataset(corpus, tmp_path / "whole", shard_size=2048, num_workers=1)
    argv = [sys.executable, "-m", "cs336_basics.cli", "encode", "--tokenizer", str(tmp_path / "tok"), str(corpus),
            "--shard-size", "2K", "--workers", "2", "--quiet", "--out", str(tmp_path / "ds")]
    # No bytecode written under the limit: a cut-off .pyc would break every later start of Python.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run(argv, env=env, capture_output=True, text=True, preexec_fn=small_files, timeout=120,
                         check=False)
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith("bpe: [Errno 27] ") and str(tmp_path / "ds") in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "ds" / layout.MANIFEST).exists()
    assert main(argv[3:]) == 0
    assert files_of(tmp_path / "ds") == files_of(tmp_path / "whole")


def test_two_runs_on_one_directory_are_refused(tmp_path, tokenizer, corpus, capsys):
    (tmp_path / "ds").mkdir()
    with locked(tmp_path / "ds"):
        with pytest.raises(errors.DatasetBusy, match=f"{tmp_path / 'ds'}: another run is writing this dataset"):
            tokenizer.encode_dataset(corpus, tmp_path / "ds", num_workers=1)
        tokenizer.save_pretrained(tmp_path / "tok")
        assert main(["encode", "--tokenizer", str(tmp_path / "tok"), str(corpus), "--out", str(tmp_path / "ds"),
                     "--quiet"]) == 1
        assert "another run is writing this dataset" in capsys.readouterr().err
    assert not (tmp_path / "ds" / LOCK).exists()  # the holder removed it as it let go
    tokenizer.encode_dataset(corpus, tmp_path / "ds", num_workers=1)  # free again
    assert LOCK not in os.listdir(tmp_path / "ds")


def test_nothing_of_a_run_stays_after_it_ends(tmp_path, tokenizer, corpus):
    """Neither a plain run, nor one that reuses everything, nor one that is refused leaves its lock
    (or anything else but the dataset) behind."""
    expected = None
    for _ in range(2):
        written = tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=300, num_workers=2)
        names = sorted(os.listdir(tmp_path / "ds"))
        assert names == expected or expected is None
        expected = sorted([layout.MANIFEST] + [f"shard-{k:05d}{suffix}" for k in range(written.shards)
                                               for suffix in (".npy", ".docs.npy")])
        assert names == expected
    with pytest.raises(ValueError, match="other settings"):
        tokenizer.encode_dataset(corpus, tmp_path / "ds", shard_size=600, num_workers=1)
    assert sorted(os.listdir(tmp_path / "ds")) == expected


def test_a_lock_removed_by_an_ending_run_before_it_was_taken_is_taken_anew(tmp_path, monkeypatch):
    """Between a run's open of `.lock` and its flock, the run that held it may end and remove it: the
    file locked then is no longer the folder's, and a third run could lock a new one beside it. The
    run must lock the file that is at `.lock`."""
    from cs336_basics.datasets import shard_folder

    real_open, opened = os.open, []

    def open_then_the_holder_ends(path, *args):
        fd = real_open(path, *args)
        if not opened:  # the first time: the holder removes the file we opened, and a third run makes a new one
            os.unlink(path)
            real_open(path, os.O_RDWR | os.O_CREAT, 0o666)
        opened.append(fd)
        return fd

    monkeypatch.setattr(shard_folder.os, "open", open_then_the_holder_ends)
    with locked(tmp_path) as fd:
        assert len(opened) == 2
        assert os.path.samestat(os.fstat(fd), os.stat(tmp_path / LOCK))
    assert not (tmp_path / LOCK).exists()


# --- killed runs ---------------------------------------------------------------------------------------


def _spawn(args: list[str]) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.Popen([sys.executable, str(KILL_TARGET), *args], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.fixture(scope="module")
def kill_setup(tmp_path_factory, tokenizer, corpus):
    folder = tmp_path_factory.mktemp("kill")
    tokenizer.save_pretrained(folder / "tok")
    args = ["encode", "--tokenizer", str(folder / "tok"), str(corpus), "--shard-size", "150", "--workers", "2",
            "--quiet", "--out"]
    whole = folder / "whole"
    proc = _spawn(["0", *args, str(whole)])
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 0, err
    # Each process counts its own write events (the workers are forked after the count starts), so a
    # pause point is drawn up to the largest count of one process.
    events = max(int(line.split()[-1]) for line in err.splitlines() if line.startswith("kill_target: "))
    return {"args": args, "whole": files_of(whole), "events": events, "folder": folder}


def _kill_at(setup, out: Path, k: int, how: str) -> tuple[bool, str, int]:
    """Run the command, pausing at write event `k` (in whichever process reaches it first), and stop it
    there: SIGKILL of every process, SIGINT to every process (Ctrl-C), SIGKILL of a worker, or
    SIGKILL of the command alone (its workers finish their task beside the next run). Returns
    (whether some process paused there, stderr, the process group)."""
    import psutil

    proc = _spawn([str(k), *setup["args"], str(out)])
    paused = False
    try:
        for line in proc.stderr:
            if line.startswith("kill_target: paused at"):
                paused = True
                if how == "worker":
                    children = psutil.Process(proc.pid).children()
                    (children[0] if children else psutil.Process(proc.pid)).kill()
                elif how == "command":  # its workers run on, beside the next run
                    proc.kill()
                else:
                    os.killpg(proc.pid, signal.SIGKILL if how == "kill" else signal.SIGINT)
                release(proc)
                break
        if how == "command":  # its workers hold stderr open: do not wait for them to end
            proc.wait(timeout=60)
            proc.stderr.close()
            return paused, "", proc.pid
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return paused, err, proc.pid


def _wait_until_gone(group: int, seconds: float = 15) -> bool:
    """Whether every process of `group` ended within `seconds` (those left are then killed)."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("how", ["kill", "interrupt", "worker", "command"])
def test_killed_anywhere_then_run_again_gives_the_same_bytes(kill_setup, how):
    rng = random.Random(f"{how}-{os.environ.get('BPE_FUZZ_SEED', '0')}")
    points = sorted(rng.sample(range(1, kill_setup["events"] + 1), min(KILL_POINTS, kill_setup["events"])))
    stopped = 0
    for k in points:
        out = kill_setup["folder"] / f"{how}-{k}"
        paused, err, killed = _kill_at(kill_setup, out, k, how)
        stopped += paused
        if how == "interrupt" and paused:
            assert "run the same command again to finish" in err and "Traceback" not in err, f"event {k}: {err}"
        proc = _spawn(["0", *kill_setup["args"], str(out)])
        err = proc.communicate(timeout=120)[1]
        gone = _wait_until_gone(killed)
        assert gone, f"{how} at event {k}: the workers of the killed command are still running"
        assert proc.returncode == 0, f"{how} at event {k}: {err}"
        assert files_of(out) == kill_setup["whole"], f"{how} at write event {k} of {kill_setup['events']}"
    assert stopped, "no run was stopped: the kill points are past every process's last write"


def test_a_stale_lock_of_a_killed_run_neither_blocks_nor_survives_the_next(kill_setup):
    """SIGKILL of every process at the first write the run reports (its plan, after the lock is
    taken): the lock file stays, unheld; the next run takes it and removes it at its end."""
    out = kill_setup["folder"] / "stale-lock"
    paused, _, killed = _kill_at(kill_setup, out, 1, "kill")
    assert paused and _wait_until_gone(killed)
    assert (out / LOCK).exists() and not (out / layout.MANIFEST).exists()
    proc = _spawn(["0", *kill_setup["args"], str(out)])
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 0, err
    assert not (out / LOCK).exists() and files_of(out) == kill_setup["whole"]


# --- a URL (fsspec) ------------------------------------------------------------------------------------


def url_files(url: str) -> dict[str, bytes]:
    """Every file under a URL by its relative path, with its bytes."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/")
    return {p[len(root) + 1 :]: fs.cat_file(p) for p in sorted(fs.find(root))}


def test_a_dataset_written_to_a_url_equals_a_local_one(tmp_path, tokenizer, corpus):
    pytest.importorskip("fsspec")
    from concurrent.futures import ThreadPoolExecutor

    tokenizer.encode_dataset(corpus, tmp_path / "local", shard_size=200, num_workers=1)
    local = {name: data for name, data in files_of(tmp_path / "local").items()}
    url = f"memory://datasets/{tmp_path.name}"
    tokenizer.encode_dataset(corpus, url, shard_size=200, num_workers=1)
    assert url_files(url) == local
    with ThreadPoolExecutor(2) as pool:  # workers that see the same memory filesystem
        again = tokenizer.encode_dataset(corpus, url + "-threads", shard_size=200, executor=pool)
        assert url_files(url + "-threads") == local
        written = tokenizer.encode_dataset(corpus, url + "-threads", shard_size=200, executor=pool)
    assert written.reused_shards == again.shards


def test_a_url_dataset_resumes_and_rewrites_a_changed_shard(tmp_path, tokenizer, corpus, monkeypatch):
    fsspec = pytest.importorskip("fsspec")
    url = f"file://{tmp_path}/ds"  # fsspec's local filesystem: local worker processes see it too
    tokenizer.encode_dataset(corpus, tmp_path / "local", shard_size=200, num_workers=1)
    tokenizer.encode_dataset(corpus, url, shard_size=200, num_workers=2)
    assert files_of(tmp_path / "ds") == files_of(tmp_path / "local")
    fs, _ = fsspec.core.url_to_fs(url)
    fs.pipe_file(f"{tmp_path}/ds/shard-00001.npy", b"not a shard")
    written = tokenizer.encode_dataset(corpus, url, shard_size=200, num_workers=1)
    assert written.reused_shards == written.shards - 1
    assert files_of(tmp_path / "ds") == files_of(tmp_path / "local")
    with pytest.raises(ValueError, match=f"{url} was written with other settings: the shard size changed"):
        tokenizer.encode_dataset(corpus, url, shard_size=300, num_workers=1)
