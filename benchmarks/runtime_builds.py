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
import statistics
import tempfile
from pathlib import Path

from bundler.browser import launch, load_settings, playwright_session
from bundler.commands.build import build
from bundler.conformance import encode_feeds
from bundler.console import TerminalReporter
from bundler.options import merge
from bundler.reference import native_reference
from bundler.runtime import BUILDS
from bundler.server import HARNESS_PATH, serve_directory

TIME_BUILDS = """async ({ base, modules, model, feeds, runs }) => {
  const typed = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array,
                  uint8: Uint8Array, bool: Uint8Array, float64: Float64Array };
  const bytes = new Uint8Array(await (await fetch(base + model)).arrayBuffer());
  const sessions = {}; const result = {};
  for (const [name, { module, mjs, wasm }] of Object.entries(modules)) {
    const started = performance.now();
    const ort = await import(base + module);
    ort.env.wasm.wasmPaths = { mjs: base + mjs, wasm: base + wasm };
    const session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'] });
    const tensors = Object.fromEntries(Object.entries(feeds).map(([k, f]) => [k,
      new ort.Tensor(f.type, new typed[f.type](Uint8Array.from(atob(f.data),
                                                 (c) => c.charCodeAt(0)).buffer), f.dims)]));
    await session.run(tensors);
    sessions[name] = { session, tensors };
    result[name] = { first: performance.now() - started, times: [] };
  }
  for (let round = 0; round < runs; round++) {
    for (const [name, { session, tensors }] of Object.entries(sessions)) {
      const started = performance.now();
      await session.run(tensors);
      result[name].times.push(performance.now() - started);
    }
  }
  return result;
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", type=Path)
    parser.add_argument("--dim", action="append", default=[])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    reporter = TerminalReporter()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / "bundle"
        options = merge({}, {"output": str(directory), "dims": args.dim, "verify": False})
        manifest = build(args.model, options, reporter=reporter)
        inputs = manifest.inputs
        model_file = manifest.variants[0].file
        feeds = native_reference(directory / model_file, inputs, options.dims).feeds
        modules = {ep: dataclasses.asdict(manifest.runtime.builds[ep]) for ep in ("wasm", "webgpu")}
        sizes = {ep: sum((directory / path).stat().st_size for path in build.values())
                 for ep, build in modules.items()}
        settings = load_settings()
        with reporter.step("Timing both builds in Chromium without WebGPU"), \
                serve_directory(directory) as base_url, playwright_session() as driver, \
                launch(driver, settings, webgpu=False) as browser:
            page = browser.new_page()
            page.set_default_timeout(settings.timeouts_ms["run"] * 4)
            page.goto(base_url + HARNESS_PATH.lstrip("/"))
            timed = page.evaluate(TIME_BUILDS, {"base": base_url, "modules": modules,
                                                "model": model_file, "runs": args.runs,
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
