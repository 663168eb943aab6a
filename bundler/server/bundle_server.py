"""HTTP serving of a bundle folder: what `bundle test`, the build-time check and `bundle serve`
put in front of the browser.

One handler for all of them. Every response carries the cross-origin isolation headers (so
onnxruntime-web gets wasm threads) and `Cache-Control: no-cache` with an ETag, so a browser always
revalidates and never runs a stale file. Types are explicit (`.wasm` is application/wasm, never
guessed); a missing file is a plain-text 404, never an HTML page in place of a `.wasm`; there are no
directory listings; and no file outside the folder is served: `..` (plain or percent-encoded),
absolute paths and symlinks that lead out are refused with 403.

With a LiveReload attached (`bundle serve`), HTML pages get a small client injected that follows
`/__bundler__/events` (server-sent events): it reloads the page when a new build is served and shows
the error of a failed rebuild over the page.
"""

from __future__ import annotations

import contextlib
import errno
import http.server
import json
import mimetypes
import os
import re
import secrets
import select
import shutil
import socket
import socketserver
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path, PurePath
from typing import Any

from bundler.errors import BundlerError
from bundler.resources import resource

ISOLATION_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
}
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".css": "text/css",
    ".json": "application/json",
    ".wasm": "application/wasm",
    ".onnx": "application/octet-stream",
    ".ort": "application/octet-stream",
    ".data": "application/octet-stream",
    ".ts": "text/plain; charset=utf-8",  # .d.ts; the system table says video/mp2t
    ".map": "application/json",
    ".txt": "text/plain; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".ico": "image/x-icon",
}
INTERNAL_PREFIX = "/__bundler__/"
HARNESS_PATH = INTERNAL_PREFIX + "harness.html"
EVENTS_PATH = INTERNAL_PREFIX + "events"
CLIENT_PATH = INTERNAL_PREFIX + "livereload.mjs"
HARNESS_MODULES = INTERNAL_PREFIX + "dev/"  # web/dev/*.mjs: the harness pages' code
_HARNESS_MODULE = re.compile(r"[a-z]+\.mjs")
_HARNESS = b"<!doctype html><meta charset=utf-8><title>onnx-bundler harness</title>"
_KEEPALIVE_SECONDS = 15.0
_CLOSE_CHECK_SECONDS = 1.0


def content_type(path: Path) -> str:
    return (CONTENT_TYPES.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0]
            or "application/octet-stream")


class LiveReload:
    """What open pages follow: the build being served and the error of the last rebuild, if it
    failed. Each served build gets a new id; a page whose id differs from the current one
    reloads."""

    def __init__(self) -> None:
        self._session = secrets.token_hex(4)  # a restarted server never reuses an old id
        self._generation = 0
        self._error: str | None = None
        self._closed = False
        self._changed = threading.Condition()
        self.listeners = 0

    @property
    def build_id(self) -> str:
        return f"{self._session}-{self._generation}"

    def state(self) -> dict[str, Any]:
        return {"build": self.build_id, "error": self._error}

    def new_build(self) -> None:
        with self._changed:
            self._generation += 1
            self._error = None
            self._changed.notify_all()

    def failed(self, error: str) -> None:
        with self._changed:
            self._error = error
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def wait(self, seen: dict[str, Any] | None, timeout: float) -> dict[str, Any] | None:
        """The state once it differs from `seen` (or after `timeout`); None once closed."""
        with self._changed:
            self._changed.wait_for(lambda: self._closed or self.state() != seen, timeout)
            return None if self._closed else self.state()


class _Refused(Exception):
    def __init__(self, status: int, explain: str) -> None:
        super().__init__(explain)
        self.status = status
        self.explain = explain


def locate(root: Path, url_path: str) -> Path:
    """The file or folder `url_path` (percent-encoded, from the request line) names in `root`.

    Raises _Refused(403) for anything that would lead outside `root`, _Refused(404) when missing.
    """
    decoded = urllib.parse.unquote(url_path, errors="strict")
    if not decoded.startswith("/") or decoded.startswith("//") or "\\" in decoded \
            or "\0" in decoded:
        raise _Refused(403, "not a path inside the served folder")
    parts = [part for part in decoded.split("/") if part not in ("", ".")]
    if any(part == ".." or PurePath(part).anchor for part in parts):
        raise _Refused(403, "not a path inside the served folder")
    base = root.resolve()
    candidate = base.joinpath(*parts)
    try:
        resolved = candidate.resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError):
        raise _Refused(404, "no such file in the served folder") from None
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        raise _Refused(403, "not a path inside the served folder") from None
    if not resolved.is_relative_to(base):
        raise _Refused(403, "a link that leads outside the served folder")
    return resolved


def _inject(html: bytes, snippet: bytes) -> bytes:
    closing = [match.start() for match in re.finditer(rb"</body\s*>", html, re.IGNORECASE)]
    at = closing[-1] if closing else len(html)
    return html[:at] + snippet + html[at:]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: BundleServer
    server_version = "onnx-bundler"
    protocol_version = "HTTP/1.1"  # keep-alive: a page loads its modules over few connections
    timeout = 120  # seconds an idle keep-alive connection holds its thread
    error_content_type = "text/plain; charset=utf-8"
    error_message_format = "%(code)d %(message)s: %(explain)s\n"

    def end_headers(self) -> None:
        for name, value in ISOLATION_HEADERS.items():
            self.send_header(name, value)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def _respond(self, send_body: bool) -> None:
        # urlsplit would read the host out of "//etc/passwd"; only absolute-form targets
        # ("GET http://host/path") need it.
        target = self.path if self.path.startswith("/") else \
            urllib.parse.urlsplit(self.path)._replace(scheme="", netloc="").geturl()
        path, _, query = target.partition("#")[0].partition("?")
        url = urllib.parse.SplitResult("", "", path or "/", query, "")
        live = self.server.live_reload
        if url.path == HARNESS_PATH:
            self._send_bytes(_HARNESS, "text/html; charset=utf-8", send_body)
        elif live is not None and url.path == EVENTS_PATH:
            self._stream_events(live, send_body)
        elif live is not None and url.path == CLIENT_PATH:
            self._send_file(resource("web") / "livereload.mjs", send_body)
        elif url.path.startswith(HARNESS_MODULES):
            self._send_harness_module(url.path.removeprefix(HARNESS_MODULES), send_body)
        else:
            self._send_from_root(url, send_body)

    def _send_harness_module(self, name: str, send_body: bool) -> None:
        path = resource("web") / "dev" / name
        if not _HARNESS_MODULE.fullmatch(name) or not path.is_file():
            self.send_error(404, explain="no such harness module")
            return
        self._send_file(path, send_body)

    def _send_from_root(self, url: urllib.parse.SplitResult, send_body: bool) -> None:
        try:
            target = locate(self.server.root, url.path)
            if target.is_dir():
                if not url.path.endswith("/"):
                    self.send_response(301)
                    query = f"?{url.query}" if url.query else ""
                    self.send_header("Location", url.path + "/" + query)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                target = locate(self.server.root, url.path + "index.html")
            elif url.path.endswith("/"):
                raise _Refused(404, "not a folder")
            if not target.is_file():
                raise _Refused(404, "not a file")
        except _Refused as refused:
            self.send_error(refused.status, explain=refused.explain)
            return
        except UnicodeDecodeError:
            self.send_error(400, explain="the path is not valid percent-encoded UTF-8")
            return
        self._send_file(target, send_body)

    def _send_file(self, path: Path, send_body: bool) -> None:
        kind = content_type(path)
        live = self.server.live_reload
        if live is not None and kind.startswith("text/html"):
            snippet = (f'<script type="module" src="{CLIENT_PATH}?build={live.build_id}">'
                       "</script>\n").encode()
            self._send_bytes(_inject(path.read_bytes(), snippet), kind, send_body)
            return
        with path.open("rb") as stream:
            status = os.fstat(stream.fileno())
            tag = f'"{status.st_ino:x}-{status.st_mtime_ns:x}-{status.st_size:x}"'
            if tag in self.headers.get("If-None-Match", ""):
                self.send_response(304)
                self.send_header("ETag", tag)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(status.st_size))
            self.send_header("ETag", tag)
            self.end_headers()
            if send_body:
                shutil.copyfileobj(stream, self.wfile)

    def _send_bytes(self, body: bytes, kind: str, send_body: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def _stream_events(self, live: LiveReload, send_body: bool) -> None:
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if not send_body:
            return
        live.listeners += 1
        try:
            self.wfile.write(b"retry: 1000\n\n")
            seen = None
            idle = 0.0
            while not self._peer_closed():
                state = live.wait(seen, _CLOSE_CHECK_SECONDS)
                if state is None:
                    return
                idle += _CLOSE_CHECK_SECONDS
                if state != seen:
                    self.wfile.write(f"data: {json.dumps(state)}\n\n".encode())
                    seen, idle = state, 0.0
                elif idle >= _KEEPALIVE_SECONDS:
                    self.wfile.write(b": keep-alive\n\n")
                    idle = 0.0
        except OSError:  # the page went away mid-write
            pass
        finally:
            live.listeners -= 1

    def _peer_closed(self) -> bool:
        """Has the page closed its end (a reload or a closed tab)? Noticed without writing, so
        the count of listening pages stays right."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if self.server.log_refusal is not None and isinstance(code, int) and code >= 400:
            self.server.log_refusal(f"{code} {self.command} {self.path}")

    def log_message(self, format: str, *args: object) -> None:
        pass


class BundleServer(http.server.ThreadingHTTPServer):
    """Serves `root`, which may be swapped while serving (bundle serve points it at each new
    build, so a page never sees a half-written folder)."""

    daemon_threads = True
    request_queue_size = 128  # a page opens several connections at once; the default is 5

    def __init__(self, address: tuple[str, int], family: int, root: Path,
                 live_reload: LiveReload | None = None,
                 log_refusal: Callable[[str], None] | None = None) -> None:
        self.address_family = family
        self.root = root
        self.live_reload = live_reload
        self.log_refusal = log_refusal
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # http.server looks up the host's FQDN here, which can hang on a machine without DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1" if host == "0.0.0.0" else "::1"
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/"

    def handle_error(self, request: object, client_address: tuple) -> None:
        # A browser that goes away mid-request (closed, or stopped by the Ctrl-C that stops us) is
        # no error of ours; socketserver would print its traceback.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def shutdown(self) -> None:
        if self.live_reload is not None:
            self.live_reload.close()
        super().shutdown()


def bind(host: str, port: int, root: Path, live_reload: LiveReload | None = None,
         log_refusal: Callable[[str], None] | None = None) -> BundleServer:
    """A server listening on host:port (port 0: a free one); one clear error when it cannot."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except (socket.gaierror, UnicodeError, OverflowError):
        raise BundlerError(f"cannot serve on --host {host!r} --port {port}: not an address or host"
                           " name of this machine; pass --host 127.0.0.1") from None
    try:
        return BundleServer((host, port), family, root, live_reload, log_refusal)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise BundlerError(f"port {port} on {host} is already in use; pass --port with another"
                               " number, or --port 0 to pick a free one") from None
        if error.errno == errno.EACCES:
            raise BundlerError(f"not allowed to listen on port {port} (ports below 1024 need"
                               " privileges); pass --port 8000, or --port 0") from None
        if error.errno == errno.EADDRNOTAVAIL:
            raise BundlerError(f"{host} is not an address of this machine; pass --host"
                               " 127.0.0.1") from None
        raise BundlerError(f"cannot listen on {host}:{port}: {error.strerror}") from None


@contextlib.contextmanager
def running(server: BundleServer) -> Iterator[BundleServer]:
    """Serve in a background thread until the block ends."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def serve_directory(directory: Path) -> Iterator[str]:
    """Serve `directory` on a free port of 127.0.0.1; yields the base URL (ending in /)."""
    with running(bind("127.0.0.1", 0, directory)) as server:
        yield server.url
