"""The shipped model fits the pinned runtime, integer inputs get values their graph accepts, real
inputs (--sample, --input), integer outputs and --strict: the native side, no browser."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from bundler.bundle.modelio import input_specs, read_model
from bundler.bundle.options import BuildOptions, load_config
from bundler.console import Reporter
from bundler.errors import ConfigError, ModelError, first_line
from bundler.model.compat import WEB_RUNTIME_LIMITS, fit_runtime, verify_fit
from bundler.model.input_values import derive_rules
from bundler.model.opsupport import load_support
from bundler.model.prepare import prepare_model
from bundler.stages.prepare import cases_for as _cases_for
from bundler.variants.metrics import measure
from bundler.verify.reference import (
    NotRunnable,
    make_feeds,
    native_reference,
    resolve_shapes,
    run_native,
)
from bundler.verify.user_inputs import UserInputs, load_user_inputs, reference_for
from tests import compat_models
from tests.conftest import run_cli
from tests.models import F32, _io

PINNED = "1.31.1"


def _prepare(tmp_path, source, **user):
    destination = tmp_path / "prepared" / "source.onnx"
    inputs = input_specs(read_model(source))
    cases = _cases_for(BuildOptions(), load_user_inputs(None, user, inputs))
    notes = prepare_model(source, destination, Reporter(), PINNED, cases)
    return onnx.load(str(destination)), notes


def _assert_one_error_line(result, *fragments):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(lines) <= 3 and lines[-1].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[-1], lines[-1]


def test_the_table_of_runtime_limits_has_the_pinned_runtime():
    assert WEB_RUNTIME_LIMITS[PINNED].ir_version == 13
    assert WEB_RUNTIME_LIMITS[PINNED].opsets == {"ai.onnx": 26, "ai.onnx.ml": 5}
    # bundle inspect's operator data, taken from the runtime's own registry, agrees
    assert load_support(PINNED).max_opset == WEB_RUNTIME_LIMITS[PINNED].opsets


def test_a_model_saved_by_the_current_onnx_package_ships_restamped(build_bundle, tmp_path):
    directory, manifest = build_bundle(compat_models.current_onnx(tmp_path))
    shipped = onnx.load(str(directory / manifest["sessions"][0]["variants"][0]["file"]))
    assert shipped.ir_version == 13
    assert [(o.domain, o.version) for o in shipped.opset_import] == [("", 26)]
    notes = manifest["notes"]
    assert any(note.startswith("IR version 14 -> 13 for onnxruntime-web 1.31.1") for note in notes)
    assert any("opset 28 -> 26" in note and "only the stamp changed" in note for note in notes)
    assert "conversion not verified (--no-verify)" in notes
    assert manifest["runtime"]["native_reference"] == {"package": "onnxruntime",
                                                       "version": ort.__version__}


def test_an_operator_newer_than_the_runtime_is_converted_and_checked(tmp_path):
    source = compat_models.current_shapes_and_indices(tmp_path)
    prepared, notes = _prepare(tmp_path, source)
    assert prepared.ir_version == 13 and prepared.opset_import[0].version == 26
    assert any("version converter (OneHot of opset 28 rewritten)" in note for note in notes)
    assert any(note.startswith("conversion verified: same outputs as the original (onnxruntime)")
               for note in notes)


def test_an_opset_onnxruntime_no_longer_implements_is_raised_and_checked(tmp_path):
    source = compat_models.old_opset(tmp_path)
    with pytest.raises(Exception, match=r"Add\(6\)"):  # what native onnxruntime says of it
        run_native(source, {"a": np.ones((2, 3), np.float32), "b": np.ones(3, np.float32)})
    prepared, notes = _prepare(tmp_path, source)
    assert prepared.opset_import[0].version == 7
    assert any("opset 6 -> 7 with onnx's version converter" in note for note in notes)
    assert any("(onnx's reference evaluator)" in note for note in notes)
    feeds = {"a": np.full((2, 3), -1.0, np.float32), "b": np.array([0.5, 1.5, 2.0], np.float32)}
    path = tmp_path / "raised.onnx"
    onnx.save(prepared, str(path))
    np.testing.assert_allclose(run_native(path, feeds)["y"], [[0, 0.5, 1.0]] * 2, atol=1e-6)


def test_a_per_channel_prelu_slope_keeps_its_meaning_when_raised(tmp_path):
    prepared, notes = _prepare(tmp_path, compat_models.old_prelu(tmp_path))
    assert any("PRelu slopes unsqueezed" in note for note in notes)
    assert any("(onnx's reference evaluator)" in note for note in notes)
    path = tmp_path / "raised.onnx"
    onnx.save(prepared, str(path))
    x = np.full((2, 3, 4), -1.0, np.float32)
    expected = np.broadcast_to(np.array([-0.1, -0.2, -0.3], np.float32)[:, None], (2, 3, 4))
    np.testing.assert_allclose(run_native(path, {"x": x})["y"], expected, atol=1e-6)


def test_a_conversion_that_changes_an_output_is_refused(tmp_path):
    original = compat_models.current_onnx(tmp_path)
    fit = fit_runtime(onnx.load(str(original)), PINNED)
    weight = fit.model.graph.initializer[0]
    weight.CopyFrom(onnx.numpy_helper.from_array(
        onnx.numpy_helper.to_array(weight) * 1.01, weight.name))
    fitted = tmp_path / "fitted.onnx"
    onnx.save(fit.model, str(fitted))
    feeds = [{"x": np.linspace(0, 1, 8, dtype=np.float32).reshape(2, 4)}]
    with pytest.raises(ModelError, match="output .y. differs from the original.s after"):
        verify_fit(original, fitted, fit, feeds)


def test_an_operator_no_known_runtime_has_is_one_error_naming_it(tmp_path):
    graph = helper.make_graph([helper.make_node("SwiGLU", ["x"], ["y"])], "swiglu",
                              [_io("x", F32, [2, 4])], [_io("y", F32, [2, 2])])
    model = tmp_path / "swiglu.onnx"
    onnx.save(helper.make_model(graph), str(model))  # SwiGLU is new in opset 28
    result = run_cli("build", model, "-o", tmp_path / "dist", "--no-verify")
    _assert_one_error_line(result, "SwiGLU", "ai.onnx opset 28", "onnxruntime-web 1.31.1 lacks")
    assert not (tmp_path / "dist").exists()


def test_onnxruntime_messages_lose_the_build_machines_paths():
    web = ("Can't create a session. ERROR_CODE: 1, ERROR_MESSAGE: /mnt/azure_nvme_temp/_work/1/s/"
           "onnxruntime/core/graph/model.cc:257 onnxruntime::Model::Model(ModelProto &&, const"
           " PathString &, const logging::Logger &, const ModelOptions &) Unsupported model IR"
           " version: 14, max supported IR version: 13\n")
    native = ("[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Non-zero status code returned while"
              " running Expand node. Name:'' Status Message: /onnxruntime_src/onnxruntime/core/"
              "providers/cpu/math/element_wise_ops.h:560 void onnxruntime::BroadcastIterator::"
              "Append(ptrdiff_t, ptrdiff_t) axis == 1 || axis == largest was false. invalid shape")
    assert first_line(web).endswith(
        "ERROR_MESSAGE: Unsupported model IR version: 14, max supported IR version: 13")
    assert first_line(native) == ("Non-zero status code returned while running Expand node."
                                     " Name:'' Status Message: axis == 1 || axis == largest was"
                                     " false. invalid shape")


def test_integer_inputs_get_values_their_operators_accept(tmp_path):
    shapes_model = compat_models.shape_inputs(tmp_path)
    inputs = input_specs(read_model(shapes_model))
    random = make_feeds(inputs, resolve_shapes(inputs, {}), seed=0)  # no rules: [0, 8)
    with pytest.raises(Exception, match="Expand|Reshape|Tile"):
        run_native(shapes_model, random)
    feeds = native_reference(shapes_model, inputs, {}).feeds
    assert feeds["shape"].tolist() == [1, 1] and feeds["repeats"].tolist() == [1, 1]
    assert feeds["new_shape"].tolist() == [-1, 1] and feeds["dims"].tolist() == [2, 2]

    index_model = compat_models.index_inputs(tmp_path)
    inputs = input_specs(read_model(index_model))
    reference = native_reference(index_model, inputs, {"seq": 64})
    feeds, outputs = reference.feeds, reference.cases[0].outputs
    assert feeds["ids"].shape == (1, 64) and feeds["ids"].min() >= 0 and feeds["ids"].max() < 5
    assert 1 <= feeds["k"].item() <= 6 and feeds["depth"] == 8 and feeds["hot"].max() < 8
    assert feeds["starts"].tolist() == [0] and feeds["mask"].dtype == np.bool_
    assert outputs["one_hot"].shape == (3, 8) and outputs["sliced"].shape == (1, 6)

    element_model = compat_models.element_indices(tmp_path)
    inputs = input_specs(read_model(element_model))
    feeds = native_reference(element_model, inputs, {}).feeds
    assert feeds["picks"].max() < 3 and feeds["rows"].max() < 3
    assert (feeds["start"], feeds["limit"], feeds["delta"]) == (0, 8, 1)
    assert feeds["axes"].tolist() == [0]


@pytest.mark.parametrize("external", [False, True], ids=["inline", "external-data"])
def test_an_integer_input_beside_wide_weight_vectors_gets_rules_and_builds(tmp_path, external):
    model = compat_models.wide_vectors(tmp_path, external=external)
    inputs = input_specs(read_model(model))
    rules = derive_rules(onnx.load(str(model), load_external_data=False), inputs)
    assert (rules["sr"].kind, rules["sr"].size) == ("index", 300)
    result = run_cli("build", model, "-o", tmp_path / "dist", "--no-verify")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "dist" / "bundle.json").read_text())
    assert [spec["name"] for spec in manifest["sessions"][0]["inputs"]] == ["audio", "sr"]


def test_a_float_input_that_is_a_power_base_gets_negative_values_too(tmp_path):
    model = compat_models.fractional_power(tmp_path)
    inputs = input_specs(read_model(model))
    reference = native_reference(model, inputs, {})
    x, y = reference.feeds["x"], reference.cases[0].outputs["y"]
    assert x.min() < 0 <= x.max() < 1 and x.min() >= -1
    assert np.isnan(y[x < 0]).all() and np.isfinite(y[x >= 0]).all()


def test_models_with_shape_index_and_integer_only_outputs_build(tmp_path):
    for builder in (compat_models.shape_inputs, compat_models.index_inputs,
                    compat_models.integer_outputs):
        result = run_cli("build", builder(tmp_path), "-o", tmp_path / builder.__name__,
                         "--no-verify", "--variants", "fp32,fp16")
        assert result.returncode == 0, result.stderr
        manifest = json.loads((tmp_path / builder.__name__ / "bundle.json").read_text())
        variant = manifest["sessions"][0]["variants"][1]
        assert variant["accuracy"]["data"] == "generated", builder.__name__


def test_integer_outputs_count_as_agreement_in_the_accuracy(tmp_path):
    model = compat_models.integer_outputs(tmp_path)
    feeds = [{"x": np.arange(8, dtype=np.int64).reshape(2, 4) * seed} for seed in range(3)]
    metrics = measure(model, model, feeds)
    assert metrics.top1_agreement == 1.0 and metrics.max_abs == 0.0


def test_no_verify_builds_a_model_no_generated_input_runs(tmp_path):
    result = run_cli("build", compat_models.needs_input(tmp_path), "-o", tmp_path / "dist",
                     "--no-verify")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "dist" / "bundle.json").read_text())
    assert manifest["sessions"][0]["variants"][0]["reference"] is None
    assert manifest["verification"]["status"] == "not_done"


def test_an_input_whose_values_cannot_be_derived_is_not_verified_and_says_which_flag(tmp_path):
    model = compat_models.needs_input(tmp_path)
    result = run_cli("build", model, "-o", tmp_path / "dist")
    assert result.returncode == 0, result.stderr
    verification = json.loads((tmp_path / "dist" / "bundle.json").read_text())["verification"]
    assert verification["status"] == "not_done"
    assert "native onnxruntime fails on generated inputs" in verification["reason"]
    assert "--input n=VALUE|FILE.npy" in verification["hint"] and "--sample" in verification["hint"]
    assert "/onnxruntime_src/" not in result.stderr + json.dumps(verification)
    strict = run_cli("build", model, "-o", tmp_path / "strict", "--strict")
    assert strict.returncode == 1
    assert strict.stderr.strip().splitlines()[-1].startswith("Error: --strict: not verified")
    assert (tmp_path / "strict" / "bundle.json").is_file()  # built, and said so


def test_given_inputs_are_what_the_checks_run_on(tmp_path):
    model = compat_models.needs_input(tmp_path)
    inputs = input_specs(read_model(model))
    with pytest.raises(NotRunnable):
        reference_for(model, inputs, {}, UserInputs())
    fixed = reference_for(model, inputs, {}, load_user_inputs(None, {"n": 16}, inputs))
    assert fixed.feeds["n"].tolist() == [16] and fixed.cases[0].outputs["y"].shape == (6,)
    x = np.arange(24, dtype=np.int64).reshape(4, 2, 3)
    np.savez(tmp_path / "data.npz", x=x, n=np.full((4, 1), 16))
    user = load_user_inputs(tmp_path / "data.npz", {}, inputs)
    sampled = reference_for(model, inputs, {}, user)
    assert len(sampled.cases) == 4 and sampled.cases[3].feeds["x"].tolist() == x[3].tolist()
    assert user.digest == load_user_inputs(tmp_path / "data.npz", {}, inputs).digest


def test_a_sample_is_what_the_accuracy_is_measured_on(build_bundle, tmp_path):
    np.savez(tmp_path / "data.npz", x=np.random.default_rng(1).random((5, 1, 4), np.float32))
    _, manifest = build_bundle(compat_models.current_onnx(tmp_path), variants=("fp32", "fp16"),
                               sample=tmp_path / "data.npz")
    accuracy = manifest["sessions"][0]["variants"][1]["accuracy"]
    assert accuracy["data"] == "sample" and accuracy["samples"] == 5
    notes = manifest["sessions"][0]["variants"][1]["notes"]
    assert not any("accuracy unknown" in note for note in notes)


def test_an_input_array_fixes_the_dims_it_has(tmp_path):
    model = compat_models.index_inputs(tmp_path)
    inputs = input_specs(read_model(model))
    np.save(tmp_path / "ids.npy", np.array([[4, 3, 2, 1, 0]] * 2))
    user = load_user_inputs(None, {"ids": tmp_path / "ids.npy", "k": 3}, inputs)
    reference = reference_for(model, inputs, {}, user)
    assert reference.dims == {"batch": 2, "seq": 5}
    assert reference.feeds["ids"].dtype == np.int64 and reference.feeds["k"].tolist() == [3]
    assert reference.cases[0].outputs["top_values"].shape == (1, 3)


@pytest.mark.parametrize(("flags", "message"), [
    (["--input", "m=16"], "--input m: the model has no input 'm' (its inputs: x, n)"),
    (["--input", "n=16.5"], "--input n: input 'n' takes int64, got float64 values"),
    (["--input", "n=shape.npy"], "--input n: shape.npy has shape [2, 2], the model takes [1]"),
    (["--input", "n"], "--input: expected NAME=VALUE (a number) or NAME=FILE.npy"),
    (["--input", "n=missing.npy"], "neither a number nor an existing .npy file"),
    (["--sample", "floats.npz"], "input 'x' takes int64, got float32 values"),
    (["--sample", "short.npz"], "no array for input 'n'"),
])
def test_wrong_inputs_are_one_line_naming_the_input(tmp_path, flags, message):
    model = compat_models.needs_input(tmp_path)
    np.save(tmp_path / "shape.npy", np.ones((2, 2), np.int64))
    np.savez(tmp_path / "floats.npz", x=np.ones((2, 2, 3), np.float32), n=np.full((2, 1), 16))
    np.savez(tmp_path / "short.npz", x=np.ones((2, 2, 3), np.int64))
    result = run_cli("build", model, "-o", tmp_path / "dist", "--no-verify", *flags,
                     cwd=tmp_path)
    _assert_one_error_line(result, message)
    assert not (tmp_path / "dist").exists()


def test_bundle_toml_takes_sample_and_inputs(tmp_path):
    np.save(tmp_path / "ids.npy", np.zeros((1, 3), np.int64))
    np.savez(tmp_path / "data.npz", x=np.ones((2, 4), np.float32))
    config = tmp_path / "bundle.toml"
    config.write_text('sample = "data.npz"\nstrict = true\n[inputs]\nn = 16\nids = "ids.npy"\n')
    values = load_config(config)
    assert values["sample"] == tmp_path / "data.npz" and values["strict"] is True
    assert values["inputs"] == {"n": 16, "ids": tmp_path / "ids.npy"}
    config.write_text('[inputs]\nn = [1, 2]\n')
    with pytest.raises(ConfigError, match="key 'inputs': input 'n': expected a number or an"
                                          " .npy path"):
        load_config(config)


def test_bundle_test_with_a_dim_lacking_its_value_is_one_line(build_bundle, tmp_path):
    directory, _ = build_bundle(None)
    _assert_one_error_line(run_cli("test", directory, "--dim", "batch"), "--dim: 'batch'")
