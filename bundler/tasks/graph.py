"""The numeric part of image preprocessing, prepended to the model as ONNX ops, so that the
browser and native onnxruntime run the very same graph (and the build's conformance check covers
it): uint8 [1, H, W, 3] RGB -> Cast -> (Gather: BGR) -> x * scale/std - mean/std -> (Transpose:
NCHW) -> the model's own input."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from bundler.bundle.manifest import Task

PREFIX = "task_preprocess_"


def image_preprocessing_constants(task: Task) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, offset) per channel, in the graph's channel order: y = x * m + o."""
    scale = float(task.scale if task.scale is not None else 1 / 255)
    mean = np.asarray(task.mean or (0, 0, 0), np.float64)
    std = np.asarray(task.std or (1, 1, 1), np.float64)
    multiplier, offset = scale / std, -mean / std
    return multiplier.astype(np.float32), offset.astype(np.float32)


def preprocess_numpy(pixels: np.ndarray, task: Task) -> np.ndarray:
    """What the prepended ops compute, in numpy (the graph is tested against it):
    uint8 [1, H, W, 3] RGB -> the model's float input."""
    x = pixels.astype(np.float32)
    if task.channels == "BGR":
        x = x[..., ::-1]
    multiplier, offset = image_preprocessing_constants(task)
    x = x * multiplier + offset
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2) if task.layout == "NCHW" else x)


def prepend_image_preprocessing(model: onnx.ModelProto, task: Task) -> onnx.ModelProto:
    """`model` with its image input replaced by uint8 [1, H, W, 3] (same name) and the ops that
    turn it into what the model took."""
    graph = model.graph
    original = next(value for value in graph.input if value.name == task.input)
    element_type = original.type.tensor_type.elem_type
    inner = PREFIX + "float_input"
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name == task.input:
                node.input[index] = inner
    for output in graph.output:  # an input that is an output too stays the model's own
        if output.name == task.input:
            output.name = inner
    height, width = task.size or (0, 0)
    image = helper.make_tensor_value_info(task.input, onnx.TensorProto.UINT8,
                                          [1, height, width, 3])
    multiplier, offset = image_preprocessing_constants(task)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(element_type)
    initializers = [numpy_helper.from_array(multiplier.astype(dtype), PREFIX + "multiplier"),
                    numpy_helper.from_array(offset.astype(dtype), PREFIX + "offset")]
    nodes = [helper.make_node("Cast", [task.input], [PREFIX + "cast"], to=element_type,
                              name=PREFIX + "cast")]
    current = PREFIX + "cast"
    if task.channels == "BGR":
        initializers.append(numpy_helper.from_array(np.array([2, 1, 0], np.int64),
                                                    PREFIX + "bgr"))
        nodes.append(helper.make_node("Gather", [current, PREFIX + "bgr"], [PREFIX + "channels"],
                                      axis=3, name=PREFIX + "bgr"))
        current = PREFIX + "channels"
    nodes.append(helper.make_node("Mul", [current, PREFIX + "multiplier"], [PREFIX + "scaled"],
                                  name=PREFIX + "scale"))
    last = inner if task.layout != "NCHW" else PREFIX + "normalised"
    nodes.append(helper.make_node("Add", [PREFIX + "scaled", PREFIX + "offset"], [last],
                                  name=PREFIX + "normalise"))
    if task.layout == "NCHW":
        nodes.append(helper.make_node("Transpose", [last], [inner], perm=[0, 3, 1, 2],
                                      name=PREFIX + "layout"))
    position = list(graph.input).index(original)
    graph.input.remove(original)
    graph.input.insert(position, image)
    for node in reversed(nodes):
        graph.node.insert(0, node)
    graph.initializer.extend(initializers)
    return model
