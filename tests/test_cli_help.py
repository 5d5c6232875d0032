"""Every help string of `bpe` is true: each default a help states is the parser's default (or, where
the parser leaves it to the library, the library's), every command's --help is written without
error, hidden aliases stay hidden, and every size option reads sizes through one parser.

The commands are found by walking the real parser (`cli.build_parser`), so a new command or option
is checked without being listed here."""

import argparse
import inspect
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cs336_basics.bpe import PARALLEL_MIN_BYTES, train_bpe_from_iterator
from cs336_basics.cli import build_parser, main
from cs336_basics.cli.common import DEFAULT_SPECIAL, byte_size
from cs336_basics.cli.train import bundled_corpus
from cs336_basics.counts import writer as count_writer
from cs336_basics.datasets import writer as dataset_writer
from cs336_basics.encode.token_arrays import choose_dtype
from cs336_basics.formats import llmc
from cs336_basics.report import default_min_count
from cs336_basics.train.trainer import superword_options


def commands(parser: argparse.ArgumentParser | None = None, path: tuple[str, ...] = ()):
    """(the words that name it, its parser) of `bpe` and of every command and subcommand under it."""
    parser = parser or build_parser()
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


COMMANDS = list(commands())
ARGUMENTS = [(path, action) for path, parser in COMMANDS for action in parser._actions
             if action.help not in (None, argparse.SUPPRESS) and not isinstance(action, argparse._SubParsersAction)]
OPTIONS = [(path, action) for path, action in ARGUMENTS if action.option_strings]


def name(path: tuple[str, ...], action: argparse.Action) -> str:
    """`bpe COMMAND --option` (its longest name), or `bpe COMMAND METAVAR` for a positional argument."""
    last = max(action.option_strings, key=len) if action.option_strings else action.metavar or action.dest
    return " ".join(("bpe", *path, last))


def rendered_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help of `action` as --help shows it (%% and %(default)s expanded), on one line."""
    params = {**vars(action), "prog": parser.prog}
    return " ".join((action.help % params).split())


# "(default X)", "(default: X, more words)", "(words; default: X)", or a choice named "CHOICE (default)".
STATED = re.compile(r"\((?:[^()]*?; )?default:? (?P<value>[^;()]*?)(?:[,;] [^()]*)?\)|(?P<choice>[\w.-]+) \(default\)")
# Words that mention a default without stating one ("by default it ends as the input does").
MENTIONS = re.compile(r"(?<!by )\bdefault\b")


def stated_default(help_text: str) -> str | None:
    """The default a help states, None if it states none; an error if it mentions one unreadably."""
    found = [m.group("value") or m.group("choice") for m in STATED.finditer(help_text)]
    assert len(found) == len(MENTIONS.findall(help_text)) <= 1, (
        f"state the default once, as '(default X)', '(default: X, ...)' or 'CHOICE (default)': {help_text!r}")
    return found[0] if found else None


def as_parsed(action: argparse.Action, text: str):
    """`text` read as the option would read it on the command line."""
    if action.type is None or action.type is str:
        return text
    return action.type(text.replace(",", "") if re.fullmatch(r"[\d,]+", text) else text)


# Options the parser leaves None and the library fills in: the value their help must state.
LIBRARY_DEFAULTS = {
    "--special-token": DEFAULT_SPECIAL,
    "--pattern": inspect.signature(train_bpe_from_iterator).parameters["pattern"].default,
    "bpe encode --shard-size": dataset_writer.DEFAULT_SHARD_SIZE,
    "bpe encode --shard-tokens": llmc.DEFAULT_SHARD_TOKENS,
}


def _workers(help_text: str) -> None:
    small = re.search(r"all cores, 1 for less than (\S+) of input", help_text)
    assert small and byte_size(small.group(1)) == PARALLEL_MIN_BYTES


def _piece_size(help_text: str) -> None:
    rule = re.search(r"the input over the workers, so one shard per worker, at least (\S+) and at most (\S+);", help_text)
    assert rule, help_text
    low, high = byte_size(rule.group(1)), byte_size(rule.group(2))
    for total, workers in [(100 << 20, 4), (1, 2), (10 << 30, 2), (3 << 20, 3)]:
        assert count_writer.default_piece_size(total, workers) == min(max(-(-total // workers), low), high)


def _min_count(help_text: str) -> None:
    rule = re.search(r"default: ([\d.]+)% of all tokens, or (\d+) if that is more", help_text)
    assert rule, help_text
    share, floor = float(rule.group(1)) / 100, int(rule.group(2))
    for total in (0, 10**6, 10**9, 123_456_789):
        assert default_min_count(total) == max(floor, int(np.ceil(total * share)))


def _dtype(help_text: str) -> None:
    assert "default: uint16 if the vocabulary's ids fit, else uint32" in help_text
    assert choose_dtype(65535) == np.uint16 and choose_dtype(65536) == np.uint32


def _bundled_corpus(help_text: str) -> None:
    assert "(default: a small corpus bundled with the package)" in help_text and bundled_corpus().is_file()


def _words_only(help_text: str) -> None:
    """A default that is a rule the command applies (see its `run_*`), not a value to compare."""


def _superword_pattern(help_text: str) -> None:
    assert superword_options(300, 400, [], None).pattern == stated_default(help_text) == "superbpe"


def _superword_max_words(help_text: str) -> None:
    assert superword_options(300, 400, [], None).max_words == int(stated_default(help_text)) == 4
    assert superword_options(300, 400, [], None, "superbpe-v1").max_words == 0 and "superbpe-v1: 0" in help_text


def _min_pretoken_count(help_text: str) -> None:
    """None in the parser, so that training from a count table takes the N it was counted with."""
    import inspect

    from cs336_basics.bpe import train_bpe
    from cs336_basics.counts.writer import count_corpus

    assert "(default 1: keep all;" in help_text
    assert inspect.signature(train_bpe).parameters["min_pretoken_count"].default == 1
    assert inspect.signature(count_corpus).parameters["min_pretoken_count"].default == 1


# Options the parser leaves None whose help states a rule in words: how each is checked.
DESCRIBED = {
    "--workers": _workers,
    "bpe count --piece-size": _piece_size,
    "--min-count": _min_count,
    "bpe encode --dtype": _dtype,
    "bpe serve --tokenizer": _words_only,
    "bpe train INPUT": _bundled_corpus,
    "bpe train --superword-pattern": _superword_pattern,
    "bpe train --superword-max-words": _superword_max_words,
    "--min-pretoken-count": _min_pretoken_count,
}


def _entry(table: dict, path: tuple[str, ...], action: argparse.Action):
    return table.get(name(path, action), table.get(name(path, action).split()[-1]))


@pytest.mark.parametrize("path, action", ARGUMENTS, ids=[name(p, a) for p, a in ARGUMENTS])
def test_a_stated_default_is_the_real_one(path, action):
    parser = dict(COMMANDS)[path]
    text = rendered_help(parser, action)
    stated = stated_default(text)
    if stated is None:
        return
    if action.default is not None:
        assert as_parsed(action, stated) == action.default, (
            f"{name(path, action)}: help says default {stated!r}, the parser's is {action.default!r}")
        return
    expected, check = _entry(LIBRARY_DEFAULTS, path, action), _entry(DESCRIBED, path, action)
    assert expected is not None or check is not None, (
        f"{name(path, action)}: help says default {stated!r} but the parser's is None; give the parser the "
        "default, or add the option to LIBRARY_DEFAULTS or DESCRIBED here with where the default lives")
    if expected is not None:
        assert as_parsed(action, stated) == expected, (
            f"{name(path, action)}: help says default {stated!r}, the library's is {expected!r}")
    else:
        check(text)


def test_the_default_reader_reads_each_form():
    assert stated_default("tokens (default 1000)") == "1000"
    assert stated_default("at most N (default 100,000,000, as llm.c)") == "100,000,000"
    assert stated_default("a token (repeat for more; default: <|endoftext|>)") == "<|endoftext|>"
    assert stated_default("gpt2 (default), cl100k, o200k") == "gpt2"
    assert stated_default("the port (default 8000; 0 takes a free one)") == "8000"
    assert stated_default("ends as the input does (by default it ends so)") is None
    with pytest.raises(AssertionError):
        stated_default("default is whatever")


def test_the_check_catches_a_planted_wrong_default(monkeypatch):
    path, action = next((p, a) for p, a in OPTIONS if name(p, a) == "bpe train --vocab-size")
    test_a_stated_default_is_the_real_one(path, action)
    monkeypatch.setattr(action, "help", action.help.replace("(default 1000)", "(default 2000)"))
    with pytest.raises(AssertionError, match="the parser's is 1000"):
        test_a_stated_default_is_the_real_one(path, action)
    path, action = next((p, a) for p, a in OPTIONS if name(p, a) == "bpe count --piece-size")
    monkeypatch.setattr(action, "help", action.help.replace("one shard per worker", "two shards per worker"))
    with pytest.raises(AssertionError):
        test_a_stated_default_is_the_real_one(path, action)


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(("bpe", *p)) for p, _ in COMMANDS])
def test_each_help_is_written(path):
    parser = dict(COMMANDS)[path]
    text = parser.format_help()
    assert text.startswith(f"usage: {parser.prog}")
    usage = parser.format_usage()
    for action in parser._actions:
        # A hidden alias appears nowhere; every other option in the usage line and in the list.
        for option in action.option_strings:
            if action.help is argparse.SUPPRESS:
                assert not re.search(rf"{option}\b", text), f"{parser.prog} --help shows the hidden {option}"
            else:
                assert re.search(rf"{option}\b", text.removeprefix(usage)), f"{parser.prog}: {option}"
        if action.option_strings and action.help is not argparse.SUPPRESS:
            assert re.search(rf"{action.option_strings[0]}\b", usage), f"{parser.prog}: {action.option_strings[0]}"


def test_the_old_spellings_stay_hidden():
    helps = {" ".join(path): parser.format_help() for path, parser in COMMANDS}
    assert not re.search(r"--to\b", helps["convert"]) and "--merge" not in helps["count"]
    for command in ("vocab", "convert", "report"):
        usage = dict(COMMANDS)[(command,)].format_usage()
        assert "-t DIR" in usage and "[-t DIR]" not in usage  # needed, though argparse cannot require it
        assert "DIR" not in usage.replace("-t DIR", ""), usage


def test_help_as_a_real_command():
    done = subprocess.run([sys.executable, "-m", "cs336_basics.cli", "count", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    assert "--add TABLE" in done.stdout and "--merge" not in done.stdout and "two shards" not in done.stdout


# --- sizes -------------------------------------------------------------------------------------------

SIZE_OPTIONS = {"bpe count --piece-size", "bpe encode --shard-size", "bpe report --sample-bytes", "bpe serve --max-bytes",
                "bpe train --max-memory", "bpe count --max-memory"}


def test_every_size_option_reads_sizes_alike():
    sized = {name(p, a) for p, a in OPTIONS if a.type is byte_size}
    assert sized == SIZE_OPTIONS
    # An option named for bytes or a size (other than a count of tokens) must read sizes.
    for path, action in OPTIONS:
        option = max(action.option_strings, key=len)
        if re.search(r"size|bytes", option) and option != "--vocab-size":
            assert action.type is byte_size, name(path, action)


@pytest.mark.parametrize("option", sorted(SIZE_OPTIONS))
@pytest.mark.parametrize("text, value", [("4096", 4096), ("64K", 64 << 10), ("256M", 256 << 20), ("1G", 1 << 30),
                                          ("1.5k", 1536), ("2MiB", 2 << 20), ("3mb", 3 << 20)])
def test_a_size_option_takes_each_spelling(option, text, value):
    _, command, flag = option.split()
    argv = {"count": ["count", "x", "--out", "o"], "encode": ["encode", "x", "-t", "t", "--out", "o"],
            "report": ["report", "-t", "t"], "serve": ["serve"], "train": ["train"]}[command]
    assert getattr(build_parser().parse_args([*argv, flag, text]), flag[2:].replace("-", "_")) == value


@given(st.integers(1, 1 << 20), st.sampled_from([("", 1), ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)]),
       st.sampled_from(["", "B", "iB"]), st.booleans())
def test_byte_size_reads_whole_numbers_with_units(number, unit, suffix, lower):
    letter, scale = unit
    text = f"{number}{letter}{suffix if letter else suffix[-1:]}"
    assert byte_size(text.lower() if lower else text) == number * scale


@pytest.mark.parametrize("text", ["0", "-1", "0K", "0.1", "-2G", "abc", "M", "", "1X", "inf", "nan", "1e400"])
def test_byte_size_refuses_what_is_not_a_positive_size(text):
    with pytest.raises(argparse.ArgumentTypeError, match="expected a size"):
        byte_size(text)


@pytest.mark.parametrize("value", ["0", "-1", "-2M", "lots"])
def test_a_bad_size_is_a_usage_error(value, tmp_path, capsys):
    assert main(["count", str(tmp_path), "--out", str(tmp_path / "c"), f"--piece-size={value}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bpe: argument --piece-size: expected a size"), err
