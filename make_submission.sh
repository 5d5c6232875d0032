#!/usr/bin/env bash
# Run the tests (writing test_results.xml), then zip the code and tests for submission.
# The zip leaves out .git, virtual environments, caches, tests/fixtures, data files and archives.
# Arguments, if any, go to pytest (e.g. ./make_submission.sh tests/test_train_bpe.py).
set -uo pipefail
cd "$(dirname "$0")"
uv run pytest --junitxml=test_results.xml "$@" || echo "Some tests failed; the submission is written anyway, with test_results.xml." >&2
uv run python - <<'PY'
import os
import zipfile
from pathlib import Path

OUT = "cs336-spring2025-assignment-1-submission.zip"
SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache", ".mypy_cache",
             "build", "dist"}
SKIP_SUFFIXES = {".txt", ".json", ".npy", ".bin", ".zip", ".tar", ".gz", ".tgz", ".xz", ".bz2", ".7z", ".pyc"}

root = Path(".")
with zipfile.ZipFile(OUT + ".tmp", "w", compression=zipfile.ZIP_DEFLATED) as zf:
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames
            if d not in SKIP_DIRS and not d.endswith(".egg-info") and (here / d).as_posix() != "tests/fixtures"
        )
        for name in sorted(filenames):
            path = here / name
            if path.suffix in SKIP_SUFFIXES or name.startswith(OUT):
                continue
            zf.write(path, path.as_posix())
os.replace(OUT + ".tmp", OUT)
print(f"wrote {OUT}")
PY
