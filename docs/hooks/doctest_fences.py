"""Griffe extension for the API reference (docs/api.md): a docstring's `>>>` example becomes a fenced
`pycon` block, so Markdown shows it as code rather than as nested quotes.

Our docstrings are prose with `code` in backticks and doctest-style examples, in no section style
(Google, NumPy); mkdocs.yml reads them with `docstring_style: null` and loads this extension.
"""

import re

import griffe

_FLAGS = re.compile(r"\s*#\s*doctest:.*$")


def fence_examples(text: str) -> str:
    """`text` with each run of `>>>` lines (with their `...` continuations and the output lines
    up to a blank line) put in a ```` ```pycon ```` fence, doctest flags removed."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        stripped = lines[i].lstrip()
        if not stripped.startswith(">>>"):
            out.append(lines[i])
            i += 1
            continue
        indent = lines[i][: len(lines[i]) - len(stripped)]
        block = []
        while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
            block.append(_FLAGS.sub("", lines[i][len(indent):]))
            i += 1
        if out and out[-1].strip():
            out.append("")
        out += ["```pycon", *block, "```"]
        if i < len(lines) and lines[i].strip():
            out.append("")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_object(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_examples(obj.docstring.value)
