"""Which variants each session of a bundle gets: `--session-quantize SESSION=KIND` (bundle.toml
`[session_quantize]`) gives one session its own `--quantize` choice (a kind, or auto), every other
session follows `--quantize`; `--variants` adds its kinds to every session.

A speech-recognition bundle's `encoder` is sensitive to quantization (transformers.js ships an
fp32 encoder beside a quantized decoder), so unless told otherwise it keeps `fp32` as its
default: `--quantize int8` quantizes the decoder only, `--session-quantize encoder=int8` (or
`encoder=auto`) the encoder too.

Pure Python (no onnx or onnxruntime), so the options code uses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bundler.errors import ConfigError
from bundler.variants.kinds import QUANTIZE_CHOICES
from bundler.variants.plan import VariantPlan, variants_to_make

# A task kind's sessions that keep fp32 unless --session-quantize names them.
KEPT_FP32 = {"automatic-speech-recognition": ("encoder",)}


def parse_session_quantize(value: Any, base: object = None) -> dict[str, str]:
    """SESSION=KIND: from flags ["decoder=int8"], a comma list "encoder=fp32,decoder=int8" or a
    table { decoder = "int8" }; KIND is a --quantize choice."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple):
        pairs = [str(text).split("=", 1) for text in value]
        if any(len(pair) != 2 or not pair[0].strip() for pair in pairs):
            raise ValueError("expected SESSION=KIND, e.g. decoder=int8")
        value = {name.strip(): kind.strip() for name, kind in pairs}
    if not isinstance(value, Mapping):
        raise ValueError(f'expected a table like {{ decoder = "int8" }}, got {value!r}')
    for name, kind in value.items():
        if kind not in QUANTIZE_CHOICES:
            raise ValueError(f"session {name!r}: expected one of {', '.join(QUANTIZE_CHOICES)},"
                             f" got {kind!r}")
    return {str(name): str(kind) for name, kind in value.items()}


def check_sessions(given: Mapping[str, str], sessions: Sequence[str]) -> None:
    """A ConfigError naming the sessions there are when `given` names another."""
    unknown = [name for name in given if name not in sessions]
    if unknown:
        raise ConfigError(f"--session-quantize: this bundle has no session {unknown[0]!r} (it"
                          f" has: {', '.join(sessions)})")


def session_plan(name: str, quantize: str | None, variants: Sequence[str],
                 default_variant: str | Mapping[str, str] | None,
                 session_quantize: Mapping[str, str], task_kind: str | None) -> VariantPlan:
    """The variants session `name` gets. A session named by --session-quantize (or kept fp32 by
    its task kind) takes that kind as its --quantize and default; the others follow --quantize
    and default_variant."""
    choice = session_quantize.get(name)
    if choice is None and name in KEPT_FP32.get(task_kind or "", ()):
        choice = "fp32"
    if choice is None:
        return variants_to_make(quantize, variants, default_variant)
    return variants_to_make(choice, variants, None)
