"""A merge shard process that serves some merges, then dies (used by tests/test_train_bpe.py).

Tests point `cs336_basics.train.merge._SHARD_SERVER` at `serve` below. The environment says when and how
to die: DYING_SHARD_AFTER merges are answered, then the process exits with status 7
(DYING_SHARD_HOW=exit) or raises MemoryError (DYING_SHARD_HOW=raise).
"""

import os
from multiprocessing.connection import Connection

from cs336_basics.train import merge


def serve(inbox_fd: int, outbox_fd: int) -> None:
    after, how = int(os.environ["DYING_SHARD_AFTER"]), os.environ["DYING_SHARD_HOW"]
    served = 0
    original_recv = Connection.recv

    def recv(self):
        nonlocal served
        message = original_recv(self)
        if message is not None and len(message) == 2:  # a merge, not the words
            served += 1
            if served > after:
                if how == "exit":
                    os._exit(7)
                raise MemoryError("a worker ran out of memory")
        return message

    Connection.recv = recv
    merge._serve_shard(inbox_fd, outbox_fd)
