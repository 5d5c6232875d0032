"""The report page rendered by a real browser: headless Chromium (Debian's `chromium` package, which
`.ci/run` installs) runs the page's script, and the test reads the resulting DOM and takes a screenshot.

In CI (CI=true) a missing or failing browser fails the test; elsewhere it is skipped with the reason.
"""

import os
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from cs336_basics import report
from cs336_basics.bpe import Tokenizer, train_bpe
from cs336_basics.train.merge_log import MergeLog, compression_curve
from tests.common import FIXTURES_PATH
from tests.test_report import FakePretrained

pytestmark = pytest.mark.slow  # starts a browser

EOT = "<|endoftext|>"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    message = "no chromium on PATH (apt-get install chromium; .ci/run does it)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def run_chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    profile.mkdir()
    result = subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0:
        message = f"chromium exited with {result.returncode}: {result.stderr[-2000:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return result


class Dom(HTMLParser):
    """What the test needs from the rendered DOM: elements by id, the sample's token spans, and the
    body's attributes (set by the page's script)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: dict[str, dict] = {}
        self.repeated_ids: list[str] = []
        self.body: dict = {}
        self.stack: list[str] = []
        self.tokens: list[dict] = []  # each: attributes + "text"
        self.svg_in: dict[str, int] = {}
        self.in_token = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "body":
            self.body = attrs
        if "id" in attrs:
            if attrs["id"] in self.ids:
                self.repeated_ids.append(attrs["id"])
            self.ids[attrs["id"]] = attrs
        if tag == "svg":
            for open_id in self.stack:
                self.svg_in[open_id] = self.svg_in.get(open_id, 0) + 1
        if tag == "span" and "sample-text" in self.stack and "t" in attrs.get("class", "").split():
            self.tokens.append({**attrs, "text": ""})
            self.in_token += 1
        self.stack.append(attrs.get("id", tag))

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()
        if tag == "span" and self.in_token:
            self.in_token -= 1

    def handle_data(self, data):
        if self.in_token:
            self.tokens[-1]["text"] += data


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    steps: list[tuple[int, int]] = []
    stats: dict = {}
    vocab, merges = train_bpe(FIXTURES_PATH / "english.txt", 700, [EOT], merge_log=steps, stats=stats)
    log = MergeLog(stats["pretoken_bytes"], steps)
    tokenizer = Tokenizer(vocab, merges, [EOT])
    texts = [report.read_sample(FIXTURES_PATH / name, 1 << 20) for name in ("german.txt", "chinese.txt")]
    html_path = folder / "report.html"
    with pytest.MonkeyPatch.context() as m:  # tests are offline: one pretrained "loads" (ours), the others fail
        m.setattr(Tokenizer, "from_pretrained", FakePretrained(tokenizer), raising=False)
        page = report.build_report(tokenizer, name="english, vocab 700", log=log, texts=texts)
    html_path.write_text(page, encoding="utf-8")
    return html_path, tokenizer, texts, log


def test_browser_renders_the_report(page, tmp_path):
    html_path, tokenizer, texts, log = page
    dumped = run_chromium(tmp_path, "--dump-dom", html_path.as_uri()).stdout
    dom = Dom()
    dom.feed(dumped)

    # The plots are there, as SVG inside their figures.
    assert dom.svg_in.get("curve-plot") == 1 and dom.svg_in.get("length-plot") == 1
    for section in ("compression", "comparison", "vocabulary", "merges", "sample"):
        assert section in dom.ids
    assert dom.repeated_ids == []  # the two SVGs' parts are named apart

    # The sample: one span per token of exactly the text shown, and the script ran over them.
    sample = report.sample_of(texts[0].text)
    expected = tokenizer.encode(sample)
    assert [int(t["data-id"]) for t in dom.tokens] == expected
    assert "".join(t["text"] for t in dom.tokens).replace("↵", "") == sample
    assert dom.ids["sample-count"]["data-tokens"] == str(len(expected))
    assert dom.body.get("data-sample-tokens") == str(len(expected))  # written by the page's script
    assert "t c0" in dumped and "special" in dumped  # colours, and the special token set apart

    # The training curve ends where the merge log says.
    final = compression_curve(log, base_vocab_size=257)[-1][1]
    assert f"{final:.2f} bytes per token" in dumped


def test_browser_screenshot(page, tmp_path):
    html_path = page[0]
    shot = tmp_path / "report.png"
    run_chromium(tmp_path, "--window-size=1200,2600", "--hide-scrollbars", f"--screenshot={shot}", html_path.as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1200, 2600)
    assert len(data) > 100_000  # a blank page compresses to a few kilobytes
