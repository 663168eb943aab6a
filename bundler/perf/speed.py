"""How fast each candidate of `--quantize auto` runs in the browser, for select.py.

Short on purpose (it runs during the build): each candidate is loaded on the WASM EP in a fresh
context of one headless Chromium and run SPEED_RUNS times; its speed is the median of the runs
after the first half (the JIT's warm-up). WebGPU is not timed: the build's Chromium has only
SwiftShader, whose figures are not GPU figures, so WebGPU gets the WASM choice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bundler.browser import BrowserSettings, launch, load_settings, playwright_session
from bundler.conformance import encode_feeds
from bundler.console import Reporter
from bundler.manifest import Manifest
from bundler.perf.page import measure_page
from bundler.reference import Feeds
from bundler.server import serve_directory
from bundler.variants.select import BALANCED_SLOWER, BALANCED_SMALLER, SPEED_TIE

SPEED_RUNS = 10
SPEED_EP = "wasm"


def browser_speeds(directory: Path, manifest: Manifest, names: Sequence[str], feeds: Feeds,
                   reporter: Reporter, settings: BrowserSettings | None = None
                   ) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """({"wasm": {variant: steady ms}}, the record of how) for the variants `names` of the
    (rendered) bundle in `directory`. A candidate that does not run is left out (say why)."""
    settings = settings or load_settings()
    timeout = settings.timeouts_ms["load"] + settings.timeouts_ms["run"]
    encoded = encode_feeds(feeds, manifest.inputs)
    speeds: dict[str, float] = {}
    threads: set[int] = set()
    with serve_directory(directory) as base_url, playwright_session() as playwright, \
            launch(playwright, settings, webgpu=False) as browser:
        for name in names:
            with reporter.step(f"auto: timing {name} on {SPEED_EP} in Chromium"):
                result = measure_page(browser, base_url, SPEED_EP, name, encoded, SPEED_RUNS,
                                      None, timeout, lambda what: None)
            if result.latency is None:
                reporter.warn(f"auto: {name} could not be timed ({result.error})")
                continue
            speeds[name] = round(result.latency.steady_median_ms, 2)
            threads |= {result.threads} if result.threads else set()
        version = browser.version
    return {SPEED_EP: speeds}, speed_record(
        f"steady-state median ms per run on {SPEED_EP} (runs {SPEED_RUNS // 2 + 1}-{SPEED_RUNS}"
        f" of {SPEED_RUNS}) in Chromium {version}, {', '.join(map(str, sorted(threads)))}"
        " thread(s)")


def speed_record(measured: str | None, reason: str | None = None) -> dict[str, Any]:
    """bundle.json's selection.speed: how speeds were measured (or why not) and the rule's
    tolerances."""
    record: dict[str, Any] = {"tie_tolerance": SPEED_TIE, "balanced_smaller": BALANCED_SMALLER,
                              "balanced_slower": BALANCED_SLOWER}
    if measured:
        record["measured"] = measured
        record["not_measured_on"] = {"webgpu": "SwiftShader is not a GPU: WebGPU gets the WASM"
                                               " choice"}
    else:
        record["not_measured"] = reason
    return record


def speed_rows(candidates: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Rows for the build report's table of auto's candidates."""
    return [[c["name"], str(c["bytes"]), "yes" if c["within_budget"] else "no",
             "yes" if c["browser_verified"] else "no",
             str(c.get(f"{SPEED_EP}_ms", "-")), "SHIPS" if c["chosen"] else ""]
            for c in candidates]


SPEED_COLUMNS = ("candidate", "bytes", "within budget", "passed in browser",
                 f"{SPEED_EP} ms (steady median)", "")
