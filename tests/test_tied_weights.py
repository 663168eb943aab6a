"""Tied weights stay shared through graph optimisation (bundler.model.tied): optimum's GPT-2 with
its LM head stored as a transposed copy of the token embedding optimises to a model holding the
table once, with the same outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from bundler.bundle.modelio import cpu_session
from bundler.model.optimize import optimize
from bundler.model.tied import share_transposed_copies
from bundler.variants.registry import make_variant
from tests import decoder_models


def _tables(path: Path) -> dict[str, tuple[int, ...]]:
    return {t.name: tuple(t.dims) for t in onnx.load(path).graph.initializer if len(t.dims) == 2}


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
    ids = np.array([[5, 17, 42, 7]], np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids),
            "position_ids": np.arange(4, dtype=np.int64)[None]}
    feed.update({f"past_key_values.{layer}.{kind}": np.zeros((1, 4, 0, 16), np.float32)
                 for layer in range(2) for kind in ("key", "value")})
    want = cpu_session(export.onnx).run(["logits"], feed)[0]
    got = cpu_session(optimized).run(["logits"], feed)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_quantizer_still_takes_a_shared_head(export, tmp_path: Path) -> None:
    """int8 quantizes the head as its own copy (a Transpose is no constant weight to it), and
    keeps no float table: its Gather reads an int8 one."""
    optimize(export.onnx, tmp_path / "optimized.onnx")
    make_variant("int8", tmp_path / "optimized.onnx", tmp_path / "int8.onnx")
    graph = onnx.load(tmp_path / "int8.onnx").graph
    floats = [t.name for t in graph.initializer
              if t.data_type == TensorProto.FLOAT and len(t.dims) == 2 and 512 in t.dims]
    assert floats == []
    quantized = [t.name for t in graph.initializer if t.name.endswith("_quantized")
                 and sorted(t.dims) == [64, 512]]
    assert sorted(quantized) == ["transformer.wte.weight_quantized",
                                 "transformer.wte.weight_transposed_quantized"]


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
