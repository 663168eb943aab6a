"""`bundle build --target edge`: .ort variants that native onnxruntime loads and that match the
original model, the reduced-build operator config beside them, and edge.json."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from onnxruntime.tools.reduced_build_config_parser import parse_config

from bundler.bundle.edge import load_edge
from bundler.bundle.layout import EDGE_OPERATORS_CONFIG as CONFIG_FILE
from bundler.bundle.manifest import dumps
from bundler.edge.build import ORT_CHECK, check_ort
from bundler.errors import QuantizeError
from bundler.resources import example_calibration, example_model
from tests import models
from tests.conftest import run_cli


def _run(path, feeds):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.fixture(scope="module")
def example_edge(tmp_path_factory):
    root = tmp_path_factory.mktemp("edge")
    result = run_cli("build", "--target", "edge", cwd=root)
    assert result.returncode == 0, result.stderr
    return root / "edge", json.loads((root / "edge" / "edge.json").read_text())


def test_example_ships_ort_variants_with_int8_static_as_default(example_edge):
    directory, manifest = example_edge
    assert sorted(p.name for p in directory.iterdir()) == sorted(["edge.json", "models",
                                                                 CONFIG_FILE])
    assert [v["file"] for v in manifest["sessions"][0]["variants"]] == ["models/fp32.ort",
                                                         "models/int8-static.ort"]
    assert manifest["sessions"][0]["default_variant"] == "int8-static"
    assert manifest["target"] == "edge"
    int8 = manifest["sessions"][0]["variants"][1]
    assert int8["accuracy"]["data"] == "calibration" and int8["accuracy"]["top1_agreement"] >= 0.95
    for variant in manifest["sessions"][0]["variants"]:
        assert variant["ort_check"]["max_abs_error"] <= ORT_CHECK.atol
        assert variant["bytes"] == (directory / variant["file"]).stat().st_size


def test_the_ort_files_load_natively_and_match_the_original(example_edge):
    directory, _ = example_edge
    images = np.load(example_calibration())["image"][:16]
    original = _run(example_model(), {"image": images})[0]
    fp32 = _run(directory / "models" / "fp32.ort", {"image": images})[0]
    np.testing.assert_allclose(fp32, original, atol=1e-4, rtol=1e-4)
    # int8 static: fused integer kernels, close to fp32 and the same class on these digits.
    int8 = _run(directory / "models" / "int8-static.ort", {"image": images})[0]
    assert np.abs(int8 - original).max() < 0.1
    assert (int8.argmax(1) == original.argmax(1)).mean() >= 0.9


def test_the_reduced_build_config_lists_every_operator(example_edge):
    directory, manifest = example_edge
    required, _ = parse_config(str(directory / CONFIG_FILE), enable_type_reduction=True)
    listed = {domain: {int(opset): set(ops) for opset, ops in by_opset.items()}
              for domain, by_opset in manifest["required_operators"]["operators"].items()}
    assert required == listed
    ops = set().union(*required["ai.onnx"].values())
    assert {"MaxPool", "Gemm", "Softmax", "QLinearConv"} <= ops  # fp32 and the fused int8 ops
    text = (directory / CONFIG_FILE).read_text()
    assert "# - models/fp32.ort\n# - models/int8-static.ort\n" in text  # no staging paths


def test_bundle_run_on_the_edge_folder_matches_its_reference(example_edge):
    directory, _ = example_edge
    for variant in ("int8-static", "fp32"):
        result = run_cli("run", directory, "--ep", "cuda,cpu", "--variant", variant, "--json")
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["ep"] == "cpu" and data["reference"]["matches"] is True


def test_edge_json_is_read_as_its_records_and_a_newer_version_is_refused(example_edge, tmp_path):
    directory, manifest = example_edge
    assert manifest["schema_version"] == 2 and "variants" not in manifest
    loaded = load_edge(directory)
    assert dumps(loaded) == (directory / "edge.json").read_text()
    assert [s.name for s in loaded.sessions] == [manifest["name"]]
    newer = tmp_path / "newer"
    shutil.copytree(directory, newer)
    (newer / "edge.json").write_text(json.dumps({**manifest, "schema_version": 3}))
    result = run_cli("run", newer)
    assert result.returncode == 2 and "schema_version 3" in result.stderr
    assert "Traceback" not in result.stderr
    # version 1 (before sessions): the one model's keys at the top level, read as one session
    (session,) = manifest["sessions"]
    old = {key: value for key, value in manifest.items() if key != "sessions"}
    old.update({key: value for key, value in session.items() if key != "name"}, schema_version=1)
    (newer / "edge.json").write_text(json.dumps(old))
    assert dumps(load_edge(newer)) == (directory / "edge.json").read_text()


def test_without_calibration_only_fp32_ships(tmp_path):
    model = models.if_subgraph(tmp_path)
    result = run_cli("build", model, "--target", "edge", "-o", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "int8-static, the recommended edge default, needs --calibration" in result.stderr
    manifest = json.loads((tmp_path / "out" / "edge.json").read_text())
    assert [v["name"] for v in manifest["sessions"][0]["variants"]] == ["fp32"]
    assert manifest["required_operators"]["operators"]["ai.onnx"]  # subgraph ops included
    result = run_cli("build", model, "--target", "edge", "-o", tmp_path / "out")
    assert result.returncode == 0, result.stderr  # its own folder is replaced without --force
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    result = run_cli("build", model, "--target", "edge", "-o", tmp_path / "other")
    assert result.returncode == 2 and "is not empty and was not made by bundle build" in \
        result.stderr
    feeds = {"x": np.ones((2, 4), np.float32), "flag": np.array(True)}
    np.testing.assert_allclose(_run(tmp_path / "out" / "models" / "fp32.ort", feeds)[0],
                               _run(model, feeds)[0], atol=1e-6)


def test_auto_is_refused_and_a_mismatching_ort_is_never_shipped(tmp_path, example_edge):
    result = run_cli("build", "--target", "edge", "--quantize", "auto", "-o", tmp_path / "x")
    assert result.returncode == 2 and "for --target edge give --variants" in result.stderr
    assert not (tmp_path / "x").exists()
    changed = onnx.load(example_model())
    weight = changed.graph.initializer[0]
    weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 1.05, weight.name))
    onnx.save(changed, tmp_path / "changed.onnx")
    samples = [{"image": np.load(example_calibration())["image"][:4]}]
    directory, _ = example_edge
    with pytest.raises(QuantizeError, match="differs from changed.onnx on output"):
        check_ort(directory / "models" / "fp32.ort", tmp_path / "changed.onnx", samples)
