"""A dataset directory from a Python iterable of documents against its oracle: the dataset of a
`.txt` of the same documents joined by the first special token (without special tokens, of a
`.jsonl` of them). Also: flat memory on a long stream, resume only when asked and only over the
same documents, and refusals."""

import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import Tokenizer
from cs336_basics.datasets import from_documents, layout
from cs336_basics.datasets.shard_folder import LOCK
from cs336_basics.datasets.loader import TokenDataset
from tests.adapters import run_train_bpe
from tests.common import FIXTURES_PATH

EOT = "<|endoftext|>"
SPECIALS = [EOT, "<|pad|>"]
EXAMPLES = int(os.environ.get("BPE_FUZZ_EXAMPLES", 0)) or 30


@pytest.fixture(scope="module")
def tok():
    vocab, merges = run_train_bpe(FIXTURES_PATH / "english.txt", 400, [EOT])
    return Tokenizer(vocab, merges, SPECIALS)


def fixture_documents() -> list[str]:
    documents = []
    for name in ("english.txt", "german.txt", "code.txt"):
        documents += (FIXTURES_PATH / name).read_text(encoding="utf-8").split(EOT)
    return documents


def joined_txt(folder, documents: list[str]):
    """The oracle's input: the documents joined by the first special token, surrogates as tiktoken reads them."""
    path = folder / "joined.txt"
    text = EOT.join(documents).encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    path.write_text(text, encoding="utf-8", newline="")
    return path


def files_of(directory) -> dict[str, bytes]:
    """The shard files of a dataset directory, by name."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name.startswith("shard-")}


def ids_and_starts(directory) -> tuple[np.ndarray, np.ndarray]:
    """(every id, every document's global start) of a dataset directory, shard after shard."""
    manifest = layout.read_manifest(directory)
    ids, starts, offset = [], [], 0
    for shard in manifest["shards"]:
        shard_ids = np.load(layout.ids_file(directory, shard["name"]))
        ids.append(shard_ids)
        starts.append(np.load(layout.docs_file(directory, shard["name"])) + offset)
        offset += len(shard_ids)
    return np.concatenate(ids), np.concatenate(starts)


PIECES = st.sampled_from(["a", "b", "the", " ", "\n", "é", "中", EOT, "<|pad|>", "\ud83d\ude00", "\udc00", "<|"])


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.lists(PIECES, max_size=20).map("".join), max_size=10), st.integers(1, 40))
def test_any_documents_give_the_shards_of_the_joined_txt(tok, tmp_path_factory, documents, batch_chars):
    tmp = tmp_path_factory.mktemp("docs")
    tok.encode_dataset(joined_txt(tmp, documents), tmp / "file", num_workers=1, engine="python")
    written = tok.encode_dataset_from_iterator(documents, tmp / "iter", num_workers=1, piece_size=batch_chars,
                                               engine="python")
    expected = files_of(tmp / "file")
    got = files_of(tmp / "iter")
    if documents == [] or documents == [""]:  # no text: the file makes an empty shard, the iterable none
        assert written.tokens == 0 and all(len(np.load(tmp / "file" / n)) == 0 for n in expected)
        return
    assert got == expected  # one shard: the same bytes
    assert written.tokens == len(tok.encode(EOT.join(documents)))
    assert json.loads((tmp / "iter" / layout.MANIFEST).read_text())["source"] == "iterable"


@pytest.mark.parametrize("engine, workers", [("python", 1), ("python", 2), ("tiktoken", 2)])
def test_a_generator_over_many_shards_gives_the_ids_and_documents_of_the_joined_txt(tok, tmp_path, engine, workers):
    documents = fixture_documents()
    path = joined_txt(tmp_path, documents)
    tok.encode_dataset(path, tmp_path / "file", num_workers=1, shard_size=20_000, piece_size=3000, engine="python")
    written = tok.encode_dataset_from_iterator((d for d in documents), tmp_path / "iter", num_workers=workers,
                                               shard_size=20_000, piece_size=3000, engine=engine)
    ids, starts = ids_and_starts(tmp_path / "iter")
    expected_ids, expected_starts = ids_and_starts(tmp_path / "file")
    assert written.shards >= 4 and written.input_bytes == sum(len(d.encode()) for d in documents)
    assert ids.tolist() == expected_ids.tolist() == tok.encode(EOT.join(documents))
    assert starts.tolist() == expected_starts.tolist()
    assert written.documents == len(documents) and not (tmp_path / "iter" / ".work").exists()
    TokenDataset(tmp_path / "iter").verify()  # what `bpe dataset verify` checks


def test_a_list_without_special_tokens_gives_the_dataset_of_the_jsonl(tmp_path):
    vocab, merges = run_train_bpe(FIXTURES_PATH / "english.txt", 400, [EOT])
    bare = Tokenizer(vocab, merges, [])
    documents = fixture_documents()[:40]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents), encoding="utf-8")
    bare.encode_dataset(path, tmp_path / "file", num_workers=1, engine="python")
    bare.encode_dataset_from_iterator(documents, tmp_path / "iter", num_workers=2, piece_size=2000, engine="python")
    assert ids_and_starts(tmp_path / "iter")[0].tolist() == ids_and_starts(tmp_path / "file")[0].tolist()


@pytest.mark.slow  # importing `datasets` takes seconds
def test_a_datasets_iterable_dataset_of_rows(tok, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    datasets = pytest.importorskip("datasets")
    documents = fixture_documents()

    def rows():
        for i, text in enumerate(documents):
            yield {"id": i, "text": text}

    dataset = datasets.IterableDataset.from_generator(rows)
    tok.encode_dataset(joined_txt(tmp_path, documents), tmp_path / "file", num_workers=1, engine="python")
    tok.encode_dataset_from_iterator(dataset, tmp_path / "iter", num_workers=2, piece_size=5000)
    assert files_of(tmp_path / "iter") == files_of(tmp_path / "file")
    renamed = dataset.rename_column("text", "content")
    tok.encode_dataset_from_iterator(renamed, tmp_path / "renamed", num_workers=1, text_field="content")
    assert files_of(tmp_path / "renamed") == files_of(tmp_path / "file")


def test_a_long_stream_is_read_a_few_batches_ahead(tok, tmp_path):
    """The iterable is read only a few batches ahead of what is written: memory stays flat."""
    document = "the cat sat on the mat. " * 400  # 9.6 KB
    drawn = 0
    ahead = []
    done = [0]

    def stream():
        nonlocal drawn
        for _ in range(300):
            ahead.append(drawn - done[0])
            drawn += len(document)
            yield document

    def on_progress(n):
        done[0] = n

    tok.encode_dataset_from_iterator(stream(), tmp_path / "d", num_workers=2, shard_size=50_000,
                                     piece_size=10_000, engine="python", on_progress=on_progress)
    assert done[0] == drawn == 300 * len(document)
    # Two batches per worker in flight, one being read, one written: never the whole stream.
    assert max(ahead) <= 8 * 10_000, max(ahead)


# --- resume -------------------------------------------------------------------------------------------


class Stop(Exception):
    pass


def stopping(documents: list[str], after: int, once: Path | None = None):
    """The documents, then an error after `after` of them (a stream that went away, or Ctrl-C);
    with `once`, not before the file `once` exists: a shard's record, which a worker may still be
    writing when the stop would come, so that what the stop leaves does not depend on timing."""
    for i, document in enumerate(documents):
        if i == after:
            deadline = time.monotonic() + 60
            while once is not None and not once.exists():
                assert time.monotonic() < deadline, f"{once} was not written before document {after} was read"
                time.sleep(0.01)  # the worker writes it, whatever this process does
            raise Stop()
        yield document


OPTIONS = {"num_workers": 1, "shard_size": 20_000, "piece_size": 3000, "engine": "python"}


@pytest.mark.parametrize("workers", [1, 2])
def test_resume_with_the_same_documents_keeps_the_finished_shards_and_ends_byte_identical(tok, tmp_path, workers):
    documents = fixture_documents()
    options = {**OPTIONS, "num_workers": workers}
    whole = tok.encode_dataset_from_iterator(documents, tmp_path / "whole", **options)
    with pytest.raises(Stop):
        tok.encode_dataset_from_iterator(stopping(documents, 150, once=tmp_path / "d" / ".work" / "shard-00000.json"),
                                         tmp_path / "d", **options)
    assert not (tmp_path / "d" / layout.MANIFEST).exists()
    assert not (tmp_path / "d" / LOCK).exists()  # the run ended (by an error): its lock went with it
    # What the stop left: whole shards (each with its record), no temporary file.
    left = [p for p in (tmp_path / "d").rglob("*") if p.is_file()]
    # The workers are stopped before the run cleans up, so none can leave a part half-written after it.
    assert not [p for p in left if p.name.endswith(".tmp")]
    # A shard's record is written last: a shard stopped before it has none and is written again.
    for record_path in (tmp_path / "d" / ".work").glob("shard-*.json"):
        record = json.loads(record_path.read_text())
        name = record_path.name.removesuffix(".json")
        assert hashlib.sha256((tmp_path / "d" / f"{name}.npy").read_bytes()).hexdigest() == record["sha256"]
    # Without resume=True the directory is refused: we cannot know these are the same documents.
    with pytest.raises(ValueError, match="cannot be replayed: pass resume=True with the same documents"):
        tok.encode_dataset_from_iterator(documents, tmp_path / "d", **options)
    written = tok.encode_dataset_from_iterator(iter(documents), tmp_path / "d", resume=True, **options)
    assert written.reused_shards >= 1 and 0 < written.reused_bytes < written.input_bytes
    assert files_of(tmp_path / "d") == files_of(tmp_path / "whole")
    assert (tmp_path / "d" / layout.MANIFEST).read_bytes() == (tmp_path / "whole" / layout.MANIFEST).read_bytes()
    assert (written.tokens, written.shards) == (whole.tokens, whole.shards)
    assert sorted(os.listdir(tmp_path / "d")) == sorted(os.listdir(tmp_path / "whole")) == sorted(
        [layout.MANIFEST] + [f"shard-{k:05d}{suffix}" for k in range(whole.shards) for suffix in (".npy", ".docs.npy")])


def test_resume_with_other_documents_is_refused(tok, tmp_path):
    documents = fixture_documents()
    with pytest.raises(Stop):
        tok.encode_dataset_from_iterator(stopping(documents, 150), tmp_path / "d", **OPTIONS)
    changed = list(documents)
    changed[3] = changed[3].replace("the", "The", 1)  # inside the first shard
    with pytest.raises(ValueError, match="the documents differ from those the earlier run wrote into .*shard-00000"):
        tok.encode_dataset_from_iterator(changed, tmp_path / "d", resume=True, **OPTIONS)
    with pytest.raises(ValueError, match="the documents differ"):  # fewer documents than were written
        tok.encode_dataset_from_iterator(documents[:5], tmp_path / "d", resume=True, **OPTIONS)
    # overwrite=True writes it anew.
    tok.encode_dataset_from_iterator(changed, tmp_path / "d", overwrite=True, **OPTIONS)
    tok.encode_dataset_from_iterator(changed, tmp_path / "fresh", **OPTIONS)
    assert files_of(tmp_path / "d") == files_of(tmp_path / "fresh")


def test_a_finished_dataset_resumes_only_over_the_same_documents(tok, tmp_path):
    documents = fixture_documents()
    tok.encode_dataset_from_iterator(documents, tmp_path / "d", **OPTIONS)
    before = files_of(tmp_path / "d")
    again = tok.encode_dataset_from_iterator(documents, tmp_path / "d", resume=True, **OPTIONS)
    assert again.reused_shards == again.shards and files_of(tmp_path / "d") == before
    # Documents of 3,500 characters: each batch is one, full; 12 of them (42,000 bytes) fill a shard.
    full = [f"{k} " + "word " * 699 for k in range(12)]
    tok.encode_dataset_from_iterator(full[:5], tmp_path / "e", **OPTIONS)  # the end closed the shard
    with pytest.raises(ValueError, match="the documents go on past the end of the earlier run"):
        tok.encode_dataset_from_iterator(full[:5] + ["more"], tmp_path / "e", resume=True, **OPTIONS)
    # A last batch cut short by the end of the documents would hold more of them: its shard differs.
    tok.encode_dataset_from_iterator(full + ["short"], tmp_path / "s", **OPTIONS)
    with pytest.raises(ValueError, match="the documents differ from those the earlier run wrote into .*shard-00001"):
        tok.encode_dataset_from_iterator(full + ["short", "more"], tmp_path / "s", resume=True, **OPTIONS)
    # A shard that its size closed stays, and more documents go on after it, as in one run of them all.
    tok.encode_dataset_from_iterator(full, tmp_path / "f", **OPTIONS)
    written = tok.encode_dataset_from_iterator(full + ["more"], tmp_path / "f", resume=True, **OPTIONS)
    assert (written.reused_shards, written.shards) == (1, 2)
    tok.encode_dataset_from_iterator(full + ["more"], tmp_path / "g", **OPTIONS)
    assert files_of(tmp_path / "f") == files_of(tmp_path / "g")
    assert files_of(tmp_path / "d") == before and (tmp_path / "d" / layout.MANIFEST).exists()


def test_a_shard_changed_on_disk_is_written_again_on_resume(tok, tmp_path):
    documents = fixture_documents()
    tok.encode_dataset_from_iterator(documents, tmp_path / "d", **OPTIONS)
    before = files_of(tmp_path / "d")
    shard = tmp_path / "d" / "shard-00001.npy"
    shard.write_bytes(shard.read_bytes()[:-2] + b"\0\0")
    written = tok.encode_dataset_from_iterator(documents, tmp_path / "d", resume=True, **OPTIONS)
    assert written.reused_shards == 1 and files_of(tmp_path / "d") == before


def test_a_file_dataset_is_not_resumed_from_an_iterable(tok, tmp_path):
    documents = fixture_documents()[:20]
    tok.encode_dataset(joined_txt(tmp_path, documents), tmp_path / "d", num_workers=1, engine="python")
    with pytest.raises(ValueError, match="was written with other settings: it was written from files, now from an "
                                         "iterable of documents; pass overwrite=True"):
        tok.encode_dataset_from_iterator(documents, tmp_path / "d", resume=True, **{**OPTIONS, "shard_size": 1 << 28})


def test_what_is_not_documents_is_refused(tok, tmp_path):
    with pytest.raises(TypeError, match="takes an iterable of documents; for files use"):
        tok.encode_dataset_from_iterator("corpus.txt", tmp_path / "d")
    with pytest.raises(TypeError, match="document 2 is int, not str"):
        tok.encode_dataset_from_iterator(["a", "b", 3], tmp_path / "d", num_workers=1)
    with pytest.raises(ValueError, match=r"document 0 has no 'text' field \(fields: content\)"):
        tok.encode_dataset_from_iterator([{"content": "x"}], tmp_path / "e", num_workers=1)
    assert from_documents.SOURCE == "iterable"
