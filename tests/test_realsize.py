"""The real-size lane: one model per class the project claims, at the size users ship
(tests/realsize_models.py), built by the real `bundle build` with the default options and with
`--quantize auto`, each verified in Chromium. Every model is exported once per session and every
build is shared by the tests that read it. A small model suite stayed green while every model with
an integer input and a 1-D weight over 64 values crashed the build: this lane is what catches
that class of bug."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.realsize_models import LANE, megabytes

pytestmark = [pytest.mark.realsize, pytest.mark.browser]

MODELS = list(LANE)
AUTO = ("--quantize", "auto")
# The detector's auto build is its task build (below); the encoder's is that of its copy with
# external data (the same weights): one auto build per model class keeps the lane in CI's time.
AUTO_MODELS = ["classifier", "decoder", "streaming", "external"]


class Lane:
    """Exports each model and runs each build once per session, on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.models: dict[str, Path] = {}
        self.builds: dict[tuple[str, tuple[str, ...]], tuple[Path, dict[str, Any], str]] = {}

    def model(self, name: str) -> Path:
        if name not in self.models:
            folder = self.root / "models" / name
            folder.mkdir(parents=True)
            self.models[name] = LANE[name](folder)
        return self.models[name]

    def build(self, name: str, *flags: str) -> tuple[Path, dict[str, Any], str]:
        """The folder, its bundle.json and the command's output of `bundle build MODEL FLAGS`."""
        key = (name, flags)
        if key not in self.builds:
            output = self.root / "bundles" / f"{name}{''.join(flags).replace('-', '_')}"
            result = run_cli("build", self.model(name), "-o", output, *flags)
            log = result.stdout + result.stderr
            assert result.returncode == 0, f"bundle build {name} {' '.join(flags)}:\n{log}"
            assert "Traceback" not in log, log
            manifest = json.loads((output / "bundle.json").read_text(encoding="utf-8"))
            self.builds[key] = (output, manifest, log)
        return self.builds[key]


@pytest.fixture(scope="session")
def lane(tmp_path_factory: pytest.TempPathFactory) -> Lane:
    return Lane(tmp_path_factory.mktemp("realsize"))


# onnxruntime-web 1.31.1's WebGPU EP computes Silero VAD wrong (max abs error 1.01 against native
# onnxruntime, where WASM agrees to 2e-5): the build records it as failed and load() runs WASM.
# When a runtime update fixes it, this test fails and the entry goes.
KNOWN_FAILURES = {"streaming": {"webgpu"}}


def browser_results(manifest: dict[str, Any], name: str, variant: str) -> dict[str, Any]:
    """The per-EP results of a variant, asserting the build's browser check passed on every EP
    but the known failures (an EP the device lacks a feature for is not a failure) and the
    fallback to WASM passed."""
    verification = manifest["verification"]
    results = verification["results"][variant]
    assert set(results) == {"webgpu", "wasm"} and results["wasm"]["passed"], results
    failed = {ep for ep, entry in results.items()
              if not entry["passed"] and entry.get("unsupported") != "device"}
    assert failed == KNOWN_FAILURES.get(name, set()), json.dumps(verification)[:2000]
    assert verification["status"] == ("failed" if failed else "passed")
    assert verification["fallback"]["passed"], verification["fallback"]
    return results


@pytest.mark.parametrize("name", MODELS)
def test_builds_with_default_options_and_runs_on_webgpu_and_wasm(lane: Lane, name: str) -> None:
    _, manifest, _ = lane.build(name)
    assert [v["name"] for v in manifest["sessions"][0]["variants"]] == ["fp32"]
    results = browser_results(manifest, name, "fp32")
    assert all(results[ep]["passed"] for ep in set(results) - KNOWN_FAILURES.get(name, set()))


@pytest.mark.parametrize("name", AUTO_MODELS)
def test_quantize_auto_ships_one_variant_that_passed_in_the_browser(lane: Lane,
                                                                   name: str) -> None:
    _, manifest, log = lane.build(name, *AUTO)
    selection = manifest["selection"]
    chosen = selection["chosen"]
    assert selection["mode"] == "auto"
    session = manifest["sessions"][0]
    assert [v["name"] for v in session["variants"]] == [chosen] == [session["default_variant"]]
    assert f"auto: shipping {chosen}" in log
    candidate = next(c for c in selection["candidates"] if c["name"] == chosen)
    assert candidate["within_budget"] and candidate["browser_verified"], candidate
    browser_results(manifest, name, chosen)


def test_the_image_models_are_the_size_users_ship(lane: Lane) -> None:
    for name in ("classifier", "detector"):
        assert megabytes(lane.model(name)) >= 5, name


def test_the_external_data_model_keeps_its_weights_beside_it(lane: Lane) -> None:
    model = lane.model("external")
    data = model.with_name(model.name + ".data")
    assert data.stat().st_size > 50 * model.stat().st_size
    _, manifest, _ = lane.build("external")
    assert manifest["source"]["bytes"] >= data.stat().st_size


def test_classifier_builds_for_its_task(lane: Lane) -> None:
    _, manifest, _ = lane.build("classifier", "--task", "image-classification")
    assert manifest["task"]["kind"] == "image-classification"
    assert manifest["task"]["size"] == [224, 224]
    assert manifest["sessions"][0]["inputs"][0]["type"] == "uint8"
    assert all(e["passed"] for e in browser_results(manifest, "classifier", "fp32").values())


def test_detector_builds_for_its_task_with_quantize_auto(lane: Lane) -> None:
    """uint8 image input and 1-D weights over 64 values: the case that crashed every build."""
    _, manifest, _ = lane.build("detector", "--task", "object-detection", *AUTO)
    assert manifest["task"]["kind"] == "object-detection"
    assert manifest["task"]["output_layout"] == "yolov8"
    assert manifest["sessions"][0]["inputs"][0]["type"] == "uint8"
    browser_results(manifest, "detector", manifest["sessions"][0]["default_variant"])


def test_bundle_test_passes_on_a_built_real_model(lane: Lane) -> None:
    output, _, _ = lane.build("streaming")
    result = run_cli("test", output)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_whisper_tiny_sized_export_transcribes_as_native(tmp_path: Path,
                                                           runtime_dist: Path) -> None:
    """Whisper-tiny's dimensions (4+4 layers x 384, 1,500 positions), exported by optimum from a
    random config with the suite's trained vocabulary, built with the default options on WASM:
    the build's check, and `bundle test --audio` on 75 s of speech (four windows, as the issue's
    acceptance asks), give native's tokens for every window, without and with timestamps, and
    teacher-forced logits within the `transcript-logits` bound (the `generation-logits` one,
    1e-4, failed it). (WebGPU over SwiftShader takes hours at this size: the speech
    tests check it at the suite's size.)"""
    import numpy as np

    from bundler.bundle import manifest as manifest_file
    from bundler.tasks.samples import wav_bytes
    from tests import speech_models
    from tests.speech import speech

    folder = speech_models.whisper(tmp_path / "export", size=speech_models.WHISPER_TINY).folder
    assert megabytes(folder / "encoder_model.onnx") > 30  # Whisper-tiny's encoder: 32 MB
    output = tmp_path / "bundle"
    built = run_cli("build", folder, "-o", output, "--runtime-dir", runtime_dist, "--ep", "wasm")
    assert built.returncode == 0, built.stdout + built.stderr
    bundle = manifest_file.load(output)
    assert [s.name for s in bundle.sessions] == ["encoder", "decoder"]
    assert not bundle.verification.problems  # the build's check passed
    samples, rate = speech(75.0)
    recording = tmp_path / "speech.wav"
    recording.write_bytes(wav_bytes(np.asarray(samples, np.float32), rate))
    report = tmp_path / "report.json"
    checked = run_cli("test", output, "--audio", recording, "--ep", "wasm", "--no-fallback",
                      "--report", report)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # minutes of decoding show progress: a line as each window starts and every 50 steps
    assert "transcript 1 of 2, window 1 of 4, 50 decoder steps" in checked.stderr
    [entry] = json.loads(report.read_text(encoding="utf-8"))["task"]
    assert entry["passed"] and entry["native_count"] == entry["browser_count"] == 2, entry
    ran = run_cli("run", output, "--audio", recording, "--json")  # what was compared: text
    assert ran.returncode == 0, ran.stderr
    assert all(len(got["tokens"]) > 4 for got in json.loads(ran.stdout)["transcripts"])
