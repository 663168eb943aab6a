"""int8 of a tied LM head: the token embedding reads its rows from the head's int8 weight, so the
table ships once.

A tied head is kept shared through the float graph (bundler.model.tied) and given its own copy
for the quantizer (unshare_for_matmuls). quantize_dynamic then makes two int8 tables of the same
float one: the head's [H, V] weight for MatMulInteger (per-channel: a scale per vocabulary row)
and the embedding's [V, H] table for its Gather (one scale for the table). At a real vocabulary
that second table is V x H bytes on the wire (Whisper's 51,865 x 384: 19.9 MB of a 50 MB q8
decoder; GPT-2's 50,257 x 768: 38.6 MB). Here the Gather reads rows of a Transpose of the head's
weight instead, which onnxruntime folds when the session is created (in memory, not on the
wire), and each row is scaled by its own scale, the head's: the embedding's rows are quantized
at least as finely as before, and the head is left exactly as the quantizer made it (its
MatMulInteger still reads a constant, which onnxruntime's int8 fusions need)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from bundler.bundle.modelio import read_values, walk_nodes


def share_quantized_rows(model: onnx.ModelProto, copies: Mapping[str, str],
                         base_dir: Path) -> list[tuple[str, str, int]]:
    """For each tied pair (copy -> original, unshare_for_matmuls's) that quantize_dynamic made
    both int8 tables of (`NAME_quantized`, `NAME_scale`, `NAME_zero_point`), have the original's
    Gather + DequantizeLinear read the copy's rows instead and drop the original's table, in
    place; (table dropped, head kept, bytes saved) per pair. A model read without its weights
    (a large one's) has its zero points read from `base_dir`; the caller repacks its data file.
    """
    graph = model.graph
    weights = {tensor.name: tensor for tensor in graph.initializer}
    shared: list[tuple[str, str, int]] = []
    for copy, original in sorted(copies.items()):
        head, table = _quantized(weights, copy), _quantized(weights, original)
        if head is None or table is None or not _is_transpose_of(head, table[0], base_dir):
            continue
        readers = _gathers(graph, table)
        if not readers:
            continue
        rows = f"{head[0].name}_rows"
        for subgraph, gather, dequantize in readers:
            _read_rows(subgraph, gather, dequantize, rows, head)
        graph.node.insert(0, helper.make_node("Transpose", [head[0].name], [rows],
                                              name=f"{rows}_transpose", perm=[1, 0]))
        read = {name for node in walk_nodes(graph) for name in node.input}
        dropped = [tensor for tensor in table if tensor.name not in read]
        for tensor in dropped:
            graph.initializer.remove(tensor)
        shared.append((table[0].name, head[0].name,
                       int(np.prod(table[0].dims)) if table[0] in dropped else 0))
    return shared


def _quantized(weights: Mapping[str, onnx.TensorProto],
               name: str) -> tuple[onnx.TensorProto, onnx.TensorProto, onnx.TensorProto] | None:
    """quantize_dynamic's int8 weight, scale and zero point of the float weight `name`."""
    found = [weights.get(f"{name}{suffix}") for suffix in ("_quantized", "_scale", "_zero_point")]
    if any(tensor is None for tensor in found):
        return None
    weight, scale, zero = found
    return weight, scale, zero  # type: ignore[return-value]


def _is_transpose_of(head: tuple[onnx.TensorProto, ...], table: onnx.TensorProto,
                     base_dir: Path) -> bool:
    """Whether the head's int8 [H, V] weight is a quantization of the embedding's [V, H] table
    (of any type: quantize_dynamic makes a Gather's uint8) with zero points of 0, which int8
    weights have (they are symmetric): each row is then its int8 values times its scale."""
    weight, _, zero = head
    return (weight.data_type == zero.data_type == onnx.TensorProto.INT8
            and len(weight.dims) == len(table.dims) == 2
            and list(weight.dims) == list(reversed(table.dims))
            and not read_values(zero, base_dir).any())


def _gathers(graph: onnx.GraphProto, table: tuple[onnx.TensorProto, ...]
             ) -> list[tuple[onnx.GraphProto, onnx.NodeProto, onnx.NodeProto]]:
    """Each (graph, Gather, DequantizeLinear) that reads rows of `table` and dequantizes them
    with its scale and zero point alone; [] when anything else reads the table."""
    weight, scale, zero = (tensor.name for tensor in table)
    found = []
    for subgraph in _graphs(graph):
        consumers: dict[str, list[onnx.NodeProto]] = {}
        for node in subgraph.node:
            for name in node.input:
                consumers.setdefault(name, []).append(node)
        for node in subgraph.node:
            if weight not in node.input:
                continue
            after = consumers.get(node.output[0], []) if node.op_type == "Gather" else []
            if (list(node.input[:1]) != [weight] or len(after) != 1
                    or after[0].op_type != "DequantizeLinear"
                    or list(after[0].input) != [node.output[0], scale, zero]):
                return []
            found.append((subgraph, node, after[0]))
    return found


def _graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    """`graph` and every subgraph in it (If, Loop, Scan bodies)."""
    found = [graph]
    for node in graph.node:
        for attribute in node.attribute:
            for subgraph in [attribute.g, *attribute.graphs]:
                if subgraph.node:
                    found.extend(_graphs(subgraph))
    return found


def _read_rows(graph: onnx.GraphProto, gather: onnx.NodeProto, dequantize: onnx.NodeProto,
               rows: str, head: tuple[onnx.TensorProto, ...]) -> None:
    """Rewrite, in `graph`, Gather(table, ids) -> DequantizeLinear(table's scale) as
    Gather(rows, ids) scaled by the head's scale of each gathered row (one scale for the whole
    head: DequantizeLinear with it)."""
    _, scale, zero = head
    ids, out, base = gather.input[1], dequantize.output[0], gather.name or gather.output[0]
    gathered = f"{base}_rows"
    nodes = [helper.make_node("Gather", [rows, ids], [gathered], name=f"{base}_rows")]
    if not scale.dims:
        nodes.append(helper.make_node("DequantizeLinear", [gathered, scale.name, zero.name],
                                      [out], name=f"{base}_dequantize"))
    else:
        axis = numpy_helper.from_array(np.array([-1], np.int64), f"{base}_last_axis")
        graph.initializer.append(axis)
        nodes += [
            helper.make_node("Gather", [scale.name, ids], [f"{base}_scales"],
                             name=f"{base}_scales"),
            helper.make_node("Unsqueeze", [f"{base}_scales", axis.name],
                             [f"{base}_row_scales"], name=f"{base}_row_scales"),
            helper.make_node("Cast", [gathered], [f"{base}_float"], name=f"{base}_float",
                             to=scale.data_type),
            helper.make_node("Mul", [f"{base}_float", f"{base}_row_scales"], [out],
                             name=f"{base}_dequantize"),
        ]
    position = list(graph.node).index(gather)
    graph.node.remove(gather)
    graph.node.remove(dequantize)
    for offset, node in enumerate(nodes):
        graph.node.insert(position + offset, node)
