"""What a task kind module provides: its `KIND = TaskKind(...)`.

A kind module (named after the kind, `object-detection` -> `object_detection.py`) is light (no
numpy, onnx or onnxruntime at import), so `--task`'s choices and `bundle --help` read the names
from the registry; what needs them is imported when called. Its browser twin is the entry of the
same name in web/tasks/index.mjs's KINDS table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np
    import onnx

    from bundler.bundle.modelio import TensorSpec
    from bundler.bundle.records import Task
    from bundler.console import Reporter
    from bundler.tasks.check import TaskComparison
    from bundler.tasks.image import Geometry
    from bundler.tasks.spec import TaskSpec

Media = Literal["image", "audio", "text"]
FLOATS = ("float32", "float16", "float64")


@dataclass(frozen=True)
class ModelIO:
    """What a kind resolves its settings against: the model's inputs, its tensor outputs, the
    output the task reads (`output` given, else the first) and the outputs a Softmax makes."""

    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    output: str
    softmax_outputs: set[str]


# (output, task, geometry, source width, source height, top_k, threshold) -> the answer
Postprocess = Callable[["np.ndarray", "Task", "Geometry", int, int, "int | None", "float | None"],
                       list[dict[str, Any]]]
# (native answer, browser answer, the comparison to fill in, score tolerance)
Compare = Callable[[list[dict], list[dict], "TaskComparison", float], None]


@dataclass(frozen=True)
class TaskKind:
    """One task kind. Every part but `name` and `settings` is None for `generic` (no task)."""

    name: str  # as `--task` takes it and bundle.json's task.kind records it
    settings: tuple[str, ...]  # the TaskSpec settings it reads (bundler.tasks.spec)
    media: Media | None = None  # what it is fed: `bundle run --image/--audio`, `bundle test`
    method: str | None = None  # its browser API: model.classify(), detect() or stream()
    answers: str | None = None  # the key of the twin pipeline's result with the answer
    heading: str | None = None  # the demo section's heading (templates/index.html.j2)
    web_module: str | None = None  # its browser twin's postprocessing, in web/tasks/
    # why the model looks like this kind, from its inputs and tensor outputs; None if it doesn't
    looks_like: Callable[[list[TensorSpec], list[TensorSpec]], str | None] | None = None
    resolve: Callable[[TaskSpec, ModelIO], Task] | None = None  # bundle.json's task record
    # how many classes `output` (its shape) scores, to check the labels against; None: unknown
    class_count: Callable[[Task, Sequence[Any]], int | None] | None = None
    # the model with the task's preprocessing prepended (the shipped graph); None: as it is
    preprocess: Callable[[onnx.ModelProto, Task], onnx.ModelProto] | None = None
    # the graph is a speed-up its loop detects (text-generation's new key/value slices): a large
    # model (is_large) keeps its own graph rather than have its weights read into one protobuf
    preprocess_optional: bool = False
    postprocess: Postprocess | None = None  # an image kind's answer from the model's output
    compare: Compare | None = None  # `bundle test`: the browser's answer against the native one
    # `bundle run --image/--audio`: the answer, printed (reporter, file, task, result)
    report: Callable[[Reporter, Path, Task, dict[str, Any]], None] | None = None
    # the task-check table's headings: what `compare` counts, what its worst difference measures,
    # and "lowest IoU" for a kind that compares boxes
    compared: tuple[str, ...] | None = None


def image_layout(spec: TensorSpec) -> str | None:
    """NCHW or NHWC from where a 4-d input has 3 channels; None otherwise."""
    shape = spec.shape or ()
    if len(shape) != 4:
        return None
    if shape[1] == 3:
        return "NCHW"
    if shape[3] == 3:
        return "NHWC"
    return None


def same_count(native: list[dict], browser: list[dict], result: TaskComparison,
               what: str) -> bool:
    result.native_count, result.browser_count = len(native), len(browser)
    if len(native) != len(browser):
        result.error = f"a different number of {what}"
    return len(native) == len(browser)


def close_logits(expected: list, scale: list[float], got: list, result: TaskComparison,
                 tolerance: float, spread: float, what: str) -> bool:
    """Teacher-forced logits agree or not (bundler.text.agreement): each of the browser's `got`
    (a row per step, at native's probed ids) within `tolerance` plus native's own `spread` times
    the step's logit range (`scale`) of native's `expected`. `result.worst_score_difference`
    keeps the worst such ratio; on the first step out of bound, `result` fails naming where
    (`what`: "prompt 0", "transcript 0 window 1") and the bound."""
    import numpy as np

    wanted, values = np.asarray(expected, np.float64), np.asarray(got, np.float64)
    if values.shape != wanted.shape:
        result.error = (f"{what}: the browser gave teacher-forced logits of shape {values.shape}"
                        f" for native's {wanted.shape}")
        return False
    ratio = np.abs(values - wanted) / np.maximum(np.asarray(scale, np.float64), 1e-12)[:, None]
    worst = float(np.max(ratio)) if ratio.size else 0.0
    result.worst_score_difference = max(result.worst_score_difference, worst)
    if worst <= tolerance + spread:  # NaN fails
        return True
    step = int(np.argmax(np.nan_to_num(ratio, nan=np.inf).max(axis=1)))
    allowed = f"tolerance {tolerance:g}" + (f" + native's own spread {spread:.3g}" if spread
                                           else "")
    result.error = (f"{what}: the teacher-forced logits differ at step {step} by {worst:.3g}"
                    f" of the logit range ({allowed})")
    return False


def same_tokens(wanted: list[int], tokens: list[int], result: TaskComparison, what: str) -> bool:
    """Greedy tokens agree or not: on the first that parts from native's, `result` fails naming
    where (`what`: "prompt 0", "audio 1")."""
    if wanted == tokens:
        return True
    at = next((i for i, (a, b) in enumerate(zip(wanted, tokens, strict=False)) if a != b),
              min(len(wanted), len(tokens)))
    result.worst_score_difference = 1.0
    result.error = (f"{what}: the browser's tokens part from native's at step {at}"
                    f" ({tokens[at:at + 4]} for {wanted[at:at + 4]})")
    return False
