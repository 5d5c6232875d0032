"""Run the `bpe` command with its final writes announced, pausing at one of them so that a test can
kill the process at that exact moment (used by tests/test_hostile_input.py).

    python tests/kill_target.py K bpe-arguments...

Each call to `os.fsync` (a temporary file is complete but not yet in place) and each call to
`os.replace` / `os.rename` (a file has just been put in place) is a *write event*. After each one a
line `kill_target: <event> <n>` goes to stderr; after the K-th one the line is
`kill_target: paused at <event> <n>` and the process waits for a line on its standard input, which
the test writes once it has sent its signal (a signal arriving while the read waits is handled at
once: Python runs the handler, then goes on reading). K = 0 pauses nowhere. Nothing else about the
command changes.
"""

import os
import sys


def main() -> int:
    pause_at = int(sys.argv[1])
    argv = sys.argv[2:]
    seen = 0

    def announce(event: str) -> None:
        nonlocal seen
        seen += 1
        if seen == pause_at:
            sys.stderr.write(f"kill_target: paused at {event} {seen}\n")
            sys.stderr.flush()
            # The test signals us now, then releases us. SIGKILL ends us; SIGINT, which the program
            # defers while it renames its files into place, takes effect here or once the renames
            # are done.
            sys.stdin.readline()
        else:
            sys.stderr.write(f"kill_target: {event} {seen}\n")
            sys.stderr.flush()

    def wrap(name: str):
        real = getattr(os, name)

        def wrapper(*args, **kwargs):
            result = real(*args, **kwargs)
            announce(name)
            return result

        return wrapper

    for name in ("fsync", "replace", "rename"):
        setattr(os, name, wrap(name))

    from cs336_basics.cli import main as bpe_main

    return bpe_main(argv)


if __name__ == "__main__":
    sys.exit(main())
