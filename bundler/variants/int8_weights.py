"""int8-weights: weight-only int8, symmetric per output channel, with a DequantizeLinear in front
of each weight; compute stays float32 (a quarter of the download). On WASM the DequantizeLinear
nodes are folded into float weights at load (FOLD_DEQUANTIZE): run as they are, they dequantize
every weight on every call (8-20x slower than fp32 per projection at a decode step,
benchmarks/matmul_forms.py); folded, the variant runs at fp32's speed with fp32's memory.

Weights used inside subgraphs count too: a merged decoder's layers are in the branches of an If
on `use_cache_branch`, their weights initializers of the outer graph (or of a branch). Each
graph's weights get their DequantizeLinear in that graph, which the branches read by outer
scope."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bundler.bundle.external import StreamedWeights
from bundler.bundle.modelio import read_model, read_values, save_model
from bundler.bundle.records import Int8WeightsSettings
from bundler.errors import QuantizeError
from bundler.variants.spec import Job, KindSpec
from bundler.variants.tools import (
    DEQUANTIZE_AXIS_OPSET,
    FOLD_DEQUANTIZE,
    at_least_opset,
    fresh_name,
)

# Below this many elements a weight is not worth a DequantizeLinear (first convs, tiny heads).
_MIN_ELEMENTS = 1024
_OP_TYPES = ("Conv", "Gemm", "MatMul")
# Native onnxruntime (1.32, CPU EP) fuses a per-channel int8 DequantizeLinear + MatMul into an
# 8-bit MatMulNBits at accuracy_level 4 (this entry's default), which quantizes the activations to
# int8 as well; onnxruntime-web 1.31.1 computes in float32, on WASM as on WebGPU. On an optimum
# Qwen2 (8 layers x 512) the two parted by 1.4 of the output range on present.*, so the browser
# check failed a sound variant. Level 1 (float32 compute) keeps the int8 weights and computes what
# the browser does.
SESSION_CONFIG = {"session.qdq_matmulnbits_accuracy_level": "1"}


def _weight_axis(node: onnx.NodeProto, rank: int) -> int | None:
    """The output-channel axis of the node's weight (input 1), or None if not handled."""
    if node.op_type == "Conv":
        return 0 if rank >= 3 else None
    if rank != 2:
        return None
    if node.op_type == "Gemm":
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    return 1  # MatMul: [K, N]


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attribute in node.attribute:
        if attribute.type == onnx.AttributeProto.GRAPH:
            yield attribute.g
        yield from attribute.graphs


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """`graph` and every graph nested in its nodes (If branches, Loop and Scan bodies)."""
    yield graph
    for node in graph.node:
        for subgraph in _subgraphs(node):
            yield from _graphs(subgraph)


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """The nodes of `graph` and of the graphs nested in it, which may read its values."""
    for inner in _graphs(graph):
        yield from inner.node


def _weights_to_store(graph: onnx.GraphProto) -> tuple[dict[str, int], set[str]]:
    """The weights of `graph`'s own initializers worth storing as int8, with their output-channel
    axis, and those left float (a weight of a nested graph counts where it is declared)."""
    weights = {tensor.name: tensor for tensor in graph.initializer}
    overridable = {value.name for value in graph.input}
    axes: dict[str, int] = {}
    left_float = set()
    for node in _nodes(graph):
        if node.op_type not in _OP_TYPES or len(node.input) < 2:
            continue
        name = node.input[1]
        tensor = weights.get(name)
        axis = None if tensor is None else _weight_axis(node, len(tensor.dims))
        if tensor is None:
            continue  # not this graph's: a nested graph's own, or computed
        if (
            axis is None
            or name in overridable
            or tensor.data_type != TensorProto.FLOAT
            or int(np.prod(tensor.dims)) < _MIN_ELEMENTS
        ):
            left_float.add(name)
        else:
            axes.setdefault(name, axis)
    return axes, left_float - set(axes)


def store_as_int8(graph: onnx.GraphProto, axes: dict[str, int],
                   values: Callable[[onnx.TensorProto], np.ndarray]) -> None:
    """Replace each weight in `axes` by int8 values, scales and zero points, and a
    DequantizeLinear (first in the graph) that gives the float weight its old name; `values`
    reads a weight's."""
    taken = {tensor.name for inner in _graphs(graph) for tensor in inner.initializer}
    taken |= {out for node in _nodes(graph) for out in node.output}
    taken |= {value.name for inner in _graphs(graph) for value in inner.input}
    initializers, dequantize = [], []
    for tensor in graph.initializer:
        if tensor.name not in axes:
            initializers.append(tensor)
            continue
        w, axis = values(tensor), axes[tensor.name]
        others = tuple(i for i in range(w.ndim) if i != axis)
        scale = (np.abs(w).max(axis=others) / 127).astype(np.float32)
        scale[scale == 0] = 1  # an all-zero channel quantizes to zeros whatever the scale
        broadcast = [1] * w.ndim
        broadcast[axis] = -1
        q = np.clip(np.rint(w / scale.reshape(broadcast)), -127, 127).astype(np.int8)
        names = [fresh_name(f"{tensor.name}_{part}", taken)
                 for part in ("quantized", "scale", "zero_point")]
        initializers += [
            numpy_helper.from_array(q, names[0]),
            numpy_helper.from_array(scale, names[1]),
            numpy_helper.from_array(np.zeros(scale.shape, np.int8), names[2]),
        ]
        dequantize.append(
            helper.make_node(
                "DequantizeLinear",
                names,
                [tensor.name],
                fresh_name(f"{tensor.name}_DequantizeLinear", taken),
                axis=axis,
            )
        )
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    nodes = dequantize + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)


def make(job: Job) -> None:
    # a large model (Job.weightless) is read a weight at a time, its int8 weights (a quarter of
    # its float32 bytes) held until they are written with the float ones left as they were
    model = read_model(job.src) if job.weightless is None else job.weightless
    model = at_least_opset(model, DEQUANTIZE_AXIS_OPSET)
    axes: dict[str, int] = {}
    left_float: set[str] = set()
    # inner graphs first: rewriting a graph's node list copies its nodes, nested graphs and all
    for graph in reversed(list(_graphs(model.graph))):
        stored, kept = _weights_to_store(graph)
        if stored:
            store_as_int8(graph, stored, functools.partial(read_values, base_dir=job.src.parent))
        axes.update(stored)
        left_float |= kept
    if not axes:
        raise QuantizeError(
            f"{job.src.name} has no Conv, Gemm or MatMul weight of {_MIN_ELEMENTS}+"
            " elements to store as int8, so int8-weights would equal fp32; use fp16 instead"
        )
    if job.weightless is None:
        save_model(model, job.dst)
    else:
        with StreamedWeights(model, job.dst, job.src.parent) as streamed:
            streamed.offload(model)
            streamed.finish(model)
    job.result.settings = Int8WeightsSettings(
        scheme="int8 symmetric per output channel (scale = max|w| / 127), DequantizeLinear",
        compute="float32",
        op_types=list(_OP_TYPES),
        min_elements=_MIN_ELEMENTS,
        weights_int8=len(axes),
        weights_float32=len(left_float),
    )
    # WASM folds them into float weights at load (natively too: nothing left to fuse); WebGPU runs
    # them as they are (folded, fp32's weights would fill the GPU's memory), and the native runs
    # that check it compute in float32 as it does (SESSION_CONFIG).
    job.result.session_config = {"wasm": dict(FOLD_DEQUANTIZE), "webgpu": dict(SESSION_CONFIG)}
    job.note(
        f"stored {len(axes)} weights as int8; {len(left_float)} small or"
        " non-constant weights stay float32"
    )


KIND = KindSpec(
    name="int8-weights",
    keeps_float=f"compute, weights under {_MIN_ELEMENTS} elements",
    needs_calibration=False,
    quantized=True,
    advice="try fp16",
    make=make,
    streamed=True,
)
