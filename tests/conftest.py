"""Shared fixtures. Browser settings come from playwright.config.py, as `bundle test` reads them;
a missing Chromium or runtime fails the tests that need them (it never skips them)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bundler.bundle.options import DEFAULT_RUNTIME_VERSION, BuildOptions
from bundler.commands.build import build
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.site.runtime import fetch_runtime
from bundler.verify.browser import (
    BrowserSettings,
    chromium_executable,
    launch,
    load_settings,
    playwright_session,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def browser_settings() -> BrowserSettings:
    settings = load_settings(ROOT / "playwright.config.py")
    if chromium_executable(settings) is None:
        pytest.fail("no Chromium found: apt-get install -y chromium, or set $BUNDLER_CHROMIUM")
    return settings


@pytest.fixture(scope="session")
def runtime_dist() -> Path:
    """onnxruntime-web, fetched once into the user cache and reused by every test."""
    return fetch_runtime(DEFAULT_RUNTIME_VERSION)


@pytest.fixture(scope="session")
def whisper_export(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The suite's tiny random Whisper, exported by optimum once (tests/speech_models.py)."""
    from tests import speech_models

    return speech_models.whisper(tmp_path_factory.mktemp("whisper"))


BuildBundle = Callable[..., tuple[Path, dict[str, Any]]]


@pytest.fixture
def build_bundle(tmp_path: Path, runtime_dist: Path) -> BuildBundle:
    """Build a model into tmp_path/<name> with the cached runtime; verification off by default."""

    def _build(model: Path | None, name: str = "dist", **options: Any) -> tuple[Path, dict]:
        """The folder and its bundle.json, as written."""
        output = tmp_path / name
        options.setdefault("verify", False)
        build(model, BuildOptions(output=output, runtime_dir=runtime_dist, **options))
        return output, json.loads((output / "bundle.json").read_text(encoding="utf-8"))

    return _build


def default_sigint() -> None:
    """A child's preexec_fn: SIGINT at its default. A process started in the background of a
    non-interactive shell (`nohup bash -c '...' &`) inherits SIGINT ignored, and Python then
    installs no KeyboardInterrupt handler: a test of Ctrl-C would not stop the command."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real `bundle` command in a subprocess (what users run)."""
    return subprocess.run(
        [sys.executable, "-m", "bundler", *map(str, args)],
        capture_output=True, text=True, cwd=cwd, timeout=900,
    )


class Page:
    """A page of a served bundle in a browser, for driving bundle.mjs from tests."""

    def __init__(self, page: Any, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.requests: list[str] = []
        page.on("request", lambda request: self.requests.append(request.url))

    def evaluate(self, script: str, arg: Any = None) -> Any:
        return self.page.evaluate(script, arg)


# Module scope: Playwright's sync API allows one driver at a time, and check_bundle (used by the
# conformance tests) starts its own, so a driver must not outlive the module that uses it.
@pytest.fixture(scope="module")
def playwright(browser_settings: BrowserSettings) -> Iterator[Any]:
    with playwright_session() as driver:
        yield driver


@pytest.fixture(scope="module")
def webgpu_browser(playwright: Any, browser_settings: BrowserSettings) -> Iterator[Any]:
    with launch(playwright, browser_settings, webgpu=True) as browser:
        yield browser


@pytest.fixture(scope="module")
def plain_browser(playwright: Any, browser_settings: BrowserSettings) -> Iterator[Any]:
    with launch(playwright, browser_settings, webgpu=False) as browser:
        yield browser


@pytest.fixture
def open_bundle(browser_settings: BrowserSettings) -> Callable[..., Any]:
    """open_bundle(browser, directory) -> a context manager yielding a Page on the harness."""
    import contextlib

    @contextlib.contextmanager
    def _open(browser: Any, directory: Path, path: str = HARNESS_PATH) -> Iterator[Page]:
        with serve_directory(directory) as base_url:
            context = browser.new_context()
            page = context.new_page()
            page.set_default_timeout(browser_settings.timeouts_ms["load"])
            wrapped = Page(page, base_url)
            page.goto(base_url + path.lstrip("/"))
            try:
                yield wrapped
            finally:
                context.close()

    return _open
