"""The int4 variant's settings (`--int4 KEY=VALUE`, bundle.toml's `[int4]` table): block size,
symmetric or not, MatMulNBits' accuracy level, and whether the LM head and the token embedding
are quantized. Declared once in bundler/bundle/options.py; read by bundler/variants/int4.py,
which records them in the variant's settings.

Pure Python (options and TOML validation import neither onnx nor onnxruntime).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# MatMulNBits takes a power-of-two block of at least 16 values along K.
BLOCK_SIZES = (16, 32, 64, 128, 256)
# MatMulNBits' accuracy_level: the lowest type its compute may use. 0: unset (the EP's
# default), 1: fp32, 2: fp16, 3: bf16, 4: int8 (activations quantized per block).
ACCURACY_LEVELS = (0, 1, 2, 3, 4)
FORMATS = ("nbits", "qdq", "int8", "per-ep")
# The EP that runs each form of format=per-ep (one variant, one graph per EP, the weights shared).
PER_EP_FORMS = {"wasm": "int8", "webgpu": "qdq"}


@dataclasses.dataclass(frozen=True)
class Int4Options:
    """How the int4 variant quantizes; `given`: the keys set (flags merge over bundle.toml)."""

    block_size: int = 32
    symmetric: bool = True
    accuracy_level: int = 0
    lm_head: bool = True  # the MatMul that makes the logits (a tied embedding's copy too)
    embeddings: bool = False  # the token embedding's Gather (GatherBlockQuantized)
    # "nbits": MatMulNBits; "qdq": DequantizeLinear of int4 blocks (opset 21) into MatMul;
    # "int8": the qdq blocks requantized to int8 at load, into DynamicQuantizeMatMul;
    # "per-ep": int8's graph on WASM and qdq's on WebGPU, reading the same 4-bit weights
    format: str = "nbits"
    given: tuple[str, ...] = ()

    def merged(self, later: Int4Options) -> Int4Options:
        """`later`'s given keys over this one's (flags over bundle.toml)."""
        values = {key: getattr(later, key) for key in later.given}
        return dataclasses.replace(self, **values,
                                   given=tuple(dict.fromkeys((*self.given, *later.given))))

    def __eq__(self, other: object) -> bool:  # what was given does not change what is made
        return isinstance(other, Int4Options) and self.values() == other.values()

    def __hash__(self) -> int:
        return hash(tuple(self.values().items()))

    def values(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name)
                for field in dataclasses.fields(self) if field.name != "given"}

    def __str__(self) -> str:
        return ", ".join(f"{key}={str(value).lower() if isinstance(value, bool) else value}"
                         for key, value in self.values().items())


_KEYS = tuple(Int4Options().values())


# A decoder's int4 where not given (a speech model's decoder's; a text-generation model's, whose
# format goes by its EPs: for_generation): see for_decoder.
DECODER_DEFAULTS = {"embeddings": True, "format": "qdq"}


def for_decoder(options: Int4Options) -> Int4Options:
    """A decoder's int4 (stepped with its past): DECODER_DEFAULTS for the keys not given.
    embeddings=true: its token table, which a tied LM head shares, in 4 bits; left float, it was
    24.6 MB of a GPT-2-small-sized int4's ~85 MB, and 79.7 MB of a Whisper-tiny decoder's at
    Whisper's vocabulary (51,865 x 384). format=qdq: folded into float weights at load on WASM
    (its session_config), it decodes at fp32's speed where MatMulNBits decodes 7-10x slower, for
    the same bytes (docs/benchmarks.md), and gives the tokens of the same graph run natively;
    WebGPU runs it as it is."""
    values = {key: value for key, value in DECODER_DEFAULTS.items() if key not in options.given}
    return dataclasses.replace(options, **values)


def for_generation(options: Int4Options, execution_providers: Sequence[str] = ("webgpu", "wasm"),
                   large: bool = False) -> Int4Options:
    """A text-generation bundle's int4: the format, when not given,
    by the bundle's EPs: per-ep where it runs on WASM and WebGPU, int8 on WASM alone, qdq on
    WebGPU alone or for a `large` model (past 2 GB: int8 and per-ep are not made from one).

    format=int8: qdq's blocks folded into int8 weights, decoded by the int8 variant's kernel
    (faster than fp32 on WASM), which WebGPU lacks. format=per-ep: each EP its best of the two,
    one graph each over the same weights, so that neither pays for the other's form. The other
    keys as for_decoder's."""
    eps = set(execution_providers)
    form = ("qdq" if large or "wasm" not in eps else "int8" if eps == {"wasm"} else "per-ep")
    decoder = for_decoder(options)
    return decoder if "format" in options.given else dataclasses.replace(decoder, format=form)


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"int4 {key}: expected true or false, got {value!r}")


def _integer(key: str, value: Any, choices: tuple[int, ...]) -> int:
    text = str(value).strip()
    number = int(text) if not isinstance(value, bool) and text.isdigit() else None
    if number is None or number not in choices:
        raise ValueError(f"int4 {key}: expected one of {', '.join(map(str, choices))},"
                         f" got {value!r}")
    return number


def parse_int4(value: Any, base: Path | None = None) -> Int4Options:
    """A table { block_size = 64, symmetric = false } or, from repeated --int4 flags, a list of
    KEY=VALUE; ValueError naming the key and what it takes."""
    if isinstance(value, Int4Options):
        return value
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list | tuple):
        pairs = [str(text).split("=", 1) for text in value]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError("expected KEY=VALUE, e.g. block_size=64 or symmetric=false")
        value = {key.strip(): text.strip() for key, text in pairs}
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a table like {{ block_size = 64 }}, got {value!r}")
    unknown = [key for key in value if key not in _KEYS]
    if unknown:
        raise ValueError(f"unknown int4 setting {unknown[0]!r}; expected {', '.join(_KEYS)}")
    checked: dict[str, Any] = {}
    for key, item in value.items():
        if key == "block_size":
            checked[key] = _integer(key, item, BLOCK_SIZES)
        elif key == "accuracy_level":
            checked[key] = _integer(key, item, ACCURACY_LEVELS)
        elif key == "format":
            if item not in FORMATS:
                raise ValueError(f"int4 format: expected one of {', '.join(FORMATS)}, got {item!r}")
            checked[key] = item
        else:
            checked[key] = _boolean(key, item)
    return Int4Options(**checked, given=tuple(checked))
