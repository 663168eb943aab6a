"""The .ort conversion."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from bundler.bundle.modelio import model_bytes
from bundler.errors import QuantizeError
from bundler.variants.ort_format import to_ort_format
from bundler.variants.registry import make_variant
from tests.variants.helpers import feeds


@pytest.mark.parametrize("kind", ["fp32", "int8-weights", "int4"])
def test_to_ort_format(optimized: dict[str, Path], tmp_path: Path, kind: str) -> None:
    variant = tmp_path / f"{kind}.onnx"
    make_variant(kind, optimized["transformer"], variant)
    dst = tmp_path / f"{kind}.ort"

    to_ort_format(variant, dst, feeds("transformer"))

    # basic level keeps the DequantizeLinear weights int8 (no folding back to float)
    assert 0.9 <= dst.stat().st_size / model_bytes(variant) <= 1.2
    session = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["x"]


def test_to_ort_format_is_equivalent_across_runs(
    optimized: dict[str, Path], tmp_path: Path
) -> None:
    # onnxruntime writes its kernel-type table from a hash map, so the bytes may differ run to
    # run; size and results do not
    to_ort_format(optimized["cnn"], tmp_path / "a.ort")
    to_ort_format(optimized["cnn"], tmp_path / "b.ort")
    assert (tmp_path / "a.ort").stat().st_size == (tmp_path / "b.ort").stat().st_size
    a, b = (
        ort.InferenceSession(str(tmp_path / name), providers=["CPUExecutionProvider"])
        for name in ("a.ort", "b.ort")
    )
    feed = feeds("cnn")[0]
    # the same graph: at most float32 rounding where a threaded reduction splits otherwise
    np.testing.assert_allclose(a.run(None, feed)[0], b.run(None, feed)[0], rtol=1e-6, atol=1e-7)


def test_to_ort_format_failure_is_a_quantize_error(tmp_path: Path) -> None:
    (tmp_path / "broken.onnx").write_bytes(b"not a model")
    with pytest.raises(QuantizeError, match="could not convert broken.onnx to .ort"):
        to_ort_format(tmp_path / "broken.onnx", tmp_path / "broken.ort")
