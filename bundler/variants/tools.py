"""Helpers the kind modules share: quiet quantizers, stable node names, the 2 GB limit."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator
from pathlib import Path

import onnx

from bundler.bundle.modelio import PROTOBUF_LIMIT, model_bytes, walk_nodes

# A variant's session config (its `session_config`, per EP) that has onnxruntime fold each
# DequantizeLinear of a constant into a float weight at load, instead of running it on every call
# or fusing it with its MatMul (MatMulNBits): the weight-only variants' form on WASM, where
# float MatMuls beat every quantized kernel at a decode step (docs/benchmarks.md).
FOLD_DEQUANTIZE = {"session.disable_quant_qdq": "1"}
# The first opset whose DequantizeLinear takes an axis (a scale per output channel or row).
DEQUANTIZE_AXIS_OPSET = 13


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The quantizers print progress and log advice to the root logger; keep the CLI clean."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        root.setLevel(level)


def name_nodes(model: onnx.ModelProto) -> None:
    """Give unnamed nodes stable names, in subgraphs too: the quantizers exclude nodes by name."""
    nodes = list(walk_nodes(model.graph))
    taken = {node.name for node in nodes}
    for index, node in enumerate(nodes):
        if not node.name:
            node.name = fresh_name(f"{node.op_type}_{index}", taken)


def graphs_of(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """`graph` and every subgraph in it (If branches, Loop and Scan bodies), outermost first."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            # only a graph attribute's: writing to another's empty `g` would make it present
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from graphs_of(attribute.g)
            for subgraph in attribute.graphs:
                yield from graphs_of(subgraph)


def lift_branch_weights(model: onnx.ModelProto) -> int:
    """Move the MatMul weights a subgraph holds as its own initializers into the main graph (the
    branch reads them from there, as it reads the weights both branches share); how many moved.
    A merged Whisper decoder keeps its cross-attention key and value projections in the branch
    without past, the only one that computes them; the weight-only quantizers and their checks
    read the main graph's weights, so these stayed float32 (4.7 MB of a Whisper-tiny-sized int4
    decoder's 13.5 MB)."""
    main = model.graph
    taken = {tensor.name for tensor in main.initializer} | {value.name for value in main.input}
    taken |= {name for graph in graphs_of(main) for node in graph.node for name in node.output}
    lifted = 0
    for graph in list(graphs_of(main))[1:]:
        weights = {node.input[1] for node in graph.node
                   if node.op_type == "MatMul" and len(node.input) > 1}
        kept = []
        for tensor in graph.initializer:
            if tensor.name in weights and tensor.name not in taken:
                main.initializer.append(tensor)
                taken.add(tensor.name)
                lifted += 1
            else:
                kept.append(tensor)
        if len(kept) != len(graph.initializer):
            del graph.initializer[:]
            graph.initializer.extend(kept)
    return lifted


def drop_repeated_initializers(model: onnx.ModelProto) -> int:
    """Keep the first of initializers of the same name in each graph; how many were dropped.
    The weight-only quantizer writes one per node it quantizes, so a weight two If branches
    share (a merged decoder's) would otherwise ship twice, under one name."""
    dropped = 0
    for graph in graphs_of(model.graph):
        seen: set[str] = set()
        kept = []
        for tensor in graph.initializer:
            if tensor.name not in seen:
                seen.add(tensor.name)
                kept.append(tensor)
        dropped += len(graph.initializer) - len(kept)
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return dropped


def attribute(node: onnx.NodeProto, name: str, default: float) -> float:
    """A node's attribute, or `default` where the node does not set it."""
    found = next((a for a in node.attribute if a.name == name), None)
    return default if found is None else onnx.helper.get_attribute_value(found)


def at_least_opset(model: onnx.ModelProto, version: int) -> onnx.ModelProto:
    """`model`, or a copy converted to ai.onnx opset `version` where it imports an older one."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return model if opset >= version else onnx.version_converter.convert_version(model, version)


def fresh_name(name: str, taken: set[str]) -> str:
    """`name`, or `name_1`, `name_2`, … if taken; the result is added to `taken`."""
    candidate, suffix = name, 1
    while candidate in taken:
        candidate, suffix = f"{name}_{suffix}", suffix + 1
    taken.add(candidate)
    return candidate


def is_large(path: Path) -> bool:
    """Over protobuf's 2 GB: the model must be written with external data."""
    return model_bytes(path) >= PROTOBUF_LIMIT
