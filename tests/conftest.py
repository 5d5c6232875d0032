"""Test-session settings. With `BPE_MUTATION_EXAMPLES=N` (set by scripts/mutation.py) every hypothesis
test runs at most N examples, derandomized, so each mutant is judged in seconds and the same way twice."""

import os

_MUTATION_EXAMPLES = os.environ.get("BPE_MUTATION_EXAMPLES")


def pytest_collection_modifyitems(items):
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
