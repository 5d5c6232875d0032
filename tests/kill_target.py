"""Run the `bpe` command with its final writes announced, pausing at one of them so that a test can
kill the process at that exact moment (used by tests/test_hostile_input.py).

    python tests/kill_target.py K bpe-arguments...

Each call to `os.fsync` (a temporary file is complete but not yet in place) and each call to
`os.replace` / `os.rename` (a file has just been put in place) is a *write event*. After each one a
line `kill_target: <event> <n>` goes to stderr; after the K-th one the line is
`kill_target: paused at <event> <n>` and the process waits, to be signalled then: until the test
writes a line on its standard input (which it does once it has sent its signal; a signal arriving
while the process waits is handled at once, and the wait goes on), or for 3 s when no line comes
(standard input at its end, or nobody writing). K = 0 pauses nowhere. Nothing else about the
command changes.
"""

import os
import select
import sys
import time


def release(proc) -> None:
    """(In the test) let the process, paused and signalled, go on: a line on its stdin, which must
    be a text-mode pipe. Nothing happens if it is gone."""
    try:
        proc.stdin.write("go on\n")
        proc.stdin.flush()
    except OSError:  # BrokenPipeError: it has ended
        pass


def wait_for_release(seconds: float) -> None:
    """Return when a line arrives on stdin, or after `seconds` if none does."""
    deadline = time.monotonic() + seconds
    try:
        while (left := deadline - time.monotonic()) > 0:
            if select.select([sys.stdin], [], [], left)[0]:
                if sys.stdin.readline():
                    return
                break  # stdin is at its end: nobody will write
    except (OSError, ValueError):  # no usable stdin
        pass
    time.sleep(max(0.0, deadline - time.monotonic()))


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
            wait_for_release(3.0)
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
