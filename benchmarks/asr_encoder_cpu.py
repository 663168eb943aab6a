"""The Whisper encoder's CPU time per run in Chromium: our bundle's `int8` against transformers.js's
q8 file, each on its own onnxruntime-web, 1 WASM thread.

    PYTHONPATH=. python benchmarks/asr_encoder_cpu.py --keep DIR [--dtype q8] [--rounds 8]
        [--input tones|silence]

DIR is asr_vs_transformersjs.py's `--keep` folder, run with that dtype first (its export,
transformers.js's files and our build are what this times). On one page, every side is opened
and warmed up, then run one call at a time, interleaved, on input_features [1, 80, 3000] (a 30 s
window; `tones`: a fixed pattern, `silence`: the log-mel of zeros, a padded window's): the main
thread's CPU time around each call (the DevTools protocol's Performance.getMetrics ThreadTime),
besides the wall time. On 1 thread the run is on the main thread, so its CPU time leaves out what
other jobs on a shared machine take from it; the wall time does not (asr_vs_transformersjs.py's
encoder ms are wall times in a whole transcribe()). Sides: transformers.js's file on its
onnxruntime-web (4.3.1's own build, the asyncify one it loads), the same file on ours, our
bundle's run() (bundle.mjs, its runtime and its encoder variant), and our file in a raw session.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

from asr_vs_transformersjs import DTYPES, PAGES, THEIR_FILES
from tjs_bench import TRANSFORMERS_JS

from bundler.console import TerminalReporter
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.site.npmtools import npm_tool
from bundler.verify.browser import launch, load_settings, playwright_session
from bundler.verify.harness import harness_call

# transformers.js 4.3.1's onnxruntime-web: the module, and the build it loads on WASM
THEIR_RUNTIME = ("ort.min.mjs", "ort-wasm-simd-threaded.asyncify.mjs",
                 "ort-wasm-simd-threaded.asyncify.wasm")


def _sides(site: Path, dtype: str) -> dict[str, dict[str, str]]:
    """name -> openEncoders' side, paths relative to `site` (their runtime copied to tjs/cpu/)."""
    package = npm_tool(TRANSFORMERS_JS, scripts=False) / "node_modules/onnxruntime-web/dist"
    (site / "tjs" / "cpu").mkdir(parents=True, exist_ok=True)
    for name in THEIR_RUNTIME:
        shutil.copyfile(package / name, site / "tjs" / "cpu" / name)
    theirs_module, theirs_mjs, theirs_wasm = (f"tjs/cpu/{name}" for name in THEIR_RUNTIME)
    kind = DTYPES[dtype][1]["encoder_model"]
    their_file = f"models/whisper/onnx/encoder_model{THEIR_FILES[kind][0]}.onnx"
    bundle = f"ours/{dtype}/"
    manifest = json.loads((site / bundle / "bundle.json").read_text(encoding="utf-8"))
    build = manifest["runtime"]["builds"]["wasm"]
    ours = {key: bundle + build[key] for key in ("module", "mjs", "wasm")}
    encoder = next(s for s in manifest["sessions"] if s["name"] == "encoder")
    variant = next(v for v in encoder["variants"] if v["name"] == encoder["default_variant"])
    return {
        f"transformers.js's {kind} file, its runtime": {
            "model": their_file, "module": theirs_module, "mjs": theirs_mjs, "wasm": theirs_wasm},
        f"transformers.js's {kind} file, our runtime": {"model": their_file, **ours},
        f"our bundle's run() ({variant['name']})": {"bundle": bundle},
        f"our {variant['name']} file, raw session": {"model": bundle + variant["file"], **ours},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, required=True,
                        help="asr_vs_transformersjs.py's --keep folder")
    parser.add_argument("--small", action="store_true", help="its --small work")
    parser.add_argument("--dtype", default="q8", choices=list(DTYPES))
    parser.add_argument("--rounds", type=int, default=8, help="timed runs of each side")
    parser.add_argument("--input", default="tones", choices=("tones", "silence"))
    args = parser.parse_args()
    site = args.keep / ("small" if args.small else "tiny") / "site"
    if not (site / "ours" / args.dtype / "bundle.json").is_file():
        parser.error(f"no {site}/ours/{args.dtype}: run asr_vs_transformersjs.py --keep"
                     f" {args.keep} --dtypes {args.dtype} first")
    reporter = TerminalReporter()
    sides = _sides(site, args.dtype)
    shutil.copyfile(PAGES, site / "raw" / PAGES.name)
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    wall: dict[str, list[float]] = {name: [] for name in sides}
    settings = load_settings()
    with reporter.step(f"{args.rounds} runs of each side, interleaved"), \
            serve_directory(site) as base, playwright_session() as driver, \
            launch(driver, settings, webgpu=False) as browser:
        page = browser.new_page()
        page.set_default_timeout(1_800_000)
        page.goto(base + HARNESS_PATH.lstrip("/"))
        devtools = page.context.new_cdp_session(page)
        devtools.send("Performance.enable", {"timeDomain": "threadTicks"})

        def thread_seconds() -> float:
            metrics = devtools.send("Performance.getMetrics")["metrics"]
            return next(m["value"] for m in metrics if m["name"] == "ThreadTime")

        page.evaluate(harness_call(f"/raw/{PAGES.name}", "openEncoders"),
                      {"base": base, "sides": sides, "input": args.input, "warmup": 1})
        for _ in range(args.rounds):
            for name in sides:
                before, started = thread_seconds(), time.perf_counter()
                page.evaluate(f"() => globalThis.encoderRuns[{json.dumps(name)}]()")
                wall[name].append((time.perf_counter() - started) * 1000)
                cpu[name].append((thread_seconds() - before) * 1000)
    reference = statistics.median(cpu[next(iter(sides))])
    reporter.table(
        f"Encoder, {args.dtype}, input_features [1, 80, 3000] ({args.input}), 1 WASM thread;"
        f" median of {args.rounds} runs",
        ("side", "CPU ms", "CPU / transformers.js's", "CPU ms min", "wall ms"),
        [[name, f"{statistics.median(cpu[name]):.1f}",
          f"{statistics.median(cpu[name]) / reference:.3f}x", f"{min(cpu[name]):.1f}",
          f"{statistics.median(wall[name]):.1f}"] for name in sides])


if __name__ == "__main__":
    main()
