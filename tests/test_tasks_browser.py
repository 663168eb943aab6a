"""Task apps in headless Chromium against the Python reference, end to end from the same files:
an image (PNG) to labels and boxes, a sound to per-chunk scores, on WASM, WebGPU and in the
worker."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from bundler.bundle import manifest as manifest_file
from bundler.bundle.codec import to_json
from bundler.bundle.modelio import cpu_session
from bundler.tasks.audio import read_wav
from bundler.tasks.image import read_image
from bundler.tasks.pipeline import run_audio, run_image
from bundler.verify.browser import launch
from bundler.verify.reference import run_native
from tests import task_models
from tests.conftest import run_cli

pytestmark = pytest.mark.browser

IMAGE = "picture.png"
SOUND = "sound.wav"
SOUND_RATE = 22050


@pytest.fixture(scope="module")
def task_bundles(tmp_path_factory, runtime_dist):
    from bundler.bundle.options import BuildOptions
    from bundler.commands.build import build

    root = tmp_path_factory.mktemp("tasks")
    labels = root / "labels.txt"
    labels.write_text("\n".join(task_models.CLASSIFIER_LABELS) + "\n", encoding="utf-8")
    specs = {
        "classifier": (task_models.classifier, {"kind": "image-classification",
                                                 "labels": str(labels), "channels": "BGR",
                                                 "mean": [0.4, 0.5, 0.6], "std": [0.2, 0.25, 0.3],
                                                 "resize": "center-crop", "crop_fraction": 0.875,
                                                 "filter": "antialias"}),
        "detector": (task_models.detector, {"kind": "object-detection",
                                             "labels": task_models.DETECTOR_LABELS,
                                             "score_threshold": 0.3}),
        "audio": (task_models.audio_model, {"kind": "audio-stream"}),
    }
    built = {}
    for name, (make, task) in specs.items():
        output = root / name
        build(make(root / "models"), BuildOptions(output=output, verify=False,
                                                  runtime_dir=runtime_dist, task=task))
        task_models.save_png(task_models.picture(150, 260, seed=3), output / IMAGE)
        task_models.save_wav(task_models.speech_like(1.8, SOUND_RATE), SOUND_RATE, output / SOUND)
        built[name] = output
    return built


def _native(directory):
    manifest = manifest_file.load(directory)
    session = cpu_session(directory / manifest.session().default_for("wasm").file)
    return manifest, lambda feeds: run_native(session, feeds)


RUN_IMAGE = """async ({ url, method, options, file, as }) => {
  const { load } = await import(url);
  const model = await load(options);
  const blob = await (await fetch(file)).blob();
  let source = blob;
  if (as === 'bitmap') source = await createImageBitmap(blob);
  if (as === 'imagedata') {
    const bitmap = await createImageBitmap(blob);
    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
    canvas.getContext('2d').drawImage(bitmap, 0, 0);
    source = canvas.getContext('2d').getImageData(0, 0, bitmap.width, bitmap.height);
  }
  const result = await model[method](source);
  const ep = model.ep;
  await model.release();
  return { ep, result, sourceWidth: source.width ?? null };  // a closed ImageBitmap has width 0
}"""


def _same_classes(browser, native):
    assert [c["label"] for c in browser] == [c["label"] for c in native["classes"]]
    np.testing.assert_allclose([c["score"] for c in browser],
                               [c["score"] for c in native["classes"]], atol=1e-5)


def _same_detections(browser, native):
    expected = native["detections"]
    assert len(browser) == len(expected) > 0
    for got, want in zip(browser, expected, strict=True):
        assert got["label"] == want["label"]
        assert abs(got["score"] - want["score"]) < 1e-5
        np.testing.assert_allclose([got["box"][k] for k in ("x", "y", "width", "height")],
                                   [want["box"][k] for k in ("x", "y", "width", "height")],
                                   atol=1e-3)


@pytest.mark.parametrize("options, source", [
    ({"executionProviders": ["wasm"]}, "bitmap"),
    ({"executionProviders": ["wasm"], "worker": True}, "bitmap"),
    ({"executionProviders": ["wasm"], "worker": True}, "blob"),
    ({"executionProviders": ["webgpu"]}, "imagedata"),
], ids=["wasm-bitmap", "worker-bitmap", "worker-blob", "webgpu-imagedata"])
def test_image_tasks_match_the_python_reference(task_bundles, webgpu_browser, open_bundle,
                                                options, source):
    for name, method, same in (("classifier", "classify", _same_classes),
                               ("detector", "detect", _same_detections)):
        directory = task_bundles[name]
        manifest, run = _native(directory)
        native = run_image(run, manifest.task, read_image(directory / IMAGE))
        with open_bundle(webgpu_browser, directory) as page:
            got = page.evaluate(RUN_IMAGE, {"url": page.base_url + "bundle.mjs", "method": method,
                                            "options": options, "file": page.base_url + IMAGE,
                                            "as": source})
        assert got["ep"] == options["executionProviders"][0]
        same(got["result"], native)
        if source == "bitmap":  # the caller's bitmap is still theirs
            assert got["sourceWidth"] == 260


RUN_AUDIO = """async ({ url, options, samples, rate }) => {
  const { load } = await import(url);
  const model = await load(options);
  const stream = model.stream();
  const first = [...await stream.push(Float32Array.from(samples), rate), ...await stream.flush()];
  stream.reset();
  const again = await stream.push(Float32Array.from(samples), rate);
  await model.release();
  return { first, again };
}"""


@pytest.mark.parametrize("options", [{"executionProviders": ["wasm"]},
                                     {"executionProviders": ["wasm"], "worker": True}],
                         ids=["wasm", "worker"])
def test_audio_stream_matches_the_python_reference(task_bundles, webgpu_browser, open_bundle,
                                                   options):
    directory = task_bundles["audio"]
    manifest, run = _native(directory)
    samples, rate = read_wav(directory / SOUND)
    native = run_audio(run, manifest.task, manifest.session().inputs, samples, rate)
    with open_bundle(webgpu_browser, directory) as page:
        got = page.evaluate(RUN_AUDIO, {"url": page.base_url + "bundle.mjs", "options": options,
                                        "samples": samples.tolist(), "rate": rate})
    assert len(got["first"]) == len(native["chunks"])
    np.testing.assert_allclose([c["score"] for c in got["first"]],
                               [c["score"] for c in native["chunks"]], atol=1e-5)
    # reset() starts from zero state: the same scores again (the last partial chunk aside)
    np.testing.assert_allclose([c["score"] for c in got["again"]],
                               [c["score"] for c in got["first"][:len(got["again"])]], atol=1e-7)
    assert len(native["segments"]) == 2


SCREENSHOTS = os.environ.get("BUNDLER_SCREENSHOTS")  # a folder: the docs' demo screenshots


@pytest.mark.parametrize("name, file, expected", [
    ("detector", IMAGE, "blue <thing>: "),
    ("classifier", IMAGE, '<b>bird</b> & "quotes": '),
    ("audio", SOUND, "speech 0.30 s"),
])
def test_demo_page_shows_results_as_text(task_bundles, webgpu_browser, open_bundle, tmp_path,
                                         name, file, expected):
    directory = task_bundles[name]
    with open_bundle(webgpu_browser, directory, "index.html") as page:
        page.page.wait_for_selector("body[data-ready=true]")
        page.page.set_input_files("#task-file", str(directory / file))
        page.page.wait_for_selector("#task-results li")
        items = page.page.locator("#task-results li").all_text_contents()
        assert any(item.startswith(expected) for item in items), items
        assert page.page.locator("#task-results b").count() == 0  # a label is never markup
        assert page.page.get_attribute("#task-drop", "tabindex") == "0"
        folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        page.page.locator("#task").screenshot(path=str(folder / f"task-{name}.png"))


def test_bundle_test_compares_task_answers_and_catches_a_drifted_twin(task_bundles, tmp_path):
    # the real command in a subprocess (this module's Playwright driver is still running)
    directory = task_bundles["detector"]
    report = tmp_path / "report.json"
    args = ("--ep", "wasm", "--no-fallback", "--image", directory / IMAGE)
    result = run_cli("test", directory, *args, "--report", report)
    assert result.returncode == 0, result.stderr
    (entry,) = json.loads(report.read_text())["task"]
    assert entry["passed"] and entry["native_count"] == entry["browser_count"] > 0
    # The browser's resize drifts from the spec (nearest instead of bilinear): caught.
    drifted = tmp_path / "drifted"
    shutil.copytree(directory, drifted)
    module = drifted / "tasks" / "image.mjs"
    module.write_text(module.read_text().replace("task.filter !== 'nearest'", "false"))
    for compressed in (drifted / "tasks").glob("image.mjs.*"):
        compressed.unlink()
    result = run_cli("test", drifted, *args)
    assert result.returncode != 0
    assert "task answers differ from the Python reference" in result.stderr.splitlines()[-1]


def test_owner_style_detector_build_matches_python_in_the_browser_on_a_photograph(
        tmp_path, runtime_dist):
    """--task nms=class-agnostic, letterbox-order=pad-then-resize, filter=cv2-linear,
    scale=1/255 from the command line; bundle test --image on a real photograph: the browser's
    answers are Python's (the report), and class-agnostic NMS dropped the overlapping box of the
    other class that per-class NMS keeps."""
    import matplotlib

    photo = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    model = task_models.detector(tmp_path / "models")
    settings = ["object-detection", "letterbox-order=pad-then-resize", "filter=cv2-linear",
                "scale=1/255", "placement=top-left", "pad-value=0", "score-threshold=0.05",
                "iou-threshold=0.45"]
    counts = {}
    for nms in ("class-agnostic", "per-class"):
        output = tmp_path / nms
        flags = [item for setting in [*settings, f"nms={nms}"] for item in ("--task", setting)]
        result = run_cli("build", model, "-o", output, "--runtime-dir", runtime_dist, *flags)
        assert result.returncode == 0, result.stderr
        manifest, run = _native(output)
        assert (manifest.task.nms, manifest.task.letterbox_order, manifest.task.filter,
                manifest.task.scale) == (nms, "pad-then-resize", "cv2-linear", 1 / 255)
        counts[nms] = len(run_image(run, manifest.task, read_image(photo))["detections"])
        if nms == "class-agnostic":
            report = tmp_path / "report.json"
            result = run_cli("test", output, "--ep", "wasm", "--no-fallback", "--image", photo,
                             "--report", report)
            assert result.returncode == 0, result.stderr
            (entry,) = json.loads(report.read_text())["task"]
            assert entry["passed"] and entry["native_count"] == entry["browser_count"] > 0
    assert counts["per-class"] == counts["class-agnostic"] + 1


TWINS = """async ({ base, file, tasks, output }) => {
  const { toPixels, fitImage } = await import(base + 'tasks/image.mjs');
  const { detections } = await import(base + 'tasks/detect.mjs');
  const { resample } = await import(base + 'tasks/audio.mjs');
  const pixels = await toPixels(await (await fetch(base + file)).blob());
  const fitted = tasks.map((task) => Array.from(fitImage(pixels, task).data));
  const data = Float32Array.from(output.data);
  const place = { scale_x: 1, scale_y: 1, left: 0, top: 0 };
  const [, rows, columns] = output.dims;
  const found = ['yolov8', 'yolov5'].map((layout) => detections(
    { data, dims: layout === 'yolov8' ? [1, rows, columns] : [1, columns, rows] },
    { ...tasks[0], output_layout: layout, score_threshold: 0.3, iou_threshold: 0.5,
      max_detections: 20 }, place, 64, 64));
  const resampled = Array.from(resample(Float32Array.from(output.data.slice(0, 999)), 44100,
                                        16000));
  return { fitted, found, resampled };
}"""


def test_the_javascript_twins_compute_what_the_python_spec_does(task_bundles, webgpu_browser,
                                                                 open_bundle):
    """Byte for byte: the fitted image under every resize mode and filter; the same detections
    (YOLOv8 and YOLOv5 layouts, many overlapping boxes of 3 classes); the same resampling."""
    from bundler.bundle.manifest import Task
    from bundler.tasks.audio import resample
    from bundler.tasks.detect import detections
    from bundler.tasks.image import Geometry, fit_image

    directory = task_bundles["detector"]
    settings = [dict(resize=resize, filter=filter, placement=placement, crop_fraction=0.875,
                     letterbox_order=order)
                for resize, placement, order in [
                    ("stretch", "centre", None), ("letterbox", "centre", None),
                    ("letterbox", "top-left", None), ("center-crop", "centre", None),
                    ("letterbox", "centre", "pad-then-resize"),
                    ("letterbox", "top-left", "pad-then-resize")]
                for filter in ("bilinear", "nearest", "antialias", "cv2-linear",
                               "pil-bilinear")]
    tasks = [Task(kind="object-detection", input="images", output="output0", size=[45, 70],
                  pad_value=114, **setting) for setting in settings]
    rng = np.random.default_rng(7)
    output = np.concatenate([rng.uniform(10, 50, (1, 2, 200)), rng.uniform(4, 20, (1, 2, 200)),
                             rng.uniform(0, 1, (1, 3, 200))], axis=1).astype(np.float32)
    with open_bundle(webgpu_browser, directory) as page:
        got = page.evaluate(TWINS, {"base": page.base_url, "file": IMAGE, "tasks": [
            to_json(task) for task in tasks], "output": {
                "data": output.ravel().tolist(), "dims": list(output.shape)}})
    pixels = read_image(directory / IMAGE)
    for task, fitted in zip(tasks, got["fitted"], strict=True):
        expected = fit_image(pixels, task)[0].ravel()
        assert np.array_equal(np.array(fitted, np.uint8), expected), (task.resize, task.filter)
    place = Geometry(1, 1, 0, 0, 70, 45)
    for layout, found in zip(["yolov8", "yolov5"], got["found"], strict=True):
        task = dataclasses.replace(tasks[0], output_layout=layout, score_threshold=0.3,
                                   iou_threshold=0.5, max_detections=20)
        data = output if layout == "yolov8" else output.reshape(1, 200, 7)
        expected = detections(data, task, place, 64, 64)
        assert 3 < len(expected) == len(found)
        assert [(d["index"], d["score"], d["box"]) for d in found] == \
            [(d["index"], d["score"], {k: float(v) for k, v in d["box"].items()})
             for d in expected]
    assert got["resampled"] == resample(output.ravel()[:999], 44100, 16000).tolist()


ERRORS = """async ({ url }) => {
  const { load } = await import(url);
  const model = await load({ executionProviders: ['wasm'] });
  const code = async (call) => { try { await call(); return null; } catch (e) { return e.code; } };
  return {
    detect: await code(() => model.detect(new ImageData(4, 4))),
    stream: await code(() => model.stream()),
    number: await code(() => model.classify(42)),
    text: await code(() => model.classify(new Blob(['not an image']))),
    empty: await code(() => model.classify(new Image())),
  };
}"""


def test_task_calls_reject_with_stable_codes(task_bundles, webgpu_browser, open_bundle):
    with open_bundle(webgpu_browser, task_bundles["classifier"]) as page:
        codes = page.evaluate(ERRORS, {"url": page.base_url + "bundle.mjs"})
    assert codes == {"detect": "wrong-task", "stream": "wrong-task", "number": "bad-source",
                     "text": "bad-source", "empty": "bad-source"}


@pytest.fixture(scope="module")
def media_browser(playwright, browser_settings):
    """A Chromium with a fake webcam and microphone that needs no permission prompt."""
    settings = dataclasses.replace(browser_settings, base_args=(
        *browser_settings.base_args, "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream"))
    with launch(playwright, settings, webgpu=False) as browser:
        yield browser


@pytest.mark.parametrize(("name", "device", "shows"), [
    ("classifier", "webcam", "#task-rate"),
    ("audio", "microphone", "#task-results li"),
])
def test_demo_page_live_devices_start_show_results_and_stop(task_bundles, media_browser,
                                                             open_bundle, name, device, shows):
    with open_bundle(media_browser, task_bundles[name], "index.html") as page:
        page.page.wait_for_selector("body[data-ready=true]")
        live = page.page.locator("#task-live")
        assert live.is_enabled() and live.text_content() == f"Start {device}"
        live.click()
        page.page.wait_for_function(
            "(selector) => document.querySelector(selector)?.textContent.trim()", arg=shows)
        assert (live.text_content(), live.get_attribute("aria-pressed")) == (
            f"Stop {device}", "true")
        if device == "webcam":
            assert page.page.text_content("#task-rate").endswith("frames/s")
        live.click()
        assert (live.text_content(), live.get_attribute("aria-pressed")) == (
            f"Start {device}", "false")
