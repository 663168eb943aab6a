"""Headless Chromium through Playwright, configured by playwright.config.py."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import runpy
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bundler.errors import BrowserError, first_line
from bundler.resources import resource

CONFIG_ENV = "BUNDLER_PLAYWRIGHT_CONFIG"


@dataclasses.dataclass(frozen=True)
class BrowserSettings:
    chromium_env: str
    chromium_candidates: tuple[str, ...]
    base_args: tuple[str, ...]
    webgpu_args: tuple[str, ...]
    timeouts_ms: dict[str, int]
    tolerances: dict[str, dict[str, float]]
    quantized_tolerances: dict[str, dict[str, float]]


def load_settings(path: Path | None = None) -> BrowserSettings:
    """Read playwright.config.py (or $BUNDLER_PLAYWRIGHT_CONFIG, or `path`)."""
    path = path or Path(os.environ.get(CONFIG_ENV) or resource("playwright.config.py"))
    if not path.is_file():
        raise BrowserError(f"browser settings file not found: {path}")
    values: dict[str, Any] = runpy.run_path(str(path))
    try:
        return BrowserSettings(
            chromium_env=values["CHROMIUM_ENV"],
            chromium_candidates=tuple(values["CHROMIUM_CANDIDATES"]),
            base_args=tuple(values["BASE_ARGS"]),
            webgpu_args=tuple(values["WEBGPU_ARGS"]),
            timeouts_ms=dict(values["TIMEOUTS_MS"]),
            tolerances={ep: dict(tol) for ep, tol in values["TOLERANCES"].items()},
            quantized_tolerances={
                ep: dict(tol) for ep, tol in values["QUANTIZED_TOLERANCES"].items()
            },
        )
    except KeyError as error:
        raise BrowserError(f"{path}: missing setting {error.args[0]}") from None


def chromium_executable(settings: BrowserSettings) -> str | None:
    """$BUNDLER_CHROMIUM, else the first installed candidate, else None (Playwright's own)."""
    chosen = os.environ.get(settings.chromium_env)
    if chosen:
        if not Path(chosen).is_file():
            raise BrowserError(
                f"${settings.chromium_env} points at {chosen}, which does not exist; install"
                f" Chromium (apt-get install -y chromium) and set ${settings.chromium_env} to its"
                " path, or unset it")
        return chosen
    return next((c for c in settings.chromium_candidates if Path(c).is_file()), None)


@contextlib.contextmanager
def playwright_session() -> Iterator[Any]:
    """One Playwright driver; the sync API allows one at a time, so launch all browsers from it."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise BrowserError("playwright is not installed; pip install playwright") from None
    # The driver and the Chromium it starts keep their temporary files in a folder of ours, which
    # is removed even when an interrupt (Ctrl-C reaches them too) stops them before they clean up.
    with (tempfile.TemporaryDirectory(prefix="bundler-browser-", dir=_short_temp_dir()) as scratch,
          _environment(TMPDIR=scratch), sync_playwright() as playwright):
        yield playwright


# Chromium's profile folder, which Playwright makes in $TMPDIR, holds a Unix socket, whose path
# may not pass 104 bytes (macOS; 108 on Linux): "cannot launch Chromium" from a longer $TMPDIR.
_CHROMIUM_SOCKET_TAIL = len("/bundler-browser-xxxxxxxx/playwright_chromiumdev_profile-xxxxxx"
                            "/SingletonSocket")
_SOCKET_PATH_LIMIT = 103


def _short_temp_dir() -> str | None:
    """$TMPDIR where the socket's path fits under it, else /tmp where it is writable."""
    default = tempfile.gettempdir()
    if len(os.fsencode(default)) + _CHROMIUM_SOCKET_TAIL <= _SOCKET_PATH_LIMIT:
        return None
    return "/tmp" if os.access("/tmp", os.W_OK | os.X_OK) else None


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """`values` in os.environ inside the block (for the subprocesses it starts)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def launch(playwright: Any, settings: BrowserSettings, *, webgpu: bool) -> Iterator[Any]:
    """A headless Chromium; with `webgpu` it gets the SwiftShader WebGPU flags, else none."""
    from playwright.sync_api import Error as PlaywrightError

    executable = chromium_executable(settings)
    args = [*settings.base_args, *(settings.webgpu_args if webgpu else ())]
    try:
        browser = playwright.chromium.launch(
            executable_path=executable, args=args, headless=True,
            timeout=settings.timeouts_ms["launch"],
        )
    except PlaywrightError as error:
        where = executable or "Playwright's own Chromium"
        raise BrowserError(
            f"cannot launch Chromium ({where}): {first_line(error)};"
            f" install it (apt-get install -y chromium) or set ${settings.chromium_env}"
        ) from None
    try:
        yield browser
    finally:
        browser.close()
