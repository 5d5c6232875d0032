"""`bpe serve`: a local web page to type text and see it cut into tokens by several tokenizers side by
side, with ids, counts, bytes and characters per token; a click on a token shows its id, bytes, the
merge that made it, its count in training and whether it is under-trained.

The server is the standard library's `http.server`, one thread per request. Every id on the page
comes from `Tokenizer.encode` in this process; the page's script only draws what the server sends:

    GET  /                      the page (styles and script inline; nothing is fetched from elsewhere)
    POST /encode  {"text": s}   {"tokenizers": [{"name", "tokens": [[id, shown, part]], "count", "bytes",
                                "chars", "bytes_per_token", "chars_per_token"}]}
    GET  /token?t=K&id=N        tokenizer K's token N: {"id", "token", "bytes", "merge", "count",
                                "occurrences", "under_trained": [why, ...]}

Safety: the server binds 127.0.0.1 unless another address is asked for explicitly (`allow_remote`),
and refuses a request body over `max_bytes` (413) before reading it.
"""

import codecs
import json
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address
from urllib.parse import parse_qs, urlsplit

from cs336_basics import report
from cs336_basics.bpe import Tokenizer
from cs336_basics.train.merge_log import MergeLog, readable_token

MAX_BYTES = 100_000  # the largest text a request may send, in bytes of UTF-8 (about 25 pages)


@dataclass
class Served:
    """A tokenizer on the page: its name, the tokenizer, its merge log if any, and the merge behind each token."""

    name: str
    tokenizer: Tokenizer
    log: MergeLog | None = None
    made_by: dict[bytes, int] = field(default_factory=dict)

    def __post_init__(self):
        for rank, (left, right) in enumerate(self.tokenizer.merges):
            self.made_by.setdefault(left + right, rank)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def make_server(served: list[Served], *, host: str = "127.0.0.1", port: int = 0, allow_remote: bool = False,
                max_bytes: int = MAX_BYTES) -> ThreadingHTTPServer:
    """A server for the page, bound but not yet serving (call `serve_forever`). Port 0 takes a free one.
    Raises ValueError for an address other than loopback without `allow_remote`."""
    if not served:
        raise ValueError("bpe serve needs at least one tokenizer")
    if not allow_remote and not is_loopback(host):
        raise ValueError(f"refusing to serve on {host}, which other machines may reach: "
                         "pass --allow-remote to mean it (the page has no login)")
    page = _page([s.name for s in served], max_bytes).encode("utf-8")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):  # quiet: the terminal shows only the address and errors
            pass

        def do_GET(self):
            url = urlsplit(self.path)
            if url.path == "/":
                self._send(HTTPStatus.OK, page, "text/html; charset=utf-8")
            elif url.path == "/token":
                query = parse_qs(url.query)
                try:
                    k, token_id = int(query["t"][0]), int(query["id"][0])
                    one = served[k]
                    if k < 0 or token_id not in one.tokenizer.vocab:
                        raise KeyError
                except (KeyError, ValueError, IndexError):
                    return self._json(HTTPStatus.NOT_FOUND, {"error": "no such tokenizer or token id"})
                self._json(HTTPStatus.OK, token_info(one, token_id))
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {url.path}"})

        def do_POST(self):
            if urlsplit(self.path).path != "/encode":
                return self._json(HTTPStatus.NOT_FOUND, {"error": "POST /encode only"})
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                return self._json(HTTPStatus.LENGTH_REQUIRED, {"error": "a Content-Length is required"})
            if length > max_bytes + 64:  # the JSON around the text takes a few bytes
                self.close_connection = True
                return self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                                  {"error": f"the text is longer than {max_bytes:,} bytes"})
            try:
                text = json.loads(self.rfile.read(length).decode("utf-8"))["text"]
                if not isinstance(text, str):
                    raise TypeError
            except (ValueError, KeyError, TypeError):
                return self._json(HTTPStatus.BAD_REQUEST, {"error": 'expected JSON {"text": "..."}'})
            if len(text.encode("utf-8", errors="surrogatepass")) > max_bytes:
                return self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                                  {"error": f"the text is longer than {max_bytes:,} bytes"})
            self._json(HTTPStatus.OK, {"tokenizers": [encode_for_page(s.tokenizer, text) | {"name": s.name}
                                                      for s in served]})

        def _json(self, status: HTTPStatus, body: dict) -> None:
            self._send(status, json.dumps(body).encode("utf-8"), "application/json")

        def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def encode_for_page(tokenizer: Tokenizer, text: str) -> dict:
    """The text's tokens as the page shows them: `[id, shown, part]` each, where `shown` is the text
    the token completes (a character split between tokens shows in its last one; `part` marks the
    tokens before it), and the counts."""
    ids = tokenizer.encode(text)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    tokens = []
    for token_id in ids:
        shown = decoder.decode(tokenizer.vocab[token_id])
        tokens.append([token_id, shown, not shown])
    size, chars = len(text.encode("utf-8", errors="surrogatepass")), len(text)
    return {
        "tokens": tokens, "count": len(ids), "bytes": size, "chars": chars,
        "bytes_per_token": round(size / len(ids), 2) if ids else 0,
        "chars_per_token": round(chars / len(ids), 2) if ids else 0,
    }


def token_info(served: Served, token_id: int) -> dict:
    """What a click on a token shows (see `report.token_entry`)."""
    e = report.token_entry(served.tokenizer, token_id, served.log, made_by=served.made_by)
    return {
        "id": e.id,
        "token": e.token.decode("utf-8") + " (special)" if e.special else readable_token(e.token),
        "bytes": " ".join(f"{b:02x}" for b in e.token),
        "merge": None if e.pair is None else {"rank": e.rank, "left": readable_token(e.pair[0]),
                                              "right": readable_token(e.pair[1])},
        "count": e.count,
        "occurrences": e.occurrences,
        "under_trained": [report.FLAGS[f] for f in e.flags],
        "in_training": served.log is not None and served.log.occurrences is not None,
    }


def _page(names: list[str], max_bytes: int) -> str:
    columns = "".join(
        f'<section class="col" id="col-{k}" data-name="{_escape(name)}"><h2>{_escape(name)}</h2>'
        f'<p class="stats" id="stats-{k}">&nbsp;</p><div class="tokens" id="tokens-{k}"></div>'
        f'<p class="ids" id="ids-{k}"></p><div class="info" id="info-{k}"></div></section>'
        for k, name in enumerate(names)
    )
    return _TEMPLATE.replace("{columns}", columns).replace("{count}", str(len(names))).replace(
        "{max_bytes}", str(max_bytes)).replace("{style}", _STYLE).replace("{script}", _SCRIPT)


def _escape(text: str) -> str:
    import html

    return html.escape(text)


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>BPE tokenizers, live</title>
<style>{style}</style>
</head>
<body data-max-bytes="{max_bytes}">
<main>
<header><p class="kicker">byte-level BPE, live</p><h1>Type, and see the text cut into tokens</h1></header>
<textarea id="text" rows="5" placeholder="Type or paste text here" autofocus spellcheck="false"></textarea>
<p class="note" id="status">Each colour is one token. Click a token to see its id, bytes, the merge that made it
and how often it occurred in training.</p>
<div class="cols" style="grid-template-columns: repeat({count}, minmax(0, 1fr))">{columns}</div>
</main>
<script>{script}</script>
</body>
</html>
"""

_STYLE = report.BASE_STYLE + """main { max-width: 1400px; margin: 0 auto; padding: 20px 24px 40px; }
h1 { margin: 0 0 12px; font-size: 24px; }
h2 { margin: 0 0 4px; font-size: 17px; overflow-wrap: anywhere; }
.kicker { margin: 0; color: var(--muted); text-transform: uppercase; letter-spacing: .08em; font-size: 12px; }
textarea { width: 100%; font: 15px/1.5 ui-monospace, "DejaVu Sans Mono", monospace; padding: 10px 12px;
  border: 1px solid #cbd5e1; border-radius: 8px; resize: vertical; }
.note { color: var(--muted); font-size: 14px; margin: 6px 0 14px; }
.note.error { color: #b91c1c; }
.cols { display: grid; gap: 14px; }
.col { background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; min-width: 0; }
.stats { color: var(--muted); font-size: 13px; margin: 0 0 8px; font-variant-numeric: tabular-nums; }
.tokens { font: 15px/1.9 ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap; word-break: break-word;
  min-height: 3em; }
.t { border-radius: 3px; padding: 1px 0; cursor: pointer; }
.c0 { background: #dbeafe; } .c1 { background: #fde68a; } .c2 { background: #bbf7d0; }
.c3 { background: #fbcfe8; } .c4 { background: #ddd6fe; }
.t.part { display: inline-block; width: 4px; height: 1.1em; vertical-align: -2px; margin: 0 1px; background: #9ca3af; }
.t.sel { outline: 2px solid #dc2626; }
.ids { margin: 8px 0 0; color: var(--muted); font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace;
  max-height: 5.6em; overflow: auto; overflow-wrap: anywhere; }
.info { margin-top: 10px; font-size: 13px; }
.info dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 0; }
.info dt { color: var(--muted); }
.info dd { margin: 0; font-family: ui-monospace, "DejaVu Sans Mono", monospace; overflow-wrap: anywhere; }
.info .warn { color: #b45309; font-weight: 600; }
"""

# Sends the text a moment after typing stops, draws the answer, and asks for a token's details on a click.
# Answers to older requests are dropped, so the page always shows the latest text.
_SCRIPT = """
(function () {
  var box = document.getElementById("text");
  var status = document.getElementById("status");
  var maxBytes = Number(document.body.dataset.maxBytes);
  var sent = 0, timer = null;
  function el(tag, cls, text) {
    var x = document.createElement(tag);
    if (cls) x.className = cls;
    if (text !== undefined) x.textContent = text;
    return x;
  }
  function draw(k, r) {
    document.getElementById("stats-" + k).textContent = r.count + " tokens \\u00b7 " + r.bytes + " bytes \\u00b7 " +
      r.chars + " characters \\u00b7 " + r.bytes_per_token + " bytes/token \\u00b7 " + r.chars_per_token + " characters/token";
    var out = document.getElementById("tokens-" + k);
    out.textContent = "";
    r.tokens.forEach(function (t, n) {
      var s = el("span", "t c" + (n % 5) + (t[2] ? " part" : ""), t[2] ? "" : t[1]);
      s.dataset.id = t[0];
      s.title = "id " + t[0];
      out.appendChild(s);
    });
    out.dataset.count = r.count;
    document.getElementById("ids-" + k).textContent = r.tokens.map(function (t) { return t[0]; }).join(" ");
  }
  function send() {
    var text = box.value, mine = ++sent;
    if (new TextEncoder().encode(text).length > maxBytes) {
      status.textContent = "The text is longer than " + maxBytes + " bytes; only shorter texts are cut.";
      status.className = "note error";
      return;
    }
    fetch("/encode", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({text: text})})
      .then(function (r) { return r.json(); })
      .then(function (r) {
        if (mine !== sent) return;
        if (r.error) { status.textContent = r.error; status.className = "note error"; return; }
        status.className = "note";
        r.tokenizers.forEach(function (one, k) { draw(k, one); });
        document.body.dataset.shown = mine;
        document.body.dataset.shownText = text;
      });
  }
  box.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(send, 120); });
  document.querySelectorAll(".tokens").forEach(function (out, k) {
    out.addEventListener("click", function (event) {
      var t = event.target.closest(".t");
      if (!t) return;
      out.querySelectorAll(".sel").forEach(function (x) { x.classList.remove("sel"); });
      t.classList.add("sel");
      fetch("/token?t=" + k + "&id=" + t.dataset.id).then(function (r) { return r.json(); }).then(function (r) {
        var info = document.getElementById("info-" + k), dl = el("dl");
        function row(name, value, cls) { dl.appendChild(el("dt", "", name)); var d = el("dd", cls || "", value); d.dataset.field = name; dl.appendChild(d); }
        row("id", String(r.id));
        row("token", r.token);
        row("bytes", r.bytes);
        row("merge", r.merge ? "#" + r.merge.rank + ": " + r.merge.left + " + " + r.merge.right : "none (a byte or special token)");
        row("count at the merge", r.count === null ? "unknown (no merge log)" : String(r.count));
        row("in training", r.occurrences === null ? "unknown" : r.occurrences + " occurrences");
        row("under-trained", r.under_trained.length ? "yes: " + r.under_trained.join("; ") : (r.in_training ? "no" : "no (only unreachability checked)"),
            r.under_trained.length ? "warn" : "");
        info.textContent = "";
        info.appendChild(dl);
        info.dataset.id = r.id;
      });
    });
  });
  if (box.value) send();
})();
"""
