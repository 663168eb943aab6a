"""A model past 2 GB of weights in external data: built natively, then loaded in Chromium.

    python benchmarks/large_model.py [--size-gb 2.25] [--files 3] [--one-file] [--work DIR]
                                     [--quantize int4 [--int4 format=qdq]] [--verify] [--keep]

Makes y = x @ w1 @ w2 @ ... with one square float32 weight per external data file (zeros: the
files are sparse, cost no disk until the build copies them, and compress to almost nothing; with
--quantize, seeded normal values instead, so that the quantizer has real blocks to scale), runs
`bundle build` on it in a subprocess (wall time and the peak RSS of its largest process), then
serves the bundle and, in headless Chromium (WebGPU on SwiftShader, else WASM), calls
`preflight()` and `load()` twice: as the browser is, and with `navigator.deviceMemory` set to
0.5 GB. Each row says whether the model loaded and ran (and on which EP) or was refused with
`too-large`, and how many requests went to models/ (a refusal must make none). The work folder
(about twice the model's size on disk at the peak) is removed unless --keep.

Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import math
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from bundler.bundle.manifest import load as load_manifest
from bundler.bundle.options import DEFAULT_RUNTIME_VERSION
from bundler.console import TerminalReporter
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.site.runtime import fetch_runtime
from bundler.verify.browser import launch, load_settings, playwright_session

LOW_MEMORY = "Object.defineProperty(Navigator.prototype, 'deviceMemory', { get: () => 0.5 });"

LOAD_AND_RUN = """async ({ url, side }) => {
  const { load, preflight } = await import(url);
  const before = await preflight();
  const started = performance.now();
  try {
    const model = await load();
    const loadedMs = performance.now() - started;
    const out = await model.run({ x: { type: 'float32', dims: [1, side],
                                       data: new Float32Array(side).fill(1) } });
    const ep = model.ep;
    await model.release();
    return { before, ep, loadedMs, outputs: Object.keys(out) };
  } catch (error) {
    return { before, error: String(error.message).slice(0, 300), code: error.code ?? null };
  }
}"""


PATTERN_BYTES = 16 * 2**20


def _write_pattern(data: Any, size: int, side: int, seed: int) -> None:
    """`size` bytes of seeded float32 values, N(0, 1/side) (so that y stays about as large as
    x), drawn and written 16 MiB at a time: a few seconds per GB, and incompressible as real
    weights are (a repeated block would let brotli spend minutes on what no model looks like)."""
    rng = np.random.default_rng(seed)
    scale = np.float32(1 / math.sqrt(side))
    while size > 0:
        count = min(PATTERN_BYTES, size) // 4
        data.write((rng.standard_normal(count, np.float32) * scale).tobytes())
        size -= 4 * count


def make_model(directory: Path, total_bytes: int, files: int,
               one_file: bool = False, pattern: bool = False) -> tuple[Path, int]:
    """y = x @ w1 @ ... @ wN (N = `files`), each [side, side] weight of zeros (`pattern`: of a
    seeded pattern) in its own sparse data file, or with `one_file` all in one (the layout most
    exporters write)."""
    side = int(math.sqrt(total_bytes / files / 4)) // 32 * 32  # whole int4 blocks of K
    size = side * side * 4
    directory.mkdir(parents=True, exist_ok=True)
    names = [f"w{index}" for index in range(1, files + 1)]
    weights = []
    for index, name in enumerate(names):
        stored = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[side, side])
        location = "large.onnx_data" if one_file else f"large.{name}.onnx_data"
        offset = index * size if one_file else 0
        stored.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", str(offset)),
                           ("length", str(size))):
            stored.external_data.add(key=key, value=value)
        with (directory / location).open("ab") as data:
            if pattern:
                _write_pattern(data, size, side, seed=index)
            else:
                data.truncate(offset + size)  # sparse: zeros that take no disk
        weights.append(stored)
    chain = ["x", *[f"h{index}" for index in range(1, files)], "y"]
    nodes = [helper.make_node("MatMul", [chain[i], name], [chain[i + 1]])
             for i, name in enumerate(names)]
    graph = helper.make_graph(
        nodes, "large", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, side])],
        weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = directory / "large.onnx"
    onnx.save_model(model, path)  # the graph alone: its tensors already point at the data
    return path, side


def build_timed(model: Path, output: Path, verify: bool,
                options: list[str]) -> tuple[float, float, str]:
    """`bundle build` (with `options`) in a subprocess: wall seconds, peak RSS in GiB (its
    largest process), and the last lines it printed."""
    script = Path(sys.executable).with_name("bundle")  # the venv's CLI
    command = [str(script) if script.exists() else "bundle", "build", str(model), "-o", str(output),
               "--runtime-dir", str(fetch_runtime(DEFAULT_RUNTIME_VERSION))]
    if not verify:
        command.append("--no-verify")
    command += options
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # Linux: KiB
    printed = (done.stdout + done.stderr).strip().splitlines()
    if done.returncode:
        raise SystemExit("bundle build failed:\n" + "\n".join(printed[-15:]))
    return wall, peak_kib / 2**20, "\n".join(printed[-4:])


def in_chromium(directory: Path, side: int) -> list[dict[str, Any]]:
    """load() as the browser is and on a 0.5 GB device: what happened and which requests went
    to models/."""
    settings = load_settings()
    rows = []
    with serve_directory(directory) as base, playwright_session() as playwright, \
            launch(playwright, settings, webgpu=True) as browser:
        for label, script in (("as is", None), ("deviceMemory 0.5 GB", LOW_MEMORY)):
            context = browser.new_context()
            page = context.new_page()
            page.set_default_timeout(20 * 60 * 1000)
            requested: list[str] = []
            page.on("request", lambda request, into=requested: into.append(request.url))
            if script:
                page.add_init_script(script)
            page.goto(base + HARNESS_PATH.lstrip("/"))
            started = time.perf_counter()
            result = page.evaluate(LOAD_AND_RUN, {"url": base + "bundle.mjs", "side": side})
            result["seconds"] = time.perf_counter() - started
            result["model_requests"] = sum("/models/" in url for url in requested)
            rows.append({"case": label, **result})
            context.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=2.25, help="weights in GB (1e9 bytes)")
    parser.add_argument("--files", type=int, default=3, help="external data files (one weight"
                        " each; keep each under ~1 GB: the page holds a file in one buffer)")
    parser.add_argument("--one-file", action="store_true", help="all weights in one data file"
                        " (the build cuts it into files of at most 1 GiB)")
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--quantize", help="the variant to build (e.g. int4; default fp32)")
    parser.add_argument("--int4", action="append", default=[], metavar="KEY=VALUE",
                        help="passed on to bundle build (e.g. format=qdq)")
    parser.add_argument("--verify", action="store_true", help="let the build check the bundle"
                        " in Chromium too (default: --no-verify; this script loads it itself)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    reporter = TerminalReporter()
    work = args.work or Path(tempfile.mkdtemp(prefix="large-model-"))
    try:
        model, side = make_model(work / "model", int(args.size_gb * 1e9), args.files,
                                 args.one_file, pattern=args.quantize is not None)
        weights = sum(path.stat().st_size for path in model.parent.iterdir())
        given = 1 if args.one_file else args.files
        with reporter.step(f"bundle build of {weights / 1e9:.2f} GB in {given} data file(s)"):
            options = [*(["--quantize", args.quantize] if args.quantize else []),
                       *(f"--int4={value}" for value in args.int4)]
            wall, peak, printed = build_timed(model, work / "dist", args.verify, options)
        manifest = load_manifest(work / "dist")
        [variant] = manifest.session().variants
        wire = sum(path.stat().st_size for path in (work / "dist" / "models").rglob("*.br"))
        print(printed)
        with reporter.step("Loading it in Chromium"):
            rows = in_chromium(work / "dist", side)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    reporter.table(
        f"Build: {weights / 1e9:.2f} GB of weights ({side}x{side} float32 x {args.files},"
        f" given in {given} data file(s))",
        ("wall s", "peak RSS GiB", "variant", "data files", "bytes", "brotli bytes on disk",
         "memory: peak estimate GB"),
        [[f"{wall:.1f}", f"{peak:.2f}", variant.name, str(len(variant.data or [])),
          str(variant.bytes), str(wire),
          f"{variant.memory.peak / 1e9:.2f}" if variant.memory else "-"]])
    reporter.table(
        "Chromium (headless; WebGPU on SwiftShader, else WASM)",
        ("case", "preflight fits", "outcome", "ep", "seconds", "requests under models/"),
        [[row["case"], str(row["before"]["fits"]),
          row.get("code") or ("ran" if "ep" in row else "failed: " + row.get("error", "")),
          row.get("ep") or "-", f"{row['seconds']:.1f}", str(row["model_requests"])]
         for row in rows])


if __name__ == "__main__":
    main()
