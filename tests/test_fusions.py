"""Transformer fusions (bundler.model.fusions) on optimum's BERT and RoBERTa exports: the step
fuses attention into MultiHeadAttention with ops both browser EPs run, the outputs stay those of
the export on a padded batch, int8 still quantizes every MatMul, and other models and bundles
are left as they are. The padding mask reaches attention as an additive bias, the input WebGPU's
MultiHeadAttention runs (the browser check of the fused bundles is in test_text_browser.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

from bundler.bundle.modelio import cpu_session
from bundler.model.fusions import CONTRIB
from bundler.model.optimize import optimize
from bundler.variants.registry import make_variant
from tests import encoder_models


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fusions")
    return {"bert": encoder_models.bert_folders(root)["feature-extraction"],
            "roberta": encoder_models.roberta_folder(root)}


def _ops(path: Path) -> Counter:
    return Counter((node.domain or "", node.op_type) for node in onnx.load(path).graph.node)


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("name", "eps"), [("bert", ("wasm",)), ("roberta", ("wasm",)),
                                           ("bert", ("webgpu", "wasm"))],
                         ids=["bert", "roberta", "bert-webgpu"])
def test_an_encoder_is_fused_and_answers_as_before(folders, name: str, eps, tmp_path: Path
                                                   ) -> None:
    folder = folders[name]
    fused = tmp_path / "fused.onnx"
    report = optimize(folder / "model.onnx", fused, config=_config(folder),
                      execution_providers=eps)
    step = next(s for s in report.steps if s.name == "transformer-fusions")
    assert step.status == "ok", step.detail
    layers = encoder_models.SMALL["num_hidden_layers"]
    ops = _ops(fused)
    assert ops[(CONTRIB, "SkipLayerNormalization")] >= layers
    if "webgpu" in eps:  # its MultiHeadAttention answers wrong from 32 tokens
        # six weight MatMuls and the two of attention (scores, weighted values) per layer
        assert not ops[(CONTRIB, "MultiHeadAttention")] and ops[("", "MatMul")] == 8 * layers
        assert "answers wrong from 32 tokens" in step.detail
    else:
        assert ops[(CONTRIB, "MultiHeadAttention")] == layers
        assert f"{layers} MultiHeadAttention" in step.detail
        assert ops[("", "MatMul")] == 4 * layers and ops[("", "Split")] == layers  # Q, K, V: one
    for node in onnx.load(fused).graph.node:
        if node.op_type == "MultiHeadAttention":  # no key_padding_mask, a (B, N, S, T) bias
            assert not node.input[4] and node.input[5], list(node.input)
    session = cpu_session(folder / "model.onnx")
    names = [value.name for value in session.get_inputs()]
    ids = np.random.default_rng(1).integers(3, 300, (3, 11))
    mask = np.array([[1] * 11, [1] * 6 + [0] * 5, [0] * 4 + [1] * 7])  # right and left padding
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    feeds = {key: value.astype(np.int64) for key, value in feeds.items() if key in names}
    want = session.run(None, feeds)[0]
    got = cpu_session(fused).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_int8_still_quantizes_every_matmul_of_a_fused_encoder(folders, tmp_path: Path) -> None:
    folder = folders["bert"]
    optimize(folder / "model.onnx", tmp_path / "fused.onnx", config=_config(folder))
    make_variant("int8", tmp_path / "fused.onnx", tmp_path / "int8.onnx")
    ops = _ops(tmp_path / "int8.onnx")
    # Q, K and V as one, the attention output and the two feed-forward MatMuls of each layer
    assert ops[("", "MatMulInteger")] == 4 * encoder_models.SMALL["num_hidden_layers"]
    assert ops[("", "MatMul")] == 0


@pytest.mark.parametrize("config", [None, {"model_type": "gpt2", "n_head": 2, "n_embd": 128}],
                         ids=["no-config", "gpt2"])
def test_other_models_are_not_fused(folders, config, tmp_path: Path) -> None:
    folder = folders["bert"]
    report = optimize(folder / "model.onnx", tmp_path / "plain.onnx", config=config)
    step = next(s for s in report.steps if s.name == "transformer-fusions")
    assert step.status == "skipped" and "no BERT-style encoder" in step.detail
    assert not [op for domain, op in _ops(tmp_path / "plain.onnx") if domain == CONTRIB]
