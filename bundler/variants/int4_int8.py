"""int4's int8 forms. format=int8: the 4-bit blocks of the qdq form requantized to int8 at
load, into DynamicQuantizeMatMul (the int8 variant's kernel on WASM), the blocks still 4 bits on
the wire. format=per-ep: the qdq form for WebGPU reading the same blocks and scales as the int8
form, so the two graphs share one data file. Used by bundler/variants/int4.py."""

from __future__ import annotations

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from bundler.bundle.modelio import walk_nodes
from bundler.variants.tools import attribute, fresh_name, graphs_of


def _names(model: ModelProto) -> set[str]:
    """The tensor names the model's graphs (subgraphs too) define: initializers and node
    outputs, which a new one must not take (fresh_name)."""
    return {name for graph in graphs_of(model.graph)
            for name in [*(t.name for t in graph.initializer),
                         *(out for node in graph.node for out in node.output)]}


def int8_compute(model: ModelProto) -> int:
    """Make each MatMul of a constant 4-bit DequantizeLinear (in the main graph: see
    hoist_dequantize) a DynamicQuantizeMatMul of an int8 weight that a QuantizeLinear makes from
    the blocks; how many. Both fold into one int8 constant at load (FOLD_DEQUANTIZE): 4-bit
    blocks on the wire, onnxruntime's int8 kernel on WASM, as the int8 variant's.

    The int8 scale is one per weight, as the int8 variant's (per column, onnxruntime's
    QuantizeLinear folds a [K, N] weight an element at a time: seconds at load). It comes from
    the block scales alone (the weights need not be read): |q - zero point| is at most 8 for
    signed 4-bit (15 with a zero point), so no value is larger than that times the largest block
    scale, and nothing saturates. The block scales, a fifth of the bytes at block 32, are stored
    in float16 where only these MatMuls read the weight: it is dequantized in float16 and
    requantized from there."""
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    blocks = {node.output[0]: node for node in model.graph.node
              if node.op_type == "DequantizeLinear" and node.input[0] in weights
              and weights[node.input[0]].data_type in (TensorProto.INT4, TensorProto.UINT4)
              and len(weights[node.input[0]].dims) == 2 and attribute(node, "axis", 1) == 0}
    readers: dict[str, list[NodeProto]] = {}
    for node in walk_nodes(model.graph):
        for name in node.input:
            if name in blocks:
                readers.setdefault(name, []).append(node)
    taken = _names(model)
    made: dict[str, NodeProto] = {}  # float weight -> its QuantizeLinear
    rewritten = 0
    for weight, nodes in readers.items():
        matmuls = [node for node in nodes if node.op_type == "MatMul" and node.input[1] == weight]
        if not matmuls:
            continue
        half = len(matmuls) == len(nodes)
        made[weight], scale, zero = _int8_weight(model, blocks[weight], weights, taken, half)
        for node in matmuls:
            activation = node.input[0]
            node.op_type, node.domain = "DynamicQuantizeMatMul", "com.microsoft"
            del node.input[:]
            node.input.extend([activation, made[weight].output[0], scale, zero])
            rewritten += 1
    if made:  # each right after its DequantizeLinear: the graph stays in topological order
        ordered = []
        for node in model.graph.node:
            ordered.append(node)
            if node.op_type == "DequantizeLinear" and node.output[0] in made:
                ordered.append(made[node.output[0]])
        del model.graph.node[:]
        model.graph.node.extend(ordered)
    if rewritten and not any(entry.domain == "com.microsoft" for entry in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return rewritten


def _int8_weight(model: ModelProto, dequantize: NodeProto, weights: dict[str, TensorProto],
                 taken: set[str], half: bool) -> tuple[NodeProto, str, str]:
    """A QuantizeLinear of `dequantize`'s output to int8, and the names of the float32 scale and
    the zero point DynamicQuantizeMatMul reads (added to the main graph); with `half`, the block
    scales become float16 and the QuantizeLinear takes float16."""
    blocks = weights[dequantize.input[1]]
    block_scales = numpy_helper.to_array(blocks)
    if half and block_scales.dtype == np.float32:
        block_scales = block_scales.astype(np.float16)
        blocks.CopyFrom(numpy_helper.from_array(block_scales, blocks.name))
    has_zero_point = len(dequantize.input) > 2 and bool(dequantize.input[2])
    reach = 15.0 if has_zero_point else 8.0
    largest = float(np.abs(block_scales.astype(np.float32)).max())
    scale = np.array(reach * largest / 127.0 if largest > 0 else 1.0, block_scales.dtype)
    weight = dequantize.output[0]
    names = [fresh_name(f"{weight}_int8{suffix}", taken)
             for suffix in ("", "_scale", "_zero", "_matmul_scale")]
    model.graph.initializer.extend([
        numpy_helper.from_array(scale, names[1]),
        numpy_helper.from_array(np.zeros(scale.shape, np.int8), names[2]),
    ])
    if scale.dtype != np.float32:  # the same values, in the type DynamicQuantizeMatMul takes
        model.graph.initializer.append(numpy_helper.from_array(scale.astype(np.float32),
                                                               names[3]))
    quantize = helper.make_node("QuantizeLinear", [weight, *names[1:3]], [names[0]],
                                name=fresh_name(f"{weight}_QuantizeLinear", taken))
    return quantize, names[3] if scale.dtype != np.float32 else names[1], names[2]


def share_scales(qdq: ModelProto, int8: ModelProto) -> int:
    """Make the qdq form `qdq` read the int8 form's block scales where int8_compute stored them
    in float16 (same name, float32 in `qdq`): the float16 tensor, and a Cast to float32 before
    the DequantizeLinear nodes that read it; how many. onnxruntime folds the Cast of a constant
    at load on every EP (DequantizeLinear stays as it was), so WebGPU computes in float32 as
    qdq's own graph does, on the values the int8 form is requantized from, and the two forms
    ship one copy of the scales."""
    halves = {tensor.name: tensor for tensor in int8.graph.initializer
              if tensor.data_type == TensorProto.FLOAT16}
    taken = _names(qdq)
    casts: dict[str, NodeProto] = {}
    for tensor in qdq.graph.initializer:
        half = halves.get(tensor.name)
        if half is None or tensor.data_type != TensorProto.FLOAT:
            continue
        output = fresh_name(f"{tensor.name}_float", taken)
        casts[tensor.name] = helper.make_node("Cast", [tensor.name], [output],
                                              name=fresh_name(f"{tensor.name}_Cast", taken),
                                              to=TensorProto.FLOAT)
        tensor.CopyFrom(half)
    for node in walk_nodes(qdq.graph):
        for index, name in enumerate(node.input):
            if name in casts and node.op_type != "Cast":
                node.input[index] = casts[name].output[0]
    if casts:  # first: the graph stays in topological order
        nodes = [*casts.values(), *qdq.graph.node]
        del qdq.graph.node[:]
        qdq.graph.node.extend(nodes)
    return len(casts)
