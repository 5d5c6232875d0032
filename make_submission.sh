#!/usr/bin/env bash
# Make the CS336 submission: run the tests (writing test_results.xml), then zip the code and tests.
#
#   ./make_submission.sh                         all the tests, then the zip
#   ./make_submission.sh tests/test_train_bpe.py  arguments go to pytest
#   ./make_submission.sh --zip-only              only the zip (with the test_results.xml there is, if any)
#
# What the zip holds, as git lists it (so nothing git ignores: out/, .venv/, caches):
#   - the files git tracks, except tests/fixtures/ and data files (.txt, .json and the like), which
#     the graders bring themselves, as the course's own script leaves them out;
#   - the files git neither tracks nor ignores that are code or text you wrote (.py, .md, .toml, .sh,
#     .cfg, .ini, .yaml, .ipynb): a module you added goes in, a run's outputs do not (token arrays,
#     count tables, merge logs, report pages, .tiktoken files, Megatron .bin/.idx, archives);
#   - test_results.xml.
# Never a virtual environment, cache or output folder (venv/, .venv/, __pycache__/, out/ ...), even
# where git does not ignore it.
# Outside a git checkout (a zip download) the folder is walked instead: the files under cs336_basics/
# count as tracked, the others as untracked, and out/, .git, virtual environments and caches are skipped.
set -uo pipefail
cd "$(dirname "$0")"
if [ "${1:-}" = "--zip-only" ]; then
    shift
else
    uv run pytest --junitxml=test_results.xml "$@" || echo "Some tests failed; the submission is written anyway, with test_results.xml." >&2
fi
# The zip needs only the standard library (of any Python 3.7 or later): no project environment.
uv run --no-project --quiet python - <<'PY'
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

OUT = "cs336-spring2025-assignment-1-submission.zip"
DATA_DIRS = ("tests/fixtures/",)
DATA_SUFFIXES = {".txt", ".json", ".jsonl", ".csv", ".tsv", ".parquet", ".arrow", ".npy", ".npz", ".bin", ".idx",
                 ".tiktoken", ".pkl", ".pickle", ".pt", ".pth", ".safetensors", ".zip", ".tar", ".gz", ".tgz",
                 ".xz", ".bz2", ".zst", ".7z", ".pyc"}
SOURCE_SUFFIXES = {".py", ".pyi", ".md", ".toml", ".sh", ".cfg", ".ini", ".yaml", ".yml", ".ipynb"}
SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache", ".mypy_cache",
             "build", "dist", "out", "mutants"}


def wanted(name: str, tracked: bool) -> bool:
    """Whether the file at `name` (a path relative to the repository, with /) goes in the zip."""
    parts = name.split("/")
    if name.startswith(DATA_DIRS) or Path(name).suffix.lower() in DATA_SUFFIXES:
        return False
    if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in parts[:-1]):
        return False
    return tracked or Path(name).suffix.lower() in SOURCE_SUFFIXES


def git_files(*options: str) -> list[str] | None:
    """`git ls-files` with `options` here, or None when this folder is not the top of a git checkout."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True)
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != Path.cwd().resolve():
            return None
        listed = subprocess.run(["git", "ls-files", "-z", *options], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return [name for name in listed.stdout.split("\0") if name]


tracked = git_files()
untracked = git_files("--others", "--exclude-standard")
if tracked is None or untracked is None:
    print("make_submission.sh: this folder is not a git checkout (a zip download?), so git cannot say which files "
          "are yours; packing the files under cs336_basics/ and the code and text files elsewhere, "
          f"leaving out {', '.join(sorted(SKIP_DIRS))}", file=sys.stderr)
    tracked, untracked = [], []
    for dirpath, dirnames, filenames in os.walk("."):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for filename in filenames:
            name = Path(dirpath, filename).as_posix()
            name = name[2:] if name.startswith("./") else name
            (tracked if name.startswith("cs336_basics/") else untracked).append(name)

names = {n for n in tracked if wanted(n, True)} | {n for n in untracked if wanted(n, False)}
names = sorted(n for n in names if os.path.isfile(n))  # a tracked file may have been deleted
if os.path.isfile("test_results.xml"):
    names.append("test_results.xml")
with zipfile.ZipFile(OUT + ".tmp", "w", compression=zipfile.ZIP_DEFLATED) as zf:
    for name in names:
        zf.write(name, name)
os.replace(OUT + ".tmp", OUT)
print(f"wrote {OUT} ({len(names)} files, {os.path.getsize(OUT):,} bytes)")
PY
