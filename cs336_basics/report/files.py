"""The pages' files: the HTML, CSS and JavaScript of the report page and of `bpe serve`'s live page,
which ship as package data beside this module (pyproject.toml's package-data) and are read here.

    base.css                          the colours and type of both pages
    page.html, page.css, page.js      the report (`page.build_report` fills the template with
                                      `str.format`); the script lights up every token with the id
                                      hovered over in the sample, and nothing else runs
    serve.html, serve.css, serve.js   the live page (`serve` fills the template); the script sends
                                      the text a moment after typing stops, draws the answer (dropping
                                      answers to older requests) and asks for a token's details on a click

A page inlines its style (base.css, then its own) and its script, so it opens anywhere without a
network. The files are read as they are, byte for byte: an edit to one is an edit to the page.
"""

from functools import cache
from importlib import resources


@cache
def page_file(name: str) -> str:
    """The text of the page file `name` (e.g. "base.css"). Raises FileNotFoundError for a name that
    is not one of them."""
    return (resources.files(__package__) / name).read_text(encoding="utf-8")
