"""Size and speed of each variant relative to fp32, measured side by side in one run.

    python benchmarks/variants.py [MODEL] [--variants fp32,fp16,int8-weights,int8,int8-static]
                                  [--dim NAME=VALUE] [--runs 20] [--ep wasm]

Builds the variants of MODEL (default: the shipped example) into a temporary bundle, then in one
headless Chromium page loads every variant and times them in interleaved rounds (so machine noise
hits all alike), and does the same natively (onnxruntime CPU, 1 thread). Prints ratios to fp32.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bundler.bundle.manifest import Manifest
from bundler.bundle.modelio import cpu_session
from bundler.bundle.options import merge
from bundler.commands.build import build
from bundler.console import TerminalReporter
from bundler.perf.page import BENCH_MODULE
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.verify.browser import launch, load_settings, playwright_session
from bundler.verify.conformance import encode_feeds
from bundler.verify.harness import harness_call
from bundler.verify.reference import native_reference


def native_medians(directory: Path, manifest: Manifest, feeds: dict, runs: int
                   ) -> dict[str, float]:
    sessions = {v.name: cpu_session(directory / v.file, threads=1)
                for v in manifest.session().variants}
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for runner in sessions.values():
        runner.run(None, feeds)
    for _ in range(runs):
        for name, runner in sessions.items():
            started = time.perf_counter()
            runner.run(None, feeds)
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", type=Path)
    parser.add_argument("--variants", default="fp32,fp16,int8-weights,int8,int8-static")
    parser.add_argument("--dim", action="append", default=[])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--ep", default="wasm", choices=["wasm", "webgpu"])
    args = parser.parse_args()
    reporter = TerminalReporter()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / "bundle"
        options = merge({}, {"output": str(directory), "variants": args.variants,
                             "dims": args.dim, "verify": False})
        manifest = build(args.model, options, reporter=reporter)
        inputs = manifest.session().inputs
        fp32 = directory / manifest.session().variants[0].file
        feeds = native_reference(fp32, inputs, options.dims).feeds
        names = [v.name for v in manifest.session().variants]
        settings = load_settings()
        with reporter.step(f"Timing {len(names)} variants in Chromium ({args.ep})"), \
                serve_directory(directory) as base_url, playwright_session() as driver, \
                launch(driver, settings, webgpu=args.ep == "webgpu") as browser:
            page = browser.new_page()
            page.set_default_timeout(settings.timeouts_ms["run"] * 4)
            page.goto(base_url + HARNESS_PATH.lstrip("/"))
            timed = page.evaluate(harness_call(BENCH_MODULE, "timeVariants"), {
                "base": base_url, "names": names, "ep": args.ep,
                "feeds": encode_feeds(feeds, inputs), "warmup": 1, "rounds": args.runs,
            })
        if timed["errors"]:
            raise SystemExit(f"variants that did not run in Chromium: {timed['errors']}")
        native = native_medians(directory, manifest, feeds, args.runs)
    browser_median = {name: statistics.median(timed["times"][name]) for name in names}
    base = manifest.session().variants[0]
    rows = []
    for variant in manifest.session().variants:
        name = variant.name
        rows.append([
            name, variant.bytes, f"{variant.bytes / base.bytes:.2f}",
            f"{timed['loadMs'][name]:.0f}", f"{browser_median[name]:.2f}",
            f"{browser_median[base.name] / browser_median[name]:.2f}x",
            f"{native[name]:.2f}", f"{native[base.name] / native[name]:.2f}x",
            (variant.accuracy or {}).get("cosine", "-"),
        ])
    reporter.table(
        f"Variants of {manifest.name} ({args.runs} interleaved runs;"
        f" speed-up vs {base.name})",
        ["variant", "bytes", "size vs fp32", f"{args.ep} load ms", f"{args.ep} median ms",
         f"{args.ep} speed-up", "native ms (1 thread)", "native speed-up", "cosine"],
        rows,
    )


if __name__ == "__main__":
    main()
