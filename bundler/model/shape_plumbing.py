"""A text-generation decoder's shape plumbing folded away, so each decode step runs fewer nodes.

An optimum export of GPT-2 runs some 1,360 nodes per decode step, most of them computing shapes
at run time (Shape -> Gather -> Unsqueeze -> Concat -> Reshape): the Conv1D layers flatten their
input to 2-D around a Gemm and restore it after, and every head split and merge builds its target
shape from the tensor's own dims. On onnxruntime-web's WASM each node costs a dispatch, which is
a good part of a step's time for a one-token step. onnxruntime's symbolic shape inference knows
these values as expressions of the inputs' dims, and this step uses it to
- turn a Reshape's computed target into a constant: a dim equal to the data's own dim at the same
  place becomes 0 (copy), a static one its number, one more unknown -1;
- turn a Reshape -> Gemm -> Reshape that flattens to 2-D and restores the leading dims into
  MatMul + Add (which the int8 quantizer also reads);
- turn a shape value whose every element is a number into a constant (the attention's
  1/sqrt(sqrt(head size)) is computed from a Shape today);
- drop a Slice from 0 to each sliced dim's own size (the attention mask cut to the keys' length in
  every layer);
and drops the nodes left unused. A merged decoder's two If branches are each done on their own
(as a model of their own, the weights left out: inference needs only their shapes).

The rewrite relies on the inference, so the result must also give the same outputs as the graph
before, on both branches (a zero-length past and a past of a few tokens), or it is refused.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from bundler.bundle.modelio import node_reads
from bundler.model.outputs import beyond_tolerance

PAST = re.compile(r"^past_key_values\.\d+\.(key|value)$")
_SMALL = 64  # initializers with at most this many elements keep their values for the inference


def _inference(model: onnx.ModelProto) -> Any:
    """onnxruntime's SymbolicShapeInference run over `model` (its internals read: the symbolic
    shape of each value, known_vi_, and the value of each shape tensor, sympy_data_). Raised
    when it cannot infer every value."""
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    inference = SymbolicShapeInference(2**31 - 1, True, False, 0)
    inference._preprocess(model)
    done = False
    while inference.run_:
        done = inference._infer_impl()
    if not done:
        raise ValueError("onnxruntime's symbolic shape inference could not infer every value")
    return inference


def _dims(inference: Any, name: str) -> list[Any] | None:
    value = inference.known_vi_.get(name)
    if value is None or not value.type.HasField("tensor_type"):
        return None
    shape = value.type.tensor_type.shape
    if not value.type.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in shape.dim]


def _same(a: Any, b: Any) -> bool:
    return a is not None and b is not None and str(a) == str(b)


def _is_int(value: Any) -> bool:
    try:
        return int(value) == value
    except TypeError:
        return False


def _standalone(graph: onnx.GraphProto, outer: onnx.GraphProto | None) -> onnx.ModelProto:
    """`graph` (a branch, with the nodes and values of the graph around it) as a model, its large
    weights as typed inputs without values."""
    nodes = [n for n in (outer.node if outer is not None else []) if n.op_type != "If"]
    nodes += list(graph.node)
    weights = list(graph.initializer) + list(outer.initializer if outer is not None else [])
    used = {name for node in nodes for name in node.input}
    small, large = [], []
    for tensor in weights:
        if tensor.name not in used:
            continue
        if int(np.prod(tensor.dims)) <= _SMALL:
            small.append(tensor)
        else:
            large.append(helper.make_tensor_value_info(tensor.name, tensor.data_type,
                                                       list(tensor.dims)))
    inputs = [v for v in (outer or graph).input if v.name in used]
    return helper.make_model(
        helper.make_graph(nodes, graph.name or "graph", inputs + large, list(graph.output),
                          initializer=small),
        opset_imports=[helper.make_opsetid("", 17)])


def _rewrite(graph: onnx.GraphProto, outer: onnx.GraphProto | None, prefix: str) -> int:
    """Rewrites `graph` in place; the number of nodes it has less."""
    model = _standalone(graph, outer)
    inference = _inference(model)
    weights = {t.name: t for t in [*graph.initializer,
                                   *(outer.initializer if outer is not None else [])]}
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    inner = {name for node in graph.node for a in node.attribute
             for sub in [a.g, *a.graphs] for inner in sub.node for name in node_reads(inner)}
    outputs = {value.name for value in graph.output}
    before = len(graph.node)
    added: list[onnx.TensorProto] = []

    def constant(values: list[int] | int, like: str | None = None) -> str:
        """A new weight of `values`, typed as the value `like` (else int64)."""
        dtype: Any = np.int64
        if like is not None:
            dtype = helper.tensor_dtype_to_np_dtype(
                inference.known_vi_[like].type.tensor_type.elem_type)
        name = f"{prefix}shape_plumbing_{len(added)}"
        added.append(numpy_helper.from_array(np.array(values, dtype), name))
        return name

    new_nodes: list[onnx.NodeProto] = []
    replaced: set[int] = set()
    for node in graph.node:
        if id(node) in replaced:
            continue
        if node.op_type == "Gemm" and _sandwich(node, producer, consumers, weights, inference):
            flatten = producer[node.input[0]]
            restore = consumers[node.output[0]][0]
            x = flatten.input[0]
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            w = node.input[1]
            if attrs.get("transB", 0):
                array = numpy_helper.to_array(weights[w]).T
                w = f"{prefix}{w}_transposed"
                added.append(numpy_helper.from_array(np.ascontiguousarray(array), w))
            product = node.output[0] + "_matmul" if len(node.input) > 2 else restore.output[0]
            new_nodes.append(helper.make_node("MatMul", [x, w], [product], name=node.name))
            if len(node.input) > 2:
                new_nodes.append(helper.make_node("Add", [product, node.input[2]],
                                                  [restore.output[0]], name=node.name + "_bias"))
            replaced.add(id(restore))
            continue
        if node.op_type == "Reshape" and node.input[1] not in weights:
            target = _reshape_target(node, inference)
            if target is not None:
                node.input[1] = constant(target)
        elif node.op_type != "Constant" and len(node.output) == 1 and node.output[0] not in (
                outputs | inner):
            value = inference.sympy_data_.get(node.output[0])
            folded = _folded(value, _dims(inference, node.output[0]))
            same = node.input[0] if _whole_slice(node, inference, weights) else None
            if folded is not None or same is not None:
                name = same or constant(folded, node.output[0])
                for user in consumers.get(node.output[0], []):
                    for i, inp in enumerate(user.input):
                        if inp == node.output[0]:
                            user.input[i] = name
                continue  # the node is dropped: its users read the constant, or its input
        new_nodes.append(node)
    del graph.node[:]
    graph.node.extend(new_nodes)
    graph.initializer.extend(added)
    _drop_unused(graph)
    return before - len(graph.node)


def _sandwich(gemm: onnx.NodeProto, producer: dict, consumers: dict, weights: dict,
              inference: Any) -> bool:
    """Reshape(x) to 2-D -> Gemm(weights) -> Reshape to x's leading dims and the Gemm's width."""
    attrs = {a.name: helper.get_attribute_value(a) for a in gemm.attribute}
    if attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
        return False
    if gemm.input[1] not in weights or (len(gemm.input) > 2 and gemm.input[2] not in weights):
        return False
    if len(gemm.input) > 2 and len(weights[gemm.input[2]].dims) != 1:
        return False
    flatten = producer.get(gemm.input[0])
    users = consumers.get(gemm.output[0], [])
    if flatten is None or flatten.op_type != "Reshape" or len(users) != 1:
        return False
    if len(consumers.get(flatten.output[0], [])) != 1 or users[0].op_type != "Reshape":
        return False
    x, out = _dims(inference, flatten.input[0]), _dims(inference, users[0].output[0])
    width = _dims(inference, gemm.output[0])
    if x is None or out is None or width is None or len(x) < 2 or len(out) != len(x):
        return False
    return all(_same(a, b) for a, b in zip(x[:-1], out[:-1], strict=True)) and _same(
        out[-1], width[-1])


def _whole_slice(node: onnx.NodeProto, inference: Any, weights: dict) -> bool:
    """A Slice from 0 to each sliced dim's own size, step 1: its output is its input (an
    attention mask cut to the length of the keys it already has)."""
    if node.op_type != "Slice" or len(node.input) < 4:
        return False
    if len(node.input) > 4 and node.input[4] and _values(node.input[4], inference, weights) != [
            1] * len(_values(node.input[3], inference, weights) or []):
        return False
    starts, ends, axes = (_values(name, inference, weights) for name in node.input[1:4])
    dims = _dims(inference, node.input[0])
    if starts is None or ends is None or axes is None or dims is None:
        return False
    if len(starts) != len(ends) or len(axes) != len(ends):
        return False
    return all(_is_int(start) and int(start) == 0 and _is_int(axis) and -len(dims) <= int(axis)
               < len(dims) and _same(end, dims[int(axis)])
               for start, end, axis in zip(starts, ends, axes, strict=True))


def _values(name: str, inference: Any, weights: dict) -> list[Any] | None:
    if name in weights:
        return [int(v) for v in numpy_helper.to_array(weights[name]).reshape(-1)]
    value = inference.sympy_data_.get(name)
    return value if isinstance(value, list) else None


def _reshape_target(node: onnx.NodeProto, inference: Any) -> list[int] | None:
    """The constant target of a Reshape whose computed one is known (see the docstring)."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("allowzero", 0):
        return None
    value = inference.sympy_data_.get(node.input[1])
    data = _dims(inference, node.input[0])
    if not isinstance(value, list) or data is None:
        return None
    target, unknown = [], 0
    for i, dim in enumerate(value):
        if _is_int(dim) and int(dim) != 0:
            target.append(int(dim))
        elif i < len(data) and _same(dim, data[i]):
            target.append(0)
        elif -1 not in target and not _is_int(dim):
            target.append(-1)
            unknown += 1
        else:
            return None
    return target if unknown <= 1 else None


def _folded(value: Any, dims: list[Any] | None) -> list[int] | int | None:
    """A shape value every element of which is a number, as the constant it is."""
    if value is None or dims is None:
        return None
    if isinstance(value, list):
        if len(dims) == 1 and value and all(_is_int(v) for v in value):
            return [int(v) for v in value]
        return None
    return int(value) if dims == [] and _is_int(value) else None


def _drop_unused(graph: onnx.GraphProto) -> None:
    """Nodes whose outputs nothing reads (this graph's nodes and subgraphs, its outputs)."""
    while True:
        read = {v.name for v in graph.output}
        for node in graph.node:
            read.update(node_reads(node))
        kept = [n for n in graph.node if any(o in read for o in n.output if o)]
        if len(kept) == len(graph.node):
            return
        del graph.node[:]
        graph.node.extend(kept)


def is_decoder(model: onnx.ModelProto) -> bool:
    """Whether `model` is a decoder with past key/values (what this step is for)."""
    return any(PAST.match(value.name) for value in model.graph.input)


def fold_shape_plumbing(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """The folded model (`model` is left as it is) and a detail of what it removed; ValueError
    when the inference fails, nothing was folded, or the outputs differ."""
    result = copy.deepcopy(model)
    branches = [(a.g, node) for node in result.graph.node if node.op_type == "If"
                for a in node.attribute if a.name in ("then_branch", "else_branch")]
    removed = []
    if branches:
        for index, (branch, _) in enumerate(branches):
            removed.append(_rewrite(branch, result.graph, f"{branch.name or index}/"))
    else:
        removed.append(_rewrite(result.graph, None, ""))
    if not sum(removed):
        raise ValueError("no shape computation to fold")
    check_decoder_outputs(model, result)
    return result, f"{' + '.join(map(str, removed))} nodes less"




def _decoder_feeds(model: onnx.ModelProto, past: int) -> dict[str, np.ndarray]:
    """Three new tokens after `past` cached ones, batch 1 (use_cache_branch: past > 0)."""
    weights = {t.name for t in model.graph.initializer}
    new = 3
    feeds: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(0)
    for value in model.graph.input:
        if value.name in weights:
            continue
        tensor = value.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if PAST.match(value.name):
            dims = [d.dim_value for d in tensor.shape.dim]
            if len(dims) != 4 or not dims[1] or not dims[3]:
                raise ValueError(f"it cannot check the result: {value.name} has no static heads"
                                 " and head size")
            feeds[value.name] = rng.standard_normal((1, dims[1], past, dims[3])).astype(dtype)
        elif value.name == "input_ids":
            feeds[value.name] = np.array([[1, 2, 3]], dtype)
        elif value.name == "attention_mask":
            feeds[value.name] = np.ones((1, past + new), dtype)
        elif value.name == "position_ids":
            feeds[value.name] = np.arange(past, past + new, dtype=dtype)[None]
        elif value.name == "use_cache_branch":
            feeds[value.name] = np.array([past > 0])
        else:
            raise ValueError(f"it cannot check the result: input {value.name} is not a"
                             " decoder's")
    return feeds


def check_decoder_outputs(before: onnx.ModelProto, after: onnx.ModelProto) -> None:
    """ValueError unless `after` gives `before`'s outputs with no past and with a past."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    sessions = [ort.InferenceSession(m.SerializeToString(), options,
                                     providers=["CPUExecutionProvider"]) for m in (before, after)]
    for past in (0, 4):
        feeds = _decoder_feeds(before, past)
        want, got = (session.run(None, feeds) for session in sessions)
        for value, a, b in zip(before.graph.output, want, got, strict=True):
            if a.shape != b.shape or beyond_tolerance(a, b) is not None:
                raise ValueError(f"the folded graph's {value.name} differs (past {past})")
