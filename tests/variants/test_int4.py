"""int4: MatMulNBits for MatMul weights."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import onnx
import pytest

from bundler.errors import QuantizeError
from bundler.variants.metrics import measure
from bundler.variants.registry import make_variant
from tests import models
from tests.variants.helpers import feeds, ops, ratio


def test_int4_makes_matmulnbits(optimized: dict[str, Path], tmp_path: Path) -> None:
    dst = tmp_path / "int4.onnx"
    result = make_variant("int4", optimized["transformer"], dst)

    # 6 projections + head; q @ k^T and probs @ v have no constant weight
    assert ops(dst)["MatMulNBits"] == 7 and ops(dst)["MatMul"] == 2
    nbits = next(node for node in onnx.load(dst).graph.node if node.op_type == "MatMulNBits")
    attributes = {a.name: a.i for a in nbits.attribute}
    assert nbits.domain == "com.microsoft"
    assert attributes["bits"] == 4 and attributes["block_size"] == 32
    assert result.settings["matmuls_int4"] == 7 and result.settings["matmuls_float32"] == 2
    assert ratio(dst, optimized["transformer"]) <= 0.2
    metrics = measure(optimized["transformer"], dst, feeds("transformer"))
    assert 0.9 <= metrics.cosine < 0.999  # 4 bits is visibly lossy: the budget decides


def test_int4_names_unnamed_matmuls(tmp_path: Path) -> None:
    src = models.external_data(tmp_path)  # one unnamed MatMul, K = 64
    dst = tmp_path / "int4.onnx"
    make_variant("int4", src, dst)
    assert ops(dst) == Counter({"MatMulNBits": 1})


@pytest.mark.parametrize("name", ["odd_k", "cnn"])
def test_int4_with_no_eligible_matmul(optimized: dict[str, Path], tmp_path: Path, name) -> None:
    with pytest.raises(QuantizeError, match="no MatMul with a constant .* multiple of 32"):
        make_variant("int4", optimized[name], tmp_path / "int4.onnx")
