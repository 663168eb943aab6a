"""int8: dynamic quantization, per-channel or per-tensor by measurement."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundler.variants.metrics import measure
from bundler.variants.registry import make_variant
from tests.variants.helpers import feeds, ops, ratio


@pytest.mark.parametrize(("name", "weight_type"), [("mlp", "QInt8"), ("cnn", "QUInt8")])
def test_int8_dynamic(
    optimized: dict[str, Path], tmp_path: Path, name: str, weight_type: str
) -> None:
    dst = tmp_path / "int8.onnx"
    result = make_variant("int8", optimized[name], dst, calibration=feeds(name))

    assert result.settings["mode"] == "dynamic"
    assert result.settings["weight_type"] == weight_type
    assert isinstance(result.settings["per_channel"], bool)
    assert any(note.startswith("per-channel weights: cosine") for note in result.notes)
    assert 0.25 <= ratio(dst, optimized[name]) <= 0.35
    assert ops(dst)["DynamicQuantizeLinear"] >= 1
    metrics = measure(optimized[name], dst, feeds(name))
    assert metrics.cosine >= 0.998 and metrics.top1_agreement >= 0.9


def test_int8_dynamic_without_feeds_uses_per_channel(
    optimized: dict[str, Path], tmp_path: Path
) -> None:
    result = make_variant("int8", optimized["transformer"], tmp_path / "int8.onnx")
    assert result.settings["per_channel"] is True
    assert result.settings["weight_type"] == "QInt8"
