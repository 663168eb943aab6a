"""Float weights as byte planes on the wire (bundler.bundle.planes): the runs found in a real
ONNX file, the layout undone exactly (also per part of a split file), and the packed siblings
that publishing writes where they beat gzip."""

from __future__ import annotations

import gzip
import hashlib
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bundler.bundle.codec import to_json
from bundler.bundle.files import fetched_path
from bundler.bundle.planes import MIN_RUN_BYTES, float_runs, pack, runs_within, unpack
from bundler.hosting.publish import HostingOptions, prepare


def _weights(shape: tuple[int, ...], dtype: type, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 0.02).astype(dtype)


def _model(path):
    """A graph whose float tensors lie at odd offsets: fp32 and fp16 initializers, a Constant
    node's value and an initializer of an If branch (a subgraph), plus a small and an int8
    tensor that are no runs."""
    branch = helper.make_graph(
        [helper.make_node("MatMul", ["x", "inner"], ["y_then"])], "then", [],
        [helper.make_tensor_value_info("y_then", TensorProto.FLOAT, [1, 256])],
        [numpy_helper.from_array(_weights((128, 256), np.float32, 1), "inner")])
    other = helper.make_graph(
        [helper.make_node("MatMul", ["x", "outer"], ["y_else"])], "else", [],
        [helper.make_tensor_value_info("y_else", TensorProto.FLOAT, [1, 256])])
    nodes = [
        helper.make_node("Constant", [], ["constant"],
                         value=numpy_helper.from_array(_weights((128, 200), np.float32, 2))),
        helper.make_node("If", ["flag"], ["y"], then_branch=branch, else_branch=other),
        helper.make_node("Cast", ["half"], ["half_float"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes, "planes",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
         for name in ("y", "constant", "half_float")],
        [numpy_helper.from_array(_weights((128, 256), np.float32, 3), "outer"),
         numpy_helper.from_array(_weights((129, 300), np.float16, 4), "half"),
         numpy_helper.from_array(_weights((5, 7), np.float32, 5), "small"),
         numpy_helper.from_array(np.arange(70_000, dtype=np.int8), "codes")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_the_runs_are_the_float_tensors_where_the_file_holds_them(tmp_path):
    path = _model(tmp_path / "model.onnx")
    data = path.read_bytes()
    runs = float_runs(path)
    expected = {"inner": 4, "constant": 4, "outer": 4, "half": 2}
    model = onnx.load(path)
    tensors = {tensor.name: tensor for tensor in [
        *model.graph.initializer,
        *next(attribute.g for attribute in model.graph.node[1].attribute
              if attribute.name == "then_branch").initializer]}
    tensors["constant"] = model.graph.node[0].attribute[0].t  # a Constant's value has no name
    found = {data[start:start + length]: itemsize for start, length, itemsize in runs}
    assert sorted(found.values()) == sorted(expected.values())
    for name, itemsize in expected.items():
        assert found[tensors[name].raw_data] == itemsize, name
    assert all(length >= MIN_RUN_BYTES for _, length, _ in runs)
    assert any(start % itemsize for start, _, itemsize in runs)  # offsets as protobuf puts them

    packed = pack(data, runs)
    assert len(packed) == len(data) and packed != data
    assert unpack(packed, runs) == data
    floats = sum(length for _, length, _ in runs)  # gzip: 0.92-0.93 of them, packed 0.85-0.87
    assert len(gzip.compress(packed)) < len(gzip.compress(data)) - 0.05 * floats


def test_a_split_files_parts_unpack_each_on_its_own(tmp_path):
    data = _model(tmp_path / "model.onnx").read_bytes()
    runs = float_runs(tmp_path / "model.onnx")
    limit = 10_001  # cuts values in two at odd places
    for start in range(0, len(data), limit):
        piece = data[start:start + limit]
        within = runs_within(runs, start, start + limit)
        assert all(length % itemsize == 0 and first >= 0 and first + length <= len(piece)
                   for first, length, itemsize in within)
        assert unpack(pack(piece, within), within) == piece
    covered = sum(length for start in range(0, len(data), limit)
                  for _, length, _ in runs_within(runs, start, start + limit))
    assert sum(length for _, length, _ in runs) - covered <= 8 * (len(data) // limit + 1)


def test_publishing_writes_a_packed_sibling_where_it_beats_gzip(tmp_path):
    root = tmp_path / "dist"
    (root / "models").mkdir(parents=True)
    _model(root / "models" / "model.onnx")
    original = (root / "models" / "model.onnx").read_bytes()
    entries = {entry["path"]: entry for entry in to_json(prepare(
        root, HostingOptions(max_file_size=64_000)))}
    entry = entries["models/model.onnx"]
    pieces = b""
    for part in entry["parts"]:
        plain = (root / part["path"]).read_bytes()
        gzipped = gzip.decompress((root / part["encodings"]["gzip"]["path"]).read_bytes())
        assert gzipped == plain  # the .gz stays the plain bytes: hosts serve it for the file
        pieces += plain
        packed = part.get("packed")
        if packed is None:  # the part of the int8 codes, which has no run
            assert fetched_path(part) == part["encodings"]["gzip"]["path"]
            continue
        assert fetched_path(part) == packed["path"] == part["path"] + ".planes.gz"
        sent = (root / packed["path"]).read_bytes()
        assert len(sent) == packed["bytes"] < part["encodings"]["gzip"]["bytes"]
        assert hashlib.sha256(unpack(gzip.decompress(sent), packed["runs"])).hexdigest() \
            == part["sha256"]
    assert pieces == original
    assert sum("packed" in part for part in entry["parts"]) >= 5  # 441 KB of floats in 9 parts
    assert not any(path.endswith(".gz") for path in entries)
    assert "planes.gz" in json.dumps(entries)
