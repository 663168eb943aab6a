"""What a first visit's load() spends its time on, and the levers tried on it, in one run.

    python benchmarks/cold_start.py [DIR] [--rounds 4]

DIR is a built bundle (default: the detector of bench_pages.py, built fp32 for WASM). In one
headless Chromium without WebGPU, fresh contexts (nothing cached) load it in alternating rounds
with load() as shipped and with load({ cache: false }), which writes nothing to Cache Storage:
the difference is what the first visit's Cache Storage writes cost load(). Prints the medians of
navigation -> ready, fetch, wasm compile and session creation.

Lever applied since: load() hands the bytes on without waiting for the Cache Storage write, and
waits for it only once the session exists. On the 1.2 MB detector (2 busy cores) that was within
this machine's noise; on a 13.6 MB one a timeline of the load showed each write taking 100-160 ms
before the session could start.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from bench_pages import detector

from bundler.bundle.manifest import load as load_manifest
from bundler.bundle.options import DEFAULT_RUNTIME_VERSION, merge
from bundler.commands.build import build
from bundler.console import TerminalReporter
from bundler.perf.page import measure_page
from bundler.server.bundle_server import serve_directory
from bundler.site.runtime import fetch_runtime
from bundler.verify.browser import launch, load_settings, playwright_session
from bundler.verify.conformance import encode_feeds
from bundler.verify.reference import native_reference

SPLIT = ("navigation_to_ready_ms", "fetch_ms", "wasm_compile_ms", "session_ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    reporter = TerminalReporter()
    directory = args.directory
    if directory is None:
        work = Path(tempfile.mkdtemp(prefix="cold-start-"))
        directory = work / "dist"
        with reporter.step("Building the detector (fp32, WASM)"):
            build(detector(work / "detector.onnx"), merge({}, {
                "output": str(directory), "runtime_dir": str(fetch_runtime(
                    DEFAULT_RUNTIME_VERSION)), "verify": False, "execution_providers": ["wasm"]}))
    manifest = load_manifest(directory)
    model = directory / manifest.session().variants[0].file
    specs = manifest.session().inputs
    feeds = encode_feeds(native_reference(model, specs, {}).feeds, specs)
    settings = load_settings()
    timeout = settings.timeouts_ms["load"] + settings.timeouts_ms["run"]
    figures: dict[str, list[dict[str, float]]] = {"as shipped": [], "cache: false": []}
    with serve_directory(directory) as base, playwright_session() as playwright, \
            launch(playwright, settings, webgpu=False) as browser:
        for round_ in range(args.rounds):
            order = [True, False] if round_ % 2 == 0 else [False, True]
            for cache in order:
                with reporter.step(f"Round {round_ + 1}: cache {cache}"):
                    result = measure_page(browser, base, "wasm", None, feeds, 1, None, timeout,
                                          lambda what: None, cache=cache)
                if result.cold is None:
                    raise SystemExit(f"the page failed: {result.error}")
                cold = result.cold.__dict__
                figures["as shipped" if cache else "cache: false"].append(
                    {key: cold[key] or 0.0 for key in SPLIT})
    reporter.table(f"{directory}: first visit, median of {args.rounds} fresh loads (ms)",
                   ("load()", *SPLIT),
                   [[name, *(f"{statistics.median(r[key] for r in rows):.0f}" for key in SPLIT)]
                    for name, rows in figures.items()])


if __name__ == "__main__":
    main()
