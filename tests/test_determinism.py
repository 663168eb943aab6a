"""Determinism: two builds of the same model with the same options are byte-identical folders,
for every variant kind and for the .ort format (each build in its own process, as users run it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundler.bundle.modelio import sha256_of
from bundler.variants.kinds import VARIANT_KINDS
from tests import quant_models
from tests.conftest import run_cli
from tests.test_bad_inputs import _tree


def _build_twice(tmp_path: Path, model: Path, *flags: str | Path) -> tuple[Path, Path]:
    outputs = tmp_path / "first", tmp_path / "second"
    for output in outputs:
        result = run_cli("build", model, "-o", output, *flags)
        assert result.returncode == 0, result.stderr
    return outputs


@pytest.mark.parametrize("model_format", ["onnx", "ort"])
def test_two_builds_are_byte_identical_for_every_variant_kind(tmp_path, runtime_dist,
                                                              model_format):
    # The transformer block has the MatMul weights int4 and int8 need, and enough operator
    # types that onnxruntime's hash-ordered kernel table in a .ort file shows any disorder.
    model = quant_models.transformer_block(tmp_path / "block.onnx")
    first, second = _build_twice(tmp_path, model, "--no-verify", "--runtime-dir", runtime_dist,
                                 "--variants", ",".join(VARIANT_KINDS), "--format", model_format)
    manifest = json.loads((first / "bundle.json").read_text())
    assert sorted(v["name"] for v in manifest["sessions"][0]["variants"]) == sorted(VARIANT_KINDS)
    assert _tree(first) == _tree(second)
    for variant in manifest["sessions"][0]["variants"]:
        assert variant["file"].endswith("." + model_format)
        assert sha256_of(first / variant["file"]) == variant["sha256"]


def test_two_builds_of_int4_per_ep_are_byte_identical(tmp_path, runtime_dist):
    """Its two graphs and their one data file, the same bytes build after build."""
    model = quant_models.transformer_block(tmp_path / "block.onnx")
    first, second = _build_twice(tmp_path, model, "--no-verify", "--runtime-dir", runtime_dist,
                                 "--variants", "int4", "--int4", "format=per-ep")
    assert _tree(first) == _tree(second)
    (variant,) = json.loads((first / "bundle.json").read_text())["sessions"][0]["variants"]
    assert variant["settings"]["format"] == "per-ep" and set(variant["graphs"]) == {"webgpu"}
    assert (first / variant["graphs"]["webgpu"]).is_file()


def test_two_edge_builds_are_byte_identical(tmp_path):
    # --target edge writes its .ort files at the extended optimisation level, in the same way.
    model = quant_models.transformer_block(tmp_path / "block.onnx")
    first, second = _build_twice(tmp_path, model, "--target", "edge")
    assert _tree(first) == _tree(second)
    assert any(path.suffix == ".ort" for path in (first / "models").iterdir())
