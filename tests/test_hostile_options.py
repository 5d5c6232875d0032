"""Every number the command line takes, tried at 0, -1 and far too large; then names that collide and
files edited behind our back, for count tables, extension, SuperBPE and `encode --format`: SuperBPE's
transition at and past its edges, a tokenizer folder cut short or edited, a count table holding
another table's shard, and an output whose name a folder holds (or a folder's name a file), each
refused before any work in one line naming the path, with nothing written.

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
import regex

from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import build_parser, main
from cs336_basics.cli.common import UsageError
from cs336_basics.counts.table import read_counts
from cs336_basics.datasets.loader import TokenDataset
from cs336_basics.report import size_label
from tests.common import FIXTURES_PATH, GPT2_PATTERN

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
    return {"dir": d, "corpus": corpus, "tok": d / "tok", "ds": d / "ds", "counts": d / "counts"}


# The run of each numeric option: the command with minimal valid other arguments ({corpus}, {tok},
# {ds}: the module's files; {out}: an empty folder of the test's own), and `--option VALUE` added.
RUNS = {
    ("train", "--vocab-size"): ["train", "{corpus}", "--out", "{out}/tok", "--quiet"],
    ("train", "--workers"): ["train", "{corpus}", "--vocab-size", "280", "--out", "{out}/tok", "--quiet"],
    ("train", "--min-count"): ["train", "{corpus}", "--vocab-size", "280", "--out", "{out}/tok", "--quiet"],
    ("train", "--superword-from"): ["train", "{corpus}", "--vocab-size", "300", "--out", "{out}/tok", "--quiet"],
    ("train", "--superword-max-words"): ["train", "{corpus}", "--vocab-size", "300", "--superword-from", "280",
                                         "--out", "{out}/tok", "--quiet"],
    ("encode", "--shard-tokens"): ["encode", "{corpus}", "-t", "{tok}", "--format", "llmc", "--out", "{out}/p", "--quiet"],
    ("encode", "--shard-size"): ["encode", "{corpus}", "-t", "{tok}", "--out", "{out}/ds", "--quiet"],
    ("encode", "--workers"): ["encode", "{corpus}", "-t", "{tok}", "--out", "{out}/x.npy", "--quiet"],
    ("encode", "--dropout"): ["encode", "{corpus}", "-t", "{tok}", "--out", "{out}/x.npy", "--quiet"],
    ("encode", "--seed"): ["encode", "{corpus}", "-t", "{tok}", "--dropout", "0.1", "--out", "{out}/x.npy", "--quiet"],
    ("vocab", "--min-count"): ["vocab", "-t", "{tok}"],
    ("report", "--sample-bytes"): ["report", "-t", "{tok}", "-t", "{tok}", "{corpus}", "--out", "{out}/r.html", "--quiet"],
    ("report", "--min-count"): ["report", "-t", "{tok}", "-t", "{tok}", "{corpus}", "--out", "{out}/r.html", "--quiet"],
    ("serve", "--port"): None,  # a server: only its arguments are read (see test_serve_numbers_parse)
    ("serve", "--max-bytes"): None,
    ("dataset", "convert", "--shard-tokens"): ["dataset", "convert", "{ds}", "--format", "llmc", "--out", "{out}/p", "--quiet"],
    ("count", "--workers"): ["count", "{corpus}", "--out", "{out}/counts", "--quiet"],
    ("count", "--piece-size"): ["count", "{corpus}", "--out", "{out}/counts", "--quiet"],
    ("train", "--min-pretoken-count"): ["train", "{corpus}", "--vocab-size", "280", "--out", "{out}/tok", "--quiet"],
    ("train", "--max-memory"): ["train", "{corpus}", "--vocab-size", "280", "--out", "{out}/tok", "--quiet"],
    ("count", "--min-pretoken-count"): ["count", "{corpus}", "--out", "{out}/counts", "--quiet"],
    ("count", "--max-memory"): ["count", "{corpus}", "--out", "{out}/counts", "--quiet"],
}  # fmt: skip


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
    text = world["corpus"].read_text(encoding="utf-8")
    for doc in text.split(EOT):
        for pretoken in regex.findall(GPT2_PATTERN, doc):
            assert len(tokenizer.encode(pretoken)) == 1, pretoken


def _all_under_trained(out, world, stdout):
    """Trained as asked, and every one of the 23 merged tokens is under its 2**40 occurrences."""
    assert len(_loads_and_round_trips(out / "tok", world["corpus"]).vocab) == 280
    assert "under-trained        23 merged tokens with fewer than" in stdout, stdout


def _dataset_whole(out, world, stdout):
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
    page = (out / "r.html").read_text(encoding="utf-8")
    assert f"on all {size_label(world['corpus'].stat().st_size)} of corpus.txt" in page


def _superwords_of_any_length(out, world, stdout):
    # 0 is no limit, and so is a limit no token reaches: the tokenizer of no word limit.
    from cs336_basics.bpe import train_bpe

    expected = train_bpe(world["corpus"], 300, [EOT], superword_from=280, superword_max_words=0)
    tokenizer = _loads_and_round_trips(out / "tok", world["corpus"])
    assert (tokenizer.vocab, tokenizer.merges) == expected


def _encoded_plainly(out, world, stdout):
    """Dropout 0 is no dropout: the array `encode` gives."""
    tok = Tokenizer.from_pretrained(world["tok"])
    assert np.load(out / "x.npy").tolist() == tok.encode(world["corpus"].read_text(encoding="utf-8"))


def _dropped_out_and_whole(out, world, stdout):
    """Any seed of at least 0 is a seed: a valid segmentation that decodes to the text."""
    tok = Tokenizer.from_pretrained(world["tok"])
    text = world["corpus"].read_text(encoding="utf-8")
    ids = np.load(out / "x.npy").tolist()
    assert tok.decode(ids) == text and ids != tok.encode(text)


def _counted(out, world, stdout):
    assert read_counts(out / "counts").word_counts == read_counts(world["counts"]).word_counts


def _nothing_left_to_merge(out, world, stdout):
    """No pre-token is seen 2**40 times: all are dropped, and the tokenizer is the bytes and the special token."""
    tokenizer = _loads_and_round_trips(out / "tok", world["corpus"])
    assert tokenizer.merges == [] and len(tokenizer.vocab) == 257
    assert "seen fewer than" in stdout and "(0 merges)" in stdout, stdout


def _trained_within_the_limit(out, world, stdout):
    from cs336_basics.bpe import train_bpe

    tokenizer = _loads_and_round_trips(out / "tok", world["corpus"])
    assert (tokenizer.vocab, tokenizer.merges) == train_bpe(world["corpus"], 280, [EOT])
    assert stdout.startswith("estimated peak memory ")


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
        (("train", "--min-pretoken-count"), _nothing_left_to_merge),
        (("train", "--max-memory"), _trained_within_the_limit),
        (("count", "--min-pretoken-count"), _counted),  # the table keeps every count, and records N
        (("count", "--max-memory"), _counted),
    ]
    for size in ("large", "huge")
} | {("train", "--superword-max-words", size): _superwords_of_any_length for size in ("zero", "large", "huge")} \
  | {("encode", "--dropout", "zero"): _encoded_plainly} \
  | {("encode", "--seed", size): _dropped_out_and_whole for size in ("zero", "large", "huge")}


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


# --- SuperBPE's transition at its edges ---------------------------------------------------------------


def _one_refusal(capsys, argv, *words) -> str:
    code, out, err = run_bpe(capsys, argv)
    assert code in (1, 2), f"exit {code}: {err}{out}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe: ") and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], f"{word!r} is not named in: {lines[0]}"
    return lines[0]


@pytest.mark.parametrize("superword_from, specials, words", [
    ("0", [], ["--superword-from"]),
    ("-1", [], ["--superword-from"]),
    ("301", [], ["--superword-from", "301", "300"]),  # above --vocab-size
    (HUGE["int"], [], ["--superword-from", "300"]),
    ("256", [], ["--superword-from", "257"]),  # below the 256 bytes and <|endoftext|>
    ("257", ["<a>", "<b>"], ["--superword-from", "258"]),  # below the 256 bytes and two special tokens
])
def test_superword_from_outside_its_range_is_refused_naming_it(tmp_path, capsys, world, superword_from, specials,
                                                                 words):
    argv = ["train", world["corpus"], "--vocab-size", "300", "--superword-from", superword_from,
            "--out", tmp_path / "tok", "--quiet", *[a for s in specials for a in ("--special-token", s)]]
    _one_refusal(capsys, argv, *words)
    assert not (tmp_path / "tok").exists()


def test_superword_from_at_its_edges_trains(tmp_path, capsys, world):
    """At the smallest vocabulary SuperBPE learns only superwords; at --vocab-size only subwords: the
    merges of plain BPE (the pattern saved is SuperBPE's either way, and each tokenizer round-trips)."""
    text = world["corpus"].read_text(encoding="utf-8")
    for value in ("257", "300"):
        out = tmp_path / value
        code, _, err = run_bpe(capsys, ["train", world["corpus"], "--vocab-size", "300", "--superword-from", value,
                                        "--out", out, "--quiet"])
        assert code == 0, err
        tokenizer = Tokenizer.from_pretrained(out)
        assert len(tokenizer.vocab) == 300 and tokenizer.pattern == "superbpe"
        assert tokenizer.decode(tokenizer.encode(text)) == text
    plain = Tokenizer.from_pretrained(world["tok"])
    assert Tokenizer.from_pretrained(tmp_path / "300").merges == plain.merges
    assert any(b" " in token.strip() for token in Tokenizer.from_pretrained(tmp_path / "257").vocab.values())


def test_superword_from_below_the_tokenizer_extended_is_refused(tmp_path, capsys, world):
    argv = ["train", world["corpus"], "--vocab-size", "320", "--start-from", world["tok"], "--superword-from", "299",
            "--out", tmp_path / "tok", "--quiet"]
    _one_refusal(capsys, argv, "--superword-from", "300")
    assert not (tmp_path / "tok").exists()
    argv[argv.index("299")] = "300"
    assert run_bpe(capsys, argv)[0] == 0
    assert len(Tokenizer.from_pretrained(tmp_path / "tok").vocab) == 320


# --- a tokenizer folder edited or cut short, extended --------------------------------------------------


def _edit_vocab(folder: Path) -> None:
    """Rename one merged token in vocab.json (no key or id repeats): merges.txt's line names the old file."""
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    key = next(k for k, v in vocab.items() if v == 280)
    vocab[key + "Q"] = vocab.pop(key)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")


def _cut(path: Path, where: str) -> None:
    """Cut the file about halfway: after a line's newline, just before it (the line left whole, so
    only the missing newline tells), or inside the line's last token."""
    data = path.read_bytes()
    half = len(data) // 2
    end = data.index(b"\n", half)
    path.write_bytes(data[: {"at a line": end + 1, "before a newline": end, "inside a token": end - 1}[where]])


CORRUPTIONS = {
    "merges.txt cut inside a token": lambda f: _cut(f / "merges.txt", "inside a token"),
    "merges.txt cut before a newline": lambda f: _cut(f / "merges.txt", "before a newline"),
    "merges.txt cut at a line": lambda f: _cut(f / "merges.txt", "at a line"),
    "vocab.json edited": _edit_vocab,
    "tokenizer.json edited": lambda f: (f / "tokenizer.json").write_text(
        (f / "tokenizer.json").read_text(encoding="utf-8").replace('"version": "1.0"', '"version": "1.0" '),
        encoding="utf-8"),
}
# (corruption, with tokenizer.json beside) -> the file the refusal names
CORRUPT_CASES = [(name, with_json) for name in CORRUPTIONS for with_json in (True, False)
                 if not (name == "tokenizer.json edited" and not with_json)]
# Cut at a line, without tokenizer.json: nothing records how many merges there were (see the report).
CORRUPT_CASES.remove(("merges.txt cut at a line", False))


@pytest.mark.parametrize("name, with_json", CORRUPT_CASES,
                         ids=[f"{n}{'' if j else ', no tokenizer.json'}" for n, j in CORRUPT_CASES])
def test_start_from_a_corrupted_tokenizer_folder_is_refused(tmp_path, capsys, world, name, with_json):
    base = tmp_path / "base"
    shutil.copytree(world["tok"], base)
    if not with_json:
        (base / "tokenizer.json").unlink()
    CORRUPTIONS[name](base)
    before = {p: p.read_bytes() for p in files_under(base)}
    line = _one_refusal(capsys, ["train", world["corpus"], "--vocab-size", "320", "--start-from", base,
                                 "--out", tmp_path / "out", "--quiet"], str(base))
    assert "merges.txt" in line or "vocab.json" in line or "tokenizer.json" in line, line
    assert not (tmp_path / "out").exists()
    assert {p: p.read_bytes() for p in files_under(base)} == before
    # Encoding with it is refused alike.
    _one_refusal(capsys, ["encode", world["corpus"], "-t", base, "--out", tmp_path / "x.npy", "--quiet"], str(base))
    assert not (tmp_path / "x.npy").exists()


# --- count tables with a shard from elsewhere ----------------------------------------------------------


@pytest.fixture(scope="module")
def two_tables(world):
    """Two count tables of different text, each of one shard named shard-00000.parquet."""
    d = world["dir"] / "tables"
    d.mkdir()
    other = d / "other.txt"
    other.write_text(world["corpus"].read_text(encoding="utf-8")[1000:3000], encoding="utf-8")
    assert main(["count", str(other), "--out", str(d / "b"), "--quiet"]) == 0
    return world["counts"], d / "b", other


def test_a_shard_swapped_for_another_tables_is_refused_then_recounted(tmp_path, capsys, world, two_tables):
    a, b, _ = two_tables
    table = tmp_path / "a"
    shutil.copytree(a, table)
    shutil.copy(b / "shard-00000.parquet", table / "shard-00000.parquet")
    shard = str(table / "shard-00000.parquet")
    _one_refusal(capsys, ["train", "--counts", table, "--vocab-size", "280", "--out", tmp_path / "tok", "--quiet"], shard)
    assert not (tmp_path / "tok").exists()
    _one_refusal(capsys, ["count", "--add", table, b, "--out", tmp_path / "sum", "--quiet"], shard)
    assert not (tmp_path / "sum").exists()
    # Counting the corpus again into it recounts the shard that is not its own.
    code, out, err = run_bpe(capsys, ["count", world["corpus"], "--out", table, "--quiet"])
    assert code == 0 and "kept from an earlier run" not in out, err + out
    assert (table / "shard-00000.parquet").read_bytes() == (a / "shard-00000.parquet").read_bytes()


# --- outputs whose names are taken by the other kind -------------------------------------------------------


def _folder_at(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "keep.txt").write_text("the user's")


OUT_CASES = [
    # (name, argv with {out} the test's folder, what is put in the way, the path the refusal names)
    ("encode megatron: P.bin is a folder",
     ["encode", "{corpus}", "-t", "{tok}", "--format", "megatron", "--out", "{out}/p", "--quiet"], "p.bin"),
    ("encode megatron: P.idx is a folder",
     ["encode", "{corpus}", "-t", "{tok}", "--format", "megatron", "--out", "{out}/p", "--quiet"], "p.idx"),
    ("encode llmc: P_000000.bin is a folder",
     ["encode", "{corpus}", "-t", "{tok}", "--format", "llmc", "--out", "{out}/p", "--quiet"], "p_000000.bin"),
    ("encode llmc: P_000003.bin is a folder",
     ["encode", "{corpus}", "-t", "{tok}", "--format", "llmc", "--out", "{out}/p", "--quiet"], "p_000003.bin"),
    ("dataset convert megatron: P.bin is a folder",
     ["dataset", "convert", "{ds}", "--format", "megatron", "--out", "{out}/p", "--quiet"], "p.bin"),
    ("dataset convert llmc: P_000000.bin is a folder",
     ["dataset", "convert", "{ds}", "--format", "llmc", "--out", "{out}/p", "--quiet"], "p_000000.bin"),
    ("train: OUT/vocab.json is a folder", ["train", "{corpus}", "--vocab-size", "280", "--out", "{out}", "--quiet"],
     "vocab.json"),
    ("train: OUT/merge_log.tsv is a folder",
     ["train", "{corpus}", "--vocab-size", "280", "--out", "{out}", "--quiet"], "merge_log.tsv"),
    ("convert hf: OUT/tokenizer.json is a folder", ["convert", "-t", "{tok}", "--format", "hf", "--out", "{out}"],
     "tokenizer.json"),
    ("convert gpt2: OUT/merges.txt is a folder", ["convert", "-t", "{tok}", "--format", "gpt2", "--out", "{out}"],
     "merges.txt"),
    ("encode .npy: the array is a folder", ["encode", "{corpus}", "-t", "{tok}", "--out", "{out}/x.npy", "--quiet"],
     "x.npy"),
    ("report: the page is a folder", ["report", "-t", "{tok}", "-t", "{tok}", "--out", "{out}/r.html", "--quiet"],
     "r.html"),
    ("count: OUT/manifest.json is a folder", ["count", "{corpus}", "--out", "{out}", "--quiet"], "manifest.json"),
    ("count: OUT/shard-00000.parquet is a folder", ["count", "{corpus}", "--out", "{out}", "--quiet"],
     "shard-00000.parquet"),
    ("encode DIR: OUT/manifest.json is a folder", ["encode", "{corpus}", "-t", "{tok}", "--out", "{out}", "--quiet"],
     "manifest.json"),
    ("encode DIR: OUT/shard-00000.npy is a folder", ["encode", "{corpus}", "-t", "{tok}", "--out", "{out}",
                                                     "--quiet"], "shard-00000.npy"),
    ("convert tiktoken: the file is a folder", ["convert", "-t", "{tok}", "--format", "tiktoken", "--out", "{out}/t"],
     "t"),
]  # fmt: skip


@pytest.mark.parametrize("argv, taken", [c[1:] for c in OUT_CASES], ids=[c[0] for c in OUT_CASES])
def test_an_output_name_held_by_a_folder_is_refused_before_any_work(tmp_path, capsys, monkeypatch, world, argv,
                                                                     taken):
    monkeypatch.chdir(tmp_path)
    out = Path("out")  # relative, as typed: a message must name it so, never a temporary file
    _folder_at(out / taken)
    paths = {k: str(v) for k, v in world.items()} | {"out": str(out)}
    line = _one_refusal(capsys, [a.format(**paths) for a in argv], str(out / taken))
    assert ".tmp" not in line, line
    assert [p.relative_to(out) for p in files_under(out)] == [Path(taken) / "keep.txt"]
    assert sorted(p.name for p in out.iterdir()) == [taken], "a refused run left something beside its output"


FILE_CASES = [
    # (name, argv, where a regular file stands)
    ("train --out", ["train", "{corpus}", "--vocab-size", "280", "--out", "{out}/f", "--quiet"], "f"),
    ("count --out", ["count", "{corpus}", "--out", "{out}/f", "--quiet"], "f"),
    ("count --add --out", ["count", "--add", "{counts}", "{counts}", "--out", "{out}/f", "--quiet"], "f"),
    ("encode --out DIR", ["encode", "{corpus}", "-t", "{tok}", "--out", "{out}/f", "--quiet"], "f"),
    ("convert hf --out", ["convert", "-t", "{tok}", "--format", "hf", "--out", "{out}/f"], "f"),
    ("encode --format: the prefix's folder", ["encode", "{corpus}", "-t", "{tok}", "--format", "llmc",
                                              "--out", "{out}/f/p", "--quiet"], "f"),
    ("dataset convert: the prefix's folder", ["dataset", "convert", "{ds}", "--format", "megatron",
                                              "--out", "{out}/f/p", "--quiet"], "f"),
    ("encode --format: its unfinished run's folder", ["encode", "{corpus}", "-t", "{tok}", "--format", "megatron",
                                                      "--out", "{out}/p", "--quiet"], ".p.dataset"),
]  # fmt: skip


@pytest.mark.parametrize("argv, taken", [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_a_folder_name_held_by_a_file_is_refused(tmp_path, capsys, world, argv, taken):
    out = tmp_path / "out"
    out.mkdir()
    (out / taken).write_text("the user's")
    paths = {k: str(v) for k, v in world.items()} | {"out": str(out)}
    _one_refusal(capsys, [a.format(**paths) for a in argv], str(out / taken))
    assert (out / taken).read_text() == "the user's"
    assert sorted(p.name for p in out.iterdir()) == [taken]

