"""The documentation site (mkdocs.yml, docs/): it builds with `mkdocs build --strict`, so a broken
link, a page missing from the navigation or a docstring mkdocstrings cannot read fails; it asks
nothing of the network; its command reference is `bpe`'s own `--help`, every command and
subcommand; and (slow) headless Chromium renders the home page and the Chinese page, whose
screenshots the test leaves in its temporary folder and prints.

The docs group's packages (mkdocs, Material, mkdocstrings) are in the dev group too, so the test
runs the build with this interpreter, as `uv run --group docs mkdocs build --strict` does.
"""

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from cs336_basics.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
# The hook the build runs (docs/hooks is no package).
_spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "docs" / "hooks" / "cli_reference.py")
cli_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cli_reference)


def nav_pages(nav) -> dict[str, str]:
    """mkdocs.yml's navigation as {page file: title}."""
    pages = {}
    for entry in nav:
        for title, target in entry.items():
            pages.update(nav_pages(target) if isinstance(target, list) else {target: title})
    return pages


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return out


def test_every_page_is_built_and_in_the_navigation(site):
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = nav_pages(config["nav"])
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk == set(pages)
    for page, title in pages.items():
        html = (site / page.replace(".md", ".html")).read_text(encoding="utf-8")
        assert f"<title>{title} - " in html or (page == "index.md" and "<title>" in html)


def test_the_site_asks_nothing_of_the_network(site):
    # No web fonts, no scripts or styles from elsewhere: the built site reads from disk alone.
    remote = re.compile(r"""<(?:link|script|img)\b[^>]*\b(?:href|src)=["']?(?:https?:)?//""", re.I)
    for path in site.rglob("*.html"):
        html = path.read_text(encoding="utf-8")
        assert not remote.search(html), f"{path.relative_to(site)} loads {remote.search(html).group(0)}"
        assert "fonts.googleapis" not in html and "fonts.gstatic" not in html


class Pre(HTMLParser):
    """The text of each <pre> element."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self.depth = 0

    def handle_starttag(self, tag, attrs):
        if tag == "pre":
            self.depth += 1
            self.blocks.append("")

    def handle_endtag(self, tag):
        if tag == "pre":
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.blocks[-1] += data


def test_command_reference_is_every_commands_help(site):
    html = (site / "cli.html").read_text(encoding="utf-8")
    pre = Pre()
    pre.feed(html)
    shown = {block.strip() for block in pre.blocks}
    parser = build_parser()
    # Every parser under `bpe` that `--help` lists, found through every name it answers to (aliases
    # lead to the same one); a command added without help is hidden, as argparse hides it.
    parsers, todo = {}, [("bpe", parser)]
    while todo:
        name, p = todo.pop()
        parsers.setdefault(id(p), (name, p))
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                listed = {c.dest for c in action._choices_actions}
                todo += [(f"{name} {sub}", q) for sub, q in action.choices.items()
                         if any(action.choices[n] is q for n in listed)]
    assert len(parsers) >= 14  # bpe, its commands, and dataset's three
    with cli_reference.columns(cli_reference.WIDTH):
        for name, p in parsers.values():
            assert p.format_help().strip() in shown, f"`{name} --help` is not on the command reference page"
    for name in ("bpe-train", "bpe-dataset-convert", "bpe-count", "exit-statuses"):
        assert f'id="{name}"' in html  # anchors other pages link to


def test_api_reference_shows_examples_as_code(site):
    # The docstrings' `>>>` examples become code blocks (docs/hooks/doctest_fences.py); Markdown
    # alone would make them quotes nested three deep.
    html = (site / "api.html").read_text(encoding="utf-8")
    pre = Pre()
    pre.feed(html)
    assert "<blockquote>" not in html
    assert any(block.startswith(">>> tok = Tokenizer.from_files(") for block in pre.blocks)
    # The CS336 calls and the loader, each under an anchor other pages can link to (api.md#ID).
    for name in ("bpe.train_bpe", "bpe.train_bpe_from_iterator", "bpe.train_bpe_from_counts", "bpe.Tokenizer",
                 "bpe.Tokenizer.from_files", "bpe.Tokenizer.encode", "bpe.Tokenizer.encode_iterable",
                 "bpe.Tokenizer.decode", "datasets.loader.TokenDataset.get_batch", "counts.writer.count_corpus"):
        assert f'id="cs336_basics.{name}"' in html


def test_command_table_lists_each_command_once_and_escapes_bars():
    parser = argparse.ArgumentParser(prog="bpe")
    commands = parser.add_subparsers()
    commands.add_parser("convert", aliases=["old-convert"], help="write hf|tiktoken|gpt2")
    group = commands.add_parser("dataset", help="datasets").add_subparsers()
    group.add_parser("info", help="what a dataset holds")
    commands.add_parser("hidden")  # no help: listed by argparse as a choice, not as a command
    text = cli_reference.reference_markdown(parser)
    rows = [line for line in text.splitlines() if line.startswith("| [`")]
    assert rows == ["| [`bpe convert`](#bpe-convert) | write hf\\|tiktoken\\|gpt2 |",
                    "| [`bpe dataset`](#bpe-dataset) | datasets |",
                    "| [`bpe dataset info`](#bpe-dataset-info) | what a dataset holds |"]
    assert "### bpe dataset info" in text and "old-convert" not in text.split("```")[0]


# --- the browser (slow) -------------------------------------------------------------------------------


class Dom(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.nav_links: list[str] = []
        self.h1 = ""
        self._in: list[str] = []

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "title":
            self._in.append("title")
        elif tag == "a" and "md-nav__link" in classes:
            self._in.append("nav")
            self.nav_links.append("")
        elif tag == "h1":
            self._in.append("h1")
        else:
            self._in.append("")

    def handle_endtag(self, tag):
        if self._in:
            self._in.pop()

    def handle_data(self, data):
        where = next((w for w in reversed(self._in) if w), "")
        if where == "title":
            self.title += data
        elif where == "nav":
            self.nav_links[-1] += data
        elif where == "h1":
            self.h1 += data


@pytest.mark.slow  # starts a browser
@pytest.mark.parametrize("page, title", [("index.html", "cs336-basics"), ("zh.html", "快速上手")])
def test_browser_renders_the_site(site, page, title, tmp_path):
    from tests.test_report_browser import run_chromium

    if page == "zh.html" and not _has_chinese_font():
        message = "no font with Chinese characters (apt-get install fonts-wqy-microhei; .ci/run does it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    uri = (site / page).as_uri()
    dom = Dom()
    dom.feed(run_chromium(tmp_path, "--dump-dom", uri).stdout)
    assert title in dom.title and dom.h1.strip()
    links = {" ".join(link.split()) for link in dom.nav_links}
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert set(nav_pages(config["nav"]).values()) - {"Home"} <= links  # the whole navigation is there

    shot = tmp_path / page.replace(".html", ".png")
    run_chromium(tmp_path, "--window-size=1280,1600", "--hide-scrollbars", f"--screenshot={shot}", uri)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (1280, 1600)
    assert len(data) > 50_000  # a blank page compresses to a few kilobytes
    print(f"screenshot of {page}: {shot}")


def _has_chinese_font() -> bool:
    if shutil.which("fc-list") is None:
        return False
    return bool(subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout.strip())
