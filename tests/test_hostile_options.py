"""Every number the command line takes, tried at 0, -1 and far too large; then names that collide and
files edited behind our back, for count tables, extension, SuperBPE and `encode --format`.

The options are found by walking the real parser (`cli.build_parser`, as tests/test_cli_help.py
does), so a new option that takes a number or a size fails `test_every_numeric_option_has_a_case`
until it is given a run here. Each run is in-process (`cli.main`) and must end in one of two ways:
refused, with exit status 1 or 2, one line `bpe: ...` on stderr (no traceback) and no file written;
or accepted, when the value means something (a huge `--vocab-size` stops when pairs run out, a huge
size is just "all of it"), with the output complete and right."""

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import build_parser, main
from cs336_basics.cli.common import UsageError
from tests.common import FIXTURES_PATH

EOT = "<|endoftext|>"
# None: the value of the option's type, a whole number or a size (see `typed_value`).
VALUES = {"zero": "0", "negative": "-1", "large": None, "huge": None, "overflow": "1e400", "nan": "nan"}
LARGE = {"int": str(2**40), "size": "1T"}  # fits in 64 bits, but not in memory
HUGE = {"int": str(10**30), "size": "99999999999999999999G"}  # fits in no machine word


def numeric_options() -> list[tuple[tuple[str, ...], argparse.Action]]:
    """(the command's words, the option) for every option of `bpe` that reads a number or a size."""
    found = []

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))
            elif action.option_strings and action.type not in (None, str) and action.choices is None:
                found.append((path, action))

    walk(build_parser(), ())
    return found


def option_name(action: argparse.Action) -> str:
    return max(action.option_strings, key=len)


def run_bpe(capsys, argv: list[str]) -> tuple[int, str, str]:
    """Run `bpe` in-process; (exit status, stdout, stderr)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse's --help; anything else exiting is a finding too
        code = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if not p.is_dir()) if folder.exists() else []


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """A tiny corpus, a tokenizer of 300 tokens trained on it, a dataset directory and a count table of it."""
    d = tmp_path_factory.mktemp("world")
    text = (FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")[:4000]
    corpus = d / "corpus.txt"
    corpus.write_text(text[:2000] + EOT + text[2000:], encoding="utf-8")
    assert main(["train", str(corpus), "--vocab-size", "300", "--out", str(d / "tok"), "--quiet"]) == 0
    assert main(["encode", str(corpus), "-t", str(d / "tok"), "--out", str(d / "ds"), "--quiet"]) == 0
    assert main(["count", str(corpus), "--out", str(d / "counts"), "--quiet"]) == 0
    return {"dir": d, "corpus": corpus, "tok": d / "tok", "ds": d / "ds", "counts": d / "counts", "text": corpus}


# The run of each numeric option: the command with minimal valid other arguments ({corpus}, {tok},
# {ds}: the module's files; {out}: an empty folder of the test's own), and `--option VALUE` added.
RUNS = {
    ("train", "--vocab-size"): ["train", "{corpus}", "--out", "{out}/tok", "--quiet"],
    ("train", "--workers"): ["train", "{corpus}", "--vocab-size", "280", "--out", "{out}/tok", "--quiet"],
    ("train", "--min-count"): ["train", "{corpus}", "--vocab-size", "280", "--out", "{out}/tok", "--quiet"],
    ("train", "--superword-from"): ["train", "{corpus}", "--vocab-size", "300", "--out", "{out}/tok", "--quiet"],
    ("encode", "--shard-tokens"): ["encode", "{corpus}", "-t", "{tok}", "--format", "llmc", "--out", "{out}/p", "--quiet"],
    ("encode", "--shard-size"): ["encode", "{corpus}", "-t", "{tok}", "--out", "{out}/ds", "--quiet"],
    ("encode", "--workers"): ["encode", "{corpus}", "-t", "{tok}", "--out", "{out}/x.npy", "--quiet"],
    ("vocab", "--min-count"): ["vocab", "-t", "{tok}"],
    ("report", "--sample-bytes"): ["report", "-t", "{tok}", "-t", "{tok}", "{corpus}", "--out", "{out}/r.html", "--quiet"],
    ("report", "--min-count"): ["report", "-t", "{tok}", "-t", "{tok}", "{corpus}", "--out", "{out}/r.html", "--quiet"],
    ("serve", "--port"): None,  # a server: only its arguments are read (see test_serve_numbers_parse)
    ("serve", "--max-bytes"): None,
    ("dataset", "convert", "--shard-tokens"): ["dataset", "convert", "{ds}", "--format", "llmc", "--out", "{out}/p", "--quiet"],
    ("count", "--workers"): ["count", "{corpus}", "--out", "{out}/counts", "--quiet"],
    ("count", "--piece-size"): ["count", "{corpus}", "--out", "{out}/counts", "--quiet"],
}


def test_every_numeric_option_has_a_case():
    """A new option that takes a number is tried here too (add it to RUNS)."""
    found = {(*path, option_name(action)) for path, action in numeric_options()}
    assert found == set(RUNS), f"options without a run here: {found - set(RUNS)}; runs of no option: {set(RUNS) - found}"


def typed_value(action: argparse.Action, value_name: str) -> str:
    kind = "size" if getattr(action.type, "__name__", "") == "byte_size" else "int"
    return VALUES[value_name] or {"large": LARGE, "huge": HUGE}[value_name][kind]


def _loads_and_round_trips(folder: Path, corpus: Path) -> Tokenizer:
    tokenizer = Tokenizer.from_pretrained(folder)
    text = corpus.read_text(encoding="utf-8")
    assert tokenizer.decode(tokenizer.encode(text)) == text
    return tokenizer


# What an accepted value must have done: key (command..., option, value name) -> check(out folder, world, stdout).
def _all_pairs_merged(out, world, stdout):
    tokenizer = _loads_and_round_trips(out / "tok", world["corpus"])
    # Training stopped when no pair was left: every pre-token of the corpus is one token.
    import regex

    from tests.common import GPT2_PATTERN

    text = world["corpus"].read_text(encoding="utf-8")
    for doc in text.split(EOT):
        for pretoken in regex.findall(GPT2_PATTERN, doc):
            assert len(tokenizer.encode(pretoken)) == 1, pretoken


def _trained_280(out, world, stdout):
    assert len(_loads_and_round_trips(out / "tok", world["corpus"]).vocab) == 280


def _all_under_trained(out, world, stdout):
    _trained_280(out, world, stdout)
    assert "under-trained        23 merged tokens with fewer than" in stdout, stdout


def _dataset_whole(out, world, stdout):
    from cs336_basics.datasets.loader import TokenDataset

    ds = TokenDataset(out / "ds")
    ds.verify()
    tok = Tokenizer.from_pretrained(world["tok"])
    assert ds.read(0, len(ds)).tolist() == tok.encode(world["corpus"].read_text(encoding="utf-8"))
    assert ds.num_shards == 1


def _all_listed_under_trained(out, world, stdout):
    """Every token is listed, and every one but the special token is flagged: none occurs 2**40 times."""
    header, *rows = [line.split("\t") for line in stdout.splitlines()]
    assert header[0] == "id" and header[-1] == "under-trained" and len(rows) == 300
    assert [r[0] for r in rows if not r[-1]] == ["299"]


def _report_on_all_text(out, world, stdout):
    """The page measures the whole held-out file (not a cut sample of it)."""
    from cs336_basics.report import size_label

    page = (out / "r.html").read_text(encoding="utf-8")
    assert f"on all {size_label(world['corpus'].stat().st_size)} of corpus.txt" in page


def _counted(out, world, stdout):
    from cs336_basics.counts.table import read_counts

    assert read_counts(out / "counts").word_counts == read_counts(world["counts"]).word_counts


ACCEPTED = {
    (*key, size): check
    for key, check in [
        (("train", "--vocab-size"), _all_pairs_merged),
        (("train", "--min-count"), _all_under_trained),
        (("encode", "--shard-size"), _dataset_whole),
        (("vocab", "--min-count"), _all_listed_under_trained),
        (("report", "--sample-bytes"), _report_on_all_text),
        (("report", "--min-count"), _report_on_all_text),
        (("count", "--piece-size"), _counted),
    ]
    for size in ("large", "huge")
}


CASES = [(key, action, value_name) for key in RUNS if RUNS[key] is not None
         for path, action in numeric_options() if (*path, option_name(action)) == key
         for value_name in VALUES]


@pytest.mark.parametrize("key, action, value_name", CASES,
                         ids=[f"{' '.join(k)}={v}" for k, _, v in CASES])
def test_numeric_option_at_zero_negative_and_huge(tmp_path, capsys, world, key, action, value_name):
    value = typed_value(action, value_name)
    out = tmp_path / "out"
    out.mkdir()
    paths = {k: str(v) for k, v in world.items()} | {"out": str(out)}
    argv = [a.format(**paths) for a in RUNS[key]] + [option_name(action), value]
    before = {p: p.read_bytes() for p in files_under(world["dir"])}
    code, stdout, stderr = run_bpe(capsys, argv)
    assert "Traceback" not in stderr, stderr
    check = ACCEPTED.get((*key, value_name))
    if check is not None:
        assert code == 0, stderr
        check(out, world, stdout)
    else:
        assert code in (1, 2), f"exit {code} for {' '.join(argv)}: {stderr}{stdout}"
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("bpe: "), stderr
        assert option_name(action) in lines[0] or code == 1, lines[0]
        assert files_under(out) == [], f"a refused run wrote {files_under(out)}"
    assert {p: p.read_bytes() for p in files_under(world["dir"])} == before, "an input changed"


@pytest.mark.parametrize("option, value, accepted", [
    ("--port", "0", True), ("--port", "-1", False), ("--port", HUGE["int"], False), ("--port", "65536", False),
    ("--port", "1e400", False), ("--max-bytes", "0", False), ("--max-bytes", "-1", False),
    ("--max-bytes", HUGE["size"], True), ("--max-bytes", "nan", False),
])
def test_serve_numbers_parse(option, value, accepted):
    """`bpe serve` is a server: only whether its numbers are read or refused is tried here."""
    parse = lambda: build_parser().parse_args(["serve", "-t", "gpt2", option, value])  # noqa: E731
    if accepted:
        parse()
    else:
        with pytest.raises(UsageError, match=option):
            parse()
