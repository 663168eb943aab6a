"""Tied weights kept shared: a 2-D float initializer that is exactly the transpose of another is
replaced by a Transpose of that other, so the bytes ship once.

A language model whose LM head is its token embedding ("tied") computes `hidden @ E.T`.
Constant folding (onnxslim, onnxruntime's basic level) folds that Transpose into a second,
transposed copy of E, and optimum without `accelerate` exports the head's weight as its own copy
already: on a Qwen2-style decoder (vocab 8,000 x 768) the copy was 24.6 MB of 351.6, and at a real
vocabulary (151,936 x 896) it would be 545 MB. onnxruntime folds the Transpose again when the
session is created, in memory, not on the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from bundler.bundle.external import repack
from bundler.bundle.modelio import load_tensor, walk_nodes

MIN_BYTES = 1 << 16  # smaller copies cost less than the node that replaces them


def share_transposed_copies(model: onnx.ModelProto) -> list[tuple[str, str, int]]:
    """Replace, in place, each float [n, m] initializer equal to another's transpose by a
    Transpose node of that other; (copy, original, bytes saved) per replacement."""
    graph = model.graph
    tables = [t for t in graph.initializer
              if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 2
              and t.dims[0] != t.dims[1] and t.dims[0] * t.dims[1] * 4 >= MIN_BYTES]
    by_shape: dict[tuple[int, int], list[onnx.TensorProto]] = {}
    for table in tables:
        by_shape.setdefault((table.dims[0], table.dims[1]), []).append(table)
    replaced: list[tuple[str, str, int]] = []
    copies: set[str] = set()
    arrays: dict[str, np.ndarray] = {}

    def array(tensor: onnx.TensorProto) -> np.ndarray:
        if tensor.name not in arrays:
            arrays[tensor.name] = numpy_helper.to_array(tensor)
        return arrays[tensor.name]

    for original in tables:
        if original.name in copies:
            continue
        for copy in by_shape.get((original.dims[1], original.dims[0]), []):
            if copy.name in copies or copy.name == original.name:
                continue
            if np.array_equal(array(copy), array(original).T):
                copies.add(copy.name)
                replaced.append((copy.name, original.name, int(array(copy).nbytes)))
    _as_transposes(graph, {copy: original for copy, original, _ in replaced})
    return replaced


def _as_transposes(graph: onnx.GraphProto, copies: Mapping[str, str]) -> None:
    """Replace each initializer named in `copies` (copy -> original) by a Transpose node of its
    original, in place."""
    if not copies:
        return
    for field in (graph.initializer, graph.input):  # older IRs list initializers as inputs
        kept = [item for item in field if item.name not in copies]
        del field[:]
        field.extend(kept)
    taken = {node.name for node in graph.node}
    nodes = []
    for copy_name, original_name in copies.items():
        name, index = f"{copy_name}_shared", 0
        while name in taken:
            index += 1
            name = f"{copy_name}_shared_{index}"
        taken.add(name)
        nodes.append(helper.make_node("Transpose", [original_name], [copy_name], name=name,
                                      perm=[1, 0]))
    nodes.extend(graph.node)  # constants first: the graph stays in topological order
    del graph.node[:]
    graph.node.extend(nodes)


def share_streamed_copies(path: Path, copies: Mapping[str, str]) -> list[str]:
    """share_transposed_copies for a variant of a large model (modelio.is_large), written with
    its weights in external data, which is never read whole: each copy unshare_for_matmuls made
    (copy -> original) that the kind left float beside its float original (both as they were
    made, so the copy is still the original's transpose) becomes a Transpose of the original
    again, and the data file is rewritten without the copy's bytes; the copies shared."""
    model = onnx.load(str(path), load_external_data=False)
    tensors = {tensor.name: tensor for tensor in model.graph.initializer}
    left = {copy: original for copy, original in copies.items()
            if copy in tensors and original in tensors
            and tensors[copy].data_type == tensors[original].data_type == onnx.TensorProto.FLOAT
            and list(tensors[copy].dims) == list(reversed(tensors[original].dims))}
    if left:
        _as_transposes(model.graph, left)
        repack(path, model)
    return list(left)


def weight_transposes(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    """The main graph's Transposes of a constant float [K, N] weight, by output: what a tied LM
    head kept shared reads as its MatMul's weight (share_transposed_copies's form)."""
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    return {node.output[0]: node for node in model.graph.node
            if node.op_type == "Transpose" and node.input[0] in weights
            and len(weights[node.input[0]].dims) == 2
            and weights[node.input[0]].data_type == onnx.TensorProto.FLOAT}


def unshare_for_matmuls(model: onnx.ModelProto, base_dir: Path) -> dict[str, str]:
    """Give each MatMul that reads a Transpose of a constant float [K, N] weight (a tied LM head
    kept shared) a constant of its own, in place, which the quantizers can take (they quantize
    constant weights only); returns the copies made (copy -> original). A copy a quantizer
    leaves float is shared again after (share_transposed_copies, or share_streamed_copies for a
    large model). A weight the model names in external data (read without its weights) is read
    from `base_dir`."""
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    transposes = weight_transposes(model)
    made: dict[str, str] = {}  # one constant per Transpose, however many MatMuls read it
    for node in walk_nodes(model.graph):  # a merged decoder's head is in both If branches
        if node.op_type == "MatMul" and node.input[1] in transposes:
            if node.input[1] not in made:
                source = weights[transposes[node.input[1]].input[0]]
                if source.data_location == onnx.TensorProto.EXTERNAL:
                    load_tensor(source, base_dir)
                name, index = f"{source.name}_transposed", 0
                while name in weights:
                    index += 1
                    name = f"{source.name}_transposed_{index}"
                weights[name] = numpy_helper.from_array(numpy_helper.to_array(source).T.copy(),
                                                        name)
                model.graph.initializer.append(weights[name])
                made[node.input[1]] = name
            node.input[1] = made[node.input[1]]
    read = {name for node in walk_nodes(model.graph) for name in node.input}
    read |= {value.name for value in model.graph.output}
    live = [node for node in model.graph.node
            if node.output[0] not in transposes or node.output[0] in read]
    del model.graph.node[:]
    model.graph.node.extend(live)
    return {copy: transposes[output].input[0] for output, copy in made.items()}
