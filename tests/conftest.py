"""Test-session settings. With `BPE_MUTATION_EXAMPLES=N` (set by scripts/mutation.py) every hypothesis
test runs at most N examples, derandomized, so each mutant is judged in seconds and the same way twice."""

import os

import pytest

_MUTATION_EXAMPLES = os.environ.get("BPE_MUTATION_EXAMPLES")


def pytest_collection_modifyitems(items):
    # Dask's client leaves threads in this process, and forking a process that has other threads
    # can deadlock a child; the rest of the suite forks workers, so the Dask tests run last.
    items.sort(key=lambda item: item.nodeid.startswith("tests/test_dask.py"))
    if not _MUTATION_EXAMPLES:
        return
    from hypothesis import settings

    cap = int(_MUTATION_EXAMPLES)
    for item in items:
        test = getattr(item, "obj", None)
        current = getattr(test, "_hypothesis_internal_use_settings", None)
        if current is not None:
            test._hypothesis_internal_use_settings = settings(
                current, max_examples=min(current.max_examples, cap), derandomize=True, database=None
            )


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
