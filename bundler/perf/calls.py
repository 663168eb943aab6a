"""`bundle bench` on a bundle measured by its task method's calls (text generation: generate(),
speech recognition: transcribe()): per EP and variant, a cold load in a fresh browser context (on
the harness page, which loads nothing itself), then the calls; each call's figures are the
method's own `timings`. The first call is reported apart from the mean of the later ones."""

from __future__ import annotations

import dataclasses
import statistics
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bundler.console import Reporter
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.verify.browser import BrowserSettings, launch, playwright_session


@dataclasses.dataclass(frozen=True)
class PageCalls:
    """What one cold page gave: the EP load() got, its load ms (warm-up included), each call's
    figures (web/dev/bench.mjs), anything else the page said; or the error."""

    ep: str
    variant: str
    ran_on: str | None = None
    load_ms: float | None = None
    runs: tuple[dict[str, Any], ...] = ()
    about: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    error: str | None = None


def cold_pages(directory: Path, eps: Sequence[str], names: Sequence[str], *, call: str,
               arguments: Mapping[str, Any], timeout_ms: float, threads: int | None,
               settings: BrowserSettings, reporter: Reporter, doing: str
               ) -> tuple[list[PageCalls], str]:
    """Per EP × variant, `call` (harness_call of a bench.mjs function) with the bundle's URL, the
    load() options and `arguments`, in a fresh context: (what each page gave, the browser's
    version)."""
    pages = []
    with serve_directory(directory) as base_url, playwright_session() as playwright, \
            launch(playwright, settings, webgpu="webgpu" in eps) as browser:
        for ep in eps:
            for name in names:
                with reporter.step(f"Chromium: {doing} with {name} on {ep}"):
                    context = browser.new_context()  # a cold load: nothing cached
                    try:
                        page = context.new_page()
                        page.set_default_timeout(timeout_ms)
                        page.goto(urllib.parse.urljoin(base_url, HARNESS_PATH))
                        options = {"executionProviders": [ep], "variant": name,
                                   "ignoreVerification": True,
                                   **({"numThreads": threads} if threads else {})}
                        got = page.evaluate(call, {
                            "url": base_url + "bundle.mjs", "options": options, **arguments})
                    except Exception as error:  # noqa: BLE001 - reported in its row
                        got = {"error": str(error).splitlines()[0]}
                    finally:
                        context.close()
                if got.get("error") is not None:
                    pages.append(PageCalls(ep, name, error=got["error"]))
                    continue
                about = {key: value for key, value in got.items()
                         if key not in ("ep", "loadMs", "runs")}
                pages.append(PageCalls(ep, name, got["ep"], got["loadMs"], tuple(got["runs"]),
                                       about))
        return pages, browser.version


def mean(values: Sequence[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return statistics.fmean(known) if known else None


def number(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}" if value >= 10 else f"{value:.2f}"
