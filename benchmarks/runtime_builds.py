"""Which onnxruntime-web build should a page without a WebGPU adapter load? Side by side in one run.

    python benchmarks/runtime_builds.py [MODEL] [--dim NAME=VALUE] [--runs 20]

Builds MODEL (default: the shipped example), then in one headless Chromium without WebGPU runs it
on the WASM EP through the plain WASM build (ort.wasm.min.mjs, what bundle.mjs loads there) and
through the WebGPU build (ort.webgpu.min.mjs, the documented `onnxruntime-web/webgpu` import), in
interleaved rounds. Prints time to first result, median run time and bytes of each, as ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import tempfile
from pathlib import Path

from bundler.bundle.options import merge
from bundler.commands.build import build
from bundler.console import TerminalReporter
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.site.runtime import BUILDS
from bundler.verify.browser import launch, load_settings, playwright_session
from bundler.verify.conformance import encode_feeds
from bundler.verify.harness import harness_call
from bundler.verify.reference import native_reference

PAGES_MODULE = Path(__file__).with_name("pages.mjs")  # the timing page, in JavaScript


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", type=Path)
    parser.add_argument("--dim", action="append", default=[])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    reporter = TerminalReporter()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / "bundle"
        # unsplit files: the page loads each build by its files' paths, not by their parts
        options = merge({}, {"output": str(directory), "dims": args.dim, "verify": False,
                             "max_file_size": "64MiB"})
        manifest = build(args.model, options, reporter=reporter)
        inputs = manifest.session().inputs
        model_file = manifest.session().variants[0].file
        feeds = native_reference(directory / model_file, inputs, options.dims).feeds
        modules = {ep: dataclasses.asdict(manifest.runtime.builds[ep]) for ep in ("wasm", "webgpu")}
        sizes = {ep: sum((directory / path).stat().st_size for path in build.values())
                 for ep, build in modules.items()}
        settings = load_settings()
        shutil.copyfile(PAGES_MODULE, directory / PAGES_MODULE.name)
        with reporter.step("Timing both builds in Chromium without WebGPU"), \
                serve_directory(directory) as base_url, playwright_session() as driver, \
                launch(driver, settings, webgpu=False) as browser:
            page = browser.new_page()
            page.set_default_timeout(settings.timeouts_ms["run"] * 4)
            page.goto(base_url + HARNESS_PATH.lstrip("/"))
            timed = page.evaluate(harness_call(f"/{PAGES_MODULE.name}", "timeBuilds"), {
                "base": base_url, "modules": modules, "model": model_file, "runs": args.runs,
                "feeds": encode_feeds(feeds, inputs)})
    median = {ep: statistics.median(timed[ep]["times"]) for ep in modules}
    reporter.table(
        f"{manifest.name} on the WASM EP ({args.runs} interleaved runs)",
        ["build", "runtime bytes", "first result ms", "median ms", "median vs wasm build"],
        [[f"{ep} ({BUILDS[ep].module})", sizes[ep], f"{timed[ep]['first']:.0f}",
          f"{median[ep]:.2f}", f"{median[ep] / median['wasm']:.2f}x"] for ep in modules],
    )


if __name__ == "__main__":
    main()
