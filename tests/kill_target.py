"""Run the `bpe` command with chosen moments announced, pausing at one of them so that a test can
signal the process at that exact moment (used by tests/test_hostile_input.py, test_broken_inputs.py
and test_dataset_writer.py).

    python tests/kill_target.py AT bpe-arguments...

AT is where to pause:

- `K`: the K-th *write event*. Each call to `os.fsync` (a temporary file is complete but not yet in
  place) and each call to `os.replace` / `os.rename` (a file has just been put in place) is one.
  K = 0 pauses nowhere.
- `K:MODULE:FUNCTION`: the K-th call of MODULE.FUNCTION (e.g. `1:cs336_basics.corpora.sources:read_unit`,
  the first read of a piece of the corpus), announced as the call begins; write events are then
  not announced.
- `exit`: once the command has returned its status, before the process ends.

After each counted event a line `kill_target: <event> <n>` goes to stderr; at the chosen one the
line is `kill_target: paused at <event> <n>` and the process waits, to be signalled then: until the
test writes a line on its standard input (which it does once it has sent its signal; a signal
arriving while the process waits is handled at once, and the wait goes on), or for 3 s when no line
comes (standard input at its end, or nobody writing, as in a worker process). Each process counts
its own events: worker processes forked by the command start from the count at their fork. The
command runs as `bpe` does (`main()` with the process's arguments); nothing else about it changes.
"""

import importlib
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


def paused_at(proc) -> tuple[str | None, list[str]]:
    """(In the test) read the process's stderr up to its `paused at` line: (the event it paused at,
    or None if it ended first; the lines read)."""
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("kill_target: paused at "):
            return line.removeprefix("kill_target: paused at ").strip(), lines
    return None, lines


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
    at = sys.argv[1]
    sys.argv = ["bpe", *sys.argv[2:]]
    pause_at = 0 if at == "exit" else int(at.split(":")[0])
    seen = 0

    def announce(event: str) -> None:
        nonlocal seen
        seen += 1
        if seen == pause_at:
            pause(event, seen)
        else:
            sys.stderr.write(f"kill_target: {event} {seen}\n")
            sys.stderr.flush()

    def wrap(owner, name: str, before: bool):
        real = getattr(owner, name)

        def wrapper(*args, **kwargs):
            if before:
                announce(name)
            result = real(*args, **kwargs)
            if not before:
                announce(name)
            return result

        setattr(owner, name, wrapper)

    if ":" in at:
        _, module, function = at.split(":")
        wrap(importlib.import_module(module), function, before=True)
    elif at != "exit":
        for name in ("fsync", "replace", "rename"):
            wrap(os, name, before=False)

    from cs336_basics.cli import main as bpe_main

    status = bpe_main()
    if at == "exit":
        pause("exit", 1)
    return status


def pause(event: str, n: int) -> None:
    sys.stderr.write(f"kill_target: paused at {event} {n}\n")
    sys.stderr.flush()
    # The test signals us now, then releases us. SIGKILL ends us; SIGINT, which the program defers
    # while it renames its files into place, takes effect here or once the renames are done.
    wait_for_release(3.0)


if __name__ == "__main__":
    sys.exit(main())
