"""Models with unusual inputs and outputs: described in bundle.json as the JS API sees them and
computed in Chromium as natively, or refused in one line naming the type; and a model native
onnxruntime cannot load on this machine only for want of a locale is optimised as it is, with the
reason."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from bundler.bundle.modelio import (
    NUMPY_TYPES,
    build_machine_limit,
    cpu_session,
    native_load_error,
    signature,
)
from bundler.errors import ModelError
from bundler.model.optimize import optimize
from bundler.verify.browser import BrowserSettings
from tests.conftest import BuildBundle

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))  # the engine

from onnx_corpus import build_all, bundle_losses, cases, stage_hand_page  # noqa: E402
from onnx_corpus_browser import run_all  # noqa: E402

FLOAT = TensorProto.FLOAT


def _model(path: Path, nodes: list, inputs: list, outputs: list, initializers: tuple = (),
           opset: int = 17) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _tensor(name: str, element: int, shape: list | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, element, shape)


VALID = {
    # name: (nodes, inputs, outputs, initializers, expected [inputs], [outputs])
    "output_is_the_input": ([helper.make_node("Relu", ["x"], ["y"])],
                            [_tensor("x", FLOAT, [2])],
                            [_tensor("y", FLOAT, [2]), _tensor("x", FLOAT, [2])], (),
                            [("x", "float32", [2])],
                            [("y", "float32", [2]), ("x", "float32", [2])]),
    "output_is_a_weight": ([], [_tensor("x", FLOAT, [2])], [_tensor("c", FLOAT, [2])],
                           (numpy_helper.from_array(np.array([1, 2], np.float32), "c"),),
                           [("x", "float32", [2])], [("c", "float32", [2])]),
    "no_inputs": ([helper.make_node("Constant", [], ["y"], value=numpy_helper.from_array(
        np.array([3.0], np.float32)))], [], [_tensor("y", FLOAT, [1])], (),
        [], [("y", "float32", [1])]),
    "names_with_spaces_slashes_unicode": (
        [helper.make_node("Relu", ["in put/0:a"], ["out.put ü"])],
        [_tensor("in put/0:a", FLOAT, [2])], [_tensor("out.put ü", FLOAT, [2])], (),
        [("in put/0:a", "float32", [2])], [("out.put ü", "float32", [2])]),
    "scalars": ([helper.make_node("Relu", ["x"], ["y"])], [_tensor("x", FLOAT, [])],
                [_tensor("y", FLOAT, [])], (), [("x", "float32", [])], [("y", "float32", [])]),
    "unknown_rank": ([helper.make_node("Relu", ["x"], ["y"])], [_tensor("x", FLOAT, None)],
                     [_tensor("y", FLOAT, None)], (), [("x", "float32", None)],
                     [("y", "float32", None)]),
    "empty_dim": ([helper.make_node("Relu", ["x"], ["y"])], [_tensor("x", FLOAT, [0, 3])],
                  [_tensor("y", FLOAT, [0, 3])], (), [("x", "float32", [0, 3])],
                  [("y", "float32", [0, 3])]),
    "float16_and_float64": (
        [helper.make_node("Relu", ["h"], ["h2"]), helper.make_node("Relu", ["d"], ["d2"])],
        [_tensor("h", TensorProto.FLOAT16, [2]), _tensor("d", TensorProto.DOUBLE, [2])],
        [_tensor("h2", TensorProto.FLOAT16, [2]), _tensor("d2", TensorProto.DOUBLE, [2])], (),
        [("h", "float16", [2]), ("d", "float64", [2])],
        [("h2", "float16", [2]), ("d2", "float64", [2])]),
    "strings": ([helper.make_node("Identity", ["x"], ["y"])],
                [_tensor("x", TensorProto.STRING, [2])], [_tensor("y", TensorProto.STRING, [2])],
                (), [("x", "string", [2])], [("y", "string", [2])]),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_unusual_but_valid_inputs_and_outputs_are_described_as_the_js_api_sees_them(
        name: str, tmp_path: Path, build_bundle: BuildBundle) -> None:
    nodes, inputs, outputs, weights, want_in, want_out = VALID[name]
    model = _model(tmp_path / f"{name}.onnx", nodes, inputs, outputs, weights)
    directory, _ = build_bundle(model)
    manifest = json.loads((directory / "bundle.json").read_text(encoding="utf-8"))
    session = manifest["sessions"][0]
    assert [(s["name"], s["type"], s["shape"]) for s in session["inputs"]] == want_in
    assert [(s["name"], s["type"], s["shape"]) for s in session["outputs"]] == want_out


def _with_native_outputs(folder: Path, model: Path) -> None:
    """A case folder as the ONNX backend tests lay them out, expected outputs from native
    onnxruntime on seeded inputs (unknown dims 2, strings "Ab ü")."""
    rng = np.random.default_rng(0)
    session = cpu_session(model)
    data = folder / "test_data_set_0"
    data.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(model.read_bytes())
    feeds = {}
    for k, spec in enumerate(signature(onnx.load(str(model))).inputs):
        shape = [2] if spec.shape is None else [d if isinstance(d, int) else 2 for d in spec.shape]
        value = (np.full(shape, "Ab ü", dtype=object) if spec.type == "string"
                 else np.asarray(rng.random(shape) - 0.5).astype(NUMPY_TYPES[spec.type]))
        feeds[spec.name] = value
        (data / f"input_{k}.pb").write_bytes(
            numpy_helper.from_array(value, spec.name).SerializeToString())
    for k, (spec, value) in enumerate(zip(session.get_outputs(), session.run(None, feeds),
                                          strict=True)):
        (data / f"output_{k}.pb").write_bytes(
            numpy_helper.from_array(np.asarray(value), spec.name).SerializeToString())


@pytest.mark.browser
def test_unusual_inputs_and_outputs_compute_in_chromium_what_they_compute_natively(
        tmp_path: Path, runtime_dist: Path, browser_settings: BrowserSettings) -> None:
    for name, (nodes, inputs, outputs, weights, _, _) in VALID.items():
        model = _model(tmp_path / f"{name}.onnx", nodes, inputs, outputs, weights)
        _with_native_outputs(tmp_path / "corpus" / "odd" / name, model)
    selected = cases(["odd"], tmp_path / "corpus")
    built = build_all(selected, tmp_path / "served", runtime_dist)
    assert [item.status for item in built] == ["built"] * len(VALID), built
    stage_hand_page(tmp_path / "served", selected, runtime_dist)
    runs = run_all(built, tmp_path / "served", settings=browser_settings)
    wrong = [(run.page, run.case.name, run.browser, run.mode, run.detail) for run in runs
             if run.outcome == "mismatched"]
    assert not wrong, f"wrong numbers: {wrong}"
    losses = [(b.case.name, b.browser, b.mode, b.detail) for _, b in bundle_losses(runs)]
    assert not losses, f"the hand-written page matched, the bundle did not: {losses}"
    on_wasm = {run.case.name for run in runs if run.page == "bundle" and run.browser == "wasm"
               and run.outcome == "matched"}
    assert on_wasm == set(VALID)


SEQUENCE = helper.make_tensor_sequence_value_info("s", FLOAT, [2])
NOT_TENSORS = {
    "sequence input": ([helper.make_node("SequenceAt", ["s", "i"], ["y"])],
                       [SEQUENCE, _tensor("i", TensorProto.INT64, [])], [_tensor("y", FLOAT, [2])],
                       "input 's' is a sequence (seq(tensor(float))), not a tensor"),
    "sequence output": ([helper.make_node("SequenceConstruct", ["x", "x"], ["s"])],
                        [_tensor("x", FLOAT, [2])], [SEQUENCE],
                        "output 's' is a sequence (seq(tensor(float))), not a tensor"),
    "optional input": ([helper.make_node("OptionalGetElement", ["o"], ["y"])],
                       [helper.make_value_info("o", helper.make_optional_type_proto(
                           helper.make_tensor_type_proto(FLOAT, [2])))],
                       [_tensor("y", FLOAT, [2])],
                       "input 'o' is an optional (optional(tensor(float))), not a tensor"),
    "map input": ([helper.make_node("DictVectorizer", ["m"], ["y"], domain="ai.onnx.ml",
                                    int64_vocabulary=[1, 2])],
                  [helper.make_value_info("m", helper.make_map_type_proto(
                      TensorProto.INT64, helper.make_tensor_type_proto(FLOAT, [])))],
                  [_tensor("y", FLOAT, [1, 2])],
                  "input 'm' is a map (map(int64,tensor(float))), not a tensor"),
}


@pytest.mark.parametrize("name", sorted(NOT_TENSORS))
def test_non_tensor_inputs_and_outputs_are_refused_in_one_line_naming_the_type(
        name: str, tmp_path: Path, build_bundle: BuildBundle) -> None:
    nodes, inputs, outputs, expected = NOT_TENSORS[name]
    model = _model(tmp_path / "model.onnx", nodes, inputs, outputs, opset=18)
    with pytest.raises(ModelError) as raised:
        build_bundle(model)
    line = raised.value.message
    assert line.startswith(expected) and "\n" not in line, line
    assert "onnxruntime-web's JavaScript API takes and returns tensors only" in line
    assert not (tmp_path / "dist").exists()


def _string_normalizer(path: Path, locale: str) -> Path:
    node = helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="LOWER",
                            locale=locale)
    return _model(path, [node], [_tensor("x", TensorProto.STRING, [2])],
                  [_tensor("y", TensorProto.STRING, None)])


def test_a_locale_this_machine_lacks_is_named_with_how_to_add_it(tmp_path: Path) -> None:
    model = _string_normalizer(tmp_path / "model.onnx", "xx_YY")  # a locale no machine has
    error = native_load_error(model)
    assert error is not None and "xx_YY" in error
    assert build_machine_limit(error) == (
        "this machine lacks the locale xx_YY that StringNormalizer uses natively (the browser's"
        " runtime has its own); install it (locale-gen xx_YY) to check the model natively")
    assert build_machine_limit("Could not find an implementation for Add(6) node") is None


def test_the_optimiser_keeps_a_model_this_machine_cannot_load_for_want_of_a_locale(
        tmp_path: Path) -> None:
    model = _string_normalizer(tmp_path / "model.onnx", "xx_YY")
    report = optimize(model, tmp_path / "optimized.onnx")
    assert [(step.name, step.status) for step in report.steps] == [("load", "fell back")]
    assert "locale xx_YY" in report.steps[0].detail
    assert (tmp_path / "optimized.onnx").read_bytes() == model.read_bytes()
