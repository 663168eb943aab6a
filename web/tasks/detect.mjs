// Object detection's postprocessing: YOLO decoding, per-class or class-agnostic NMS and the
// boxes in the source's pixels. The spec is bundler/tasks/detect.py.
import { labelOf } from './classify.mjs';

export function iou(a, b) {
  const width = Math.max(0, Math.min(a[2], b[2]) - Math.max(a[0], b[0]));
  const height = Math.max(0, Math.min(a[3], b[3]) - Math.max(a[1], b[1]));
  const inter = width * height;
  const union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return union > 0 ? inter / union : 0;
}

// OpenCV's Rect_ operator & on [x, y, width, height]: the intersection's area.
function intersection(a, b) {
  if (a[2] <= 0 || a[3] <= 0 || b[2] <= 0 || b[3] <= 0) return 0;
  const [xMin, xMax] = a[0] < b[0] ? [a, b] : [b, a];
  const [yMin, yMax] = a[1] < b[1] ? [a, b] : [b, a];
  if ((xMin[0] < 0 && xMin[0] + xMin[2] < xMax[0]) || (yMin[1] < 0 && yMin[1] + yMin[3] < yMax[1])) {
    return 0;
  }
  const width = Math.min(xMin[2] - (xMax[0] - xMin[0]), xMax[2]);
  const height = Math.min(yMin[3] - (yMax[1] - yMin[1]), yMax[3]);
  return width > 0 && height > 0 ? width * height : 0;
}

// IoU as cv2.dnn.NMSBoxes computes it (Rect2d, jaccardDistance, float32 overlap).
export function cvIou(a, b) {
  const [rectA, rectB] = [a, b].map((box) => [box[0], box[1], box[2] - box[0], box[3] - box[1]]);
  const areaA = rectA[2] * rectA[3];
  const areaB = rectB[2] * rectB[3];
  if (areaA + areaB <= Number.EPSILON) return 1;
  const inter = intersection(rectA, rectB);
  return Math.fround(1 - Math.fround(1 - inter / (areaA + areaB - inter)));
}

// [score, class, [x1, y1, x2, y2]] of every prediction at or above the threshold.
export function candidates({ data, dims }, task, threshold) {
  const found = [];
  const rows = dims[dims.length - 2];
  const columns = dims[dims.length - 1];
  if (task.output_layout === 'nms-inside') {
    for (let r = 0; r < rows; r++) {
      const at = r * columns;
      if (data[at + 4] >= threshold) {
        found.push([data[at + 4], Math.trunc(data[at + 5]),
                    [data[at], data[at + 1], data[at + 2], data[at + 3]]]);
      }
    }
    return found;
  }
  const yolov8 = task.output_layout === 'yolov8';
  const count = yolov8 ? columns : rows;
  const classes = yolov8 ? rows - 4 : columns - 5;
  // value k of prediction n
  const at = yolov8 ? (n, k) => data[k * columns + n] : (n, k) => data[n * columns + k];
  const first = yolov8 ? 4 : 5;
  for (let n = 0; n < count; n++) {
    let best = 0;
    for (let c = 1; c < classes; c++) if (at(n, first + c) > at(n, first + best)) best = c;
    const score = yolov8 ? at(n, first + best) : at(n, 4) * at(n, first + best);
    if (!(score >= threshold)) continue;
    const [cx, cy, w, h] = [at(n, 0), at(n, 1), at(n, 2), at(n, 3)];
    found.push([score, best, [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]]);
  }
  return found;
}

export function nonMaxSuppression(found, iouThreshold, maxDetections, classAgnostic = false) {
  const order = [...found.keys()].sort((a, b) => found[b][0] - found[a][0]);
  const kept = [];
  const [overlap, limit] = classAgnostic ? [cvIou, Math.fround(iouThreshold)]
    : [iou, iouThreshold];
  for (const i of order) {
    const [, cls, box] = found[i];
    if (kept.every((other) => (other[1] !== cls && !classAgnostic)
                              || overlap(box, other[2]) <= limit)) {
      kept.push(found[i]);
      if (kept.length === maxDetections) break;
    }
  }
  return kept;
}

export function detections(output, task, place, sourceWidth, sourceHeight, threshold) {
  const agnostic = task.nms === 'class-agnostic';
  let least = threshold ?? task.score_threshold ?? 0.25;
  if (agnostic) least = Math.fround(least); // cv2.dnn.NMSBoxes: score > float32(threshold)
  let found = candidates(output, task, least);
  if (agnostic) found = found.filter(([score]) => score > least);
  const max = task.max_detections ?? 300;
  found = task.output_layout === 'nms-inside'
    ? found.sort((a, b) => b[0] - a[0]).slice(0, max)
    : nonMaxSuppression(found, task.iou_threshold ?? 0.7, max, agnostic);
  const clip = (value, limit) => Math.min(Math.max(value, 0), limit);
  return found.map(([score, index, [x1, y1, x2, y2]]) => {
    const left = clip((x1 - place.left) / place.scale_x, sourceWidth);
    const top = clip((y1 - place.top) / place.scale_y, sourceHeight);
    const right = clip((x2 - place.left) / place.scale_x, sourceWidth);
    const bottom = clip((y2 - place.top) / place.scale_y, sourceHeight);
    return { label: labelOf(task, index), index, score,
             box: { x: left, y: top, width: right - left, height: bottom - top } };
  });
}
