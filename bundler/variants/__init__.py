"""The variants of a model: one module per kind (fp32.py, fp16.py, int8_weights.py, int8.py,
int8_static.py, int4.py), found by name through registry.py; metrics.py measures a variant
against fp32, budget.py says what is close enough, plan.py says what a build makes and ships,
select.py makes auto's choice, make.py makes a build's variants, ort_format.py converts one to
.ort.

Adding a kind: a module named after it that defines `KIND = KindSpec(...)` (see spec.py), its
name in kinds.py's Literal, and its tests.

The names below are imported on first use, so `bundler.variants.kinds`, `.budget` and `.plan`
stay free of onnx and onnxruntime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bundler.variants.budget import DEFAULT_BUDGET, Budget, parse_budget
    from bundler.variants.kinds import VARIANT_KINDS
    from bundler.variants.metrics import Metrics, measure, native_latency_ms
    from bundler.variants.ort_format import to_ort_format
    from bundler.variants.plan import variants_to_make
    from bundler.variants.registry import make_variant
    from bundler.variants.spec import VariantResult

_LAZY = {
    "DEFAULT_BUDGET": "budget",
    "Budget": "budget",
    "parse_budget": "budget",
    "VARIANT_KINDS": "kinds",
    "Metrics": "metrics",
    "measure": "metrics",
    "native_latency_ms": "metrics",
    "to_ort_format": "ort_format",
    "make_variant": "registry",
    "variants_to_make": "plan",
    "VariantResult": "spec",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_BUDGET",
    "VARIANT_KINDS",
    "Budget",
    "Metrics",
    "VariantResult",
    "make_variant",
    "measure",
    "native_latency_ms",
    "parse_budget",
    "to_ort_format",
    "variants_to_make",
]
