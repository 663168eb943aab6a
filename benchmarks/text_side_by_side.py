"""Text-encoder bundles side by side in one page: embed() of the same sentences on each in turn.

    python benchmarks/text_side_by_side.py DIR [DIR ...] [--calls 16] [--sentences 32]
        [--variant int8]

Serves the bundle folders together and, in one headless Chromium page, loads each on WASM (1
thread, `--variant`), calls embed() once on each to warm it up, then calls it on each in turn
`--calls` times (the first bundle alternating) on `--sentences` sentences as one call (the
benchmark's, text_exports.sentences). Prints per bundle the median ms per call, sentences/s and
the ratio against the first. Unlike fresh loads (text_vs_transformersjs.py), the bundles share the
page's CPU moments and wasm tier-up, so small differences between them show on a loaded machine.
To compare two versions of web/tasks/text.mjs, copy a bundle and replace its tasks/text.mjs
(deleting the .br and .gz beside it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

import text_exports
from tjs_bench import TEXT_PAGES, run_page

from bundler.console import TerminalReporter
from bundler.server.bundle_server import serve_directory
from bundler.verify.browser import launch, load_settings, playwright_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", type=Path, nargs="+", metavar="DIR")
    parser.add_argument("--calls", type=int, default=16, help="calls per bundle, after one")
    parser.add_argument("--sentences", type=int, default=32)
    parser.add_argument("--variant", default="int8")
    args = parser.parse_args()
    names = [f"{index}-{bundle.resolve().name}" for index, bundle in enumerate(args.bundles)]
    reporter = TerminalReporter()
    with tempfile.TemporaryDirectory(prefix="text-side-by-side-") as scratch:
        root = Path(scratch)
        for name, bundle in zip(names, args.bundles, strict=True):  # links: no copies of models
            shutil.copytree(bundle, root / name, copy_function=os.link)
        (root / "raw").mkdir()
        shutil.copyfile(TEXT_PAGES, root / "raw" / TEXT_PAGES.name)
        with serve_directory(root) as base, playwright_session() as playwright, \
                launch(playwright, load_settings(), webgpu=False) as browser, \
                reporter.step(f"{len(names)} bundles x {args.calls} calls in one page"):
            ms = run_page(browser, base, TEXT_PAGES, "sideBySide",
                          {"names": names, "texts": text_exports.sentences(args.sentences),
                           "calls": args.calls, "variant": args.variant}, 1_800_000)
    first = statistics.median(ms[0])
    rows = [[str(bundle), f"{statistics.median(calls):,.0f}",
             f"{args.sentences * 1000 / statistics.median(calls):.1f}",
             f"{first / statistics.median(calls):.2f}x"]
            for bundle, calls in zip(args.bundles, ms, strict=True)]
    reporter.table(f"embed() of {args.sentences} sentences, {args.variant} on WASM (1 thread),"
                   f" median of {args.calls} calls", ("bundle", "ms per call", "sentences/s",
                                                      "speed vs the first"), rows)


if __name__ == "__main__":
    main()
