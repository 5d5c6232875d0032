"""The older spellings of `bpe` still work, hidden from --help, and do what the new ones do:
`bpe vocab DIR` (now `--tokenizer DIR`), `bpe convert SRC --to F` (now `--tokenizer SRC --format F`),
`bpe report DIR [TEXT ...] --tokenizer OTHER` (now `--tokenizer DIR --tokenizer OTHER [TEXT ...]`)
and `bpe count --merge` (now `--add`). Giving a thing both ways, or not at all, is a usage error
(status 2)."""

import json

import pytest

from cs336_basics.cli import build_parser, main
from cs336_basics.cli.report import report_sources
from tests.common import FIXTURES_PATH


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    assert main(["train", str(FIXTURES_PATH / "english.txt"), "--vocab-size", "300", "--out", str(out), "--quiet"]) == 0
    return out


def run(capsys, argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_vocab_takes_the_tokenizer_either_way(tok, capsys):
    outputs = set()
    for argv in (["vocab", tok], ["vocab", "--tokenizer", tok], ["vocab", "-t", tok],
                 ["vocab", "--min-count", "3", tok], ["vocab", "--min-count", "3", "-t", tok]):
        code, out, err = run(capsys, argv)
        assert code == 0 and err == "", argv
        outputs.add(out)
    assert len(outputs) == 1 and len(next(iter(outputs)).splitlines()) == 301


@pytest.mark.parametrize("fmt, files", [("tiktoken", None), ("hf", ["tokenizer.json", "vocab.json", "merges.txt"]),
                                        ("gpt2", ["vocab.json", "merges.txt"])])
def test_convert_old_and_new_spellings_write_the_same(tok, tmp_path, capsys, fmt, files):
    written = {}
    spellings = {"old": ["convert", tok, "--to", fmt], "new": ["convert", "--tokenizer", tok, "--format", fmt],
                 "mixed": ["convert", "--to", fmt, "-t", tok]}
    for spelling, argv in spellings.items():
        out = tmp_path / (f"{spelling}.tiktoken" if files is None else spelling)
        code, said, err = run(capsys, [*argv, "--out", out])
        assert code == 0 and said.startswith(f"wrote {out}"), err
        written[spelling] = out.read_bytes() if files is None else [(out / n).read_bytes() for n in files]
    assert written["old"] == written["new"] == written["mixed"]


def test_count_add_and_merge_add_up_alike(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text((FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")[:20_000], encoding="utf-8")
    assert main(["count", str(corpus), "--out", str(tmp_path / "t"), "--quiet"]) == 0
    tables = {}
    for option in ("--add", "--merge"):
        out = tmp_path / option.strip("-")
        assert main(["count", option, str(tmp_path / "t"), str(tmp_path / "t"), "--out", str(out)]) == 0
        assert f"added up 2 count tables into {out}" in capsys.readouterr().out
        manifest = json.loads((out / "manifest.json").read_text())
        tables[option] = (manifest["totals"], [(out / s["name"]).read_bytes() for s in manifest["shards"]])
    assert tables["--add"] == tables["--merge"]
    assert tables["--add"][0]["occurrences"] == 2 * json.loads((tmp_path / "t" / "manifest.json").read_text())[
        "totals"]["occurrences"]


def sources_of(argv):
    return report_sources(build_parser().parse_args(["report", *argv]))


def test_report_reads_the_tokenizer_the_new_way_and_the_old(tok, tmp_path):
    text, other = str(FIXTURES_PATH / "german.txt"), str(FIXTURES_PATH / "code.txt")
    t = str(tok)
    expected = (t, ["gpt2", "o200k_base"], [text, other])
    for argv in (
        ["--tokenizer", t, "--tokenizer", "gpt2", "-t", "o200k_base", text, other],  # new
        [text, other, "-t", t, "--tokenizer", "gpt2", "--tokenizer", "o200k_base"],
        [t, text, other, "--tokenizer", "gpt2", "--tokenizer", "o200k_base"],  # old: DIR, then the others
        ["--tokenizer", "gpt2", t, text, other, "--tokenizer", "o200k_base"],
    ):
        assert sources_of(argv) == expected, argv
    assert sources_of([t]) == (t, [], [])  # old, nothing else
    assert sources_of(["-t", t]) == (t, [], [])
    assert sources_of(["gpt2", text, "-t", t]) == ("gpt2", [t], [text])  # a pretrained name: the old DIR
    (tmp_path / "tokenizer.json").write_bytes((tok / "tokenizer.json").read_bytes())
    json_file = str(tmp_path / "tokenizer.json")
    assert sources_of([json_file, text, "-t", "gpt2"]) == (json_file, ["gpt2"], [text])


def test_report_old_and_new_spellings_write_the_same_page(tok, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    text = FIXTURES_PATH / "german.txt"
    pages = []
    for k, argv in enumerate([["report", tok, text, "--tokenizer", tok], ["report", "--tokenizer", tok, "-t", tok, text]]):
        out = tmp_path / f"{k}.html"
        code, said, err = run(capsys, [*argv, "--out", out, "--quiet", "--sample-bytes", "4K"])
        assert code == 0, err
        pages.append(out.read_text(encoding="utf-8"))
    assert pages[0] == pages[1]


@pytest.mark.parametrize("argv, message", [
    (["vocab"], "one of the arguments -t/--tokenizer is required"),
    (["vocab", "a", "--tokenizer", "b"], "argument -t/--tokenizer: not allowed with argument DIR"),
    (["convert", "--to", "hf", "--out", "x"], "one of the arguments -t/--tokenizer is required"),
    (["convert", "-t", "gpt2", "--out", "x"], "one of the arguments --format is required"),
    (["convert", "-t", "gpt2", "--to", "hf", "--format", "hf", "--out", "x"], "--format: not allowed with argument --to"),
    (["convert", "-t", "gpt2", "--to", "json", "--out", "x"], "argument --to: invalid choice: 'json'"),
    (["count", "--add", "a", "--merge", "b", "--out", "x"], "argument --merge: not allowed with argument --add"),
    (["report", "--out", "r.html"], "the following arguments are required: -t/--tokenizer"),
])  # fmt: skip
def test_a_thing_said_twice_or_not_at_all_is_a_usage_error(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, argv)
    assert code == 2 and out == ""
    assert err.startswith("bpe: ") and message in err and len(err.splitlines()) == 1, err
    assert not any(tmp_path.iterdir())
