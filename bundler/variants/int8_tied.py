"""int8 of a tied LM head: one int8 table of the token embedding, dequantized whole, which the
embedding's Gather and the head (through its Transpose) both read as float.

A tied head kept shared (bundler.model.tied) reads the table through a Transpose. Given its own
copy, quantize_dynamic made two int8 tables of the one float table: the Gather's (uint8, one
scale, a DequantizeLinear after the lookup) and the head's weight for DynamicQuantizeMatMul; at
Whisper's vocabulary (51,865 x 384) 19.9 MB each, 40 of a 44 MB decoder. Sharing the head's int8
weight with the Gather instead made the head's DynamicQuantizeMatMul run 2x slower on
onnxruntime-web's WASM (reverted, 6935b82). Here the table is stored once, int8 symmetric per row
(the rows are the tokens: each keeps its own scale), behind a DequantizeLinear of the whole
constant table, which onnxruntime folds into the float table when the session is created
(FOLD_DEQUANTIZE): the lookup reads float rows, and the head is a float MatMul, weight-only int8
on the wire, the rest of the decoder dynamic int8 as before. Done before quantize_dynamic, which
then leaves the table alone: it takes constant float weights only."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import onnx

from bundler.bundle.modelio import read_model, read_values, walk_nodes
from bundler.model.tied import weight_transposes
from bundler.variants.int8_weights import store_as_int8
from bundler.variants.tools import DEQUANTIZE_AXIS_OPSET, at_least_opset


def tied_tables(model: onnx.ModelProto) -> list[str]:
    """The float tables a MatMul reads through a Transpose as its weight (a tied LM head)."""
    transposes = weight_transposes(model)
    return sorted({transposes[node.input[1]].input[0] for node in walk_nodes(model.graph)
                   if node.op_type == "MatMul" and len(node.input) > 1
                   and node.input[1] in transposes})


def store_tied_tables(model: onnx.ModelProto,
                      base_dir: Path) -> tuple[onnx.ModelProto, dict[str, int]]:
    """`model` (converted to opset 13 if older: the DequantizeLinear's axis) with each table of
    tied_tables stored as int8 per row (axis 0) behind a DequantizeLinear of the whole table
    that keeps the table's name, so every reader reads it as before; and the int8 bytes of each
    table. One in external data (a model read without its weights) is read from `base_dir`."""
    tables = tied_tables(model)
    if not tables:
        return model, {}
    model = at_least_opset(model, DEQUANTIZE_AXIS_OPSET)
    dims = {tensor.name: tensor.dims for tensor in model.graph.initializer}
    stored = {table: int(np.prod(dims[table])) for table in tables}  # a byte a value
    store_as_int8(model.graph, dict.fromkeys(tables, 0),
                  functools.partial(read_values, base_dir=base_dir))
    return model, stored


def tables_first(path: Path, tables: Iterable[str]) -> None:
    """Rewrite the model file `path` (its graph only: weights in external data stay where they
    are) with each table's DequantizeLinear and the Transposes that read the table first in its
    graph. quantize_dynamic's topological sort counts a node's explicit inputs only: in a merged
    decoder it put them after the If whose branches read them by outer scope, which onnx's
    checker refuses."""
    model = read_model(path, load_weights=False)
    graph, names = model.graph, set(tables)
    front = [node for node in graph.node if set(node.output) & names]
    front += [node for node in graph.node if node.op_type == "Transpose" and node.input[0] in names]
    moved = {id(node) for node in front}
    nodes = front + [node for node in graph.node if id(node) not in moved]
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save_model(model, str(path))
