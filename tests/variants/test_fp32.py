"""fp32: a self-contained copy of the optimised model."""

from __future__ import annotations

from pathlib import Path

from bundler.bundle.modelio import model_bytes
from bundler.variants.registry import make_variant
from tests import models


def test_fp32_is_a_copy(optimized: dict[str, Path], tmp_path: Path) -> None:
    result = make_variant("fp32", optimized["mlp"], tmp_path / "fp32.onnx")
    assert (tmp_path / "fp32.onnx").read_bytes() == optimized["mlp"].read_bytes()
    assert result.kind == "fp32" and result.path == tmp_path / "fp32.onnx"


def test_fp32_of_a_model_with_external_data_is_self_contained(tmp_path: Path) -> None:
    src = models.external_data(tmp_path)
    dst = tmp_path / "variants" / "fp32.onnx"
    make_variant("fp32", src, dst)
    assert model_bytes(dst) == dst.stat().st_size
