"""Task pipelines in Python (no browser): the preprocessing in the graph against numpy, resize
geometry, YOLO decoding and NMS edge cases, audio streaming, the option and the native runner."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from bundler.bundle.manifest import Task
from bundler.bundle.modelio import TensorSpec
from bundler.bundle.options import BuildOptions, merge
from bundler.errors import ConfigError
from bundler.tasks.audio import AudioStream, resample, segments
from bundler.tasks.classify import top_classes
from bundler.tasks.detect import candidates, detections, iou, non_max_suppression
from bundler.tasks.graph import prepend_image_preprocessing, preprocess_numpy
from bundler.tasks.image import fit_image, geometry
from bundler.tasks.resolve import likely_task, resolve_task
from bundler.tasks.spec import TaskSpec, parse_task
from bundler.verify.reference import run_native
from tests import task_models
from tests.conftest import run_cli
from tests.models import F32, _graph, _io, _save


def _image_task(**settings) -> Task:
    values = {"kind": "object-detection", "input": "images", "output": "out", "size": [32, 48],
              "resize": "letterbox", "filter": "bilinear", "pad_value": 114,
              "placement": "centre", "layout": "NCHW", "channels": "RGB", "scale": 1 / 255,
              "mean": [0, 0, 0], "std": [1, 1, 1], "score_threshold": 0.25,
              "iou_threshold": 0.45, "max_detections": 100, "output_layout": "yolov8"}
    return Task(**{**values, **settings})


@pytest.mark.parametrize("layout, channels", [("NCHW", "BGR"), ("NHWC", "RGB")])
def test_preprocessing_in_the_graph_is_the_numpy_one(tmp_path: Path, layout: str,
                                                     channels: str) -> None:
    shape = [1, 3, 4, 5] if layout == "NCHW" else [1, 4, 5, 3]
    path = _save(_graph("identity", [helper.make_node("Identity", ["x"], ["y"])],
                        [_io("x", F32, shape)], [_io("y", F32, shape)]), tmp_path)
    task = _image_task(input="x", size=[4, 5], layout=layout, channels=channels, scale=1 / 127.5,
                       mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    model = prepend_image_preprocessing(onnx.load(str(path)), task)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(tmp_path / "pre.onnx"))
    pixels = np.random.default_rng(0).integers(0, 256, (1, 4, 5, 3), dtype=np.uint8)
    got = run_native(tmp_path / "pre.onnx", {"x": pixels})["y"]
    np.testing.assert_allclose(got, preprocess_numpy(pixels, task), rtol=1e-6, atol=1e-6)
    rgb = pixels.astype(np.float64)[..., ::-1 if channels == "BGR" else 1]
    by_hand = (rgb / 127.5 - task.mean) / task.std
    np.testing.assert_allclose(got, by_hand.transpose(0, 3, 1, 2) if layout == "NCHW"
                               else by_hand, atol=1e-5)


def test_letterbox_geometry_centred_and_top_left() -> None:
    centred = geometry(200, 100, _image_task(size=[32, 48]))  # r = min(48/200, 32/100) = 0.24
    assert (centred.width, centred.height, centred.left, centred.top) == (48, 24, 0, 4)
    top_left = geometry(200, 100, _image_task(size=[32, 48], placement="top-left"))
    assert (top_left.left, top_left.top, top_left.width, top_left.height) == (0, 0, 48, 24)
    tall = geometry(50, 100, _image_task(size=[32, 48]))  # r = 0.32: 16 x 32, centred in x
    assert (tall.width, tall.height, tall.left, tall.top) == (16, 32, 16, 0)
    crop = geometry(200, 100, _image_task(size=[32, 48], resize="center-crop"))  # r = 0.32
    assert (crop.width, crop.height, crop.left, crop.top) == (64, 32, -8, 0)
    stretch = geometry(200, 100, _image_task(size=[32, 48], resize="stretch"))
    assert (stretch.scale_x, stretch.scale_y, stretch.left, stretch.top) == (0.24, 0.32, 0, 0)


@pytest.mark.parametrize("placement, padded_rows", [("centre", [0, 1, 2, 3, 28, 29, 30, 31]),
                                                    ("top-left", list(range(24, 32)))])
def test_letterbox_pads_where_the_placement_says(placement: str, padded_rows: list[int]) -> None:
    pixels = np.full((100, 200, 3), 7, np.uint8)
    image, _ = fit_image(pixels, _image_task(size=[32, 48], placement=placement, pad_value=99))
    rows = [v for v in range(32) if (image[0, v] == 99).all()]
    assert rows == padded_rows
    assert (image[0][image[0] != 99] == 7).all()  # a flat image stays flat through bilinear


def test_resize_samples_half_pixel_centres() -> None:
    pixels = np.arange(4, dtype=np.uint8).repeat(3).reshape(1, 4, 3) * 60  # 0, 60, 120, 180
    task = _image_task(size=[1, 8], resize="stretch")
    image, _ = fit_image(pixels, task)
    # x = (u + 0.5) / 2 - 0.5: -0.25 (clamped), 0.25, 0.75, 1.25, ... 3.25 (clamped)
    assert image[0, 0, :, 0].tolist() == [0, 15, 45, 75, 105, 135, 165, 180]
    nearest, _ = fit_image(pixels, _image_task(size=[1, 8], resize="stretch", filter="nearest"))
    assert nearest[0, 0, :, 0].tolist() == [0, 0, 60, 60, 120, 120, 180, 180]


@pytest.mark.parametrize("size", [(37, 61), (120, 90)])
def test_antialias_is_pillows_bilinear_and_crop_fraction_crops(size: tuple[int, int]) -> None:
    from PIL import Image

    from bundler.tasks.samples import picture

    pixels = picture(300, 410, seed=1)
    image, _ = fit_image(pixels, _image_task(size=list(size), resize="stretch",
                                             filter="antialias"))
    pillow = np.asarray(Image.fromarray(pixels).resize(size[::-1], Image.Resampling.BILINEAR))
    assert np.abs(image[0].astype(int) - pillow).max() <= 1  # Pillow rounds in fixed point
    crop = geometry(400, 300, _image_task(size=[224, 224], resize="center-crop",
                                          crop_fraction=0.875))  # as torchvision: 256 then 224
    assert (crop.width, crop.height, crop.left, crop.top) == (341, 256, -59, -16)


def _found(*rows: tuple[float, int, tuple[float, float, float, float]]):
    return list(rows)


def test_nms_keeps_overlapping_boxes_of_different_classes() -> None:
    box = (0.0, 0.0, 10.0, 10.0)
    kept = non_max_suppression(_found((0.9, 0, box), (0.8, 1, box), (0.7, 0, (1, 0, 11, 10))),
                               0.45, 100)
    assert [(score, cls) for score, cls, _ in kept] == [(0.9, 0), (0.8, 1)]


def test_nms_iou_at_the_threshold_is_kept_and_over_it_dropped() -> None:
    a, b = (0.0, 0.0, 10.0, 10.0), (5.0, 0.0, 15.0, 10.0)  # IoU 50 / 150 = 1/3
    assert iou(a, b) == pytest.approx(1 / 3)
    assert len(non_max_suppression(_found((0.9, 0, a), (0.8, 0, b)), 1 / 3, 100)) == 2
    assert len(non_max_suppression(_found((0.9, 0, a), (0.8, 0, b)), 0.3, 100)) == 1


def test_nms_caps_at_max_detections_by_score() -> None:
    found = [(0.1 + i / 100, i % 3, (i * 20.0, 0.0, i * 20.0 + 10, 10.0)) for i in range(30)]
    kept = non_max_suppression(found, 0.45, 5)
    assert [round(score, 2) for score, _, _ in kept] == [0.39, 0.38, 0.37, 0.36, 0.35]


def test_nothing_above_the_threshold_gives_no_detections() -> None:
    output = np.zeros((1, 6, 10), np.float32)
    output[0, 0:4] = 8  # ten times the same box: NMS keeps one
    output[0, 4:] = 0.2
    task = _image_task()
    assert detections(output, task, geometry(48, 32, task), 48, 32) == []
    assert len(detections(output, task, geometry(48, 32, task), 48, 32, threshold=0.2)) == 1


def test_yolov5_and_nms_inside_layouts_decode() -> None:
    v5 = np.array([[[10, 10, 4, 4, 0.5, 0.2, 0.9], [30, 10, 4, 4, 0.9, 0.3, 0.1]]], np.float32)
    found = candidates(v5, _image_task(output_layout="yolov5"), 0.25)
    assert [(round(s, 3), c) for s, c, _ in found] == [(0.45, 1), (0.27, 0)]
    assert found[0][2] == (8, 8, 12, 12)
    inside = np.array([[[1, 2, 5, 6, 0.8, 1], [0, 0, 3, 3, 0.1, 0]]], np.float32)
    found = candidates(inside, _image_task(output_layout="nms-inside"), 0.25)
    assert [(s, c, b) for s, c, b in found] == [(pytest.approx(0.8), 1, (1, 2, 5, 6))]


def test_detector_boxes_come_back_in_source_pixels(tmp_path: Path) -> None:
    """The test detector's constant boxes, through letterbox and back, on a red picture."""
    model = prepend_image_preprocessing(onnx.load(str(task_models.detector(tmp_path))),
                                        _image_task(size=[32, 32]))
    onnx.save(model, str(tmp_path / "pre.onnx"))
    task = _image_task(size=[32, 32], score_threshold=0.5, labels=task_models.DETECTOR_LABELS,
                       pad_value=0)  # no grey padding: its blue would score class 1
    pixels = np.zeros((64, 128, 3), np.uint8)
    pixels[..., 0] = 255  # all red: class 0 scores high, class 1 low
    image, place = fit_image(pixels, task)
    assert (place.scale_x, place.left, place.top) == (0.25, 0, 8)
    output = run_native(tmp_path / "pre.onnx", {"images": image})["output0"]
    found = detections(output, task, place, 128, 64)
    boxes = {(d["label"], tuple(round(v, 3) for v in d["box"].values())) for d in found}
    # column 1 (9, 8, 8, 8) outscores column 0 and suppresses it; columns 3 (class 0) kept
    assert boxes == {("red thing", (20.0, 0.0, 32.0, 16.0)), ("red thing", (84.0, 44.0, 24.0,
                                                                             20.0))}


def test_top_classes_softmax_labels_and_ties() -> None:
    task = Task(kind="image-classification", input="x", output="y", labels=["a", "b", "c"],
                softmax=True, top_k=2)
    result = top_classes(np.array([[1.0, 3.0, 3.0]], np.float32), task)
    assert [c["label"] for c in result] == ["b", "c"]  # a tie: the lower index first
    assert sum(c["score"] for c in top_classes(np.array([1.0, 3.0, 3.0]), task, 3)) == \
        pytest.approx(1)


def test_resampling_and_streaming_carry_the_state(tmp_path: Path) -> None:
    assert resample(np.arange(4, dtype=np.float32), 4, 8).tolist() == \
        [0, 0.5, 1, 1.5, 2, 2.5, 3, 3]
    model = task_models.audio_model(tmp_path)
    task = Task(kind="audio-stream", input="audio", output="prob", sample_rate=16000,
                chunk_size=task_models.AUDIO_CHUNK, state={"state": "stateN"},
                sample_rate_input="sr", score_threshold=0.5)
    inputs = [TensorSpec("audio", "float32", (1, 64)), TensorSpec("state", "float32", (1, 8)),
              TensorSpec("sr", "int64", ())]
    samples = task_models.speech_like(1.0, 16000)
    whole = AudioStream(lambda feeds: run_native(model, feeds), task, inputs)
    all_at_once = whole.push(samples, 16000)
    pieces = AudioStream(lambda feeds: run_native(model, feeds), task, inputs)
    in_pieces = [r for at in range(0, samples.size, 1000)
                 for r in pieces.push(samples[at:at + 1000], 16000)]
    assert [r["score"] for r in in_pieces] == [r["score"] for r in all_at_once]
    # the state carries: the first silent chunk after the burst still scores high; alone, low
    after = 200  # starts at 0.8 s, where the burst ends
    assert all_at_once[after]["start"] == 0.8 and all_at_once[after]["score"] > 0.5
    whole.reset()
    assert whole.push(samples[after * 64:(after + 1) * 64], 16000)[0]["score"] < 0.1
    whole.reset()
    assert [r["score"] for r in whole.push(samples[:640], 16000)] == \
        [r["score"] for r in all_at_once[:10]]
    found = segments(all_at_once, 0.5)
    assert len(found) == 1 and 0.3 <= found[0]["start"] < 0.35 and 0.8 <= found[0]["end"] < 0.85


def test_task_settings_are_checked_and_merged(tmp_path: Path) -> None:
    spec = parse_task(["object-detection", "size=640", "mean=0.5", "state=h=hn"], tmp_path)
    assert spec.size == (640, 640) and spec.mean == (0.5, 0.5, 0.5)
    assert spec.state == (("h", "hn"),)
    merged = merge({"task": parse_task({"kind": "object-detection", "score_threshold": 0.6},
                                       tmp_path)}, {"task": ("iou_threshold=0.3",)})
    assert (merged.task.kind, merged.task.score_threshold, merged.task.iou_threshold) == \
        ("object-detection", 0.6, 0.3)
    for bad, fragment in [({"kind": "segmentation"}, "'kind'"), ({"placement": "left"},
                                                                 "'placement'"),
                          ({"mean": [1, 2]}, "'mean'"), ({"std": 0}, "'std'"),
                          ({"pad_value": 300}, "'pad_value'"), ({"labels": []}, "'labels'")]:
        with pytest.raises(ConfigError, match=fragment):
            BuildOptions(task=bad)


def test_the_likely_task_is_said_and_the_model_checked(tmp_path: Path) -> None:
    audio = onnx.load(str(task_models.audio_model(tmp_path)))
    assert likely_task(audio)[0] == "audio-stream"
    assert likely_task(onnx.load(str(task_models.classifier(tmp_path))))[0] == \
        "image-classification"
    task = resolve_task(TaskSpec(kind="audio-stream"), audio)
    assert (task.input, task.output, task.state, task.sample_rate_input, task.chunk_size) == \
        ("audio", "prob", {"state": "stateN"}, "sr", 64)
    classifier = onnx.load(str(task_models.classifier(tmp_path)))
    with pytest.raises(ConfigError, match="3 labels for the 4 classes"):
        resolve_task(TaskSpec(kind="image-classification", labels=("a", "b", "c")), classifier)
    with pytest.raises(ConfigError, match="224x224, but input 'images' is 8x8"):
        resolve_task(TaskSpec(kind="image-classification", size=(224, 224)), classifier)
    classifier.metadata_props.add(key="names", value="{0: 'a', 1: 'b', 2: 'c', 3: 'd'}")
    assert resolve_task(TaskSpec(kind="image-classification", labels="metadata"),
                        classifier).labels == ["a", "b", "c", "d"]


def test_the_build_says_what_the_model_looks_like(tmp_path: Path) -> None:
    from bundler.tasks.build import task_hint

    audio = onnx.load(str(task_models.audio_model(tmp_path)))
    assert task_hint(TaskSpec(), audio).startswith(
        "hint: this looks like audio-stream (samples audio and state carried between calls);"
        " build with --task audio-stream")
    assert task_hint(TaskSpec(kind="audio-stream"), audio) is None
    assert "not image-classification as asked" in task_hint(
        TaskSpec(kind="image-classification"), audio)


def test_bundle_run_image_and_audio(tmp_path: Path, build_bundle) -> None:
    directory, manifest = build_bundle(task_models.detector(tmp_path / "models"), "det",
                                       task={"kind": "object-detection",
                                             "labels": task_models.DETECTOR_LABELS})
    assert manifest["sessions"][0]["inputs"] == [
        {"name": "images", "type": "uint8", "shape": [1, 32, 32, 3]}]
    image = task_models.save_png(task_models.picture(90, 160), tmp_path / "picture.png")
    result = run_cli("run", directory, "--image", image, "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)["detections"]
    assert found and {d["label"] for d in found} <= set(task_models.DETECTOR_LABELS)
    printed = run_cli("run", directory, "--image", image)
    assert "blue <thing>" in printed.stdout and "detections" in printed.stdout
    audio_dir, _ = build_bundle(task_models.audio_model(tmp_path / "models"), "audio",
                                task="audio-stream")
    sound = task_models.save_wav(task_models.speech_like(2.0, 8000), 8000, tmp_path / "s.wav")
    result = run_cli("run", audio_dir, "--audio", sound, "--json")
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["segments"]) == 2


def test_context_samples_go_before_each_chunk(tmp_path: Path) -> None:
    """Silero VAD's way: each call gets the last context_size samples of the one before."""
    audio = onnx.load(str(task_models.audio_model(tmp_path)))
    task = resolve_task(TaskSpec(kind="audio-stream", context_size=16, given=("context_size",)),
                        audio)
    assert (task.chunk_size, task.context_size) == (48, 16)
    seen: list[np.ndarray] = []

    def run(feeds):
        seen.append(feeds["audio"].copy())
        return run_native(tmp_path / "task_audio.onnx", feeds)

    inputs = [TensorSpec("audio", "float32", (1, 64)), TensorSpec("state", "float32", (1, 8)),
              TensorSpec("sr", "int64", ())]
    samples = np.arange(1, 97, dtype=np.float32)
    AudioStream(run, task, inputs).push(samples, 16000)
    assert [feed.shape for feed in seen] == [(1, 64), (1, 64)]
    assert seen[0][0, :16].tolist() == [0] * 16
    assert seen[0][0, 16:].tolist() == samples[:48].tolist()
    assert seen[1][0].tolist() == samples[32:96].tolist()
    with pytest.raises(ConfigError, match="context_size"):
        resolve_task(TaskSpec(kind="audio-stream", context_size=64, given=("context_size",)),
                     audio)


def test_calibration_of_an_image_task_is_pixels(tmp_path: Path, build_bundle) -> None:
    """--calibration for an image task holds what the shipped model takes: uint8 [1, H, W, 3]."""
    from bundler.tasks.samples import picture

    pictures = np.stack([fit_image(picture(40 + 9 * i, 60, seed=i), Task(
        kind="image-classification", input="images", output="scores", size=[8, 8],
        resize="stretch"))[0] for i in range(8)])
    np.savez(tmp_path / "calibration.npz", images=pictures)
    _, manifest = build_bundle(task_models.classifier(tmp_path / "models"), "q",
                               task="image-classification", quantize="int8-static",
                               calibration=tmp_path / "calibration.npz")
    assert manifest["sessions"][0]["variants"][0]["accuracy"]["data"] == "calibration"
    np.savez(tmp_path / "floats.npz", images=np.zeros((8, 1, 3, 8, 8), np.float32))
    with pytest.raises(ConfigError, match="images"):
        build_bundle(task_models.classifier(tmp_path / "models"), "f",
                     task="image-classification", quantize="int8-static",
                     calibration=tmp_path / "floats.npz")
