"""make_submission.sh, run in a temporary copy of the repository."""

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def require_uv() -> None:
    """make_submission.sh runs uv. CI always has it (.ci/run installs it), so there its absence fails
    the test; elsewhere the test is skipped, with the reason shown (`pytest -rs`)."""
    if shutil.which("uv") is None:
        if os.environ.get("CI"):
            pytest.fail("uv is not on PATH in CI, where .ci/run installs it")
        pytest.skip("make_submission.sh runs uv, which is not on PATH (pip install uv)")


@pytest.mark.slow
def test_make_submission_zips_code_and_tests_only(tmp_path):
    require_uv()
    copy = copy_as_clone(tmp_path)
    # Things that must stay out of the zip.
    for junk in ["cs336_basics/__pycache__/bpe.cpython-311.pyc",
                 "data/owt.txt", "tokens.npy", "out/vocab.json", "weights.bin", "old.zip", ".pytest_cache/x",
                 "venv/lib/y.py"]:
        (copy / junk).parent.mkdir(parents=True, exist_ok=True)
        (copy / junk).write_text("junk")

    if (REPO / "uv.lock").exists():
        # A student's clone has the lock its first `uv run` wrote; without it uv resolves every
        # dependency again, which takes most of this test's time.
        shutil.copy2(REPO / "uv.lock", copy / "uv.lock")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}  # let uv make the copy's own .venv
    result = subprocess.run(
        ["bash", "make_submission.sh", "tests/test_train_bpe.py", "-k", "overlapping"],
        cwd=copy, capture_output=True, text=True, timeout=600, env=env,
    )
    assert result.returncode == 0, result.stderr
    with zipfile.ZipFile(copy / "cs336-spring2025-assignment-1-submission.zip") as zf:
        names = set(zf.namelist())
    assert {"cs336_basics/bpe.py", "tests/adapters.py", "tests/test_train_bpe.py", "test_results.xml",
            "pyproject.toml", "README.md", "make_submission.sh"} <= names
    assert (copy / ".venv").is_dir()  # made by uv run, and left out below
    assert not any(n.startswith(("tests/fixtures/", ".git/", ".venv/", "venv/", ".pytest_cache/")) for n in names)
    assert not any(n.endswith((".txt", ".json", ".npy", ".bin", ".zip", ".pyc")) for n in names)
    # The tests it ran are the ones asked for, and they passed.
    results = zf_text(copy / "cs336-spring2025-assignment-1-submission.zip", "test_results.xml")
    assert 'failures="0"' in results and 'errors="0"' in results and "test_overlapping_pairs_count_twice" in results


def copy_as_clone(tmp_path) -> Path:
    """The files git tracks, copied into a new git checkout (files added, nothing committed): what a
    student's clone holds before any run."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    copy = tmp_path / "repo"
    for name in filter(None, files.split("\0")):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, copy / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=copy, check=True)
    subprocess.run([*git, "add", "-A"], cwd=copy, check=True)
    return copy


def bpe(copy: Path, *args: str) -> None:
    """`bpe ARGS` run in `copy` (its own package), as a student runs it after following README."""
    import sys

    subprocess.run([sys.executable, "-m", "cs336_basics.cli", *args, "--quiet"], cwd=copy, check=True,
                   capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(copy)})


# The zip's rule, as make_submission.sh states it: tracked files but tests/fixtures/ and data files,
# and the code a student added.
DATA = (".txt", ".json")


@pytest.mark.slow
def test_zip_after_runs_holds_tracked_and_new_code_and_no_outputs(tmp_path):
    require_uv()
    if shutil.which("git") is None:
        pytest.skip("the test makes a git checkout, and git is not on PATH")
    copy = copy_as_clone(tmp_path)
    tracked = set(subprocess.run(["git", "ls-files"], cwd=copy, capture_output=True, text=True,
                                 check=True).stdout.split())
    (copy / "corpus.txt").write_text((copy / "cs336_basics/data/sample.txt").read_text()[:20_000])
    # What following README leaves behind: in out/ (ignored) and beside it (neither tracked nor ignored).
    bpe(copy, "train", "corpus.txt", "--vocab-size", "300", "--out", "out/tok")
    bpe(copy, "train", "corpus.txt", "--vocab-size", "300", "--out", "tok")
    bpe(copy, "encode", "corpus.txt", "--tokenizer", "tok", "--out", "tokens.npy")
    bpe(copy, "encode", "corpus.txt", "--tokenizer", "tok", "--out", "megatron/train", "--format", "megatron")
    bpe(copy, "count", "corpus.txt", "--out", "words")
    outputs = {"corpus.txt", "tokens.npy", "megatron/train.bin", "megatron/train.idx", "tok/merge_log.tsv",
               "tok/vocab.json", "out/tok/merge_log.tsv"}
    (copy / "report.html").write_text("<html>a report</html>")
    (copy / "gpt2.tiktoken").write_text("IQ== 0")
    outputs |= {"report.html", "gpt2.tiktoken"}
    (copy / "cs336_basics" / "my_module.py").write_text("ANSWER = 42\n")  # a student's own module
    for name in outputs:
        assert (copy / name).is_file(), name
    assert any((copy / "words").iterdir())

    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    result = subprocess.run(["bash", "make_submission.sh", "--zip-only"], cwd=copy, capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert not (copy / "test_results.xml").exists()  # --zip-only ran no tests
    with zipfile.ZipFile(copy / "cs336-spring2025-assignment-1-submission.zip") as zf:
        names = set(zf.namelist())
    expected = {n for n in tracked if not n.startswith("tests/fixtures/") and not n.endswith(DATA)}
    assert names == expected | {"cs336_basics/my_module.py"}
    assert not names & outputs
    assert not any(n.startswith(("out/", "tok/", "words/", "megatron/")) for n in names)


@pytest.mark.slow
def test_zip_outside_a_git_checkout_says_so_and_leaves_outputs_out(tmp_path):
    require_uv()
    copy = copy_as_clone(tmp_path)
    shutil.rmtree(copy / ".git")  # as a zip download unpacks
    for junk in ["out/tok/merge_log.tsv", "report.html", "tokens.npy", ".venv/lib/x.py", "words/shard-00000.parquet"]:
        (copy / junk).parent.mkdir(parents=True, exist_ok=True)
        (copy / junk).write_text("junk")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    result = subprocess.run(["bash", "make_submission.sh", "--zip-only"], cwd=copy, capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert "not a git checkout" in result.stderr
    with zipfile.ZipFile(copy / "cs336-spring2025-assignment-1-submission.zip") as zf:
        names = set(zf.namelist())
    assert {"cs336_basics/bpe.py", "cs336_basics/report/page.html", "tests/adapters.py", "make_submission.sh"} <= names
    outside_package = [n for n in names if not n.startswith("cs336_basics/report/")]  # whose pages are .html
    assert not any(n.startswith(("out/", ".venv/", "words/", "tests/fixtures/")) for n in names)
    assert not any(n.endswith((".html", ".npy", ".txt", ".parquet")) for n in outside_package)


def zf_text(zip_path, name: str) -> str:
    with zipfile.ZipFile(zip_path) as zf:
        return zf.read(name).decode("utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("ci, outcome", [("true", "failed"), ("", "skipped")])
def test_missing_uv_fails_in_ci_and_is_skipped_visibly_elsewhere(tmp_path, ci, outcome):
    import sys

    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PATH": str(tmp_path), "CI": ci}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", "-n", "0", "--all", f"{__file__}::test_make_submission_zips_code_and_tests_only"],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=env,
    )
    assert f"1 {outcome}" in result.stdout, result.stdout
    assert "uv" in result.stdout.split("short test summary info")[-1]
