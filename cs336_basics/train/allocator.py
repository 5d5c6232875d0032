"""The C allocator's knobs that bound how much memory a process keeps: glibc's only (elsewhere
these do nothing).

Python keeps small objects in its own arenas, but lists, dict tables and buffers of more than
128 KiB come from the C allocator, which by default serves them from its heap once a block that
large has been freed (its "dynamic mmap threshold"). Freed, such a block stays in the heap,
counted in the process's RSS, until something else fits in it. Training frees many: dict tables
left behind as the tables grow, the lists of a merge's sites, received messages. The setting is
the process's, and stays: it costs a system call per such block, which is small beside the work
of filling it.
"""

import ctypes

_M_MMAP_THRESHOLD = -3  # mallopt's parameter number in glibc's malloc.h


def _libc():
    """This process's C library, or None where it cannot be opened that way (Windows)."""
    try:
        return ctypes.CDLL(None)
    except (OSError, TypeError):
        return None


def release_freed_memory() -> None:
    """Give the pages that the C heap holds free back to the system (glibc's `malloc_trim`).

    Adding up the workers' tables of counts frees some 10-20 MB in the middle of the heap, which
    the heap would otherwise keep for the rest of the training.
    """
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


def return_large_blocks_at_once() -> None:
    """From now on, give blocks of 128 KiB or more back to the system as soon as they are freed
    (each is a mapping of its own), instead of keeping them in the heap for reuse."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, 128 * 1024)
