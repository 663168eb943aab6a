"""A model given with its weights in external data, in headless Chromium: the bundle ships the
graph and its data files, bundle.mjs fetches them (in parts on a static host, with per-file and
total progress, cached by sha256) and hands the data to onnxruntime-web as `externalData`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

from bundler.bundle.manifest import load
from bundler.bundle.options import BuildOptions
from bundler.commands.build import build
from bundler.hosting.publish import assembled
from tests import models
from tests.hostsim import Host, hosting, open_test_page
from tests.test_hosting_browser import LIMIT, LOAD, _check_progress, _heavy, _matches_native

pytestmark = pytest.mark.browser


def test_build_keeps_several_data_files_external_and_verifies_on_both_eps(build_bundle,
                                                                          tmp_path):
    _, manifest = build_bundle(models.external_several(tmp_path / "model"), verify=True)
    variant = manifest["sessions"][0]["variants"][0]
    assert variant["data"], variant
    verification = manifest["verification"]
    results = verification["results"]["fp32"]
    assert results["wasm"]["passed"] and results["webgpu"]["passed"], json.dumps(results)
    assert verification["status"] == "passed", json.dumps(verification, indent=1)


def _wide_dense_external(directory: Path) -> Path:
    """wide_dense (a 5 MB weight) saved with its weights in wide_dense.onnx_data."""
    path = models.wide_dense(directory)
    onnx.save_model(onnx.load(str(path)), path, save_as_external_data=True,
                    location="wide_dense.onnx_data", size_threshold=1024)
    return path


def test_split_data_file_loads_on_a_static_host_with_progress_and_the_cache(
        tmp_path, runtime_dist, plain_browser, browser_settings):
    source = _wide_dense_external(tmp_path / "model")
    root = tmp_path / "dist"
    build(source, BuildOptions(output=root, runtime_dir=runtime_dist, verify=False,
                               execution_providers=("wasm",), max_file_size=LIMIT))
    x = np.sin(np.arange(256, dtype=np.float32))[None, :]
    expected = onnxruntime.InferenceSession(str(source)).run(None, {"x": x})[0]
    manifest = json.loads((root / "bundle.json").read_text())
    variant = manifest["sessions"][0]["variants"][0]
    entries = {entry["path"]: entry for entry in manifest["files"]}
    graph, [data] = entries[variant["file"]], [entries[path] for path in variant["data"]]
    assert len(data["parts"]) == 2  # 5 MB of weights past the 4 MiB limit
    # bundle test and bench run the shipped files natively: the graph and its data put together
    with assembled(root, load(root), variant["file"]) as shipped:
        native = onnxruntime.InferenceSession(str(shipped)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(native, expected)
    host = Host(root, isolation=False)
    with hosting(host) as url, open_test_page(
            plain_browser, url, browser_settings.timeouts_ms["load"]) as page:
        first = page.evaluate(LOAD, {"options": {}})
        _matches_native(first, expected)
        _check_progress(first, "model", graph["bytes"] + data["bytes"])
        files = {event["file"]["path"]: event["file"] for event in first["events"]
                 if event["stage"] == "model"}
        assert {path: file["loaded"] for path, file in files.items()} == {
            graph["path"]: graph["bytes"], data["path"]: data["bytes"]}
        assert data["parts"][0]["path"] in {path.removesuffix(".gz") for path in host.sent}
        host.sent.clear()
        second = page.evaluate(LOAD, {"options": {}})
        _matches_native(second, expected)
        assert _heavy(host.sent) == {}, host.sent  # the graph and its data from Cache Storage
        _matches_native(page.evaluate(LOAD, {"options": {"worker": True}}), expected)

