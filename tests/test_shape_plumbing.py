"""The shape-plumbing step (bundler.model.shape_plumbing) on optimum's decoder exports: a GPT-2
(plain and merged under an If) and a Llama lose most of their nodes, answer as before at other
lengths than the step's own check, and int8 still quantizes every projection; other models are
left as they are. The browser side (greedy tokens equal to the Python loop on the optimized
bundles) is test_text_generation_browser.py's."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

from bundler.bundle.modelio import cpu_session, walk_nodes
from bundler.model.optimize import optimize
from bundler.variants.registry import make_variant
from tests import decoder_models, encoder_models


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("plumbing")
    return {"gpt2": decoder_models.gpt2(root / "gpt2").onnx,
            "merged": decoder_models.gpt2_merged(root / "merged").onnx,
            "llama": decoder_models.llama(root / "llama").onnx}


def _ops(path: Path) -> Counter:
    return Counter(node.op_type for node in walk_nodes(onnx.load(path).graph))


def _feeds(path: Path, past: int, new: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(past)
    feeds: dict[str, np.ndarray] = {}
    for value in cpu_session(path).get_inputs():
        if value.name.startswith("past_key_values"):
            feeds[value.name] = rng.standard_normal(
                (1, value.shape[1], past, value.shape[3])).astype(np.float32)
    feeds["input_ids"] = rng.integers(0, decoder_models.VOCAB, (1, new))
    feeds["attention_mask"] = np.ones((1, past + new), np.int64)
    feeds["position_ids"] = np.arange(past, past + new)[None]
    return feeds


@pytest.mark.parametrize("name", ["gpt2", "merged", "llama"])
def test_a_decoder_loses_its_shape_nodes_and_answers_as_before(exports, name: str,
                                                               tmp_path: Path) -> None:
    source = exports[name]
    folded = tmp_path / "folded.onnx"
    report = optimize(source, folded)
    step = next(s for s in report.steps if s.name == "shape-plumbing")
    assert step.status == "ok", step.detail
    assert "nodes less" in step.detail
    before, after = _ops(source), _ops(folded)
    assert sum(after.values()) < 0.7 * sum(before.values()), (before, after)
    assert after["Shape"] < before["Shape"] / 2
    assert after["Gemm"] == 0  # GPT-2's Conv1D: flatten -> Gemm -> unflatten is one MatMul + Add
    names = {value.name for value in cpu_session(source).get_inputs()}
    for past, new in ((0, 5), (9, 1), (9, 2)):  # not the step's own check (0 and 4, 3 new)
        feeds = {k: v for k, v in _feeds(source, past, new).items() if k in names}
        if "use_cache_branch" in names:
            feeds["use_cache_branch"] = np.array([past > 0])
        want = cpu_session(source).run(None, feeds)
        got = cpu_session(folded).run(None, feeds)
        for a, b in zip(want, got, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)


def test_int8_quantizes_the_folded_projections(exports, tmp_path: Path) -> None:
    optimize(exports["merged"], tmp_path / "folded.onnx")
    make_variant("int8", tmp_path / "folded.onnx", tmp_path / "int8.onnx")
    ops = _ops(tmp_path / "int8.onnx")
    # in each branch, per layer: c_attn, attention c_proj, c_fc and mlp c_proj; the tied LM head
    # reads the token table's one int8 copy as float (bundler/variants/int8_tied.py)
    assert ops["MatMulInteger"] == 2 * 4 * 2, ops
    assert ops["DequantizeLinear"] == 1 + 2, ops  # the table's, and each branch's position table


def test_an_encoder_is_left_as_it_is(tmp_path: Path) -> None:
    folder = encoder_models.bert_folders(tmp_path)["feature-extraction"]
    report = optimize(folder / "model.onnx", tmp_path / "out.onnx")
    step = next(s for s in report.steps if s.name == "shape-plumbing")
    assert (step.status, step.detail) == ("skipped", "not a decoder with past")
