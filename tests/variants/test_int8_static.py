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


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests import decoder_models

    return decoder_models.qwen2(tmp_path_factory.mktemp("qwen2")).onnx


def test_int8_static_of_a_decoder_keeps_the_empty_cache_and_the_mask_float(
    qwen2: Path, tmp_path: Path
) -> None:
    """Calibrated on first steps (the past key/values empty) an optimum Qwen2 got QDQ on its past
    inputs, which fails on WebGPU, and on its causal mask (-inf: an infinite scale), which made
    every attention uniform (cosine 0.07 to fp32's logits at 4 layers x 256); both stay float32
and the logits follow fp32's, with the cache too."""
    import numpy as np

    from bundler.bundle.modelio import cpu_session
    from bundler.text.generate import Decoder

    session = cpu_session(qwen2)
    pasts = [spec.name for spec in session.get_inputs() if spec.name.startswith("past")]
    rng = np.random.default_rng(0)
    calibration = []
    for length in (5, 8, 11):
        feed = {"input_ids": rng.integers(0, 512, (1, length)),
                "attention_mask": np.ones((1, length), np.int64),
                "position_ids": np.arange(length)[None]}
        calibration.append(feed | {name: np.zeros((1, 2, 0, 16), np.float32) for name in pasts})
    dst = tmp_path / "static.onnx"
    result = make_variant("int8-static", qwen2, dst, calibration=calibration)

    model = onnx.load(dst)
    quantized = {node.input[0] for node in model.graph.node if node.op_type == "QuantizeLinear"}
    assert quantized and not quantized & set(pasts)
    scales = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear" and node.input[1] in scales:
            assert np.all(np.isfinite(scales[node.input[1]])), node.input[0]
    assert any("empty in calibration" in note for note in result.notes)

    def cosine(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.sum(a * b) / (np.linalg.norm(a) * np.linalg.norm(b)))

    want, got = Decoder(session), Decoder(cpu_session(dst))
    ids, mask = [5, 17, 99, 3, 42], np.ones((1, 6), np.int64)
    (first, past), (ours, our_past) = (d.run(ids, None, mask[:, :5]) for d in (want, got))
    assert cosine(first, ours) > 0.99
    # ranges calibrated on first steps only: a step with the cache loses a little more
    assert cosine(want.run([7], past, mask)[0], got.run([7], our_past, mask)[0]) > 0.97
