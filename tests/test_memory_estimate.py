"""The memory estimate printed before counting (`train.memory_estimate`), and `--max-memory`."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.cli import main
from cs336_basics.corpora import sources
from cs336_basics.train import counting, memory_estimate
from cs336_basics.train.memory_estimate import (
    estimate,
    extrapolated_distinct,
    heaps_fit,
)


@settings(max_examples=100, deadline=None)
@given(k=st.floats(0.5, 50), beta=st.floats(0.2, 0.95), start=st.integers(100, 10_000))
def test_the_heaps_fit_recovers_known_parameters(k, beta, start):
    points = [(start * 2**i, k * (start * 2**i) ** beta) for i in range(8)]
    fitted_k, fitted_beta = heaps_fit(points)
    assert fitted_beta == pytest.approx(beta, rel=1e-6)
    assert fitted_k == pytest.approx(k, rel=1e-5)


def test_the_fit_recovers_the_growth_of_a_drawn_vocabulary():
    """Words drawn so that, after n words, about K * n ** beta were new (as a web corpus grows): the fit
    on the first 50,000 words predicts the distinct words of 1,000,000 within 10 %."""
    rng = random.Random(4)
    k, beta = 6.0, 0.6
    seen, distinct, points = 0, 0, []
    owed = 0.0
    while seen < 1_000_000:
        seen += 1
        owed += k * (seen ** beta - (seen - 1) ** beta)
        if owed >= 1 or rng.random() < owed:
            distinct += 1
            owed -= 1
        if seen % 5_000 == 0 and seen <= 50_000:
            points.append((seen, distinct))
    assert extrapolated_distinct(points, seen) == pytest.approx(distinct, rel=0.1)


def test_the_estimate_is_bounded_and_grows_with_the_corpus():
    points = [(1000, 400), (2000, 650), (4000, 1050)]
    small = estimate(points, 10_000, 10_000, workers=2)
    large = estimate(points, 10_000, 10_000_000, workers=2)
    assert large.distinct > small.distinct >= 1050 and large.peak_bytes > small.peak_bytes
    assert extrapolated_distinct([(10, 10), (20, 20)], 10**6) == 10**6  # all new: never more than seen
    pruned = estimate(points, 10_000, 10_000_000, workers=2, kept_share=0.4)
    assert pruned.kept == int(large.distinct * 0.4) and pruned.merging_bytes < large.merging_bytes
    assert large.merging_bytes == 2 * memory_estimate.PROCESS_BYTES + large.distinct * memory_estimate.MERGE_BYTES_PER_DISTINCT
    # Shards of half a million words or more hold them all as long words, in fewer bytes each.
    web = 10_000_000
    assert memory_estimate.merging_bytes(web, 2) == 2 * memory_estimate.PROCESS_BYTES + web * memory_estimate.MERGE_BYTES_PER_DISTINCT_WEB
    with pytest.raises(ValueError):
        heaps_fit([])


def test_the_sample_is_spread_through_the_corpus(tmp_path):
    """Sixteen pieces of a corpus whose first half repeats one word and whose second holds a new word
    each time: the sample sees both halves (a sample of the start would see one distinct word)."""
    path = tmp_path / "c.txt"
    path.write_text(" same00" * 80_000 + "".join(f" b{i:05d}" for i in range(80_000)), encoding="utf-8")  # 7 B each
    points, sample_bytes, kept = memory_estimate.sample_growth(sources.resolve(str(path)), [], "gpt2", "text",
                                                               piece_bytes=4096)
    assert 16 * 4096 <= sample_bytes <= 16 * 4096 + 16 * 64
    assert points == sorted(points) and len(points) == 16
    assert points[7][1] <= 2 and points[-1][1] > 8 * 4096 // 8  # half the pieces hold only new words
    assert kept == 1.0 and memory_estimate.sample_growth(sources.resolve(str(path)), [], "gpt2", "text",
                                                         piece_bytes=4096, min_count=2)[2] < 0.01


def _corpus(tmp_path):
    path = tmp_path / "c.txt"
    rng = random.Random(1)
    path.write_text(" ".join(f"w{rng.randrange(5000)}" for _ in range(20_000)) + "<|endoftext|>", encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["train", "count"])
def test_a_run_above_max_memory_is_refused_before_any_counting(tmp_path, capsys, monkeypatch, command):
    def no_counting(*args, **kwargs):
        raise AssertionError("counted")

    monkeypatch.setattr(counting, "count_pretokens", no_counting)
    monkeypatch.setattr(counting, "count_claimed", no_counting)
    out = tmp_path / "out"
    assert main([command, str(_corpus(tmp_path)), "--out", str(out), "--quiet", "--max-memory", "1M"]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("estimated peak memory ")
    line = captured.err.strip()
    assert line.startswith("bpe: the estimated peak memory, ") and "is above --max-memory 1 MB" in line
    assert "a smaller corpus" in line
    # Pruning lowers the merge loop's memory; a count table keeps every count, so it is named for train only.
    assert ("--min-pretoken-count 2 (drops the pre-tokens seen once)" in line) == (command == "train")
    if command == "count":
        assert "merging" not in captured.out  # bpe count does not merge
    assert not out.exists()


def test_the_estimate_is_printed_before_counting_and_a_run_within_the_limit_goes_on(tmp_path, capsys):
    out = tmp_path / "tok"
    assert main(["train", str(_corpus(tmp_path)), "--vocab-size", "270", "--out", str(out), "--quiet",
                 "--max-memory", "8G"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("estimated peak memory ") and lines[1].startswith("trained on ")
    distinct = int(lines[0].split("about ")[1].split(" distinct")[0].replace(",", ""))
    assert 4000 <= distinct <= 5000  # the corpus holds 4,9xx distinct words
    assert (out / "merges.txt").exists()


def test_training_from_counts_estimates_from_their_rows(tmp_path, capsys):
    counts = tmp_path / "counts.tsv"
    counts.write_text("".join(f"w{i}\t{i % 3 + 1}\n" for i in range(3000)), encoding="utf-8")
    assert main(["train", "--counts", str(counts), "--vocab-size", "270", "--out", str(tmp_path / "t"), "--quiet",
                 "--max-memory", "1M"]) == 1
    assert "about 3,000 distinct pre-tokens" in capsys.readouterr().out
    assert main(["train", "--counts", str(counts), "--vocab-size", "270", "--out", str(tmp_path / "t"), "--quiet",
                 "--max-memory", "1M", "--min-pretoken-count", "3"]) == 1
    kept = int(capsys.readouterr().out.split("pre-tokens, ")[1].split(" of them kept")[0].replace(",", ""))
    assert 950 <= kept <= 1050  # a third have count 3, and the sample is of 2,000 lines


def test_the_heaps_fit_of_a_constant_is_flat():
    k, beta = heaps_fit([(100, 50), (1000, 50), (10_000, 50)])
    assert beta == 0 and math.isclose(k, 50)


def test_sizes_read_in_the_unit_that_shows_them():
    # A --max-memory of 1K once read "above --max-memory 0 MB".
    assert [memory_estimate.readable(n) for n in (3 << 30, 200 << 20, 1 << 20, 1024, 1536)] == [
        "3.0 GB", "200 MB", "1 MB", "1 KB", "2 KB"]


@pytest.mark.parametrize("kept_share, measured_mb", [(1.0, 5432), (14_051_156 / 32_375_543, 3886)])
def test_the_estimate_from_counts_meets_the_measured_peaks(kept_share, measured_mb):
    # `bpe train --counts` on make_web_counts.py's 45 M file (32,375,543 rows), 2 workers, measured by
    # benchmarks/peak_tree_memory.py: 5,432 MB, and 3,886 MB with --min-pretoken-count 2, where reading
    # every row before any is dropped sets the peak (the estimate said 2.4 GB before it counted that).
    estimate = memory_estimate.counts_estimate(32_375_543, workers=2, kept_share=kept_share)
    assert 0.7 <= estimate.peak_bytes / (measured_mb << 20) <= 1.3


def test_a_count_file_read_whole_is_not_told_to_prune(tmp_path, capsys):
    # Reading a count file holds every row before --min-pretoken-count drops any: when reading sets
    # the peak, a higher N (or fewer workers: it reads alone) would not lower it; fewer rows would.
    counts = tmp_path / "counts.tsv"
    counts.write_text("".join(f"w{i}\t1\n" for i in range(3000)), encoding="utf-8")
    args = ["train", "--counts", str(counts), "--vocab-size", "270", "--out", str(tmp_path / "t"), "--quiet",
            "--workers", "2", "--max-memory", "1K"]
    assert main([*args, "--min-pretoken-count", "2"]) == 1
    message = capsys.readouterr().err
    assert "a count file of fewer rows" in message
    assert "--min-pretoken-count" not in message and "--workers" not in message
    assert main(args) == 1  # all rows kept: the merge loop sets the peak, and pruning lowers it
    assert "give --min-pretoken-count 2" in capsys.readouterr().err
