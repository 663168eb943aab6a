"""In headless Chromium: a model saved by the current onnx package, with shape and index inputs,
runs on both EPs of the pinned runtime; real inputs reach the browser check and bundle test; an
IR version the runtime lacks is a runtime limit, not the device's."""

import hashlib
import json

import numpy as np
import pytest

from bundler.bundle import manifest as bundle_manifest
from tests import compat_models
from tests.conftest import run_cli

pytestmark = pytest.mark.browser


def test_current_onnx_model_with_shape_and_index_inputs_passes_strictly_on_both_eps(
        tmp_path, runtime_dist):
    source = compat_models.current_shapes_and_indices(tmp_path)
    directory = tmp_path / "dist"
    result = run_cli("build", source, "-o", directory, "--runtime-dir", runtime_dist, "--strict")
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((directory / "bundle.json").read_text())
    verification = manifest["verification"]
    assert verification["status"] == "passed", json.dumps(verification, indent=1)
    assert all(verification["results"]["fp32"][ep]["passed"] for ep in ("webgpu", "wasm"))
    assert verification["fallback"]["passed"]
    assert any("conversion verified" in note for note in manifest["notes"])

    # The same folder shipping the original IR-14 file: the runtime cannot load it.
    shipped = bundle_manifest.load(directory)
    variant = shipped.session().variants[0]
    model_file = directory / variant.file
    model_file.write_bytes(source.read_bytes())
    entry = next(entry for entry in shipped.files or [] if entry.path == variant.file)
    variant.sha256 = entry.sha256 = hashlib.sha256(model_file.read_bytes()).hexdigest()
    variant.bytes = entry.bytes = model_file.stat().st_size
    entry.encodings = None  # the precompressed siblings are of the old file
    bundle_manifest.dump(directory, shipped)  # bundle.json and bundle.files.mjs
    report = tmp_path / "report.json"
    failed = run_cli("test", directory, "--no-fallback", "--report", report)
    assert failed.returncode != 0
    checks = json.loads(report.read_text())["checks"]
    assert [check["unsupported"] for check in checks] == ["runtime", "runtime"]
    assert all("Unsupported model IR version: 14, max supported IR version: 13" in check["error"]
               for check in checks)
    assert "UNSUPPORTED (runtime)" in failed.stdout and "UNSUPPORTED (device)" not in failed.stdout
    assert "/onnxruntime/core/" not in failed.stdout + report.read_text()


def test_given_inputs_reach_the_browser_check_and_bundle_test(tmp_path, runtime_dist):
    model = compat_models.needs_input(tmp_path)  # integer output only; runs only with n = 16
    directory = tmp_path / "dist"
    result = run_cli("build", model, "-o", directory, "--runtime-dir", runtime_dist,
                     "--input", "n=16", "--ep", "wasm", "--strict")
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((directory / "bundle.json").read_text())
    assert manifest["verification"]["status"] == "passed"
    assert manifest["verification"]["results"]["fp32"]["wasm"]["max_abs_error"] == 0

    x = np.arange(18, dtype=np.int64).reshape(3, 2, 3)
    np.savez(tmp_path / "data.npz", x=x, n=np.full((3, 1), 16, np.int64))
    report = tmp_path / "report.json"
    tested = run_cli("test", directory, "--sample", tmp_path / "data.npz", "--ep", "wasm",
                     "--report", report)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    outputs = [check["output"] for check in json.loads(report.read_text())["checks"][0]["outputs"]]
    assert outputs == ["y", "y [sample 1]", "y [sample 2]"]
    untested = run_cli("test", directory, "--ep", "wasm", "--no-fallback")
    assert untested.returncode != 0
    assert "--input n=VALUE|FILE.npy" in untested.stderr.strip().splitlines()[-1]


def test_a_wrong_webgpu_pow_on_negative_bases_is_caught_and_skipped(tmp_path, runtime_dist):
    # Pow(x, 0.5) is NaN for x < 0; onnxruntime-web 1.31.1's WebGPU EP returns numbers there.
    # The check feeds the base negative values too, so the build records WebGPU as failed and
    # load() runs the model on WASM, which computes the NaNs native onnxruntime does.
    source = compat_models.fractional_power(tmp_path)
    directory = tmp_path / "dist"
    result = run_cli("build", source, "-o", directory, "--runtime-dir", runtime_dist)
    assert result.returncode == 0, result.stderr
    text = (directory / "bundle.json").read_text()
    json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in bundle.json"))
    verification = json.loads(text)["verification"]
    assert verification["results"]["fp32"]["wasm"]["passed"]
    assert verification["fallback"]["passed"]
    webgpu = verification["results"]["fp32"]["webgpu"]
    assert not webgpu["passed"] and "unsupported" not in webgpu
    assert "NaN or infinity" in result.stderr
    checked = run_cli("test", directory)  # a failure known at build time: load() skips it
    assert checked.returncode == 0, checked.stdout + checked.stderr
