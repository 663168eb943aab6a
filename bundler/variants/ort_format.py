"""A variant in onnxruntime's .ort format (`--format ort`), checked against its .onnx."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from bundler.errors import QuantizeError, first_line
from bundler.modelio import cpu_session
from bundler.variants.metrics import Feeds, run_all
from bundler.variants.tools import is_large


def to_ort_format(src: Path, dst: Path, feeds: Feeds | None = None) -> None:
    """Convert `src` to onnxruntime's .ort format at `dst`, at the portable basic level.

    The result is checked to load and, on `feeds`, to give the outputs `src` gives.
    """
    basic = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    try:
        too_large = is_large(src)
        if not too_large:
            cpu_session(src, level=basic, optimized_path=dst, save_format="ORT")
            converted = cpu_session(dst, level=basic)
    except Exception as error:
        raise QuantizeError(
            f"could not convert {src.name} to .ort ({first_line(error, typed=True)});"
            " ship the .onnx"
        ) from None
    if too_large:
        raise QuantizeError(
            f"{src.name} is over 2 GB, which the .ort format cannot hold; ship the .onnx"
        )
    if not feeds:
        return
    names, expected = run_all(src, feeds, level=basic)
    for feed, wanted in zip(feeds, expected, strict=True):
        for name, a, b in zip(names, wanted, converted.run(names, feed), strict=True):
            if a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True):
                raise QuantizeError(
                    f"{dst.name} gives other values than {src.name} for output {name!r};"
                    " ship the .onnx"
                )
