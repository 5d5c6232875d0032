"""`bpe stats --engine`: the corpus encoded by the chosen engine, with the same numbers from each,
the engine named for each tokenizer, and tiktoken refused with the engine's reason where it cannot
give our ids."""

import shutil

import pytest

from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import main
from cs336_basics.report import TextStats
from tests.adapters import run_train_bpe
from tests.common import FIXTURES_PATH

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(a tokenizer folder of ours, one with the cl100k pattern, a corpus folder of several fixtures)."""
    root = tmp_path_factory.mktemp("stats")
    vocab, merges = run_train_bpe(FIXTURES_PATH / "english.txt", 600, [EOT])
    Tokenizer(vocab, merges, [EOT]).save_pretrained(root / "ours")
    Tokenizer(vocab, merges, [EOT], pattern="cl100k").save_pretrained(root / "ours-cl100k")
    corpus = root / "corpus"
    corpus.mkdir()
    for name in ("english.txt", "german.txt", "chinese.txt", "code.txt", "emoji_chat.txt"):
        shutil.copy(FIXTURES_PATH / name, corpus / name)
    return root / "ours", root / "ours-cl100k", corpus


def stats(capsys, *argv) -> tuple[list[str], list[str]]:
    """(the lines of `bpe stats` but the engines', the engines' lines)."""
    assert main(["stats", *argv, "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    engines = [line for line in lines if line.startswith("  engine for ")]
    return [line for line in lines if line not in engines], engines


def test_python_and_tiktoken_engines_give_the_same_numbers(folders, capsys, monkeypatch):
    ours, ours_cl100k, corpus = folders
    argv = ["--tokenizer", str(ours), "--tokenizer", str(ours_cl100k), str(corpus)]
    by_python, named = stats(capsys, *argv, "--engine", "python")
    assert named == [f"  engine for ours ({ours}): python (asked for)",
                     f"  engine for ours-cl100k ({ours_cl100k}): python (asked for)"]
    # The tiktoken run must not fall back to ours: our BPE is out of reach while it runs.
    def refuse(*args, **kwargs):
        raise AssertionError("the Python engine ran")

    monkeypatch.setattr(Tokenizer, "encode_packed", refuse)
    monkeypatch.setattr(Tokenizer, "encode", refuse)
    by_tiktoken, named = stats(capsys, *argv, "--engine", "tiktoken")
    assert named == [f"  engine for ours ({ours}): tiktoken (asked for)",
                     f"  engine for ours-cl100k ({ours_cl100k}): tiktoken (asked for)"]
    assert by_tiktoken == by_python
    assert sum(line.endswith("characters") for line in by_python) == 6  # five files, then all of them
    monkeypatch.undo()
    # And they are the numbers of `encode`.
    tokenizer = Tokenizer.from_pretrained(ours)
    expected = TextStats()
    expected.add(tokenizer, (corpus / "german.txt").read_text(encoding="utf-8"))
    german = by_python.index(f"{corpus / 'german.txt'}: {expected.bytes:,} bytes, {expected.chars:,} characters")
    assert by_python[german + 2].split()[1] == f"{expected.tokens:,}"
    assert by_python[german + 2].split()[0] == "tokens"


def test_auto_names_the_engine_and_its_reason(folders, capsys):
    ours, _, corpus = folders
    _, named = stats(capsys, "--tokenizer", str(ours), str(corpus / "english.txt"))
    assert named == [f"  engine for ours ({ours}): python (the input is under 4 MB, where checking that tiktoken "
                     "gives our ids would cost more than it saves)"]


def test_tiktoken_is_refused_with_the_engine_s_reason(folders, tmp_path, capsys):
    ours, _, corpus = folders
    vocab, merges = Tokenizer.from_pretrained(ours).vocab, Tokenizer.from_pretrained(ours).merges
    custom = tmp_path / "custom"
    Tokenizer(vocab, merges, [EOT], pattern=r"\w+|\s+|[^\w\s]+").save_pretrained(custom)
    argv = ["stats", "--tokenizer", str(ours), "--tokenizer", str(custom), str(corpus), "--quiet"]
    assert main([*argv, "--engine", "tiktoken"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before any encoding
    err = captured.err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"bpe: custom ({custom}): engine 'tiktoken' cannot give this tokenizer's ids: a custom regex")
    # Under auto the same tokenizer is measured by ours, and says why.
    assert main([*argv, "--engine", "auto"]) == 0
    assert f"  engine for custom ({custom}): python (the input is under 4 MB" in capsys.readouterr().out
