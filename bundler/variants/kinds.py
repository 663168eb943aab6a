"""The names of the variant kinds and of the choices around them, with no import of onnx or
onnxruntime: options, `bundle --help` and TOML validation read them from here.

A kind's behaviour lives in the module of the same name (`int8-weights` -> `int8_weights.py`);
the Literal below is the one written-out list of names, so that type checkers see the choices.
"""

from __future__ import annotations

from typing import Literal, get_args

# In order of preference when two candidates of `auto` are equally good.
VariantKind = Literal["fp32", "fp16", "int8-weights", "int8", "int8-static", "int4"]
QuantizeChoice = Literal[VariantKind, "auto"]
CalibrationMethod = Literal["minmax", "percentile", "entropy"]
Objective = Literal["balanced", "speed", "size"]  # what auto optimises (see select.py)

VARIANT_KINDS: tuple[VariantKind, ...] = get_args(VariantKind)
QUANTIZE_CHOICES: tuple[QuantizeChoice, ...] = get_args(QuantizeChoice)
CALIBRATION_METHODS: tuple[CalibrationMethod, ...] = get_args(CalibrationMethod)
OBJECTIVES: tuple[Objective, ...] = get_args(Objective)


def module_name(kind: str) -> str:
    """The module (in this package) that implements `kind`."""
    return kind.replace("-", "_")
