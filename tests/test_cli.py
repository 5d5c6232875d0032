"""The `bpe` command and `Tokenizer.encode_file`: training to files, parallel encoding to token arrays
equal to one `encode`, decoding, inspecting, and one clear line for bad input."""

import json
import re
from collections import Counter

import numpy as np
import pytest
import regex

from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import main
from cs336_basics.cli.train import bundled_corpus
from cs336_basics.report import classify_token
from cs336_basics.train.reference import split_documents
from tests.common import FIXTURES_PATH, GPT2_PATTERN, gpt2_files
from tests.reference import reference_encode

EOT = "<|endoftext|>"
FIXTURES = ["english", "german", "chinese", "emoji_chat", "code"]


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    assert main(["train", str(FIXTURES_PATH / "english.txt"), "--vocab-size", "600", "--out", str(out), "--quiet"]) == 0
    return out


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bpe: "), err
    return err[0]


# --- train -----------------------------------------------------------------------------------------


def test_train_writes_files_that_load(trained_dir, capsys):
    tokenizer = Tokenizer.from_files(trained_dir / "vocab.json", trained_dir / "merges.txt", [EOT])
    assert len(tokenizer.vocab) == 600
    text = (FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")
    assert tokenizer.decode(tokenizer.encode(text)) == text


def check_train_summary(out: str, path, folder, vocab_size: int) -> None:
    """Check every number of `bpe train`'s summary against values computed here from the files."""
    text = path.read_bytes().decode("utf-8")
    tokenizer = Tokenizer.from_files(folder / "vocab.json", folder / "merges.txt", [EOT])
    pretokens = {p for d in split_documents(text, [EOT]) for p in regex.findall(GPT2_PATTERN, d)}
    assert len(text) < 1 << 20  # so the sample measured is the whole file
    assert f"trained on {path} ({len(path.read_bytes()):,} bytes, 1 worker(s), pattern gpt2)" in out
    assert f"({len(pretokens):,} distinct)" in out
    assert f"({len(tokenizer.merges):,} merges)" in out and len(tokenizer.merges) == vocab_size - 257
    assert (f"  compression          {len(text.encode()) / len(tokenizer.encode(text)):.2f} bytes per token on all "
            f"{len(text.encode()) / 1000:.1f} KB of {path}\n") in out
    assert re.search(r"peak memory +\d+ MB in this process", out)
    longest = re.search(r"longest tokens +(.*)", out).group(1)
    lengths = sorted((len(t) for t in tokenizer.vocab.values() if t != EOT.encode()), reverse=True)[:5]
    assert [int(n) for n in re.findall(r"\((\d+) B\)", longest)] == lengths
    assert f"({vocab_size:,} tokens)" in out.splitlines()[-1]


def test_train_without_input_uses_the_bundled_corpus(tmp_path, capsys):
    assert main(["train", "--vocab-size", "300", "--out", str(tmp_path), "--quiet"]) == 0
    check_train_summary(capsys.readouterr().out, bundled_corpus(), tmp_path, 300)
    assert json.loads((tmp_path / "vocab.json").read_text("utf-8"))[EOT] == 299


def test_train_summary_reports_phases_and_memory(tmp_path, capsys):
    path = FIXTURES_PATH / "german.txt"
    assert main(["train", str(path), "--vocab-size", "300", "--out", str(tmp_path), "--quiet", "--workers", "1"]) == 0
    check_train_summary(capsys.readouterr().out, path, tmp_path, 300)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "/no/such/file.txt"], "input file not found: /no/such/file.txt"),
        (["train", "--vocab-size", "100"], "vocab_size 100 is below the minimum 257"),
        (["train", "--special-token", ""], "special tokens must not be empty"),
    ],
)
def test_train_bad_input_is_one_line(tmp_path, capsys, argv, message):
    assert main([*argv, "--out", str(tmp_path / "out"), "--quiet"]) == 1
    assert message in one_error_line(capsys)
    assert not (tmp_path / "out" / "vocab.json").exists()


def test_train_unwritable_output_folder(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["train", "--out", str(blocker / "sub"), "--quiet"]) == 1
    assert "cannot write to the output folder" in one_error_line(capsys)


def test_bad_option_is_one_line_with_status_2(capsys):
    assert main(["train", "--vocab-size", "lots"]) == 2
    assert "expected a whole number" in one_error_line(capsys)


def test_a_killed_merge_worker_ends_train_with_one_line(tmp_path, capsys, monkeypatch):
    # The merge loop runs in shards past trainer.PARALLEL_MIN_WORDS distinct pre-tokens; lowered here so
    # that a small corpus takes that path. Each shard's process is killed as soon as it is started,
    # before it is given its words: the loop then finds it dead when it waits for its pair counts.
    from cs336_basics.train import merge, trainer

    killed = []

    class KilledShard(merge._RemoteShard):
        def start(self, *args):
            self.process.kill()
            self.process.wait()
            killed.append(self.process.pid)
            super().start(*args)

    monkeypatch.setattr(trainer, "PARALLEL_MIN_WORDS", 1)
    monkeypatch.setattr(merge, "_RemoteShard", KilledShard)
    out = tmp_path / "out"
    argv = ["train", str(FIXTURES_PATH / "english.txt"), "--vocab-size", "300", "--out", str(out), "--quiet",
            "--workers", "2"]
    assert main(argv) == 1
    line = one_error_line(capsys)
    assert len(killed) == 1
    assert f"bpe: a merge worker process ({killed[0]}) died (exit code -9; killed, or out of memory?)" in line
    assert "nothing was written" in line
    assert not out.exists()


# --- encode_file and bpe encode --------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("workers, piece_size", [(1, 1 << 22), (1, 64), (2, 500), (3, 97), (2, 1 << 22)])
def test_encode_file_equals_encode(tmp_path, trained_dir, name, workers, piece_size):
    tokenizer = Tokenizer.from_files(trained_dir / "vocab.json", trained_dir / "merges.txt", [EOT])
    path = FIXTURES_PATH / f"{name}.txt"
    out = tmp_path / "ids.npy"
    count = tokenizer.encode_file(path, out, num_workers=workers, piece_size=piece_size)
    ids = np.load(out, mmap_mode="r")
    expected = tokenizer.encode(path.read_bytes().decode("utf-8"))
    assert count == len(expected) and ids.dtype == np.uint16
    assert ids.tolist() == expected
    assert tokenizer.decode(ids) == path.read_bytes().decode("utf-8")


def test_encode_several_files_in_order(tmp_path, trained_dir, capsys):
    inputs = [str(FIXTURES_PATH / f"{name}.txt") for name in ("german", "english")]
    out = tmp_path / "all.npy"
    assert main(["encode", "--tokenizer", str(trained_dir), *inputs, "--out", str(out), "--workers", "2", "--quiet"]) == 0
    tokenizer = Tokenizer.from_files(trained_dir / "vocab.json", trained_dir / "merges.txt", [EOT])
    # A file boundary is a document boundary: files are joined with the first special token.
    texts = [open(p, encoding="utf-8", newline="").read() for p in inputs]
    expected = tokenizer.encode(EOT.join(texts))
    assert np.load(out).tolist() == expected
    total = sum(len(open(p, "rb").read()) for p in inputs)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"wrote {out}: {len(expected):,} tokens from {total:,} bytes with 2 worker(s)"
    joined = len(EOT.join(texts).encode())  # the text encoded: the files joined by the separator
    assert lines[1].startswith(f"  {joined / len(expected):.2f} bytes per token on all {joined / 1000:.1f} KB of "
                               f"{inputs[0]} and 1 more; ")


@pytest.mark.parametrize(
    "specials, unit",
    [
        (["<<x>>", "<x>>"], "a<<x>>b <<x>> c<x>>d  <<x>><<x>> ee<<x>>>x> "),
        (["[aa]", "]bb["], "xx[aa]bb[ [aa]bb[aa]bb[ yy "),
        (["<s> ", "\n<s>"], "a<s> b\n<s> c <s>  \n<s>\n<s> d"),
    ],
)
def test_encode_file_beside_overlapping_special_tokens(tmp_path, trained_dir, specials, unit):
    # Small pieces put cuts next to and inside special tokens that overlap each other; a cut may only
    # fall where it changes nothing.
    tokenizer = Tokenizer.from_files(trained_dir / "vocab.json", trained_dir / "merges.txt", specials)
    text = unit * 20
    path = tmp_path / "in.txt"
    path.write_text(text, encoding="utf-8")
    expected = reference_encode(text, tokenizer.vocab, tokenizer.merges, specials)
    for workers, piece_size in [(1, n) for n in range(1, 16)] + [(2, 5), (2, 6), (2, 13)]:
        tokenizer.encode_file(path, tmp_path / "ids.npy", num_workers=workers, piece_size=piece_size)
        assert np.load(tmp_path / "ids.npy").tolist() == expected, (workers, piece_size)


@pytest.mark.slow
def test_encode_gpt2_with_uint32(tmp_path):
    encoder_json, vocab_bpe = gpt2_files()
    tokenizer = Tokenizer.from_files(encoder_json, vocab_bpe, [EOT])
    out = tmp_path / "ids.npy"
    tokenizer.encode_file(FIXTURES_PATH / "english.txt", out, dtype="uint32", num_workers=2, piece_size=5000)
    ids = np.load(out)
    assert ids.dtype == np.uint32
    assert ids.tolist() == tokenizer.encode((FIXTURES_PATH / "english.txt").read_bytes().decode("utf-8"))


def test_decode_prints_the_text(tmp_path, trained_dir, capsys):
    out = tmp_path / "ids.npy"
    main(["encode", "--tokenizer", str(trained_dir), str(FIXTURES_PATH / "emoji_chat.txt"), "--out", str(out), "--quiet"])
    capsys.readouterr()
    assert main(["decode", "--tokenizer", str(trained_dir), str(out)]) == 0
    assert capsys.readouterr().out == (FIXTURES_PATH / "emoji_chat.txt").read_bytes().decode("utf-8")


def test_encode_missing_tokenizer(tmp_path, capsys):
    out = tmp_path / "ids.npy"
    assert main(["encode", "--tokenizer", str(tmp_path / "none"), str(FIXTURES_PATH / "english.txt"), "--out", str(out)]) == 1
    assert "tokenizer file not found" in one_error_line(capsys)
    assert not out.exists()


def test_encode_non_utf8_names_the_offset_and_leaves_nothing(tmp_path, trained_dir, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine text " * 1000 + b"\xc3\x28 broken")
    out = tmp_path / "ids.npy"
    argv = ["encode", "--tokenizer", str(trained_dir), str(bad), "--out", str(out), "--workers", "2", "--quiet"]
    assert main(argv) == 1
    assert "not valid UTF-8 at byte offset 10000" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == [bad]


@pytest.mark.slow
def test_encode_dtype_too_small(tmp_path, capsys):
    encoder_json, vocab_bpe = gpt2_files()
    folder = tmp_path / "gpt2"
    folder.mkdir()
    Tokenizer.from_files(encoder_json, vocab_bpe, [EOT]).save(folder / "vocab.json", folder / "merges.txt")
    out = tmp_path / "ids.npy"
    argv = ["encode", "--tokenizer", str(folder), str(FIXTURES_PATH / "german.txt"), "--out", str(out), "--dtype", "uint16"]
    # GPT-2's ids reach 50256, which fits uint16; so ask for a vocabulary past 65535 instead.
    assert main(argv + ["--quiet"]) == 0
    vocab = {i: bytes([i]) for i in range(256)} | {70_000: b"<big>"}
    big = Tokenizer(vocab, [])
    with pytest.raises(ValueError, match="cannot hold token id 70000"):
        big.encode_file(FIXTURES_PATH / "german.txt", tmp_path / "big.npy", dtype="uint16")
    assert not (tmp_path / "big.npy").exists()


# --- inspect and stats -----------------------------------------------------------------------------


def test_inspect_shows_pieces_plain_when_piped(trained_dir, capsys):
    assert main(["inspect", "--tokenizer", str(trained_dir), "Hello there<|endoftext|>"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[") and "[<|endoftext|>]" in lines[0] and "\x1b[" not in lines[0]
    assert lines[1].split()[-1] == "599"


def test_stats_reports_shares(trained_dir, capsys):
    path = FIXTURES_PATH / "code.txt"
    assert main(["stats", "--tokenizer", str(trained_dir), str(path), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    tokenizer = Tokenizer.from_files(trained_dir / "vocab.json", trained_dir / "merges.txt", [EOT])
    text = path.read_bytes().decode("utf-8")
    ids = tokenizer.encode(text)
    size = len(path.read_bytes())
    assert lines[0] == f"{path}: {size:,} bytes, {len(text):,} characters"
    values = {line.rsplit(None, 1)[0].strip(): line.rsplit(None, 1)[1] for line in lines[2:]}
    assert values["tokens"] == f"{len(ids):,}"
    assert values["bytes per token"] == f"{size / len(ids):.2f}"
    assert values["characters per token"] == f"{len(text) / len(ids):.2f}"
    kinds = Counter(classify_token(tokenizer.vocab[i]) for i in ids)
    shares = [float(v) for label, v in values.items() if label.startswith("%")]
    assert shares == [round(100 * kinds[k] / len(ids), 2) for k in ("word", "text", "partial", "crossing")]
    assert shares[0] > 0 and shares[1] > 0


@pytest.mark.parametrize(
    "token, kind",
    [(b" hello", "word"), (b"hello", "word"), (b"42", "text"), (b", ", "text"), (b"\xe4", "partial"),
     (b"\xb8\xad", "partial"), (b" \xe4", "crossing"), (b"\xad\xe6", "crossing")],
)
def test_classify_token(token, kind):
    assert classify_token(token) == kind


def test_ctrl_c_during_an_import_is_an_interruption(monkeypatch, capsys):
    # numpy turns a KeyboardInterrupt that arrives while its C extensions load into an ImportError;
    # that is still Ctrl-C (exit 130), not a missing dependency.
    from cs336_basics.cli import stats

    def interrupted_import(args, context):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ImportError("numpy._core.umath failed to import")

    def missing_module(args, context):
        raise ImportError("No module named 'numpy'")

    monkeypatch.setattr(stats, "run_vocab", interrupted_import)
    assert main(["vocab", "--tokenizer", "x"]) == 130
    assert "interrupted" in capsys.readouterr().err
    monkeypatch.setattr(stats, "run_vocab", missing_module)
    assert main(["vocab", "--tokenizer", "x"]) == 1
    assert "No module named 'numpy'" in capsys.readouterr().err
