"""What a tokenizer learned and how well it compresses text: kinds of tokens, bytes and characters
per token and the measures papers use (fertility, Rényi and Shannon efficiency, vocabulary use; see
`TextStats`), the vocabulary with the merge behind each token and the tokens that would be
under-trained (see `vocab_entries`), and the report page of `bpe report`.

The page is one self-contained HTML file: styles, the small script and the plots (SVG drawn by
matplotlib, the optional extra `report`) are all inline, so it opens anywhere without a network.
The training curve comes from the merge log (see `merge_log`); the held-out curve encodes the text
again with the merges cut at a handful of vocabulary sizes.
"""

import codecs
import html
import io
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cs336_basics.bpe import Tokenizer
from cs336_basics.errors import missing_extra
from cs336_basics.text.surrogates import fix_surrogates
from cs336_basics.train.merge_log import MergeLog, compression_curve, readable_token

PRETRAINED = ["gpt2", "cl100k_base", "o200k_base"]

KINDS = {
    "word": "whole words (letters, maybe after a space)",
    "text": "other whole characters (digits, punctuation, space, mixed)",
    "partial": "part of one UTF-8 character",
    "crossing": "crossing a character boundary",
}


def classify_token(token: bytes) -> str:
    """'word', 'text' (whole characters), 'partial' (a piece of one UTF-8 character) or 'crossing'."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        lead = [b for b in token if b & 0xC0 != 0x80]
        if len(lead) <= 1 and (not lead or token[0] == lead[0]):
            return "partial"
        return "crossing"
    return "word" if text.lstrip(" ").isalpha() else "text"


# --- measuring a tokenizer on text ---------------------------------------------------------------


RENYI_ALPHA = 2.5  # Zouhar et al. (2023) found this order of Rényi efficiency to track downstream quality best


@dataclass
class TextStats:
    """How a tokenizer cuts some text: its size in bytes, characters, tokens and whitespace-separated
    words, how many tokens each word overlaps, how often each token occurs, and kinds of tokens.

    The measures papers use are properties; see README, "Measures", for their definitions and sources.
    """

    bytes: int = 0
    chars: int = 0
    tokens: int = 0
    kinds: Counter = field(default_factory=Counter)
    words: int = 0
    word_tokens: int = 0  # summed over words: the tokens that hold part of the word
    split_words: int = 0  # words that two or more tokens share
    counts: Counter = field(default_factory=Counter)  # token id -> occurrences
    vocab_size: int = 0

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else 0.0

    @property
    def chars_per_token(self) -> float:
        return self.chars / self.tokens if self.tokens else 0.0

    @property
    def fertility(self) -> float:
        """Tokens per whitespace-separated word (a token shared by two words counts for both)."""
        return self.word_tokens / self.words if self.words else 0.0

    @property
    def split_share(self) -> float:
        """The share of words cut into two or more tokens."""
        return self.split_words / self.words if self.words else 0.0

    @property
    def shannon_efficiency(self) -> float:
        return efficiency(self.counts, self.vocab_size, 1.0)

    @property
    def renyi_efficiency(self) -> float:
        return efficiency(self.counts, self.vocab_size, RENYI_ALPHA)

    @property
    def vocab_used(self) -> float:
        """The share of the vocabulary that occurs at least once."""
        return len(self.counts) / self.vocab_size if self.vocab_size else 0.0

    @property
    def half_of_tokens(self) -> int:
        """How many of the most frequent tokens make up half of all tokens."""
        return tokens_for_share(self.counts, 0.5)

    def add(self, tokenizer: Tokenizer, text: str, ids: "Sequence[int] | None" = None) -> None:
        """Count `text` in, with its `ids`: what `tokenizer.encode(text)` gives (computed here when
        None; a caller may pass them from another engine, see `engines.encode_text`, which gives
        the same ids)."""
        text = fix_surrogates(text)  # as encode reads them, so that bytes and word offsets agree with the ids
        if ids is None:
            ids = tokenizer.encode(text)
        vocab = tokenizer.vocab
        self.bytes += len(text.encode("utf-8"))
        self.chars += len(text)
        self.tokens += len(ids)
        self.vocab_size = len(vocab)
        self.kinds.update(classify_token(vocab[i]) for i in ids)
        self.counts.update(ids)
        per_word = tokens_per_word(text, [len(vocab[i]) for i in ids])
        self.words += len(per_word)
        self.word_tokens += sum(per_word)
        self.split_words += sum(n >= 2 for n in per_word)

    def update(self, other: "TextStats") -> None:
        """Count in the text measured by `other` (with the same tokenizer)."""
        for name in ("bytes", "chars", "tokens", "words", "word_tokens", "split_words"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.kinds.update(other.kinds)
        self.counts.update(other.counts)
        self.vocab_size = other.vocab_size or self.vocab_size


def tokens_per_word(text: str, token_lengths: list[int]) -> list[int]:
    """For each whitespace-separated word of `text` (a run of non-whitespace), how many tokens hold
    at least one of its bytes, given the byte length of each token of `text` in order.

    >>> tokens_per_word("ab cd", [2, 1, 2])   # "ab", " ", "cd"
    [1, 1]
    >>> tokens_per_word("ab cd", [1, 2, 2])   # "a", "b ", "cd": "b " holds part of one word only
    [2, 1]
    """
    import numpy as np

    ends = np.cumsum(np.asarray(token_lengths, dtype=np.int64))
    starts, stops = [], []
    offset, last = 0, 0  # byte offset of character `last` of text
    for match in _WORD.finditer(text):
        offset += len(text[last : match.start()].encode("utf-8"))
        starts.append(offset)
        offset += len(match.group().encode("utf-8"))
        stops.append(offset)
        last = match.end()
    if not starts:
        return []
    # Token k spans bytes [ends[k-1], ends[k]); the first token to hold a word's bytes is the first
    # ending after its start, the last is the first ending at or after its end.
    first = np.searchsorted(ends, np.asarray(starts), side="right")
    final = np.searchsorted(ends, np.asarray(stops), side="left")
    return (final - first + 1).tolist()


_WORD = re.compile(r"\S+")


def efficiency(counts: Counter, vocab_size: int, alpha: float) -> float:
    """Rényi efficiency of order `alpha` of the token distribution: its Rényi entropy divided by the
    entropy of the uniform distribution over the vocabulary, log |V| (Zouhar et al., 2023). Order 1
    is Shannon's entropy. 1.0 when every token of the vocabulary is equally frequent."""
    total = sum(counts.values())
    if not total or vocab_size < 2:
        return 0.0
    probs = [n / total for n in counts.values() if n]
    if alpha == 1.0:
        entropy = -sum(p * math.log(p) for p in probs)
    else:
        entropy = math.log(sum(p**alpha for p in probs)) / (1 - alpha)
    return entropy / math.log(vocab_size)


def tokens_for_share(counts: Counter, share: float) -> int:
    """The fewest tokens, most frequent first, whose occurrences make up at least `share` of all."""
    total = sum(counts.values())
    done = 0
    for k, n in enumerate(sorted(counts.values(), reverse=True), start=1):
        done += n
        if done >= share * total:
            return k
    return 0


def measure_rows(columns: list[TextStats]) -> list[tuple[str, list[str]]]:
    """The measures papers use, one row each, formatted for each column (see README, "Measures")."""
    return [
        ("tokens per word (fertility)", [f"{s.fertility:.2f}" for s in columns]),
        ("words cut in 2+ tokens (%)", [f"{100 * s.split_share:.2f}" for s in columns]),
        (f"Rényi efficiency (α = {RENYI_ALPHA})", [f"{s.renyi_efficiency:.3f}" for s in columns]),
        ("Shannon efficiency", [f"{s.shannon_efficiency:.3f}" for s in columns]),
        ("vocabulary used (%)", [f"{100 * s.vocab_used:.2f}" for s in columns]),
        ("tokens making half of all", [f"{s.half_of_tokens:,}" for s in columns]),
    ]


def stats_table(columns: list[tuple[str, TextStats]]) -> str:
    """A table with one column per tokenizer: tokens, bytes and characters per token, kinds (in %)."""
    rows = [
        ("tokens", [f"{s.tokens:,}" for _, s in columns]),
        ("bytes per token", [f"{s.bytes_per_token:.2f}" for _, s in columns]),
        ("characters per token", [f"{s.chars_per_token:.2f}" for _, s in columns]),
    ]
    for kind, label in KINDS.items():
        rows.append((f"% {label}", [f"{100 * s.kinds[kind] / max(s.tokens, 1):.2f}" for _, s in columns]))
    rows += measure_rows([s for _, s in columns])
    label_width = max(len(label) for label, _ in rows)
    widths = [max(len(name), *(len(values[i]) for _, values in rows)) for i, (name, _) in enumerate(columns)]
    lines = [" " * label_width + "".join(f"  {name:>{w}}" for (name, _), w in zip(columns, widths))]
    for label, values in rows:
        lines.append(f"{label:<{label_width}}" + "".join(f"  {v:>{w}}" for v, w in zip(values, widths)))
    return "\n".join(lines)


# --- the vocabulary and the merges behind it -----------------------------------------------------


@dataclass
class VocabEntry:
    """One token: its id, bytes, the merge that made it (rank and pair), that merge's count, the
    token's occurrences in the encoded training corpus (or a given text), and why it is under-trained."""

    id: int
    token: bytes
    special: bool
    rank: int | None = None
    pair: tuple[bytes, bytes] | None = None
    count: int | None = None
    occurrences: int | None = None
    flags: list[str] = field(default_factory=list)


# Why a token is listed as under-trained (its embedding would get little or no training).
FLAGS = {
    "rare": "occurs fewer times than the minimum",
    "unreachable": "does not encode back to itself",
    "partial": "part of a UTF-8 character, never occurs",
}
MIN_SHARE = 1e-6  # the default minimum: 0.0001 % of all tokens, or 10 if that is more


def default_min_count(total_tokens: int) -> int:
    """The fewest occurrences a token needs not to count as rare: 0.0001 % of all tokens, at least 10."""
    return max(10, math.ceil(total_tokens * MIN_SHARE))


def vocab_entries(
    tokenizer: Tokenizer,
    log: MergeLog | None = None,
    *,
    occurrences: "dict[int, int] | None" = None,
    min_count: int | None = None,
) -> list[VocabEntry]:
    """Every token in id order, with the merge that made it (the first merge giving its bytes) and,
    when its merge log is given, that merge's count.

    Each token's occurrences come from `occurrences` (id -> count, e.g. measured on a text) or else
    from the merge log when it records them (in the encoded training corpus). With occurrences known,
    `flags` says why a token is under-trained (see `FLAGS`): fewer than `min_count` occurrences
    (default: `default_min_count` of all tokens), or a part of a character that never occurs; and,
    always, a token whose text encodes to other tokens (no text can ever produce it).
    """
    check_merge_log(tokenizer, log)
    if occurrences is None and log is not None and log.occurrences is not None:
        occurrences = dict(enumerate(log.occurrences))
    if occurrences is not None and min_count is None:
        min_count = default_min_count(sum(occurrences.values()))
    made_by: dict[bytes, int] = {}
    for rank, (left, right) in enumerate(tokenizer.merges):
        made_by.setdefault(left + right, rank)
    counts = [count for count, _ in log.steps] if log is not None else None
    specials = {t.encode("utf-8") for t in tokenizer.special_tokens}
    entries = []
    for token_id in sorted(tokenizer.vocab):
        token = tokenizer.vocab[token_id]
        entry = VocabEntry(token_id, token, special=token in specials)
        rank = made_by.get(token)
        if rank is not None and not entry.special:
            entry.rank, entry.pair = rank, tokenizer.merges[rank]
            entry.count = counts[rank] if counts is not None else None
        if not entry.special:
            entry.flags = _flags(tokenizer, entry, occurrences, min_count)
        entries.append(entry)
    return entries


def _flags(tokenizer: Tokenizer, entry: VocabEntry, occurrences: "dict[int, int] | None", min_count: int | None) -> list[str]:
    flags = []
    if occurrences is not None:
        entry.occurrences = occurrences.get(entry.id, 0)
        if entry.occurrences < min_count:
            flags.append("rare")
    try:
        text = entry.token.decode("utf-8")
    except UnicodeDecodeError:
        if entry.occurrences == 0:  # not whole characters: no text has them alone, so only merges use them
            flags.append("partial")
    else:
        if tokenizer.encode(text) != [entry.id]:
            flags.append("unreachable")
    return flags


def token_entry(tokenizer: Tokenizer, token_id: int, log: MergeLog | None = None, *,
                made_by: dict[bytes, int] | None = None, min_count: int | None = None) -> VocabEntry:
    """One token's `VocabEntry` (as in `vocab_entries`, with occurrences from the merge log when it
    records them), without going through the whole vocabulary. `made_by` (token bytes -> rank of the
    first merge giving them) may be passed in to save building it for every call."""
    if made_by is None:
        made_by = {}
        for rank, (left, right) in enumerate(tokenizer.merges):
            made_by.setdefault(left + right, rank)
    token = tokenizer.vocab[token_id]
    entry = VocabEntry(token_id, token, special=token in {t.encode("utf-8") for t in tokenizer.special_tokens})
    if entry.special:
        return entry
    rank = made_by.get(token)
    if rank is not None:
        entry.rank, entry.pair = rank, tokenizer.merges[rank]
        entry.count = log.steps[rank][0] if log is not None else None
    occurrences = None
    if log is not None and log.occurrences is not None:
        occurrences = {token_id: log.occurrences[token_id]} if token_id < len(log.occurrences) else {}
        if min_count is None:
            min_count = default_min_count(sum(log.occurrences))
    entry.flags = _flags(tokenizer, entry, occurrences, min_count)
    return entry


def under_trained(entries: Iterable[VocabEntry]) -> list[VocabEntry]:
    """The entries flagged as under-trained: tokens made by merges first (training made them, and
    later merges took their occurrences), then the rest (bytes that the corpus lacks); each group
    fewest occurrences first, then by id."""
    flagged = [e for e in entries if e.flags]
    return sorted(flagged, key=lambda e: (e.rank is None, e.occurrences if e.occurrences is not None else -1, e.id))


def check_merge_log(tokenizer: Tokenizer, log: MergeLog | None) -> None:
    """Refuse a merge log that does not record this tokenizer's merges (another run's, or a mix)."""
    if log is None:
        return
    problem = None
    if len(log.steps) != len(tokenizer.merges):
        problem = f"has {len(log.steps):,} merges and the tokenizer {len(tokenizer.merges):,}"
    elif log.merged is not None:
        for rank, ((left, right), shown) in enumerate(zip(tokenizer.merges, log.merged)):
            if readable_token(left + right) != shown:
                problem = f"makes {shown!r} at rank {rank} where the tokenizer makes {readable_token(left + right)!r}"
                break
    if problem:
        raise ValueError(f"this merge log {problem}: it is another tokenizer's log (bpe train --out DIR writes both)")


def vocab_tsv_lines(entries: Iterable[VocabEntry]) -> Iterable[str]:
    """`bpe vocab` output: a header, then id, readable token, merge rank, left, right, count, the
    token's occurrences and why it is under-trained (flags joined by commas; empty if it is not)."""
    yield "id\ttoken\trank\tleft\tright\tcount\toccurrences\tunder-trained"
    for e in entries:
        token = f"{e.token.decode('utf-8')} (special)" if e.special else readable_token(e.token)
        tail = f"{'' if e.occurrences is None else e.occurrences}\t{','.join(e.flags)}"
        if e.pair is None:
            yield f"{e.id}\t{token}\t\t\t\t\t{tail}"
        else:
            count = "" if e.count is None else e.count
            yield f"{e.id}\t{token}\t{e.rank}\t{readable_token(e.pair[0])}\t{readable_token(e.pair[1])}\t{count}\t{tail}"


def truncated(tokenizer: Tokenizer, num_merges: int) -> Tokenizer:
    """The tokens and merges that training would have given with only the first `num_merges` merges
    (the ids of the tokens kept stay as in `tokenizer`)."""
    merges = tokenizer.merges[:num_merges]
    keep = {bytes([b]) for b in range(256)} | {a + b for a, b in merges}
    keep |= {t.encode("utf-8") for t in tokenizer.special_tokens}
    vocab = {i: t for i, t in tokenizer.vocab.items() if t in keep}
    return Tokenizer(vocab, merges, tokenizer.special_tokens, pattern=tokenizer.pattern,
                     added_tokens=tokenizer.added_tokens, post_processor=tokenizer.post_processor)


def load_pretrained(name: str) -> tuple[Tokenizer | None, str]:
    """A pretrained tokenizer by name through `Tokenizer.from_pretrained`, or None and the reason."""
    load = getattr(Tokenizer, "from_pretrained", None)
    if load is None:
        return None, "this version of the package has no Tokenizer.from_pretrained"
    try:
        return load(name), ""
    except Exception as e:  # any failure (missing files, no network) only leaves this column out
        if _failed_download(e):
            return None, OFFLINE.format(name=name)
        return None, f"{type(e).__name__}: {e}".splitlines()[0][:200]


OFFLINE = ("not available offline: tiktoken downloads {name}'s rank file once; "
           "set TIKTOKEN_CACHE_DIR to a folder that holds it")


def _failed_download(error: BaseException) -> bool:
    """Whether a network failure (no connection, unknown host, timeout) is among the causes of `error`:
    tiktoken's download goes through `requests`, whose errors are OSErrors that name the host."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        names = {cls.__name__ for cls in type(error).__mro__}
        if isinstance(error, OSError) and names & {"ConnectionError", "Timeout", "TimeoutError", "URLError"}:
            return True
        error = error.__cause__ or error.__context__
    return False


# --- the report page -----------------------------------------------------------------------------


@dataclass
class HeldOut:
    """A text the tokenizer was not trained on: its name and (a sample of) its content."""

    name: str
    text: str


def read_sample(path: str | Path, max_bytes: int) -> HeldOut:
    """The first `max_bytes` of a UTF-8 file (cut after the last whole line when it is longer)."""
    path = Path(path)
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    cut = len(data) > max_bytes
    if cut:
        data = data[:max_bytes]
        newline = data.rfind(b"\n")
        if newline > max_bytes // 2:
            data = data[: newline + 1]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if not (cut and e.reason == "unexpected end of data" and len(data) - e.start < 4):
            raise ValueError(f"{path} is not valid UTF-8 at byte offset {e.start}") from None
        text = data[: e.start].decode("utf-8")  # the cut fell inside a character
    return HeldOut(path.name, text)


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise missing_extra("report", "bpe report's plots", package="matplotlib", instead="or uv sync --extra report") from None


def _figure(width: float, height: float):
    """A matplotlib Figure and its axes, made without pyplot (no global backend or figure list)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    ax = fig.add_subplot()
    ax.spines[["top", "right"]].set_visible(False)
    return fig, ax


def _svg(fig, prefix: str) -> str:
    """The figure as an SVG element to put inside HTML: text kept as text, ids made unique to the page
    by `prefix` (every plot names its parts figure_1, axes_1, ...), the same output for the same figure."""
    import matplotlib

    out = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "bpe-report"}):
        fig.savefig(out, format="svg", bbox_inches="tight")
    svg = out.getvalue()
    svg = svg[svg.index("<svg") :]  # drop the XML prologue and doctype
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)  # its creation date would vary
    return re.sub(r'(id="|url\(#|href="#)', rf"\g<1>{prefix}-", svg)


def build_report(
    tokenizer: Tokenizer,
    *,
    name: str,
    path: str | None = None,
    log: MergeLog | None = None,
    texts: list[HeldOut] = (),
    pretrained: "list[str | tuple[str, Tokenizer]]" = PRETRAINED,
    min_count: int | None = None,
    num_points: int = 7,
    sample_chars: int = 1500,
    progress: bool = False,
) -> str:
    """The report page for `tokenizer` (called `name`, loaded from `path`) as one self-contained HTML document.

    `log` is its merge log (for the training curve and merge counts), `texts` held-out text for the
    held-out curve, the comparison with the `pretrained` tokenizers (names loaded with
    `load_pretrained`, whose column says why when one cannot be loaded, or (label, Tokenizer)
    pairs already loaded) and the coloured sample; the
    held-out curve has about `num_points` vocabulary sizes. Tokens with fewer than `min_count`
    occurrences in the encoded training corpus (when the log records them) are listed as under-trained
    (default: `default_min_count`). `progress` shows a progress bar on a terminal.
    Raises MissingExtra when matplotlib is not installed.
    """
    _require_matplotlib()
    specials = [t.encode("utf-8") for t in tokenizer.special_tokens]
    base = 256 + len(tokenizer.special_tokens)
    merges = tokenizer.merges
    check_merge_log(tokenizer, log)
    # Held-out curve: the same text with the merges cut at a handful of sizes (all of them is ours).
    points = sorted({round(len(merges) * f) for f in _fractions(num_points)})
    sizes = [k for k in points if k < len(merges)] if texts else []
    bar = None
    if progress and texts:
        from tqdm import tqdm

        bar = tqdm(total=1 + len(sizes) + len(pretrained), unit="step", desc="report", disable=None)

    by_text: dict[object, list[TextStats]] = {}  # tokenizer's label (`_OURS` for ours) -> its stats on each text

    def measure(tok: Tokenizer, what: str, key: object = None) -> TextStats:
        if bar is not None:
            bar.set_postfix_str(what, refresh=True)
        stats = TextStats()
        each = []
        for t in texts:
            one = TextStats()
            one.add(tok, t.text)
            stats.update(one)
            each.append(one)
        by_text[what if key is None else key] = each
        if bar is not None:
            bar.update(1)
        return stats

    held_out: list[tuple[int, float]] = []
    others: list[tuple[str, TextStats | None, str]] = []
    try:
        ours = measure(tokenizer, "ours", _OURS) if texts else TextStats()
        for k in sizes:
            held_out.append((base + k, measure(truncated(tokenizer, k), f"{base + k:,} tokens", k).bytes_per_token))
        if texts:
            held_out.append((base + len(merges), ours.bytes_per_token))
            for item in pretrained:
                if isinstance(item, str):
                    pname, (other, reason) = item, load_pretrained(item)
                else:
                    (pname, other), reason = item, ""
                stats = None
                if other is not None:
                    try:
                        stats = measure(other, pname)
                    except Exception as e:  # a tokenizer that cannot encode this text only loses its row
                        reason = f"{type(e).__name__}: {e}".splitlines()[0][:200]
                elif bar is not None:
                    bar.update(1)
                others.append((pname, stats, reason))
    finally:
        if bar is not None:
            bar.close()

    training = compression_curve(log, base_vocab_size=base) if log is not None else []
    plots = {
        "curve": _curve_plot(training, held_out),
        "lengths": _length_plot(tokenizer, specials),
    }
    # Occurrences in the training corpus when the merge log records them; else (a pretrained tokenizer)
    # in the held-out text, which also lists the tokens that text happens to lack.
    counted_on = None
    occurrences = None
    if log is not None and log.occurrences is not None:
        counted_on = "the training corpus encoded with the final vocabulary"
        min_count = default_min_count(sum(log.occurrences)) if min_count is None else min_count
    elif texts:
        counted_on = "the held-out text (" + ", ".join(t.name for t in texts) + ")"
        occurrences = ours.counts
        min_count = default_min_count(ours.tokens) if min_count is None else min_count
    flagged = under_trained(vocab_entries(tokenizer, log, occurrences=occurrences, min_count=min_count))
    per_text = [(label, by_text[label]) for label in [_OURS] + [n for n, s, _ in others if s is not None]
                if label in by_text]
    return _page(tokenizer, name=name, path=path, log=log, texts=texts, ours=ours, others=others, per_text=per_text,
                 flagged=flagged, min_count=min_count, counted_on=counted_on,
                 training=training, held_out=held_out, points=[base + k for k in points], plots=plots,
                 sample_chars=sample_chars)


_OURS = object()  # the key of ours among the tokenizers measured on each text


def _fractions(n: int) -> list[float]:
    """n fractions from 0 to 1, spaced evenly on a log scale after 0 (small vocabularies change most)."""
    n = max(n, 2)
    return [0.0] + [2.0 ** -(n - 2 - i) for i in range(n - 1)]


def _curve_plot(training: list[tuple[int, float]], held_out: list[tuple[int, float]]) -> str | None:
    if not training and not held_out:
        return None
    fig, ax = _figure(10.5, 4.0)
    if training:
        ax.plot(*zip(*training), color="#2563eb", linewidth=1.8, label="training corpus (from the merge log)")
    if held_out:
        ax.plot(*zip(*held_out), "o--", color="#dc2626", linewidth=1.2, markersize=5, label="held-out text")
    ax.set_xlabel("vocabulary size")
    ax.set_ylabel("bytes per token")
    ax.set_ylim(bottom=1.0)
    ax.grid(True, color="#e5e7eb", linewidth=0.8)
    ax.legend(frameon=False, loc="upper left")
    return _svg(fig, "curve")


def _length_plot(tokenizer: Tokenizer, specials: list[bytes]) -> str:
    lengths = sorted(len(t) for t in tokenizer.vocab.values() if t not in specials)
    # A few very long tokens (runs of one character) would squeeze the rest into a corner: the last
    # bar gathers everything from the 99.5th percentile on.
    top = max(lengths[int(0.995 * (len(lengths) - 1))], min(lengths[-1], 12))
    fig, ax = _figure(5.2, 3.3)
    ax.hist([min(n, top) for n in lengths], bins=range(1, top + 2), align="left", rwidth=0.85, color="#0d9488")
    if lengths[-1] > top:
        longer = sum(n >= top for n in lengths)
        ax.set_xlabel(f"token length in bytes (the last bar: {longer:,} tokens of {top} to {lengths[-1]} bytes)")
    else:
        ax.set_xlabel("token length in bytes")
    ax.set_ylabel("tokens in the vocabulary")
    ax.set_xlim(0.3, top + 0.7)
    ax.grid(True, axis="y", color="#e5e7eb", linewidth=0.8)
    ax.set_axisbelow(True)
    return _svg(fig, "lengths")


def sample_of(text: str, max_chars: int = 1500) -> str:
    """The start of `text` that the page shows: at most `max_chars`, ending after a whole line if one
    ends in its second half."""
    if len(text) <= max_chars:
        return text
    sample = text[:max_chars]
    newline = sample.rfind("\n")
    return sample[: newline + 1] if newline >= max_chars // 2 else sample


def _sample_html(tokenizer: Tokenizer, text: str) -> tuple[str, int]:
    """The text as one coloured span per token (hover: id and bytes) and the number of tokens.

    A character whose bytes are split between tokens is shown in the token that completes it; the
    tokens before that show as a thin bar.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    specials = {t.encode("utf-8") for t in tokenizer.special_tokens}
    ids = tokenizer.encode(text)
    spans = []
    for n, token_id in enumerate(ids):
        token = tokenizer.vocab[token_id]
        shown = decoder.decode(token)
        classes = f"t c{n % 5}"
        title = f"id {token_id}: {readable_token(token)}"
        if token in specials:
            classes += " special"
            title = f"id {token_id}: special token"
        elif not shown:
            classes += " part"
            title += " (part of a character)"
        shown = html.escape(shown).replace("\n", "↵\n")
        spans.append(f'<span class="{classes}" data-id="{token_id}" title="{html.escape(title)}">{shown}</span>')
    return "".join(spans), len(ids)


def _code(token: bytes, limit: int = 16) -> str:
    """A token's readable form for the page, spaces shown as a faint ␣, shortened past `limit`
    characters (hover shows it whole)."""
    shown = readable_token(token)
    title = ""
    if len(shown) > limit:
        title = f' title="{html.escape(shown)} ({len(token)} bytes)"'
        shown = shown[: limit - 1] + "…"
    return f"<code{title}>" + html.escape(shown).replace(" ", '<span class="sp">␣</span>') + "</code>"


def _under_trained_html(flagged: list[VocabEntry], counted_on: str | None, min_count: int | None, shown: int = 60) -> str:
    """The section listing under-trained tokens: those made by merges in full (up to `shown`), then a
    count of the other ones (bytes the corpus lacks). `counted_on` says where occurrences were counted
    (None: nowhere, so only unreachable tokens are listed)."""
    e = html.escape
    parts = ['<section id="under-trained"><h2>Under-trained tokens</h2>']
    if counted_on is None:
        parts.append('<p class="missing">The merge log does not record how often each token occurs in the encoded '
                     "training corpus (<code>bpe train</code> writes it since the column <code>occurrences</code> "
                     "was added), and there is no held-out text to count them on, so only unreachable tokens are "
                     "listed.</p>")
    merged = [x for x in flagged if x.rank is not None]
    others = [x for x in flagged if x.rank is None]
    rule = f"fewer than {min_count:,} occurrences in {e(counted_on)}, or " if counted_on else ""
    parts.append(f'<p class="note">Tokens with {rule}no text that encodes to them: a model barely trains their '
                 "embeddings (Land and Bartolo, 2024). BPE makes them when later merges take all of a token's "
                 f'occurrences. <b id="under-trained-count" data-merged="{len(merged)}" data-others="{len(others)}">'
                 f"{len(merged):,} made by merges</b>, and {len(others):,} single bytes.</p>")
    if merged:
        parts.append('<table class="merges" id="under-trained-table"><thead><tr><th>id</th><th>token</th><th>merge</th>'
                     "<th>left</th><th>right</th><th>count at the merge</th><th>occurrences</th><th>why</th></tr></thead><tbody>")
        for x in merged[:shown]:
            count = "?" if x.count is None else f"{x.count:,}"
            occ = "?" if x.occurrences is None else f"{x.occurrences:,}"
            why = ", ".join(FLAGS[f] for f in x.flags)
            parts.append(f'<tr data-id="{x.id}"><td>{x.id}</td><td>{_code(x.token)}</td><td>{x.rank}</td>'
                         f"<td>{_code(x.pair[0])}</td><td>{_code(x.pair[1])}</td><td class=\"n\">{count}</td>"
                         f'<td class="n">{occ}</td><td>{e(why)}</td></tr>')
        parts.append("</tbody></table>")
        if len(merged) > shown:
            parts.append(f'<p class="note">and {len(merged) - shown:,} more: <code>bpe vocab DIR --under-trained</code> '
                         "lists them all.</p>")
    parts.append("</section>")
    return "".join(parts)


def _unavailable(reason: str) -> str:
    return reason if reason.startswith("not available") else f"not available: {reason}"


def _measures_table(rows: list[tuple[str, TextStats]], table_id: str) -> str:
    """An HTML table of `measure_rows`, one row per (label, stats)."""
    e = html.escape
    measures = measure_rows([s for _, s in rows])
    head = "".join(f"<th>{e(label)}</th>" for label, _ in measures)
    body = "".join(
        f"<tr><td>{e(label)}</td>" + "".join(f"<td>{values[k]}</td>" for _, values in measures) + "</tr>"
        for k, (label, _) in enumerate(rows)
    )
    return f'<table class="num" id="{table_id}"><thead><tr><th>tokenizer</th>{head}</tr></thead><tbody>{body}</tbody></table>'


def _fmt(x: float) -> str:
    return f"{x:.2f}"


def _page(tokenizer, *, name, path, log, texts, ours, others, per_text, flagged, min_count, counted_on, training, held_out,
          points, plots, sample_chars) -> str:
    e = html.escape
    merges = tokenizer.merges
    parts: list[str] = []
    add = parts.append

    summary = [("tokenizer", path)] if path and path != name else []
    summary += [
        ("vocabulary", f"{len(tokenizer.vocab):,} tokens"),
        ("merges", f"{len(merges):,}"),
        ("special tokens", ", ".join(tokenizer.special_tokens) or "none"),
        ("pre-tokenization pattern", tokenizer.pattern),
    ]
    if log is not None:
        tokens = log.steps[-1][1] if log.steps else log.corpus_bytes
        summary.append(("training corpus", f"{log.corpus_bytes:,} bytes → {tokens:,} tokens"))
        summary.append(("on the training corpus", f"{_fmt(training[-1][1])} bytes per token"))
    if texts:
        summary.append(("on the held-out text", f"{_fmt(ours.bytes_per_token)} bytes, {_fmt(ours.chars_per_token)} characters per token"))
    add('<dl class="summary">' + "".join(f"<div><dt>{e(k)}</dt><dd>{e(v)}</dd></div>" for k, v in summary) + "</dl>")

    # Compression curves.
    add('<section id="compression"><h2>Compression as the vocabulary grows</h2>')
    if plots["curve"]:
        note = "Bytes per token (higher is better)."
        if training:
            note += " The training curve is read from the merge log at every vocabulary size, without encoding anything."
        if held_out:
            note += " The held-out points encode the text again with the merges cut at that size."
        add(f'<p class="note">{note}</p>')
        add(f'<figure class="plot" id="curve-plot">{plots["curve"]}</figure>')
        on_training = dict(training)
        on_held_out = dict(held_out)
        cells = lambda values: "".join(f"<td>{_fmt(values[p])}</td>" if p in values else "<td>–</td>" for p in points)
        add('<table class="num points"><thead><tr><th>vocabulary size</th>'
            + "".join(f"<th>{p:,}</th>" for p in points) + "</tr></thead><tbody>")
        if training:
            add(f"<tr><td>training corpus</td>{cells(on_training)}</tr>")
        if held_out:
            add(f"<tr><td>held-out text</td>{cells(on_held_out)}</tr>")
        add("</tbody></table>")
    else:
        add('<p class="missing">No merge log (merge_log.tsv, written by <code>bpe train --out DIR</code>) and no held-out '
            "text: no curve to draw.</p>")
    if log is None:
        add('<p class="missing">No merge log for this tokenizer, so no training curve and no merge counts.</p>')
    add("</section>")

    # Comparison with pretrained tokenizers.
    if texts:
        names = ", ".join(t.name for t in texts)
        total = f"{ours.bytes:,} bytes, {ours.chars:,} characters"
        add(f'<section id="comparison"><h2>Against pretrained tokenizers</h2><p class="note">On {e(names)} ({total}). '
            "Characters per token of 1.00 is what a character-level tokenizer gives.</p>")
        add('<table class="num"><thead><tr><th>tokenizer</th><th>tokens</th><th>bytes per token</th>'
            "<th>characters per token</th>" + "".join(f"<th>{e(k)}</th>" for k in ("words", "other text", "partial", "crossing"))
            + "</tr></thead><tbody>")
        for label, s, reason in [(f"{name} (this one)", ours, ""), *others]:
            if s is None:
                add(f'<tr class="na"><td>{e(label)}</td><td colspan="7">{e(_unavailable(reason))}</td></tr>')
                continue
            shares = "".join(f"<td>{100 * s.kinds[k] / max(s.tokens, 1):.1f} %</td>" for k in KINDS)
            add(f"<tr><td>{e(label)}</td><td>{s.tokens:,}</td><td>{_fmt(s.bytes_per_token)}</td>"
                f"<td>{_fmt(s.chars_per_token)}</td>{shares}</tr>")
        add("</tbody></table>")
        add('<h3 id="measures">The measures papers use</h3><p class="note">Fertility: tokens per whitespace-separated '
            "word, and the share of words cut into two or more tokens (lower is better). Rényi efficiency "
            f"(α = {RENYI_ALPHA}) and Shannon efficiency of the token distribution: its entropy over log |V| "
            "(higher: the vocabulary is used more evenly). Vocabulary use: the share of tokens that occur, and how "
            "many of the most frequent tokens make up half of the text. See README, \"Measures\".</p>")
        rows = [(f"{name} (this one)", ours)] + [(label, s) for label, s, _ in others if s is not None]
        if len(texts) > 1:
            names_of = {_OURS: f"{name} (this one)"}
            rows += [(f"{names_of.get(label, label)} on {t.name}", one)
                     for k, t in enumerate(texts) for label, each in per_text for one in [each[k]]]
        add(_measures_table(rows, "measures-table"))
        add("</section>")

    # The vocabulary: lengths and kinds.
    specials = {t.encode("utf-8") for t in tokenizer.special_tokens}
    vocab_kinds = Counter(classify_token(t) for t in tokenizer.vocab.values() if t not in specials)
    n_vocab = max(sum(vocab_kinds.values()), 1)
    add('<section id="vocabulary"><h2>What is in the vocabulary</h2><div class="two">')
    add(f'<figure class="plot" id="length-plot">{plots["lengths"]}</figure>')
    head = "<th>in the vocabulary</th>" + ("<th>in the held-out text</th>" if texts else "")
    add(f'<table class="num kinds"><thead><tr><th>kind of token</th>{head}</tr></thead><tbody>')
    for kind, label in KINDS.items():
        cells = f"<td>{vocab_kinds[kind]:,} ({100 * vocab_kinds[kind] / n_vocab:.1f} %)</td>"
        if texts:
            cells += f"<td>{100 * ours.kinds[kind] / max(ours.tokens, 1):.1f} %</td>"
        add(f"<tr><td>{e(label)}</td>{cells}</tr>")
    add("</tbody></table></div></section>")

    # First and last merges.
    add('<section id="merges"><h2>First and last merges</h2><div class="two">')
    shown = 15
    for title, ranks in (("first", range(min(shown, len(merges)))),
                         ("last", range(max(len(merges) - shown, min(shown, len(merges))), len(merges)))):
        add(f'<div><h3>The {title} {len(ranks)}</h3><table class="merges"><thead><tr><th>rank</th><th>id</th>'
            "<th>left</th><th>right</th><th>token</th><th>count</th></tr></thead><tbody>")
        for r in ranks:
            left, right = merges[r]
            count = f"{log.steps[r][0]:,}" if log is not None else "?"
            add(f"<tr><td>{r}</td><td>{256 + r}</td><td>{_code(left)}</td><td>{_code(right)}</td>"
                f'<td>{_code(left + right)}</td><td class="n">{count}</td></tr>')
        add("</tbody></table></div>")
    add("</div></section>")

    # Under-trained tokens.
    add(_under_trained_html(flagged, counted_on, min_count))

    # A sample of the text with token boundaries.
    if texts:
        sample = sample_of(texts[0].text, sample_chars)
        spans, count = _sample_html(tokenizer, sample)
        add(f'<section id="sample"><h2>How {e(texts[0].name)} is cut</h2>'
            f'<p class="note">The first {len(sample):,} characters: <b id="sample-count" data-tokens="{count}">{count:,} tokens</b>. '
            "Each colour is one token; hover over one to see its id (all tokens with the same id light up). "
            "A thin bar is a token holding only part of a character.</p>")
        add(f'<p id="hover-info" class="hover">&nbsp;</p><div class="sample" id="sample-text">{spans}</div></section>')

    body = "\n".join(parts)
    return _TEMPLATE.format(title=e(f"BPE report: {name}"), heading=e(name), style=_STYLE, script=_SCRIPT, body=body)


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<main>
<header><p class="kicker">byte-level BPE tokenizer report</p><h1>{heading}</h1></header>
{body}
</main>
<script>{script}</script>
</body>
</html>
"""

# The colours and type of every page this package draws (the report, `bpe serve`).
BASE_STYLE = """
:root { --ink: #1f2937; --muted: #6b7280; --line: #e5e7eb; --bg: #f8fafc; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", "Noto Sans CJK SC", sans-serif; }
"""

_STYLE = BASE_STYLE + """main { max-width: 1080px; margin: 0 auto; padding: 24px 28px 48px; }
header h1 { margin: 0 0 16px; font-size: 26px; word-break: break-all; }
.kicker { margin: 0; color: var(--muted); text-transform: uppercase; letter-spacing: .08em; font-size: 12px; }
h2 { font-size: 19px; margin: 0 0 6px; }
h3 { font-size: 15px; margin: 0 0 6px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 18px 22px; margin: 18px 0; }
.note { color: var(--muted); margin: 0 0 12px; font-size: 14px; }
.missing { color: #92400e; background: #fffbeb; padding: 8px 12px; border-radius: 6px; }
.summary { display: grid; grid-template-columns: repeat(4, 1fr); gap: 10px; margin: 0; }
.summary div { background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 10px 14px; }
.summary dt { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .05em; }
.summary dd { margin: 2px 0 0; font-weight: 600; overflow-wrap: anywhere; }
figure.plot { margin: 0; }
figure.plot svg { width: 100%; height: auto; }
.two { display: grid; grid-template-columns: 1fr 1fr; gap: 22px; align-items: start; }
@media (max-width: 900px) { .two { grid-template-columns: 1fr; } }
table { border-collapse: collapse; width: 100%; font-size: 14px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); }
th { color: var(--muted); font-weight: 600; font-size: 12px; }
table.num td:not(:first-child), table.num th:not(:first-child), td.n { text-align: right; font-variant-numeric: tabular-nums; }
table.num td:not(:first-child), td.n { white-space: nowrap; }
tr.na td { color: var(--muted); font-style: italic; }
table.num tr.na td { white-space: normal; text-align: left; overflow-wrap: anywhere; }
code { font: 13px ui-monospace, "DejaVu Sans Mono", monospace; background: #f1f5f9; padding: 1px 4px;
  border-radius: 4px; white-space: pre; }
.sample { font: 15px/1.9 ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap; word-break: break-word;
  border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; max-height: 560px; overflow: auto; }
code .sp { color: #94a3b8; }
.t { border-radius: 3px; padding: 1px 0; }
.c0 { background: #dbeafe; } .c1 { background: #fde68a; } .c2 { background: #bbf7d0; }
.c3 { background: #fbcfe8; } .c4 { background: #ddd6fe; }
.t.part { display: inline-block; width: 4px; height: 1.1em; vertical-align: -2px; margin: 0 1px; background: #9ca3af; }
.t.special { background: #1f2937; color: #fff; }
.t.hl { outline: 2px solid #dc2626; }
.hover { font: 13px ui-monospace, "DejaVu Sans Mono", monospace; color: var(--muted); min-height: 1.5em; margin: 0 0 6px; }
"""

# Hovering a token shows its id and lights up every token with the same id; nothing else runs.
_SCRIPT = """
(function () {
  var box = document.getElementById("sample-text");
  if (!box) return;
  var info = document.getElementById("hover-info");
  var lit = [];
  box.addEventListener("mouseover", function (event) {
    var t = event.target.closest(".t");
    if (!t) return;
    lit.forEach(function (x) { x.classList.remove("hl"); });
    lit = Array.prototype.slice.call(box.querySelectorAll('.t[data-id="' + t.dataset.id + '"]'));
    lit.forEach(function (x) { x.classList.add("hl"); });
    info.textContent = t.title + "  (" + lit.length + " in this sample)";
  });
  document.body.dataset.sampleTokens = box.querySelectorAll(".t").length;
})();
"""
