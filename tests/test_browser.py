"""The browser side, in headless Chromium: conformance on WebGPU (SwiftShader) and WASM for every
test model, the WASM fallback, the bundle.mjs contract and the demo page."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests import models
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.browser


ML_MODELS = {"ml_classifier", "ml_classifier_no_zipmap"}


@pytest.mark.parametrize("name", sorted(models.ALL))
def test_build_verifies_every_test_model_on_both_eps_and_the_fallback(build_bundle, tmp_path,
                                                                       browser_settings, name):
    _, manifest = build_bundle(models.ALL[name](tmp_path), verify=True)
    verification = manifest["verification"]
    results = verification["results"]["fp32"]
    assert set(results) == {"webgpu", "wasm"}
    assert results["wasm"]["passed"], json.dumps(verification, indent=1)
    assert verification["fallback"]["passed"]
    assert verification["status"] == "passed", json.dumps(verification, indent=1)
    if name in ML_MODELS:  # the WebGPU build of onnxruntime-web has no ai.onnx.ml kernels
        assert not results["webgpu"]["passed"]
        assert results["webgpu"]["unsupported"] == "runtime"
        assert results["webgpu"]["error"].startswith("webgpu session creation failed: No Op"
                                                     " registered for LinearClassifier")
    else:
        assert results["webgpu"]["passed"]
    if name == "symbolic_hw":  # 1x1 fails natively; verification found a size that works
        assert verification["dims"]["height"] >= 3 and verification["dims"]["width"] >= 3


def test_example_builds_verified_from_the_command_line(tmp_path, runtime_dist):
    result = run_cli("build", "-o", tmp_path / "dist", "--runtime-dir", runtime_dist)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "dist" / "bundle.json").read_text())
    assert manifest["verification"]["status"] == "passed"
    assert "Browser vs native onnxruntime" in result.stdout


def _change_a_weight(model_path: Path, factor: float = 1.5) -> None:
    model = onnx.load(str(model_path))
    weight = max(model.graph.initializer, key=lambda t: np.prod(t.dims))
    values = onnx.numpy_helper.to_array(weight).copy()
    values.flat[np.abs(values).argmax()] *= factor
    weight.CopyFrom(onnx.numpy_helper.from_array(values, weight.name))
    onnx.save(model, str(model_path))


def test_bundle_test_passes_then_fails_once_a_weight_is_changed(build_bundle, tmp_path):
    directory, manifest = build_bundle(None)
    report = tmp_path / "report.json"
    passed = run_cli("test", directory, "--report", report)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert json.loads(report.read_text())["ok"] is True
    assert json.loads(report.read_text())["verified"] == {"status": "passed", "covers": [
        "model files", "outputs in Chromium", "no outside requests", "fallback to WASM"]}
    _change_a_weight(directory / manifest["sessions"][0]["variants"][0]["file"])
    failed = run_cli("test", directory, "--report", report)
    assert failed.returncode != 0
    assert "does not match the sha256" in failed.stderr


def test_bundle_test_fails_when_weights_and_sha256_were_both_changed(build_bundle, tmp_path):
    directory, manifest = build_bundle(None)
    model_file = directory / manifest["sessions"][0]["variants"][0]["file"]
    _change_a_weight(model_file, factor=1.02)  # subtle: 2 % on one weight
    import hashlib

    variant = manifest["sessions"][0]["variants"][0]
    variant["sha256"] = hashlib.sha256(model_file.read_bytes()).hexdigest()
    variant["bytes"] = model_file.stat().st_size
    (directory / "bundle.json").write_text(json.dumps(manifest))
    failed = run_cli("test", directory, "--ep", "wasm", "--no-fallback")
    assert failed.returncode != 0
    assert "differ from those recorded at build time" in failed.stderr


def test_verified_builds_with_variants_are_byte_identical(build_bundle):
    first, _ = build_bundle(None, name="first", verify=True, variants=("fp32", "int8"))
    second, _ = build_bundle(None, name="second", verify=True, variants=("fp32", "int8"))
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)


def test_bundle_test_accepts_an_ep_that_cannot_run_the_model_and_load_skips_it(
        build_bundle, tmp_path):
    directory, manifest = build_bundle(models.ml_classifier(tmp_path), verify=True)
    result = run_cli("test", directory)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "UNSUPPORTED (runtime)" in result.stdout


def test_chromium_launches_from_a_long_temporary_folder(tmp_path):
    # Chromium's profile holds a Unix socket, whose path may not pass 104-108 bytes: from a
    # $TMPDIR as long as macOS's (or pytest's) it did not start, and builds went unverified.
    long_tmp = tmp_path / ("t" * 60)
    long_tmp.mkdir()
    code = ("from bundler.verify.browser import launch, load_settings, playwright_session\n"
            "from tests.conftest import ROOT\n"
            "settings = load_settings(ROOT / 'playwright.config.py')\n"
            "with playwright_session() as driver, launch(driver, settings, webgpu=False) as b:\n"
            "    print(b.version)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "TMPDIR": str(long_tmp), "PYTHONPATH": str(ROOT)},
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()[:1].isdigit(), result.stdout
    assert list(long_tmp.glob("bundler-browser-*")) == []
