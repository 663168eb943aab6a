"""int8-weights: weight-only int8 per output channel."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto

from bundler.errors import QuantizeError
from bundler.variants.metrics import measure
from bundler.variants.registry import make_variant
from tests.variants.helpers import elem_types, feeds, ratio


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
