"""`bpe serve`: a local web page to type text and see it cut into tokens by several tokenizers side by
side, with ids, counts, bytes and characters per token; a click on a token shows its id, bytes, the
merge that made it, its count in training and whether it is under-trained.

The server is the standard library's `http.server`, one thread per request. Every id on the page
comes from `Tokenizer.encode` in this process; the page's script only draws what the server sends:

    GET  /                      the page (styles and script inline; nothing is fetched from elsewhere;
                                its files are package data of `report`, see `report.files`)
    POST /encode  {"text": s}   {"tokenizers": [{"name", "tokens": [[id, shown, part, start, end]], "count",
                                "bytes", "chars", "bytes_per_token", "chars_per_token"}]}
    GET  /token?t=K&id=N        tokenizer K's token N: {"id", "token", "bytes", "merge", "count",
                                "occurrences", "under_trained": [why, ...], "in_training"}

Safety: the server binds 127.0.0.1 unless another address is asked for explicitly (`allow_remote`),
and refuses a request body over `max_bytes` (413) before reading it.
"""

import codecs
import html
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
        for token, rank in report.merge_ranks(self.tokenizer).items():
            self.made_by.setdefault(token, rank)


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
    """The text's tokens as the page shows them: `[id, shown, part, start, end]` each, where `shown` is
    the text the token completes (a character split between tokens shows in its last one; `part` marks
    the tokens before it), `start, end` its span in `text` in characters (code points, as
    `encode_with_offsets` gives it; null under a normalizer that changes the text), and the counts."""
    try:
        ids, spans = tokenizer.encode_with_offsets(text)
    except ValueError:  # a normalizer changed the text (or encode refuses it: then it raises again here)
        ids = tokenizer.encode(text)
        spans = [(None, None)] * len(ids)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    tokens = []
    for token_id, (start, end) in zip(ids, spans):
        shown = decoder.decode(tokenizer.vocab[token_id])
        tokens.append([token_id, shown, not shown, start, end])
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
    """The page with a column for each of `names`, which refuses texts over `max_bytes`."""
    columns = "".join(
        f'<section class="col" id="col-{k}" data-name="{html.escape(name)}"><h2>{html.escape(name)}</h2>'
        f'<p class="stats" id="stats-{k}">&nbsp;</p><div class="tokens" id="tokens-{k}"></div>'
        f'<p class="ids" id="ids-{k}"></p><div class="info" id="info-{k}"></div></section>'
        for k, name in enumerate(names)
    )
    style = report.page_file("base.css") + report.page_file("serve.css")
    return report.page_file("serve.html").replace("{columns}", columns).replace("{count}", str(len(names))).replace(
        "{max_bytes}", str(max_bytes)).replace("{style}", style).replace("{script}", report.page_file("serve.js"))
