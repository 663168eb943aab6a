"""measure and native latency."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from bundler.bundle.codec import to_json
from bundler.variants.budget import DEFAULT_BUDGET
from bundler.variants.metrics import Metrics, measure, native_latency_ms
from tests.variants.helpers import COSINE_ONE, EVERY_ROW, feeds


def _scaled(path: Path, factor: float, shape: list) -> Path:
    """y = x * factor with x: float [shape]."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "k"], ["y"])],
        "scaled",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [helper.make_tensor("k", TensorProto.FLOAT, [], [factor])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_measure_identical_models(optimized: dict[str, Path]) -> None:
    metrics = measure(optimized["cnn"], optimized["cnn"], feeds("cnn"))
    # the same session twice: at most float32 rounding where a threaded reduction splits otherwise
    assert metrics.max_abs == pytest.approx(0.0, abs=1e-6)
    assert metrics.mean_rel == pytest.approx(0.0, abs=1e-7)
    assert metrics.cosine == COSINE_ONE
    assert metrics.top1_agreement == EVERY_ROW
    assert metrics.nonfinite == 0


def test_measure_values(tmp_path: Path) -> None:
    reference = _scaled(tmp_path / "ref.onnx", 1.0, [2, 3])
    candidate = _scaled(tmp_path / "cand.onnx", 1.1, [2, 3])
    x = np.array([[1, 2, 3], [-4, 5, 0]], np.float32)

    metrics = measure(reference, candidate, [{"x": x}])

    assert metrics.max_abs == pytest.approx(0.5, rel=1e-5)
    assert metrics.mean_rel == pytest.approx(np.abs(0.1 * x).mean() / 9, rel=1e-5)
    assert metrics.cosine == COSINE_ONE  # y and 1.1 * y point the same way
    assert metrics.top1_agreement == EVERY_ROW
    assert metrics.nonfinite == 0


def test_measure_counts_nonfinite_and_skips_top1_for_non_class_outputs(tmp_path: Path) -> None:
    reference = _scaled(tmp_path / "ref.onnx", 1.0, [4])
    candidate = _scaled(tmp_path / "cand.onnx", float("inf"), [4])
    metrics = measure(reference, candidate, [{"x": np.array([0, 1, 2, 3], np.float32)}])
    assert metrics.nonfinite == 4  # inf, inf, inf and 0 * inf = NaN
    assert metrics.top1_agreement is None
    assert not DEFAULT_BUDGET.accepts(metrics)


def test_the_accuracy_record_is_rounded() -> None:
    metrics = Metrics(
        max_abs=0.0123456789, mean_rel=1 / 3, cosine=0.99912345678, top1_agreement=None
    )
    # 6 significant digits: a tolerance far below the last kept digit
    assert to_json(metrics.accuracy(samples=4, data="generated")) == pytest.approx(
        {
            "max_abs": 0.0123457,
            "mean_rel": 0.333333,
            "cosine": 0.999123,
            "top1_agreement": None,
            "nonfinite": 0,
            "samples": 4,
            "data": "generated",
        },
        abs=1e-12,
    )
    accuracy = Metrics(float("inf"), 0.0, float("nan"), 1.0).accuracy(samples=1, data="sample")
    assert json.dumps(to_json(accuracy)) == (
        '{"max_abs": null, "mean_rel": 0.0, "cosine": null, "top1_agreement": 1.0,'
        ' "nonfinite": 0, "samples": 1, "data": "sample"}'
    )


def test_native_latency_ms(optimized: dict[str, Path]) -> None:
    latency = native_latency_ms(optimized["mlp"], feeds("mlp"), threads=1, repeats=3)
    assert 0 < latency < 1000
