r"""The merge log: for each merge, how often its pair occurred when it was chosen and how long the
training corpus became; its file `merge_log.tsv`; and the compression curve it gives for free.

The fact it rests on: a merge replaces every occurrence of its pair, so the corpus length in tokens
after merge k is known during training without encoding anything, and bytes per token at every
vocabulary size is the corpus length in bytes (the length before any merge) divided by it. The length falls by the pair's count,
except where occurrences overlap (`aaa` holds `(a, a)` twice but becomes `aa a`): the trainer measures
the real fall (see `merge.train_merges`).

The same fact gives each token's occurrences in the training corpus encoded with the final
vocabulary, again without encoding anything: a merge of (a, b) into c that joins n places takes n
occurrences from a and from b and gives n to c, so starting from the corpus's byte counts and
playing the merges forward leaves the final counts (encoding applies merges lowest rank first, which
cuts each pre-token exactly as training did). A token whose count falls to (near) zero was absorbed
by longer tokens made later: a model's embedding for it would barely be trained.

`readable_token` is the one place that decides how a token's bytes are shown to people: here, in
`bpe inspect`, `bpe vocab` and the report. A shown token has no tab or line break, but may hold `"`
or read `NA`: the file's cells are written by `text.tsv`, so that pandas
(`read_csv(path, sep="\t", keep_default_na=False, na_values=[""])`) and `csv` read them as we do.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from cs336_basics.text import tsv

COLUMNS = ["rank", "id", "left", "right", "token", "count", "tokens"]
# Files written since the occurrences were added; files with COLUMNS alone are still read.
OCCURRENCE_COLUMNS = COLUMNS + ["occurrences"]

_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def readable_token(token: bytes) -> str:
    r"""A token's bytes as text where they are whole UTF-8 characters, `\xNN` for the other bytes.

    Backslash, tab, newline and carriage return are written `\\`, `\t`, `\n`, `\r`; other
    unprintable characters below U+0080 as `\xNN` (the same as their byte), the rest as `\uNNNN` or
    `\UNNNNNNNN`; the space stays a space. So the result is one line without tabs, and different
    tokens read differently.

    >>> print(readable_token(b" h\xc3\xa9llo\n"))
     héllo\n
    >>> print(readable_token(b"\xe4\xb8"))
    \xe4\xb8
    """
    out = []
    for ch in token.decode("utf-8", errors="surrogateescape"):
        if "\udc80" <= ch <= "\udcff":  # a byte that is not part of a whole character
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch == " " or ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


@dataclass
class MergeLog:
    """What training recorded: the corpus length before any merge (its bytes, special tokens not
    counted), and for each merge `(count, tokens)`: the pair's count when it was chosen and the
    corpus length in tokens after the merge."""

    corpus_bytes: int
    steps: list[tuple[int, int]]
    merged: list[str] | None = None  # each merge's new token as `readable_token` shows it, when read from a file
    # Each token's occurrences (by row: the 256 bytes, then one per merge; `occurrences_by_id` gives them
    # by id) in the training corpus encoded with the final vocabulary (see `token_occurrences`); None in
    # files written before they were recorded.
    occurrences: list[int] | None = None


def token_occurrences(byte_counts: list[int], merges: list[tuple[bytes, bytes]], log: MergeLog) -> list[int]:
    """How often each token (by row: bytes 0-255, then 256 + rank) occurs in the training corpus encoded
    with all the merges, from the corpus's byte counts (special tokens left out, as in the log) and
    the places each merge joined (the fall of `tokens` in the log)."""
    if len(byte_counts) != 256 or sum(byte_counts) != log.corpus_bytes:
        raise ValueError("the byte counts do not add up to the corpus length of the merge log")
    if len(log.steps) != len(merges):
        raise ValueError(f"the merge log has {len(log.steps)} entries for {len(merges)} merges")
    counts = list(byte_counts) + [0] * len(merges)
    ids = {bytes([b]): b for b in range(256)}
    before = log.corpus_bytes
    for rank, ((left, right), (_, tokens)) in enumerate(zip(merges, log.steps)):
        joined = before - tokens
        before = tokens
        counts[ids[left]] -= joined
        counts[ids[right]] -= joined  # twice from the same token when left == right: "aa" uses two a's
        counts[256 + rank] = joined
        ids[left + right] = 256 + rank
    return counts


def token_ids(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> list[int | None]:
    """The id `vocab` gives each token the merge log has a row for: the 256 bytes, then each merge's
    token (None for one the vocabulary lacks). They are 0..255 + len(merges) for a tokenizer trained
    from scratch; an extended one (GPT-2's bytes in another order, its special token inside the
    range, an open model's gaps) and SuperBPE (a token made twice keeps its first id) have others."""
    ids: dict[bytes, int] = {}
    for token_id in sorted(vocab):
        ids.setdefault(vocab[token_id], token_id)
    return [ids.get(bytes([b])) for b in range(256)] + [ids.get(left + right) for left, right in merges]


def occurrences_by_id(occurrences: list[int], ids: list[int | None]) -> dict[int, int]:
    """The merge log's occurrences (one per row, as `token_occurrences` gives them) by token id, the
    rows `token_ids` gives one id added up (a token two merges make)."""
    by_id: dict[int, int] = {}
    for token_id, n in zip(ids, occurrences):
        if token_id is not None:
            by_id[token_id] = by_id.get(token_id, 0) + n
    return by_id


def merge_log_tsv(merges: list[tuple[bytes, bytes]], log: MergeLog, vocab: dict[int, bytes] | None = None) -> str:
    """The text of `merge_log.tsv`: a header row; a row for the corpus before any merge, whose only
    field is `tokens` (its length in bytes); then one row per merge (ranks from 0). Ids are those
    `vocab` gives (see `token_ids`); without it, those of a vocabulary trained from scratch (the
    bytes, then 256 + rank).

    With `log.occurrences`, a last column `occurrences` holds each token's count in the encoded
    training corpus, and 256 rows for the bytes (id and token only) come before the merges.

    Cells are written by `tsv.row`: a token holding `"` is quoted, its `"` doubled."""
    if len(log.steps) != len(merges):
        raise ValueError(f"the merge log has {len(log.steps)} entries for {len(merges)} merges")
    occurrences = log.occurrences
    columns = COLUMNS if occurrences is None else OCCURRENCE_COLUMNS
    if occurrences is not None and len(occurrences) != 256 + len(merges):
        raise ValueError(f"the merge log has {len(occurrences)} occurrence counts for {256 + len(merges)} tokens")
    ids = list(range(256 + len(merges))) if vocab is None else token_ids(vocab, merges)
    if None in ids:
        missing = ids.index(None)
        token = bytes([missing]) if missing < 256 else b"".join(merges[missing - 256])
        raise ValueError(f"the vocabulary lacks the token {readable_token(token)!r} the merge log has a row for")
    start = [""] * len(columns)
    start[6] = str(log.corpus_bytes)
    lines = [tsv.row(columns), tsv.row(start)]
    if occurrences is not None:
        lines += [tsv.row(["", ids[b], "", "", readable_token(bytes([b])), "", "", occurrences[b]]) for b in range(256)]
    for rank, ((left, right), (count, tokens)) in enumerate(zip(merges, log.steps)):
        row = [rank, ids[256 + rank], readable_token(left), readable_token(right), readable_token(left + right), count,
               tokens]
        if occurrences is not None:
            row.append(occurrences[256 + rank])
        lines.append(tsv.row(row))
    return "\n".join(lines) + "\n"


def read_merge_log(path: str | os.PathLike) -> MergeLog:
    """The merge log in a `merge_log.tsv` (see `merge_log_tsv`), with or without the occurrences,
    and also one written before its cells were quoted (see `tsv.read_rows`).

    Raises ValueError naming the file and line when it is not such a file.
    """
    path = Path(path)
    try:
        rows = tsv.read_rows(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 at byte {e.start}; not a merge log") from None
    header = rows[0] if rows else []
    if header not in (COLUMNS, OCCURRENCE_COLUMNS):
        raise ValueError(f"{path}, line 1: expected the header {' '.join(COLUMNS)!r} (and maybe 'occurrences')")
    width = len(header)
    start = rows[1] if len(rows) > 1 else []
    if len(start) != width or any(start[:6] + start[7:]) or not start[6].isdigit():
        raise ValueError(f"{path}, line 2: expected the corpus length before any merge, in the tokens column alone")
    occurrences: list[int] | None = None
    first_merge = 2
    if width == len(OCCURRENCE_COLUMNS):
        occurrences = []
        for n, fields in enumerate(rows[2:258], start=3):
            if (len(fields) != width or fields[4] != readable_token(bytes([n - 3])) or not fields[1].isdigit()
                    or not fields[7].isdigit() or any(fields[2:4] + fields[5:7])):
                raise ValueError(f"{path}, line {n}: expected the row of byte {n - 3} (its id, token and occurrences); "
                                 f"got {_shown(fields)}")
            occurrences.append(int(fields[7]))
        if len(occurrences) != 256:
            raise ValueError(f"{path}, line {len(rows) + 1}: expected the rows of the 256 bytes")
        first_merge = 258
    log, merged = [], []
    for n, fields in enumerate(rows[first_merge:], start=first_merge + 1):
        try:
            if len(fields) != width:
                raise ValueError
            rank, count, tokens = int(fields[0]), int(fields[5]), int(fields[6])
            if occurrences is not None:
                occurrences.append(int(fields[7]))
        except ValueError:
            raise ValueError(f"{path}, line {n}: expected {width} tab-separated fields, rank, count, tokens"
                             f"{' and occurrences' if occurrences is not None else ''} whole numbers; "
                             f"got {_shown(fields)}") from None
        if rank != len(log):
            raise ValueError(f"{path}, line {n}: rank {rank} where {len(log)} was expected")
        log.append((count, tokens))
        merged.append(fields[4])
    return MergeLog(int(start[6]), log, merged, occurrences)


def _shown(fields: list[str]) -> str:
    """A row of the file, its cells joined by tabs and cut to 80 characters, for a message."""
    return repr("\t".join(fields)[:80])


def compression_curve(log: MergeLog, *, base_vocab_size: int = 256) -> list[tuple[int, float]]:
    """Bytes per token on the training corpus at every vocabulary size, from the merge log alone.

    The first point is `base_vocab_size` (the 256 bytes, plus special tokens if counted) at 1.0
    byte per token; then one point per merge.
    """
    return [(base_vocab_size, 1.0)] + [
        (base_vocab_size + k + 1, log.corpus_bytes / max(tokens, 1)) for k, (_, tokens) in enumerate(log.steps)
    ]
