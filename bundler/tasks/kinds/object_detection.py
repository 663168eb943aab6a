"""object-detection: a picture in, labelled boxes in its pixels out (bundler.tasks.detect,
web/tasks/detect.mjs)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler.tasks.kinds.image import image_kind, resolve_image
from bundler.tasks.kinds.spec import FLOATS, ModelIO, image_layout, same_count

if TYPE_CHECKING:
    import numpy as np

    from bundler.bundle.modelio import TensorSpec
    from bundler.bundle.records import Task
    from bundler.console import Reporter
    from bundler.tasks.check import TaskComparison
    from bundler.tasks.image import Geometry
    from bundler.tasks.spec import TaskSpec

MIN_IOU = 0.99  # `bundle test`: the least a browser box overlaps its native twin


def _looks_like(inputs: list[TensorSpec], outputs: list[TensorSpec]) -> str | None:
    first, out = inputs[0], outputs[0]
    shape = out.shape or ()
    if not (first.type in FLOATS and image_layout(first) and len(shape) == 3
            and all(isinstance(d, int) for d in shape[1:])):
        return None
    where = f"output {out.name} {list(shape)} is"
    if shape[1] < shape[2] and shape[1] > 4:
        return f"{where} YOLOv8's [1, 4+C, N]"
    if shape[2] > 5 and shape[1] > shape[2]:
        return f"{where} YOLOv5's [1, N, 5+C]"
    return None


def _resolve(spec: TaskSpec, model: ModelIO) -> Task:
    return resolve_image(spec, model, "letterbox", score_threshold=spec.score_threshold,
                         iou_threshold=spec.iou_threshold, max_detections=spec.max_detections,
                         output_layout=spec.output_layout, nms=spec.nms)


def _class_count(task: Task, shape: Sequence[Any]) -> int | None:
    if task.output_layout == "yolov8" and len(shape) == 3 and isinstance(shape[1], int):
        return shape[1] - 4
    last = shape[-1] if shape else None
    if task.output_layout == "yolov5" and isinstance(last, int):
        return last - 5
    return None


def _postprocess(output: np.ndarray, task: Task, place: Geometry, width: int, height: int,
                 top_k: int | None, threshold: float | None) -> list[dict[str, Any]]:
    from bundler.tasks.detect import detections

    return detections(output, task, place, width, height, threshold)


def _compare(native: list[dict], browser: list[dict], result: TaskComparison,
             tolerance: float) -> None:
    from bundler.tasks.detect import iou

    if not same_count(native, browser, result, "detections"):
        return
    box = lambda d: (d["box"]["x"], d["box"]["y"], d["box"]["x"] + d["box"]["width"],  # noqa: E731
                     d["box"]["y"] + d["box"]["height"])
    unmatched = list(browser)
    lowest = 1.0
    for want in native:  # each native detection: the same-label browser one that overlaps most
        same = [got for got in unmatched if got["label"] == want["label"]]
        if not same:
            result.error = f"no {want['label']!r} detection in the browser to match"
            return
        best = max(same, key=lambda got: iou(box(want), box(got)))
        unmatched.remove(best)
        lowest = min(lowest, iou(box(want), box(best)))
        result.worst_score_difference = max(result.worst_score_difference,
                                            abs(want["score"] - best["score"]))
    result.lowest_iou = lowest
    if lowest < MIN_IOU:
        result.error = f"a box overlaps its native twin by IoU {lowest:.4f} < {MIN_IOU}"
    elif result.worst_score_difference > tolerance:
        result.error = f"scores differ by more than {tolerance}"


def _report(reporter: Reporter, source: Path, task: Task, result: dict[str, Any]) -> None:
    reporter.table(f"{source}: {len(result['detections'])} detections",
                   ["label", "score", "x", "y", "width", "height"],
                   [[d["label"], f"{d['score']:.4f}",
                     *(f"{d['box'][k]:.1f}" for k in ("x", "y", "width", "height"))]
                    for d in result["detections"]])


NAME = "object-detection"

KIND = image_kind(
    name=NAME,
    settings=("score_threshold", "iou_threshold", "max_detections", "output_layout", "nms"),
    method="detect",
    answers="detections",
    heading="Detect objects",
    web_module="detect.mjs",
    looks_like=_looks_like,
    resolve=_resolve,
    class_count=_class_count,
    postprocess=_postprocess,
    compare=_compare,
    report=_report,
    compared=("detections", "worst score difference", "lowest IoU"),
)
