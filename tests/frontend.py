"""Helpers of the front-end tests: the example apps of examples/, built for production with their
bundler (installed once into the cache by bundler.site.npmtools), and what a built app must hold."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import http.server
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bundler.bundle.files import asset_paths
from bundler.site.npmtools import node_executable, npm_tool
from bundler.site.runtime import node_and_npm
from bundler.verify.reference import run_native
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples"
# The input every example app runs (src/main.js): an 8x8 image of (i % 9) / 8.
EXAMPLE_INPUT = (np.arange(64) % 9 / 8).astype(np.float32).reshape(1, 1, 8, 8)


@dataclasses.dataclass(frozen=True)
class ExampleApp:
    tools: dict[str, str]  # npm packages at exact versions, as the example's package.json has them
    command: tuple[str, ...]  # the build command: a script under node_modules, its arguments
    served: str  # the folder to serve after the build, relative to the app
    output: str  # the folder the build writes, relative to the app
    entry: str  # the app's own script, relative to the app
    linked: tuple[str, ...] = ()  # packages the app's own code imports (so they must resolve)


APPS = {
    "vite": ExampleApp({"vite": "8.4.0"}, ("vite/bin/vite.js", "build"), "dist", "dist",
                       "src/main.js"),
    "webpack": ExampleApp({"webpack": "5.113.0", "webpack-cli": "7.3.1"},
                          ("webpack-cli/bin/cli.js", "--mode", "production"), ".", "dist",
                          "src/index.js"),
    "nextjs": ExampleApp({"next": "16.5.0", "react": "19.3.1", "react-dom": "19.3.1"},
                         ("next/dist/bin/next", "build"), "out", "out", "app/digits.js",
                         ("next", "react", "react-dom")),
}
# The test's apps resolve next and react through links into the cache, outside the app folder,
# and Turbopack compiles nothing outside its root unless told.
_NEXT_TEST_CONFIG = ("import config from './next.config.example.mjs';\n"
                     "export default { ...config, turbopack: { root: '/' } };\n")


def install_bundle(folder: Path, bundle: Path) -> None:
    """`npm install BUNDLE` into `folder`, offline, as a copy (what installing the published
    package gives, its `files` list honoured)."""
    (folder / "package.json").write_text('{"name": "apps", "private": true}\n')
    _, npm = node_and_npm()
    result = subprocess.run([*npm, "install", "--offline", "--no-audit", "--no-fund",
                             "--install-links", str(bundle)],
                            cwd=folder, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def build_example(name: str, apps: Path, script: str | None = None) -> Path:
    """Copy examples/NAME into `apps` (whose node_modules holds the bundle), with `script` in
    place of its own when given, and build it for production; returns the app's folder."""
    app = APPS[name]
    tools = npm_tool(app.tools) / "node_modules"
    folder = apps / name
    shutil.copytree(EXAMPLES / name, folder, ignore=shutil.ignore_patterns(
        "package.json", "node_modules", "dist", "out", ".next"))
    if script is not None:
        (folder / app.entry).write_text(script)
    for package in app.linked:
        link = apps / "node_modules" / package
        if not link.exists():
            link.symlink_to(tools / package)
    if name == "nextjs":
        (folder / "next.config.mjs").rename(folder / "next.config.example.mjs")
        (folder / "next.config.mjs").write_text(_NEXT_TEST_CONFIG)
    script, *arguments = app.command
    result = subprocess.run([str(node_executable()), str(tools / script), *arguments], cwd=folder,
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "NEXT_TELEMETRY_DISABLED": "1"})
    assert result.returncode == 0, f"{name} build failed:\n{result.stdout}\n{result.stderr}"
    return folder


def _identity(path: Path) -> str | frozenset[str]:
    """What a runtime file is recognised by in a bundler's output: its bytes, or for a JS module
    (which webpack's production minimizer rewrites) the onnxruntime file names it mentions."""
    data = path.read_bytes()
    if path.suffix in (".mjs", ".js"):
        return frozenset(re.findall(r"ort[-.a-z]*\.(?:mjs|wasm)", data.decode("utf-8", "replace")))
    return hashlib.sha256(data).hexdigest()


def copies_in_output(bundle: Path, manifest: dict, output: Path) -> dict[str, int]:
    """For each runtime and model file the page loads (each part of a split file, the gzip
    sibling of one fetched as bytes): how many files of `output` are it."""
    built = [path for path in output.rglob("*") if path.is_file()]
    found = [_identity(path) for path in built]
    return {path: found.count(_identity(bundle / path)) for path in asset_paths(manifest)}


def native_probabilities(bundle: Path, manifest: dict) -> np.ndarray:
    model = bundle / manifest["sessions"][0]["variants"][0]["file"]
    return run_native(model, {"image": EXAMPLE_INPUT})["probabilities"].reshape(-1)


class _StaticHandler(http.server.SimpleHTTPRequestHandler):
    """A plain static server, as a generic host is: exact types, the headers it is given."""

    extensions_map = {".mjs": "text/javascript", ".js": "text/javascript",
                      ".wasm": "application/wasm", ".json": "application/json",
                      ".html": "text/html", ".onnx": "application/octet-stream"}
    headers_to_send: dict[str, str] = {}

    def end_headers(self) -> None:
        for name, value in self.headers_to_send.items():
            self.send_header(name, value)
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def static_server(root: Path, headers: dict[str, str]) -> Iterator[str]:
    """Serve `root` on a free port of 127.0.0.1 with `headers` on every response; yields the
    base URL. Another port is another origin."""
    handler = type("Handler", (_StaticHandler,), {"headers_to_send": headers})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
