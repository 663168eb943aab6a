"""int8-static: calibrated QDQ, with its retries."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from bundler.errors import QuantizeError
from bundler.variants.metrics import measure
from bundler.variants.registry import make_variant
from tests.variants.helpers import feeds, ops, ratio


@pytest.mark.parametrize("method", ["minmax", "percentile", "entropy"])
def test_int8_static(optimized: dict[str, Path], tmp_path: Path, method: str) -> None:
    dst = tmp_path / "static.onnx"
    result = make_variant(
        "int8-static", optimized["cnn"], dst, calibration=feeds("cnn"), calibration_method=method
    )

    assert result.settings == {
        "format": "QDQ",
        "activation_type": "QUInt8",
        "weight_type": "QInt8",
        "per_channel": True,
        "calibration_method": method,
        "calibration_samples": 8,
        "nodes_excluded": [],
    }
    assert result.notes == []
    assert 0.25 <= ratio(dst, optimized["cnn"]) <= 0.35
    assert ops(dst)["QuantizeLinear"] >= 3
    metrics = measure(optimized["cnn"], dst, feeds("cnn"))
    assert metrics.cosine >= 0.995 and metrics.top1_agreement >= 0.85


def test_int8_static_needs_calibration(optimized: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(QuantizeError, match="int8-static needs calibration inputs"):
        make_variant("int8-static", optimized["cnn"], tmp_path / "x.onnx")


def test_int8_static_retries_per_tensor_when_a_bias_cannot_be_rescaled(
    optimized: dict[str, Path], tmp_path: Path
) -> None:
    # grouped ConvTranspose: per-channel weight scales (4) do not match its bias (8)
    dst = tmp_path / "static.onnx"
    lines: list[str] = []
    result = make_variant(
        "int8-static", optimized["upsampler"], dst, calibration=feeds("upsampler"), log=lines.append
    )

    assert result.settings["per_channel"] is False
    assert len(result.notes) == 1
    assert result.notes[0].startswith("per-channel QDQ failed (ValueError: operands could not")
    assert result.notes[0].endswith("at up (ConvTranspose)); retried per-tensor")
    assert lines == [f"int8-static: {result.notes[0]}"]
    assert measure(optimized["upsampler"], dst, feeds("upsampler")).cosine >= 0.999


def test_int8_static_leaves_a_failing_node_in_float(
    optimized: dict[str, Path], tmp_path: Path, monkeypatch
) -> None:
    # no real model crashes the per-tensor quantizer at one node, so make conv1's Conv do that
    from onnxruntime.quantization.operators.conv import QDQConv

    real = QDQConv.quantize

    def quantize(self) -> None:
        if self.node.name == "conv1":
            raise IndexError("index 3 is out of bounds")
        real(self)

    monkeypatch.setattr(QDQConv, "quantize", quantize)
    dst = tmp_path / "static.onnx"
    result = make_variant("int8-static", optimized["cnn"], dst, calibration=feeds("cnn"))

    assert result.settings["per_channel"] is False
    assert result.settings["nodes_excluded"] == ["conv1"]
    assert result.notes == [
        "per-channel QDQ failed (IndexError: index 3 is out of bounds at conv1 (Conv));"
        " retried per-tensor",
        "per-tensor QDQ failed (IndexError: index 3 is out of bounds at conv1 (Conv));"
        " retried leaving conv1 in float32",
    ]
    conv1 = next(node for node in onnx.load(dst).graph.node if node.name == "conv1")
    weight = conv1.input[1]
    assert weight == "conv1.weight"  # not a DequantizeLinear output
