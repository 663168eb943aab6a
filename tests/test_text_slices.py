"""bundler/text/slices.py: the new key/value slice outputs a text-generation build adds, checked
natively on optimum's exports (GPT-2 plain and merged, Llama with grouped-query attention): each
present_new.N.* equals the last tokens of its present.N.*, at the first step and later."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from bundler.text.slices import with_new_slices
from tests import decoder_models


@pytest.fixture(scope="module", params=["gpt2", "gpt2_merged", "llama"])
def export(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return getattr(decoder_models, request.param)(tmp_path_factory.mktemp(request.param)).onnx


def _feeds(session: ort.InferenceSession, past: int, fed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {"input_ids": rng.integers(0, 100, (1, fed), dtype=np.int64),
             "attention_mask": np.ones((1, past + fed), np.int64)}
    for spec in session.get_inputs():
        if spec.name == "position_ids":
            feeds[spec.name] = np.arange(past, past + fed, dtype=np.int64)[None]
        elif spec.name == "use_cache_branch":
            feeds[spec.name] = np.array([past > 0])
        elif spec.name.startswith("past_key_values."):
            feeds[spec.name] = rng.standard_normal(
                (1, spec.shape[1], past, spec.shape[3])).astype(np.float32)
    return feeds


def test_each_new_slice_is_its_presents_last_tokens(export: Path, tmp_path: Path) -> None:
    model = with_new_slices(onnx.load(str(export)))
    path = tmp_path / "slices.onnx"
    onnx.save(model, path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [spec.name for spec in session.get_outputs()]
    presents = [name for name in names if name.startswith("present.")]
    assert [name for name in names if name.startswith("present_new.")] == [
        name.replace("present.", "present_new.") for name in presents]
    for past, fed in ((0, 5), (7, 1), (7, 3)):
        outputs = dict(zip(names, session.run(None, _feeds(session, past, fed)), strict=True))
        for name in presents:
            new = outputs[name.replace("present.", "present_new.")]
            assert new.shape[2] == fed
            np.testing.assert_array_equal(new, outputs[name][:, :, past:])


def test_a_decoder_of_another_form_is_left_as_it_is() -> None:
    from onnx import TensorProto, helper

    shape = [1, 2, None, 4]
    past = helper.make_tensor_value_info("past_key_values.0.key", TensorProto.FLOAT, shape)
    present = helper.make_tensor_value_info("present.0.key", TensorProto.FLOAT, shape)
    graph = helper.make_graph([helper.make_node("Identity", [past.name], [present.name])], "g",
                              [past], [present])
    model = helper.make_model(graph)
    assert with_new_slices(model) is model
