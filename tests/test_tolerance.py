"""One tolerance policy (bundler.verify.tolerance): each comparison's bound, by variant kind and
EP, and the browser's read from the settings file (the user's override)."""

import subprocess
import sys

import pytest

from bundler.resources import resource
from bundler.variants.kinds import VARIANT_KINDS
from bundler.variants.registry import is_quantized
from bundler.verify.browser import load_settings
from bundler.verify.tolerance import Tolerance, tolerance_for


def test_only_fp32_is_not_quantized() -> None:
    assert [kind for kind in VARIANT_KINDS if not is_quantized(kind)] == ["fp32"]


@pytest.mark.parametrize(("comparison", "kind", "ep", "bound"), [
    ("fingerprint", "fp32", "cpu", Tolerance(rtol=1e-4)),
    ("fingerprint", "fp32", "cuda", Tolerance(rtol=1e-2)),
    ("fingerprint", "int8", "cpu", Tolerance(rtol=2e-2)),
    ("fingerprint", "fp16", "cuda", Tolerance(rtol=2e-2)),  # quantized before accelerator
    ("conversion", "fp32", "cpu", Tolerance(atol=1e-4, rtol=1e-3)),
    ("ort-web", "int8", "cpu", Tolerance(atol=1e-5, rtol=1e-4)),  # against its own .onnx
    ("ort-edge", "int8-static", "cpu", Tolerance(atol=1e-4, rtol=1e-4)),
    ("task-scores", "fp32", "webgpu", Tolerance(atol=1e-3)),
    ("task-scores", "int4", "wasm", Tolerance(atol=2e-2)),
    ("generation-logits", "fp32", "cpu", Tolerance(range_fraction=1e-4)),  # WASM: CPU kernels
    ("generation-logits", "fp32", "webgpu", Tolerance(range_fraction=1e-3)),
    ("generation-logits", "int8", "cpu", Tolerance(range_fraction=1e-2)),
    # a speech window's steps, each side over its own encoding
    ("transcript-logits", "fp32", "cpu", Tolerance(range_fraction=1e-3)),
    ("transcript-logits", "fp32", "webgpu", Tolerance(range_fraction=3e-3)),
    ("transcript-logits", "int4", "webgpu", Tolerance(range_fraction=1e-2)),
])
def test_native_comparisons(comparison, kind, ep, bound) -> None:
    assert tolerance_for(comparison, kind, ep) == bound


def test_browser_tolerances_come_from_the_settings_file(tmp_path) -> None:
    shipped = load_settings()
    assert tolerance_for("browser", "fp32", "wasm") == Tolerance(**shipped.tolerances["wasm"])
    # quantized: relative to the output's range, with fp32's absolute floor
    assert tolerance_for("browser", "int8", "webgpu") == Tolerance(
        atol=shipped.tolerances["webgpu"]["atol"],
        range_fraction=shipped.quantized_tolerances["webgpu"]["range_fraction"])
    own = tmp_path / "playwright.config.py"
    text = resource("playwright.config.py").read_text(encoding="utf-8")
    changed = text.replace('"wasm": {"atol": 1e-4, "rtol": 1e-3}',
                           '"wasm": {"atol": 0.5, "rtol": 0.25}')
    assert changed != text
    own.write_text(changed, encoding="utf-8")
    settings = load_settings(own)
    assert tolerance_for("browser", "fp32", "wasm", settings) == Tolerance(atol=0.5, rtol=0.25)
    assert tolerance_for("browser", "int8", "wasm", settings).atol == 0.5


def test_the_cli_reads_its_defaults_without_numpy_or_onnxruntime() -> None:
    code = ("import sys\n"
            "import bundler.cli\n"
            "from bundler.verify.tolerance import tolerance_for\n"
            "from bundler.variants.default import default_variant\n"
            "tolerance_for('conversion'); default_variant({'wasm': 'int8'}, 'webgpu')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in"
            " ('numpy', 'onnx', 'onnxruntime')))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"
