"""A TaskSpec resolved against the model: bundle.json's `task` record (names, sizes and labels
filled in from the model where not given), and the guess of the likely task from the model's
inputs and outputs (said as a hint, never acted on)."""

from __future__ import annotations

import ast
import json

import onnx

from bundler.bundle.manifest import Task
from bundler.bundle.modelio import TensorSpec, input_specs, tensor_spec
from bundler.errors import ConfigError
from bundler.tasks.kinds.registry import KINDS, kind_of
from bundler.tasks.kinds.spec import ModelIO
from bundler.tasks.spec import METADATA_LABELS, TaskSpec


def _outputs(model: onnx.ModelProto) -> list[TensorSpec]:
    """The tensor outputs (a ZipMap's sequence output becomes a tensor only when prepared)."""
    return [tensor_spec(value, "output") for value in model.graph.output
            if value.type.WhichOneof("value") == "tensor_type"]


def likely_task(model: onnx.ModelProto) -> tuple[str, str] | None:
    """(kind, why) when the inputs and outputs look like one of the tasks; None otherwise."""
    inputs, outputs = list(input_specs(model)), _outputs(model)
    if not inputs or not outputs:
        return None
    for kind in KINDS.values():
        why = kind.looks_like(inputs, outputs) if kind.looks_like else None
        if why is not None:
            return kind.name, why
    return None


def _metadata_labels(model: onnx.ModelProto) -> list[str]:
    """Labels from metadata_props: `names` as Ultralytics writes it ({0: 'person', ...}), or
    `labels` as a JSON list or one label a line."""
    props = {prop.key: prop.value for prop in model.metadata_props}
    for key in ("names", "labels", "classes"):
        if key not in props:
            continue
        text = props[key]
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            try:
                value = json.loads(text)
            except ValueError:
                value = [line for line in text.splitlines() if line.strip()]
        if isinstance(value, dict):
            return [str(value[k]) for k in sorted(value)]
        if isinstance(value, list | tuple):
            return [str(item) for item in value]
    raise ConfigError("task setting 'labels': \"metadata\" but the model's metadata_props have no"
                      " names, labels or classes; give a labels file")


def resolve_task(spec: TaskSpec, model: onnx.ModelProto) -> Task | None:
    """bundle.json's task record for `spec` on `model`; None for generic. ConfigError naming the
    setting when the model does not fit it."""
    kind = kind_of(spec.kind)
    if kind.resolve is None:
        return None
    inputs, outputs = list(input_specs(model)), _outputs(model)
    names = {input.name: input for input in inputs}
    out_names = [out.name for out in outputs]
    if spec.input is not None and spec.input not in names:
        raise ConfigError(f"task setting 'input': the model has no input {spec.input!r}"
                          f" (it has: {', '.join(names)})")
    if spec.output is not None and spec.output not in out_names:
        raise ConfigError(f"task setting 'output': the model has no output {spec.output!r}"
                          f" (it has: {', '.join(out_names)})")
    output = spec.output or out_names[0]
    softmax_outputs = {name for node in model.graph.node if node.op_type == "Softmax"
                       for name in node.output}
    task = kind.resolve(spec, ModelIO(inputs, outputs, output, softmax_outputs))
    if spec.labels is not None:
        labels = (_metadata_labels(model) if spec.labels == METADATA_LABELS
                  else list(spec.labels))
        shape = next(out for out in outputs if out.name == task.output).shape or ()
        classes = kind.class_count(task, shape) if kind.class_count else None
        if classes is not None and len(labels) != classes:
            raise ConfigError(f"task setting 'labels': {len(labels)} labels for the {classes}"
                              f" classes of output {output!r}")
        task.labels = labels
    return task
