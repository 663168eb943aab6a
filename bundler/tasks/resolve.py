"""A TaskSpec resolved against the model: bundle.json's `task` record (names, sizes and labels
filled in from the model where not given), and the guess of the likely task from the model's
inputs and outputs (said as a hint, never acted on)."""

from __future__ import annotations

import ast
import json

import onnx

from bundler.bundle.manifest import Task
from bundler.errors import ConfigError
from bundler.modelio import TensorSpec, input_specs, tensor_spec
from bundler.tasks.spec import IMAGE_KINDS, METADATA_LABELS, TaskSpec

FLOATS = ("float32", "float16", "float64")


def _outputs(model: onnx.ModelProto) -> list[TensorSpec]:
    """The tensor outputs (a ZipMap's sequence output becomes a tensor only when prepared)."""
    return [tensor_spec(value, "output") for value in model.graph.output
            if value.type.WhichOneof("value") == "tensor_type"]


def _image_layout(spec: TensorSpec) -> str | None:
    shape = spec.shape or ()
    if len(shape) != 4:
        return None
    if shape[1] == 3:
        return "NCHW"
    if shape[3] == 3:
        return "NHWC"
    return None


def _state_pairs(inputs: list[TensorSpec], outputs: list[TensorSpec]
                 ) -> tuple[tuple[str, str], ...]:
    """Inputs fed back from an output of the same shape whose name extends the input's
    (state -> stateN, h0 -> h0_out) or the other way round."""
    pairs = []
    for spec in inputs:
        for out in outputs:
            names = (spec.name.lower().rstrip("0"), out.name.lower())
            related = names[1].startswith(names[0]) or names[0].startswith(names[1])
            if related and spec.shape == out.shape and spec.type == out.type:
                pairs.append((spec.name, out.name))
                break
    return tuple(pairs)


def likely_task(model: onnx.ModelProto) -> tuple[str, str] | None:
    """(kind, why) when the inputs and outputs look like one of the tasks; None otherwise."""
    inputs, outputs = list(input_specs(model)), _outputs(model)
    if not inputs or not outputs:
        return None
    first, out = inputs[0], outputs[0]
    shape = out.shape or ()
    if first.type in FLOATS and _image_layout(first):
        if len(shape) == 3 and all(isinstance(d, int) for d in shape[1:]):
            where = f"output {out.name} {list(shape)} is"
            if shape[1] < shape[2] and shape[1] > 4:
                return "object-detection", f"{where} YOLOv8's [1, 4+C, N]"
            if shape[2] > 5 and shape[1] > shape[2]:
                return "object-detection", f"{where} YOLOv5's [1, N, 5+C]"
        if len(shape) == 2:
            return "image-classification", f"image input {first.name}, scores {list(shape)}"
    if _state_pairs(inputs, outputs) and first.type in FLOATS and len(first.shape or ()) <= 2:
        return "audio-stream", f"samples {first.name} and state carried between calls"
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


def _class_count(task: Task, outputs: list[TensorSpec]) -> int | None:
    spec = next(out for out in outputs if out.name == task.output)
    shape = spec.shape or ()
    last = shape[-1] if shape else None
    if task.kind == "image-classification":
        return last if isinstance(last, int) else None
    if task.output_layout == "yolov8" and len(shape) == 3 and isinstance(shape[1], int):
        return shape[1] - 4
    if task.output_layout == "yolov5" and isinstance(last, int):
        return last - 5
    return None


def resolve_task(spec: TaskSpec, model: onnx.ModelProto) -> Task | None:
    """bundle.json's task record for `spec` on `model`; None for generic. ConfigError naming the
    setting when the model does not fit it."""
    if spec.kind == "generic":
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
    if spec.kind in IMAGE_KINDS:
        softmax_outputs = {name for node in model.graph.node if node.op_type == "Softmax"
                           for name in node.output}
        task = _image_task(spec, inputs, output, softmax_outputs)
    else:
        task = _audio_task(spec, inputs, outputs, output)
    if spec.labels is not None:
        labels = (_metadata_labels(model) if spec.labels == METADATA_LABELS
                  else list(spec.labels))
        classes = _class_count(task, outputs)
        if classes is not None and len(labels) != classes:
            raise ConfigError(f"task setting 'labels': {len(labels)} labels for the {classes}"
                              f" classes of output {output!r}")
        task.labels = labels
    return task


def _image_task(spec: TaskSpec, inputs: list[TensorSpec], output: str,
                softmax_outputs: set[str]) -> Task:
    image = next((s for s in inputs if s.name == spec.input), None) or next(
        (s for s in inputs if s.type in FLOATS and len(s.shape or ()) == 4), None)
    if image is None:
        raise ConfigError(f"task {spec.kind}: the model has no 4-d float input to feed an image"
                          " to; give the input with --task input=NAME")
    layout = spec.layout or _image_layout(image)
    if layout is None:
        raise ConfigError(f"task setting 'layout': input {image.name!r} {list(image.shape or ())}"
                          " has no 3-channel axis; give layout=NCHW or NHWC")
    shape = image.shape or ()
    fixed = (shape[2], shape[3]) if layout == "NCHW" else (shape[1], shape[2])
    size = spec.size or (fixed if all(isinstance(d, int) for d in fixed) else None)
    if size is None:
        raise ConfigError(f"task setting 'size': input {image.name!r} has no fixed height and"
                          " width; give size=HEIGHTxWIDTH")
    if all(isinstance(d, int) for d in fixed) and tuple(size) != tuple(fixed):
        raise ConfigError(f"task setting 'size': {size[0]}x{size[1]}, but input {image.name!r}"
                          f" is {fixed[0]}x{fixed[1]}")
    detection = spec.kind == "object-detection"
    resize = spec.resize or ("letterbox" if detection else "stretch")
    if spec.letterbox_order == "pad-then-resize" and resize != "letterbox":
        raise ConfigError(f"task setting 'letterbox_order': pad-then-resize is a letterbox, but"
                          f" resize is {resize}; give resize=letterbox or drop letterbox_order")
    # scores that come out of a Softmax already are probabilities: not again, unless asked
    softmax = spec.softmax if "softmax" in spec.given else output not in softmax_outputs
    return Task(
        kind=spec.kind, input=image.name, output=output, size=list(size),
        resize=resize, filter=spec.filter, pad_value=spec.pad_value, placement=spec.placement,
        letterbox_order=spec.letterbox_order if resize == "letterbox" else None, layout=layout,
        crop_fraction=spec.crop_fraction if spec.resize == "center-crop" else None,
        channels=spec.channels, scale=spec.scale, mean=list(spec.mean), std=list(spec.std),
        softmax=None if detection else softmax, top_k=None if detection else spec.top_k,
        score_threshold=spec.score_threshold if detection else None,
        iou_threshold=spec.iou_threshold if detection else None,
        max_detections=spec.max_detections if detection else None,
        output_layout=spec.output_layout if detection else None,
        nms=spec.nms if detection else None,
    )


def _audio_task(spec: TaskSpec, inputs: list[TensorSpec], outputs: list[TensorSpec],
                output: str) -> Task:
    names = {s.name for s in inputs}
    out_names = {s.name for s in outputs}
    state = spec.state or _state_pairs(inputs, outputs)
    for name, out in state:
        if name not in names or out not in out_names:
            raise ConfigError(f"task setting 'state': {name}={out} names no input/output pair of"
                              " the model")
    carried = {name for name, _ in state}
    samples = next((s for s in inputs if s.name == spec.input), None) or next(
        (s for s in inputs if s.type in FLOATS and s.name not in carried), None)
    if samples is None:
        raise ConfigError("task audio-stream: no float input for the samples; give input=NAME")
    rate_input = next((s.name for s in inputs if s.name not in carried | {samples.name}
                       and s.type in ("int64", "int32") and len(s.shape or ()) <= 1), None)
    last = (samples.shape or (None,))[-1]
    context = spec.context_size
    chunk = (spec.chunk_size if "chunk_size" in spec.given or not isinstance(last, int)
             else last - context)
    if chunk < 1:
        raise ConfigError(f"task setting 'context_size': {context} leaves no room in input"
                          f" {samples.name!r} of {last} samples")
    if output in carried or output in {out for _, out in state}:
        output = next((s.name for s in outputs if s.name not in {o for _, o in state}), output)
    return Task(kind="audio-stream", input=samples.name, output=output,
                sample_rate=spec.sample_rate, chunk_size=chunk, context_size=context,
                state=dict(state),
                sample_rate_input=rate_input, score_threshold=spec.score_threshold
                if "score_threshold" in spec.given else 0.5)
