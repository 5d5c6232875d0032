"""The `bpe` command with tokenizer directories, pretrained names and `bpe convert`."""

import json

import numpy as np
import pytest

from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import main
from tests.common import FIXTURES_PATH

EOT = "<|endoftext|>"


# tiktoken finds every rank file in a cache folder that tests/conftest.py fills: no network.
pytestmark = pytest.mark.usefixtures("tiktoken_cache")


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    args = ["train", str(FIXTURES_PATH / "english.txt"), "--vocab-size", "400", "--out", str(out), "--quiet",
            "--special-token", "<|doc|>", "--special-token", "<|sep|>"]
    assert main(args) == 0
    return out


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bpe: "), err
    return err[0]


def test_train_writes_a_directory_that_carries_its_special_tokens(trained_dir, capsys):
    assert (trained_dir / "tokenizer.json").is_file()
    capsys.readouterr()
    # no --special-token: the folder's own are used
    assert main(["inspect", "--tokenizer", str(trained_dir), "a<|doc|>b<|sep|>"]) == 0
    ids = capsys.readouterr().out.splitlines()[1].split()
    tok = Tokenizer.from_pretrained(trained_dir)
    assert [int(i) for i in ids] == tok.encode("a<|doc|>b<|sep|>") and tok.special_tokens == ["<|doc|>", "<|sep|>"]
    assert tok.encode("<|doc|>") == [398]


def test_encode_with_a_directory_uses_its_special_tokens(trained_dir, tmp_path, capsys):
    text = "one<|doc|>two<|sep|>three"
    (tmp_path / "in.txt").write_text(text, encoding="utf-8")
    assert main(["encode", "--tokenizer", str(trained_dir), str(tmp_path / "in.txt"), "--out", str(tmp_path / "a.npy"), "--quiet"]) == 0
    assert np.load(tmp_path / "a.npy").tolist() == Tokenizer.from_pretrained(trained_dir).encode(text)


@pytest.mark.slow
def test_inspect_with_cl100k_base_gives_tiktokens_ids(capsys):
    import tiktoken

    text = "Hello, GPT-4 tokenizer!<|endoftext|>"
    assert main(["inspect", "--tokenizer", "cl100k_base", text]) == 0
    ids = [int(i) for i in capsys.readouterr().out.splitlines()[1].split()]
    assert ids == tiktoken.get_encoding("cl100k_base").encode(text, allowed_special="all")


@pytest.mark.slow
def test_stats_with_o200k_base(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("Hello world. " * 50, encoding="utf-8")
    assert main(["stats", "--tokenizer", "o200k_base", str(tmp_path / "in.txt")]) == 0
    assert "bytes per token" in capsys.readouterr().out


@pytest.mark.slow
def test_convert_to_each_format_keeps_ids(trained_dir, tmp_path, capsys):
    text = (FIXTURES_PATH / "english.txt").read_text(encoding="utf-8")[:5000] + "<|doc|>"
    ours = Tokenizer.from_pretrained(trained_dir)
    assert main(["convert", "--tokenizer", str(trained_dir), "--format", "tiktoken", "--out", str(tmp_path / "t.tiktoken")]) == 0
    assert "<|doc|>=398" in capsys.readouterr().out
    back = Tokenizer.from_pretrained(tmp_path / "t.tiktoken", special_tokens={"<|doc|>": 398, "<|sep|>": 399})
    assert back.encode(text) == ours.encode(text)
    assert main(["convert", "-t", str(trained_dir / "tokenizer.json"), "--format", "hf", "--out", str(tmp_path / "hf")]) == 0
    assert Tokenizer.from_pretrained(tmp_path / "hf").encode(text) == ours.encode(text)
    assert main(["convert", "--tokenizer", "gpt2", "--format", "gpt2", "--out", str(tmp_path / "g")]) == 0
    vocab = json.loads((tmp_path / "g" / "vocab.json").read_text("utf-8"))
    assert vocab[EOT] == 50256 and len(vocab) == 50257


def test_convert_of_ids_that_are_not_ranks_fails_cleanly(tmp_path, capsys):
    from tokenizers import Tokenizer as HF, models, pre_tokenizers, trainers

    hf = HF(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    # a tiny alphabet puts bytes after merged tokens: ids that cannot be ranks
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=[EOT], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    hf.train([str(FIXTURES_PATH / "english.txt")], trainer)
    hf.save(str(tmp_path / "hf.json"))
    doc = json.loads((tmp_path / "hf.json").read_text("utf-8"))
    vocab = doc["model"]["vocab"]
    first = "".join(doc["model"]["merges"][0]) if isinstance(doc["model"]["merges"][0], list) else doc["model"]["merges"][0].replace(" ", "")
    second = "".join(doc["model"]["merges"][1]) if isinstance(doc["model"]["merges"][1], list) else doc["model"]["merges"][1].replace(" ", "")
    vocab[first], vocab[second] = vocab[second], vocab[first]
    (tmp_path / "hf.json").write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "x.tiktoken"
    assert main(["convert", "--tokenizer", str(tmp_path / "hf.json"), "--format", "tiktoken", "--out", str(out)]) == 1
    assert "do not follow the merge order" in one_error_line(capsys)
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["hf.json"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["inspect", "--tokenizer", "nowhere", "x"], "tokenizer file not found: nowhere"),
        (["inspect", "--tokenizer", "cl100k_base", "--special-token", "<s>", "x"], "has its own special tokens"),
    ],
)
def test_bad_tokenizer_arguments(args, message, capsys):
    assert main(args) == 1
    assert message in one_error_line(capsys)


def test_a_broken_tokenizer_json_is_one_line(trained_dir, tmp_path, capsys):
    (tmp_path / "tokenizer.json").write_bytes((trained_dir / "tokenizer.json").read_bytes()[:1000])
    assert main(["inspect", "--tokenizer", str(tmp_path), "x"]) == 1
    line = one_error_line(capsys)
    assert str(tmp_path / "tokenizer.json") in line and "malformed JSON" in line


def test_commands_use_the_directorys_pattern(tmp_path, capsys):
    """A folder saved with GPT-4's pattern cuts digits in threes on the command line too."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"20", 257: b"201", 258: b"2019"}
    merges = [(b"2", b"0"), (b"20", b"1"), (b"201", b"9")]
    Tokenizer(vocab, merges, ["<|endoftext|>"], pattern="cl100k").save_pretrained(tmp_path)
    assert main(["inspect", "--tokenizer", str(tmp_path), "2019"]) == 0
    pieces = capsys.readouterr().out.splitlines()[0]
    assert pieces == "[201][9]"  # GPT-2's pattern keeps 2019 whole: [2019]
