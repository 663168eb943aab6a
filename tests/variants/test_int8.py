"""int8: dynamic quantization, per-channel or per-tensor by measurement."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto

from bundler.bundle.modelio import model_files, read_model, signature
from bundler.variants.metrics import measure
from bundler.variants.registry import make_variant
from bundler.verify.reference import native_reference
from tests.variants.helpers import as_large, assert_same_variant, feeds, ops, ratio


@pytest.mark.parametrize(("name", "weight_type"), [("mlp", "QInt8"), ("cnn", "QUInt8")])
def test_int8_dynamic(
    optimized: dict[str, Path], tmp_path: Path, name: str, weight_type: str
) -> None:
    dst = tmp_path / "int8.onnx"
    result = make_variant("int8", optimized[name], dst, calibration=feeds(name))

    assert result.settings["mode"] == "dynamic"
    assert result.settings["weight_type"] == weight_type
    assert isinstance(result.settings["per_channel"], bool)
    assert any(note.startswith("per-channel weights: cosine") for note in result.notes)
    assert 0.25 <= ratio(dst, optimized[name]) <= 0.35
    assert ops(dst)["DynamicQuantizeLinear"] >= 1
    metrics = measure(optimized[name], dst, feeds(name))
    assert metrics.cosine >= 0.998 and metrics.top1_agreement >= 0.9


def test_int8_dynamic_without_feeds_uses_per_channel(
    optimized: dict[str, Path], tmp_path: Path
) -> None:
    result = make_variant("int8", optimized["transformer"], tmp_path / "int8.onnx")
    assert result.settings["per_channel"] is True
    assert result.settings["weight_type"] == "QInt8"


def _streamed_is_in_memory(source: Path, samples: list[dict[str, np.ndarray]], tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> dict[str, TensorProto]:
    """int8 of `source` made as a large model (its weights in a data file) is the one made from
    it in memory, with the same notes (per-channel and per-tensor measured natively: the same
    cosines), the source's data file left as it was; the variant's weights by name."""
    whole = tmp_path / "whole" / "int8.onnx"
    expected = make_variant("int8", source, whole, calibration=samples)
    # its Reshapes' shapes (int64 x 4) stay inline: onnxruntime reads them at load
    large = as_large(source, tmp_path / "large", monkeypatch, inline_below=128)
    data = large.with_name("large.onnx_data")
    before = data.read_bytes()
    dst = tmp_path / "streamed" / "int8.onnx"
    result = make_variant("int8", large, dst, calibration=samples)
    assert (result.settings, result.notes) == (expected.settings, expected.notes)
    assert model_files(dst) == [dst, dst.with_name("int8.onnx.data")]
    assert sorted(path.name for path in dst.parent.iterdir()) == ["int8.onnx", "int8.onnx.data"]
    assert data.read_bytes() == before
    return assert_same_variant(dst, whole, samples)


def test_int8_of_a_large_model_reads_a_weight_at_a_time(
        decoder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From a model past the large-model size, the quantizer takes the graph read without its
    weights and reads each weight from the data files when it quantizes it: the same variant,
    node for node and value for value, as quantize_dynamic makes from the model in memory (a
    GPT-2: its tied head's own copy and its tables quantized)."""
    samples = [native_reference(decoder, signature(read_model(decoder, load_weights=False)).inputs,
                                {}).feeds]
    weights = _streamed_is_in_memory(decoder, samples, tmp_path, monkeypatch)
    assert sum(t.data_type == TensorProto.INT8 for t in weights.values()) >= 2  # head, tables


def test_int8_of_a_large_model_rewrites_its_gemms_as_from_memory(
        optimized: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The quantizer rewrites a Gemm of a transposed weight (transB) as a MatMul of its
    transpose, made from the weight's values, and infers the shapes again: from a large model
    the weight is read from the data file first and the shapes inferred from the graph alone,
    and the variant (uint8 Conv weights) is the one made in memory."""
    source = optimized["cnn"]
    assert ops(source)["Gemm"] == 1
    weights = _streamed_is_in_memory(source, feeds("cnn"), tmp_path, monkeypatch)
    assert any(name.startswith("fc.weight_Transposed") for name in weights)
    assert sum(t.data_type == TensorProto.UINT8 for t in weights.values()) >= 4


def test_int8_of_a_large_merged_decoder_quantizes_its_branches_as_from_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merged decoder (optimum's, one If on use_cache_branch) has its layers quantized by a
    quantizer per branch, each inferring its branch's shapes again: from a large model, from the
    branch alone, reading the weights the branch quantizes from the data file."""
    from bundler.model.optimize import optimize
    from tests import decoder_models

    merged = tmp_path / "merged.onnx"
    optimize(decoder_models.gpt2_merged(tmp_path / "m").onnx, merged)
    assert ops(merged)["If"] == 1
    samples = [native_reference(merged, signature(read_model(merged, load_weights=False)).inputs,
                                {}).feeds]
    weights = _streamed_is_in_memory(merged, samples, tmp_path, monkeypatch)
    assert sum(t.data_type == TensorProto.INT8 for t in weights.values()) >= 9
