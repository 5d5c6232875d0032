"""The report's two plots, drawn by matplotlib (the optional extra `report`) as SVG to put inline in
the page: bytes per token as the vocabulary grows, and the lengths of the vocabulary's tokens.
"""

import io
import re

from cs336_basics.bpe import Tokenizer
from cs336_basics.errors import missing_extra


def require_matplotlib() -> None:
    """Raise MissingExtra (the extra `report`) when matplotlib is not installed."""
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


def curve_plot(training: list[tuple[int, float]], held_out: list[tuple[int, float]]) -> str | None:
    """Bytes per token against vocabulary size, on the training corpus and on held-out text (each a
    list of (size, bytes per token)); None when both are empty."""
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


def length_plot(tokenizer: Tokenizer, specials: list[bytes]) -> str:
    """A histogram of the lengths in bytes of the vocabulary's tokens, leaving out `specials`."""
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
