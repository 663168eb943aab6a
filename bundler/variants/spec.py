"""What a variant kind module provides (its `KIND`), the job it is given and the result it fills.

A kind module, named after its kind (`int8-weights` -> `int8_weights.py`), defines
`KIND = KindSpec(...)`; the registry finds it by that name.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from bundler.bundle.codec import to_json
from bundler.bundle.records import VariantSettings
from bundler.variants.int4_options import Int4Options
from bundler.variants.kinds import CalibrationMethod, VariantKind
from bundler.variants.metrics import Feeds


@dataclass
class VariantResult:
    kind: VariantKind
    path: Path
    notes: list[str] = field(default_factory=list)
    settings: VariantSettings | None = None  # every kind sets its record
    session_config: dict[str, dict[str, str]] | None = None  # per EP (Variant's record)
    requires: list[str] | None = None  # WebGPU features it needs (Variant's record)
    # per EP, a graph of its own that EP opens instead of `path` (int4 format=per-ep's WebGPU
    # form), naming the same external data files (Variant's `graphs`)
    graphs: dict[str, Path] | None = None

    def graph_for(self, ep: str) -> Path:
        """The graph `ep` ("wasm", "webgpu") opens; native runs of it take WASM's config."""
        return (self.graphs or {}).get(ep, self.path)

    @property
    def native_config(self) -> dict[str, str] | None:
        """The entries native runs open it with: WASM's, which the CPU EP stands for."""
        return (self.session_config or {}).get("wasm")

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path.name,
            "notes": self.notes,
            "settings": to_json(self.settings),
        }


@dataclass
class Job:
    """Write the variant of the (optimised, fp32) model `src` to `dst`; `calibration` feeds, when
    given, are used in the order given, so the result is deterministic."""

    src: Path
    dst: Path
    calibration: Feeds | None
    method: CalibrationMethod
    log: Callable[[str], None]
    result: VariantResult
    int4: Int4Options = field(default_factory=Int4Options)  # --int4
    # `src` read without its weights when it is large (modelio.is_large) and the kind can make
    # its variant from such a model (KindSpec.streamed): it reads each weight when it needs it
    # and writes them with bundler.bundle.external.StreamedWeights.
    weightless: onnx.ModelProto | None = None

    def note(self, text: str) -> None:
        # Library errors quote the temporary paths they were given; bundle.json must not.
        text = text.replace(f"{self.dst.parent}{os.sep}", "")
        self.result.notes.append(text)
        self.log(f"{self.result.kind}: {text}")


@dataclass(frozen=True)
class KindSpec:
    name: VariantKind
    keeps_float: str  # what stays float32, in a few words (shown beside the measurements)
    needs_calibration: bool
    quantized: bool  # computes in lower precision than the model: compared more loosely
    advice: str  # what to try instead when making it fails
    make: Callable[[Job], None]
    # makes its variant from a model past 2 GB (modelio.is_large) a weight at a time (Job's
    # `weightless`); the build refuses the other kinds for such a model
    streamed: bool = False
    # takes a tied LM head kept shared (bundler.model.tied: a MatMul reading a Transpose of the
    # token table) as it is; make_variant gives the other quantized kinds' heads a constant
    # copy of their own to quantize (unshare_for_matmuls)
    takes_tied_heads: bool = False
