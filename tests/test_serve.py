"""`bpe serve`: the server's answers checked against `Tokenizer.encode` and the merge log, its limits,
and the page driven in headless Chromium as a person would (type, wait, read the DOM, click), with a
screenshot saved in the test's folder.

Chromium is driven through its DevTools protocol over a pipe (`--remote-debugging-pipe`: JSON
messages ending in a NUL byte, commands on its fd 3, answers on its fd 4), so no websocket client is
needed. In CI (CI=true) a missing or failing browser fails the test; elsewhere it is skipped.
"""

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from cs336_basics import serve
from cs336_basics.bpe import Tokenizer
from cs336_basics.cli import main
from cs336_basics.train.merge_log import read_merge_log, readable_token
from tests.common import FIXTURES_PATH
from tests.test_report_browser import FLAGS, chromium

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("serve") / "english-500"
    assert main(["train", str(FIXTURES_PATH / "english.txt"), "--vocab-size", "500", "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def server(folder):
    ours = Tokenizer.from_pretrained(folder)
    small = Tokenizer({i: bytes([i]) for i in range(256)}, [], [])  # a second column: bytes only
    served = [serve.Served("english-500", ours, read_merge_log(folder / "merge_log.tsv")), serve.Served("bytes", small)]
    httpd = serve.make_server(served, max_bytes=2000)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", ours
    httpd.shutdown()
    httpd.server_close()


def post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url + "/encode", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


# --- the server ------------------------------------------------------------------------------------


def test_encode_answers_with_our_tokenizers_ids(server):
    url, ours = server
    text = "The cat sat. 日本 naïve<|endoftext|>x"
    status, answer = post(url, json.dumps({"text": text}).encode())
    assert status == 200
    first, second = answer["tokenizers"]
    assert first["name"] == "english-500" and [t[0] for t in first["tokens"]] == ours.encode(text)
    assert [t[0] for t in second["tokens"]] == list(text.encode())
    assert first["count"] == len(ours.encode(text)) and first["bytes"] == len(text.encode()) and first["chars"] == len(text)
    assert first["bytes_per_token"] == round(len(text.encode()) / first["count"], 2)
    assert "".join(t[1] for t in first["tokens"]) == text  # each character shown once, in the token completing it
    # One byte per token: the first bytes of 日, 本 and ï are parts of a character, shown as a bar.
    starts = [n for n, ch in enumerate(text) for _ in range(len(ch.encode()) - 1)]
    assert sum(t[2] for t in second["tokens"]) == len(starts) == 2 + 2 + 1


def test_encode_answers_each_tokens_span(server):
    """Each token's span, as `encode_with_offsets` gives it: in code points (an emoji is one), a
    character split between tokens spanned by each of them."""
    url, ours = server
    text = "😀 Naïve 日本<|endoftext|>x 🤗"
    status, answer = post(url, json.dumps({"text": text}).encode())
    ids, spans = ours.encode_with_offsets(text)
    assert status == 200 and [t[0] for t in answer["tokenizers"][0]["tokens"]] == ids
    assert [tuple(t[3:]) for t in answer["tokenizers"][0]["tokens"]] == spans
    assert [tuple(t[3:]) for t in answer["tokenizers"][1]["tokens"]] == [
        (n, n + 1) for n, ch in enumerate(text) for _ in ch.encode()]  # bytes: each spans its character


def test_a_normalizer_that_changes_the_text_leaves_the_spans_out():
    """Under NFC, "e" and a combining accent are encoded as "é": no token spans characters of the
    text typed, so the spans are null (the page marks nothing), and the ids are still `encode`'s."""
    from cs336_basics.text import pipelines

    nfc = Tokenizer({i: bytes([i]) for i in range(256)}, [], [], pattern=pipelines.make_spec(["NFC"], [{"byte_level": True}]))
    tokens = serve.encode_for_page(nfc, "cafe\u0301")["tokens"]
    assert [t[0] for t in tokens] == nfc.encode("cafe\u0301") == list("café".encode())
    assert all(t[3] is None and t[4] is None for t in tokens)
    assert [t[3:] for t in serve.encode_for_page(nfc, "café")["tokens"]] == [[0, 1], [1, 2], [2, 3], [3, 4], [3, 4]]


def test_token_details_come_from_the_merge_log(server, folder):
    url, ours = server
    log = read_merge_log(folder / "merge_log.tsv")
    absorbed = next(i for i in range(256, 499) if log.occurrences[i] == 0)
    status, info = get(f"{url}/token?t=0&id={absorbed}")
    left, right = ours.merges[absorbed - 256]
    assert status == 200 and info["id"] == absorbed and info["token"] == readable_token(left + right)
    assert info["merge"] == {"rank": absorbed - 256, "left": readable_token(left), "right": readable_token(right)}
    assert info["count"] == log.steps[absorbed - 256][0] and info["occurrences"] == 0
    assert info["under_trained"] == ["occurs fewer times than the minimum"]
    common = max(range(256, 499), key=lambda i: log.occurrences[i])
    assert get(f"{url}/token?t=0&id={common}")[1]["under_trained"] == []
    assert get(f"{url}/token?t=1&id=65")[1] | {} == {"id": 65, "token": "A", "bytes": "41", "merge": None, "count": None,
                                                     "occurrences": None, "under_trained": [], "in_training": False}
    assert get(f"{url}/token?t=0&id=99999")[0] == 404 and get(f"{url}/token?t=7&id=1")[0] == 404


def test_limits_and_bad_requests(server):
    url, _ = server
    assert post(url, json.dumps({"text": "x" * 2000}).encode())[0] == 200
    status, answer = post(url, json.dumps({"text": "x" * 2001}).encode())
    assert status == 413 and "longer than 2,000 bytes" in answer["error"]
    assert post(url, json.dumps({"text": "é" * 1001}).encode())[0] == 413  # bytes, not characters
    assert post(url, b"not json")[0] == 400 and post(url, b'{"text": 5}')[0] == 400
    assert post(url, b"x" * 100_000)[0] == 413  # refused before the body is read


def test_refuses_other_addresses_unless_asked():
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], [])
    with pytest.raises(ValueError, match="refusing to serve on 0.0.0.0.*--allow-remote"):
        serve.make_server([serve.Served("b", tok)], host="0.0.0.0")
    for host in ("127.0.0.1", "localhost", "::1"):
        assert serve.is_loopback(host)
    assert not serve.is_loopback("192.168.1.4") and not serve.is_loopback("example.org")


def test_serve_command_stops_cleanly_on_ctrl_c(folder, tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "cs336_basics.cli", "serve", "--tokenizer", str(folder), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("serving english-500 on http://127.0.0.1:"), line + process.stderr.read()
        url = line.split(" on ")[1].split()[0].rstrip("/")
        assert post(url, b'{"text": "hi"}')[0] == 200
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=10)
    finally:
        process.kill()
    assert process.returncode == 0 and out.strip() == "bpe serve: stopped" and err == ""


def test_serve_command_refuses_a_public_address_in_one_line(folder, capsys):
    assert main(["serve", "--tokenizer", str(folder), "--host", "0.0.0.0", "--port", "0"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--allow-remote" in err[0]


# --- in a browser ----------------------------------------------------------------------------------


class DevTools:
    """Chromium's DevTools protocol over `--remote-debugging-pipe`, for one page."""

    def __init__(self, tmp_path, scrollbars: bool = False):
        profile = tmp_path / "profile"
        profile.mkdir()
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        def wire():
            # Chromium reads commands on fd 3 and writes answers on fd 4. Copy both ends above 4
            # first, so that placing one cannot overwrite the other.
            import fcntl

            read, write = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser_r, from_browser_w))
            os.dup2(read, 3)
            os.dup2(write, 4)

        self.process = subprocess.Popen(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "--window-size=1300,900",
             *([] if scrollbars else ["--hide-scrollbars"]), "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            close_fds=False, preexec_fn=wire,  # Python's own fds close on exec; dup2 makes 3 and 4 stay
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.session = None

    def call(self, method: str, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            while b"\0" not in self.buffer:
                chunk = os.read(self.from_browser, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe: {self.process.stderr.read()[-2000:]!r}")
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]
        raise TimeoutError(method)

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", url=url)["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(expression)

    def click(self, selector: str) -> None:
        box = self.js(f"(function () {{ var r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                      " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def hover(self, selector: str) -> None:
        """Move the pointer over the middle of the element's first box (a token ending in a newline has
        two: one at the end of a line, one at the start of the next), or of its first box that has a width."""
        box = self.js(f"(function () {{ var rs = Array.from(document.querySelector({json.dumps(selector)}).getClientRects());"
                      " var r = rs.find(function (r) { return r.width > 0; }) || rs[0];"
                      " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=box[0], y=box[1])

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError, TimeoutError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        os.close(self.to_browser)
        os.close(self.from_browser)


def open_live_page(browser: "DevTools", url: str) -> None:
    """Load the live page in `browser` and wait for its text box; skip the test when Chromium cannot
    be driven here (never in CI, where .ci/run installs it)."""
    try:
        browser.open(url + "/")
        browser.wait_for("document.readyState === 'complete' && !!document.getElementById('text')")
    except (RuntimeError, OSError, TimeoutError) as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"chromium could not be driven: {e}")


@pytest.mark.slow
def test_browser_types_reads_and_clicks(server, folder, tmp_path):
    url, ours = server
    browser = DevTools(tmp_path)
    try:
        open_live_page(browser, url)
        # Type as a person does: click the box, then words arrive one at a time.
        browser.click("#text")
        text = "The little cat sat on the mat, and 日本 was far away.\nNaïve owls don't sleep,\nbut one walked in."
        for word in text.split(" "):
            browser.call("Input.insertText", text=word if word == text.split(" ")[0] else " " + word)
        browser.wait_for(f"document.body.dataset.shownText === {json.dumps(text)}")

        ids = [int(i) for i in browser.js("Array.from(document.querySelectorAll('#tokens-0 .t')).map(s => s.dataset.id)")]
        assert ids == ours.encode(text)
        shown = browser.js("Array.from(document.querySelectorAll('#tokens-0 .t')).map(s => s.textContent).join('')")
        assert shown == text
        assert browser.js("document.getElementById('ids-0').textContent") == " ".join(map(str, ids))
        assert [int(i) for i in browser.js("Array.from(document.querySelectorAll('#tokens-1 .t')).map(s => s.dataset.id)")] \
            == list(text.encode())
        stats = browser.js("document.getElementById('stats-0').textContent")
        assert stats.startswith(f"{len(ids)} tokens · {len(text.encode())} bytes · {len(text)} characters")

        # A click on a token shows where it came from; one that later merges absorbed in training
        # ("ut" of "\nbut", "lked" of "walked") is under-trained.
        log = read_merge_log(folder / "merge_log.tsv")
        common = next(n for n, i in enumerate(ids) if i >= 256 and log.occurrences[i] >= 10)
        rare = next(n for n, i in enumerate(ids) if 256 <= i < len(log.occurrences) and log.occurrences[i] < 10)
        for position, under_trained in ((common, "no"), (rare, "yes: occurs fewer times than the minimum")):
            token_id = ids[position]
            browser.click(f"#tokens-0 .t:nth-child({position + 1})")
            browser.wait_for(f"document.getElementById('info-0').dataset.id === '{token_id}'")
            fields = browser.js("Object.fromEntries(Array.from(document.querySelectorAll('#info-0 dd'))"
                                ".map(d => [d.dataset.field, d.textContent]))")
            left, right = ours.merges[token_id - 256]
            assert fields["id"] == str(token_id) and fields["token"] == readable_token(left + right)
            assert fields["bytes"] == " ".join(f"{b:02x}" for b in left + right)
            assert fields["merge"] == f"#{token_id - 256}: {readable_token(left)} + {readable_token(right)}"
            assert fields["count at the merge"] == str(log.steps[token_id - 256][0])
            assert fields["in training"] == f"{log.occurrences[token_id]} occurrences"
            assert fields["under-trained"] == under_trained

        shot = browser.call("Page.captureScreenshot", format="png")["data"]
        path = tmp_path / "bpe-serve.png"
        path.write_bytes(base64.b64decode(shot))
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
        print(f"screenshot: {path}")
    finally:
        browser.close()


@pytest.mark.slow
def test_browser_highlights_the_span_of_the_token_under_the_pointer(server, tmp_path):
    """The pointer over each token in turn marks, in the text box, exactly the characters the token
    spans (after an emoji: the page counts code points as the server does, not UTF-16 units), on the
    box's own lines; leaving the tokens clears the mark, and so does typing."""
    url, ours = server
    browser = DevTools(tmp_path, scrollbars=True)  # the text box scrolls: the mirror must wrap as it does
    try:
        open_live_page(browser, url)
        browser.click("#text")
        text = "😀 The cat 🤗 sat on 日本 mats.<|endoftext|>Naïve owls\nsleep 𝔘 late.\n" + "And then?\n" * 6 + "The end 🤗."
        browser.call("Input.insertText", text=text)
        browser.wait_for(f"document.body.dataset.shownText === {json.dumps(text)}")
        ids, spans = ours.encode_with_offsets(text)
        assert browser.js("document.querySelectorAll('#tokens-0 .t').length") == len(ids)
        box = browser.js("(function () { var r = document.getElementById('text').getBoundingClientRect();"
                         " return [r.left, r.top, r.right, r.bottom]; })()")
        for n, (start, end) in enumerate(spans):
            browser.hover(f"#tokens-0 .t:nth-child({n + 1})")
            marked = browser.wait_for(f"(function () {{ var m = document.querySelector('#mirror mark'),"
                                      f" over = document.querySelector('#tokens-0 .t.over');"
                                      f" if (!m || !over || over.dataset.n !== '{n}') return null;"
                                      f" var r = m.getClientRects()[0]; return [m.textContent, r.left, r.top, r.right, r.bottom]; }})()")
            assert marked[0] == text[start:end]
            left, top, right, bottom = marked[1:5]
            assert box[0] <= left <= right <= box[2] and box[1] <= top < bottom <= box[3]
            assert left < right or text[start:end] == "\n"
        # The mirror holds the box's text, laid out as the box lays it out (the box has a scroll bar).
        assert browser.js("document.getElementById('mirror').textContent") == text
        assert browser.js("(function () { var t = document.getElementById('text');"
                          " return t.scrollHeight > t.clientHeight && t.offsetWidth - t.clientWidth > 2; })()")
        assert browser.js("document.getElementById('mirror').clientWidth === document.getElementById('text').clientWidth")
        assert browser.js("(function () { var m = getComputedStyle(document.getElementById('mirror')),"
                          " t = getComputedStyle(document.getElementById('text')); return ["
                          "'width', 'paddingLeft', 'paddingTop', 'borderLeftWidth', 'font', 'whiteSpace', 'scrollbarGutter']"
                          ".every(function (k) { return m[k] === t[k]; }); })()")
        # The bytes-only column: the second byte of 😀 spans 😀 too.
        browser.hover("#tokens-1 .t:nth-child(2)")
        assert browser.wait_for("document.querySelector('#mirror mark') && document.querySelector('#mirror mark').textContent") == "😀"
        browser.hover("#stats-0")
        browser.wait_for("document.querySelector('#mirror mark') === null")
        browser.hover("#tokens-0 .t:nth-child(3)")
        browser.wait_for("document.querySelector('#mirror mark') !== null")
        browser.click("#text")
        browser.call("Input.insertText", text="!")
        assert browser.js("document.querySelector('#mirror mark')") is None
        # While the tokens shown are of an older text (the server has not answered: here it never
        # will), their spans mark nothing.
        browser.js("window.fetch = function () { return new Promise(function () {}); }")
        browser.call("Input.insertText", text="?")
        time.sleep(0.3)
        browser.hover("#tokens-0 .t:nth-child(3)")
        browser.wait_for("document.querySelector('#tokens-0 .t.over') !== null")
        assert browser.js("document.querySelector('#mirror mark')") is None
        path = tmp_path / "bpe-serve-offsets.png"
        path.write_bytes(base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"]))
        print(f"screenshot: {path}")
    finally:
        browser.close()
