from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import bundler.model.optimize as optimize_module
from bundler.bundle.modelio import model_bytes
from bundler.errors import ConfigError, ModelError
from bundler.model.optimize import optimize
from tests import models, quant_models


def run(path: Path, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)


def input_dims(path: Path) -> list[list[str | int]]:
    return [
        [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
        for value in onnx.load(path).graph.input
    ]


def status(report: optimize_module.OptimizeReport) -> dict[str, str]:
    return {step.name: step.status for step in report.steps}


def test_optimize_keeps_symbolic_dims_and_outputs(tmp_path: Path) -> None:
    src = quant_models.transformer_block(tmp_path / "block.onnx")
    dst = tmp_path / "out" / "block.onnx"
    dst.parent.mkdir()
    lines: list[str] = []

    report = optimize(src, dst, log=lines.append)

    assert status(report) == {
        "fix-dims": "skipped",
        "transformer-fusions": "skipped",
        "onnxslim": "ok",
        "shape-plumbing": "skipped",  # not a decoder with past
        "onnxruntime-basic": "ok",
        "tied-weights": "skipped",
        "validate": "ok",
    }
    assert input_dims(dst) == [["batch", "seq", 128]]
    assert [d.dim_param for d in onnx.load(dst).graph.output[0].type.tensor_type.shape.dim] == [
        "batch",
        "",
    ]
    for feed in quant_models.transformer_feeds(n=2):
        np.testing.assert_allclose(run(dst, feed)[0], run(src, feed)[0], rtol=1e-5, atol=1e-5)
    assert report.nodes_before == 21 and 0 < report.nodes_after <= 21
    assert report.bytes_before == src.stat().st_size
    assert report.bytes_after == model_bytes(dst)
    assert any("onnxslim ok" in line for line in lines)


def test_optimized_model_uses_only_standard_ops(tmp_path: Path) -> None:
    dst = tmp_path / "cnn.opt.onnx"
    optimize(quant_models.conv_classifier(tmp_path / "cnn.onnx"), dst)
    model = onnx.load(dst)
    assert {node.domain for node in model.graph.node} == {""}
    # onnxruntime stamps com.microsoft.nchwc etc. into the opsets; unused ones are dropped
    assert [o.domain for o in model.opset_import] == [""]


def test_matmul_add_stays_unfused_for_the_weight_quantizers(tmp_path: Path) -> None:
    dst = tmp_path / "mlp.opt.onnx"
    optimize(quant_models.mlp_classifier(tmp_path / "mlp.onnx"), dst)
    ops = [node.op_type for node in onnx.load(dst).graph.node]
    assert ops.count("MatMul") == 3 and "Gemm" not in ops


def test_fix_dims_lets_shape_computations_fold(tmp_path: Path) -> None:
    src = quant_models.positions_by_range(tmp_path / "positions.onnx")
    feed = {"x": np.random.default_rng(0).standard_normal((2, 16, 8)).astype(np.float32)}

    symbolic = optimize(src, tmp_path / "symbolic.onnx")
    fixed = optimize(src, tmp_path / "fixed.onnx", fix_dims={"seq": 16})

    assert symbolic.nodes_after == 6
    assert input_dims(tmp_path / "symbolic.onnx") == [["batch", "seq", 8]]
    assert status(fixed)["fix-dims"] == "ok"
    assert fixed.nodes_after == 2  # Shape/Gather/Range/Gather folded into a constant
    assert input_dims(tmp_path / "fixed.onnx") == [["batch", 16, 8]]
    np.testing.assert_allclose(
        run(tmp_path / "fixed.onnx", feed)[0], run(src, feed)[0], rtol=1e-6, atol=1e-6
    )


def test_fix_dims_the_graph_refuses_falls_back_to_symbolic(tmp_path: Path) -> None:
    # the position table has 16 rows, so seq=32 cannot broadcast: shape inference says so
    src = quant_models.positional_table(tmp_path / "table.onnx")
    dst = tmp_path / "table.opt.onnx"

    report = optimize(src, dst, fix_dims={"seq": 32})

    step = next(s for s in report.steps if s.name == "fix-dims")
    assert step.status == "fell back"
    assert "Incompatible dimensions" in step.detail
    assert input_dims(dst) == [["batch", "seq", 8]]
    assert status(report)["validate"] == "ok"


def test_a_step_that_would_change_the_inputs_falls_back(tmp_path: Path) -> None:
    # onnxslim drops the unused `mask` input, which would change the page's JS API
    src = quant_models.unused_input(tmp_path / "unused.onnx")
    dst = tmp_path / "unused.opt.onnx"

    report = optimize(src, dst)

    step = next(s for s in report.steps if s.name == "onnxslim")
    assert step.status == "fell back"
    assert "mask" in step.detail and "graph inputs" in step.detail
    assert [value.name for value in onnx.load(dst).graph.input] == ["x", "mask"]
    assert status(report)["onnxruntime-basic"] == "ok"


def test_a_step_that_changes_what_the_model_computes_falls_back(tmp_path: Path) -> None:
    # onnxslim folds the last Reshape to the wrongly declared output shape [1, seqlen]
    src = models.misdeclared_output(tmp_path)
    dst = tmp_path / "out.onnx"

    report = optimize(src, dst)

    step = next(s for s in report.steps if s.name == "onnxslim")
    assert step.status == "fell back"
    assert "y has shape" in step.detail and "not [" in step.detail, step.detail
    x = np.random.default_rng(0).standard_normal((3, 1, 8)).astype(np.float32)
    [want], [got] = run(src, {"x": x}), run(dst, {"x": x})
    assert got.shape == want.shape == (3, 1, 6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_library_step_that_raises_falls_back(tmp_path: Path, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("symbolic shape inference failed\nlong library traceback")

    monkeypatch.setattr(optimize_module.onnxslim, "slim", broken)
    src = quant_models.mlp_classifier(tmp_path / "mlp.onnx")
    report = optimize(src, tmp_path / "mlp.opt.onnx")

    step = next(s for s in report.steps if s.name == "onnxslim")
    assert step.status == "fell back"
    assert step.detail == "kept the previous model: RuntimeError: symbolic shape inference failed"
    assert status(report)["onnxruntime-basic"] == "ok"


def test_a_result_that_does_not_load_falls_back_to_the_input(tmp_path: Path, monkeypatch) -> None:
    src = quant_models.mlp_classifier(tmp_path / "mlp.onnx")
    dst = tmp_path / "mlp.opt.onnx"
    real_session = optimize_module.cpu_session

    def session(model: Path, **options):
        if model == dst and not options:  # the final check only
            raise RuntimeError("cannot load")
        return real_session(model, **options)

    monkeypatch.setattr(optimize_module, "cpu_session", session)
    report = optimize(src, dst)

    assert report.steps[-1].name == "validate" and report.steps[-1].status == "fell back"
    assert dst.read_bytes() == src.read_bytes()
    assert report.nodes_after == report.nodes_before


def test_external_data_input(tmp_path: Path) -> None:
    src = models.external_data(tmp_path)
    dst = tmp_path / "out" / "model.onnx"
    dst.parent.mkdir()
    report = optimize(src, dst)
    assert status(report)["validate"] == "ok"
    assert report.bytes_before == model_bytes(src) > src.stat().st_size
    # small enough for one file: the weights come inline
    assert report.bytes_after == dst.stat().st_size
    feed = {"x": np.ones((2, 64), np.float32)}
    np.testing.assert_allclose(run(dst, feed)[0], run(src, feed)[0], rtol=1e-6)


def test_optimize_is_deterministic(tmp_path: Path) -> None:
    src = quant_models.conv_classifier(tmp_path / "cnn.onnx")
    optimize(src, tmp_path / "a.onnx")
    optimize(src, tmp_path / "b.onnx")
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()


def test_unknown_fix_dims_name_is_a_config_error(tmp_path: Path) -> None:
    src = quant_models.mlp_classifier(tmp_path / "mlp.onnx")
    with pytest.raises(ConfigError, match="fix_dims names height.*symbolic dims are: batch"):
        optimize(src, tmp_path / "out.onnx", fix_dims={"height": 4})
    with pytest.raises(ConfigError, match="positive"):
        optimize(src, tmp_path / "out.onnx", fix_dims={"batch": 0})


def test_model_onnxruntime_cannot_load_is_a_model_error(tmp_path: Path) -> None:
    model = onnx.load(quant_models.mlp_classifier(tmp_path / "mlp.onnx"))
    model.graph.node[0].op_type = "NoSuchOp"
    onnx.save(model, tmp_path / "bad.onnx")
    with pytest.raises(ModelError, match="does not load in onnxruntime"):
        optimize(tmp_path / "bad.onnx", tmp_path / "out.onnx")


def test_an_input_dim_of_minus_one_is_unknown_not_a_change(tmp_path: Path) -> None:
    # Paddle exports write -1 for an unknown dim; onnxruntime writes it back unset
    model = onnx.load(quant_models.transformer_block(tmp_path / "block.onnx"))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1
    src = tmp_path / "minus_one.onnx"
    onnx.save(model, src)

    report = optimize(src, tmp_path / "out.onnx")

    assert status(report)["onnxruntime-basic"] == "ok", report.steps


def test_unnamed_input_dims_stay_unnamed_and_onnxslim_still_runs(tmp_path: Path) -> None:
    model = onnx.load(models.recurrent_state(tmp_path))
    for value in [*model.graph.input, *model.graph.output]:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.Clear()
    src = tmp_path / "unnamed.onnx"
    onnx.save(model, src)
    dst = tmp_path / "out.onnx"

    report = optimize(src, dst)

    assert status(report)["onnxslim"] == "ok", report.steps
    assert input_dims(dst) == input_dims(src)
