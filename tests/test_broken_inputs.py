"""Broken corpora, files from strangers and signals: nothing is lost, and every error names the file.

Each case builds the damage itself (a truncated shard, a file that changes while it is read, JSON
nested 100,000 deep, a regex that backtracks for ever, SIGTERM at the moment of the final write...)
and asserts the outcome: an error that names the file (and where it could, the place), or the exact
result of the undamaged input; never an output in place of an input or left half-made. The second
half pins behaviour of the corpus readers and file formats that no test fixed before.
"""

import bz2
import gzip
import json
import lzma
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Executor, Future
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics import errors
from cs336_basics.bpe import Tokenizer, train_bpe
from cs336_basics.cli import main as bpe_main
from cs336_basics.corpora import executors, sources
from cs336_basics.formats import hf
from cs336_basics.text import patterns, timeouts
from cs336_basics.train.merge_log import read_merge_log, readable_token
from tests.kill_target import paused_at, release
from tests.test_sources import DOCS, EOT, TEXT, VOCAB, WRITERS, write_jsonl, write_parquet

ROOT = Path(__file__).resolve().parent.parent
KILL_TARGET = Path(__file__).resolve().parent / "kill_target.py"


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    vocab, merges = train_bpe_text(TEXT, VOCAB)
    return Tokenizer(vocab, merges, [EOT])


def train_bpe_text(text: str, vocab_size: int):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "corpus.txt"
        path.write_text(text, encoding="utf-8")
        return train_bpe(path, vocab_size, [EOT], num_workers=1)


def run_bpe(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = bpe_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe: "), f"stderr is not one 'bpe: ' line:\n{err}"
    return lines[0]


# --- 1. the output is never written in place of an input ---------------------------------------------


def test_encode_file_refuses_its_own_input_as_output(tmp_path, tokenizer):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    before = corpus.read_bytes()
    for output in [corpus, tmp_path / "." / "corpus.txt"]:
        with pytest.raises(ValueError, match=re.escape(str(corpus))):
            tokenizer.encode_file(corpus, output, num_workers=1)
    with pytest.raises(ValueError, match="is the input"):
        tokenizer.encode_file(tmp_path, corpus, num_workers=1)  # a folder holding it
    assert corpus.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt"]


def test_encode_files_refuses_an_empty_input_as_output(tmp_path, tokenizer):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="empty.txt"):
        tokenizer.encode_file(empty, empty, num_workers=1)
    assert empty.read_bytes() == b""


def test_refuse_output_among_inputs(tmp_path):
    (tmp_path / "data").mkdir()
    corpus = tmp_path / "data" / "a.txt"
    corpus.write_text("x")
    (tmp_path / "link.txt").symlink_to(corpus)
    os.link(corpus, tmp_path / "hard.txt")
    refuse = sources.refuse_output_among_inputs
    for output, words in [(corpus, "is the input"), (tmp_path / "link.txt", "is the input"),
                          (tmp_path / "hard.txt", "is the input"), (tmp_path / "data", "holds the input"),
                          (tmp_path, "holds the input")]:  # fmt: skip
        with pytest.raises(ValueError, match=words):
            refuse(output, sources.resolve(corpus))
    # Names that only share a prefix, new files beside the input, and URLs that differ are fine.
    for output in [tmp_path / "data" / "a.txt.npy", tmp_path / "dat", tmp_path / "data" / "a"]:
        refuse(output, sources.resolve(corpus))
    refuse(tmp_path / "out.npy", [str(corpus), sources.WorkUnit(str(corpus), "txt", None, 0, 1, 1, True)])
    with pytest.raises(ValueError, match="is the input"):
        refuse("memory://bucket/a.txt", ["memory://bucket/a.txt"])
    with pytest.raises(ValueError, match="holds the input"):
        refuse("memory://bucket", ["memory://bucket/a.txt"])
    refuse("memory://bucket/b.npy", ["memory://bucket/a.txt"])


def test_bpe_encode_refuses_to_write_over_its_input(tmp_path, capsys, tokenizer):
    tokenizer.save_pretrained(tmp_path / "tok")
    corpus = tmp_path / "corpus.npy"  # named as an array, but given as an input it is read as text
    corpus.write_text(TEXT, encoding="utf-8")
    code, out, err = run_bpe(capsys, ["encode", corpus, "--tokenizer", tmp_path / "tok", "--out", corpus, "--quiet"])
    assert code == 1 and out == ""
    assert str(corpus) in one_line(err)
    assert corpus.read_bytes() == TEXT.encode("utf-8")


def test_bpe_train_refuses_to_write_over_its_input(tmp_path, capsys):
    out = tmp_path / "tok"
    out.mkdir()
    corpus = out / "merges.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    code, _, err = run_bpe(capsys, ["train", corpus, "--vocab-size", VOCAB, "--out", out, "--quiet"])
    assert code == 1 and "merges.txt" in one_line(err)
    assert corpus.read_bytes() == TEXT.encode("utf-8")
    assert os.listdir(out) == ["merges.txt"]


def test_bpe_report_and_convert_refuse_to_write_over_their_inputs(tmp_path, capsys, tokenizer):
    tokenizer.save_pretrained(tmp_path / "tok")
    before = {p.name: p.read_bytes() for p in (tmp_path / "tok").iterdir()}
    held_out = tmp_path / "held_out.html"
    held_out.write_text("some held-out text\n")
    for argv, named in [
        (["report", "--tokenizer", tmp_path / "tok", held_out, "--out", held_out, "--quiet"], held_out),
        (["report", tmp_path / "tok", "--out", tmp_path / "tok" / "vocab.json", "--quiet"], "vocab.json"),
        (["convert", "--tokenizer", tmp_path / "tok", "--format", "hf", "--out", tmp_path / "tok"], "tok"),
        (["convert", tmp_path / "tok" / "tokenizer.json", "--to", "tiktoken", "--out", tmp_path / "tok" / "tokenizer.json"],
         "tokenizer.json"),
    ]:  # fmt: skip
        code, _, err = run_bpe(capsys, argv)
        assert code == 1 and str(named) in one_line(err), argv
    assert held_out.read_text() == "some held-out text\n"
    assert {p.name: p.read_bytes() for p in (tmp_path / "tok").iterdir()} == before


# --- 2. damaged compressed shards are named --------------------------------------------------------

COMPRESSORS = {
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zst": lambda data: __import__("zstandard").ZstdCompressor().compress(data),
}


def shard_folder(tmp_path: Path, bad_name: str, bad_data: bytes) -> Path:
    """A folder of good shards with one damaged one in the middle."""
    folder = tmp_path / "shards"
    folder.mkdir()
    WRITERS["corpus.txt"](folder / "a.txt", DOCS[:20])
    WRITERS["corpus.jsonl.gz"](folder / "c.jsonl.gz", DOCS[20:40])
    (folder / bad_name).write_bytes(bad_data)
    return folder


@pytest.mark.parametrize("kind", ["txt", "jsonl"])
@pytest.mark.parametrize("ext", list(COMPRESSORS))
def test_a_truncated_compressed_shard_is_named(tmp_path, capsys, tokenizer, ext, kind):
    text = "\n".join(json.dumps({"text": d}) for d in DOCS * 20) if kind == "jsonl" else EOT.join(DOCS * 20)
    whole = COMPRESSORS[ext](text.encode("utf-8"))
    folder = shard_folder(tmp_path, f"b.{kind}.{ext}", whole[: len(whole) * 2 // 3])
    bad = str(folder / f"b.{kind}.{ext}")
    with pytest.raises(ValueError, match=re.escape(bad) + ".*cut short or corrupt"):
        train_bpe(folder, VOCAB, [EOT], num_workers=1)
    with pytest.raises(ValueError, match=re.escape(bad)):
        tokenizer.encode_file(folder, tmp_path / "ids.npy", num_workers=2, piece_size=200)
    assert not (tmp_path / "ids.npy").exists()
    tokenizer.save_pretrained(tmp_path / "tok")
    code, _, err = run_bpe(capsys, ["encode", folder, "--tokenizer", tmp_path / "tok", "--out", tmp_path / "x.npy",
                                    "--quiet", "--workers", "1"])
    assert code == 1 and bad in one_line(err)
    # The control: the whole file reads as the text it holds.
    (folder / f"b.{kind}.{ext}").write_bytes(whole)
    train_bpe(folder, VOCAB, [EOT], num_workers=1)


@settings(max_examples=int(os.environ.get("BPE_FUZZ_EXAMPLES", 40)), deadline=None)
@given(ext=st.sampled_from(sorted(COMPRESSORS)), kind=st.sampled_from(["txt", "jsonl"]), cut=st.floats(0, 1),
       flip=st.booleans())  # fmt: skip
def test_any_cut_or_flipped_byte_in_a_compressed_file_is_named_or_harmless(tmp_path_factory, ext, kind, cut, flip):
    """Cut a compressed file anywhere, or flip one of its bytes: reading it either gives exactly the
    text it held (a flip the format cannot see) or raises an error naming the file, never less text."""
    docs = DOCS[:12]
    text = "\n".join(json.dumps({"text": d}) for d in docs) + "\n" if kind == "jsonl" else EOT.join(docs)
    if ext == "zst":  # with its checksum, as the zstd command writes it: without one, a flip can pass
        whole = __import__("zstandard").ZstdCompressor(write_checksum=True).compress(text.encode("utf-8"))
    else:
        whole = COMPRESSORS[ext](text.encode("utf-8"))
    at = min(int(cut * len(whole)), len(whole) - 1)
    damaged = bytearray(whole)
    if flip:
        damaged[at] ^= 0x5A
    else:
        del damaged[max(at, 1) :]
    path = tmp_path_factory.mktemp("cut") / f"corpus.{kind}.{ext}"
    path.write_bytes(bytes(damaged))
    units = sources.plan_units(sources.resolve(path), piece_size=1 << 20, special_tokens=[EOT])
    try:
        read = [t for unit in units for _, t, starts in sources.read_unit(unit, block_size=256) if t or starts]
    except ValueError as e:
        assert str(path) in str(e)
        return
    assert flip, "a cut file was read without an error"
    assert read == docs if kind == "jsonl" else "".join(read) == text


def test_damage_in_a_file_behind_a_url_is_named_by_its_url(tmp_path, tokenizer):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    whole = gzip.compress(TEXT.encode("utf-8"))
    with fs.open("/broken/a.txt.gz", "wb") as f:
        f.write(whole[:-20])
    with pytest.raises(ValueError, match="memory:///?broken/a.txt.gz: damaged gzip"):
        tokenizer.encode_file("memory://broken/", tmp_path / "ids.npy", num_workers=1)
    with fs.open("/broken/a.txt.gz", "wb") as f:
        f.write(whole)
    units = sources.plan_units(sources.resolve("memory://broken/"), piece_size=1 << 20)
    with fs.open("/broken/a.txt.gz", "wb") as f:
        f.write(whole + whole)
    with pytest.raises(ValueError, match="memory:///?broken/a.txt.gz: the file changed"):
        list(sources.read_unit(units[0]))
    fs.rm("/broken", recursive=True)
    assert not (tmp_path / "ids.npy").exists()


def test_a_gzip_shard_with_a_bad_checksum_is_named(tmp_path):
    data = bytearray(gzip.compress(TEXT.encode("utf-8")))
    data[-6] ^= 0xFF  # the CRC-32 in the trailer
    folder = shard_folder(tmp_path, "b.txt.gz", bytes(data))
    with pytest.raises(ValueError, match=re.escape(str(folder / "b.txt.gz")) + ".*CRC"):
        train_bpe(folder, VOCAB, [EOT], num_workers=1)


def test_a_zst_file_of_several_frames_reads_them_all(tmp_path, tokenizer):
    import zstandard

    data = TEXT.encode("utf-8")
    third = len(data) // 3
    compress = zstandard.ZstdCompressor().compress
    path = tmp_path / "corpus.txt.zst"  # as pzstd and concatenated downloads write it
    path.write_bytes(compress(data[:third]) + compress(data[third : 2 * third]) + compress(data[2 * third :]))
    tokenizer.encode_file(path, tmp_path / "ids.npy", num_workers=1)
    assert np.load(tmp_path / "ids.npy").tolist() == tokenizer.encode(TEXT)
    path.write_bytes(compress(data[:third]) + compress(data[third:])[:-5])
    with pytest.raises(ValueError, match="corpus.txt.zst.*inside a zstd frame"):
        tokenizer.encode_file(path, tmp_path / "ids.npy", num_workers=1)


def test_a_damaged_parquet_shard_is_named(tmp_path):
    write_parquet(tmp_path / "x.parquet", DOCS * 10, row_group_size=50)
    data = bytearray((tmp_path / "x.parquet").read_bytes())
    middle = len(data) // 2
    data[middle : middle + 200] = bytes(200)
    folder = shard_folder(tmp_path, "b.parquet", bytes(data))
    with pytest.raises(ValueError, match=re.escape(str(folder / "b.parquet"))):
        train_bpe(folder, VOCAB, [EOT], num_workers=1)


# --- 3. a file that changes between planning and reading ----------------------------------------


@pytest.mark.parametrize("name", ["corpus.txt", "corpus.jsonl", "corpus.txt.gz", "corpus.parquet"])
@pytest.mark.parametrize("change", ["grows", "shrinks"])
def test_a_file_that_changes_after_planning_is_refused(tmp_path, name, change):
    path = tmp_path / name
    WRITERS[name](path, DOCS)
    units = sources.plan_units(sources.resolve(path), piece_size=300, special_tokens=[EOT])
    data = path.read_bytes()
    path.write_bytes(data + data[-100:] if change == "grows" else data[:-100])
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*changed"):
        for unit in units:
            list(sources.read_unit(unit))


def test_a_file_that_shrinks_while_a_unit_is_read_is_named(tmp_path):
    for name in ["corpus.txt", "corpus.jsonl"]:
        path = tmp_path / name
        WRITERS[name](path, DOCS)
        (unit,) = sources.plan_units(sources.resolve(path), piece_size=1 << 20, special_tokens=[EOT])
        reader = sources.read_unit(unit, block_size=64)
        next(reader)
        path.write_bytes(path.read_bytes()[:200])
        with pytest.raises(ValueError, match=re.escape(str(path)) + ": the file ended at byte"):
            list(reader)


# --- 4. JSON nested deeper than Python's stack ------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_json_is_an_error_naming_the_file(tmp_path, tokenizer):
    path = tmp_path / "tokenizer.json"
    path.write_text(DEEP)
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*nested too deeply"):
        Tokenizer.from_pretrained(path)
    (tmp_path / "vocab.json").write_text(DEEP)
    (tmp_path / "merges.txt").write_text("")
    with pytest.raises(ValueError, match="vocab.json.*nested too deeply"):
        Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"text": "fine"}\n{"text": ' + DEEP + "}\n")
    with pytest.raises(ValueError, match=re.escape(str(corpus)) + ": line 2: JSON nested too deeply"):
        tokenizer.encode_file(corpus, tmp_path / "ids.npy", num_workers=1)


# --- 5. added tokens get Hugging Face's ids, or are refused ---------------------------------------


def _with_added(tokenizer: Tokenizer, added: list[tuple[str, int]]) -> str:
    document = json.loads(hf.tokenizer_json(tokenizer.vocab, tokenizer.merges, [EOT], "gpt2"))
    document["added_tokens"] += [
        {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": True} for c, i in added
    ]  # fmt: skip
    return json.dumps(document)


@pytest.mark.parametrize(
    "added, accepted",
    [
        ([("<s>", VOCAB), ("</s>", VOCAB + 1)], True),  # the next ids, as Llama 3's files have them
        ([("<s>", VOCAB + 5)], False),  # tokenizers gives it VOCAB
        ([("<s>", VOCAB), ("</s>", VOCAB + 3)], False),
        ([("</s>", VOCAB + 1), ("<s>", VOCAB)], False),  # in file order: </s> gets VOCAB
        ([("<s>", 7)], False),  # the id of a byte
    ],
)
def test_an_added_token_missing_from_the_model_gets_tokenizers_id_or_is_refused(tmp_path, tokenizer, added, accepted):
    tokenizers = pytest.importorskip("tokenizers")
    text = _with_added(tokenizer, added)
    theirs = tokenizers.Tokenizer.from_str(text)
    path = tmp_path / "tokenizer.json"
    path.write_text(text, encoding="utf-8")
    if not accepted:
        assert any(theirs.token_to_id(c) != i for c, i in added)
        with pytest.raises(ValueError, match=re.escape(str(path)) + ".*gives it id"):
            Tokenizer.from_pretrained(path)
        return
    ours = Tokenizer.from_pretrained(path)
    sample = "".join(f"{DOCS[k]}{c}" for k, (c, _) in enumerate(added * 3))
    assert ours.encode(sample) == theirs.encode(sample).ids


def test_special_tokens_outside_the_byte_table_survive_save_pretrained(tmp_path, tokenizer):
    tokenizers = pytest.importorskip("tokenizers")
    specials = ["<| end |>", EOT, "é!", "«中文»", " \n\t"]  # the first joins documents: it must stay first
    assert not {s.encode() for s in specials} - {EOT.encode()} & set(tokenizer.vocab.values())
    ours = Tokenizer(tokenizer.vocab, tokenizer.merges, specials)
    ours.save_pretrained(tmp_path)
    loaded = Tokenizer.from_pretrained(tmp_path)
    assert loaded.special_tokens == specials and loaded.vocab == ours.vocab
    text = "".join(f"{doc}{specials[i % len(specials)]}" for i, doc in enumerate(DOCS[:20]))
    assert loaded.encode(text) == ours.encode(text)
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(text).ids == ours.encode(text)


# --- 6. SIGTERM is Ctrl-C; a failed or killed `bpe train` leaves no empty folder ---------------------


def _spawn(args: list, cwd: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.Popen([sys.executable, *map(str, args)], cwd=cwd, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _signal_at(args: list, cwd: Path, sig: int, at: str) -> tuple[int, str]:
    """Run `bpe` paused at `at` (see tests/kill_target.py), send `sig` there, and return (exit
    status, stderr). The pause must be reached."""
    proc = _spawn([KILL_TARGET, at, *args], cwd)
    try:
        event, lines = paused_at(proc)
        assert event is not None, f"the run ended without pausing at {at}:\n{''.join(lines)}"
        proc.send_signal(sig)
        release(proc)
        err = "".join(lines) + proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def _signal_at_first_write(args: list, cwd: Path, sig: int) -> tuple[int, str]:
    """`_signal_at` its first fsync (a temporary file complete, not yet renamed)."""
    return _signal_at(args, cwd, sig, "1")


@pytest.fixture(scope="module")
def signal_setup(tmp_path_factory, tokenizer):
    d = tmp_path_factory.mktemp("signals")
    (d / "corpus.txt").write_text(TEXT * 20, encoding="utf-8")
    tokenizer.save_pretrained(d / "tok")
    return d


def test_sigterm_during_the_final_write_of_encode_cleans_up(signal_setup):
    d = signal_setup
    out = d / "encode"
    out.mkdir()
    (out / "ids.npy").write_bytes(b"old")
    code, err = _signal_at_first_write(["encode", d / "corpus.txt", "--tokenizer", d / "tok", "--out",
                                        out / "ids.npy", "--quiet", "--workers", "1"], d, signal.SIGTERM)
    assert code == 143, err
    assert err.strip().splitlines()[-1] == "bpe: terminated (SIGTERM); no output was written"
    assert os.listdir(out) == ["ids.npy"], "a temporary file was left behind"
    assert (out / "ids.npy").read_bytes() == b"old"


READ_UNIT = "cs336_basics.corpora.sources:read_unit"  # a piece of the corpus is read: in a worker, if any


@pytest.mark.slow
def test_sigterm_while_workers_encode_stops_them_and_cleans_up(signal_setup):
    """SIGTERM to the command while both its workers are held at their first read of the corpus
    (tests/kill_target.py announces it), so that the run cannot end before the signal."""
    psutil = pytest.importorskip("psutil")
    d = signal_setup
    out = d / "encode-workers"
    out.mkdir()
    big = d / "big.txt"
    big.write_text(TEXT * 400, encoding="utf-8")
    proc = _spawn([KILL_TARGET, f"1:{READ_UNIT}", "encode", big, "--tokenizer", d / "tok", "--out", out / "ids.npy",
                   "--quiet", "--workers", "2"], d)
    try:
        event, lines = paused_at(proc)
        assert event == "read_unit 1", "".join(lines)
        workers = psutil.Process(proc.pid).children()
        proc.send_signal(signal.SIGTERM)
        release(proc)
        err = "".join(lines) + proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "bpe: terminated (SIGTERM); no output was written"
    assert os.listdir(out) == [], "a temporary file or folder was left behind"
    assert len(workers) == 2
    psutil.wait_procs(workers, timeout=10)
    assert not [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE], "workers outlived the run"


def test_sigterm_as_the_command_exits_still_ends_it_with_143_and_its_line(signal_setup):
    """Once the command has returned, the process still joins threads and runs atexit: a SIGTERM
    there used to meet the default handler, ending it with -15 and no word."""
    d = signal_setup
    out = d / "encode-exit"
    out.mkdir()
    code, err = _signal_at(["encode", d / "corpus.txt", "--tokenizer", d / "tok", "--out", out / "ids.npy",
                            "--quiet", "--workers", "1"], d, signal.SIGTERM, "exit")
    assert code == 143, err
    assert err.strip().splitlines()[-1] == f"bpe: terminated (SIGTERM) after the output was complete: {out / 'ids.npy'}"
    assert np.load(out / "ids.npy").size > 0 and os.listdir(out) == ["ids.npy"]


@pytest.mark.slow
def test_a_killed_or_failed_train_leaves_no_empty_folder(signal_setup, tmp_path, capsys):
    d = signal_setup
    for sig in (signal.SIGTERM, signal.SIGINT):
        out = tmp_path / f"new-{sig.name}" / "tok"
        code, err = _signal_at_first_write(["train", d / "corpus.txt", "--vocab-size", VOCAB, "--out", out,
                                            "--quiet", "--workers", "1"], d, sig)
        assert code in (130, 143), err
        assert not out.parent.exists(), f"{sig.name} left {sorted(p.name for p in out.parent.rglob('*'))}"
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello world " * 1000 + b"\xff")
    code, _, err = run_bpe(capsys, ["train", bad, "--vocab-size", VOCAB, "--out", tmp_path / "a" / "b", "--quiet"])
    assert code == 1 and "bad.txt" in one_line(err)
    assert not (tmp_path / "a").exists()


def test_sigkill_before_the_final_write_of_train_leaves_no_folder(signal_setup, tmp_path):
    d = signal_setup
    out = tmp_path / "tok"
    proc = _spawn([KILL_TARGET, f"1:{READ_UNIT}", "train", d / "corpus.txt", "--vocab-size", VOCAB, "--out", out,
                   "--quiet", "--workers", "1"], d)
    try:
        event, lines = paused_at(proc)  # killed as it begins to read the corpus: well before the final write
        assert event == "read_unit 1", "".join(lines)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists(), f"SIGKILL while reading the corpus left {out}"


# --- 7. smaller ones ---------------------------------------------------------------------------------


def test_a_merge_log_that_is_not_utf8_names_the_file(tmp_path):
    path = tmp_path / "merge_log.tsv"
    path.write_bytes(b"rank\tid\tleft\tright\ttoken\tcount\ttokens\n\t\t\t\t\t\t10\n0\t256\t\xff\ta\t\xffa\t3\t7\n")
    with pytest.raises(ValueError, match=re.escape(str(path)) + ": not UTF-8 at byte"):
        read_merge_log(path)


def test_an_unknown_dtype_is_a_value_error(tmp_path, tokenizer):
    (tmp_path / "a.txt").write_text("hello")
    with pytest.raises(ValueError, match="'bogus' is not a NumPy dtype"):
        tokenizer.encode_file(tmp_path / "a.txt", tmp_path / "a.npy", dtype="bogus")
    assert os.listdir(tmp_path) == ["a.txt"]


def test_an_empty_token_is_refused_from_tokenizer_json_as_from_tiktoken(tmp_path, tokenizer):
    document = json.loads(hf.tokenizer_json(tokenizer.vocab, tokenizer.merges, [EOT], "gpt2"))
    document["model"]["vocab"][""] = max(tokenizer.vocab) + 1
    with pytest.raises(ValueError, match="empty token"):
        hf.parse_tokenizer_json(json.dumps(document).encode(), source="x.json")
    document = json.loads(hf.tokenizer_json(tokenizer.vocab, tokenizer.merges, [EOT], "gpt2"))
    document["added_tokens"][0]["content"] = ""
    with pytest.raises(ValueError, match="x.json: added token .* empty string"):
        hf.parse_tokenizer_json(json.dumps(document).encode(), source="x.json")
    (tmp_path / "e.tiktoken").write_text("".join(f"{__import__('base64').b64encode(bytes([b])).decode()} {b}\n"
                                                 for b in range(256)) + " 256\n")
    with pytest.raises(ValueError, match="e.tiktoken"):
        Tokenizer.from_pretrained(tmp_path / "e.tiktoken")


def test_decode_of_a_zero_dimensional_array_says_what_to_do(tokenizer):
    with pytest.raises(ValueError, match="0-d array"):
        tokenizer.decode(np.array(5))
    assert tokenizer.decode(np.array([104, 105])) == tokenizer.decode([104, 105])


# --- 8. a regex from a file is bounded -----------------------------------------------------------

CATASTROPHIC = r"(?:a|aa)+c|\s|."  # on a run of a's without a c, tries every way to cut the run


def _split_tokenizer_json(tokenizer: Tokenizer, regex_source: str) -> str:
    document = json.loads(hf.tokenizer_json(tokenizer.vocab, tokenizer.merges, [EOT], r"\p{L}+|\s+|."))
    document["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = regex_source
    return json.dumps(document)


@pytest.fixture
def short_timeout(monkeypatch):
    monkeypatch.setattr(timeouts, "TIMEOUT_SECONDS", 0.3)
    monkeypatch.setattr(timeouts, "TIMEOUT_SECONDS_PER_MB", 0.0)


@pytest.mark.slow
def test_a_catastrophic_regex_from_a_file_is_stopped(tmp_path, capsys, tokenizer, short_timeout):
    path = tmp_path / "tokenizer.json"
    path.write_text(_split_tokenizer_json(tokenizer, CATASTROPHIC), encoding="utf-8")
    hostile = Tokenizer.from_pretrained(path)
    assert hostile.pattern == CATASTROPHIC  # one Split alone reads as the custom regex it is
    assert hostile.decode(hostile.encode("aac a c")) == "aac a c"
    started = time.perf_counter()
    with pytest.raises(errors.PatternTimeout, match="backtracks catastrophically"):
        hostile.encode("a" * 60)
    assert time.perf_counter() - started < 5
    code, out, err = run_bpe(capsys, ["inspect", "a" * 60, "--tokenizer", path])
    assert code == 1 and out == ""
    assert f"the pattern of {path}" in one_line(err)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello " + "a" * 60)
    with pytest.raises(errors.PatternTimeout):
        train_bpe(corpus, 300, [], pattern=CATASTROPHIC, num_workers=1)
    with pytest.raises(errors.PatternTimeout):
        hostile.encode_file(corpus, tmp_path / "ids.npy", num_workers=1)
    assert not (tmp_path / "ids.npy").exists()


def test_the_named_patterns_run_without_a_time_limit(monkeypatch, tokenizer):
    monkeypatch.setattr(timeouts, "TIMEOUT_SECONDS", 1e-6)
    monkeypatch.setattr(timeouts, "TIMEOUT_SECONDS_PER_MB", 0.0)
    for name in ("gpt2", "cl100k", "o200k"):
        named = Tokenizer(tokenizer.vocab, tokenizer.merges, [EOT], pattern=name)
        assert named.decode(named.encode(TEXT)) == TEXT
    custom = Tokenizer(tokenizer.vocab, tokenizer.merges, [EOT], pattern=r"\p{L}+|\s+|.")
    with pytest.raises(errors.PatternTimeout):
        custom.encode(TEXT)


# --- behaviour no test pinned down before ----------------------------------------------------------


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.jsonl.gz", "corpus.jsonl.zst"])
def test_a_last_record_without_a_newline_is_read(tmp_path, tokenizer, name):
    data = "\n".join(json.dumps({"text": d}) for d in DOCS).encode("utf-8")  # no newline at the end
    suffix = name.rpartition(".")[2]
    (tmp_path / name).write_bytes(COMPRESSORS[suffix](data) if suffix in COMPRESSORS else data)
    for piece_size in (1 << 20, 150):
        tokenizer.encode_file(tmp_path / name, tmp_path / "ids.npy", num_workers=1, piece_size=piece_size)
        assert np.load(tmp_path / "ids.npy").tolist() == tokenizer.encode(TEXT)


def test_a_parquet_error_names_the_row_far_into_a_unit(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [f"row {i}" for i in range(30_000)]
    texts[25_123] = None
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"text": pa.array(texts, pa.string())}), path, row_group_size=4_000)
    for piece_size in (1 << 30, 20_000):  # one unit of 8 row groups, or several
        units = sources.plan_units(sources.resolve(path), piece_size=piece_size)
        assert len(units) > 1 or piece_size > 1 << 20
        with pytest.raises(ValueError, match=re.escape(str(path)) + ": row 25123: 'text' is null"):
            for unit in units:
                list(sources.read_unit(unit))


def test_a_corpus_folder_inside_a_dot_folder(tmp_path):
    folder = tmp_path / ".cache" / "corpus"
    (folder / ".hidden").mkdir(parents=True)
    (folder / "sub").mkdir()
    for name in ["a.txt", "sub/b.jsonl", ".hidden/c.txt", ".d.txt", "sub/.e.txt"]:
        (folder / name).write_text("x")
    assert [Path(s.path).relative_to(folder).as_posix() for s in sources.resolve(folder)] == ["a.txt", "sub/b.jsonl"]


@pytest.mark.parametrize("block_size", [1, 5, 16, 64])
def test_a_jsonl_record_longer_than_the_block_after_others(tmp_path, block_size):
    docs = ["a", "bb", "x" * 300, "c", "y" * 70, ""]
    path = tmp_path / "r.jsonl"
    write_jsonl(path, docs)
    (unit,) = sources.plan_units(sources.resolve(path), piece_size=1 << 20)
    triples = list(sources.read_unit(unit, block_size=block_size))
    assert [t for _, t, starts in triples if starts] == docs
    assert sum(n for n, _, _ in triples) == path.stat().st_size


def test_a_possessive_counted_repeat_pretokenizes_in_tokenizers_as_ours(tmp_path, tokenizer):
    tokenizers = pytest.importorskip("tokenizers")
    pattern = r"\p{N}{2}+|\p{N}|\p{L}+|\s+|[^\s\p{L}\p{N}]+"
    ours = Tokenizer(tokenizer.vocab, tokenizer.merges, [EOT], pattern=pattern)
    ours.save_pretrained(tmp_path)
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    text = "in 2019 and 12345 or 7, x99y 123456789!"
    pieces = [p for p, _ in theirs.pre_tokenizer.pre_tokenize_str(text)]
    assert [p.replace("Ġ", " ") for p in pieces] == patterns.get(pattern).pretokens(text)
    assert theirs.encode(text).ids == ours.encode(text)
    assert Tokenizer.from_pretrained(tmp_path).encode(text) == ours.encode(text)


def test_a_byte_level_pre_tokenizer_without_use_regex_reads_as_tokenizers_reads_it(tmp_path, tokenizer):
    tokenizers = pytest.importorskip("tokenizers")
    document = json.loads(hf.tokenizer_json(tokenizer.vocab, tokenizer.merges, [EOT], "gpt2"))
    del document["pre_tokenizer"]["use_regex"]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    loaded = Tokenizer.from_pretrained(path)
    assert loaded.pattern == "gpt2"
    theirs = tokenizers.Tokenizer.from_file(str(path))
    assert theirs.encode(TEXT).ids == loaded.encode(TEXT)


def test_re_exporting_a_pretrained_rank_file_gives_the_same_bytes(tmp_path):
    pytest.importorskip("tiktoken")
    from tests.common import tiktoken_file_bytes

    # The first 5,000 ranks of GPT-2's file are a rank file of their own (merges only use lower ranks).
    original = b"".join(tiktoken_file_bytes("r50k_base").splitlines(keepends=True)[:5000])
    (tmp_path / "r50k.tiktoken").write_bytes(original)
    Tokenizer.from_pretrained(tmp_path / "r50k.tiktoken").save_tiktoken(tmp_path / "again.tiktoken")
    assert (tmp_path / "again.tiktoken").read_bytes() == original


@pytest.mark.parametrize(
    "char, shown", [("\u2028", "\\u2028"), ("\u200b", "\\u200b"), ("\ufeff", "\\ufeff"), ("\u1680", "\\u1680"),
                    ("\u0085", "\\u0085"), ("\U000e0001", "\\U000e0001"), ("\x7f", "\\x7f"), ("é", "é")],
)  # fmt: skip
def test_the_readable_form_of_unprintable_characters(char, shown):
    assert readable_token(f"a{char}b".encode()) == f"a{shown}b"


@pytest.mark.parametrize("top, dtype", [(65_535, np.uint16), (65_536, np.uint32)])
def test_the_array_type_at_the_edge_of_uint16(tmp_path, top, dtype):
    vocab = {i: bytes([i]) for i in range(256)} | {i: b"%d" % i for i in range(256, top)}
    vocab[top] = EOT.encode()  # 65,536 or 65,537 tokens, the special token last
    assert len(vocab) == top + 1
    tok = Tokenizer(vocab, [], [EOT])
    (tmp_path / "a.txt").write_text(f"hi{EOT}hi", encoding="utf-8")
    tok.encode_file(tmp_path / "a.txt", tmp_path / "a.npy", num_workers=1)
    ids = np.load(tmp_path / "a.npy")
    assert ids.dtype == dtype
    assert ids.tolist() == [104, 105, top, 104, 105]


def test_a_unit_with_no_document_adds_no_separator(tmp_path, tokenizer):
    write_jsonl(tmp_path / "a.jsonl", DOCS[:10])
    (tmp_path / "b.jsonl").write_text("\n\n   \n\n")  # blank lines: no record
    (tmp_path / "b2.jsonl.gz").write_bytes(gzip.compress(b"\n\n"))
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), tmp_path / "b3.parquet")
    write_jsonl(tmp_path / "c.jsonl", DOCS[10:20])
    for workers in (1, 2):
        tokenizer.encode_file(tmp_path, tmp_path / "ids.npy", num_workers=workers, piece_size=100)
        assert np.load(tmp_path / "ids.npy").tolist() == tokenizer.encode(EOT.join(DOCS[:20]))


def test_an_empty_txt_file_is_an_empty_document(tmp_path, tokenizer):
    WRITERS["corpus.txt"](tmp_path / "a.txt", DOCS[:5])
    (tmp_path / "b.txt").write_bytes(b"")
    WRITERS["corpus.txt"](tmp_path / "c.txt", DOCS[5:10])
    tokenizer.encode_file(tmp_path, tmp_path / "ids.npy", num_workers=1, piece_size=100)
    assert np.load(tmp_path / "ids.npy").tolist() == tokenizer.encode(EOT.join(DOCS[:5] + [""] + DOCS[5:10]))


class NewestFirstExecutor(Executor):
    """Runs tasks in a thread, always the most recently submitted first, so that results arrive out
    of order whenever more than one task is in flight (as they may from a cluster)."""

    def __init__(self):
        self.pending: list[tuple[Future, object, tuple]] = []
        self.order: list[int] = []
        self.submitted = 0
        self.cv = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def submit(self, fn, *args):
        future = Future()
        with self.cv:
            self.pending.append((future, self.submitted, (fn, args)))
            self.submitted += 1
            self.cv.notify()
        return future

    def _run(self):
        while True:
            with self.cv:
                while not self.pending and not self.closed:
                    self.cv.wait()
                if self.closed and not self.pending:
                    return
            time.sleep(0.005)  # let the caller submit what it has in flight
            with self.cv:
                future, number, (fn, args) = self.pending.pop()
            self.order.append(number)
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as e:
                    future.set_exception(e)

    def shutdown(self, wait=True, *, cancel_futures=False):
        with self.cv:
            self.closed = True
            self.cv.notify()


def test_results_that_arrive_out_of_order_are_written_in_order(tmp_path, tokenizer):
    for i in range(6):
        WRITERS["corpus.txt" if i % 2 else "corpus.jsonl"](tmp_path / f"s{i}.{'txt' if i % 2 else 'jsonl'}",
                                                           DOCS[i * 10 : (i + 1) * 10])
    runs = {
        "encode": lambda e: tokenizer.encode_file(tmp_path, tmp_path / "ids.npy", executor=e, piece_size=100),
        "train": lambda e: train_bpe(tmp_path, VOCAB, [EOT], executor=e, piece_size=100),
        "run_ordered": lambda e: list(executors.run_ordered(e, pow, [(2, k) for k in range(20)], max_in_flight=5)),
    }
    results = {}
    for name, run in runs.items():
        executor = NewestFirstExecutor()
        try:
            results[name] = run(executor)
        finally:
            executor.shutdown()
            executor.thread.join()
        assert executor.order != sorted(executor.order), f"{name}: the results came in order: nothing was tested"
    assert np.load(tmp_path / "ids.npy").tolist() == tokenizer.encode(TEXT)
    assert results["train"] == (tokenizer.vocab, tokenizer.merges)
    assert results["run_ordered"] == [2**k for k in range(20)]

