"""Test-session settings.

- `uv run pytest` runs every test but those marked `slow`, in one process per core (pytest-xdist,
  `addopts` in pyproject.toml), a test file at a time per process.
- `uv run pytest --all` runs them all, as CI does (`.ci/run`): killing runs at every write, fuzzing
  with thousands of examples, whole pretrained vocabularies, megabyte inputs, the Dask cluster,
  the browser, the make-submission script.
- `uv run pytest --quick` is the inner loop: it leaves out the tests marked `slow` (kill-and-resume,
  whole pretrained vocabularies, megabyte inputs, the Dask cluster, the browser, the reference trainer
  on larger fixtures), runs a parametrized test with its first parameters only, and every hypothesis
  test on at most 10 examples, derandomized.
- `uv run pytest` without `--all` runs every hypothesis test on at most 40 examples (derandomized);
  `--all` runs the whole number each test asks for (hundreds, thousands for the fuzzers).
- With `BPE_MUTATION_EXAMPLES=N` (set by scripts/mutation.py) every hypothesis test runs at most N
  examples, derandomized, so each mutant is judged in seconds and the same way twice.
- Hypothesis tests draw the same examples on every run, by default and in CI (the settings profile
  `fixed`, Hypothesis's own `ci` profile: a seed fixed per test, no example database, no deadline),
  so whether a test catches a bug never changes from one run to the next, nor with the machine's
  load. For a deeper search with new examples each run, select the profile `random`:
  `BPE_HYPOTHESIS_PROFILE=random uv run pytest ...` or `uv run pytest --hypothesis-profile random ...`
  (it keeps failing examples in `.hypothesis/` to try first next time).
"""

import os
import signal
import sys

import pytest
from hypothesis import settings

# Many containers set PYTHONDONTWRITEBYTECODE, and `uv sync` writes no bytecode: then every process
# the suite starts (the xdist workers, and the hundreds of `bpe` commands the tests run) compiles
# numpy, hypothesis and our modules from source again, and pytest rewrites hypothesis's hundred
# modules anew in each worker. Writing the caches, once, saves far more than the run they are
# written in costs. (The processes started after this inherit the environment.)
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

_MUTATION_EXAMPLES = os.environ.get("BPE_MUTATION_EXAMPLES")
_QUICK_EXAMPLES = 10
# `uv run pytest` (no --all) runs each hypothesis test on at most this many examples, so the suite
# stays within 90 s on two cores; `--all` (CI) runs every test on all the examples it asks for.
_DEFAULT_EXAMPLES = 40

# Registered and loaded here, on import, before any test module makes its settings (each test's
# `@settings(...)` takes what it does not say from the profile loaded then).
settings.register_profile("fixed", settings.get_profile("ci"))
settings.register_profile("random", settings.get_profile("default"), deadline=None)
settings.load_profile(os.environ.get("BPE_HYPOTHESIS_PROFILE", "fixed"))


def pytest_configure(config):
    # A shell starts a background job (`pytest &`, some CI runners) with Ctrl-C ignored, and every
    # process it starts inherits that, so the tests of what Ctrl-C does would see nothing happen.
    # A handler of Python's own is reset to the default in the programs the tests start.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    profile = config.getoption("--hypothesis-profile", None)
    if profile:  # hypothesis's plugin loads it too, but maybe before this file registered ours
        settings.load_profile(profile)


def pytest_addoption(parser):
    parser.addoption("--all", action="store_true", help="also run the tests marked slow, as CI does")
    parser.addoption(
        "--quick", action="store_true",
        help="the inner loop: skip tests marked slow, at most 10 hypothesis examples per test",
    )


def pytest_collection_modifyitems(config, items):
    # Dask's client leaves threads in this process, and forking a process that has other threads
    # can deadlock a child; the rest of the suite forks workers, so the Dask tests run last (with
    # xdist's `--dist loadfile`, last in whichever process runs their file).
    items.sort(key=lambda item: item.nodeid.startswith("tests/test_dask.py"))
    quick = config.getoption("--quick")
    if not quick and not config.getoption("--all") and "slow" not in (config.getoption("markexpr") or ""):
        later = pytest.mark.skip(reason="slow: run with --all")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(later)
    if quick:
        slow = pytest.mark.skip(reason="slow: left out by --quick")
        repeat = pytest.mark.skip(reason="--quick runs the first parameters of a test only")
        seen = set()
        for item in items:
            function = (item.nodeid.split("::")[0], getattr(item, "originalname", item.name))
            if "slow" in item.keywords:
                item.add_marker(slow)
            elif function in seen:
                item.add_marker(repeat)
            seen.add(function)
    if _MUTATION_EXAMPLES:
        cap = int(_MUTATION_EXAMPLES)
    elif quick:
        cap = _QUICK_EXAMPLES
    elif not config.getoption("--all"):
        cap = _DEFAULT_EXAMPLES
    else:
        return
    for item in items:
        test = getattr(item, "obj", None)
        current = getattr(test, "_hypothesis_internal_use_settings", None)
        if current is not None:
            test._hypothesis_internal_use_settings = settings(
                current, max_examples=min(current.max_examples, cap), derandomize=True, database=None
            )


if _MUTATION_EXAMPLES:

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(item):
        # mutmut runs each mutant's tests in a process forked from one that has run the suite, so
        # the caches of `patterns.get` and `pipelines.get` are warm: a mutant of what they call
        # (validation, `_boundary_regexes`, `pipelines._step`) would never run and always survive.
        # Each test starts with them empty (before its fixtures), so the mutated code does run.
        from cs336_basics.text import patterns, pipelines

        patterns.get.cache_clear()
        pipelines.get.cache_clear()


@pytest.fixture(scope="module")
def tiktoken_cache(tmp_path_factory):
    """tiktoken's cache folder holding every rank file (from the test dependencies, checked by hash),
    set as TIKTOKEN_CACHE_DIR for one test module, so tiktoken's loader works offline."""
    from tests.common import fill_tiktoken_cache

    folder = tmp_path_factory.mktemp("tiktoken-cache")
    fill_tiktoken_cache(folder)
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    yield folder
    if before is None:
        del os.environ["TIKTOKEN_CACHE_DIR"]
    else:
        os.environ["TIKTOKEN_CACHE_DIR"] = before
