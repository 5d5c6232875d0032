"""The report page of `bpe report`: what a tokenizer learned and how well it compresses text, as one
self-contained HTML file. Styles, the small script (files beside this module, see `files`) and the
plots (SVG drawn by matplotlib, the optional extra `report`) are all inline, so it opens anywhere
without a network.

The training curve comes from the merge log (see `train.merge_log`); the held-out curve encodes the
text again with the merges cut at a handful of vocabulary sizes. `build_report` measures, and the
sections (see `sections`) turn what it measured into HTML.
"""

import html
from dataclasses import dataclass, field

from cs336_basics.bpe import Tokenizer
from cs336_basics.report import sections
from cs336_basics.report.files import page_file
from cs336_basics.report.loading import PRETRAINED, HeldOut, load_pretrained, truncated
from cs336_basics.report.measures import TextStats
from cs336_basics.report.plots import curve_plot, length_plot, require_matplotlib
from cs336_basics.report.vocabulary import check_merge_log, default_min_count, under_trained, vocab_entries
from cs336_basics.train.merge_log import MergeLog, compression_curve, token_ids


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
    require_matplotlib()
    specials = [t.encode("utf-8") for t in tokenizer.special_tokens]
    base = 256 + len(tokenizer.special_tokens)
    merges = tokenizer.merges
    check_merge_log(tokenizer, log)
    # Held-out curve: the same text with the merges cut at a handful of sizes (all of them is ours).
    points = sorted({round(len(merges) * f) for f in _fractions(num_points)})
    sizes = [k for k in points if k < len(merges)] if texts else []
    measured = _measure(tokenizer, texts, sizes, base, pretrained, progress)
    ours = measured.ours

    training = compression_curve(log, base_vocab_size=base) if log is not None else []
    curve = curve_plot(training, measured.held_out)
    lengths = length_plot(tokenizer, specials)
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

    parts = [
        sections.summary_html(tokenizer, name=name, path=path, log=log, texts=texts, ours=ours, training=training),
        sections.compression_html(curve, log=log, training=training, held_out=measured.held_out,
                                  points=[base + k for k in points]),
    ]
    if texts:
        parts.append(sections.comparison_html(name, texts, ours, measured.others, measured.per_text(name)))
    parts.append(sections.vocabulary_html(tokenizer, lengths, texts, ours))
    parts.append(sections.merges_html(merges, log, ids=token_ids(tokenizer.vocab, merges)[256:]))
    parts.append(sections.under_trained_html(flagged, counted_on, min_count))
    if texts:
        parts.append(sections.sample_section_html(tokenizer, texts[0], sample_chars))
    e = html.escape
    return page_file("page.html").format(title=e(f"BPE report: {name}"), heading=e(name), body="\n".join(parts),
                                         style=page_file("base.css") + page_file("page.css"), script=page_file("page.js"))


_OURS = object()  # the key of ours among the tokenizers measured on each text


@dataclass
class _Measured:
    """What encoding the held-out text gave: our stats, the held-out curve (vocabulary size, bytes per
    token), each pretrained tokenizer's (label, stats or None, why not), and every tokenizer's stats
    on each text (keyed by label: `_OURS` for ours, the number of merges kept for a cut one)."""

    ours: TextStats
    held_out: list[tuple[int, float]] = field(default_factory=list)
    others: list[tuple[str, TextStats | None, str]] = field(default_factory=list)
    by_text: dict[object, list[TextStats]] = field(default_factory=dict)

    def per_text(self, name: str) -> list[tuple[str, list[TextStats]]]:
        """(label, stats on each text) for ours, called `name`, and each pretrained tokenizer measured."""
        labels = [_OURS] + [n for n, s, _ in self.others if s is not None]
        return [(f"{name} (this one)" if label is _OURS else label, self.by_text[label])
                for label in labels if label in self.by_text]


def _measure(tokenizer: Tokenizer, texts: list[HeldOut], sizes: list[int], base: int,
             pretrained: "list[str | tuple[str, Tokenizer]]", progress: bool) -> _Measured:
    """Encode `texts` with ours, ours cut to each of `sizes` merges (`base` is the vocabulary size
    before the merges) and each of the `pretrained` tokenizers; nothing when there are no texts."""
    bar = None
    if progress and texts:
        from tqdm import tqdm

        bar = tqdm(total=1 + len(sizes) + len(pretrained), unit="step", desc="report", disable=None)

    by_text: dict[object, list[TextStats]] = {}

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
            held_out.append((base + len(tokenizer.merges), ours.bytes_per_token))
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
    return _Measured(ours, held_out, others, by_text)


def _fractions(n: int) -> list[float]:
    """n fractions from 0 to 1, spaced evenly on a log scale after 0 (small vocabularies change most)."""
    n = max(n, 2)
    return [0.0] + [2.0 ** -(n - 2 - i) for i in range(n - 1)]
