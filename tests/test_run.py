"""`bundle run` and bundler.Session: the EP priority list against the providers this onnxruntime
really reports and against real session-creation failures, inputs, and the reference check."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import bundler
from bundler.edge.session import EP_PRIORITY, PROVIDERS, parse_eps
from bundler.errors import ConfigError, ModelError
from bundler.resources import example_model
from bundler.verify.reference import make_feeds, run_native
from tests import compat_models, models
from tests.conftest import run_cli

# This machine's onnxruntime is the CPU package: the accelerators are not compiled in.
ACCELERATORS = [ep for ep in EP_PRIORITY if ep != "cpu"]


def test_no_accelerator_is_available_here():
    """The premise of the tests below, from onnxruntime itself (fail, never skip, if it moves):
    the CPU package, with the Azure EP compiled in but none of the accelerators."""
    available = set(ort.get_available_providers())
    assert {"AzureExecutionProvider", "CPUExecutionProvider"} <= available
    assert not available & {PROVIDERS[ep] for ep in ACCELERATORS}


def test_priority_list_falls_through_to_cpu_saying_why():
    session = bundler.Session(example_model())
    assert session.ep == "cpu"
    assert [a.ep for a in session.providers_tried] == list(EP_PRIORITY)
    assert [a.outcome for a in session.skipped] == ["not installed"] * len(ACCELERATORS)
    assert "install onnxruntime-gpu" in session.providers_tried[1].detail
    assert session.providers_tried[-1].outcome == "used"
    feeds = make_feeds([bundler_input()], {"image": (2, 1, 8, 8)})
    expected = run_native(example_model(), feeds)["probabilities"]
    np.testing.assert_allclose(session.run(feeds)["probabilities"], expected, atol=1e-6)


def bundler_input():
    from bundler.bundle.modelio import TensorSpec

    return TensorSpec("image", "float32", ("batch", 1, 8, 8))


def test_a_session_creation_failure_is_skipped_and_cpu_runs():
    # Azure is compiled in but takes no node of this model; with whole_graph onnxruntime refuses
    # to leave the nodes to the CPU EP, a real session-creation failure.
    session = bundler.Session(example_model(), ["azure", "cpu"], whole_graph=True)
    assert session.ep == "cpu"
    failed = session.providers_tried[0]
    assert (failed.ep, failed.outcome) == ("azure", "session creation failed")
    assert "fallback to CPU EP has been explicitly disabled" in failed.detail
    # Without whole_graph the Azure session is created and keeps its provider.
    assert bundler.Session(example_model(), ["azure"]).ep == "azure"


def test_ep_names_and_errors(tmp_path):
    assert parse_eps("CUDAExecutionProvider, openvino") == ["cuda", "openvino", "cpu"]
    assert parse_eps(["cpu", "cuda"]) == ["cpu", "cuda"]  # CPU first: nothing else is tried
    with pytest.raises(ConfigError, match="unknown execution provider 'gpu'"):
        parse_eps("gpu,cpu")
    with pytest.raises(ModelError, match="model not found"):
        bundler.Session(tmp_path / "missing.onnx")
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="no execution provider could run it; .*cpu: session"
                                         " creation failed"):
        bundler.Session(broken, ["cuda"])


def test_cli_on_a_bundle_runs_on_cpu_and_matches_the_reference(build_bundle):
    directory, _ = build_bundle(None)
    result = run_cli("run", directory, "--ep", "cuda,cpu")
    assert result.returncode == 0, result.stderr
    assert "skipped cuda: not installed" in result.stderr
    assert "Ran on cpu" in result.stderr
    assert "reference: matches the build's reference (rtol 0.0001)" in result.stderr
    result = run_cli("run", directory, "--ep", "tensorrt,cuda", "--json")
    data = json.loads(result.stdout)
    assert data["ep"] == "cpu" and data["reference"]["matches"] is True
    assert [a["outcome"] for a in data["providers_tried"]] == ["not installed"] * 2 + ["used"]
    assert data["outputs"]["probabilities"]["shape"] == [1, 10]


def test_a_changed_model_no_longer_matches_the_reference(build_bundle):
    directory, manifest = build_bundle(None)
    path = directory / manifest["sessions"][0]["variants"][0]["file"]
    model = onnx.load(path)
    weight = model.graph.initializer[0]
    weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 1.02, weight.name))
    onnx.save(model, path)
    result = run_cli("run", directory)
    assert result.returncode == 2
    assert "Error: outputs on cpu differ from the build's reference (output 'probabilities'" \
        in result.stderr


def test_inputs_from_npy_and_values(tmp_path):
    model = models.multi_io(tmp_path)
    x = np.linspace(0, 1, 8, dtype=np.float32).reshape(2, 4)
    np.save(tmp_path / "x.npy", x)
    result = run_cli("run", model, "--input", f"x={tmp_path / 'x.npy'}", "--input",
                     "ids=[[0, 1, 2], [3, 4, 5]]", "--input", "mask=1", "--json",
                     "--save", tmp_path / "out.npz")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    feeds = {"x": x, "ids": np.array([[0, 1, 2], [3, 4, 5]], np.int64),
             "mask": np.ones((2, 3), np.int32)}
    expected = run_native(model, feeds)
    saved = np.load(tmp_path / "out.npz")
    for name, value in expected.items():
        np.testing.assert_allclose(saved[name], value, atol=1e-6)
        assert data["outputs"][name]["shape"] == list(value.shape)
    assert data["reference"]["detail"] == "inputs given with --input"
    for argument, message in [("nope=1", "expected NAME=file.npy or NAME=VALUE with NAME one of"
                                         " x, ids, mask"),
                              ("x=oops", "'oops' is neither a .npy file nor a number")]:
        result = run_cli("run", model, "--input", argument)
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_generated_inputs_follow_dims(tmp_path):
    model = models.multi_io(tmp_path)
    result = run_cli("run", model, "--dim", "batch=3", "--json")
    assert json.loads(result.stdout)["outputs"]["y"]["shape"] == [3, 2]


@pytest.mark.parametrize("make", [compat_models.shape_inputs, compat_models.index_inputs])
def test_generated_integer_inputs_are_ones_the_graph_accepts(tmp_path, make):
    """A shape for Expand/Reshape, indices within the gathered table: as the build's check makes
    them (random integers would fail in onnxruntime)."""
    result = run_cli("run", make(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ep"] == "cpu"


def test_generated_inputs_the_model_rejects_say_which_flag_to_use(tmp_path):
    model = compat_models.needs_input(tmp_path)  # only n = 16 runs; nothing in the graph says so
    result = run_cli("run", model)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert "inputs n, x were generated: give values the model accepts with --input" in result.stderr
    assert run_cli("run", model, "--input", "n=16").returncode == 0
