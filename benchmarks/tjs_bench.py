"""What the benchmarks against transformers.js 4.3.1 share (text_vs_transformersjs.py,
asr_vs_transformersjs.py): its files from npm served beside our bundles, a page function run on
the harness page of a fresh browser context, fresh loads of both sides interleaved (A B, B A, ...),
and the table's medians, numbers and ratios against a target."""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path
from typing import Any

from bundler.console import TerminalReporter
from bundler.server.bundle_server import HARNESS_PATH
from bundler.site.npmtools import npm_tool
from bundler.verify.harness import harness_call

TRANSFORMERS_JS = {"@huggingface/transformers": "4.3.1"}
ORT_FILES = ("ort-wasm-simd-threaded.asyncify.mjs", "ort-wasm-simd-threaded.asyncify.wasm")
TEXT_PAGES = Path(__file__).with_name("text_pages.mjs")  # measure() and transformers.js's setup


def copy_transformers_js(site: Path, *pages: Path) -> None:
    """site/tjs: transformers.min.js (its npm build) and the onnxruntime-web files it would take
    from jsdelivr; site/raw: the page modules (text_pages.mjs, which the others import, and
    `pages`)."""
    package = npm_tool(TRANSFORMERS_JS, scripts=False) / "node_modules"
    (site / "tjs").mkdir(parents=True, exist_ok=True)
    (site / "raw").mkdir(exist_ok=True)
    shutil.copyfile(package / "@huggingface/transformers/dist/transformers.min.js",
                    site / "tjs" / "transformers.min.js")
    for name in ORT_FILES:
        shutil.copyfile(package / "onnxruntime-web/dist" / name, site / "tjs" / name)
    for page in (TEXT_PAGES, *pages):
        shutil.copyfile(page, site / "raw" / page.name)


def run_page(browser: Any, base: str, module: Path, function: str, argument: dict,
             timeout_ms: int) -> dict:
    """`function` of the page module `module` (in site/raw) on the harness page of a fresh
    context."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(timeout_ms)
        page.goto(base + HARNESS_PATH.lstrip("/"))
        return page.evaluate(harness_call(f"/raw/{module.name}", function), argument)
    finally:
        context.close()


def interleaved(browser: Any, base: str, module: Path, sides: dict[str, tuple[str, dict]],
                label: str, rounds: int, timeout_ms: int,
                reporter: TerminalReporter) -> dict[str, list[dict]]:
    """Fresh loads of each side ({name: (page function, argument)}) in turn, the first side
    alternating by round."""
    results: dict[str, list[dict]] = {name: [] for name in sides}
    for round_ in range(rounds):
        order = list(sides) if round_ % 2 == 0 else list(sides)[::-1]
        for name in order:
            function, argument = sides[name]
            with reporter.step(f"{label}, round {round_ + 1}: {name}"):
                results[name].append(run_page(browser, base, module, function, argument,
                                              timeout_ms))
    return results


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def number(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:,.1f} MB"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def row(metric: str, ours: float | None, theirs: float | None, higher: bool,
        target: float | None) -> list[str]:
    """[metric, ours, theirs, ours / theirs (ok or MISSED against the target), target]."""
    ratio = None if ours is None or not theirs else ours / theirs
    goal = "-" if target is None else f"{'>=' if higher else '<='} {target:g}x"
    met = "" if ratio is None or target is None else (
        " ok" if (ratio >= target if higher else ratio <= target) else " MISSED")
    return [metric, number(ours), number(theirs),
            "-" if ratio is None else f"{ratio:.2f}x{met}", goal]
