"""Training from a Python iterable against its oracle: `train_bpe` on the `.txt` of the same
documents joined by the first special token (without special tokens, on the `.jsonl` of them)."""

import json
import os
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import train_bpe, train_bpe_from_iterator
from cs336_basics.errors import WorkerError
from cs336_basics.train import counting
from tests.common import FIXTURES_PATH

EOT = "<|endoftext|>"
EXAMPLES = int(os.environ.get("BPE_FUZZ_EXAMPLES", 0)) or 40


def fixture_documents() -> list[str]:
    documents = []
    for name in ("english.txt", "german.txt", "code.txt"):
        documents += (FIXTURES_PATH / name).read_text(encoding="utf-8").split(EOT)
    return documents


def oracle(tmp_path, documents: list[str], vocab_size: int, specials: list[str], pattern: str = "gpt2"):
    if specials:
        path = tmp_path / "joined.txt"
        # As tiktoken reads a str with surrogates: pairs joined, lone ones U+FFFD.
        text = specials[0].join(documents).encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        path.write_text(text, encoding="utf-8", newline="")
    else:
        path = tmp_path / "records.jsonl"
        path.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents), encoding="utf-8")
    return train_bpe(path, vocab_size, specials, pattern=pattern, num_workers=1)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("pattern", ["gpt2", "o200k"])
def test_a_generator_trains_as_the_joined_txt(tmp_path, workers, pattern, monkeypatch):
    monkeypatch.setattr(counting, "DOCUMENT_BATCH_CHARS", 5000)  # many batches in flight
    documents = fixture_documents()
    expected = oracle(tmp_path, documents, 500, [EOT, "<|pad|>"], pattern)
    got = train_bpe_from_iterator((d for d in documents), 500, [EOT, "<|pad|>"], pattern=pattern, num_workers=workers)
    assert got == expected


def test_a_list_without_special_tokens_trains_as_the_jsonl(tmp_path):
    documents = fixture_documents()[:40]
    assert train_bpe_from_iterator(documents, 400, [], num_workers=2) == oracle(tmp_path, documents, 400, [])


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b", " ", "\n", "é", EOT, "\ud83d\ude00", "\udc00", "<|"]), max_size=30).map("".join), max_size=12))
def test_any_documents_train_as_the_joined_txt(tmp_path_factory, documents):
    tmp_path = tmp_path_factory.mktemp("docs")
    assert train_bpe_from_iterator(documents, 270, [EOT], num_workers=1) == oracle(tmp_path, documents, 270, [EOT])


@pytest.mark.slow  # importing `datasets` takes seconds
def test_a_datasets_iterable_dataset_of_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    datasets = pytest.importorskip("datasets")
    documents = fixture_documents()

    def rows():
        for i, text in enumerate(documents):
            yield {"id": i, "text": text}

    dataset = datasets.IterableDataset.from_generator(rows)
    expected = oracle(tmp_path, documents, 450, [EOT])
    assert train_bpe_from_iterator(dataset, 450, [EOT], num_workers=2) == expected
    renamed = dataset.rename_column("text", "content")
    assert train_bpe_from_iterator(renamed, 450, [EOT], num_workers=1, text_field="content") == expected


def test_an_endless_stream_is_read_a_few_batches_ahead(monkeypatch):
    """20 MB of documents go through while this process holds at most a few batches of 100 KB:
    the task queue is bounded, so reading the stream waits for the workers."""
    monkeypatch.setattr(counting, "DOCUMENT_BATCH_CHARS", 100_000)
    run = "x" * 100_000

    def stream():  # each document a new str of 100 KB, all equal: counting them costs little
        for _ in range(200):
            yield run[:-1] + "x"

    tracemalloc.start()
    try:
        counts = counting.count_documents(stream(), special_tokens=[EOT], pattern="gpt2", num_workers=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counts == {run.encode(): 200}
    assert peak < 2 << 20, peak


def test_documents_that_are_not_text_are_refused_by_position():
    with pytest.raises(TypeError, match="document 2 is int, not str"):
        train_bpe_from_iterator(["a", "b", 3], 300, [EOT], num_workers=1)
    with pytest.raises(TypeError, match="document 1 is bytes"):
        train_bpe_from_iterator(["a", b"b"], 300, [EOT], num_workers=2)
    with pytest.raises(ValueError, match=r"document 0 has no 'text' field \(fields: content\)"):
        train_bpe_from_iterator([{"content": "x"}], 300, [EOT], num_workers=1)
    with pytest.raises(TypeError, match="takes an iterable of documents; for a file or folder use train_bpe"):
        train_bpe_from_iterator("corpus.txt", 300, [EOT])
    with pytest.raises(ValueError, match="vocab_size 10 is below the minimum 257"):
        train_bpe_from_iterator(["a"], 10, [EOT])


def test_a_worker_s_error_reaches_the_caller():
    # A custom regex leaving text unmatched is an error raised in the worker that counts it.
    with pytest.raises(ValueError, match=r"leaves '!' unmatched"):
        train_bpe_from_iterator(["ab", "c!"] * 50, 300, [EOT], pattern=r"[a-z]+", num_workers=2)


def test_an_error_in_the_stream_stops_the_workers():
    def stream():
        yield "some text"
        raise RuntimeError("the source went away")

    with pytest.raises(RuntimeError, match="the source went away"):
        train_bpe_from_iterator(stream(), 300, [EOT], num_workers=2)


def test_a_worker_that_dies_is_a_worker_error(monkeypatch):
    def die(*args):
        os._exit(3)

    monkeypatch.setattr(counting, "_count_queued", die)
    with pytest.raises(WorkerError, match="a worker process died"):
        train_bpe_from_iterator(["x y"] * 100, 300, [EOT], num_workers=2)


def test_the_counts_are_handed_over_to_the_merge_loop(monkeypatch):
    # As for train_bpe: the merge loop may free the counts once copied, so nothing else holds them.
    import sys

    from cs336_basics.train import trainer

    seen = {}
    real = trainer.train_merges

    def spy(word_counts, *args, **kwargs):
        seen["refs"] = sys.getrefcount(word_counts)  # this frame's name and getrefcount's argument
        return real(word_counts, *args, **kwargs)

    monkeypatch.setattr(trainer, "train_merges", spy)
    train_bpe_from_iterator(["the cat sat on the mat"] * 20, 270, [EOT], num_workers=1)
    assert seen["refs"] == 2
