"""fp16: float16 inside, float32 at the edges, refused on overflow."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto

from bundler.errors import QuantizeError
from bundler.variants.metrics import measure
from bundler.variants.registry import make_variant
from tests import models
from tests.variants.helpers import EVERY_ROW, elem_types, feeds, ratio


@pytest.mark.parametrize("name", ["mlp", "transformer", "cnn"])
def test_fp16_halves_the_model_and_keeps_float32_io(
    optimized: dict[str, Path], tmp_path: Path, name: str
) -> None:
    dst = tmp_path / "fp16.onnx"
    result = make_variant("fp16", optimized[name], dst, calibration=feeds(name))

    assert 0.45 <= ratio(dst, optimized[name]) <= 0.55
    model = onnx.load(dst)
    assert set(elem_types(model.graph.input)) == {TensorProto.FLOAT}
    assert set(elem_types(model.graph.output)) == {TensorProto.FLOAT}
    assert any(t.data_type == TensorProto.FLOAT16 for t in model.graph.initializer)
    onnx.checker.check_model(model)  # the converter's Casts are sorted into place
    assert result.settings["keep_io_types"] is True
    assert {"Resize", "TopK", "NonMaxSuppression", "Range"} <= set(result.settings["op_block_list"])
    assert any("no NaN/Inf" in note for note in result.notes)
    metrics = measure(optimized[name], dst, feeds(name))
    assert metrics.cosine >= 0.99999 and metrics.top1_agreement == EVERY_ROW


def test_fp16_keeps_resize_in_float32(optimized: dict[str, Path], tmp_path: Path) -> None:
    dst = tmp_path / "fp16.onnx"
    result = make_variant("fp16", optimized["upsampler"], dst, calibration=feeds("upsampler"))
    assert "kept Resize in float32" in result.notes
    graph = onnx.load(dst).graph
    casts = {node.output[0]: node for node in graph.node if node.op_type == "Cast"}
    resize = next(node for node in graph.node if node.op_type == "Resize")
    data = casts[resize.input[0]]
    assert next(a.i for a in data.attribute if a.name == "to") == TensorProto.FLOAT


def test_fp16_blocks_onnx_ml_ops(tmp_path: Path) -> None:
    src = models.ml_classifier_no_zipmap(tmp_path)
    result = make_variant("fp16", src, tmp_path / "fp16.onnx")
    assert "LinearClassifier" in result.settings["op_block_list"]
    assert "kept LinearClassifier in float32" in result.notes
    assert "no feeds given, so the NaN/Inf check did not run" in result.notes


def test_fp16_overflow_is_refused(optimized: dict[str, Path], tmp_path: Path) -> None:
    # onnxruntime's CPU EP would run this fp16 MatMul in float32 and hide the overflow
    with pytest.raises(QuantizeError, match=r"activation 'big' reaches 3\.\d+e\+05.*65504"):
        make_variant(
            "fp16", optimized["overflow"], tmp_path / "fp16.onnx", calibration=feeds("overflow")
        )
