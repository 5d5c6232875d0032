"""The library's own errors, in one place: what a user can mend or must know, each ending `bpe` with
one line (`bpe: ...`) and the exit status docs/cli.md's table gives.

Every class here derives from `BpeError` and also from the built-in error a caller would catch
without knowing ours (a timed-out pattern is a `ValueError`, a missing extra an `ImportError`), so
`except ValueError` keeps working. This module imports nothing of ours: every package may raise
these.
"""


class BpeError(Exception):
    """The base of the library's errors: `bpe` prints the message on one line and exits with 1."""


class WorkerError(BpeError, RuntimeError):
    """A worker process died (killed, out of memory) or the executor stopped working, in counting,
    merging or encoding alike; the message says what was kept."""


class MissingExtra(BpeError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""


class PatternTimeout(BpeError, ValueError):
    """A custom regex ran past its time limit on a document (see `text.timeouts.custom_timeout`)."""


class DatasetBusy(BpeError, RuntimeError):
    """Another run holds the dataset directory."""


def missing_extra(extra: str, what: str, *, package: str | None = None, instead: str | None = None) -> MissingExtra:
    """The error for an optional dependency that is not installed: `what` needs `package` (default:
    the extra's name), installed by the extra `extra`; `instead` says what else the user may do.

    >>> str(missing_extra("tiktoken", "engine 'tiktoken'", instead="or use engine 'python'"))
    "engine 'tiktoken' needs tiktoken, which is not installed: pip install 'cs336-basics[tiktoken]' (the `tiktoken` extra; or use engine 'python')"
    """
    hint = f"the `{extra}` extra; {instead}" if instead else f"the `{extra}` extra"
    return MissingExtra(f"{what} needs {package or extra}, which is not installed: pip install 'cs336-basics[{extra}]' ({hint})")


class CommandError(BpeError):
    """Input that a `bpe` command cannot use: a missing or unreadable file, an output that would
    replace an input, options that do not go together. Raised by the command line, where the input
    enters."""
