"""fp16: float16 inside, float32 at the edges, refused on overflow."""

from __future__ import annotations

import math
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto

from bundler.bundle.modelio import model_files, read_model, signature
from bundler.errors import QuantizeError
from bundler.variants.metrics import measure
from bundler.variants.registry import make_variant
from bundler.verify.reference import native_reference
from tests import models
from tests.variants.helpers import (
    EVERY_ROW,
    as_large,
    assert_same_variant,
    elem_types,
    feeds,
    ratio,
)


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


def test_fp16_of_a_large_model_is_converted_a_block_at_a_time(
        decoder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From a model past the large-model size, the converter rewrites the graph alone and each
    float weight is read, converted and written a block at a time: the same variant, node for
    node and value for value, as the one made from the model in memory, with the same notes
    (its activations probed natively beside the data files)."""
    import bundler.variants.fp16 as fp16

    source = decoder
    samples = [native_reference(source, signature(read_model(source, load_weights=False)).inputs,
                                {}).feeds]
    whole = tmp_path / "whole.onnx"
    expected = make_variant("fp16", source, whole, calibration=samples)
    # its NaN/Inf check runs it natively: its Reshapes' shapes (int64 x 4) stay inline
    large = as_large(source, tmp_path / "large", monkeypatch, inline_below=128)
    monkeypatch.setattr(fp16, "HALF_BLOCK", 1000)  # 250 values: weights in blocks, cut mid-row
    dst = tmp_path / "streamed.onnx"
    result = make_variant("fp16", large, dst, calibration=samples)
    assert (result.settings, result.requires, result.notes) == (
        expected.settings, expected.requires, expected.notes)
    assert any("largest float16 activation" in note for note in result.notes)
    assert model_files(dst) == [dst, dst.with_name("streamed.onnx.data")]
    assert not list(large.parent.glob("bundler-*"))  # the probe's graph is gone
    weights = assert_same_variant(dst, whole, samples)
    assert sum(t.data_type == TensorProto.FLOAT16 and math.prod(t.dims) > 250
               for t in weights.values()) >= 2  # converted in several blocks
