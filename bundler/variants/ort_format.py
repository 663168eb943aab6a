"""A variant in onnxruntime's .ort format (`--format ort`), checked against its .onnx.

onnxruntime writes the .ort file's kernel type table from a hash map (abseil's) whose order
follows where the process's memory lies: its hash seed and table seeds come from addresses. So a
conversion inside a long-running process, or in a process with address-space randomisation,
writes the same entries in another order each time. The conversion therefore runs in a fresh
Python process with randomisation turned off (Linux `personality(ADDR_NO_RANDOMIZE)`, what
`setarch -R` does): the same model then gives the same bytes on the same machine and onnxruntime.
Where the kernel refuses that (or on another OS) the file is still correct, only not
byte-identical between builds; its sha256 in bundle.json is always that of the file shipped.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort

from bundler.bundle.modelio import cpu_session
from bundler.errors import ModelError, QuantizeError, first_line
from bundler.variants.metrics import Feeds, run_all
from bundler.variants.tools import is_large
from bundler.verify.tolerance import tolerance_for

_ADDR_NO_RANDOMIZE = 0x0040000
_QUERY = 0xFFFFFFFF

_CONVERT = """
import sys
from pathlib import Path
import onnxruntime as ort
from bundler.bundle.modelio import cpu_session
from bundler.verify.tolerance import tolerance_for
cpu_session(Path(sys.argv[1]), level=getattr(ort.GraphOptimizationLevel, sys.argv[3]),
            optimized_path=Path(sys.argv[2]), save_format="ORT")
"""


def _without_address_randomisation() -> None:
    """In the child, before exec: the next program runs with a fixed memory layout."""
    with contextlib.suppress(OSError, AttributeError):
        personality = ctypes.CDLL(None, use_errno=True).personality
        current = personality(_QUERY)
        if current != -1:
            personality(current | _ADDR_NO_RANDOMIZE)


def save_ort(src: Path, dst: Path,
             level: ort.GraphOptimizationLevel = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
             ) -> None:
    """Convert `src` to .ort at `dst`, optimised at `level` (basic: the portable one)."""
    package_root = str(Path(__file__).resolve().parents[2])  # so the child imports this bundler
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    # The same file names in a folder of the same name length: paths of another length would
    # move the child's allocations, and with them the order.
    with tempfile.TemporaryDirectory(prefix="bundler-ort-") as work:
        shutil.copyfile(src, Path(work) / "model.onnx")
        result = subprocess.run(
            [sys.executable, "-c", _CONVERT, "model.onnx", "model.ort", level.name], cwd=work,
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path},
            preexec_fn=_without_address_randomisation if sys.platform == "linux" else None,
        )
        if result.returncode != 0:
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            raise ModelError(lines[-1] if lines else f"exit status {result.returncode}")
        shutil.move(Path(work) / "model.ort", dst)


def to_ort_format(src: Path, dst: Path, feeds: Feeds | None = None) -> None:
    """Convert `src` to onnxruntime's .ort format at `dst`, at the portable basic level.

    The result is checked to load and, on `feeds`, to give the outputs `src` gives.
    """
    basic = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    try:
        too_large = is_large(src)
        if not too_large:
            save_ort(src, dst)
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
    bound = tolerance_for("ort-web")
    for feed, wanted in zip(feeds, expected, strict=True):
        for name, a, b in zip(names, wanted, converted.run(names, feed), strict=True):
            if a.shape != b.shape or not np.allclose(a, b, rtol=bound.rtol, atol=bound.atol,
                                                     equal_nan=True):
                raise QuantizeError(
                    f"{dst.name} gives other values than {src.name} for output {name!r};"
                    " ship the .onnx"
                )
