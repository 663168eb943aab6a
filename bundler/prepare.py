"""Turn the user's model into the browser-ready fp32 file every variant starts from."""

from __future__ import annotations

from pathlib import Path

import onnx

from bundler.console import Reporter
from bundler.errors import ModelError
from bundler.modelio import PROTOBUF_LIMIT, check_model, native_load_error, read_model


def _strip_zipmap(model: onnx.ModelProto) -> list[str]:
    """ZipMap (sklearn converters put it last) outputs a sequence of maps, which onnxruntime-web
    cannot return; the probability tensor it zips is the same information, so output that."""
    notes = []
    producers = {output: node for node in model.graph.node for output in node.output}
    for value in list(model.graph.output):
        node = producers.get(value.name)
        if node is None or node.op_type != "ZipMap" or node.domain != "ai.onnx.ml":
            continue
        scores = node.input[0]
        model.graph.node.remove(node)
        for other in model.graph.node:
            for i, name in enumerate(other.input):
                if name == scores:
                    other.input[i] = value.name
        for other in model.graph.node:
            for i, name in enumerate(other.output):
                if name == scores:
                    other.output[i] = value.name
        value.type.CopyFrom(onnx.TypeProto())
        value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        notes.append(f"output {value.name!r}: ZipMap removed, so it is the float32 score tensor"
                     " (onnxruntime-web returns tensors only)")
    return notes


def prepare_model(source: Path, destination: Path, reporter: Reporter) -> list[str]:
    """Check `source`, write the browser-ready copy (weights inline) to `destination`.

    Returns notes on what was changed. The onnx checker's complaints are warnings when native
    onnxruntime loads the model anyway (several exporters write models the checker rejects).
    """
    model = read_model(source)
    complaints = check_model(source)
    load_error = native_load_error(source)
    if load_error:
        reason = complaints[0] if complaints else load_error
        raise ModelError(f"{source}: onnxruntime cannot load this model ({reason})")
    for complaint in complaints:
        reporter.warn(f"onnx.checker: {complaint} (onnxruntime loads the model, so going on)")
    notes = _strip_zipmap(model)
    if model.ByteSize() > PROTOBUF_LIMIT:
        raise ModelError(
            f"{source} holds over 2 GB of weights; browsers cannot load a model that large"
            " in one piece (split or quantize it first)"
        )
    destination.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(destination))
    if notes and (error := native_load_error(destination)):
        raise ModelError(f"{source}: the browser-ready copy does not load ({error})")
    return notes
