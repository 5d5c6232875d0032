"""Encoding with a trained vocabulary: the tables it needs, BPE applied to one pre-token, and the
cache that encodes chunks (see `patterns`) in batches.

BPE on a pre-token merges the leftmost adjacent pair of lowest rank, again and again, as tiktoken
does. Tokens are handled as characters `chr(id)`, so pairs are 2-character strings looked up in one
dict. A short pre-token keeps the ranks of its adjacent pairs in a list, updated around each merge
(`min` and `list.index` run in C). On a long one (with pattern "none" a whole document, maybe
megabytes) that would be quadratic. There every occurrence of the lowest-ranked pair is merged at
once with `str.replace` (left to right, without overlap) while that shortens the word fast; then the
tokens become a linked list, each ranked pair keeps the positions where it occurs, and a heap gives
the ranks present in increasing order: each rank's occurrences are merged left to right, and the
pairs they make are added to the positions and, when new, their ranks to the heap. The work is in
proportion to the merges made, not to the word's length times the ranks.

Merging all occurrences of a pair at once, rank after rank, agrees with merging one at a time
because every merge's parts are single bytes or tokens made by earlier merges (checked when the table
is built): the tokens a merge makes can only take part in later merges, so the next lowest pair is
the next occurrence of the same pair.

BPE never merges across a place in a word where no merge joins the bytes on either side, so a word
can be cut there and its parts merged apart; parts repeat far more than words (see `merge_words`).

Text is encoded through `EncodeCache`: all of a text's chunks are looked up at once, and only the
distinct ones missing are computed, together (see `EncodeCache.encode`). Ids travel as bytes
(native 16 or 32-bit unsigned ints, see `id_packing`) from the cache to the output, so a text's
ids are one `bytes.join`.
"""

import heapq
import sys
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate, chain, compress, count, repeat
from operator import itemgetter, not_

from cs336_basics.text.patterns import Pretokenizer

_NO_RANK = 1 << 62


@dataclass(frozen=True)
class MergeTable:
    """What BPE needs from a vocabulary and its merges, in id-character form.

    byte_chars: a `str.translate` table from each byte value (as a Latin-1 code point) to its token.
    pair_rank:  the two id-characters of each merge -> the merge's rank (its position in the list).
    merged:     rank -> (the pair, the id-character of the merged token).
    joins:      the byte tokens' id-characters on either side of each merge's junction (the last
                byte of its left part, the first of its right part); see `merge_words`.
    separator:  a character that is no token's id-character.
    cut_non_ascii: whether non-ASCII pre-tokens are worth cutting into parts (see `merge_words`):
                true when fewer than 1/8 of the pairs (UTF-8 lead byte, continuation byte) are
                joined. Measured on 8 MiB of mixed text, cutting saved a quarter of the BPE time of
                non-ASCII pre-tokens with GPT-2's merges (1/12 of these pairs joined) and cost 5-15%
                more with cl100k_base's (1/5 joined).
    """

    byte_chars: dict[int, str]
    pair_rank: dict[str, int]
    merged: list[tuple[str, str]]
    joins: frozenset[str]
    separator: str
    cut_non_ascii: bool


def build_merge_table(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> MergeTable:
    """Build the tables; raise ValueError if a byte, a merged token or its parts lack an id."""
    ids = {token: token_id for token_id, token in vocab.items()}
    missing = [b for b in range(256) if bytes([b]) not in ids]
    if missing:
        raise ValueError(
            f"vocabulary has no token for the single byte {bytes([missing[0]])!r} ({len(missing)} bytes missing); "
            "a byte-level BPE vocabulary needs all 256"
        )
    byte_chars = {b: chr(ids[bytes([b])]) for b in range(256)}
    pair_rank: dict[str, int] = {}
    merged: list[tuple[str, str]] = []
    made = {bytes([b]) for b in range(256)}
    get = ids.get
    for rank, (left, right) in enumerate(merges):
        new = left + right
        a, b, c = get(left), get(right), get(new)
        if a is None or b is None or c is None:
            part = next(part for part in (left, right, new) if part not in ids)
            raise ValueError(f"merge {rank + 1} ({left!r}, {right!r}) needs {part!r}, which is not in the vocabulary")
        if left not in made or right not in made:
            part = left if left not in made else right
            raise ValueError(
                f"merge {rank + 1} ({left!r}, {right!r}) uses {part!r} before any earlier merge makes it; "
                "merges must be listed in the order they were learned"
            )
        made.add(new)
        pair = chr(a) + chr(b)
        pair_rank.setdefault(pair, rank)  # a repeated merge can never apply again
        merged.append((pair, chr(c)))
    junctions = {(left[-1], right[0]) for left, right in merges}
    joins = frozenset(byte_chars[a] + byte_chars[b] for a, b in junctions)
    last_id = max(ids.values(), default=255)
    separator = chr(last_id + 1) if last_id < sys.maxunicode else ""
    lead_joins = sum(1 for a, b in junctions if 0xC2 <= a <= 0xF4 and 0x80 <= b <= 0xBF)
    cut_non_ascii = lead_joins * 8 < (0xF4 - 0xC2 + 1) * 64
    return MergeTable(byte_chars, pair_rank, merged, joins, separator, cut_non_ascii)


# Up to this many tokens a pre-token is merged one pair at a time; longer ones by `str.replace`.
_SHORT = 64


def bpe(piece: bytes, table: MergeTable) -> tuple[int, ...]:
    """The token ids of one pre-token: merge the leftmost lowest-ranked pair until none is left."""
    return tuple(map(ord, merge_chars(piece.decode("latin-1").translate(table.byte_chars), table)))


def merge_chars(word: str, table: MergeTable) -> str:
    """`bpe` in id-character form: the pre-token's bytes as tokens `chr(id)` in, its tokens out."""
    if len(word) < 2:
        return word
    rank_of = table.pair_rank.get
    merged = table.merged
    if len(word) > _SHORT:
        # Merging every occurrence of the lowest-ranked pair at once costs a pass over the word; it is
        # kept while each pass removes at least 1/16 of the tokens (so long runs like "aaaa..." take
        # a few passes), then the heap takes over. Either way the total is near-linear.
        while len(word) > 1:
            rank = min(map(rank_of, map(str.__add__, word, word[1:]), repeat(_NO_RANK)))
            if rank == _NO_RANK:
                break
            pair, new = merged[rank]
            shorter = word.replace(pair, new)
            if (len(word) - len(shorter)) * 16 < len(word):
                return _bpe_long(shorter, table)
            word = shorter
        return word

    tokens = list(word)
    ranks = list(map(rank_of, map(str.__add__, word, word[1:]), repeat(_NO_RANK)))
    while ranks:
        rank = min(ranks)
        if rank == _NO_RANK:
            break
        i = ranks.index(rank)
        new = merged[rank][1]
        tokens[i] = new
        del tokens[i + 1]
        del ranks[i]
        if i < len(ranks):
            ranks[i] = rank_of(new + tokens[i + 1], _NO_RANK)
        if i:
            ranks[i - 1] = rank_of(tokens[i - 1] + new, _NO_RANK)
    return "".join(tokens)


def _bpe_long(word: str, table: MergeTable) -> str:
    """`merge_chars` on a long sequence of id-characters, in near-linear time (see the module docstring)."""
    rank_of = table.pair_rank.get
    merged = table.merged
    n = len(word)
    tokens: list[str | None] = list(word)
    nxt = array("q", range(1, n + 1))  # n: no next token
    prv = array("q", range(-1, n - 1))  # -1: no previous token
    sites: dict[str, list[int]] = {}
    for i, pair in enumerate(map(str.__add__, word, word[1:])):
        if pair in sites:
            sites[pair].append(i)
        elif rank_of(pair) is not None:
            sites[pair] = [i]
    ranks = list(map(rank_of, sites))
    heapq.heapify(ranks)
    push = heapq.heappush
    while ranks:
        pair, new = merged[heapq.heappop(ranks)]
        positions = sites.pop(pair)
        positions.sort()  # left to right: of overlapping occurrences the left one merges
        a, b = pair
        for i in positions:
            if tokens[i] != a:
                continue
            j = nxt[i]
            if j == n or tokens[j] != b:
                continue
            tokens[j] = None
            tokens[i] = new
            k = nxt[i] = nxt[j]
            if k != n:
                prv[k] = i
                q = new + tokens[k]
                if q in sites:
                    sites[q].append(i)
                elif (r := rank_of(q)) is not None:
                    sites[q] = [i]
                    push(ranks, r)
            p = prv[i]
            if p >= 0:
                q = tokens[p] + new
                if q in sites:
                    sites[q].append(p)
                elif (r := rank_of(q)) is not None:
                    sites[q] = [p]
                    push(ranks, r)
    return "".join(t for t in tokens if t is not None)


def merge_words(words: list[str], table: MergeTable, known: dict[str, str] | None = None) -> list[str]:
    """`merge_chars` of each word, for many words at once: each word is cut where no token can
    span, and each distinct part is merged once.

    A token spans a place between two bytes only if some merge joined them: the merge that made
    the smallest token holding both has the one on its left part's end and the other on its right
    part's start, a pair in `table.joins`. Elsewhere BPE never merges across, so a word's tokens
    are those of its parts, one after the other. Parts repeat across words far more than words
    do (the bytes of the characters of a script that few merges cover, say, or the phrases of
    documents taken whole with pattern "none").

    When the words are hardly cut (fewer than 3 parts for 2 words), the parts could not repeat
    much more than the words do, so each word is merged whole instead.

    `known`, if given, maps parts merged before to their tokens: parts found there are not merged
    again, and those merged here (of up to `_SHORT` characters) are added to it.
    """
    separator = table.separator
    if not separator or not words:
        return [merge_chars(word, table) for word in words]
    # The words joined by a separator, which joins nothing, then cut at every place not joined.
    text = separator.join(words)
    joined = map(table.joins.__contains__, map(str.__add__, text, text[1:]))
    cuts = [0, *compress(count(1), map(not_, joined)), len(text)]
    parts_of_words = len(cuts) - len(words)  # the parts also hold the len(words) - 1 separators
    if parts_of_words * 2 < len(words) * 3:  # hardly cut: parts cannot repeat much more than words
        return [merge_chars(word, table) for word in words]
    parts = list(map(text.__getitem__, map(slice, cuts, cuts[1:])))
    merged: dict[str, str | None] = dict.fromkeys(parts)
    if known:
        for part in merged.keys() & known.keys():
            merged[part] = known[part]
    new = [part for part, tokens in merged.items() if tokens is None]
    for part in new:
        merged[part] = merge_chars(part, table)
    if known is not None:
        known.update((part, merged[part]) for part in new if len(part) <= _SHORT)
    return "".join(map(merged.__getitem__, parts)).split(separator)


def id_packing(max_id: int) -> tuple[str, str]:
    """How ids up to `max_id` are packed into bytes: (the `array` typecode, the codec that packs a
    str of id-characters the same way). Unsigned 16-bit native ints when every id fits, else 32-bit.

    With "surrogatepass", UTF-16 writes each character below 0x10000 as its own 16-bit unit (also
    0xD800-0xDFFF, which ids may be), and UTF-32 each character as one 32-bit unit.
    """
    order = "le" if sys.byteorder == "little" else "be"
    if max_id < 0x10000:
        return "H", f"utf-16-{order}"
    return ("I" if array("I").itemsize == 4 else "L"), f"utf-32-{order}"


# Missing chunks are computed in batches of at most this many.
_BATCH = 1 << 14


class EncodeCache(dict):
    """Chunk or pre-token -> its token ids, packed as bytes (see `id_packing`); what is missing is
    computed in batches by `encode`, then kept.

    With a `pretokenizer` that has safe boundaries (see `patterns`), keys are its chunks, cut into
    pre-tokens that are looked up here too (a chunk of one pre-token is its own pre-token); without
    one, every key is a pre-token. `fixed` holds keys with given values that are never stored (the
    special tokens).
    Memory stays bounded: when `max_entries` are held, they become the *old* generation and a new
    one starts; an entry found in the old generation moves to the new one, so what text uses
    often survives, and what it stopped using is dropped a generation later. Keys longer than
    `max_key_length` are not kept. `whole` maps pre-tokens to their ids where they are taken whole
    instead of merged (Hugging Face's `ignore_merges`: a pre-token in the vocabulary). The parts of pre-tokens merged in parts (see `merge_words`) are
    kept apart, up to `max_entries` of them, then dropped all at once.
    """

    def __init__(
        self,
        table: MergeTable,
        max_entries: int,
        max_key_length: int = 64,
        *,
        pretokenizer: Pretokenizer | None = None,
        codec: str = "utf-32-le" if sys.byteorder == "little" else "utf-32-be",
        fixed: dict[str, bytes] | None = None,
        whole: dict[str, bytes] | None = None,
    ):
        super().__init__()
        self._whole = whole  # pre-tokens taken whole when in the vocabulary (`ignore_merges`), with their ids
        self._table = table
        self._pretokenizer = pretokenizer if pretokenizer is not None and pretokenizer.boundary else None
        self._codec = codec
        self._fixed = dict(fixed or {})
        self._old: dict[str, bytes] = {}
        self._max_entries = max_entries
        self._max_key_length = max_key_length
        self._learned: dict[str, bytes] | None = None
        self._parts: dict[str, str] = {}  # parts of pre-tokens merged so far (see `merge_words`)
        if self._pretokenizer is not None:
            self._junctions = _Junctions(self._pretokenizer)

    def encode(self, chunks: list[str]) -> bytes:
        """The packed ids of the chunks, one after the other.

        Every chunk is looked up at once (in C); the distinct ones missing are then computed
        together, each once, whatever the number of times they occur.
        """
        values = list(map(self.get, chunks))
        if all(values):  # values are never empty: a chunk holds at least one token
            return b"".join(values)
        missing = list(compress(count(), map(not_, values)))
        found = dict.fromkeys(map(chunks.__getitem__, missing))
        self._compute(found)
        if len(missing) * 4 < len(values):  # a few: patch them in place
            for i in missing:
                values[i] = found[chunks[i]]
            return b"".join(values)
        return b"".join(map(found.get, chunks, values))

    def _compute(self, found: dict[str, bytes | None]) -> None:
        """Fill in `found`, chunks missing from the new generation, and keep what is computed."""
        old = self._old
        if old:
            for chunk in found.keys() & old.keys():
                found[chunk] = old[chunk]
                self._keep(chunk, found[chunk])
        for token in found.keys() & self._fixed.keys():
            found[token] = self._fixed[token]
        todo = [chunk for chunk, value in found.items() if value is None]
        for start in range(0, len(todo), _BATCH):  # bounded batches hold bounded memory
            self._compute_batch(todo[start : start + _BATCH], found)

    def _compute_batch(self, todo: list[str], found: dict[str, bytes | None]) -> None:
        """Compute the packed ids of chunks found in neither generation, into `found`; keep them."""
        # Cut the chunks into pre-tokens: those that may follow one another (a safe boundary at
        # each end) are joined, the ASCII ones and the others apart (the ASCII pattern is faster);
        # the rest (first or last in a document) go one by one.
        groups: list[tuple[list[str], list[str]]] = []  # (chunks, the pre-tokens of all of them)
        pretokenizer = self._pretokenizer
        if pretokenizer is None:
            groups = [([chunk], [chunk]) for chunk in todo]
        else:
            split = pretokenizer.chunk_pretokens
            ends = map(str.__add__, map(itemgetter(-1), todo), map(itemgetter(0), todo))
            joinable = list(map(self._junctions.__getitem__, ends))
            alone = list(compress(todo, map(not_, joinable)))
            groups = [([chunk], split(chunk)) for chunk in alone]
            kinds = set(joinable) - {False}  # one kind but under a pipeline's "lines" boundary
            for kind in kinds:
                joined = list(compress(todo, map(kind.__eq__, joinable) if len(kinds) > 1 else joinable))
                is_ascii = list(map(str.isascii, joined))
                for group in (list(compress(joined, is_ascii)), list(compress(joined, map(not_, is_ascii)))):
                    if group:
                        groups.append((group, split("".join(group))))

        # The pre-tokens' ids: from the new generation, from the old one (then kept in the new
        # one), or by BPE (then kept too).
        ids = dict.fromkeys(chain.from_iterable(pieces for _, pieces in groups))
        get, old_get = self.get, self._old.get
        new = []
        keep: dict[str, bytes] = {}
        for piece in ids:
            value = get(piece)
            if value is None:
                value = old_get(piece)
                if value is None:
                    new.append(piece)
                    continue
                keep[piece] = value
            ids[piece] = value
        whole = self._whole
        if whole:
            taken = [piece for piece in new if piece in whole]
            if taken:
                for piece in taken:
                    ids[piece] = keep[piece] = whole[piece]
                if self._learned is not None:
                    self._learned.update(zip(taken, map(whole.__getitem__, taken)))
                new = [piece for piece in new if piece not in whole]
        table, codec = self._table, self._codec
        # Long pre-tokens are merged in parts (see `merge_words`), and non-ASCII ones when few merges
        # join the bytes of non-ASCII characters. Short ASCII ones have few places that no token
        # spans, so they are merged one by one.
        cut_non_ascii = table.cut_non_ascii
        by_parts = [len(piece) > _SHORT or (cut_non_ascii and not piece.isascii()) for piece in new]
        whole, in_parts = list(compress(new, map(not_, by_parts))), list(compress(new, by_parts))
        tokens = [merge_chars(word, table) for word in map(self._byte_chars, whole)]
        tokens += merge_words(list(map(self._byte_chars, in_parts)), table, self._parts)
        if len(self._parts) > self._max_entries:  # bounded like the cache, more bluntly
            self._parts.clear()
        for piece, token_chars in zip(whole + in_parts, tokens):
            ids[piece] = keep[piece] = token_chars.encode(codec, "surrogatepass")
        self._keep_all(keep)
        if self._learned is not None:
            self._learned.update(zip(new, map(ids.__getitem__, new)))

        # The chunks' ids. A group's chunks end where its pre-tokens end, so each chunk's ids
        # are cut from the ids of all the group's pre-tokens at the matching offsets.
        for chunks, pieces in groups:
            values = list(map(ids.__getitem__, pieces))
            if len(chunks) == 1:
                found[chunks[0]] = b"".join(values)
                continue
            chunk_ends = set(accumulate(map(len, chunks)))
            piece_ends = accumulate(map(len, pieces))
            cuts = [0, *compress(accumulate(map(len, values)), map(chunk_ends.__contains__, piece_ends))]
            assert len(cuts) == len(chunks) + 1, "a pre-token spans two chunks: not a safe boundary"
            data = b"".join(values)
            found.update(zip(chunks, map(data.__getitem__, map(slice, cuts, cuts[1:]))))
        computed = dict(zip(todo, map(found.__getitem__, todo)))
        self._keep_all(computed)
        if self._learned is not None:
            self._learned.update(computed)

    def plain_parts(self) -> tuple[MergeTable, str, dict[str, bytes]]:
        """(the merge table, the codec ids are packed with, the keys with given ids): what encoding
        around this cache needs (BPE-dropout, see `dropout`, whose ids are random: never kept here)."""
        return self._table, self._codec, self._fixed

    def start_learning(self) -> None:
        """From now on, also note what is computed, for `take_learned`."""
        self._learned = {}

    def take_learned(self) -> dict[str, bytes]:
        """The entries computed (not found) since `start_learning` or the last call (keys up to
        `max_key_length`), for another cache of the same vocabulary to `learn`."""
        if self._learned is None:
            return {}
        learned, self._learned = self._learned, {}
        limit = self._max_key_length
        return {key: value for key, value in learned.items() if len(key) <= limit}

    def learn(self, entries: dict[str, bytes]) -> None:
        """Keep entries computed by another cache of the same vocabulary (see `take_learned`)."""
        self._keep_all(entries)

    def _keep(self, key: str, value: bytes) -> None:
        if len(key) <= self._max_key_length:
            if len(self) >= self._max_entries and key not in self:
                self._old = dict(self)
                self.clear()
            self[key] = value

    def _keep_all(self, entries: dict[str, bytes]) -> None:
        if len(self) + len(entries) <= self._max_entries:  # no new generation: all at once, in C
            self.update(entries)
            limit = self._max_key_length
            for key in list(compress(entries, map(limit.__lt__, map(len, entries)))):
                del self[key]
        else:
            for key, value in entries.items():
                self._keep(key, value)

    def _byte_chars(self, piece: str) -> str:
        """A pre-token's bytes as the id-characters of the byte tokens."""
        word = piece if piece.isascii() else piece.encode("utf-8").decode("latin-1")
        return word.translate(self._table.byte_chars)


class _Junctions(dict):
    """Two characters (a chunk's last and its first) -> whether a safe boundary of the pattern
    lies between them, i.e. whether such chunks can be joined and cut into pre-tokens together.

    The named patterns' boundaries hold between any character of one kind and any of another, so
    chunks that each pass can be joined in any order. A pipeline's "lines" boundary (see
    `pipelines`) has two such kinds (non-whitespace then whitespace that is not a newline, or a
    newline then non-whitespace): the value is then 1 or 2, and only chunks of one kind are joined.
    """

    def __init__(self, pretokenizer: Pretokenizer):
        super().__init__()
        self._boundary = pretokenizer.last_boundary
        pipeline = pretokenizer.pipeline
        self._lines = pipeline is not None and pipeline.boundary == "lines"

    def __missing__(self, pair: str) -> "bool | int":
        joinable = self._boundary.match(pair) is not None
        if joinable and self._lines:
            joinable = 2 if pair[0] in "\r\n" else 1
        self[pair] = joinable
        return joinable
