"""MkDocs hook: the command reference (docs/cli.md) written from `bpe`'s own parser at build time.

docs/cli.md holds the marker `<!-- bpe commands -->`; the build replaces it with a table of the
commands and, for each command and subcommand, a heading (`## bpe train`, anchor `#bpe-train`;
`### bpe dataset convert`, anchor `#bpe-dataset-convert`) over the text its `--help` prints. So the
page says what `bpe ... --help` says, word for word, and cannot drift from it.
"""

import argparse
import os
from contextlib import contextmanager

from mkdocs.exceptions import PluginError

MARKER = "<!-- bpe commands -->"
PAGE = "cli.md"
WIDTH = 100  # columns argparse wraps the help at, whatever the terminal that builds the site


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if markdown.count(MARKER) != 1:
        raise PluginError(f"docs/{PAGE} must hold the line {MARKER} once: the command reference goes there")
    from cs336_basics.cli import build_parser

    return markdown.replace(MARKER, reference_markdown(build_parser()))


def commands(parser: argparse.ArgumentParser, name: str = "bpe"):
    """(full name, one-line help, parser, depth) for the parser and each command under it, depth
    first, in the order `--help` lists them; aliases and hidden commands left out."""
    yield name, parser.description or "", parser, 0
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:  # the commands --help lists, each once
                sub = action.choices[choice.dest]
                for full, text, p, depth in commands(sub, f"{name} {choice.dest}"):
                    yield full, (choice.help if p is sub else text), p, depth + 1


def reference_markdown(parser: argparse.ArgumentParser) -> str:
    """The markdown that replaces the marker: a table of every command, then each one's help."""
    found = list(commands(parser))
    lines = ["| command | what it does |", "| --- | --- |"]
    for full, text, _, depth in found[1:]:
        cell = text.replace("|", "\\|")  # a | in the help would end the table's cell
        lines.append(f"| [`{full}`](#{anchor(full)}) | {cell} |")
    lines.append("")
    with columns(WIDTH):
        for full, text, p, depth in found:
            lines += ["#" * (1 + max(depth, 1)) + f" {full}", ""]
            if text and depth:
                lines += [text[0].upper() + text[1:].rstrip(".") + ".", ""]
            lines += ["```text", p.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


def anchor(full: str) -> str:
    return full.replace(" ", "-")


@contextmanager
def columns(width: int):
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before
