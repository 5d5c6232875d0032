"""Mutation testing of the core modules with mutmut (not part of CI; see docs/architecture.md).

    uv run --group mutation python scripts/mutation.py [--children 2] [--examples 10] [MUTANT_GLOB ...]
    uv run --group mutation python scripts/mutation.py --modules corpora/executors.py --tests tests/test_sources.py

mutmut changes the code of `corpora.cutting`, `text.pretokenize`, `train.merge`, `encode.encoder` and `bpe` one small mutation at
a time (the configuration is `[tool.mutmut]` in pyproject.toml) and runs, for each mutant, the tests
that call the mutated function; a mutant that no test notices *survives*. To judge a mutant in seconds
the selection leaves out the slow tests (timing, memory caps, GPT-2 fixture parity) and caps every
hypothesis test at `--examples` examples, derandomized (`BPE_MUTATION_EXAMPLES`, see tests/conftest.py).

`--modules` (paths under cs336_basics/) and `--tests` (test files) replace, for this run, the
modules to mutate and the test files to run that pyproject.toml names, so any module can be
checked against the tests that exercise it; tests marked slow are left out then.

The run happens in a fresh copy of the working tree under build/mutation/, so each run starts from
nothing and editing the repository meanwhile changes nothing. Globs such as
`"cs336_basics.corpora.cutting.x__covered*"` restrict the run to some functions. It ends by printing the
score (killed or timed out / all mutants) and the surviving mutants; `mutmut show NAME` run in
build/mutation/ shows the diff of one.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mutation"


def copy_tree() -> None:
    """Copy the tracked and untracked-but-not-ignored files of the working tree to WORK."""
    shutil.rmtree(WORK, ignore_errors=True)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (WORK / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, WORK / name)


def _replace_list(text: str, key: str, items: list[str]) -> str:
    """`text` (pyproject.toml) with the TOML list `key = [...]` holding `items` instead."""
    start = text.index(f"{key} = [")
    depth, i = 0, text.index("[", start)
    while True:
        if text[i] == '"':  # skip a string, which may hold brackets
            i = text.index('"', i + 1)
        elif text[i] == "#":  # skip a comment
            i = text.index("\n", i)
        elif text[i] == "[":
            depth += 1
        elif text[i] == "]":
            depth -= 1
            if depth == 0:
                return text[:start] + f"{key} = {json.dumps(items)}" + text[i + 1 :]
        i += 1


def select(modules: list[str], tests: list[str]) -> None:
    """Mutate `modules` (paths under cs336_basics/) and run `tests`, in the copy's pyproject.toml."""
    path = WORK / "pyproject.toml"
    text = path.read_text(encoding="utf-8")
    if modules:
        for module in modules:
            if not (WORK / "cs336_basics" / module).is_file():
                sys.exit(f"mutation.py: no module cs336_basics/{module}")
        text = _replace_list(text, "only_mutate", [f"*cs336_basics/{m}" for m in modules])
    if tests:
        text = _replace_list(text, "pytest_add_cli_args_test_selection", [*tests, "-m", "not slow"])
    path.write_text(text, encoding="utf-8")


def summarize() -> tuple[Counter, list[str]]:
    from mutmut.stats import status_by_exit_code

    statuses: Counter = Counter()
    survivors = []
    for meta in sorted((WORK / "mutants").rglob("*.meta")):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            status = status_by_exit_code[code]
            if status == "not checked":  # outside the globs asked for
                continue
            statuses[status] += 1
            if status not in ("killed", "timeout"):
                survivors.append(f"{name}: {status}")
    return statuses, survivors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mutants", nargs="*", help="mutant name globs (default: all)")
    parser.add_argument("--children", type=int, default=2, help="parallel test processes (default 2)")
    parser.add_argument("--examples", type=int, default=10, help="hypothesis examples per test (default 10)")
    parser.add_argument("--modules", nargs="+", default=[], help="modules to mutate, under cs336_basics/")
    parser.add_argument("--tests", nargs="+", default=[], help="test files to run against them")
    args = parser.parse_args()
    try:
        import mutmut  # noqa: F401
    except ImportError:
        sys.exit("mutation.py needs mutmut: run it with `uv run --group mutation python scripts/mutation.py`")

    copy_tree()
    select(args.modules, args.tests)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["BPE_MUTATION_EXAMPLES"] = str(args.examples)
    command = [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.children), *args.mutants]
    status = subprocess.run(command, cwd=WORK, env=env).returncode

    statuses, survivors = summarize()
    total = sum(statuses.values())
    caught = statuses["killed"] + statuses["timeout"]
    print("\nsurviving mutants:" if survivors else "\nno surviving mutants")
    for line in survivors:
        print("   ", line)
    print(", ".join(f"{n} {s}" for s, n in statuses.most_common()))
    if total:
        print(f"mutation score: {caught}/{total} = {caught / total:.1%}")
    return status


if __name__ == "__main__":
    sys.exit(main())
