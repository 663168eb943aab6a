from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import bundler.quantize as quantize_module
from bundler.errors import ConfigError, QuantizeError
from bundler.modelio import model_bytes
from bundler.optimize import optimize
from bundler.quantize import (
    DEFAULT_BUDGET,
    VARIANT_KINDS,
    Metrics,
    choose_auto,
    make_variant,
    measure,
    native_latency_ms,
    parse_budget,
    to_ort_format,
)
from tests import models, quant_models

BUILDERS = {
    "mlp": (quant_models.mlp_classifier, quant_models.mlp_feeds),
    "transformer": (quant_models.transformer_block, quant_models.transformer_feeds),
    "cnn": (quant_models.conv_classifier, quant_models.image_feeds),
    "odd_k": (quant_models.odd_k_matmul, quant_models.odd_k_feeds),
    "upsampler": (quant_models.grouped_upsampler, quant_models.upsampler_feeds),
    "overflow": (quant_models.fp16_overflow, quant_models.fp16_overflow_feeds),
}


@pytest.fixture(scope="session")
def optimized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each test model, optimised as `bundle build` does before making variants."""
    directory = tmp_path_factory.mktemp("optimized")
    paths = {}
    for name, (build, _) in BUILDERS.items():
        paths[name] = directory / f"{name}.onnx"
        optimize(build(directory / f"{name}.raw.onnx"), paths[name])
    return paths


def feeds(name: str) -> list[dict[str, np.ndarray]]:
    return BUILDERS[name][1]()


def ops(path: Path) -> Counter:
    return Counter(node.op_type for node in onnx.load(path).graph.node)


def ratio(variant: Path, reference: Path) -> float:
    return model_bytes(variant) / model_bytes(reference)


def elem_types(values) -> list[int]:
    return [value.type.tensor_type.elem_type for value in values]


def test_fp32_is_a_copy(optimized: dict[str, Path], tmp_path: Path) -> None:
    result = make_variant("fp32", optimized["mlp"], tmp_path / "fp32.onnx")
    assert (tmp_path / "fp32.onnx").read_bytes() == optimized["mlp"].read_bytes()
    assert result.kind == "fp32" and result.path == tmp_path / "fp32.onnx"


def test_fp32_of_a_model_with_external_data_is_self_contained(tmp_path: Path) -> None:
    src = models.external_data(tmp_path)
    dst = tmp_path / "variants" / "fp32.onnx"
    make_variant("fp32", src, dst)
    assert model_bytes(dst) == dst.stat().st_size


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
    assert metrics.cosine >= 0.99999 and metrics.top1_agreement == 1.0


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


def test_int4_makes_matmulnbits(optimized: dict[str, Path], tmp_path: Path) -> None:
    dst = tmp_path / "int4.onnx"
    result = make_variant("int4", optimized["transformer"], dst)

    # 6 projections + head; q @ k^T and probs @ v have no constant weight
    assert ops(dst)["MatMulNBits"] == 7 and ops(dst)["MatMul"] == 2
    nbits = next(node for node in onnx.load(dst).graph.node if node.op_type == "MatMulNBits")
    attributes = {a.name: a.i for a in nbits.attribute}
    assert nbits.domain == "com.microsoft"
    assert attributes["bits"] == 4 and attributes["block_size"] == 32
    assert result.settings["matmuls_int4"] == 7 and result.settings["matmuls_float32"] == 2
    assert ratio(dst, optimized["transformer"]) <= 0.2
    metrics = measure(optimized["transformer"], dst, feeds("transformer"))
    assert 0.9 <= metrics.cosine < 0.999  # 4 bits is visibly lossy: the budget decides


def test_int4_names_unnamed_matmuls(tmp_path: Path) -> None:
    src = models.external_data(tmp_path)  # one unnamed MatMul, K = 64
    dst = tmp_path / "int4.onnx"
    make_variant("int4", src, dst)
    assert ops(dst) == Counter({"MatMulNBits": 1})


@pytest.mark.parametrize("name", ["odd_k", "cnn"])
def test_int4_with_no_eligible_matmul(optimized: dict[str, Path], tmp_path: Path, name) -> None:
    with pytest.raises(QuantizeError, match="no MatMul with a constant .* multiple of 32"):
        make_variant("int4", optimized[name], tmp_path / "int4.onnx")


@pytest.mark.parametrize("kind", VARIANT_KINDS)
def test_variants_are_deterministic(optimized: dict[str, Path], tmp_path: Path, kind) -> None:
    name = "cnn" if kind != "int4" else "transformer"
    first, second = tmp_path / "a" / "model.onnx", tmp_path / "b" / "model.onnx"
    one = make_variant(kind, optimized[name], first, calibration=feeds(name))
    two = make_variant(kind, optimized[name], second, calibration=feeds(name))
    data = first.read_bytes()
    assert data == second.read_bytes()
    assert one.settings == two.settings and one.notes == two.notes
    json.dumps(one.to_json())
    assert b"ort.quant" not in data and b"bundler-" not in data and b"/tmp" not in data


def test_library_errors_become_one_line_quantize_errors(
    optimized: dict[str, Path], tmp_path: Path, monkeypatch
) -> None:
    def crash(*args, **kwargs):
        raise RuntimeError("MatMulInteger kernel missing\n  File ... traceback")

    monkeypatch.setattr(quantize_module, "quantize_dynamic", crash)
    with pytest.raises(QuantizeError) as caught:
        make_variant("int8", optimized["mlp"], tmp_path / "int8.onnx")
    message = str(caught.value)
    assert message == (
        "could not make the int8 variant of mlp.onnx (RuntimeError: MatMulInteger kernel"
        " missing); try int8-weights"
    )


def test_unknown_kind_and_method(optimized: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown variant 'int2'; choose from fp32, fp16"):
        make_variant("int2", optimized["mlp"], tmp_path / "x.onnx")
    with pytest.raises(ConfigError, match="unknown calibration method 'kl'"):
        make_variant("int8-static", optimized["mlp"], tmp_path / "x.onnx", calibration_method="kl")


# --- measure ---------------------------------------------------------------------------------


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
    assert metrics == Metrics(0.0, 0.0, 1.0, 1.0, 0)


def test_measure_values(tmp_path: Path) -> None:
    reference = _scaled(tmp_path / "ref.onnx", 1.0, [2, 3])
    candidate = _scaled(tmp_path / "cand.onnx", 1.1, [2, 3])
    x = np.array([[1, 2, 3], [-4, 5, 0]], np.float32)

    metrics = measure(reference, candidate, [{"x": x}])

    assert metrics.max_abs == pytest.approx(0.5, rel=1e-5)
    assert metrics.mean_rel == pytest.approx(np.abs(0.1 * x).mean() / 9, rel=1e-5)
    assert metrics.cosine == pytest.approx(1.0)
    assert metrics.top1_agreement == 1.0
    assert metrics.nonfinite == 0


def test_measure_counts_nonfinite_and_skips_top1_for_non_class_outputs(tmp_path: Path) -> None:
    reference = _scaled(tmp_path / "ref.onnx", 1.0, [4])
    candidate = _scaled(tmp_path / "cand.onnx", float("inf"), [4])
    metrics = measure(reference, candidate, [{"x": np.array([0, 1, 2, 3], np.float32)}])
    assert metrics.nonfinite == 4  # inf, inf, inf and 0 * inf = NaN
    assert metrics.top1_agreement is None
    assert not DEFAULT_BUDGET.accepts(metrics)


def test_metrics_to_json_is_rounded() -> None:
    metrics = Metrics(
        max_abs=0.0123456789, mean_rel=1 / 3, cosine=0.99912345678, top1_agreement=None
    )
    assert metrics.to_json() == {
        "max_abs": 0.0123457,
        "mean_rel": 0.333333,
        "cosine": 0.999123,
        "top1_agreement": None,
        "nonfinite": 0,
    }
    assert json.dumps(Metrics(float("inf"), 0.0, float("nan"), 1.0).to_json()) == (
        '{"max_abs": null, "mean_rel": 0.0, "cosine": null, "top1_agreement": 1.0, "nonfinite": 0}'
    )


def test_native_latency_ms(optimized: dict[str, Path]) -> None:
    latency = native_latency_ms(optimized["mlp"], feeds("mlp"), threads=1, repeats=3)
    assert 0 < latency < 1000


# --- budget and choice -----------------------------------------------------------------------


def test_parse_budget() -> None:
    budget = parse_budget(" cosine >= 0.999, top1>=0.99,max_abs<=0.01 , mean_rel<=1e-2")
    assert budget.terms == (
        ("cosine", 0.999),
        ("top1", 0.99),
        ("max_abs", 0.01),
        ("mean_rel", 0.01),
    )
    assert str(budget) == "cosine>=0.999,top1>=0.99,max_abs<=0.01,mean_rel<=0.01"
    assert parse_budget(str(DEFAULT_BUDGET)) == DEFAULT_BUDGET


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the error budget is empty"),
        ("cosine>=0.999,psnr>=30", "'psnr>=30' has unknown key 'psnr'; accepted: cosine>=, top1>="),
        ("cosine<=0.999", "cosine takes >= \\(a lower bound\\)"),
        ("max_abs>=0.1", "max_abs takes <= \\(an upper bound\\)"),
        ("cosine>=high", "'high' is not a number"),
        ("cosine 0.999", "is not KEY>=VALUE or KEY<=VALUE; accepted: cosine>="),
        ("top1>=1.5", "top1 must be between 0 and 1"),
        ("cosine>=0.9,cosine>=0.99", "names cosine twice"),
        ("cosine>=0.9,", "term '' is not KEY>=VALUE"),
    ],
)
def test_parse_budget_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_budget(text)


def test_budget_accepts_and_explains() -> None:
    budget = parse_budget("cosine>=0.999,top1>=0.99,max_abs<=0.05")
    good = Metrics(max_abs=0.01, mean_rel=0.001, cosine=0.9995, top1_agreement=1.0)
    bad = Metrics(max_abs=0.2, mean_rel=0.001, cosine=0.998, top1_agreement=0.995)
    no_classes = Metrics(max_abs=0.01, mean_rel=0.001, cosine=0.9995, top1_agreement=None)

    assert budget.accepts(good) and budget.accepts(no_classes)
    assert budget.explain(good) == "within budget (cosine>=0.999,top1>=0.99,max_abs<=0.05)"
    assert not budget.accepts(bad)
    assert budget.explain(bad) == "cosine 0.998 is not >= 0.999; max_abs 0.2 is not <= 0.05"


def test_choose_auto() -> None:
    perfect = Metrics(0.0, 0.0, 1.0, 1.0)
    close = Metrics(0.01, 0.001, 0.9995, 1.0)
    lossy = Metrics(0.5, 0.05, 0.95, 0.8)
    results = [
        ("fp32", 1000, perfect, True),
        ("fp16", 500, close, True),
        ("int8-weights", 270, close, True),
        ("int8", 260, close, False),  # failed in the browser
        ("int4", 160, lossy, True),  # outside the budget
    ]
    assert choose_auto(results) == "int8-weights"
    assert choose_auto(results, parse_budget("cosine>=0.9")) == "int4"
    assert choose_auto([("fp32", 1000, lossy, True), ("fp16", 500, lossy, True)]) == "fp32"
    assert choose_auto([("fp32", 1000, perfect, False), ("fp16", 500, lossy, True)]) is None


# --- ORT format -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fp32", "int8-weights", "int4"])
def test_to_ort_format(optimized: dict[str, Path], tmp_path: Path, kind: str) -> None:
    variant = tmp_path / f"{kind}.onnx"
    make_variant(kind, optimized["transformer"], variant)
    dst = tmp_path / f"{kind}.ort"

    to_ort_format(variant, dst, feeds("transformer"))

    # basic level keeps the DequantizeLinear weights int8 (no folding back to float)
    assert 0.9 <= dst.stat().st_size / model_bytes(variant) <= 1.2
    session = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["x"]


def test_to_ort_format_is_equivalent_across_runs(
    optimized: dict[str, Path], tmp_path: Path
) -> None:
    # onnxruntime writes its kernel-type table from a hash map, so the bytes may differ run to
    # run; size and results do not
    to_ort_format(optimized["cnn"], tmp_path / "a.ort")
    to_ort_format(optimized["cnn"], tmp_path / "b.ort")
    assert (tmp_path / "a.ort").stat().st_size == (tmp_path / "b.ort").stat().st_size
    a, b = (
        ort.InferenceSession(str(tmp_path / name), providers=["CPUExecutionProvider"])
        for name in ("a.ort", "b.ort")
    )
    feed = feeds("cnn")[0]
    np.testing.assert_array_equal(a.run(None, feed)[0], b.run(None, feed)[0])


def test_to_ort_format_failure_is_a_quantize_error(tmp_path: Path) -> None:
    (tmp_path / "broken.onnx").write_bytes(b"not a model")
    with pytest.raises(QuantizeError, match="could not convert broken.onnx to .ort"):
        to_ort_format(tmp_path / "broken.onnx", tmp_path / "broken.ort")
