"""The shard folder that count tables and token datasets share (`datasets.shard_folder`): a shard is
kept only when both its size and its sha256 match its record; the lock is taken before anything in
the folder changes, so a refused run changes nothing; a folder of the other kind is refused, named
by what it holds, even with overwrite; and one rule gives both kinds their default piece sizes."""

import contextlib
import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import errors
from cs336_basics.bpe import Tokenizer
from cs336_basics.counts import table
from cs336_basics.counts import writer as count_writer
from cs336_basics.datasets import layout, shard_folder
from cs336_basics.datasets import writer as dataset_writer
from cs336_basics.datasets.shard_folder import Kind, ShardFolder, locked

SPECIAL = "<|endoftext|>"
TOY = Kind(noun="toy", format="toy", version=1, shard_endings=(".bin",), read_manifest=lambda folder: {},
           shard_files=lambda e: [(e["name"], e["bytes"], e["sha256"])], total_keys=("bytes",))


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer({i: bytes([i]) for i in range(256)} | {256: SPECIAL.encode()}, [], [SPECIAL])


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(SPECIAL.join(f"Story {i}: a fox ran {'far ' * (i % 7)}and slept.\n" for i in range(80)),
                    encoding="utf-8")
    return path


def write(kind: str, tokenizer, corpus: Path, folder: Path, **options) -> int:
    """Write `corpus` into `folder` as a count table or a dataset; how many shards were kept."""
    if kind == "count table":
        return count_writer.count_corpus([corpus], folder, special_tokens=[SPECIAL],
                                         piece_size=count_writer.MIN_PIECE_SIZE,
                                         **options).reused_shards
    return tokenizer.encode_dataset(corpus, folder, shard_size=600, num_workers=1, **options).reused_shards


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file in the folder (hidden ones, and those in `.work/`, too), with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


KINDS = ["count table", "dataset"]


# --- reuse ---------------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=1, max_size=200), where=st.integers(min_value=0), flip=st.integers(1, 255))
def test_a_shard_is_intact_only_when_its_size_and_its_sha256_match(tmp_path, data, where, flip):
    folder = ShardFolder(tmp_path / "toy", TOY)
    folder.store.make_dirs()
    folder.store.write("shard-00000.bin", [data])
    entry = {"name": "shard-00000.bin", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert folder.intact(entry)
    changed = bytearray(data)
    changed[where % len(data)] ^= flip  # one byte, the same size
    folder.store.write("shard-00000.bin", [bytes(changed)])
    assert not folder.intact(entry)
    assert not folder.intact({**entry, "sha256": hashlib.sha256(bytes(changed)).hexdigest(), "bytes": len(data) + 1})
    folder.store.remove("shard-00000.bin")
    assert not folder.intact(entry)


@pytest.mark.parametrize("kind", KINDS)
def test_a_shard_with_one_byte_changed_is_written_again_and_the_rest_kept(tmp_path, tokenizer, corpus, kind):
    write(kind, tokenizer, corpus, tmp_path / "clean")
    want = files_of(tmp_path / "clean")
    folder = tmp_path / "t"
    write(kind, tokenizer, corpus, folder)
    names = [e["name"] for e in json.loads((folder / "manifest.json").read_text())["shards"]]
    assert len(names) >= 3
    shard = folder / (names[1] if kind == "count table" else f"{names[1]}.npy")
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    assert write(kind, tokenizer, corpus, folder) == len(names) - 1
    assert files_of(folder) == want


# --- the lock first ------------------------------------------------------------------------------------


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_a_run_refused_because_another_holds_the_folder_changes_nothing(tmp_path, tokenizer, corpus, kind,
                                                                         overwrite):
    """What a stopped run left (temporaries beside the shards and in `.work/`) is the holder's to
    remove: a second run meets the lock before it removes anything, even with overwrite and other
    settings."""
    folder = tmp_path / "t"
    write(kind, tokenizer, corpus, folder)
    ending = ".parquet" if kind == "count table" else ".npy"
    (folder / f".shard-00000{ending}.a1b2c3.tmp").write_bytes(b"half a shard")
    (folder / shard_folder.WORK).mkdir()
    (folder / shard_folder.WORK / ".manifest.json.d4e5f6.tmp").write_bytes(b"{")
    with locked(folder):
        before = files_of(folder)
        with pytest.raises(errors.DatasetBusy, match=f"another run is writing this {kind}"):
            write(kind, tokenizer, corpus, folder, overwrite=overwrite)
        with pytest.raises(errors.DatasetBusy):
            corpus.write_text("other settings", encoding="utf-8")
            write(kind, tokenizer, corpus, folder, overwrite=overwrite)
        assert files_of(folder) == before


def test_the_lock_is_held_whenever_the_folder_is_changed(tmp_path, monkeypatch):
    """Every removal and write that `opened` makes happens while the lock is held."""
    folder = ShardFolder(tmp_path / "toy", TOY)
    folder.store.make_dirs(shard_folder.WORK)
    for name in (".shard-00000.bin.x.tmp", f"{shard_folder.WORK}/.y.tmp", f"{shard_folder.WORK}/plan.json"):
        folder.store.write(name, [b'{"format": "toy", "version": 1, "a": 1}'])
    held, changes = [], []
    real_locked = shard_folder.locked

    def watched_locked(*args, **kwargs):
        with real_locked(*args, **kwargs) as fd:
            held.append(True)
            yield fd
            held.pop()

    def watch(method):
        real = getattr(type(folder.store), method)

        def changed(self, *args, **kwargs):
            changes.append((method, bool(held)))
            return real(self, *args, **kwargs)
        monkeypatch.setattr(type(folder.store), method, changed)

    monkeypatch.setattr(shard_folder, "locked", contextlib.contextmanager(watched_locked))
    for method in ("remove", "remove_tree", "write"):
        watch(method)
    with folder.opened({"format": "toy", "version": 1, "a": 2}, overwrite=True, anew="") as opened:
        assert opened.previous is None
    assert changes and all(locked_then for _, locked_then in changes), changes
    assert folder.store.names() == [] and not (tmp_path / "toy" / shard_folder.WORK).exists()


# --- the other kind --------------------------------------------------------------------------------------


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_a_folder_of_the_other_kind_is_refused_naming_what_it_holds(tmp_path, tokenizer, corpus, kind, overwrite):
    other = KINDS[1 - KINDS.index(kind)]
    folder = tmp_path / "t"
    write(other, tokenizer, corpus, folder)
    before = files_of(folder)
    held = table.FORMAT if other == "count table" else layout.FORMAT
    message = f'holds another kind of folder \\(manifest.json says "format": "{held}"\\), not a {kind}'
    with pytest.raises(ValueError, match=message):
        write(kind, tokenizer, corpus, folder, overwrite=overwrite)
    assert files_of(folder) == before
    # unfinished: only its plan says what it is
    (folder / "manifest.json").unlink()
    (folder / shard_folder.WORK).mkdir()
    (folder / shard_folder.WORK / "plan.json").write_text(json.dumps({"format": held, "version": 1}))
    before = files_of(folder)
    with pytest.raises(ValueError, match=f'plan.json says "format": "{held}"\\), not a {kind}'):
        write(kind, tokenizer, corpus, folder, overwrite=overwrite)
    assert files_of(folder) == before


def test_a_count_tables_unreadable_manifest_is_refused_unless_overwrite(tmp_path, tokenizer, corpus):
    folder = tmp_path / "t"
    write("count table", tokenizer, corpus, folder)
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match=f"{folder / 'manifest.json'}: not a count table's manifest"):
        write("count table", tokenizer, corpus, folder)
    write("count table", tokenizer, corpus, folder, overwrite=True)
    write("count table", tokenizer, corpus, tmp_path / "clean")
    assert files_of(folder) == files_of(tmp_path / "clean")


# --- piece sizes -------------------------------------------------------------------------------------------

sizes = st.integers(min_value=0, max_value=1 << 42)


@given(total=sizes, workers=st.integers(1, 512), largest=st.integers(1, 1 << 32))
def test_the_one_piece_size_rule(total, workers, largest):
    got = shard_folder.default_piece_size(total, workers, largest)
    assert 1 <= got <= largest
    assert got == largest or got >= shard_folder.MIN_PIECE_SIZE
    per_worker = -(-total // workers)
    assert got == per_worker or got in (largest, shard_folder.MIN_PIECE_SIZE)


@given(total=sizes, workers=st.integers(1, 512), shard_size=st.integers(1, 1 << 40))
def test_both_kinds_take_their_default_piece_size_from_the_rule(total, workers, shard_size):
    # a count table's piece is a shard, one per worker, up to 1 GiB
    assert count_writer.default_piece_size(total, workers) == shard_folder.default_piece_size(total, workers, 1 << 30)
    # a dataset's is a part of a shard, at most 1 MiB and half a shard: never the workers' share
    got = dataset_writer.piece_size_for(shard_size, total, workers)
    assert got == dataset_writer.piece_size_for(shard_size) == max(min(1 << 20, shard_size // 2), 1)
