"""Values an integer input must take for the graph to accept it, read from how the graph uses it.

Random integers are wrong for an input that is a shape (Expand, Reshape, Tile, ConstantOfShape),
indices into a table (Gather, GatherElements, GatherND, ScatterND, token ids into an embedding),
a count or an axis (TopK k, OneHot depth, Slice starts/ends/axes/steps, Range, reduction axes).
`derive_rules` follows each integer graph input through casts and reshapes to the operators that
read it and returns a Rule per input it understands; `Rule.values` then makes an array the
operator accepts. Inputs without a rule keep the caller's default.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import numpy as np
import onnx

from bundler.bundle.modelio import TensorSpec, held_values, walk_nodes

T = TypeVar("T")
Size = int | str | None  # a fixed size, a symbolic dim name, or unknown
DEFAULT_DEPTH = 8  # OneHot depth and Range limit fed to the graph: small and valid

# Operators an index or shape passes through unchanged in value.
_PASS_THROUGH = {"Cast", "Identity", "Squeeze", "Unsqueeze", "Flatten", "Reshape", "Expand"}
_REDUCTIONS = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
               "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}


@dataclasses.dataclass(frozen=True)
class Rule:
    """`kind`: "index" (values in [0, size)), "count" (1 <= value <= size), "fill" (every
    element `value`), "ones", "reshape" (-1 then ones: multiplies out to any element count),
    "axes" (0, 1, ... distinct and in range) or, for a float input, "signed" (uniform in
    [-1, 1)). `why` names the operator that needs it."""

    kind: str
    why: str
    size: Size = None
    value: int = 0

    def values(self, shape: tuple[int, ...], dtype: type, rng: np.random.Generator,
               sizes: Mapping[str, int]) -> np.ndarray:
        size = self.size if isinstance(self.size, int) else sizes.get(self.size or "")
        if self.kind == "index":
            return rng.integers(0, max(size or DEFAULT_DEPTH, 1), size=shape).astype(dtype)
        if self.kind == "count":
            return np.full(shape, min(size or 1, 2), dtype=dtype)
        if self.kind == "reshape":
            flat = np.ones(int(np.prod(shape)), dtype=dtype)
            flat[:1] = -1
            return flat.reshape(shape)
        if self.kind == "axes":
            return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
        if self.kind == "signed":
            return (rng.random(size=shape, dtype=np.float64) * 2 - 1).astype(dtype)
        return np.full(shape, 1 if self.kind == "ones" else self.value, dtype=dtype)


def _attribute(node: onnx.NodeProto, name: str, default: int) -> int:
    return next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == name),
                default)


SMALL_CONSTANT = 64  # elements: shape-like initializers keep their values for inference


def _skeleton(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose large initializers are dims and type only: shape inference needs
    no weights, and copying them would cost a big model's size in memory and time."""
    graph = onnx.GraphProto(name=model.graph.name, node=model.graph.node,
                            input=model.graph.input, output=model.graph.output,
                            value_info=model.graph.value_info)
    for tensor in model.graph.initializer:
        if len(tensor.dims) <= 1 and int(np.prod(tensor.dims)) <= SMALL_CONSTANT:
            graph.initializer.append(tensor)
        else:
            graph.initializer.add(name=tensor.name, dims=tensor.dims, data_type=tensor.data_type)
    return onnx.ModelProto(ir_version=model.ir_version, opset_import=model.opset_import,
                           functions=model.functions, graph=graph)


class _Shapes:
    """Static or symbolic dims of the graph's tensors, from onnx shape inference."""

    def __init__(self, model: onnx.ModelProto) -> None:
        model = _skeleton(model)
        for value in model.graph.input:  # name unnamed dims so they can be looked up later
            for axis, dim in enumerate(value.type.tensor_type.shape.dim):
                if not dim.HasField("dim_value") and not dim.dim_param:
                    dim.dim_param = f"{value.name}:{axis}"
        with contextlib.suppress(Exception):  # a best effort: the graph's inputs remain
            model = onnx.shape_inference.infer_shapes(model)
        graph = model.graph
        self.dims: dict[str, list[Size]] = {}
        for value in [*graph.input, *graph.value_info, *graph.output]:
            if value.type.tensor_type.HasField("shape"):
                self.dims[value.name] = [
                    d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                    for d in value.type.tensor_type.shape.dim]
        self.dims.update({t.name: list(t.dims) for t in graph.initializer})
        # The skeleton keeps the data of small constants only: larger ones are dims and type.
        held = ((t.name, held_values(t)) for t in graph.initializer if len(t.dims) <= 1)
        self.constants = {name: values for name, values in held if values is not None}

    def size(self, tensor: str, axis: int) -> Size:
        dims = self.dims.get(tensor)
        if not dims or not -len(dims) <= axis < len(dims):
            return None
        return dims[axis]

    def smallest(self, tensor: str) -> Size:
        known = [d for d in self.dims.get(tensor, []) if isinstance(d, int)]
        return min(known) if known else None


def _rule(node: onnx.NodeProto, position: int, shapes: _Shapes) -> Rule | None:
    """The rule for the tensor read as input `position` of `node`, if it constrains it."""
    op, why = node.op_type, f"{node.op_type} input {position}"
    if op in ("Gather", "GatherElements", "ScatterElements", "Scatter") and position == 1:
        axis = _attribute(node, "axis", 0)
        return Rule("index", f"{why}: indices into axis {axis} of {node.input[0]!r}",
                    shapes.size(node.input[0], axis))
    if op in ("GatherND", "ScatterND") and position == 1:
        return Rule("index", f"{why}: indices into {node.input[0]!r}",
                    shapes.smallest(node.input[0]))
    if op == "OneHot":
        if position == 1:
            return Rule("fill", f"{why}: depth", value=DEFAULT_DEPTH)
        if position == 0:
            depth = shapes.constants.get(node.input[1])
            size = int(depth.reshape(-1)[0]) if depth is not None else DEFAULT_DEPTH
            return Rule("index", f"{why}: indices below the depth", size)
    if op == "TopK" and position == 1:
        return Rule("count", f"{why}: k", shapes.size(node.input[0], _attribute(node, "axis", -1)))
    shape_rules = {("Expand", 1): "ones", ("Tile", 1): "ones", ("Reshape", 1): "reshape",
                   ("Slice", 3): "axes", ("Unsqueeze", 1): "axes"}
    if (op, position) in shape_rules or (op in _REDUCTIONS and position == 1):
        return Rule(shape_rules.get((op, position), "axes"), f"{why}: a shape or axes")
    fills = {("ConstantOfShape", 0): 2, ("Slice", 1): 0, ("Slice", 2): np.iinfo(np.int32).max,
             ("Slice", 4): 1, ("Range", 0): 0, ("Range", 1): DEFAULT_DEPTH, ("Range", 2): 1,
             ("Pad", 1): 0}
    if (op, position) in fills:
        return Rule("fill", f"{why}", value=fills[(op, position)])
    return None


def _combine(rules: list[Rule]) -> Rule | None:
    """Index uses agree on the smallest table; any other use wins over them (a shape)."""
    others = [rule for rule in rules if rule.kind != "index"]
    if others or not rules:
        return others[0] if others else None
    known = [rule for rule in rules if isinstance(rule.size, int)]
    return min(known, key=lambda rule: rule.size) if known else rules[0]  # type: ignore[arg-type]


# Float inputs of these operators at these positions get negative values too: the seeded [0, 1)
# never reaches a negative base of Pow, whose NaN a runtime can get wrong (onnxruntime-web
# 1.31.1's WebGPU Pow returns a number there).
_SIGNED_USES = {("Pow", 0)}

Consumers = Mapping[str, list[tuple[onnx.NodeProto, int]]]


def _reached(name: str, consumers: Consumers,
             use: Callable[[onnx.NodeProto, int], T | None]) -> list[T]:
    """What `use` says of each operator that reads input `name`, followed through pass-through
    operators (where `use` says nothing)."""
    found: list[T] = []
    frontier, seen = [name], {name}
    while frontier:
        tensor = frontier.pop()
        for node, position in consumers.get(tensor, []):
            if (said := use(node, position)) is not None:
                found.append(said)
            elif node.op_type in _PASS_THROUGH and position == 0:
                fresh = [out for out in node.output if out not in seen]
                seen.update(fresh)
                frontier += fresh
    return found


def derive_rules(model: onnx.ModelProto, inputs: Sequence[TensorSpec]) -> dict[str, Rule]:
    """A Rule for each graph input whose use constrains its values (integers), or whose sign
    matters (floats)."""
    integer = {spec.name for spec in inputs if spec.type.startswith(("int", "uint"))}
    floats = {spec.name for spec in inputs if spec.type.startswith("float")}
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in walk_nodes(model.graph):
        for position, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, position))
    rules: dict[str, Rule] = {}
    for name in sorted(floats):
        signed = _reached(name, consumers, lambda node, position: node.op_type
                          if (node.op_type, position) in _SIGNED_USES else None)
        if signed:
            rules[name] = Rule("signed", f"{signed[0]} (its result for negative values)")
    shapes = _Shapes(model) if integer else None
    for name in sorted(integer):
        found = _reached(name, consumers, lambda node, position: _rule(node, position, shapes))
        if (combined := _combine(found)) is not None:
            rules[name] = combined
    return rules
