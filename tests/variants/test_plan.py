"""The variant plan of the options: what ships, which is the default, which combinations are
errors."""

from __future__ import annotations

import pytest

from bundler.errors import ConfigError
from bundler.variants.kinds import VARIANT_KINDS
from bundler.variants.plan import variants_to_make

PER_EP = {"webgpu": "fp32", "wasm": "int8"}


@pytest.mark.parametrize(
    ("quantize", "variants", "default_variant", "kinds", "default"),
    [
        (None, None, None, ("fp32",), "fp32"),
        ("int8", None, None, ("int8",), "int8"),
        (None, ("fp16", "int8"), None, ("fp16", "int8"), "fp16"),
        # quantize names the default; variants adds to it (no repeats)
        ("fp32", ("int8",), None, ("fp32", "int8"), "fp32"),
        ("int8", ("fp32", "int8"), None, ("int8", "fp32"), "int8"),
        ("fp32", ("int8",), "int8", ("fp32", "int8"), "int8"),
        (None, ("fp32", "int8"), PER_EP, ("fp32", "int8"), PER_EP),
        # auto: the candidates, and no default until it has chosen
        ("auto", None, None, VARIANT_KINDS, None),
        ("auto", ("fp32", "int8"), None, ("fp32", "int8"), None),
    ],
)
def test_variants_to_make(quantize, variants, default_variant, kinds, default) -> None:
    plan = variants_to_make(quantize, variants, default_variant)
    assert plan == (kinds, default)
    assert plan.auto is (quantize == "auto")


@pytest.mark.parametrize(
    ("quantize", "variants", "default_variant", "message"),
    [
        ("auto", None, "int8", r"^default_variant: auto chooses the default variant; drop"
                               r" default_variant, or ship fixed variants with variants ="
                               r" \[\.\.\.\] and default_variant$"),
        ("auto", ("fp32", "int8"), {"wasm": "int8"}, "^default_variant: auto chooses the default"),
        (None, ("fp32", "fp16"), "int8",
         r"^default_variant: 'int8' is not shipped \(variants: fp32, fp16\)$"),
        ("int8", None, {"webgpu": "int8", "wasm": "fp32"},
         "^default_variant: 'fp32' is not shipped"),
        (None, ("fp32", "int2"), None, "^variants: unknown 'int2'; choose from fp32, fp16"),
    ],
)
def test_contradictions_are_one_line_errors(quantize, variants, default_variant, message) -> None:
    with pytest.raises(ConfigError, match=message):
        variants_to_make(quantize, variants, default_variant)
