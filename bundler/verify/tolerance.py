"""How close is close enough: every comparison of two computations of one model, in one table.

`tolerance_for(comparison, kind, ep)` answers for each place the tool compares outputs. A quantized
variant (its kind's spec says so) gets the quantized row where a comparison has one, a run on an
accelerator the accelerator row, anything else the exact row. The browser against native
onnxruntime is the user's to set, per execution provider, in playwright.config.py (TOLERANCES,
QUANTIZED_TOLERANCES): that comparison reads the settings given.

Pure Python (no numpy or onnxruntime): the CLI reads the defaults from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from bundler.verify.browser import BrowserSettings

Comparison = Literal["browser", "fingerprint", "conversion", "ort-web", "ort-edge", "task-scores",
                     "task-embeddings", "generation-logits", "transcript-logits"]
Precision = Literal["exact", "accelerator", "quantized"]


@dataclass(frozen=True)
class Tolerance:
    """|got - expected| <= atol + rtol * |expected| elementwise, or with `range_fraction`,
    <= atol + range_fraction * the expected output's range."""

    atol: float = 0.0
    rtol: float = 0.0
    range_fraction: float | None = None


# The browser row is playwright.config.py's; `fingerprint` bounds rtol only (reference.py derives
# its atol from it).
TOLERANCES: dict[Comparison, dict[Precision, Tolerance]] = {
    # A native run against the fingerprint bundle.json recorded at build time: CPU agrees with
    # itself to rounding; integer kernels differ between CPUs; accelerators compute in other
    # orders (and TF32 on CUDA).
    "fingerprint": {"exact": Tolerance(rtol=1e-4), "accelerator": Tolerance(rtol=1e-2),
                    "quantized": Tolerance(rtol=2e-2)},
    # A converted model (opset or IR lowered, exported from PyTorch) against its original.
    "conversion": {"exact": Tolerance(atol=1e-4, rtol=1e-3)},
    # --format ort: the .ort against its .onnx, both at the basic optimisation level.
    "ort-web": {"exact": Tolerance(atol=1e-5, rtol=1e-4)},
    # --target edge: the .ort (extended optimisations) against the .onnx it was made from;
    # atol and rtol alike (edge.json records the one number).
    "ort-edge": {"exact": Tolerance(atol=1e-4, rtol=1e-4)},
    # A task's answers in the browser against the Python reference: scores, absolutely.
    "task-scores": {"exact": Tolerance(atol=1e-3), "quantized": Tolerance(atol=2e-2)},
    # A text embedding in the browser against the same variant's native one: its scale is the
    # model's own, so its direction is compared: atol bounds 1 - cosine similarity, per row.
    "task-embeddings": {"exact": Tolerance(atol=1e-4)},
    # A text-generation bundle's teacher-forced logits in the browser against the same variant's
    # native ones (bundler/text/agreement.py): relative to each step's logit range. WASM and
    # native CPU run the same kernels in other orders; WebGPU computes in its own; a quantized
    # variant's integer kernels differ between WASM and native.
    "generation-logits": {"exact": Tolerance(range_fraction=1e-4),
                          "accelerator": Tolerance(range_fraction=1e-3),
                          "quantized": Tolerance(range_fraction=1e-2)},
    # The same for a speech window's steps (bundler.tasks.kinds.automatic_speech_recognition),
    # and its near-tie: tokens that part from native's pass where native's scores of the two are
    # this close. Each side decodes over its own encoding, a window's calls for up to max_length
    # steps each: fp32 on WASM was 2.1e-4 of the range off native at Whisper-tiny size (4+4
    # layers x 384, random weights, a 75 s recording), WebGPU 3e-4.
    "transcript-logits": {"exact": Tolerance(range_fraction=1e-3),
                          "accelerator": Tolerance(range_fraction=3e-3),
                          "quantized": Tolerance(range_fraction=1e-2)},
}


def tolerance_for(comparison: Comparison, kind: str = "fp32", ep: str = "cpu",
                  settings: BrowserSettings | None = None) -> Tolerance:
    """The tolerance of `comparison` for a variant of `kind` run on `ep`; "browser" reads
    `settings` (default: playwright.config.py's)."""
    if comparison == "browser":
        from bundler.verify.browser import load_settings

        settings = settings or load_settings()
        exact = settings.tolerances[ep]
        if not _quantized(kind):
            return Tolerance(**exact)
        # relative to the output's range, never tighter than fp32's absolute tolerance
        return Tolerance(**{**settings.quantized_tolerances[ep], "atol": exact["atol"]})
    row = TOLERANCES[comparison]
    if "quantized" in row and _quantized(kind):
        return row["quantized"]
    if ep != "cpu" and "accelerator" in row:
        return row["accelerator"]
    return row["exact"]


def _quantized(kind: str) -> bool:
    from bundler.variants.registry import is_quantized  # loads onnx: only where a kind matters

    return is_quantized(kind)
