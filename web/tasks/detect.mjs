// Object detection's postprocessing: YOLO decoding, per-class NMS and the boxes in the source's
// pixels. The spec is bundler/tasks/detect.py.
import { labelOf } from './classify.mjs';

export function iou(a, b) {
  const width = Math.max(0, Math.min(a[2], b[2]) - Math.max(a[0], b[0]));
  const height = Math.max(0, Math.min(a[3], b[3]) - Math.max(a[1], b[1]));
  const inter = width * height;
  const union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return union > 0 ? inter / union : 0;
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

export function nonMaxSuppression(found, iouThreshold, maxDetections) {
  const order = [...found.keys()].sort((a, b) => found[b][0] - found[a][0]);
  const kept = [];
  for (const i of order) {
    const [, cls, box] = found[i];
    if (kept.every((other) => other[1] !== cls || iou(box, other[2]) <= iouThreshold)) {
      kept.push(found[i]);
      if (kept.length === maxDetections) break;
    }
  }
  return kept;
}

export function detections(output, task, place, sourceWidth, sourceHeight, threshold) {
  let found = candidates(output, task, threshold ?? task.score_threshold ?? 0.25);
  const max = task.max_detections ?? 300;
  found = task.output_layout === 'nms-inside'
    ? found.sort((a, b) => b[0] - a[0]).slice(0, max)
    : nonMaxSuppression(found, task.iou_threshold ?? 0.7, max);
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
