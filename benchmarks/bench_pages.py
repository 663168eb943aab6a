"""The shipped default against the pages people write by hand, side by side in one Chromium.

    python benchmarks/bench_pages.py [--runs 20] [--rounds 2] [--keep DIR] [--large] [--link MBIT]

Builds a detector-like CNN in code (strided 3x3 convs, 224x224 input, 45 output channels per
cell; 1.2 MB, or 13.6 MB with --large), builds it with `--quantize auto --calibration` (WASM
EP), and in one headless Chromium without a WebGPU adapter (as most visitors' browsers are to
WASM) measures, each in a fresh context and in alternating rounds:

- bundle: the bundle's own load() with no options (what an app gets);
- docs page: the documented `import * as ort from 'onnxruntime-web/webgpu'` with the fp32 model
  and executionProviders ['webgpu', 'wasm'];
- wasm page: the best hand-written WASM-only page: `onnxruntime-web` (ort.wasm.min.mjs) with the
  fp32 model and executionProviders ['wasm'].

Prints cold start (navigation -> session ready), time to first result, warm-up mean (first 10
runs), steady-state median (runs 16 on), bytes, and their ratios, and the steady state once more
with the three in one page, interleaved run by run (the figure to trust on a busy machine); then
`bundle bench` over every variant of a second build (each against fp32, and browser against
native onnxruntime). With --link, the pages load over a link that Chromium emulates (that speed,
a 20 ms round trip), from a host that compresses nothing: what the bytes cost on a network.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bundler.bundle.options import DEFAULT_RUNTIME_VERSION, merge
from bundler.commands.bench import bench
from bundler.commands.build import build
from bundler.console import TerminalReporter
from bundler.perf.page import Link, PageResult, measure_loaded, measure_page
from bundler.perf.stats import ratio, total_runs
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.site.runtime import fetch_runtime
from bundler.verify.browser import launch, load_settings, playwright_session
from bundler.verify.conformance import encode_feeds
from bundler.verify.harness import harness_call
from bundler.verify.reference import native_reference

PAGES_MODULE = Path(__file__).with_name("pages.mjs")  # the hand-written pages
RAW_MODULE = f"/raw/{PAGES_MODULE.name}"  # where the served site has it
INTERLEAVED = "steady median ms, interleaved in one page"
RAW_FILES = ("ort.webgpu.min.mjs", "ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs",
             "ort-wasm-simd-threaded.wasm", "ort-wasm-simd-threaded.asyncify.mjs",
             "ort-wasm-simd-threaded.asyncify.wasm")
CHANNELS = (16, 32, 64, 128)  # 1.2 MB in fp32, about 0.3 G multiply-adds at 224x224
LARGE_CHANNELS = (32, 64, 128, 256, 384)  # 13.6 MB, about 1.2 G multiply-adds
SIZE = 224


def detector(path: Path, seed: int = 0, channels: Sequence[int] = CHANNELS) -> Path:
    """Conv stages (stride 2, then 3x3 at the same size) with ReLU, and a 1x1 head of
    3 anchors x (4 box + 1 objectness + 10 classes) per cell."""
    rng = np.random.default_rng(seed)
    nodes, weights, current, width = [], [], "image", 3
    for stage, out in enumerate(channels):
        for index, stride in enumerate((2, 1)):
            name = f"s{stage}c{index}"
            fan_in = width * 9
            weights += [numpy_helper.from_array(
                (rng.standard_normal((out, width, 3, 3)) * np.sqrt(2 / fan_in)).astype(
                    np.float32), f"{name}.w"),
                numpy_helper.from_array((rng.standard_normal(out) * 0.01).astype(np.float32),
                                        f"{name}.b")]
            nodes += [helper.make_node("Conv", [current, f"{name}.w", f"{name}.b"], [name],
                                       pads=[1, 1, 1, 1], strides=[stride, stride]),
                      helper.make_node("Relu", [name], [f"{name}.relu"])]
            current, width = f"{name}.relu", out
    weights += [numpy_helper.from_array((rng.standard_normal((45, width, 1, 1))
                                         * np.sqrt(1 / width)).astype(np.float32), "head.w"),
                numpy_helper.from_array(np.zeros(45, np.float32), "head.b")]
    nodes.append(helper.make_node("Conv", [current, "head.w", "head.b"], ["detections"]))
    cells = SIZE // 2 ** len(channels)
    graph = helper.make_graph(
        nodes, "detector",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("detections", TensorProto.FLOAT, [1, 45, cells, cells])],
        weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # onnxruntime-web 1.31 reads IR <= 13
    onnx.save(model, path)
    return path


def images(count: int, seed: int) -> np.ndarray:
    """Smooth pseudo-photographs: low-frequency colour fields with a little noise, in [0, 1]."""
    rng = np.random.default_rng(seed)
    coarse = rng.random((count, 3, 7, 7)).astype(np.float32)
    fields = coarse.repeat(SIZE // 7, axis=2).repeat(SIZE // 7, axis=3)
    return np.clip(fields + rng.normal(0, 0.05, fields.shape), 0, 1).astype(np.float32)


def _median(results: list[PageResult], read) -> float | None:
    values = [read(r) for r in results if r.error is None and r.cold and r.latency]
    return statistics.median(values) if values else None


FIGURES = {
    "cold start ms (navigation -> ready)": lambda r: r.cold.navigation_to_ready_ms,
    "time to first result ms": lambda r: r.cold.time_to_first_result_ms,
    "warm-up mean ms (runs 1-10)": lambda r: r.latency.warmup_mean_ms,
    "steady median ms (runs 16+)": lambda r: r.latency.steady_median_ms,
    "bytes fetched": lambda r: float(r.cold.bytes_transferred),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="steady-state runs per page")
    parser.add_argument("--rounds", type=int, default=2, help="fresh loads of each page")
    parser.add_argument("--keep", type=Path, default=None, help="keep the builds here")
    parser.add_argument("--large", action="store_true",
                        help="a 13.6 MB detector (channels 32-384) instead of the 1.2 MB one")
    parser.add_argument("--link", type=float, default=None, metavar="MBIT",
                        help="load the pages over an emulated link of MBIT Mbit/s with a 20 ms"
                             " round trip (default: loopback as it is)")
    args = parser.parse_args()
    reporter = TerminalReporter()
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench-pages-"))
    site = work / "site"
    site.mkdir(parents=True, exist_ok=True)
    model = detector(work / "detector.onnx",
                     channels=LARGE_CHANNELS if args.large else CHANNELS)
    np.savez(work / "calibration.npz", image=images(32, 1))
    dist = fetch_runtime(DEFAULT_RUNTIME_VERSION)
    with reporter.step("Building the detector with --quantize auto"):
        manifest = build(model, merge({}, {
            "output": str(site / "dist"), "runtime_dir": str(dist), "quantize": "auto",
            "variants": ["fp32", "int8-weights", "int8", "int8-static"],
            "calibration": str(work / "calibration.npz"), "execution_providers": ["wasm"]}),
            force=True, reporter=reporter)
    raw = site / "raw"
    raw.mkdir(exist_ok=True)
    for name in RAW_FILES:
        shutil.copyfile(dist / name, raw / name)
    shutil.copyfile(model, raw / "detector.onnx")
    shutil.copyfile(PAGES_MODULE, raw / PAGES_MODULE.name)
    specs = manifest.session().inputs
    feeds = encode_feeds(native_reference(model, specs, {}).feeds, specs)
    settings = load_settings()
    timeout = settings.timeouts_ms["load"] + settings.timeouts_ms["run"]
    runs = total_runs(args.runs)
    link = Link(args.link) if args.link else None
    pages = {
        "bundle": lambda base: measure_page(browser, base + "dist/", None, None, feeds, runs,
                                            None, timeout, lambda what: None, link=link),
        "docs page": lambda base: _raw(browser, base, "ort.webgpu.min.mjs", ["webgpu", "wasm"],
                                       feeds, runs, timeout, link),
        "wasm page": lambda base: _raw(browser, base, "ort.wasm.min.mjs", ["wasm"], feeds, runs,
                                       timeout, link),
    }
    results: dict[str, list[PageResult]] = {name: [] for name in pages}
    with serve_directory(site) as base, playwright_session() as playwright, \
            launch(playwright, settings, webgpu=False) as browser:
        for round_ in range(args.rounds):
            order = list(pages)[round_ % len(pages):] + list(pages)[:round_ % len(pages)]
            for name in order:
                with reporter.step(f"Round {round_ + 1}: {name}"):
                    result = pages[name](base)
                if result.error:
                    reporter.warn(f"{name}: {result.error}")
                results[name].append(result)
        with reporter.step("Steady state, interleaved in one page"):
            page = browser.new_page()
            page.set_default_timeout(timeout * 3)
            page.goto(urllib.parse.urljoin(base, HARNESS_PATH))
            interleaved = page.evaluate(harness_call(RAW_MODULE, "interleavedPages"), {
                "base": base + "dist/", "feeds": feeds, "warmup": 15, "rounds": args.runs})
            page.close()
    medians = {name: {figure: _median(found, read) for figure, read in FIGURES.items()}
               for name, found in results.items()}
    for name, times in interleaved.items():
        medians[name][INTERLEAVED] = statistics.median(times)
    over = f", over {args.link:g} Mbit/s with a 20 ms round trip" if link else ""
    default = manifest.session().default_variant
    reporter.table(f"{manifest.name}: shipped default {default} vs pages written"
                   f" by hand (median of {args.rounds} fresh loads each{over})",
                   ("figure", *pages, "bundle / docs", "bundle / wasm page"),
                   [[figure, *(_number(medians[name][figure]) for name in pages),
                     _times(ratio(medians["bundle"][figure], medians["docs page"][figure])),
                     _times(ratio(medians["bundle"][figure], medians["wasm page"][figure]))]
                    for figure in [*FIGURES, INTERLEAVED]])
    _variants(work, model, dist, reporter, args.runs)


def _raw(browser, base: str, module: str, eps: list[str], feeds, runs: int,
         timeout: int, link: Link | None) -> PageResult:
    # base: the bundle's folder, whose bundle.core.mjs decodes the inputs (after `ready`)
    arguments = {"base": base + "dist/", "module": f"../raw/{module}",
                 "model": "../raw/detector.onnx", "eps": eps, "feeds": feeds}
    return measure_loaded(browser, base, (RAW_MODULE, "rawColdLoad"), arguments, runs, timeout,
                          lambda what: None, PageResult(ep="+".join(eps), variant="fp32"), link)


def _variants(work: Path, model: Path, dist: Path, reporter: TerminalReporter, runs: int) -> None:
    """Every variant against fp32 and against native onnxruntime, through bundle bench."""
    output = work / "variants"
    with reporter.step("Building every variant"):
        build(model, merge({}, {
            "output": str(output), "runtime_dir": str(dist), "verify": False,
            "variants": ["fp32", "int8-weights", "int8", "int8-static"],
            "calibration": str(work / "calibration.npz"), "execution_providers": ["wasm"]}),
            force=True)
    report = bench(output, execution_providers=("wasm",), runs=runs, reporter=reporter,
                   json_path=work / "variants.json")
    fp32 = next(r for r in report.results if r.variant == "fp32")
    rows = []
    for result in report.results:
        if result.latency is None or fp32.latency is None:
            continue
        variant = report.manifest.session().variant(result.variant)
        rows.append([result.variant, _times(ratio(variant.bytes, report.manifest.session().variant(
            "fp32").bytes)), _times(ratio(result.latency.steady_median_ms,
                                          fp32.latency.steady_median_ms)),
            _times(report.browser_vs_native(result)["threads_1"]),
            str((variant.accuracy or {}).get("cosine", "-"))])
    reporter.table("Each variant vs fp32 (WASM, steady-state median), and browser vs native",
                   ("variant", "bytes / fp32", "ms / fp32", "browser / native 1 thread",
                    "cosine vs fp32"), rows)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


if __name__ == "__main__":
    main()
