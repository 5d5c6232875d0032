"""The BPE merge loop: from pre-token counts to the list of merges, exactly as CS336 defines it.

Each step merges the most frequent adjacent pair; among equally frequent pairs the one whose
`(bytes_of_left, bytes_of_right)` is lexicographically *greatest* wins.

How it stays fast in pure Python:
- each distinct pre-token is a string with one character per token id, so finding a pair and
  merging it (`str.partition`, `str.replace`: left to right, non-overlapping) and testing
  staleness run in C; a pair is named by one int, `left << 21 | right` (see `_pair_id`), which
  takes less memory and pickles faster than a two-character string;
- pair counts are updated only around each merge site, in the pre-tokens that hold the pair, found
  through an index pair -> pre-token numbers (stale entries are skipped by one failed search). Per
  site the loop only files the word's number under its left and right neighbour; the counts are
  summed per neighbour afterwards, in C, and those lists become the new pairs' index entries;
- the best pair comes from a lazy max-heap that holds only the pairs counted above a floor; the rest
  wait in buckets until the floor comes down to them, since most pairs never come near the top
  (see `pair_queue.PairQueue`);
- the words can be split into shards, each merged by its own process (a fresh interpreter given only
  its words): a shard reports how the pair counts changed, and this process adds the changes up and
  chooses the next pair;
- long words (with pattern "none" whole documents, maybe megabytes; most of SuperBPE's stage 2),
  where a pass over each word per merge would cost too much, are one array of token ids with the
  positions of each pair, so a merge costs a few NumPy operations over its sites (see `long_words`);
  so are all the words of a web-scale shard (half a million distinct pre-tokens or more), where
  the first merges each touch hundreds of thousands of words.
"""

import gc
import os
import subprocess
import sys
import time
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection

from cs336_basics.train import allocator
from cs336_basics.train.forced import apply_forced, forced_pairs
from cs336_basics.train.pair_queue import RIGHT, SHIFT, PairQueue, Unheard


def _reversed_order_key(token: bytes) -> str:
    """A string whose order is the reverse of the order of `token` among byte strings.

    Each byte b becomes chr(255 - b) and a terminator chr(256), greater than every such character,
    ends it; so a prefix sorts after its extensions, as it must when the order is reversed. The
    keys are prefix-free, so the key of a pair is simply the two keys concatenated.
    """
    return "".join([chr(255 - b) for b in token]) + "\u0100"


# A pair of token ids (left, right) is the int left << SHIFT | right (see `pair_queue`).


def _pair_id(pair: str) -> int:
    """The int naming a pair given as two id-characters."""
    return ord(pair[0]) << SHIFT | ord(pair[1])


def _pair_chars(pair: int) -> str:
    """The two id-characters of a pair named by an int (see `_pair_id`)."""
    return chr(pair >> SHIFT) + chr(pair & RIGHT)


def train_merges(
    word_counts: dict[bytes, int],
    num_merges: int,
    *,
    num_shards: int = 1,
    on_merge: Callable[[int], None] | None = None,
    merge_log: list[tuple[int, int]] | None = None,
    forced: list[tuple[bytes, bytes]] = (),
    known: set[bytes] | None = None,
    allows: Callable[[bytes], bool] | None = None,
) -> list[tuple[bytes, bytes]]:
    """Learn up to `num_merges` merges from pre-token counts; fewer when no pair is left.

    The first merges are `forced` (see `forced`), each made as a chosen one is, counted or not;
    the rule chooses after the last of them. `num_merges` counts them too: given more forced merges
    than that, the first `num_merges` of them are the result.
    With a set of `known` tokens (the vocabulary being extended; added to), a chosen merge making
    one of them, or a token an earlier merge made, does not count towards `num_merges`.
    With `allows` (SuperBPE's limits, see `pair_queue.superword_limits`), a pair whose token it
    refuses is passed over for good when it comes up: no merge, nothing logged, and the next most
    frequent pair is taken (a pair's token never changes, so the decision stands). The forced
    merges are not tested.

    Token ids are 0..255 for single bytes and 256 + k for the k-th merge. With `num_shards` > 1 the
    words are split among that many processes (this one included); the merges are the same.
    `on_merge(k)` is called after each merge (for progress bars). A `merge_log` list, if given,
    receives `(count, shrink)` for each merge: the pair's count when it was chosen, and by how many
    tokens the corpus shrank. They differ only where occurrences overlap: `aaa` holds `(a, a)` twice
    but merges it once.
    """
    num_shards = max(1, min(num_shards, len(word_counts))) if os.name == "posix" else 1
    forced_ids = forced_pairs(forced, SHIFT)[:max(num_merges, 0)]  # checked before any work
    allocator.return_large_blocks_at_once()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the loop allocates millions of small objects and frees none in cycles
    remotes: list[_RemoteShard] = []
    try:
        # The other processes start first, so that their interpreters load while this one copies.
        remotes = [_RemoteShard() for _ in range(1, num_shards)]
        # The pre-tokens that can merge (single tokens never do). Each shard makes its own strings (see _Shard).
        words = [word for word, n in word_counts.items() if len(word) > 1 and n > 0]
        counts = list(map(word_counts.__getitem__, words))
        del word_counts  # freed here when the caller handed over its only reference (as train_bpe does)
        # The forced merges are made on the words before the loop, by each shard on its own words, at
        # once (once per distinct piece in a shard, see `apply_forced`).
        forced = forced[:len(forced_ids)]
        log = merge_log is not None
        long = _long_threshold(words, num_shards)
        for k, remote in enumerate(remotes, start=1):
            remote.start(words[k::num_shards], counts[k::num_shards], long, forced, log)
        words, counts = words[::num_shards], counts[::num_shards]  # the other shards' words are freed
        local, forced_log = _prepared_shard(words, counts, long, forced, log)
        del words, counts
        pair_counts = local.count_pairs()
        for remote in remotes:
            pairs, remote_counts, remote_log = remote.receive()
            _add(pair_counts, zip(pairs, remote_counts))
            del pairs, remote_counts
            forced_log = _added_logs(forced_log, remote_log)
        return _merge_loop(pair_counts, local, remotes, num_merges, on_merge, merge_log, forced, forced_log, known,
                           allows)
    finally:
        for remote in remotes:
            remote.close()
        if gc_was_enabled:
            gc.enable()


def _prepared_shard(
    words: list, counts: list[int], long: int, forced: list[tuple[bytes, bytes]], log: bool
) -> tuple["_Shard", list[tuple[int, int]] | None]:
    """A shard of `words` (pre-tokens in UTF-8) and their `counts`, with the `forced` merges made on
    them, and with `log`, each forced merge's `(count, shrink)` in these words (see `apply_forced`)."""
    words, counts, forced_log = apply_forced(words, counts, forced, forced_pairs(forced, SHIFT), SHIFT, log)
    return _Shard(words, counts, long), forced_log


def _added_logs(a: list[tuple[int, int]] | None, b: list[tuple[int, int]] | None) -> list[tuple[int, int]] | None:
    """Two shards' forced merge logs added up, merge by merge."""
    if a is None or b is None:
        return a if b is None else b
    return [(count + other, shrink + more) for (count, shrink), (other, more) in zip(a, b)]


def _merge_loop(
    pair_counts: dict[int, int],
    local: "_Shard",
    remotes: list["_RemoteShard"],
    num_merges: int,
    on_merge: Callable[[int], None] | None,
    merge_log: list[tuple[int, int]] | None,
    forced: list[tuple[bytes, bytes]],
    forced_log: list[tuple[int, int]] | None,
    known: set[bytes] | None,
    allows: Callable[[bytes], bool] | None = None,
) -> list[tuple[bytes, bytes]]:
    """Choose and make the merges after the `forced` ones, made on the words already (with their
    merge log entries `forced_log`; for `known` and `allows`, see `train_merges`). With remote shards, the next
    pair is usually chosen before their changes for the last merge are in (see `Unheard`), so that
    they merge it while this process merges its own words, rather than each waiting for the other."""
    merges = list(forced)
    token_bytes = [bytes([i]) for i in range(256)] + [left + right for left, right in merges]
    if known is not None:
        known.update(token_bytes[256:])
    if merge_log is not None:
        merge_log += forced_log or ()
    for number in range(1, len(merges) + 1) if on_merge is not None else ():
        on_merge(number)
    token_key = [_reversed_order_key(t) for t in token_bytes]
    queue = PairQueue(pair_counts, token_key)
    unheard: Unheard | None = None
    # The pairs `allows` refused. `pop_best` took their counts entries, and only pairs holding a new
    # token gain occurrences (and are filed again), so none should come up again; should one, it is
    # passed over at the cost of a set lookup.
    passed_over: set[int] = set()

    def hear(merge: Unheard) -> None:
        """Add the remote shards' changes for `merge`; then it is done."""
        gained, shrink = [], merge.shrink
        for remote in remotes:
            pairs, changes, remote_shrink = remote.receive()
            gained += queue.apply(zip(pairs, changes))
            shrink += remote_shrink
        queue.file(gained)
        if merge_log is not None:
            merge_log.append((merge.count, shrink))
        if on_merge is not None:
            on_merge(merge.number)

    while len(merges) < num_merges:
        best = queue.pop_best()
        if unheard is not None and (best is None or not unheard.cannot_change(*best)):
            if best is not None:
                queue.put_back(*best)
            hear(unheard)
            unheard = None
            continue  # choose again, with every change in
        if best is None:
            break
        pair, count = best
        left, right = pair >> SHIFT, pair & RIGHT
        if allows is not None and (pair in passed_over or not allows(token_bytes[left] + token_bytes[right])):
            passed_over.add(pair)
            continue
        new = chr(len(token_bytes))
        merges.append((token_bytes[left], token_bytes[right]))
        token_bytes.append(token_bytes[left] + token_bytes[right])
        if known is not None:  # a chosen merge making no new token does not count: one more
            num_merges += token_bytes[-1] in known
            known.add(token_bytes[-1])
        token_key.append(_reversed_order_key(token_bytes[-1]))

        for remote in remotes:
            remote.send_merge(pair, new)
        change, shrink = local.merge(pair, new)
        gained = queue.apply(change.items())
        queue.file(gained)
        if unheard is not None:  # the remote shards have made that merge by now, or soon will
            hear(unheard)
        largest_new = max(map(change.__getitem__, gained), default=0) if remotes else 0
        unheard = Unheard(len(merges), pair, count, shrink, largest_new)
        if not remotes:
            hear(unheard)
            unheard = None
    if unheard is not None:
        hear(unheard)
    return merges


def _add(total: dict[int, int], counts: Iterable[tuple[int, int]]) -> None:
    get = total.get
    for p, n in counts:
        total[p] = get(p, 0) + n


def _first_answer(shard: "_Shard", forced_log: list[tuple[int, int]] | None) -> tuple[array, array, list | None]:
    """What a shard's process answers first: its pairs and their counts (arrays of ints, a few
    bytes per pair to send and read rather than a dict of Python ints), and its forced merge log."""
    counts = shard.count_pairs()
    pairs = array("q", counts)
    values = array("q", counts.values())
    del counts
    return pairs, values, forced_log


# Words longer than this many tokens are kept as `long_words.LongWords`: a megabyte of one
# pre-token, where a pass over the word per merge would cost too much. Shorter ones stay strings, so
# that plain training, whose rare long pre-tokens (runs of spaces, rules of dashes) cost a string
# pass of a few microseconds per merge, loads no NumPy (some 15 MiB a process).
_LONG = 1 << 16

# Where words of more than 64 bytes hold most of the text (SuperBPE's stage 2 and pattern "none":
# 92-94% of it on our corpora, against 2% for GPT-2's pre-tokens), words of more than this many
# tokens are long words. A merge of long words costs some 20 NumPy calls however few its sites,
# and a string word's index a few Python steps per token: so words are strings where most are
# short and repeat, long words where the text is mostly long and one of a kind (stage 2 at 32 MB:
# indexing 2.8x faster than with 256, the loop no slower).
_MOSTLY_LONG = 8


# Where each shard gets this many words or more (web-scale counts), every word is a long word: the
# early merges, each in hundreds of thousands of words, then cost NumPy work per site rather than
# Python work, and a word takes a few bytes per token. Measured, 2 shards: `bpe train --counts` on
# 8.4 M web-like pre-tokens, 0.65x the time and 0.83x the memory of UTF-8 strings with an index of
# word numbers; 1 GB of web-like text (745 k a shard), 0.88x the time and 0.93x the memory of
# strings. One shard of 310 k took 1.15x the time of strings.
ALL_LONG_WORDS = 1 << 19


def _long_threshold(words: list[bytes], num_shards: int = 1) -> int:
    """The length past which `words` (UTF-8) are long words (see `_MOSTLY_LONG`, `ALL_LONG_WORDS`)."""
    if len(words) >= num_shards * ALL_LONG_WORDS:
        return 0
    lengths = list(map(len, words))
    if sum(n for n in lengths if n > 64) * 2 > sum(lengths):
        return min(_LONG, _MOSTLY_LONG)
    return _LONG


class _Shard:
    """Some of the words, their counts, and an index from each pair to the words holding it.

    Words of up to `_LONG` tokens are strings with one character per token id, indexed by `where`:
    a word is listed under a pair once per occurrence when the pair appears, and stays listed when a
    merge takes the pair apart; merge skips such stale entries and repeats, since the first visit
    merges every occurrence. An entry is the bytes of an array of word numbers, or one bare number
    (see `_compact`). Longer words, where a pass over the word per merge would be quadratic, are
    `long_words.LongWords` (merged with NumPy); with `long` 0, every word is.
    """

    def __init__(self, words: list, counts: list[int], long: int | None = None):
        """`words` are pre-tokens in UTF-8 (the byte tokens' ids are the bytes), or strings with one
        character per token id (as `forced.apply_forced` gives them); `words` is taken over: each
        entry is replaced in place by the word's form here (see `_Shard`), freeing the old one."""
        long = _LONG if long is None else long
        if long == 0:  # every word is long: handed over whole
            long_words, long_counts, words, counts = words, counts, [], []
        else:
            numbers = [i for i, word in enumerate(words) if len(word) > long]  # len: tokens, either way
            long_words, long_counts = [words[i] for i in numbers], [counts[i] for i in numbers]
            for i in numbers:
                words[i] = b""  # held by self.long alone
            for i, word in enumerate(words):
                if word.__class__ is bytes:
                    words[i] = word.decode("latin-1")
        self.long = None
        if long_words:  # imported here: NumPy is loaded only where there are long words
            from cs336_basics.train.long_words import LongWords

            self.long = LongWords(long_words, long_counts)
        del long_words, long_counts
        self.words = words
        self.counts = counts
        self.numbers = "i" if len(words) < 1 << 31 else "q"  # the array type of the index's word numbers
        self.where: dict[int, int | bytes] = {}

    def count_pairs(self) -> dict[int, int]:
        """Build the index and return how often each adjacent pair occurs (overlaps count); once,
        before any merge."""
        words, counts = self.words, self.counts
        # Lists share each word's number among its entries (quicker to sum); `_compact` then keeps
        # each as a bare number or the bytes of an array.
        where: dict[str, list] = defaultdict(list)
        for i, word in enumerate(words):
            for pair in map(str.__add__, word, word[1:]):
                where[pair].append(i)  # once per occurrence; merge skips the repeats as stale
        count_of = counts.__getitem__
        pair_counts = {_pair_id(pair): sum(map(count_of, ids)) for pair, ids in where.items()}
        compact = self.where
        for pair in list(where):  # each list is freed as soon as it is copied
            compact[_pair_id(pair)] = self._compact(where.pop(pair))
        if self.long is not None:
            self.long.count_pairs(pair_counts)
        return pair_counts

    def merge(self, pair_id: int, new: str) -> tuple[dict[int, int], int]:
        """Merge the pair named `pair_id` into the character `new` in every word holding it; return
        the count changes and by how many tokens these words shrank (weighted by their counts).

        Only the pairs next to each merge site change. In the old word each site loses its left
        pair (unless the previous site ends right there) and its right pair; in the new word each
        new token gains its left pair, and its right pair unless the right neighbour is itself new.
        So each site is filed once, by its left neighbour `x` (loses `x a`, gains `x new`), as
        following an adjacent site (loses `b a`, gains `new new`), or as a word's start; and once
        more by its right neighbour `y` unless the next site follows (loses `b y`, gains `new y`).
        The files are lists of word numbers (see `_sites`); the counts are summed per neighbour
        afterwards, and the lists become the index entries of the new pairs. The change to `pair`
        itself is left out: the caller drops it.
        """
        lefts, rights, adjacent, starts = self._sites(pair_id, new)
        count_of = self.counts.__getitem__
        where = self.where
        change: dict[int, int] = defaultdict(int)
        shrink = sum(map(count_of, starts))
        a, b_left, c = pair_id >> SHIFT, (pair_id & RIGHT) << SHIFT, ord(new)
        c_left = c << SHIFT
        # Each new pair's int is made once, for both tables: the pair counts keep the change's
        # keys, so a second int per new pair would cost 32 bytes each (some 7 MB over a large run).
        for x, ids in lefts.items():
            n = sum(map(count_of, ids))
            shrink += n
            x_left = ord(x) << SHIFT
            change[x_left | a] -= n
            gained = x_left | c
            change[gained] = n
            where[gained] = self._compact(ids)
        for y, ids in rights.items():
            n = sum(map(count_of, ids))
            y_id = ord(y)
            change[b_left | y_id] -= n
            gained = c_left | y_id
            change[gained] = n
            where[gained] = self._compact(ids)
        if adjacent:
            n = sum(map(count_of, adjacent))
            shrink += n
            change[b_left | a] -= n
            gained = c_left | c
            change[gained] = n
            where[gained] = self._compact(adjacent)
        if self.long is not None:
            shrink += self.long.merge(pair_id, c, change)
        change.pop(pair_id, None)
        return change, shrink

    def _sites(self, pair_id: int, new: str) -> tuple[dict, dict, list[int], list[int]]:
        """Merge the pair named `pair_id` into `new` in the string words holding it; return the word
        numbers of the sites by left neighbour and by right neighbour (dicts keyed by character),
        those following an adjacent site, and those at a word's start (see `merge`)."""
        pair = _pair_chars(pair_id)
        words = self.words
        lefts: dict[str, list[int]] = defaultdict(list)
        rights: dict[str, list[int]] = defaultdict(list)
        adjacent: list[int] = []
        starts: list[int] = []
        ids = self.where.pop(pair_id, b"")
        for i in (ids,) if ids.__class__ is int else memoryview(ids).cast(self.numbers):
            word = words[i]
            head, found, tail = word.partition(pair)
            if not found:  # a stale index entry
                continue
            if head:
                lefts[head[-1]].append(i)
            else:
                starts.append(i)
            if pair not in tail:  # one site, by far the most common case
                if tail:
                    rights[tail[0]].append(i)
                words[i] = head + new + tail
                continue
            pos = len(head)
            end = pos + 2
            nxt = word.find(pair, end)
            size = len(word)
            while True:
                if nxt == end:
                    adjacent.append(i)
                else:
                    if end < size:
                        rights[word[end]].append(i)
                    if nxt < 0:
                        break
                    lefts[word[nxt - 1]].append(i)
                end = nxt + 2
                nxt = word.find(pair, end)
            words[i] = word.replace(pair, new)
        return lefts, rights, adjacent, starts

    def _compact(self, ids: list[int] | array) -> int | bytes:
        """An index entry in its smallest form: most new pairs are in one word, kept as a bare
        number; more as the bytes of an array of word numbers, 4 bytes each (a tuple would take 8,
        and each number an int object of 32 more, since numbers read from bytes are new objects;
        and an array object takes 30 bytes more than a bytes object, for most entries more than
        their numbers)."""
        return ids[0] if len(ids) == 1 else array(self.numbers, ids).tobytes()


# The function a shard process runs, as "module:function"; given the two ends of its pipes.
_SHARD_SERVER = "cs336_basics.train.merge:_serve_shard"

# How long to poll a pipe for the next message before sleeping in a blocking read. The answer to a
# merge is usually due within a few hundred microseconds, and waking a sleeping process costs about
# 50 us on a virtual machine (measured here: 65 us per round trip blocking, 17 us polling), paid
# twice per merge; polling only as long as this bounds the CPU lost when the other side is slow.
_POLL_SECONDS = 0.002

# Gives the processor to another process that is ready to run, if any (else returns at once).
_yield_cpu = getattr(os, "sched_yield", lambda: None)


def _wait_for(conn: Connection) -> None:
    """Return when `conn` has a message, or after _POLL_SECONDS (recv then blocks as usual).

    The poll yields the processor at each turn: when more processes are ready than there are
    cores, a plain busy loop would spend its whole time slice while the process it waits for sits
    ready but not running (measured here, with one other busy process on 2 cores: 40 s for a loop
    that took 3.2 s, against 7.3 s yielding and 6.2 s blocking; on an idle machine yielding costs
    nothing)."""
    poll, deadline = conn.poll, time.perf_counter() + _POLL_SECONDS
    while not poll() and time.perf_counter() < deadline:
        _yield_cpu()


def _answer(shard: _Shard, pair: int, new: str) -> tuple[array, array, int]:
    """What a shard's process answers to a merge: the pairs whose counts changed, the changes, and
    the shrink (see `_Shard.merge`). Arrays of ints pickle as their bytes, far faster to send and
    to read than a dict."""
    change, shrink = shard.merge(pair, new)
    return array("q", change), array("q", change.values()), shrink


def _serve_shard(inbox_fd: int, outbox_fd: int) -> None:
    """The loop of a shard's process: take the words, send the pair counts, then answer each merge
    with its changes, until told to stop (None) or the other end closes."""
    inbox, outbox = Connection(inbox_fd, writable=False), Connection(outbox_fd, readable=False)
    gc.disable()
    allocator.return_large_blocks_at_once()
    try:
        words, counts, long, forced, log = inbox.recv()
        shard, forced_log = _prepared_shard(words, counts, long, forced, log)
        del words, counts
        outbox.send(_first_answer(shard, forced_log))
        while True:
            _wait_for(inbox)
            message = inbox.recv()
            if message is None:
                break
            outbox.send(_answer(shard, *message))
    except EOFError:  # the process running the loop is gone
        pass
    outbox.close()
    os._exit(0)  # at once: freeing millions of objects one by one would keep the caller waiting


class _RemoteShard:
    """A shard in a process of its own, driven through two pipes.

    The process is a fresh interpreter that imports only this module (not a fork, which would hold
    a copy of everything this process has), and it receives nothing but its own words.
    """

    def __init__(self):
        inbox_r, inbox_w = os.pipe()  # to the shard
        outbox_r, outbox_w = os.pipe()  # from the shard
        module, function = _SHARD_SERVER.split(":")
        code = f"import sys; from {module} import {function}; {function}(int(sys.argv[1]), int(sys.argv[2]))"
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # where cs336_basics is
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", code, str(inbox_r), str(outbox_w)], pass_fds=(inbox_r, outbox_w), env=env
            )
        finally:
            os.close(inbox_r)
            os.close(outbox_w)
        self.inbox = Connection(inbox_w, readable=False)
        self.outbox = Connection(outbox_r, writable=False)

    def start(self, words: list, counts: list[int], long: int, forced: list[tuple[bytes, bytes]], log: bool) -> None:
        """Give the shard its words (pre-tokens in UTF-8) and the forced merges to make on them (see
        `_prepared_shard`); it answers with their pair counts and forced merge log (see `receive`)."""
        self._send((words, counts, long, forced, log))

    def send_merge(self, pair: int, new: str) -> None:
        self._send((pair, new))

    def _send(self, message) -> None:
        try:
            self.inbox.send(message)
        except OSError:  # a broken pipe: the shard is gone, and receive says how
            pass

    def receive(self):
        """The shard's next answer: its pair counts and forced merge log first, then `(pairs, changes,
        shrink)` for each merge."""
        try:
            _wait_for(self.outbox)
            return self.outbox.recv()
        except EOFError:
            code = self.process.wait()
            # Imported here, not above: a shard's process imports this module alone, to stay small.
            from cs336_basics.corpora import executors

            raise executors.worker_died(f"a merge worker process ({self.process.pid})",
                                        f"exit code {code}; killed, or out of memory?") from None

    def close(self) -> None:
        self._send(None)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.inbox.close()
        self.outbox.close()
