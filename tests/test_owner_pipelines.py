"""Owner-exact image pipelines: filter=cv2-linear and pil-bilinear against OpenCV's and Pillow's
own resizes byte for byte, letterbox_order=pad-then-resize + cv2-linear + scale=1/255 against
cv2.copyMakeBorder + cv2.dnn.blobFromImage on real photographs, nms=class-agnostic against
cv2.dnn.NMSBoxes, and the JavaScript twins (under Node) against the Python ones."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import cv2
import matplotlib
import numpy as np
import onnx
import pytest
from PIL import Image

from bundler.bundle.codec import to_json as _to_json
from bundler.bundle.manifest import Task
from bundler.errors import ConfigError
from bundler.site.npmtools import node_executable
from bundler.tasks.detect import detections, non_max_suppression
from bundler.tasks.graph import preprocess_numpy
from bundler.tasks.image import Geometry, fit_image, geometry, read_image
from bundler.tasks.resample import resize_cv2_linear, resize_pil_bilinear
from bundler.tasks.resolve import resolve_task
from bundler.tasks.spec import parse_task
from tests import task_models

WEB_TASKS = Path(__file__).resolve().parent.parent / "web" / "tasks"
PHOTOS = sorted((Path(matplotlib.get_data_path()) / "sample_data").glob("*.[jp][pn]g"))
ODD = [1, 2, 3, 5, 7, 17, 31, 64, 100, 255, 333]


def _size_pairs(count: int, seed: int) -> list[tuple[int, int, int, int]]:
    """(source width, height, width, height): odd sizes, up and down by non-integer factors,
    exact halves, 1-pixel-wide and -high images, and random ones."""
    rng = np.random.default_rng(seed)
    pairs = [(2 * w, 2 * h, w, h) for w, h in [(1, 1), (3, 5), (40, 17), (160, 120)]]
    pairs += [(1, 9, 5, 3), (9, 1, 4, 7), (1, 1, 3, 2), (7, 1, 1, 1), (1, 40, 1, 13),
              (640, 480, 320, 320), (333, 129, 320, 320), (300, 410, 37, 61)]
    while len(pairs) < count:
        choose = [int(rng.choice(ODD)) if rng.random() < 0.5 else int(rng.integers(1, 400))
                  for _ in range(4)]
        pairs.append(tuple(choose))
    return pairs


def _images(count: int, seed: int) -> list[tuple[np.ndarray, int, int]]:
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, 256, (sh, sw, 3), dtype=np.uint8), w, h)
            for sw, sh, w, h in _size_pairs(count, seed)]


def test_cv2_linear_is_opencvs_inter_linear_byte_for_byte() -> None:
    for pixels, width, height in _images(300, seed=1):
        expected = cv2.resize(pixels, (width, height), interpolation=cv2.INTER_LINEAR)
        assert np.array_equal(resize_cv2_linear(pixels, width, height), expected), \
            (pixels.shape, width, height)


def test_pil_bilinear_is_pillows_bilinear_byte_for_byte() -> None:
    for pixels, width, height in _images(300, seed=2):
        expected = np.asarray(Image.fromarray(pixels).resize((width, height),
                                                             Image.Resampling.BILINEAR))
        assert np.array_equal(resize_pil_bilinear(pixels, width, height), expected), \
            (pixels.shape, width, height)


def _owner_task(**settings) -> Task:
    values = {"kind": "object-detection", "input": "images", "output": "output0",
              "size": [320, 320], "resize": "letterbox", "letterbox_order": "pad-then-resize",
              "placement": "top-left", "pad_value": 0, "filter": "cv2-linear",
              "layout": "NCHW", "channels": "RGB", "scale": parse_task(["scale=1/255"],
                                                                      Path()).scale,
              "mean": [0, 0, 0], "std": [1, 1, 1]}
    return Task(**{**values, **settings})


def _photographs() -> list[np.ndarray]:
    """The photographs matplotlib ships, and crops and flips of them (odd sizes, both
    orientations)."""
    assert any(path.suffix == ".jpg" for path in PHOTOS), PHOTOS
    found = []
    for path in PHOTOS:
        rgb = read_image(path)
        found += [rgb, rgb[13:, 7:], rgb[:301, :170], rgb[::-1, 5:], rgb[:, ::-1][:97],
                  rgb.transpose(1, 0, 2)[3:]]
    return [np.ascontiguousarray(photo) for photo in found]


def test_pad_then_resize_cv2_linear_is_the_owners_blob_from_image_exactly() -> None:
    """The YOLOv8n owner's pipeline: pad to a square with zeros at the bottom/right, then
    cv2.dnn.blobFromImage(img, 1/255, (320, 320), swapRB=True): the same float32 tensor."""
    task = _owner_task()
    for photo in _photographs():
        bgr = photo[..., ::-1]
        side = max(bgr.shape[:2])
        padded = cv2.copyMakeBorder(bgr, 0, side - bgr.shape[0], 0, side - bgr.shape[1],
                                    cv2.BORDER_CONSTANT, value=(0, 0, 0))
        blob = cv2.dnn.blobFromImage(padded, 1 / 255, (320, 320), swapRB=True)
        ours = preprocess_numpy(fit_image(photo, task)[0], task)
        assert ours.dtype == blob.dtype and np.array_equal(ours, blob), photo.shape


@pytest.mark.parametrize("placement", ["top-left", "centre"])
def test_pad_then_resize_pil_bilinear_is_pillows_resize_of_the_padded_photo(
        placement: str) -> None:
    task = _owner_task(filter="pil-bilinear", placement=placement, pad_value=114,
                       size=[224, 256])
    for photo in _photographs():
        height, width = photo.shape[:2]
        canvas_width = width if width * 224 >= height * 256 else round(height * 256 / 224)
        canvas_height = height if canvas_width != width else round(width * 224 / 256)
        left, top = ((canvas_width - width) // 2, (canvas_height - height) // 2) \
            if placement == "centre" else (0, 0)
        padded = Image.new("RGB", (canvas_width, canvas_height), (114, 114, 114))
        padded.paste(Image.fromarray(photo), (left, top))
        expected = np.asarray(padded.resize((256, 224), Image.Resampling.BILINEAR))
        assert np.array_equal(fit_image(photo, task)[0][0], expected), photo.shape


def test_pad_then_resize_geometry_maps_boxes_back_to_the_source() -> None:
    place = geometry(200, 100, _owner_task(placement="centre"))  # canvas 200 x 200, top 50
    assert (place.scale_x, place.scale_y, place.left, place.top) == (1.6, 1.6, 0.0, 80.0)
    assert (place.width, place.height) == (320.0, 160.0)
    found = detections(np.array([[[160.0], [160.0], [32.0], [16.0], [0.9]]], np.float32),
                       _owner_task(placement="centre", nms="class-agnostic",
                                   score_threshold=0.25, iou_threshold=0.45,
                                   max_detections=10, output_layout="yolov8"),
                       place, 200, 100)
    assert found[0]["box"] == {"x": 90.0, "y": 45.0, "width": 20.0, "height": 10.0}


def test_pad_then_resize_needs_a_letterbox(tmp_path: Path) -> None:
    model = onnx.load(str(task_models.detector(tmp_path)))
    spec = parse_task(["object-detection", "resize=stretch", "letterbox-order=pad-then-resize"],
                      tmp_path)
    with pytest.raises(ConfigError, match="'letterbox_order': pad-then-resize is a letterbox"):
        resolve_task(spec, model)


@pytest.mark.parametrize(("text", "expected"), [("1/255", 1 / 255), (" 2 / 4 ", 0.5),
                                                ("0.5", 0.5), ("1e-3/2", 0.0005)])
def test_a_scale_may_be_a_fraction(text: str, expected: float) -> None:
    assert parse_task(["image-classification", f"scale={text}"], Path()).scale == expected
    assert parse_task({"kind": "image-classification", "mean": f"{text},{text},0"},
                      Path()).mean == (expected, expected, 0.0)


@pytest.mark.parametrize(("text", "message"), [("1/0", "'1/0' divides by zero"),
                                               ("one/255", "expected a number or a fraction"),
                                               ("1/2/3", "expected a number or a fraction"),
                                               ("/", "expected a number or a fraction")])
def test_a_bad_fraction_names_the_setting(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"task setting 'scale': {message}"):
        parse_task(["image-classification", f"scale={text}"], Path())


def test_unknown_nms_and_letterbox_order_values_are_refused() -> None:
    with pytest.raises(ValueError, match="'nms': expected one of per-class, class-agnostic"):
        parse_task(["object-detection", "nms=global"], Path())
    with pytest.raises(ValueError, match="'letterbox_order': expected one of resize-then-pad"):
        parse_task(["object-detection", "letterbox-order=pad"], Path())


def _random_boxes(rng: np.random.Generator, count: int, trial: int
                  ) -> tuple[list[list[float]], np.ndarray, np.ndarray]:
    """[x, y, w, h] with ties in scores and coordinates, heavy overlaps, empty boxes."""
    if trial % 3 == 0:  # many equal corners and sizes: ties everywhere
        x, y = rng.choice([0.0, 1.0, 2.5, 10.0], count), rng.choice([0.0, 3.0, 4.0], count)
        w, h = rng.choice([0.0, 4.0, 10.0, 10.5], count), rng.choice([2.0, 8.0, 9.5], count)
    else:
        x, y = rng.uniform(-5, 40, count), rng.uniform(-5, 40, count)
        w, h = rng.uniform(0, 30, count), rng.uniform(0.5, 30, count)
    scores = (rng.choice([0.25, 0.3, 0.5, 0.9], count) if trial % 2
              else rng.uniform(0, 1, count)).astype(np.float32)
    boxes = [[float(a), float(b), float(c), float(d)]
             for a, b, c, d in zip(x, y, w, h, strict=True)]
    return boxes, scores, rng.integers(0, 3, count)


def test_class_agnostic_nms_is_cv2_dnn_nmsboxes() -> None:
    rng = np.random.default_rng(4)
    for trial in range(300):
        count = int(rng.integers(1, 60))
        boxes, scores, classes = _random_boxes(rng, count, trial)
        threshold = float(rng.choice([0.25, 0.3, 0.45]))
        iou_threshold = float(rng.choice([0.45, 0.5, 0.7, 1 / 3]))
        expected = [int(i) for i in cv2.dnn.NMSBoxes(boxes, scores.tolist(), threshold,
                                                     iou_threshold)]
        above = [n for n in range(count) if scores[n] > np.float32(threshold)]
        found = [(float(scores[n]), int(classes[n]), (boxes[n][0], boxes[n][1],
                  boxes[n][0] + boxes[n][2], boxes[n][1] + boxes[n][3])) for n in above]
        chosen = non_max_suppression(found, iou_threshold, 1000, class_agnostic=True)
        assert [above[found.index(item)] for item in chosen] == expected, trial


def test_class_agnostic_keeps_scores_above_the_threshold_as_opencv() -> None:
    """cv2.dnn.NMSBoxes keeps score > threshold; per-class (Ultralytics' rule here) >=."""
    output = np.array([[[5.0, 50.0], [5.0, 50.0], [4.0, 4.0], [4.0, 4.0], [0.25, 0.5]]],
                      np.float32)
    place = Geometry(1, 1, 0, 0, 100, 100)
    for nms, expected in [("per-class", [0.5, 0.25]), ("class-agnostic", [0.5])]:
        task = Task(kind="object-detection", input="x", output="y", output_layout="yolov8",
                    nms=nms, score_threshold=0.25, iou_threshold=0.45, max_detections=10)
        assert [d["score"] for d in detections(output, task, place, 100, 100)] == expected


def test_class_agnostic_nms_drops_an_overlapping_box_of_another_class() -> None:
    box, shifted = (0.0, 0.0, 10.0, 10.0), (1.0, 0.0, 11.0, 10.0)  # IoU 9 / 11
    found = [(0.9, 0, box), (0.8, 1, shifted)]
    assert [cls for _, cls, _ in non_max_suppression(found, 0.45, 100)] == [0, 1]
    assert [cls for _, cls, _ in non_max_suppression(found, 0.45, 100, True)] == [0]


NODE_TWINS = """
import { fitImage } from '%(tasks)s/image.mjs';
import { detections } from '%(tasks)s/detect.mjs';
import { readFileSync } from 'node:fs';
const cases = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const fitted = cases.images.map(({ rgba, width, height, task }) =>
  Array.from(fitImage({ data: Uint8ClampedArray.from(Buffer.from(rgba, 'base64')), width,
                        height }, task).data));
const found = cases.outputs.map(({ data, dims, task }) =>
  detections({ data: Float32Array.from(data), dims }, task,
             { scale_x: 1, scale_y: 1, left: 0, top: 0, width: 1000, height: 1000 }, 1000, 1000));
process.stdout.write(JSON.stringify({ fitted, found }));
"""


def test_the_javascript_twins_match_the_python_ones_under_node(tmp_path: Path) -> None:
    """fitImage under every owner filter, letterbox order and placement, on random images of
    odd sizes (RGBA in, as the browser gives), and detections() with class-agnostic NMS."""
    import base64

    rng = np.random.default_rng(9)
    settings = [dict(filter=filter, resize=resize, letterbox_order=order, placement=placement,
                     pad_value=pad)
                for filter in ("cv2-linear", "pil-bilinear", "bilinear", "antialias")
                for resize, order, placement, pad in [
                    ("letterbox", "pad-then-resize", "top-left", 0),
                    ("letterbox", "pad-then-resize", "centre", 114),
                    ("letterbox", "resize-then-pad", "centre", 114),
                    ("stretch", None, "centre", 114), ("center-crop", None, "centre", 114)]]
    images, expected = [], []
    for index, (source_width, source_height, width, height) in enumerate(
            _size_pairs(len(settings) * 3, seed=5)):
        task = Task(kind="object-detection", input="images", output="output0",
                    size=[max(height, 1), max(width, 1)], crop_fraction=0.875,
                    **settings[index % len(settings)])
        rgba = rng.integers(0, 256, (source_height, source_width, 4), dtype=np.uint8)
        images.append({"rgba": base64.b64encode(rgba.tobytes()).decode(),
                       "width": source_width, "height": source_height, "task": _to_json(task)})
        expected.append(fit_image(np.ascontiguousarray(rgba[..., :3]), task)[0].ravel())
    outputs, expected_found = [], []
    for trial in range(40):
        count = int(rng.integers(1, 50))
        boxes, scores, classes = _random_boxes(rng, count, trial)
        output = np.zeros((1, 7, count), np.float32)
        for n, (x, y, w, h) in enumerate(boxes):
            output[0, :4, n] = (x + w / 2, y + h / 2, w, h)
            output[0, 4 + classes[n], n] = scores[n]
        task = Task(kind="object-detection", input="x", output="y", output_layout="yolov8",
                    nms="class-agnostic" if trial % 4 else "per-class", score_threshold=0.3,
                    iou_threshold=0.45, max_detections=1000)
        outputs.append({"data": output.ravel().tolist(), "dims": list(output.shape),
                        "task": _to_json(task)})
        expected_found.append(detections(output, task, Geometry(1, 1, 0, 0, 1000, 1000),
                                         1000, 1000))
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps({"images": images, "outputs": outputs}), encoding="utf-8")
    script = tmp_path / "twins.mjs"
    script.write_text(NODE_TWINS % {"tasks": WEB_TASKS.as_uri()}, encoding="utf-8")
    result = subprocess.run([str(node_executable()), str(script), str(cases)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    for image, fitted, want in zip(images, got["fitted"], expected, strict=True):
        assert np.array_equal(np.array(fitted, np.uint8), want), (
            image["width"], image["height"], image["task"])
    for found, want in zip(got["found"], expected_found, strict=True):
        assert [(d["index"], d["score"], d["box"]) for d in found] == \
            [(d["index"], d["score"], {k: float(v) for k, v in d["box"].items()}) for d in want]
    assert any(found for found in got["found"])

