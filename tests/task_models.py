"""Models, images and sounds for the task tests, all made in code: a tiny image classifier, a
YOLOv8-layout detector whose boxes are constants and whose scores depend on the image's colour,
and a state-carrying audio model (an exponential moving average of the loudness)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import helper

from bundler.tasks.samples import picture, png_bytes, speech_like, wav_bytes
from tests.models import F32, I64, _const, _graph, _io, _save

__all__ = ["picture", "speech_like", "save_png", "save_wav"]

CLASSIFIER_LABELS = ["cat", "dog", "<b>bird</b> & \"quotes\"", "fish"]
DETECTOR_LABELS = ["red thing", "blue <thing>"]
# (cx, cy, w, h) in the detector's 32x32 input: a box, the same box shifted by one pixel (NMS
# drops it), the same box again for the other class, and three more.
DETECTOR_BOXES = np.array([[8, 8, 8, 8], [9, 8, 8, 8], [8, 8, 8, 8], [24, 24, 6, 10],
                           [20, 10, 4, 4], [16, 24, 10, 6]], np.float32)
# Which class each column scores (the other class scores low there).
DETECTOR_CLASSES = [0, 0, 1, 0, 1, 1]
AUDIO_CHUNK = 64
AUDIO_STATE = 8


def classifier(directory: Path) -> Path:
    """scores [1, 4] = mean over the pixels of each channel @ w + b (images [1, 3, 8, 8])."""
    nodes = [helper.make_node("ReduceMean", ["images"], ["mean"], axes=[2, 3], keepdims=0),
             helper.make_node("MatMul", ["mean", "w"], ["product"]),
             helper.make_node("Add", ["product", "b"], ["scores"])]
    w = np.array([[4, -2, 1, 0], [-1, 3, 1, 0.5], [-2, -1, 2, 1]], np.float32)
    return _save(_graph("task_classifier", nodes, [_io("images", F32, [1, 3, 8, 8])],
                        [_io("scores", F32, [1, 4])],
                        [_const("w", w), _const("b", [0.1, 0.2, -0.3, 0.0])]), directory)


def detector(directory: Path, symbolic_size: bool = False) -> Path:
    """output0 [1, 6, 6]: rows 0-3 the constant boxes, rows 4-5 the class scores, sigmoid of the
    image's mean red (class 0) or blue (class 1) in [0, 1] scaled (images [1, 3, 32, 32]; with
    `symbolic_size`, [1, 3, height, width])."""
    count = len(DETECTOR_BOXES)
    weights = np.zeros((3, 2 * count), np.float32)
    bias = np.full(2 * count, -6.0, np.float32)
    for n, cls in enumerate(DETECTOR_CLASSES):
        column = cls * count + n
        weights[0 if cls == 0 else 2, column] = 8 + n  # the colour raises the score
        bias[column] = -4 + 0.5 * n
    nodes = [helper.make_node("ReduceMean", ["images"], ["mean"], axes=[2, 3], keepdims=0),
             helper.make_node("MatMul", ["mean", "w"], ["logits"]),
             helper.make_node("Add", ["logits", "b"], ["biased"]),
             helper.make_node("Sigmoid", ["biased"], ["flat_scores"]),
             helper.make_node("Reshape", ["flat_scores", "score_shape"], ["scores"]),
             helper.make_node("Concat", ["boxes", "scores"], ["output0"], axis=1)]
    size = ["height", "width"] if symbolic_size else [32, 32]
    name = "task_detector_any_size" if symbolic_size else "task_detector"
    return _save(_graph(name, nodes, [_io("images", F32, [1, 3, *size])],
                        [_io("output0", F32, [1, 6, count])],
                        [_const("w", weights), _const("b", bias),
                         _const("score_shape", [1, 2, count], np.int64),
                         _const("boxes", DETECTOR_BOXES.T[None])]), directory)


def audio_model(directory: Path) -> Path:
    """prob [1, 1] = sigmoid(20 * mean(stateN) - 3), stateN = 0.5 * state + mean|audio| * sr /
    16000 * w (audio [1, 64], state [1, 8], sr an int64 scalar)."""
    nodes = [helper.make_node("Abs", ["audio"], ["magnitude"]),
             helper.make_node("ReduceMean", ["magnitude"], ["loudness"], axes=[1], keepdims=1),
             helper.make_node("Cast", ["sr"], ["rate"], to=F32),
             helper.make_node("Div", ["rate", "base_rate"], ["rate_factor"]),
             helper.make_node("Mul", ["loudness", "rate_factor"], ["scaled"]),
             helper.make_node("Mul", ["scaled", "w"], ["update"]),
             helper.make_node("Mul", ["state", "decay"], ["kept"]),
             helper.make_node("Add", ["kept", "update"], ["stateN"]),
             helper.make_node("ReduceMean", ["stateN"], ["level"], axes=[1], keepdims=1),
             helper.make_node("Mul", ["level", "gain"], ["gained"]),
             helper.make_node("Sub", ["gained", "offset"], ["logit"]),
             helper.make_node("Sigmoid", ["logit"], ["prob"])]
    w = np.linspace(0.5, 1.5, AUDIO_STATE, dtype=np.float32)[None]
    return _save(_graph("task_audio", nodes,
                        [_io("audio", F32, [1, AUDIO_CHUNK]), _io("state", F32, [1, AUDIO_STATE]),
                         _io("sr", I64, [])],
                        [_io("prob", F32, [1, 1]), _io("stateN", F32, [1, AUDIO_STATE])],
                        [_const("w", w), _const("decay", 0.5), _const("base_rate", 16000.0),
                         _const("gain", 20.0), _const("offset", 3.0)]), directory)


def save_png(pixels: np.ndarray, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(pixels))
    return path


def save_wav(samples: np.ndarray, rate: int, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(wav_bytes(samples, rate))
    return path
