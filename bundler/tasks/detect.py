"""Object detection's postprocessing (the spec; web/tasks/detect.mjs is its twin), all in float64:
  yolov8     [1, 4+C, N]: box (cx, cy, w, h) = rows 0-3 of column n, score = the highest of rows
             4.., class = its row (the first on a tie)
  yolov5     [1, N, 5+C]: box = columns 0-3 of row n, score = objectness (column 4) times the
             highest class score, class = its column
  nms-inside [1, N, 6] or [N, 6]: x1, y1, x2, y2, score, class (NMS already done)
Kept: score >= threshold; then per-class greedy NMS (nms = per-class, Ultralytics' default): by
score (ties: the earlier candidate first), a box is dropped when its IoU with a kept box of its
class is > iou_threshold; at most max_detections, by score.
nms = class-agnostic is cv2.dnn.NMSBoxes (eta 1, no top_k) over every class at once: kept when
score > float32(threshold); by score (ties: the earlier candidate first), a box is dropped when
float32(1 - float32(1 - IoU)) > float32(iou_threshold), IoU as OpenCV's Rect2d (x1, y1, x2 - x1,
y2 - y1) gives it (cv_iou); at most max_detections.
Boxes are mapped back to the source's pixels (image.Geometry) and clipped to it."""

from __future__ import annotations

from typing import Any

import numpy as np

from bundler.bundle.manifest import Task
from bundler.tasks.classify import label_of
from bundler.tasks.image import Geometry

Box = tuple[float, float, float, float]  # x1, y1, x2, y2


def iou(a: Box, b: Box) -> float:
    width = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    height = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _float32(value: float) -> float:
    return float(np.float32(value))


def cv_iou(a: Box, b: Box) -> float:
    """IoU as cv2.dnn.NMSBoxes computes it: Rect2d's area, intersection (operator &) and
    jaccardDistance, in float64, the overlap then rounded to float32 twice as OpenCV does."""
    rect_a, rect_b = ((box[0], box[1], box[2] - box[0], box[3] - box[1]) for box in (a, b))
    area_a, area_b = rect_a[2] * rect_a[3], rect_b[2] * rect_b[3]
    if area_a + area_b <= np.finfo(np.float64).eps:
        return 1.0
    inter = _intersection(rect_a, rect_b)
    return _float32(1 - _float32(1 - inter / (area_a + area_b - inter)))


def _intersection(a: Box, b: Box) -> float:
    """OpenCV's Rect_ operator & on (x, y, width, height), its area."""
    if a[2] <= 0 or a[3] <= 0 or b[2] <= 0 or b[3] <= 0:
        return 0.0
    x_min, x_max = (a, b) if a[0] < b[0] else (b, a)
    y_min, y_max = (a, b) if a[1] < b[1] else (b, a)
    if ((x_min[0] < 0 and x_min[0] + x_min[2] < x_max[0])
            or (y_min[1] < 0 and y_min[1] + y_min[3] < y_max[1])):
        return 0.0
    width = min(x_min[2] - (x_max[0] - x_min[0]), x_max[2])
    height = min(y_min[3] - (y_max[1] - y_min[1]), y_max[3])
    return width * height if width > 0 and height > 0 else 0.0


def candidates(output: np.ndarray, task: Task, threshold: float
               ) -> list[tuple[float, int, Box]]:
    """(score, class, box in input pixels) of every prediction at or above `threshold`."""
    data = np.asarray(output, np.float64)
    if task.output_layout == "nms-inside":
        rows = data.reshape(-1, data.shape[-1])
        return [(float(r[4]), int(r[5]), (float(r[0]), float(r[1]), float(r[2]), float(r[3])))
                for r in rows if r[4] >= threshold]
    if task.output_layout == "yolov8":
        rows = data.reshape(data.shape[-2], data.shape[-1]).T  # N x (4+C)
        boxes, scores_of = rows[:, :4], rows[:, 4:]
        classes = scores_of.argmax(axis=1)
        scores = scores_of[np.arange(len(rows)), classes]
    else:  # yolov5
        rows = data.reshape(data.shape[-2], data.shape[-1])
        boxes, scores_of = rows[:, :4], rows[:, 5:]
        classes = scores_of.argmax(axis=1)
        scores = rows[:, 4] * scores_of[np.arange(len(rows)), classes]
    found = []
    for n in np.flatnonzero(scores >= threshold):
        cx, cy, w, h = boxes[n]
        found.append((float(scores[n]), int(classes[n]),
                      (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)))
    return found


def non_max_suppression(found: list[tuple[float, int, Box]], iou_threshold: float,
                        max_detections: int, class_agnostic: bool = False
                        ) -> list[tuple[float, int, Box]]:
    order = sorted(range(len(found)), key=lambda i: -found[i][0])  # stable: ties keep order
    kept: list[tuple[float, int, Box]] = []
    overlap, limit = (cv_iou, _float32(iou_threshold)) if class_agnostic else (iou, iou_threshold)
    for i in order:
        score, cls, box = found[i]
        if all((other[1] != cls and not class_agnostic) or overlap(box, other[2]) <= limit
               for other in kept):
            kept.append(found[i])
            if len(kept) == max_detections:
                break
    return kept


def detections(output: np.ndarray, task: Task, place: Geometry, source_width: int,
               source_height: int, threshold: float | None = None) -> list[dict[str, Any]]:
    """The detections in the source's pixels: [{label, index, score, box: {x, y, width,
    height}}], by score."""
    threshold = task.score_threshold if threshold is None else threshold
    threshold = threshold if threshold is not None else 0.25
    agnostic = task.nms == "class-agnostic"
    if agnostic:  # cv2.dnn.NMSBoxes: score > float32(threshold)
        threshold = _float32(threshold)
    found = candidates(output, task, threshold)
    if agnostic:
        found = [item for item in found if item[0] > threshold]
    if task.output_layout != "nms-inside":
        found = non_max_suppression(found, task.iou_threshold or 0.7, task.max_detections or 300,
                                    agnostic)
    else:
        found = sorted(found, key=lambda item: -item[0])[:task.max_detections or 300]
    result = []
    for score, cls, (x1, y1, x2, y2) in found:
        left = min(max((x1 - place.left) / place.scale_x, 0.0), source_width)
        top = min(max((y1 - place.top) / place.scale_y, 0.0), source_height)
        right = min(max((x2 - place.left) / place.scale_x, 0.0), source_width)
        bottom = min(max((y2 - place.top) / place.scale_y, 0.0), source_height)
        result.append({"label": label_of(task, cls), "index": cls, "score": score,
                       "box": {"x": left, "y": top, "width": right - left,
                               "height": bottom - top}})
    return result
