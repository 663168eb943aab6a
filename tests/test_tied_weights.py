"""Tied weights stay shared through graph optimisation (bundler.model.tied): optimum's GPT-2 with
its LM head stored as a transposed copy of the token embedding optimises to a model holding the
table once, with the same outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from bundler.bundle.modelio import LARGE_ENV, cpu_session, walk_nodes
from bundler.model.optimize import optimize
from bundler.model.tied import share_transposed_copies
from bundler.variants.registry import make_variant
from tests import decoder_models


def _tables(path: Path) -> dict[str, tuple[int, ...]]:
    return {t.name: tuple(t.dims) for t in onnx.load(path).graph.initializer if len(t.dims) == 2}


def _feed(ids: np.ndarray) -> dict[str, np.ndarray]:
    """The GPT-2's feeds for `ids` [1, n], with empty pasts."""
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids),
            "position_ids": np.arange(ids.shape[1], dtype=np.int64)[None]}
    feed.update({f"past_key_values.{layer}.{kind}": np.zeros((1, 4, 0, 16), np.float32)
                 for layer in range(2) for kind in ("key", "value")})
    return feed


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> decoder_models.Export:
    return decoder_models.gpt2(tmp_path_factory.mktemp("tied"))


def test_the_optimised_gpt2_holds_its_tied_table_once(export, tmp_path: Path) -> None:
    vocab, width = 512, 64
    copies = [name for name, dims in _tables(export.onnx).items() if dims == (width, vocab)]
    assert copies  # the export stores the head as its own [64, 512] copy
    report = optimize(export.onnx, tmp_path / "optimized.onnx")
    optimized = tmp_path / "optimized.onnx"
    assert not [name for name, dims in _tables(optimized).items() if dims == (width, vocab)]
    assert report.bytes_before - report.bytes_after >= vocab * width * 4
    step = next(s for s in report.steps if s.name == "tied-weights")
    assert step.status == "ok" and "transformer.wte.weight transposed: shared" in step.detail
    feed = _feed(np.array([[5, 17, 42, 7]], np.int64))
    want = cpu_session(export.onnx).run(["logits"], feed)[0]
    got = cpu_session(optimized).run(["logits"], feed)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> decoder_models.Export:
    return decoder_models.gpt2_merged(tmp_path_factory.mktemp("tied-merged"))


@pytest.mark.parametrize("name", ["export", "merged"])
def test_int8_ships_one_int8_table_of_a_tied_head(request, name: str, tmp_path: Path) -> None:
    """int8 stores the tied table once, int8 with a scale per row, behind a DequantizeLinear of
    the whole table that the embedding's Gather and the head's Transpose read (it shipped two
    int8 tables: the Gather's and the head's copy's), folded into float at load on WASM and in
    native runs (its session config); the head computes in float, the other MatMuls stay
    dynamic int8. In a merged decoder the branches read the table by outer scope: the nodes
    that make it come before their If."""
    optimized, int8 = tmp_path / "optimized.onnx", tmp_path / "int8.onnx"
    optimize(request.getfixturevalue(name).onnx, optimized)
    made = make_variant("int8", optimized, int8)
    model = onnx.load(int8)
    onnx.checker.check_model(model, full_check=True)
    graph = model.graph
    [quantized] = [t for t in graph.initializer if sorted(t.dims) == [64, 512]]
    assert quantized.data_type == TensorProto.INT8
    table = quantized.name.removesuffix("_quantized")  # a merged decoder's has a suffix
    assert table.startswith("transformer.wte.weight")
    readers = {name: [n for n in walk_nodes(graph) if name in n.input]
               for name in (quantized.name, table)}
    [dequantize] = readers[quantized.name]
    assert dequantize.op_type == "DequantizeLinear" and dequantize.output == [table]
    assert helper.get_attribute_value(dequantize.attribute[0]) == 0  # a scale per row
    ops = sorted({n.op_type for n in readers[table]})
    assert ops == ["Gather", "Transpose"]  # a merged decoder's Gather in each branch
    head = next(n for n in readers[table] if n.op_type == "Transpose")
    assert {n.op_type for n in walk_nodes(graph) if head.output[0] in n.input} == {"MatMul"}
    assert any(n.op_type == "MatMulInteger" for n in walk_nodes(graph))  # the layers' int8
    assert made.session_config == {"wasm": {"session.disable_quant_qdq": "1"},
                                   "webgpu": {"session.qdq_matmulnbits_accuracy_level": "1"}}
    assert any(f"one int8 table ({table}, 0.0 MB" in note for note in made.notes)
    weights = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    step = weights[dequantize.input[1]][:, None]
    want = numpy_helper.to_array(next(t for t in onnx.load(optimized).graph.initializer
                                      if t.name == table))
    # each row within half its own step
    assert (np.abs(weights[quantized.name] * step - want) <= step / 2 + 1e-7).all()
    feed = _feed(np.array([[5, 17, 42, 7]], np.int64))
    if name == "merged":
        feed["use_cache_branch"] = np.array([False])
    want = cpu_session(optimized).run(["logits"], feed)[0]
    got = cpu_session(int8, config=made.native_config).run(["logits"], feed)[0]
    assert np.corrcoef(got.ravel(), want.ravel())[0, 1] > 0.99


@pytest.mark.parametrize("change", [0.0, 1e-3])
def test_only_an_exact_transpose_is_shared(change: float) -> None:
    table = np.random.default_rng(0).standard_normal((256, 96)).astype(np.float32)
    copy = table.T.copy()
    copy[0, 0] += change
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["rows"]),
         helper.make_node("MatMul", ["rows", "head"], ["logits"])], "tied",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [3, 256])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(copy, "head")])
    model = helper.make_model(graph)
    shared = share_transposed_copies(model)
    if change:
        assert shared == [] and len(model.graph.initializer) == 2
        return
    assert shared == [("head", "table", copy.nbytes)]
    assert [t.name for t in model.graph.initializer] == ["table"]
    assert model.graph.node[0].op_type == "Transpose"  # before its reader
    onnx.checker.check_model(model)


def test_int8_of_a_large_model_ships_one_tied_table(tmp_path: Path, monkeypatch) -> None:
    """From a model past the large size (its weights in external data, read a weight at a time)
    as from memory: one int8 table that the Gather and the head read, the same outputs."""
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["table"], ["head"], perm=[1, 0]),
         helper.make_node("Gather", ["table", "ids"], ["rows"]),
         helper.make_node("MatMul", ["rows", "layer"], ["hidden"]),
         helper.make_node("MatMul", ["hidden", "head"], ["logits"])], "tied",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [3, 512])],
        [numpy_helper.from_array(rng.standard_normal((512, 64)).astype(np.float32), "table"),
         numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "layer")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    source = tmp_path / "model" / "tied.onnx"
    source.parent.mkdir()
    onnx.save_model(model, source, save_as_external_data=True, location="tied.onnx.data",
                    size_threshold=0)
    whole = make_variant("int8", source, tmp_path / "whole" / "int8.onnx")
    monkeypatch.setenv(LARGE_ENV, "1000")
    streamed = make_variant("int8", source, tmp_path / "streamed" / "int8.onnx")
    feed = {"ids": np.array([5, 17, 42], np.int64)}
    outputs = []
    for made in (whole, streamed):
        tables = [t for t in onnx.load(made.path).graph.initializer if 512 in t.dims]
        assert [(t.name, t.data_type, tuple(t.dims)) for t in tables] == [
            ("table_quantized", TensorProto.INT8, (512, 64)),
            ("table_scale", TensorProto.FLOAT, (512,)),
            ("table_zero_point", TensorProto.INT8, (512,))]
        assert made.session_config == whole.session_config
        outputs.append(cpu_session(made.path, config=made.native_config).run(None, feed)[0])
    np.testing.assert_array_equal(*outputs)
