"""`bundle inspect`: the analysis of models built in code with known contents, its JSON schema,
the warnings and their fixes, the page, and the warnings `bundle build` prints.

Whether the support data matches the runtime (an op the WebGPU EP lacks really falls back, an
ai.onnx.ml op really fails in the WebGPU build) is checked in the browser by test_ops_data.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bundler.bundle.modelio import native_load_error
from bundler.model.analysis import analyse
from bundler.resources import example_model
from tests import models
from tests.conftest import run_cli
from tests.sessions import add_session

F = TensorProto.FLOAT
TOP_LEVEL_KEYS = {"schema_version", "model", "runtime", "opsets", "domains", "inputs", "outputs",
                  "nodes", "subgraphs", "operators", "external_data", "parameters", "targets",
                  "warnings"}


def _save(directory: Path, name: str, nodes, inputs, outputs, initializers=(), opsets=None,
          ir_version: int = 8, **save_kwargs) -> Path:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, ir_version=ir_version, opset_imports=opsets or [
        helper.make_opsetid("", 17)])
    path = directory / f"{name}.onnx"
    onnx.save_model(model, path, **save_kwargs)
    return path


def _mixed(directory: Path) -> Path:
    """Conv, Mod (not on WebGPU), a com.microsoft Gelu and an ai.onnx.ml Normalizer."""
    weight = numpy_helper.from_array(np.full((2, 1, 3, 3), 0.1, np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Gelu", ["c"], ["g"], name="gelu", domain="com.microsoft"),
        helper.make_node("Flatten", ["g"], ["f"], name="flat"),
        helper.make_node("Mod", ["f", "f"], ["m"], name="remainder", fmod=1),
        helper.make_node("Normalizer", ["m"], ["y"], name="norm", domain="ai.onnx.ml",
                         norm="L2"),
    ]
    return _save(directory, "mixed", nodes,
                 [helper.make_tensor_value_info("x", F, ["batch", 1, 4, 4])],
                 [helper.make_tensor_value_info("y", F, ["batch", 8])], [weight],
                 [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1),
                  helper.make_opsetid("ai.onnx.ml", 3)])


def test_digits_json_schema_and_counts():
    data = analyse(example_model()).to_json()
    assert set(data) == TOP_LEVEL_KEYS and data["schema_version"] == 1
    assert data["operators"] == {"Conv": 2, "Flatten": 1, "Gemm": 1, "MaxPool": 2, "Relu": 2,
                                 "Softmax": 1}
    assert data["opsets"] == {"ai.onnx": 17}
    assert data["inputs"] == [{"name": "image", "type": "float32", "shape": ["batch", 1, 8, 8],
                               "symbolic": ["batch"]}]
    weights = onnx.load(example_model()).graph.initializer
    count = sum(int(np.prod(t.dims)) for t in weights)
    assert data["parameters"] == {"count": count, "bytes": 4 * count,
                                  "by_dtype": {"float32": {"count": count, "bytes": 4 * count}}}
    assert {t: e["status"] for t, e in data["targets"].items()} == dict.fromkeys(
        ["webgpu", "wasm", "ort-mobile"], "supported")
    assert data["warnings"] == []


def test_subgraph_ops_are_counted_and_checked(tmp_path):
    data = analyse(models.loop_subgraph(tmp_path)).to_json()
    assert data["operators"] == {"Loop": 1, "Constant": 3, "Add": 2, "Less": 1}
    assert data["subgraphs"] == 1
    # Loop runs on the CPU EP of the WebGPU build; Constants become initializers.
    webgpu = data["targets"]["webgpu"]
    assert [(e["op"], e["nodes"]) for e in webgpu["fallback"]] == [("Loop", ["<Loop #0>"])]
    assert webgpu["unsupported"] == []
    data = analyse(models.if_subgraph(tmp_path)).to_json()
    assert data["operators"] == {"If": 1, "Constant": 2, "Mul": 1, "Sub": 1}
    assert data["subgraphs"] == 2


def test_non_default_domains_and_per_target_support(tmp_path):
    data = analyse(_mixed(tmp_path)).to_json()
    assert data["operators"] == {"Conv": 1, "Flatten": 1, "Mod": 1, "ai.onnx.ml.Normalizer": 1,
                                 "com.microsoft.Gelu": 1}
    domains = {d["domain"]: (d["default"], d["nodes"]) for d in data["domains"]}
    assert domains == {"ai.onnx": (True, 3), "ai.onnx.ml": (False, 1),
                       "com.microsoft": (False, 1)}
    webgpu = data["targets"]["webgpu"]
    assert webgpu["status"] == "unsupported"
    assert [(e["op"], e["nodes"]) for e in webgpu["fallback"]] == [("Mod", ["remainder"])]
    assert [(e["op"], e["domain"], e["nodes"]) for e in webgpu["unsupported"]] == [
        ("Normalizer", "ai.onnx.ml", ["norm"])]
    for target in ("wasm", "ort-mobile"):
        assert data["targets"][target] == {"status": "supported", "unsupported": [],
                                           "fallback": []}


def test_a_custom_domain_is_unsupported_everywhere(tmp_path):
    path = _save(tmp_path, "custom", [helper.make_node("MyOp", ["x"], ["y"], domain="acme")],
                 [helper.make_tensor_value_info("x", F, [2])],
                 [helper.make_tensor_value_info("y", F, [2])],
                 opsets=[helper.make_opsetid("", 17), helper.make_opsetid("acme", 1)])
    data = analyse(path).to_json()
    assert {t: e["status"] for t, e in data["targets"].items()} == dict.fromkeys(
        ["webgpu", "wasm", "ort-mobile"], "unsupported")
    assert {"domain": "acme", "version": 1, "default": False, "nodes": 1} in data["domains"]


def _codes(path: Path) -> dict[str, str]:
    return {w.code: w.text() for w in analyse(path).warnings}


def test_warnings_with_their_fixes(tmp_path):
    double = _save(tmp_path, "double", [helper.make_node("Add", ["x", "b"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])],
                   [numpy_helper.from_array(np.ones(2), "b")])
    assert "model.float()" in _codes(double)["fp64"]
    symbolic = _save(tmp_path, "symbolic", [helper.make_node("Shape", ["x"], ["s"]),
                                            helper.make_node("Reshape", ["x", "s"], ["y"])],
                     [helper.make_tensor_value_info("x", F, ["batch", "length"])],
                     [helper.make_tensor_value_info("y", F, ["batch", "length"])])
    assert "--fix-dim batch=VALUE --fix-dim length=VALUE" in _codes(symbolic)["symbolic-dims"]
    newer = _save(tmp_path, "newer", [helper.make_node("Relu", ["x"], ["y"])],
                  [helper.make_tensor_value_info("x", F, [2])],
                  [helper.make_tensor_value_info("y", F, [2])],
                  opsets=[helper.make_opsetid("", 30)], ir_version=14)
    codes = _codes(newer)
    assert "opset 30 is newer than onnxruntime 1.31.1" in codes["opset"]
    assert "opset_version=26" in codes["opset"]
    assert "model.ir_version = 13" in codes["ir-version"]
    assert _codes(models.conv_stack(tmp_path)) == {}


def _gather_over_external(tmp_path: Path, rows: int, width: int) -> Path:
    """A Gather over an external-data table of rows x width float32, its file sparse (zeros)."""
    table = TensorProto(name="table", data_type=F, dims=[rows, width])
    table.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "table.bin"), ("offset", "0"),
                       ("length", str(rows * width * 4))):
        table.external_data.add(key=key, value=value)
    with (tmp_path / "table.bin").open("wb") as stream:
        stream.truncate(rows * width * 4)
    return _save(tmp_path, "gather", [helper.make_node("Gather", ["table", "ids"], ["y"])],
                 [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
                 [helper.make_tensor_value_info("y", F, [3, width])], [table])


def test_huge_gather_table_and_over_2gb(tmp_path):
    codes = _codes(_gather_over_external(tmp_path, 40000, 1024))  # 156 MiB
    assert "over 128 MiB" in codes["huge-gather"] and "int8-weights" in codes["huge-gather"]
    assert "over-2gb" not in codes
    data = analyse(tmp_path / "gather.onnx").to_json()
    assert data["external_data"] == [{"file": "table.bin", "bytes": 40000 * 1024 * 4}]
    codes = _codes(_gather_over_external(tmp_path, 540000, 1024))  # 2.06 GiB
    assert "over protobuf's 2 GB limit" in codes["over-2gb"]


def test_cli_json_html_and_errors(tmp_path):
    model = _mixed(tmp_path)
    result = run_cli("inspect", model, "--json", "--html", tmp_path / "page.html")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["operators"]["com.microsoft.Gelu"] == 1
    page = (tmp_path / "page.html").read_text()
    assert "<li><span class=\"op\">Mod</span> <code>remainder</code>: f, f &rarr; m</li>" in page
    assert not re.search(r"(src|href)\s*=", page) and "<script" not in page  # self-contained
    result = run_cli("inspect", model)
    assert result.returncode == 0 and "falls back to CPU" in result.stdout
    assert "Mod (ai.onnx v13)" in result.stdout and "remainder" in result.stdout
    for args, message in [((model, "--netron"), "Error: netron is not installed; pip install"
                                                " netron"),
                          ((tmp_path / "none.onnx",), "Error: model not found"),
                          ((tmp_path,), "has no bundle.json")]:
        result = run_cli("inspect", *args)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and result.stdout == ""


def test_a_bundle_folder_and_the_build_warnings(tmp_path, runtime_dist):
    model = _save(tmp_path, "symbolic", [helper.make_node("Shape", ["x"], ["s"]),
                                         helper.make_node("Reshape", ["x", "s"], ["y"])],
                  [helper.make_tensor_value_info("x", F, ["batch", 4])],
                  [helper.make_tensor_value_info("y", F, ["batch", 4])])
    result = run_cli("build", model, "-o", tmp_path / "dist", "--runtime-dir", runtime_dist,
                     "--no-verify")
    assert result.returncode == 0, result.stderr
    assert "symbolic dims batch feed shape computations" in result.stderr
    assert "try: --fix-dim batch=VALUE" in result.stderr
    result = run_cli("inspect", tmp_path / "dist", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["model"]["file"].startswith("fp32")


def test_cpu_claims_agree_with_native_onnxruntime_on_onnx_test_models():
    """The ~140 models the onnx package ships for its backend tests (old opsets, pytorch
    exports, a training op): where the data says a CPU kernel is missing, native onnxruntime
    refuses the model; where it says none is, onnxruntime never says a kernel is missing."""
    import onnx as onnx_package

    root = Path(onnx_package.__file__).parent / "backend" / "test" / "data"
    files = sorted(root.glob("*/*/model.onnx"))
    assert len(files) >= 100
    claimed_missing = 0
    for path in files:
        missing = analyse(path).to_json()["targets"]["wasm"]["unsupported"]
        error = native_load_error(path)
        if missing:
            claimed_missing += 1
            assert error is not None, f"{path.parent.name}: {missing} claimed missing, yet it loads"
        else:
            assert error is None or "Could not find an implementation" not in error, path
    assert claimed_missing >= 30


def test_a_session_of_a_bundle_is_inspected_by_name(build_bundle, tmp_path):
    directory, data = build_bundle(None)
    add_session(directory, "decoder", _mixed(tmp_path), [], [])
    result = run_cli("inspect", directory, "--session", "decoder")
    assert result.returncode == 0, result.stderr
    assert f"sessions: {data['name']}, decoder (inspected: fp32)" in result.stdout
    assert "Mod (ai.onnx v13)" in result.stdout
    result = run_cli("inspect", directory)
    assert f"sessions: {data['name']} (inspected: fp32), decoder" in result.stdout
    assert "Mod (ai.onnx" not in result.stdout
    result = run_cli("inspect", directory, "--session", "joiner")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"has no session 'joiner' (it has: {data['name']}, decoder)" in result.stderr
