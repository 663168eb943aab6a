"""Models for the runtime-fit and input-value tests, built in code (see tests/models.py).

    current_onnx        x f32[batch,4] -> y f32[batch,3]; saved as the current onnx package saves
                        (IR 14, ai.onnx opset 28), which onnxruntime-web 1.31.1 does not load
    old_opset           a f32[2,3], b f32[3] -> y f32[2,3]: Add(broadcast=1) of opset 6, which
                        onnxruntime no longer implements
    shape_inputs        x f32[2,3], shape i64[2], new_shape i64[2], repeats i64[2], dims i64[2]
                        -> expanded, reshaped, tiled, filled (Expand, Reshape, Tile,
                        ConstantOfShape)
    index_inputs        ids i64[batch,seq] (vocabulary 5), x f32[1,6], k i64[1], depth i64[],
                        hot i64[3], starts i64[1], mask bool[1,6]
                        -> embedded, top_values, top_indices, one_hot, sliced, masked
    integer_outputs     x i64[batch,4] -> shifted i64[batch,4], largest i64[batch]
    current_shapes_and_indices  shape_inputs and index_inputs in one graph, IR 14, opset 28
    needs_input         x i64[2,3], n i64[1] -> y i64[length]: runs only with n = 16
    element_indices     GatherElements, ScatterND, Range and ReduceSum axes fed by inputs
    old_prelu           x f32[2,3,4] -> y: PRelu of opset 6 with a per-channel slope [3]
    wide_vectors        audio f32[1,128], sr i64[] -> y f32[1,128]: sr indexes a 300-wide
                        table, a 128-wide bias, and an If on sr == 16000 (a streaming VAD's shape)
                        saved inline or (external=True) with every tensor in external data
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from tests.models import BOOL, F32, I64, _const, _graph, _io, _save, _weights


def current_onnx(directory: Path) -> Path:
    """y = softmax(relu(x @ w + b)), stamped with the current onnx package's defaults."""
    graph = _graph(
        "current_onnx",
        [helper.make_node("MatMul", ["x", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["h"]),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Softmax", ["r"], ["y"], axis=1)],
        [_io("x", F32, ["batch", 4])], [_io("y", F32, ["batch", 3])],
        _weights(11, w=(4, 3), b=(3,)),
    )
    return _stamp_current(graph, directory)


def _stamp_current(graph: onnx.GraphProto, directory: Path) -> Path:
    """Save `graph` as onnx 1.23 saves by default: IR version 14, ai.onnx opset 28."""
    model = helper.make_model(graph, producer_name="onnx-bundler tests")
    assert model.ir_version == 14 and model.opset_import[0].version == 28
    onnx.checker.check_model(model, full_check=True)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{graph.name}.onnx"
    onnx.save_model(model, path)
    return path


def old_opset(directory: Path) -> Path:
    """y = relu(a + b) with opset 6's explicit broadcast attribute."""
    graph = _graph(
        "old_opset",
        [helper.make_node("Add", ["a", "b"], ["sum"], broadcast=1),
         helper.make_node("Relu", ["sum"], ["y"])],
        [_io("a", F32, [2, 3]), _io("b", F32, [3])], [_io("y", F32, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)], ir_version=3)
    onnx.checker.check_model(model)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "old_opset.onnx"
    onnx.save_model(model, path)
    return path


def shape_inputs(directory: Path) -> Path:
    """Each integer input is a shape: random values make every one of these ops fail."""
    nodes = [
        helper.make_node("Expand", ["x", "shape"], ["expanded"]),
        helper.make_node("Reshape", ["x", "new_shape"], ["reshaped"]),
        helper.make_node("Tile", ["x", "repeats"], ["tiled"]),
        helper.make_node("ConstantOfShape", ["dims"], ["filled"],
                         value=_const("v", [1.5])),
    ]
    graph = _graph(
        "shape_inputs", nodes,
        [_io("x", F32, [2, 3]), _io("shape", I64, [2]), _io("new_shape", I64, [2]),
         _io("repeats", I64, [2]), _io("dims", I64, [2])],
        [_io("expanded", F32, ["e0", "e1"]), _io("reshaped", F32, ["r0", "r1"]),
         _io("tiled", F32, ["t0", "t1"]), _io("filled", F32, ["f0", "f1"])],
    )
    return _save(graph, directory)


def index_inputs(directory: Path) -> Path:
    """Token ids into a 5-row embedding, TopK's k, OneHot's depth and indices, Slice's starts and
    a boolean mask: values in [0, 8) are out of range for most of them."""
    nodes = [
        helper.make_node("Gather", ["embedding", "ids"], ["embedded"], axis=0),
        helper.make_node("TopK", ["x", "k"], ["top_values", "top_indices"], axis=1),
        helper.make_node("OneHot", ["hot", "depth", "on_off"], ["one_hot"], axis=-1),
        helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["sliced"]),
        helper.make_node("Where", ["mask", "x", "zero"], ["masked"]),
    ]
    graph = _graph(
        "index_inputs", nodes,
        [_io("ids", I64, ["batch", "seq"]), _io("x", F32, [1, 6]), _io("k", I64, [1]),
         _io("depth", I64, []), _io("hot", I64, [3]), _io("starts", I64, [1]),
         _io("mask", BOOL, [1, 6])],
        [_io("embedded", F32, ["batch", "seq", 4]), _io("top_values", F32, [1, "k"]),
         _io("top_indices", I64, [1, "k"]), _io("one_hot", F32, [3, "depth"]),
         _io("sliced", F32, [1, "width"]), _io("masked", F32, [1, 6])],
        [*_weights(12, embedding=(5, 4)), _const("on_off", [0, 1]),
         _const("ends", [6], np.int64), _const("axes", [1], np.int64), _const("zero", 0.0)],
    )
    return _save(graph, directory)


def integer_outputs(directory: Path) -> Path:
    """Only integer outputs: shifted = x + 3, largest = ReduceMax(x) over axis 1."""
    graph = _graph(
        "integer_outputs",
        [helper.make_node("Add", ["x", "three"], ["shifted"]),
         helper.make_node("ReduceMax", ["x"], ["largest"], axes=[1], keepdims=0)],
        [_io("x", I64, ["batch", 4])],
        [_io("shifted", I64, ["batch", 4]), _io("largest", I64, ["batch"])],
        [_const("three", 3, np.int64)],
    )
    return _save(graph, directory)


def current_shapes_and_indices(directory: Path) -> Path:
    """shape_inputs and index_inputs in one graph, stamped as the current onnx package stamps
    (IR 14, opset 28, where OneHot is new, so lowering it needs the version converter)."""
    graphs = [onnx.load(str(build(directory / "parts"))).graph
              for build in (shape_inputs, index_inputs)]
    graph = helper.make_graph(
        [node for g in graphs for node in g.node], "current_shapes_and_indices",
        [value for g in graphs for value in g.input if value.name != "x" or g is graphs[1]],
        [value for g in graphs for value in g.output],
        [tensor for g in graphs for tensor in g.initializer],
    )
    return _stamp_current(graph, directory)


def needs_input(directory: Path) -> Path:
    """y = Reshape(x, [n - 10]): only n = 16 runs, and nothing in the graph says so (Sub is no
    shape operator), so the checks need --input n=16. Integer output only."""
    graph = _graph(
        "needs_input",
        [helper.make_node("Sub", ["n", "ten"], ["length"]),
         helper.make_node("Reshape", ["x", "length"], ["y"])],
        [_io("x", I64, [2, 3]), _io("n", I64, [1])], [_io("y", I64, ["length"])],
        [_const("ten", [10], np.int64)],
    )
    return _save(graph, directory)


def element_indices(directory: Path) -> Path:
    """GatherElements and ScatterND indices into 3-wide axes, Range's start, limit and delta,
    and ReduceSum's axes as inputs."""
    nodes = [
        helper.make_node("GatherElements", ["table", "picks"], ["picked"], axis=1),
        helper.make_node("ScatterND", ["table", "rows", "updates"], ["scattered"]),
        helper.make_node("Range", ["start", "limit", "delta"], ["counted"]),
        helper.make_node("ReduceSum", ["table", "axes"], ["summed"], keepdims=0),
    ]
    graph = _graph(
        "element_indices", nodes,
        [_io("picks", I64, [3, 5]), _io("rows", I64, [2, 1]), _io("start", I64, []),
         _io("limit", I64, []), _io("delta", I64, []), _io("axes", I64, [1])],
        [_io("picked", F32, [3, 5]), _io("scattered", F32, [3, 3]), _io("counted", I64, ["n"]),
         _io("summed", F32, ["s"])],
        [*_weights(13, table=(3, 3), updates=(2, 3))],
    )
    return _save(graph, directory)


def old_prelu(directory: Path) -> Path:
    """y = PRelu(x, slope) in opset 6, where a 1-D slope applies per channel (axis 1)."""
    graph = _graph("old_prelu", [helper.make_node("PRelu", ["x", "slope"], ["y"])],
                   [_io("x", F32, [2, 3, 4]), _io("slope", F32, [3])],  # IR 3: weights too
                   [_io("y", F32, [2, 3, 4])], [_const("slope", [0.1, 0.2, 0.3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)], ir_version=3)
    onnx.checker.check_model(model)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "old_prelu.onnx"
    onnx.save_model(model, path)
    return path


def fractional_power(directory: Path) -> Path:
    """y = Pow(x, 0.5): NaN for a negative x, which the seeded [0, 1) inputs never reach."""
    graph = _graph(
        "fractional_power",
        [helper.make_node("Identity", ["x"], ["base"]),
         helper.make_node("Pow", ["base", "half"], ["y"])],
        [_io("x", F32, [1, 64])], [_io("y", F32, [1, 64])], [_const("half", 0.5)],
    )
    return _save(graph, directory)


def wide_vectors(directory: Path, external: bool = False) -> Path:
    """An integer input beside 1-D weights over 64 values: shape inference runs on a copy of
    the model without those weights' data, and once crashed on every model like this."""
    then_branch = _graph("high_rate", [helper.make_node("Mul", ["biased", "gain"], ["out"])],
                         [], [_io("out", F32, [1, 128])])
    else_branch = _graph("low_rate", [helper.make_node("Add", ["biased", "gain"], ["out"])],
                         [], [_io("out", F32, [1, 128])])
    nodes = [
        helper.make_node("Gather", ["table", "sr"], ["gain"], axis=0),
        helper.make_node("Add", ["audio", "bias"], ["biased"]),
        helper.make_node("Equal", ["sr", "rate"], ["is_high"]),
        helper.make_node("If", ["is_high"], ["y"], then_branch=then_branch,
                         else_branch=else_branch),
    ]
    graph = _graph(
        "wide_vectors_external" if external else "wide_vectors", nodes,
        [_io("audio", F32, [1, 128]), _io("sr", I64, [])], [_io("y", F32, [1, 128])],
        [*_weights(14, table=(300,), bias=(128,)), _const("rate", 16000, np.int64)],
    )
    if not external:
        return _save(graph, directory)
    return _save(graph, directory, save_as_external_data=True, all_tensors_to_one_file=True,
                 location="wide_vectors.weights", size_threshold=0)
