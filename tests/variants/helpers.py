"""Test models of the variant tests (built in code) and small readers of variant files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

from bundler.bundle.external import INLINE_BELOW
from bundler.bundle.modelio import LARGE_ENV, cpu_session, is_large, model_bytes, read_model
from tests import quant_models

BUILDERS = {
    "mlp": (quant_models.mlp_classifier, quant_models.mlp_feeds),
    "transformer": (quant_models.transformer_block, quant_models.transformer_feeds),
    "cnn": (quant_models.conv_classifier, quant_models.image_feeds),
    "odd_k": (quant_models.odd_k_matmul, quant_models.odd_k_feeds),
    "upsampler": (quant_models.grouped_upsampler, quant_models.upsampler_feeds),
    "overflow": (quant_models.fp16_overflow, quant_models.fp16_overflow_feeds),
}

# top1_agreement is a share of rows; less than any one row's share of it means every row agrees.
EVERY_ROW = pytest.approx(1.0, abs=1e-9)
# A cosine computed in float64 of vectors that are equal, or equal up to a factor.
COSINE_ONE = pytest.approx(1.0, abs=1e-12)


def feeds(name: str) -> list[dict[str, np.ndarray]]:
    return BUILDERS[name][1]()


def ops(path: Path) -> Counter:
    return Counter(node.op_type for node in onnx.load(path).graph.node)


def ratio(variant: Path, reference: Path) -> float:
    return model_bytes(variant) / model_bytes(reference)


def elem_types(values) -> list[int]:
    return [value.type.tensor_type.elem_type for value in values]


def as_large(source: Path, directory: Path, monkeypatch: pytest.MonkeyPatch,
             inline_below: int = 0) -> Path:
    """`source` saved with its weights in external data, which $BUNDLER_LARGE_MODEL_BYTES
    lowered under their size makes a large model (modelio.is_large). Every tensor goes to the
    data file, but with `inline_below` those under about that many bytes (onnx counts a
    Python object's): native onnxruntime cannot load a model whose Reshape reads its shape from
    external data."""
    directory.mkdir()
    large = directory / "large.onnx"
    onnx.save_model(onnx.load(source), large, save_as_external_data=True,
                    all_tensors_to_one_file=True, location="large.onnx_data",
                    size_threshold=inline_below)
    monkeypatch.setenv(LARGE_ENV, "1000")
    assert is_large(large)
    return large


def assert_same_variant(made: Path, wanted: Path,
                        samples: list[dict[str, np.ndarray]]) -> dict[str, onnx.TensorProto]:
    """The variant `made` from a large model (its weights in its data file, those under
    INLINE_BELOW inline) is the one `wanted` made from the model in memory: node for node, value
    info for value info, weight for weight value for value, and output for output natively on
    `samples`. Returns its weights by name."""
    graph = onnx.load(made, load_external_data=False)
    assert all(t.data_location == TensorProto.EXTERNAL or len(t.raw_data) < INLINE_BELOW
               for t in onnx.external_data_helper._get_initializer_tensors(graph))
    got, reference = read_model(made), read_model(wanted)
    assert list(got.graph.node) == list(reference.graph.node)
    assert list(got.graph.value_info) == list(reference.graph.value_info)
    weights = {t.name: t for t in onnx.external_data_helper._get_initializer_tensors(got)}
    references = {t.name: t for t in onnx.external_data_helper._get_initializer_tensors(reference)}
    assert weights.keys() == references.keys()
    for name, tensor in references.items():
        assert weights[name].data_type == tensor.data_type
        np.testing.assert_array_equal(numpy_helper.to_array(weights[name]),
                                      numpy_helper.to_array(tensor))
    for feed in samples:
        for output, expected in zip(cpu_session(made).run(None, feed),
                                    cpu_session(wanted).run(None, feed), strict=True):
            np.testing.assert_array_equal(output, expected)
    return weights
