"""Each step's new key/value slice as outputs of a text-generation decoder (the task's graph).

On WASM onnxruntime-web copies every fetched output into a new typed array: fetching the
`present.N.key/value` outputs allocates and fills arrays as large as the whole cache at every
step, 5-28 % of a GPT-2-small step (docs/benchmarks.md, "Where a decode step's time goes on
WASM"). Where each present is a `Concat` of its past and the step's new key/value (optimum's
exports, also under the `use_cache_branch` If of a merged decoder, whose first-step branch's
present is all new), this adds outputs `present_new.N.key/value`, that new slice, so that
generate.mjs's WASM loop fetches them and appends them to the cache it keeps; WebGPU keeps
fetching the presents, which stay on the GPU. A decoder of another form is left as it is (its
loop fetches the presents).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import onnx
from onnx import helper

if TYPE_CHECKING:
    from bundler.bundle.records import Task

PRESENT, NEW, PAST = "present.", "present_new.", "past_key_values."


def _slice_in(graph: onnx.GraphProto, output: str, first_step: bool) -> str | None:
    """The value of `graph` that is the new slice of its output `output`: the second input of a
    Concat of the past; in a first-step branch (no past used), the output itself."""
    producer = next((node for node in graph.node if output in node.output), None)
    if producer is None:
        return None
    if producer.op_type == "Concat" and len(producer.input) == 2 \
            and producer.input[0].startswith(PAST):
        return producer.input[1]
    return output if first_step else None


def _uses_past(graph: onnx.GraphProto) -> bool:
    return any(name.startswith(PAST) for node in graph.node for name in node.input)


def _slices(model: onnx.ModelProto, presents: list[str]) -> dict | None:
    """Where each present's new slice is: {"graph": [value, ...]} for a plain decoder,
    {"then_branch": [...], "else_branch": [...]} for a merged one; None: another form."""
    graph = model.graph
    if len(graph.node) == 1 and graph.node[0].op_type == "If":
        node = graph.node[0]
        found = {}
        for attribute in node.attribute:
            branch = attribute.g
            inner = [branch.output[list(node.output).index(name)].name for name in presents]
            first_step = not _uses_past(branch)
            values = [_slice_in(branch, name, first_step) for name in inner]
            if None in values:
                return None
            found[attribute.name] = values
        return found if set(found) == {"then_branch", "else_branch"} else None
    values = [_slice_in(graph, name, first_step=False) for name in presents]
    return None if None in values else {"graph": values}


def with_new_slices(model: onnx.ModelProto, task: Task | None = None) -> onnx.ModelProto:
    """`model` with outputs present_new.N.key/value beside its present.N.key/value, where their
    form allows (see the module's docstring); else `model` as it is."""
    presents = [value for value in model.graph.output if value.name.startswith(PRESENT)]
    found = _slices(model, [value.name for value in presents]) if presents else None
    if found is None:
        return model
    model = copy.deepcopy(model)
    graph = model.graph
    names = [value.name.replace(PRESENT, NEW, 1) for value in presents]
    for where, values in found.items():
        inner = graph if where == "graph" else next(
            attribute.g for attribute in graph.node[0].attribute if attribute.name == where)
        for name, value in zip(names, values, strict=True):
            # an Identity: one value cannot be two outputs of a (sub)graph
            target = name if where == "graph" else f"{name}/{where}"
            inner.node.append(helper.make_node("Identity", [value], [target]))
            if where != "graph":
                inner.output.append(helper.make_value_info(target, onnx.TypeProto()))
    if "graph" not in found:
        graph.node[0].output.extend(names)
    sequence = next(value for value in model.graph.input if value.name == "input_ids")
    for present, name in zip(presents, names, strict=True):
        value = copy.deepcopy(present)
        value.name = name
        dims = value.type.tensor_type.shape.dim
        if len(dims) == 4:  # [batch, heads, the tokens fed this step, head size]
            dims[2].CopyFrom(sequence.type.tensor_type.shape.dim[1])
        graph.output.append(value)
    return model
