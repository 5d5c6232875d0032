"""How long a regex from elsewhere (a custom pattern, a `tokenizer.json`'s Split step) may run on
one text before it is stopped with `PatternTimeout`.

Both `patterns` and `pipelines` run such regexes; this module, which imports neither, holds the
limit they share, so that imports between them flow one way (`patterns` -> `pipelines`).
"""

# The time a custom regex may take on one document: this much, plus this much per MB of it. Far
# more than any sane regex needs (the `regex` package runs GPT-2's at some 8 MB/s), far less than
# catastrophic backtracking, which can take years on a line of 50 characters.
TIMEOUT_SECONDS = 10.0
TIMEOUT_SECONDS_PER_MB = 10.0


def custom_timeout(length: int) -> float:
    """Seconds a custom regex may run on a document of `length` characters."""
    return TIMEOUT_SECONDS + TIMEOUT_SECONDS_PER_MB * length / 1e6
