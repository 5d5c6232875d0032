"""Counting in bounded memory: the packed tables workers send back, and the counts of whole corpora
against a direct count with the pattern, whatever the block size, the tasks and the workers."""

import multiprocessing
import random
from collections import Counter

import pytest
import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cs336_basics.corpora import cutting, sources
from cs336_basics.text import patterns, pretokenize
from cs336_basics.train import counting
from tests.common import OVERLAP_PIECES
from tests.test_train_bpe import check_find_safe_cut

EOT = "<|endoftext|>"

# Pre-tokens as they come from text: any character but a surrogate (files are strict UTF-8 and
# records go through fix_surrogates), including 0xFF's character and the empty document's neighbours.
words = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)
tables = st.dictionaries(words, st.integers(min_value=1, max_value=1 << 62), max_size=40)


@given(tables)
@settings(max_examples=300, deadline=None)
def test_packed_counts_unpack_to_the_same_table_in_utf8(table):
    total: dict[bytes, int] = {}
    counting.add_packed(total, counting.pack_counts(table))
    assert total == {word.encode("utf-8"): n for word, n in table.items()}


@given(st.lists(tables, max_size=4))
@settings(max_examples=200, deadline=None)
def test_packed_counts_add_up(table_list):
    total: dict[bytes, int] = {}
    for table in table_list:
        counting.add_packed(total, counting.pack_counts(table))
    expected: Counter[bytes] = Counter()
    for table in table_list:
        expected.update({word.encode("utf-8"): n for word, n in table.items()})
    assert total == dict(expected)


def test_packed_counts_are_compact():
    table = {f" word{i}": i + 1000 for i in range(10_000)}
    keys, counts = counting.pack_counts(table)
    assert len(keys) == sum(len(w) + 1 for w in table) and counts.itemsize == 8


@pytest.mark.parametrize("size", range(8))
def test_packed_counts_encoded_a_slice_at_a_time_join_up(size, monkeypatch):
    monkeypatch.setattr(counting, "_PACK_SLICE", 3)
    table = {f"w{i}é": i + 1 for i in range(size)}
    total: dict[bytes, int] = {}
    counting.add_packed(total, counting.pack_counts(table))
    assert total == {word.encode("utf-8"): n for word, n in table.items()}


def test_damaged_packed_counts_are_refused():
    keys, counts = counting.pack_counts({"a": 1, "b": 2})
    with pytest.raises(ValueError, match="2 pre-tokens but 1 counts"):
        counting.add_packed({}, (keys, counts[:1]))


def _corpus(rng: random.Random) -> list[str]:
    pieces = ["the", " cat", "!!", "é", "世界", " ", "\n", "  ", "\u3000", "12", "'s", "\xff", "ÿ"]
    return ["".join(rng.choice(pieces) for _ in range(rng.randrange(0, 60))) for _ in range(rng.randrange(1, 12))]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("pattern", ["gpt2", "cl100k"])
@pytest.mark.parametrize("pending_limit", [0, 64 << 20])  # 0: tables added up as they come
@pytest.mark.parametrize("chunk_limit", [2, counting.CHUNK_LIMIT])  # 2: chunks turned into pre-tokens often
def test_count_pretokens_equals_a_direct_count(tmp_path, monkeypatch, seed, pattern, pending_limit, chunk_limit):
    monkeypatch.setattr(counting, "_PENDING_LIMIT", pending_limit)
    monkeypatch.setattr(counting, "CHUNK_LIMIT", chunk_limit)
    rng = random.Random(seed)
    docs = _corpus(rng)
    path = tmp_path / "corpus.txt"
    path.write_bytes(EOT.join(docs).encode("utf-8"))
    expected: Counter[bytes] = Counter()
    for doc in docs:
        expected.update(piece.encode("utf-8") for piece in regex.findall(patterns.regex_string(pattern), doc))
    piece_size = rng.choice([1, 17, 200, 1 << 20])
    units = sources.plan_units(sources.resolve(path), piece_size=piece_size, special_tokens=[EOT], pattern=pattern)
    for workers in (1, 2, 3):  # with 2 or 3, this process counts every 2nd or 3rd task itself
        counts = counting.count_pretokens(
            units, num_workers=workers, task_size=piece_size, block_size=rng.choice([1, 5, 64, 1 << 20])
        )
        assert counts == dict(expected), (workers, piece_size)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 40), st.integers(1, 6), st.lists(st.integers(0, 5), max_size=80))
def test_processes_claim_each_task_once_their_own_stretch_first(num_tasks, processes, turns):
    # Processes take turns in the order drawn, then in rounds, until every one is told None.
    claims = multiprocessing.get_context().Array("q", counting._regions(num_tasks, processes))
    stretches = [range(claims[2 * r], claims[2 * r + 1]) for r in range(processes)]
    assert [i for stretch in stretches for i in stretch] == list(range(num_tasks))
    taken: list[list[int]] = [[] for _ in range(processes)]
    done = [False] * processes
    order = [t % processes for t in turns] + list(range(processes)) * (num_tasks + 1)
    for region in order:
        if done[region]:
            continue
        i = counting._claim(claims, region)
        if i is None:
            done[region] = True
            continue
        def untaken(r: int) -> list[int]:
            return [j for j in stretches[r] if not any(j in t for t in taken)]

        left_elsewhere = [len(untaken(r)) for r in range(processes) if r != region]
        taken[region].append(i)
        if i not in stretches[region]:  # stolen: the last task left of a stretch with the most left
            owner = next(r for r in range(processes) if i in stretches[r])
            assert not any(j > i for j in untaken(owner))
            assert len(untaken(owner)) + 1 == max(left_elsewhere)
    assert all(done) and sorted(i for t in taken for i in t) == list(range(num_tasks))
    for region in range(processes):  # its own tasks, from the start of its stretch, in order
        own = [i for i in taken[region] if i in stretches[region]]
        assert own == list(stretches[region][: len(own)])


def test_a_process_alone_counts_every_task(tmp_path):
    # Nobody else claims: this process takes its stretch, then all the others'.
    path = tmp_path / "corpus.txt"
    docs = ["the cat sat", "on the mat", " é 12 ", "the cat"] * 5
    path.write_bytes(EOT.join(docs).encode("utf-8"))
    units = sources.plan_units(sources.resolve(path), piece_size=17, special_tokens=[EOT], pattern="gpt2")
    tasks = [(unit,) for unit in units]
    claims = multiprocessing.get_context().Array("q", counting._regions(len(tasks), 3))
    size, counts = counting.count_claimed(tasks, 1, 64, claims)
    expected = Counter(p for doc in docs for p in regex.findall(patterns.GPT2, doc))
    assert size == path.stat().st_size
    assert counts == dict(expected)


def test_chunks_turn_into_pre_tokens_past_the_limit_which_grows_when_they_repeat():
    gpt2 = patterns.get("gpt2")
    fresh = counting._Counts(gpt2, limit=4)
    text = " ".join(f"w{i}." for i in range(10))  # 10 chunks, each once
    fresh.add(text, None)
    assert fresh.limit == 4 and len(fresh.chunks) == 0 and fresh.pretokens
    fresh.add(" a b", None)
    assert fresh.total() == dict(Counter(regex.findall(patterns.GPT2, text + " a b")))
    repeated = counting._Counts(gpt2, limit=4)
    repeated.add(" a b c d" * 3, None)  # 5 chunks, 4 of them seen 3 times
    repeated.add(" e", None)
    assert repeated.limit == 8 and len(repeated.chunks) == 0
    none = patterns.get("none")
    assert counting._Counts(none).limit is None  # its chunks are pre-tokens already
    assert pretokenize.pretoken_counts({"ab": 2}, none, into={"ab": 1, "c": 1}) == {"ab": 3, "c": 1}


def test_progress_counts_the_bytes_this_process_reads_as_it_reads_them(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(EOT.join(["the cat sat, " * 50] * 20).encode("utf-8"))
    size = path.stat().st_size
    units = sources.plan_units(sources.resolve(path), piece_size=size // 2 + 1, special_tokens=[EOT], pattern="gpt2")
    seen: list[int] = []
    counting.count_pretokens(units, num_workers=2, task_size=size // 2 + 1, block_size=64, on_progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == size
    # This process reads half the corpus, 64 bytes at a time, and reports each block, each time
    # with a larger figure. (How many of those figures fall below half the corpus depends on how
    # far the worker, which adds to the same count, has got meanwhile: do not assert on that.)
    assert len(set(seen)) >= size // 2 // 64 // 2


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from([[], ["<|endoftext|>"], ["<a b>", "b>"], ["<<x>>", "<x>>"]]),
    st.sampled_from([1, 2, 5, 64]),
    st.sampled_from([1, 3, 7, 1 << 16]),
    st.data(),
)
def test_find_safe_cut_looks_near_first_then_further(specials, first_window, window, data):
    # Blocks are small, so the cut after each is searched in a small window first: any pair of
    # window sizes finds the first safe cut (check_find_safe_cut sets SEARCH_WINDOW to `window`).
    pieces = st.sampled_from(OVERLAP_PIECES + ["é", "ab cd", "<a"] + specials * 3)
    text = "".join(data.draw(st.lists(pieces, max_size=30))).encode()
    old = cutting.FIRST_WINDOW
    cutting.FIRST_WINDOW = first_window
    try:
        check_find_safe_cut(text, specials, window)
    finally:
        cutting.FIRST_WINDOW = old


def test_train_bpe_hands_the_counts_over_to_the_merge_loop(tmp_path, monkeypatch):
    # train_merges may free the counts once it has its own copy: nothing else may hold them.
    import sys

    from cs336_basics import bpe
    from cs336_basics.train import trainer

    seen = {}
    real = trainer.train_merges

    def spy(word_counts, *args, **kwargs):
        seen["refs"] = sys.getrefcount(word_counts)  # this frame's name and getrefcount's argument
        return real(word_counts, *args, **kwargs)

    monkeypatch.setattr(trainer, "train_merges", spy)
    path = tmp_path / "corpus.txt"
    path.write_text("the cat sat on the mat" * 20)
    stats: dict = {}
    bpe.train_bpe(path, 270, [], stats=stats)
    assert seen["refs"] == 2
    assert stats["distinct_pretokens"] == 7  # " matthe" where the repeats meet


# Text where cutting chunks at the wrong place would change pre-tokens: punctuation before newlines
# (cl100k and o200k let it take them), whitespace runs, letters, digits, apostrophes, non-ASCII.
chunk_texts = st.text(st.sampled_from(["a", "B", "é", "世", "1", "!", ".", "'", "s", " ", "\n", "\r", "\t", "\u3000"]), max_size=40)


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "o200k"])
@given(texts=st.lists(chunk_texts, max_size=12))
@example(texts=["x a.", "\nb"])  # " a." then "\nb": cl100k's punctuation takes the newline
@settings(max_examples=150, deadline=None)
def test_pretoken_counts_equal_each_chunk_cut_alone(pattern, texts):
    """The counts must be those of cutting each distinct chunk alone with the pattern, times its
    count, whatever shortcuts pretoken_counts takes."""
    from cs336_basics.text import pretokenize

    pretokenizer = patterns.get(pattern)
    chunk_counts = Counter(chunk for text in texts for chunk in pretokenizer.chunks(text))
    expected: Counter[str] = Counter()
    for chunk, n in chunk_counts.items():
        for piece in pretokenizer.compiled.findall(chunk):
            expected[piece] += n
    assert dict(pretokenize.pretoken_counts(dict(chunk_counts), pretokenizer)) == dict(expected)
    # Added to counts already there, as a process does each time its table of chunks is full.
    before = {piece: 1 for piece in list(expected)[::2]}
    added = pretokenize.pretoken_counts(dict(chunk_counts), pretokenizer, into=dict(before))
    assert added == dict(expected + Counter(before))


# --- claims, bundles, piece sizes, byte counts and documents, pinned by hand -------------------------


def _unit(size: int) -> sources.WorkUnit:
    return sources.WorkUnit("x.txt", "txt", None, 0, size, size, True)


def test_one_process_claims_its_stretch_then_the_last_task_of_the_fullest_stretch():
    """With 10 tasks in 3 stretches (0-2, 3-5, 6-9), a process alone takes its own in order, then
    each time the last task left of the stretch with the most left (the first such on a tie)."""
    claims = multiprocessing.get_context().Array("q", counting._regions(10, 3))
    assert list(claims) == [0, 3, 3, 6, 6, 10]
    taken = []
    while (i := counting._claim(claims, 0)) is not None:
        taken.append(i)
    assert taken == [0, 1, 2, 9, 5, 8, 4, 7, 3, 6]
    claims = multiprocessing.get_context().Array("q", counting._regions(10, 3))
    assert [counting._claim(claims, 1) for _ in range(4)] == [3, 4, 5, 9]


def test_units_are_bundled_into_tasks_of_at_least_the_target():
    """Consecutive units are grouped until their bytes reach the target; the last group may be smaller."""
    units = [_unit(s) for s in [5, 1, 5, 1, 2]]
    tasks = counting.bundle(units, 6)
    assert [[u.size for u in task] for task in tasks] == [[5, 1], [5, 1], [2]]
    assert counting.bundle([], 6) == []


def test_default_piece_sizes_follow_the_documented_policy():
    """Local: 8 units per process, at least 1 MiB, at most 1 GiB and the share; others: 4 per worker within [1 MiB, 1 GiB]."""
    MiB, GiB = 1 << 20, 1 << 30
    local = [(80_000_001, 1, 10_000_000), (80_000_001, 2, 5_000_000), (4 * MiB, 1, MiB), (512_000, 1, 512_000),
             (1, 1, 1), (0, 4, 1), (64 * GiB, 2, GiB), (80_000_001, 0, 10_000_000)]
    for total, workers, expected in local:
        assert counting.default_piece_size(total, workers, local=True) == expected, (total, workers)
    other = [(80_000_001, 1, 20_000_000), (80_000_001, 2, 10_000_000), (1, 1, MiB), (6 * MiB, 1, 1572864),
             (64 * GiB, 1, GiB)]
    for total, workers, expected in other:
        assert counting.default_piece_size(total, workers, local=False) == expected, (total, workers)


@pytest.mark.parametrize("numpy", [False, True])
def test_byte_counts_weigh_each_pre_token_s_bytes_by_its_count(monkeypatch, numpy):
    """byte_counts gives, per byte value, its occurrences in the corpus the counts describe, as ints,
    also for more pre-tokens than one batch, and exactly past 64 bits, with NumPy or without."""
    monkeypatch.setattr(counting, "NUMPY_WORDS", 0 if numpy else 1 << 60)
    rng = random.Random(5)
    counts = {i.to_bytes(3, "little"): rng.choice([1, 2, 3, rng.randrange(1, 1 << 62)]) for i in range(70_000)}
    expected = [0] * 256
    for word, n in counts.items():
        for byte in word:
            expected[byte] += n
    got = counting.byte_counts(counts)
    assert got == expected and all(type(n) is int for n in got)
    assert counting.byte_counts({}) == [0] * 256


def test_document_batches_gather_about_batch_chars_and_read_mappings():
    """Documents come in lists reaching `batch_chars` characters; a mapping gives its text field."""
    docs = ["abc", "d", {"text": "ef"}, "g", "h"]
    assert list(counting.document_batches(docs, 4)) == [["abc", "d"], ["ef", "g", "h"]]
    assert list(counting.document_batches([{"content": "x"}, "y"], 10, "content")) == [["x", "y"]]
    with pytest.raises(ValueError, match=r"document 1 has no 'text' field \(fields: none\)"):
        list(counting.document_batches(["a", {}], 10))


@pytest.mark.parametrize("pattern", ["gpt2", "none"])
def test_count_documents_in_this_process_without_special_tokens_or_with_another_field(pattern):
    """Documents counted in this process, without special tokens or from another field, give the
    counts of each document pre-tokenized alone."""
    docs = ["the cat sat", " on the mat", "the cat", "", "é 12"] * 3
    source = patterns.regex_string(pattern)
    expected = Counter(p.encode() for doc in docs for p in (regex.findall(source, doc) if source else [doc] if doc else []))
    got = counting.count_documents(docs, special_tokens=[], pattern=pattern, num_workers=1, batch_chars=10)
    assert got == dict(expected)
    rows = [{"content": doc} for doc in docs]
    got = counting.count_documents(rows, special_tokens=[EOT], pattern=pattern, num_workers=1, text_field="content")
    assert got == dict(expected)


def test_count_units_adds_up_the_bytes_of_every_unit(tmp_path):
    """count_units reports the bytes of all its units, and nothing for no units."""
    path = tmp_path / "corpus.txt"
    path.write_bytes(EOT.join(["the cat sat on the mat"] * 20).encode())
    units = sources.plan_units(sources.resolve(path), piece_size=50, special_tokens=[EOT])
    assert len(units) > 2
    read: list[int] = []
    size, counts = counting.count_units(units, 16, read.append)
    assert size == path.stat().st_size and counts == {"the": 20, " cat": 20, " sat": 20, " on": 20, " the": 20, " mat": 20}
    assert sum(read) == size and len(read) > len(units)
    assert counting.count_units([]) == (0, {})


@pytest.mark.parametrize("executor", [None, "threads"])
def test_count_pretokens_reports_growing_progress_up_to_the_corpus_size(tmp_path, executor):
    """In this process alone or on an executor, progress never goes back and ends at the corpus's bytes."""
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "corpus.txt"
    docs = ["the cat sat, " * 5] * 30
    path.write_bytes(EOT.join(docs).encode())
    size = path.stat().st_size
    units = sources.plan_units(sources.resolve(path), piece_size=100, special_tokens=[EOT])
    seen: list[int] = []
    pool = ThreadPoolExecutor(2) if executor else None
    try:
        counts = counting.count_pretokens(units, num_workers=1, executor=pool, task_size=200, on_progress=seen.append)
    finally:
        if pool:
            pool.shutdown()
    assert counts == {k.encode(): v for k, v in Counter(p for d in docs for p in regex.findall(patterns.GPT2, d)).items()}
    assert len(seen) > 3 and seen == sorted(seen) and seen[-1] == size


def test_the_chunk_limit_doubles_only_when_fewer_than_half_the_chunks_were_seen_once():
    """Past the limit, the limit doubles when fewer than half the distinct chunks were seen once."""
    gpt2 = patterns.get("gpt2")
    counts = counting._Counts(gpt2, limit=4)
    counts.add(" a b c a b c d e", None)  # 5 chunks, 2 seen once
    assert counts.limit == 8
    counts = counting._Counts(gpt2, limit=3)
    counts.add(" a b a b c d", None)  # 4 chunks, 2 seen once: half, not fewer
    assert counts.limit == 3
    assert counts.total() == {" a": 2, " b": 2, " c": 1, " d": 1}


def test_an_empty_table_packs_into_no_bytes():
    """pack_counts of no pre-tokens is empty, and adds nothing."""
    keys, numbers = counting.pack_counts({})
    assert keys == b"" and len(numbers) == 0
    total = {b"a": 1}
    counting.add_packed(total, (keys, numbers))
    assert total == {b"a": 1}


def test_count_documents_reads_the_text_field_by_default():
    """Mappings of documents are read from their "text" field unless told otherwise."""
    got = counting.count_documents([{"text": "a b"}, "a"], special_tokens=[EOT], pattern="gpt2", num_workers=1)
    assert got == {b"a": 2, b" b": 1}


def test_a_bad_record_read_by_local_workers_is_the_caller_s_error(tmp_path):
    """A bad record found while local processes count is raised to the caller as the reader's ValueError."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(b'{"text": "doc %d"}\n' % i for i in range(40)) + b'{"id": 1}\n')
    units = sources.plan_units(sources.resolve(path), piece_size=100, special_tokens=[EOT])
    with pytest.raises(ValueError, match=r"bad\.jsonl: line 41: no 'text' field"):
        counting.count_pretokens(units, num_workers=2, task_size=100)


def test_a_worker_error_of_another_kind_arrives_as_a_runtime_error():
    """An error a worker sends whose kind the parent does not rebuild is raised as RuntimeError with its message."""
    import queue

    results: queue.Queue = queue.Queue()
    results.put(("error", "KeyError", "'x' went missing"))
    with pytest.raises(RuntimeError, match="'x' went missing"):
        counting._get(results, [])
    results.put(("error", "TypeError", "not text"))
    with pytest.raises(TypeError, match="not text"):
        counting._get(results, [])
