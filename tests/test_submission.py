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
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    copy = tmp_path / "repo"
    for name in files:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, copy / name)
    # Things that must stay out of the zip.
    for junk in [".git/config", "cs336_basics/__pycache__/bpe.cpython-311.pyc",
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
