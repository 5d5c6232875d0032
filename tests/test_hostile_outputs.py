"""Outputs tried as a hostile or careless user would write them: nothing the user has is lost, and no
table is silently wrong. Sections:

- outputs never touch inputs: an input named like a shard of the output, an output folder inside
  an input folder;
- count tables that are not what they say: a pre-token on two rows of a shard, a shard listed
  twice, totals that are not the shards' sum, a count of 2^63;
- the shard folder on the command line: a refused run changes nothing and names the user's path,
  `--overwrite` replaces only a count table, a changed or missing shard is counted again;
- options that cannot work are refused before any work (a piece size below the floor, llm.c shards
  of more tokens than the header holds);
- temporaries that killed runs left beside an output are removed by the next run that succeeds.
"""

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer, train_bpe_from_counts
from cs336_basics.cli import main as bpe_main
from cs336_basics.counts import table
from cs336_basics.corpora import sources
from cs336_basics.counts import writer as count_writer
from cs336_basics.datasets import layout
from cs336_basics.datasets.shard_folder import locked
from cs336_basics.formats import llmc, megatron

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    vocab = {i: bytes([i]) for i in range(256)}
    merges = [(b"t", b"h"), (b"th", b"e"), (b" ", b"the"), (b"a", b"n"), (b"an", b"d")]
    for k, (a, b) in enumerate(merges):
        vocab[256 + k] = a + b
    vocab[len(vocab)] = EOT.encode()
    folder = tmp_path_factory.mktemp("tok")
    Tokenizer(vocab, merges, [EOT]).save_pretrained(folder)
    return folder


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(EOT.join(f"Story {i}: the fox and the hen ran {'far ' * (i % 7)}and slept.\n" for i in range(200)),
                    encoding="utf-8")
    return path


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones too), with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("bpe: ") and err.count("\n") == 1, err
    return err


# --- outputs never touch inputs ------------------------------------------------------------------------


@pytest.mark.parametrize("shard_tokens", [None, 100])
@pytest.mark.parametrize("link", ["same name", "hard link", "symlinked folder"])
def test_an_input_named_like_a_shard_of_the_llmc_output_is_refused_before_any_work(
        tmp_path, tokenizer_dir, capsys, shard_tokens, link):
    """One shard would delete `p_000001.bin` as a stale shard of an earlier write; with many, the
    second would replace it. Either way the input is the user's: refused, naming it, nothing written."""
    text = "the and the hen " * 200
    (tmp_path / "in").mkdir()
    data = tmp_path / "in" / "p_000001.bin"
    data.write_text(text, encoding="utf-8")
    given, prefix = data, tmp_path / "in" / "p"
    if link == "hard link":
        given = tmp_path / "mine.txt"
        os.link(data, given)
    elif link == "symlinked folder":
        (tmp_path / "out").symlink_to(tmp_path / "in")
        prefix = tmp_path / "out" / "p"
    before = files_of(tmp_path)
    options = ["--shard-tokens", str(shard_tokens)] if shard_tokens else []
    assert bpe_main(["encode", str(given), "--tokenizer", str(tokenizer_dir), "--format", "llmc",
                     "--out", str(prefix), "--quiet", *options]) == 1
    err = one_line(capsys)
    assert str(given) in err and "input" in err
    assert files_of(tmp_path) == before
    assert data.read_text(encoding="utf-8") == text


def test_dataset_convert_never_writes_over_its_own_dataset(tmp_path, tokenizer_dir, corpus, capsys):
    """The dataset's files are the inputs of `bpe dataset convert`: an output that would replace one
    (here a Megatron prefix whose `.bin` is a link to a shard) is refused."""
    ds = tmp_path / "ds"
    assert bpe_main(["encode", str(corpus), "--tokenizer", str(tokenizer_dir), "--out", str(ds), "--quiet"]) == 0
    (tmp_path / "m.bin").symlink_to(ds / "shard-00000.npy")
    before = files_of(ds)
    assert bpe_main(["dataset", "convert", str(ds), "--format", "megatron", "--out", str(tmp_path / "m"),
                     "--quiet"]) == 1
    assert "shard-00000.npy" in one_line(capsys)
    assert files_of(ds) == before


def test_a_count_tables_folder_inside_its_input_folder_is_not_read_as_input(tmp_path, corpus, capsys):
    (tmp_path / "notes").mkdir()
    data = tmp_path / "notes" / "a.txt"
    data.write_bytes(corpus.read_bytes())
    out = tmp_path / "notes" / "counts"
    args = ["count", str(tmp_path / "notes"), "--out", str(out), "--piece-size", "2000", "--quiet"]
    assert bpe_main(args) == 0
    first = files_of(out)
    assert bpe_main(args) == 0, capsys.readouterr().err  # its shards are not counted: the same table
    assert files_of(out) == first
    assert [i["path"] for i in table.read_manifest(out)["inputs"]] == [str(data)]
    # the Python API alike
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "a.txt").write_bytes(corpus.read_bytes())
    for _ in range(2):
        again = count_writer.count_corpus(tmp_path / "api", tmp_path / "api" / "counts", special_tokens=[EOT],
                                          piece_size=2000)
    assert again.reused_shards == again.shards
    assert table.read_table(tmp_path / "api" / "counts").word_counts == table.read_table(out).word_counts
    # an input named inside the output folder is refused: writing the folder could remove it
    (out / "mine.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds the input"):
        count_writer.count_corpus([out / "mine.txt"], out, special_tokens=[EOT])
    assert (out / "mine.txt").read_text() == "mine"


def test_a_tokenizers_folder_inside_its_training_folder_is_not_read_as_input(tmp_path, corpus):
    """Its merges.txt is a .txt: read as corpus, the second run would train on other text."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_bytes(corpus.read_bytes())
    args = ["train", str(tmp_path / "notes"), "--vocab-size", "300", "--out", str(tmp_path / "notes" / "tok"), "--quiet"]
    assert bpe_main(args) == 0
    first = (tmp_path / "notes" / "tok" / "merges.txt").read_bytes()
    assert bpe_main(args) == 0
    assert (tmp_path / "notes" / "tok" / "merges.txt").read_bytes() == first


segments = st.lists(st.sampled_from(["a", "b", "a.txt"]), min_size=1, max_size=3).map(lambda p: os.path.join(*p))


@settings(max_examples=100, deadline=None)
@given(files=st.lists(segments, min_size=1, max_size=6), outputs=st.lists(segments, min_size=1, max_size=3),
       given_inputs=st.lists(st.booleans(), min_size=6, max_size=6))
def test_outputs_among_inputs_agree_with_comparing_every_pair(tmp_path_factory, files, outputs, given_inputs):
    """Oracle: each output against each input, by real path and by inode (what the check did before
    it looked at each input once). Some files are symbolic or hard links to the first, and only
    some files are inputs, so an output may be an input under another name."""
    root = tmp_path_factory.mktemp("paths")
    made = []
    for k, name in enumerate(files):
        path = root / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if k % 3 == 1 and made:
                path.symlink_to(made[0])
            elif k % 3 == 2 and made:
                os.link(made[0], path)
            else:
                path.write_text("x")
        except OSError:  # a file where a folder would go, or the path taken already
            continue
        made.append(path)
    inputs = [path for path, given in zip(made, given_inputs) if given]
    outs = [root / o for o in outputs]

    def expected() -> str | None:
        for out in outs:
            real = os.path.realpath(out)
            pairs = [(os.path.realpath(i), i) for i in inputs]
            if any(r == real or (out.exists() and os.path.samefile(i, out)) for r, i in pairs):
                return "is the input"
            if any(r.startswith(real + os.sep) for r, _ in pairs):
                return "holds the input"
        return None

    want = expected()
    if want is None:
        sources.refuse_outputs_among_inputs(outs, inputs)
    else:
        with pytest.raises(ValueError, match=want):
            sources.refuse_outputs_among_inputs(outs, inputs)


# --- count tables that are not what they say ------------------------------------------------------------


def write_table(folder: Path, shards: list[list[tuple[bytes, int]]], *, edit=None) -> Path:
    """A count table whose shards hold these rows, in this order (duplicates kept, unsorted allowed);
    `edit(manifest)` changes the manifest before it is written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    entries = []
    for k, rows in enumerate(shards):
        words, counts = [w for w, _ in rows], [n for _, n in rows]
        t = pa.table({"pretoken": pa.array(words, pa.binary()), "count": pa.array(counts, pa.int64())})
        sink = pa.BufferOutputStream()
        pq.write_table(t, sink)
        data = sink.getvalue().to_pybytes()
        (folder / table.shard_name(k)).write_bytes(data)
        entries.append({**table.shard_record(table.shard_name(k), data, words, counts), "input_bytes": 10})
    head = {"format": table.FORMAT, "version": table.VERSION, "pattern": "gpt2", "special_tokens": [EOT], "inputs": []}
    manifest = json.loads(table.manifest_text(head, entries))
    if edit:
        edit(manifest)
    (folder / table.MANIFEST).write_text(json.dumps(manifest))
    return folder


@pytest.mark.parametrize("where", [0, 1])
def test_a_pretoken_on_two_rows_of_a_shard_counts_twice_wherever_the_shard_is(tmp_path, where):
    twice = [(b" the", 3), (b" fox", 1), (b" the", 4)]
    other = [(b" fox", 2), (b" hen", 5)]
    shards = [twice, other] if where == 0 else [other, twice]
    counts = table.read_table(write_table(tmp_path / "t", shards)).word_counts
    assert counts == {b" the": 7, b" fox": 3, b" hen": 5}


def test_a_shard_listed_twice_is_refused(tmp_path):
    def twice(manifest):
        manifest["shards"].append(dict(manifest["shards"][0]))
        manifest["totals"] = table.totals(manifest["shards"])  # totals that agree: the listing alone is wrong

    folder = write_table(tmp_path / "t", [[(b" the", 3)], [(b" fox", 2)]], edit=twice)
    with pytest.raises(ValueError, match=f"{folder / table.MANIFEST}: .*{table.shard_name(0)}.* twice"):
        table.read_table(folder)
    with pytest.raises(ValueError, match="twice"):
        train_bpe_from_counts(folder, 260)


@pytest.mark.parametrize("edit", ["shard left out", "totals", "entry"])
def test_a_manifest_whose_totals_are_not_its_shards_sum_is_refused(tmp_path, edit):
    def change(manifest):
        if edit == "shard left out":  # a present shard left out, the totals still counting it
            manifest["shards"].pop()
        elif edit == "totals":
            manifest["totals"]["occurrences"] += 1
        else:  # an entry that says other than its shard holds (and totals that follow it)
            manifest["shards"][0]["occurrences"] += 1
            manifest["totals"] = table.totals(manifest["shards"])

    folder = write_table(tmp_path / "t", [[(b" the", 3), (b" fox", 1)], [(b" fox", 2)], [(b" hen", 1)]], edit=change)
    with pytest.raises(ValueError, match=f"{folder}.*(totals|occurrences)"):
        table.read_table(folder)


def test_a_table_as_written_reads_with_its_totals_checked(tmp_path, corpus):
    folder = tmp_path / "t"
    count_writer.count_corpus([corpus], folder, special_tokens=[EOT], piece_size=2000)
    table.merge_tables([folder, folder], tmp_path / "sum")
    assert len(table.read_manifest(folder)["shards"]) > 2
    counts = table.read_table(folder).word_counts
    assert table.read_table(tmp_path / "sum").word_counts == {w: 2 * n for w, n in counts.items()}


def test_a_count_of_2_to_the_63_is_refused_in_every_source(tmp_path):
    big = 1 << 63
    path = tmp_path / "c.tsv"
    path.write_text(f" the\t{big - 1}\n the\t0\n fox\t{big}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"{path}, line 3: the count {big} does not fit in 64 bits"):
        table.read_counts(path)
    path.write_text(f" the\t{big - 1}\n", encoding="utf-8")
    assert table.read_counts(path).word_counts == {b" the": big - 1}
    with pytest.raises(ValueError, match="64 bits"):
        table.read_counts({b" fox": big})
    with pytest.raises(ValueError, match="64 bits"):
        table.shard_data([b" fox"], [big])
    # a Parquet shard written elsewhere may hold unsigned 64-bit counts
    import pyarrow as pa
    import pyarrow.parquet as pq

    shard = tmp_path / "u.parquet"
    pq.write_table(pa.table({"pretoken": pa.array([b" fox"]), "count": pa.array([big], pa.uint64())}), shard)
    with pytest.raises(ValueError, match=f"{shard}: .*{big}.*64 bits"):
        table.read_shard(shard)


# --- the shard folder on the command line ---------------------------------------------------------------


def test_a_refused_concurrent_count_changes_nothing_and_names_the_users_path(tmp_path, corpus, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["count", corpus.name, "--out", "t", "--piece-size", "2000", "--quiet"]
    assert bpe_main(args) == 0
    (tmp_path / "t" / ".shard-00000.parquet.a1b2c3d4.tmp").write_bytes(b"half a shard")
    with locked(tmp_path / "t"):
        before = files_of(tmp_path / "t")
        for extra in ([], ["--overwrite"]):
            assert bpe_main(args + extra) == 1
            err = one_line(capsys)
            assert "is writing" in err and err.startswith("bpe: t: "), err
            assert ".tmp" not in err and "/tmp" not in err, err
        assert files_of(tmp_path / "t") == before


def test_a_refused_concurrent_encode_format_names_the_users_prefix(tmp_path, tokenizer_dir, corpus, capsys,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".w.dataset").mkdir()
    with locked(tmp_path / ".w.dataset"):
        assert bpe_main(["encode", corpus.name, "--tokenizer", str(tokenizer_dir), "--format", "megatron",
                         "--out", "w", "--quiet"]) == 1
    err = one_line(capsys)
    assert err.startswith("bpe: w ") and "is writing" in err and ".dataset" not in err and ".tmp" not in err, err
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(("w", ".w"))] == [".w.dataset"]


@pytest.mark.parametrize("what", ["dataset", "tokenizer", "user files"])
def test_count_overwrite_replaces_only_a_count_table(tmp_path, tokenizer_dir, corpus, capsys, what):
    folder = tmp_path / "f"
    if what == "dataset":
        assert bpe_main(["encode", str(corpus), "--tokenizer", str(tokenizer_dir), "--out", str(folder), "--quiet"]) == 0
    elif what == "tokenizer":
        Tokenizer.from_pretrained(tokenizer_dir).save_pretrained(folder)
    else:
        folder.mkdir()
        (folder / "notes.txt").write_text("mine")
    before = files_of(folder)
    assert bpe_main(["count", str(corpus), "--out", str(folder), "--overwrite", "--quiet"]) == 1
    err = one_line(capsys)
    named = {"dataset": layout.FORMAT, "tokenizer": "tokenizer.json", "user files": "notes.txt"}[what]
    assert str(folder) in err and named in err, err
    assert files_of(folder) == before


@pytest.mark.parametrize("damage", ["one byte changed", "truncated", "deleted"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_damaged_shard_of_a_finished_table_is_counted_again(tmp_path, corpus, capsys, damage, overwrite):
    clean = tmp_path / "clean"
    args = ["count", str(corpus), "--piece-size", "2000", "--quiet"]
    assert bpe_main(args + ["--out", str(clean)]) == 0
    out = tmp_path / "t"
    assert bpe_main(args + ["--out", str(out)]) == 0
    shard = out / table.shard_name(1)
    data = bytearray(shard.read_bytes())
    if damage == "one byte changed":
        data[len(data) // 2] ^= 0x01
        shard.write_bytes(bytes(data))
    elif damage == "truncated":
        shard.write_bytes(bytes(data[:-10]))
    else:
        shard.unlink()
    capsys.readouterr()
    assert bpe_main(args + ["--out", str(out)] + (["--overwrite"] if overwrite else [])) == 0
    assert files_of(out) == files_of(clean)
    assert table.read_table(out).word_counts == table.read_table(clean).word_counts


# --- options that cannot work, refused before any work ----------------------------------------------------


@pytest.mark.parametrize("piece_size", [-1, 0, 1, count_writer.MIN_PIECE_SIZE - 1])
def test_a_piece_size_below_the_floor_is_refused_naming_the_floor(tmp_path, corpus, piece_size):
    with pytest.raises(ValueError, match=f"at least {count_writer.MIN_PIECE_SIZE} bytes"):
        count_writer.count_corpus([corpus], tmp_path / "t", special_tokens=[EOT], piece_size=piece_size)
    assert not (tmp_path / "t").exists()
    count_writer.count_corpus([corpus], tmp_path / "t", special_tokens=[EOT], piece_size=count_writer.MIN_PIECE_SIZE)
    assert table.read_manifest(tmp_path / "t")["piece_size"] == count_writer.MIN_PIECE_SIZE


def test_a_tiny_piece_size_on_the_command_line_is_refused_naming_the_floor(tmp_path, corpus, capsys):
    assert bpe_main(["count", str(corpus), "--out", str(tmp_path / "t"), "--piece-size", "10", "--quiet"]) == 1
    assert f"at least {count_writer.MIN_PIECE_SIZE} bytes" in one_line(capsys)
    assert not (tmp_path / "t").exists()


def test_llmc_shards_larger_than_the_header_holds_are_refused_before_encoding(tmp_path, tokenizer_dir, corpus,
                                                                                capsys, monkeypatch):
    from cs336_basics.datasets import convert

    def no_encoding(*args, **kwargs):
        raise AssertionError("encoded before refusing")

    monkeypatch.setattr(Tokenizer, "encode_dataset", no_encoding)
    out = tmp_path / "o" / "t"
    assert bpe_main(["encode", str(corpus), "--tokenizer", str(tokenizer_dir), "--format", "llmc",
                     "--shard-tokens", "1000000000000", "--out", str(out), "--quiet"]) == 1
    err = one_line(capsys)
    assert f"{llmc.MAX_SHARD_TOKENS:,}" in err and "1000000000000" in err
    assert not (tmp_path / "o").exists() and not convert.work_directory(out).exists()
    with pytest.raises(ValueError, match=f"{llmc.MAX_SHARD_TOKENS:,}"):
        convert.write_format(no_encoding, out, "llmc", shard_tokens=0)


# --- what killed runs left beside an output --------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["megatron", "llmc"])
def test_a_successful_run_removes_the_temporaries_killed_runs_of_its_output_left(tmp_path, tokenizer_dir, corpus,
                                                                                   fmt):
    out = tmp_path / "x"
    if fmt == "megatron":
        left = [".x.bin.k2l9d0aa.tmp", ".x.idx.q_7zz0ab.tmp"]
    else:
        left = [f".x_{k:06d}.bin.ab{k}cdefg.tmp" for k in range(8)]  # more shards than this run writes
    others = [".y.bin.k2l9d0aa.tmp", ".x.bin.notours.tmp", "x.bin.k2l9d0aa.tmp", ".x_00000.bin.abcdefgh.tmp",
              ".xx.bin.k2l9d0aa.tmp", "notes.txt"]
    for name in left + others:
        (tmp_path / name).write_bytes(b"left")
    options = ["--shard-tokens", "1000"] if fmt == "llmc" else []
    assert bpe_main(["encode", str(corpus), "--tokenizer", str(tokenizer_dir), "--format", fmt, "--out", str(out),
                     "--quiet", *options]) == 0
    names = {p.name for p in tmp_path.iterdir()}
    assert not names & set(left), sorted(names & set(left))
    assert set(others) <= names
    written = megatron.paths(out) if fmt == "megatron" else llmc.shard_paths(out)
    assert all(p.is_file() for p in written) and {p.name for p in written} <= names


@pytest.mark.parametrize("output", ["array", "tokenizer"])
def test_every_output_removes_what_killed_runs_of_it_left(tmp_path, tokenizer_dir, corpus, output):
    out = tmp_path / "o"
    if output == "array":
        left, args = [".ids.npy.abcdefgh.tmp"], ["encode", str(corpus), "--tokenizer", str(tokenizer_dir),
                                                  "--out", str(out / "ids.npy")]
    else:
        left = [".vocab.json.abcdefgh.tmp", ".merges.txt.a_c0efgh.tmp", ".tokenizer.json.12345678.tmp",
                ".merge_log.tsv.abcdefgh.tmp"]
        args = ["train", str(corpus), "--vocab-size", "270", "--out", str(out)]
    out.mkdir()
    for name in left + ["notes.txt"]:
        (out / name).write_bytes(b"left")
    assert bpe_main([*args, "--quiet"]) == 0
    names = {p.name for p in out.iterdir()}
    assert not names & set(left) and "notes.txt" in names, sorted(names)


def test_a_temporary_that_a_live_write_holds_is_not_a_leftover(tmp_path):
    """Two writes of one file at once: the one that finishes first removes the dead run's leftover,
    never the other's temporary file, which then goes in place."""
    from cs336_basics.formats import staged

    live = staged.StagedFiles()
    live.open(tmp_path / "x.bin").write(b"live")
    (tmp_path / ".x.bin.deadbeef.tmp").write_bytes(b"dead")
    first = staged.StagedFiles()
    first.open(tmp_path / "x.bin").write(b"first")
    first.commit()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert ".x.bin.deadbeef.tmp" not in names and len(names) == 2, names  # x.bin and the live temporary
    live.commit()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.bin"]
    assert (tmp_path / "x.bin").read_bytes() == b"live"
