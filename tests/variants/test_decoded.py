"""Task bundles judged on their decoded answers (bundler.variants.decoded): labels, boxes matched
by IoU and speech frames, from real onnxruntime runs of the task test models, each shown to catch
a variant whose answers drift while its raw outputs stay close."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from bundler.bundle import manifest as manifest_file
from bundler.bundle.options import BuildOptions
from bundler.commands.build import build
from bundler.console import Reporter
from bundler.tasks.build import with_task_graph
from bundler.variants.budget import default_budget, parse_budget
from bundler.variants.decoded import decoder, matched_boxes
from bundler.variants.holdout import check_held_out
from bundler.variants.metrics import measure
from tests import task_models


class Tables(Reporter):
    def __init__(self) -> None:
        self.tables: dict[str, list[dict[str, str]]] = {}

    def table(self, title, columns, rows) -> None:
        self.tables[title] = [dict(zip(columns, row, strict=True)) for row in rows]


def _detection(index: int, box: tuple[float, float, float, float], score: float = 0.9) -> dict:
    x1, y1, x2, y2 = box
    return {"index": index, "score": score, "box": {"x": x1, "y": y1, "width": x2 - x1,
                                                    "height": y2 - y1}}


def test_boxes_match_one_to_one_by_class_and_iou() -> None:
    reference = [_detection(0, (0, 0, 10, 10)), _detection(1, (20, 20, 30, 30), 0.8)]
    assert matched_boxes(reference, reference) == (2, 2)
    shifted = [_detection(0, (3, 0, 13, 10)), _detection(1, (20, 20, 30, 30))]
    assert matched_boxes(reference, shifted) == (2, 2)  # IoU 7/13 = 0.54 >= 0.5
    assert matched_boxes(reference, [_detection(0, (4, 0, 14, 10)), shifted[1]]) == (1, 3)
    assert matched_boxes(reference, [_detection(1, (0, 0, 10, 10)), shifted[1]]) == (1, 3)
    # an extra box counts against the variant, a missing one too; one variant box matches once
    assert matched_boxes(reference, [*reference, _detection(0, (50, 50, 60, 60))]) == (2, 3)
    assert matched_boxes([*reference, reference[0]], reference) == (2, 3)
    assert matched_boxes([], []) == (0, 0)


def _images(count: int, seed: int, size: int) -> np.ndarray:
    """Pictures of one colour each (the detector's and classifier's scores follow the colour)."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (count, 1, 1, 3))
    noise = rng.integers(-12, 13, (count, size, size, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def _edited(model: Path, target: Path, name: str, change) -> Path:
    """`model` with initializer `name` replaced by change(its value): a variant that drifted."""
    proto = onnx.load(model)
    for index, tensor in enumerate(proto.graph.initializer):
        if tensor.name == name:
            value = change(numpy_helper.to_array(tensor))
            proto.graph.initializer[index].CopyFrom(numpy_helper.from_array(value, name))
    onnx.save(proto, target)
    return target


@pytest.fixture(scope="module")
def detector_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the bundle, the detector, its validation images): auto on 400 held-out pictures."""
    work = tmp_path_factory.mktemp("detector")
    model = task_models.detector(work)
    validation = work / "v.npz"
    np.savez(validation, images=_images(400, seed=3, size=32))
    reporter = Tables()
    build(model, BuildOptions(output=work / "dist", verify=False, quantize="auto",
                              variants=("fp32", "int8-weights", "int8"),
                              task=["object-detection"], validation=validation,
                              objective="size"), reporter=reporter)
    (table,) = [rows for title, rows in reporter.tables.items() if title.startswith("Variants")]
    assert all(row["task answers (95% lower)"].startswith("boxes ") for row in table)
    return work / "dist", model, validation


def test_a_detector_is_judged_by_its_boxes(detector_bundle) -> None:
    directory, model, validation = detector_bundle
    manifest = manifest_file.load(directory)
    assert manifest.selection is not None
    assert manifest.selection.budget == str(default_budget("object-detection")) \
        == "cosine>=0.999,boxes>=0.99"
    assert [c.name for c in manifest.selection.candidates] == ["fp32", "int8"]
    for candidate in manifest.selection.candidates:
        assert candidate.accuracy is not None and candidate.accuracy.bounds is not None
        boxes = candidate.accuracy.bounds["boxes"]
        assert boxes.method == "wilson-95-lower" and boxes.n >= 400  # images with several boxes
        assert boxes.bound is not None and boxes.estimate is not None
        assert boxes.bound < boxes.estimate <= 1
        assert candidate.accuracy.bounds["boxes_per_sample"].n <= 400
        assert candidate.within_budget, candidate.budget
    (held_out,) = check_held_out(directory, validation, model)
    assert held_out.metrics.agreement("boxes") is not None
    assert held_out.row()[-2].startswith("boxes ")


def test_boxes_catch_a_detector_whose_boxes_moved(detector_bundle, tmp_path) -> None:
    directory, model, validation = detector_bundle
    task = manifest_file.load(directory).task
    reference = with_task_graph(model, task, tmp_path / "fp32")
    moved = with_task_graph(_edited(model, tmp_path / "moved.onnx", "boxes",
                                    lambda boxes: boxes + np.float32(4)), task, tmp_path / "moved")
    feeds = [{"images": image[None]} for image in np.load(validation)["images"][:50]]
    metrics = measure(reference, moved, feeds, decoder(task))
    n, estimate, bound = metrics.judged("boxes")
    assert n and estimate is not None and estimate < 0.5 and bound is not None
    assert metrics.judged("cosine")[2] > 0.99  # the raw outputs barely changed
    failures = parse_budget("boxes>=0.99").failures(metrics)
    assert failures and failures[0].startswith("boxes ") and "95% lower bound of" in failures[0]


def test_labels_catch_a_classifier_whose_labels_flip(tmp_path) -> None:
    model = task_models.classifier(tmp_path)
    manifest = build(model, BuildOptions(output=tmp_path / "dist", verify=False,
                                         task=["image-classification"])).to_json()
    task = manifest_file.load(tmp_path / "dist").task
    assert manifest["task"]["kind"] == "image-classification"
    reference = with_task_graph(model, task, tmp_path / "fp32")
    flipped = with_task_graph(_edited(model, tmp_path / "flipped.onnx", "b",
                                      lambda b: b + np.float32([0, 0, 0, 0.6])), task,
                              tmp_path / "flipped")
    feeds = [{"images": image[None]} for image in _images(200, seed=5, size=8)]
    same = measure(reference, reference, feeds, decoder(task))
    assert same.judged("labels")[:2] == (200, 1.0)
    drifted = measure(reference, flipped, feeds, decoder(task))
    n, estimate, _ = drifted.judged("labels")
    assert n == 200 and estimate is not None and estimate < 0.99
    assert drifted.top1_agreement == pytest.approx(estimate)  # the decoded label is the argmax


def test_frames_catch_a_voice_detector_whose_decisions_flip(tmp_path) -> None:
    model = task_models.audio_model(tmp_path)
    build(model, BuildOptions(output=tmp_path / "dist", verify=False, task=["audio-stream"]))
    task = manifest_file.load(tmp_path / "dist").task
    assert task is not None and task.score_threshold == 0.5
    rng = np.random.default_rng(9)
    feeds = [{"audio": (rng.random((1, task_models.AUDIO_CHUNK)) * level).astype(np.float32),
              "state": rng.random((1, task_models.AUDIO_STATE)).astype(np.float32) * 0.2,
              "sr": np.array(16000, np.int64)} for level in np.linspace(0, 0.5, 300)]
    louder = _edited(model, tmp_path / "louder.onnx", "offset", lambda _: np.float32(2.5))
    same = measure(model, model, feeds, decoder(task))
    assert same.judged("frames")[:2] == (300, 1.0)
    n, estimate, bound = measure(model, louder, feeds, decoder(task)).judged("frames")
    assert n == 300 and estimate is not None and 0.5 < estimate < 0.99
    assert bound is not None and bound < estimate


def test_generated_pictures_vouch_for_no_boxes(tmp_path) -> None:
    model = task_models.detector(tmp_path)
    manifest = build(model, BuildOptions(output=tmp_path / "dist", verify=False, quantize="auto",
                                         variants=("fp32", "int8"), task=["object-detection"]),
                     reporter=Reporter()).to_json()
    assert manifest["sessions"][0]["default_variant"] == "fp32"
    assert manifest["selection"]["note"] == (
        "auto: generated inputs cannot show boxes; pass --validation with real inputs (at least"
        " 381 boxes); shipping fp32, which is exact by construction")
    int8 = next(c for c in manifest["selection"]["candidates"] if c["name"] == "int8")
    assert "boxes cannot be shown on generated inputs" in int8["budget"]
    assert manifest["selection"]["candidates"][0]["within_budget"]  # fp32
