"""Static hosts for the tests, on 127.0.0.1: a plain one like GitHub Pages (no special headers),
a CDN-like one that serves the precompressed siblings, and ones misconfigured on purpose.

Every knob is one field of `Host`; the server counts the body bytes it sends per path, so tests
can tell what a page really downloaded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import http.server
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bundler.hosting.headers import REVALIDATE, served
from bundler.server.bundle_server import content_type

ISOLATION = {"Cross-Origin-Opener-Policy": "same-origin",
             "Cross-Origin-Embedder-Policy": "require-corp"}
TEST_PAGE = "__test__.html"
_TEST_PAGE_HTML = (b"<!doctype html><meta charset=utf-8><title>test</title>"
                   b'<script src="coi-serviceworker.js"></script>')


@dataclasses.dataclass
class Host:
    root: Path
    prefix: str = "/"  # the sub-path the folder is served under
    isolation: bool = True  # COOP/COEP on every response
    cache: Callable[[str], str] | None = None  # path -> Cache-Control; None: what the build says
    types: dict[str, str] = dataclasses.field(default_factory=dict)  # suffix -> Content-Type
    spa_fallback: bool = False  # a missing file gets index.html with 200
    negotiate: bool = False  # serve NAME.br / NAME.gz with Content-Encoding, as a CDN does
    replace: dict[str, bytes] = dataclasses.field(default_factory=dict)  # path -> body sent
    encoding: dict[str, str] = dataclasses.field(default_factory=dict)  # path -> the header sent
    hidden: set[str] = dataclasses.field(default_factory=set)  # paths answered as missing
    sent: Counter[str] = dataclasses.field(default_factory=Counter)  # path -> body bytes sent
    requested: Counter[str] = dataclasses.field(default_factory=Counter)  # path -> requests

    def body(self, path: str, accepts: str) -> tuple[bytes, str | None] | None:
        """(body, Content-Encoding) for the folder-relative `path`, or None when missing."""
        if path in self.replace:
            return self.replace[path], self.encoding.get(path)
        file = self.root / path
        if path in self.hidden or not file.is_file() or not file.resolve().is_relative_to(
                self.root.resolve()):
            return None
        if self.negotiate:
            for name, suffix in (("br", ".br"), ("gzip", ".gz")):
                sibling = file.with_name(file.name + suffix)
                if name in accepts and sibling.is_file():
                    return sibling.read_bytes(), name
        return file.read_bytes(), self.encoding.get(path)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        host = self.server.host
        path = self.path.split("?")[0]
        if not path.startswith(host.prefix):
            self._send(404, b"not found", "text/plain")
            return
        relative = path[len(host.prefix):] or "index.html"
        relative = relative + "index.html" if relative.endswith("/") else relative
        host.requested[relative] += 1
        if relative == TEST_PAGE:
            self._send(200, _TEST_PAGE_HTML, "text/html; charset=utf-8")
            return
        found = host.body(relative, self.headers.get("Accept-Encoding", ""))
        if found is None and host.spa_fallback:
            relative, found = "index.html", ((host.root / "index.html").read_bytes(), None)
        if found is None:
            self._send(404, b"404 not found\n", "text/plain")
            return
        body, encoding = found
        kind = host.types.get(Path(relative).suffix) or content_type(Path(relative))
        control = (host.cache(relative) if host.cache
                   else _controls(host.root).get(relative, REVALIDATE))
        tag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        if tag == self.headers.get("If-None-Match"):
            self._send(304, b"", None, {"ETag": tag, "Cache-Control": control})
            return
        headers = {"ETag": tag, "Cache-Control": control}
        if encoding:
            headers["Content-Encoding"] = encoding
        host.sent[relative] += len(body)
        self._send(200, body, kind, headers)

    def _send(self, status: int, body: bytes, kind: str | None,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        if kind:
            self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**(ISOLATION if self.server.host.isolation else {}),
                            **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if status != 304:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _controls(root: Path) -> dict[str, str]:
    """Cache-Control per served path, as the build's host configs set it."""
    if not (root / "bundle.json").is_file():
        return {}
    manifest = json.loads((root / "bundle.json").read_text(encoding="utf-8"))
    return {path: control for path, control, _ in served(manifest["files"])}


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: Host) -> None:
        self.host = host
        super().__init__(("127.0.0.1", 0), _Handler)


@contextlib.contextmanager
def hosting(host: Host) -> Iterator[str]:
    """Serve `host` on a free port; yields the bundle's URL (ending in the prefix)."""
    server = _Server(host)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{host.prefix}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def open_test_page(browser: Any, url: str, timeout_ms: int,
              before: Callable[[Any], None] | None = None) -> Iterator[Any]:
    """A fresh browser context (nothing cached) with the blank test page of the bundle at `url`
    open; `before(page)` runs before the page is opened (listeners). Closed on exit."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(timeout_ms)
        if before is not None:
            before(page)
        page.goto(url + TEST_PAGE)
        yield page
    finally:
        context.close()
