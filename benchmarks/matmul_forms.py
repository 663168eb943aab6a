"""Which form of a quantized projection does onnxruntime-web's WASM EP (1 thread) run fastest?

    python benchmarks/matmul_forms.py [--layers 4] [--rounds 30] [--keep DIR]

Builds, in code, `--layers` MLP blocks of GPT-2-small's widest projections (768 x 3072, then
3072 x 768, seeded random weights; 19 M weights, 75 MB as float, which a large last-level
cache may hold in good part: a whole decoder's are larger), once per form:

- fp32: float MatMul;
- q8 dynamic: DynamicQuantizeLinear + MatMulInteger (quantize_dynamic, per-tensor QInt8 as
  transformers.js's q8; onnxruntime fuses them into DynamicQuantizeMatMul), and per-channel;
- nbits: MatMulNBits (onnxruntime's MatMulNBitsQuantizer), bits 8 and 4, accuracy_level 0 and 4,
  blocks of 32 and 128;
- static QDQ (quantize_static, activations uint8 per-tensor, weights int8 per-channel: onnxruntime
  fuses into QLinearMatMul), and weight-only int8 DequantizeLinear into MatMul, as it is and
  folded into float weights at load (session config `session.disable_quant_qdq`);
- op-count: a chain of 400 Adds on [1, 1, 768], against one Add: each op's fixed cost.

In one headless Chromium (ort.wasm.min.mjs, 1 thread) every form gets its own session, runs at
M = 1 (a decode step) and M = 16 (a prefill), warmed up, then interleaved run by run. Prints each
form's median ms per projection and its ratio to fp32 and to q8 dynamic (transformers.js's).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

from bundler.bundle.options import DEFAULT_RUNTIME_VERSION
from bundler.console import TerminalReporter
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.site.runtime import fetch_runtime
from bundler.variants.tools import quiet
from bundler.verify.browser import launch, load_settings, playwright_session
from bundler.verify.harness import harness_call

PAGES_MODULE = Path(__file__).with_name("pages.mjs")
RUNTIME_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
HIDDEN, INNER = 768, 3072
ROWS = (1, 16)  # M: a decode step, a prefill
CHAIN = 400  # Adds in the op-count graph


def mlp(path: Path, layers: int) -> Path:
    """`layers` x (x @ W1 [768, 3072] @ W2 [3072, 768]) on x [1, M, 768]."""
    rng = np.random.default_rng(0)
    nodes, weights, current = [], [], "x"
    for layer in range(layers):
        for index, (rows, cols) in enumerate(((HIDDEN, INNER), (INNER, HIDDEN))):
            name = f"l{layer}.w{index}"
            weights.append(numpy_helper.from_array(
                (rng.standard_normal((rows, cols)) / np.sqrt(rows)).astype(np.float32), name))
            nodes.append(helper.make_node("MatMul", [current, name], [f"{name}.out"], name=name))
            current = f"{name}.out"
    nodes.append(helper.make_node("Identity", [current], ["y"]))
    _save(path, nodes, weights, [1, "M", HIDDEN])
    return path


def adds(path: Path, count: int) -> Path:
    """`count` Adds of a constant on x [1, 1, 768]: a graph of tiny ops."""
    bias = numpy_helper.from_array(np.full(HIDDEN, 1e-3, np.float32), "bias")
    nodes, current = [], "x"
    for index in range(count):
        nodes.append(helper.make_node("Add", [current, "bias"], [f"a{index}"]))
        current = f"a{index}"
    nodes.append(helper.make_node("Identity", [current], ["y"]))
    _save(path, nodes, [bias], [1, "M", HIDDEN])
    return path


def _save(path: Path, nodes: list, weights: list, shape: list) -> None:
    graph = helper.make_graph(nodes, "forms", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, path)


class _Feeds(CalibrationDataReader):
    def __init__(self) -> None:
        rng = np.random.default_rng(1)
        self._feeds = iter([{"x": rng.standard_normal((1, 8, HIDDEN)).astype(np.float32)}
                            for _ in range(8)])

    def get_next(self) -> dict | None:
        return next(self._feeds, None)


FOLDED = "int8 weights, folded to float at load"
FOLD = {"session": {"disable_quant_qdq": "1"}}  # as onnxruntime-web's `extra` takes it


def forms(work: Path, layers: int) -> dict[str, tuple[str, int]]:
    """form name -> (model file under work, projections it runs)."""
    fp32 = mlp(work / "fp32.onnx", layers)
    made = {"fp32": fp32}
    for name, per_channel in (("q8 dynamic (transformers.js)", False),
                              ("q8 dynamic, per-channel", True)):
        made[name] = work / f"dynamic{int(per_channel)}.onnx"
        quantize_dynamic(fp32, made[name], weight_type=QuantType.QInt8, per_channel=per_channel)
    for bits in (8, 4):
        for level in (0, 4):
            for block in (32, 128):
                name = f"nbits{bits} acc{level} b{block}"
                quantizer = MatMulNBitsQuantizer(onnx.load(fp32), bits=bits, block_size=block,
                                                 is_symmetric=True, accuracy_level=level)
                quantizer.process()
                made[name] = work / f"{name.replace(' ', '_')}.onnx"
                onnx.save(quantizer.model.model, made[name])
    made["static QDQ (QLinearMatMul)"] = work / "static.onnx"
    quantize_static(fp32, made["static QDQ (QLinearMatMul)"], _Feeds(),
                    quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    made["int8 weights, DequantizeLinear + MatMul"] = work / "weights.onnx"
    _weight_only(fp32, made["int8 weights, DequantizeLinear + MatMul"])
    made[FOLDED] = made["int8 weights, DequantizeLinear + MatMul"]
    projections = {name: (path.name, 2 * layers) for name, path in made.items()}
    projections["1 Add"] = (adds(work / "add1.onnx", 1).name, 1)
    projections[f"{CHAIN} Adds"] = (adds(work / "adds.onnx", CHAIN).name, CHAIN)
    return projections


def _weight_only(src: Path, dst: Path) -> None:
    """Each MatMul's weight as int8 (per output channel, symmetric) through DequantizeLinear."""
    model = onnx.load(src)
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        if node.op_type == "MatMul":
            weight = numpy_helper.to_array(weights.pop(node.input[1]))
            scale = (np.abs(weight).max(axis=0) / 127).astype(np.float32)
            quantized = np.clip(np.round(weight / scale), -127, 127).astype(np.int8)
            name = node.input[1]
            model.graph.initializer.remove(next(t for t in model.graph.initializer
                                                if t.name == name))
            model.graph.initializer.extend([numpy_helper.from_array(quantized, f"{name}.q"),
                                            numpy_helper.from_array(scale, f"{name}.s")])
            nodes.append(helper.make_node("DequantizeLinear", [f"{name}.q", f"{name}.s"],
                                          [name], axis=1))
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    onnx.save(model, dst)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=30, help="timed runs of each form per M")
    parser.add_argument("--keep", type=Path, default=None, help="keep the models here")
    args = parser.parse_args()
    reporter = TerminalReporter()
    work = Path(args.keep or tempfile.mkdtemp(prefix="matmul-forms-"))
    work.mkdir(parents=True, exist_ok=True)
    with reporter.step("Making the forms"), quiet():
        models = forms(work, args.layers)
    dist = fetch_runtime(DEFAULT_RUNTIME_VERSION)
    for name in RUNTIME_FILES:
        shutil.copyfile(dist / name, work / name)
    shutil.copyfile(PAGES_MODULE, work / PAGES_MODULE.name)
    settings = load_settings()
    with reporter.step("Timing them in Chromium (WASM, 1 thread)"), serve_directory(work) as base, \
            playwright_session() as driver, launch(driver, settings, webgpu=False) as browser:
        page = browser.new_page()
        page.set_default_timeout(settings.timeouts_ms["run"] * 20)
        page.goto(base + HARNESS_PATH.lstrip("/"))
        timed = page.evaluate(harness_call(f"/{PAGES_MODULE.name}", "timeForms"), {
            "base": base, "module": RUNTIME_FILES[0], "hidden": HIDDEN, "rows": list(ROWS),
            "models": {name: {"file": file, "config": FOLD if name == FOLDED else {}}
                       for name, (file, _) in models.items()},
            "warmup": 3, "rounds": args.rounds})
    per_op = {rows: {name: statistics.median(timed[str(rows)][name]) / count
                     for name, (_, count) in models.items()} for rows in ROWS}
    matmuls = [name for name in models if "Add" not in name]
    reference = "q8 dynamic (transformers.js)"
    reporter.table(
        f"One projection (median of {args.rounds} interleaved runs / {2 * args.layers}"
        " projections), onnxruntime-web WASM, 1 thread",
        ["form", *(f"M={rows} ms" for rows in ROWS), *(f"M={rows} / fp32" for rows in ROWS),
         *(f"M={rows} / q8" for rows in ROWS)],
        [[name, *(f"{per_op[rows][name]:.3f}" for rows in ROWS),
          *(f"{per_op[rows][name] / per_op[rows]['fp32']:.2f}x" for rows in ROWS),
          *(f"{per_op[rows][name] / per_op[rows][reference]:.2f}x" for rows in ROWS)]
         for name in matmuls])
    add = {rows: (per_op[rows][f"{CHAIN} Adds"] * CHAIN - per_op[rows]["1 Add"]) / (CHAIN - 1)
           for rows in ROWS}
    reporter.table("Fixed cost of one small op (a [1, M, 768] Add) on the same session",
                   ["M", "ms per op", "ops per q8 projection's time"],
                   [[str(rows), f"{add[rows]:.4f}", f"{per_op[rows][reference] / add[rows]:.0f}"]
                    for rows in ROWS])


if __name__ == "__main__":
    main()
