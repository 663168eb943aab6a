"""int8-weights: weight-only int8 per output channel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from bundler.bundle.external import INLINE_BELOW
from bundler.bundle.modelio import cpu_session, model_bytes, model_files
from bundler.errors import QuantizeError
from bundler.variants.metrics import measure
from bundler.variants.registry import make_variant
from tests.variants.helpers import as_large, elem_types, feeds, ratio


@pytest.mark.parametrize("name", ["mlp", "transformer", "cnn"])
def test_int8_weights_is_a_quarter_with_little_error(
    optimized: dict[str, Path], tmp_path: Path, name: str
) -> None:
    dst = tmp_path / "int8w.onnx"
    result = make_variant("int8-weights", optimized[name], dst)

    assert 0.25 <= ratio(dst, optimized[name]) <= 0.35
    model = onnx.load(dst)
    dequantize = [node for node in model.graph.node if node.op_type == "DequantizeLinear"]
    assert len(dequantize) == result.settings["weights_int8"] >= 3
    assert {node.domain for node in model.graph.node} == {""}
    by_name = {t.name: t for t in model.graph.initializer}
    for node in dequantize:
        assert by_name[node.input[0]].data_type == TensorProto.INT8
        axis = next(a.i for a in node.attribute if a.name == "axis")
        assert len(by_name[node.input[1]].dims) == 1
        assert by_name[node.input[1]].dims[0] == by_name[node.input[0]].dims[axis]
    assert set(elem_types(model.graph.input)) == {TensorProto.FLOAT}
    metrics = measure(optimized[name], dst, feeds(name))
    assert metrics.cosine >= 0.999
    assert metrics.top1_agreement is not None and metrics.top1_agreement >= 0.95


def test_int8_weights_axes(optimized: dict[str, Path], tmp_path: Path) -> None:
    dst = tmp_path / "int8w.onnx"
    make_variant("int8-weights", optimized["cnn"], dst)
    graph = onnx.load(dst).graph
    axes = {
        node.output[0]: next(a.i for a in node.attribute if a.name == "axis")
        for node in graph.node
        if node.op_type == "DequantizeLinear"
    }
    # Conv: output channels (axis 0); the Gemm has transB=1, so its [N, K] weight is axis 0 too;
    # conv0 (3 -> 32 channels, 864 weights) is too small to bother
    assert axes == {"conv1.weight": 0, "conv2.weight": 0, "fc.weight": 0}
    make_variant("int8-weights", optimized["mlp"], dst)
    graph = onnx.load(dst).graph
    assert {
        next(a.i for a in node.attribute if a.name == "axis")
        for node in graph.node
        if node.op_type == "DequantizeLinear"
    } == {1}  # MatMul [K, N]: per output column


def test_int8_weights_with_nothing_to_quantize(optimized: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(QuantizeError, match="no Conv, Gemm or MatMul weight of 1024"):
        make_variant("int8-weights", optimized["odd_k"], tmp_path / "x.onnx")


@pytest.mark.parametrize("name", ["transformer", "cnn"])
def test_int8_weights_of_a_large_model_is_made_a_weight_at_a_time(
        optimized: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        name: str) -> None:
    """From a model past the large-model size, each weight is read on its own and the variant's
    weights written to its data file: the same variant, value for value, as from memory."""
    whole = tmp_path / "whole.onnx"
    expected = make_variant("int8-weights", optimized[name], whole)
    large = as_large(optimized[name], tmp_path / "large", monkeypatch)
    dst = tmp_path / "streamed.onnx"
    result = make_variant("int8-weights", large, dst)
    assert result.settings == expected.settings
    assert model_files(dst) == [dst, dst.with_name("streamed.onnx.data")]
    graph = onnx.load(dst, load_external_data=False).graph
    assert all(t.data_location == TensorProto.EXTERNAL or len(t.raw_data) < INLINE_BELOW
               for t in graph.initializer)
    assert model_bytes(dst) == pytest.approx(model_bytes(whole), rel=0.02)  # alignment
    made, wanted = cpu_session(dst), cpu_session(whole)
    for feed in feeds(name):
        for got, want in zip(made.run(None, feed), wanted.run(None, feed), strict=True):
            np.testing.assert_array_equal(got, want)
