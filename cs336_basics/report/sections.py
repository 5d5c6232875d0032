"""The sections of the report page as HTML, each from what `page.build_report` measured: the summary
cards, the compression curve, the comparison with pretrained tokenizers, what is in the vocabulary,
the first and last merges, the under-trained tokens and a sample of text cut into tokens.

Each returns its piece of the page; the page joins them with newlines.
"""

import codecs
import html
from collections import Counter

from cs336_basics.bpe import Tokenizer
from cs336_basics.report.loading import HeldOut
from cs336_basics.report.measures import KINDS, RENYI_ALPHA, TextStats, classify_token, measure_rows, on_text
from cs336_basics.report.vocabulary import FLAGS, VocabEntry
from cs336_basics.train.merge_log import MergeLog, readable_token


def summary_html(tokenizer: Tokenizer, *, name: str, path: str | None, log: MergeLog | None, texts: list[HeldOut],
                 ours: TextStats, training: list[tuple[int, float]]) -> str:
    """The cards at the top: where the tokenizer comes from, its size, pattern, training corpus and
    compression."""
    e = html.escape
    summary = [("tokenizer", path)] if path and path != name else []
    summary += [
        ("vocabulary", f"{len(tokenizer.vocab):,} tokens"),
        ("merges", f"{len(tokenizer.merges):,}"),
        ("special tokens", ", ".join(tokenizer.special_tokens) or "none"),
        ("pre-tokenization pattern", tokenizer.pattern),
    ]
    if log is not None:
        # The merge log counts the corpus without its special tokens: that is the text measured here.
        tokens = log.steps[-1][1] if log.steps else log.corpus_bytes
        summary.append(("training corpus", f"{log.corpus_bytes:,} bytes → {tokens:,} tokens"))
        summary.append(("on the training corpus", on_text(log.corpus_bytes, tokens, "the training corpus outside "
                                                                                   "special tokens")))
    if texts:
        parts = {"all" if t.whole else "the first" for t in texts}
        part = parts.pop() if len(parts) == 1 else "samples of"
        names = ", ".join(t.name for t in texts)
        summary.append(("on the held-out text", f"{on_text(ours.bytes, ours.tokens, names, part)}; "
                                                f"{_fmt(ours.chars_per_token)} characters per token"))
    return '<dl class="summary">' + "".join(f"<div><dt>{e(k)}</dt><dd>{e(v)}</dd></div>" for k, v in summary) + "</dl>"


def compression_html(curve: str | None, *, log: MergeLog | None, training: list[tuple[int, float]],
                     held_out: list[tuple[int, float]], points: list[int]) -> str:
    """The compression curve (`curve`, an SVG, or None when there is nothing to draw) and the table
    of bytes per token at the vocabulary sizes `points`, on the training corpus and held-out text."""
    parts: list[str] = []
    add = parts.append
    add('<section id="compression"><h2>Compression as the vocabulary grows</h2>')
    if curve:
        note = "Bytes per token (higher is better)."
        if training:
            note += (" The training curve is read from the merge log at every vocabulary size, without encoding "
                     "anything; it measures the training corpus outside its special tokens.")
        if held_out:
            note += " The held-out points encode the text again with the merges cut at that size."
        add(f'<p class="note">{note}</p>')
        add(f'<figure class="plot" id="curve-plot">{curve}</figure>')
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
    return "\n".join(parts)


def comparison_html(name: str, texts: list[HeldOut], ours: TextStats, others: list[tuple[str, TextStats | None, str]],
                    per_text: list[tuple[str, list[TextStats]]]) -> str:
    """Ours (called `name`) against pretrained tokenizers on the held-out `texts`: `others` holds
    (label, stats or None, why not), `per_text` (label, stats on each text) for the measures table,
    which has a row per text when there are several."""
    e = html.escape
    parts: list[str] = []
    add = parts.append
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
        "many of the most frequent tokens make up half of the text. See docs/looking-inside.md, \"Measures\".</p>")
    rows = [(f"{name} (this one)", ours)] + [(label, s) for label, s, _ in others if s is not None]
    if len(texts) > 1:
        rows += [(f"{label} on {t.name}", one) for k, t in enumerate(texts) for label, each in per_text for one in [each[k]]]
    add(_measures_table(rows, "measures-table"))
    add("</section>")
    return "\n".join(parts)


def vocabulary_html(tokenizer: Tokenizer, lengths: str, texts: list[HeldOut], ours: TextStats) -> str:
    """The plot of token lengths (`lengths`, an SVG) beside the kinds of tokens in the vocabulary
    and, with held-out `texts`, in them."""
    e = html.escape
    parts: list[str] = []
    add = parts.append
    specials = {t.encode("utf-8") for t in tokenizer.special_tokens}
    vocab_kinds = Counter(classify_token(t) for t in tokenizer.vocab.values() if t not in specials)
    n_vocab = max(sum(vocab_kinds.values()), 1)
    add('<section id="vocabulary"><h2>What is in the vocabulary</h2><div class="two">')
    add(f'<figure class="plot" id="length-plot">{lengths}</figure>')
    head = "<th>in the vocabulary</th>" + ("<th>in the held-out text</th>" if texts else "")
    add(f'<table class="num kinds"><thead><tr><th>kind of token</th>{head}</tr></thead><tbody>')
    for kind, label in KINDS.items():
        cells = f"<td>{vocab_kinds[kind]:,} ({100 * vocab_kinds[kind] / n_vocab:.1f} %)</td>"
        if texts:
            cells += f"<td>{100 * ours.kinds[kind] / max(ours.tokens, 1):.1f} %</td>"
        add(f"<tr><td>{e(label)}</td>{cells}</tr>")
    add("</tbody></table></div></section>")
    return "\n".join(parts)


def merges_html(merges: list[tuple[bytes, bytes]], log: MergeLog | None, shown: int = 15,
                ids: "list[int | None] | None" = None) -> str:
    """The first and the last `shown` merges, with their counts when the merge log is given; `ids`:
    the id of each merge's token in the vocabulary (default 256 + rank, see `merge_log.token_ids`)."""
    parts: list[str] = []
    add = parts.append
    add('<section id="merges"><h2>First and last merges</h2><div class="two">')
    for title, ranks in (("first", range(min(shown, len(merges)))),
                         ("last", range(max(len(merges) - shown, min(shown, len(merges))), len(merges)))):
        add(f'<div><h3>The {title} {len(ranks)}</h3><table class="merges"><thead><tr><th>rank</th><th>id</th>'
            "<th>left</th><th>right</th><th>token</th><th>count</th></tr></thead><tbody>")
        for r in ranks:
            left, right = merges[r]
            count = f"{log.steps[r][0]:,}" if log is not None else "?"
            add(f"<tr><td>{r}</td><td>{256 + r if ids is None else ids[r]}</td><td>{_code(left)}</td><td>{_code(right)}</td>"
                f'<td>{_code(left + right)}</td><td class="n">{count}</td></tr>')
        add("</tbody></table></div>")
    add("</div></section>")
    return "\n".join(parts)


def under_trained_html(flagged: list[VocabEntry], counted_on: str | None, min_count: int | None, shown: int = 60) -> str:
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
            parts.append(f'<p class="note">and {len(merged) - shown:,} more: <code>bpe vocab --tokenizer DIR --under-trained</code> '
                         "lists them all.</p>")
    parts.append("</section>")
    return "".join(parts)


def sample_section_html(tokenizer: Tokenizer, text: HeldOut, max_chars: int) -> str:
    """The start of `text` (see `sample_of`) cut into tokens, one colour each."""
    e = html.escape
    sample = sample_of(text.text, max_chars)
    spans, count = sample_html(tokenizer, sample)
    return "\n".join([
        f'<section id="sample"><h2>How {e(text.name)} is cut</h2>'
        f'<p class="note">The first {len(sample):,} characters: <b id="sample-count" data-tokens="{count}">{count:,} tokens</b>. '
        "Each colour is one token; hover over one to see its id (all tokens with the same id light up). "
        "A thin bar is a token holding only part of a character.</p>",
        f'<p id="hover-info" class="hover">&nbsp;</p><div class="sample" id="sample-text">{spans}</div></section>',
    ])


def sample_of(text: str, max_chars: int = 1500) -> str:
    """The start of `text` that the page shows: at most `max_chars`, ending after a whole line if one
    ends in its second half."""
    if len(text) <= max_chars:
        return text
    sample = text[:max_chars]
    newline = sample.rfind("\n")
    return sample[: newline + 1] if newline >= max_chars // 2 else sample


def sample_html(tokenizer: Tokenizer, text: str) -> tuple[str, int]:
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

