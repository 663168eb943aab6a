"""Writing onnxruntime's .ort format so that the same model gives the same bytes.

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

from bundler.errors import ModelError

_ADDR_NO_RANDOMIZE = 0x0040000
_QUERY = 0xFFFFFFFF

_CONVERT = """
import sys
from pathlib import Path
import onnxruntime as ort
from bundler.reference import cpu_session
cpu_session(Path(sys.argv[1]), level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            optimized_path=Path(sys.argv[2]), save_format="ORT")
"""


def _without_address_randomisation() -> None:
    """In the child, before exec: the next program runs with a fixed memory layout."""
    with contextlib.suppress(OSError, AttributeError):
        personality = ctypes.CDLL(None, use_errno=True).personality
        current = personality(_QUERY)
        if current != -1:
            personality(current | _ADDR_NO_RANDOMIZE)


def save_ort(src: Path, dst: Path) -> None:
    """Convert `src` to .ort at `dst` (basic optimisation level, the portable one)."""
    package_root = str(Path(__file__).resolve().parent.parent)  # so the child imports this bundler
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    # The same file names in a folder of the same name length: paths of another length would
    # move the child's allocations, and with them the order.
    with tempfile.TemporaryDirectory(prefix="bundler-ort-") as work:
        shutil.copyfile(src, Path(work) / "model.onnx")
        result = subprocess.run(
            [sys.executable, "-c", _CONVERT, "model.onnx", "model.ort"], cwd=work,
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path},
            preexec_fn=_without_address_randomisation if sys.platform == "linux" else None,
        )
        if result.returncode != 0:
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            raise ModelError(lines[-1] if lines else f"exit status {result.returncode}")
        shutil.move(Path(work) / "model.ort", dst)
