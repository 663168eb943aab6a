"""Seeded inputs and native onnxruntime outputs: the reference the browser is compared with.

Symbolic dims come from the user (`NAME=VALUE` or `INPUT:AXIS=VALUE`), else 1. When a model does
not run at those sizes (a detector with symbolic height and width fails at 1x1), `runnable_feeds`
tries common sizes for the dims the user left open before giving up with the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort

from bundler.inspect import TensorSpec

NUMPY_TYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "float64": np.float64,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "bool": np.bool_,
}
# Sizes tried, in order, for symbolic dims other than batch-like ones when 1 does not run.
COMMON_SIZES = (2, 4, 8, 16, 32, 64, 128, 224, 256, 320, 416, 512, 640)
INTEGER_RANGE = (0, 8)  # small, so ids and indices stay valid for most embeddings and gathers
DEFAULT_SEED = 0

Feeds = dict[str, np.ndarray]


class NotRunnable(Exception):
    """Native onnxruntime runs the model at none of the sizes tried."""

    def __init__(self, reason: str, open_dims: Sequence[str]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.open_dims = tuple(open_dims)

    @property
    def hint(self) -> str:
        if self.open_dims:
            return " ".join(f"--dim {name}=VALUE" for name in self.open_dims)
        return "--dim NAME=VALUE for the model's symbolic dims"


def _dim_key(spec: TensorSpec, axis: int) -> str:
    return f"{spec.name}:{axis}"


def open_dims(inputs: Sequence[TensorSpec], dims: Mapping[str, int]) -> list[str]:
    """Symbolic dims the user did not fix, as the key `--dim` takes for each."""
    keys: list[str] = []
    for spec in inputs:
        for axis, dim in enumerate(spec.shape or ()):
            if isinstance(dim, int):
                continue
            key = dim if dim != "?" else _dim_key(spec, axis)
            if key not in dims and _dim_key(spec, axis) not in dims and key not in keys:
                keys.append(key)
    return keys


def resolve_shapes(
    inputs: Sequence[TensorSpec], dims: Mapping[str, int], default: int = 1
) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for spec in inputs:
        shape = []
        for axis, dim in enumerate(spec.shape or ()):
            if isinstance(dim, int):
                shape.append(dim)
            else:
                shape.append(dims.get(_dim_key(spec, axis), dims.get(dim, default)))
        shapes[spec.name] = tuple(shape)
    return shapes


def make_feeds(
    inputs: Sequence[TensorSpec], shapes: Mapping[str, tuple[int, ...]], seed: int = DEFAULT_SEED
) -> Feeds:
    """Deterministic inputs: floats uniform in [0, 1), integers in INTEGER_RANGE, 0-d scalars 1."""
    rng = np.random.default_rng(seed)
    feeds: Feeds = {}
    for spec in inputs:
        if spec.type not in NUMPY_TYPES:
            raise NotRunnable(f"cannot generate input {spec.name!r} of type {spec.type}", [])
        dtype = NUMPY_TYPES[spec.type]
        shape = shapes[spec.name]
        if spec.type == "bool":
            value = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif not shape and np.issubdtype(dtype, np.integer):
            value = np.array(1, dtype=dtype)
        elif np.issubdtype(dtype, np.integer):
            value = rng.integers(*INTEGER_RANGE, size=shape).astype(dtype)
        else:
            value = rng.random(size=shape, dtype=np.float64).astype(dtype)
        feeds[spec.name] = value
    return feeds


def session(model: Path, threads: int = 0) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


def run_native(model: Path | ort.InferenceSession, feeds: Feeds) -> Feeds:
    runner = model if isinstance(model, ort.InferenceSession) else session(model)
    names = [output.name for output in runner.get_outputs()]
    return dict(zip(names, runner.run(names, feeds), strict=True))


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return (text.splitlines() or [type(error).__name__])[0][:300]


@dataclasses.dataclass(frozen=True)
class Reference:
    dims: dict[str, int]
    feeds: Feeds
    outputs: Feeds


def runnable_feeds(
    model: Path,
    inputs: Sequence[TensorSpec],
    dims: Mapping[str, int],
    seed: int = DEFAULT_SEED,
) -> Reference:
    """Inputs the model accepts and native outputs for them; NotRunnable when no size works."""
    runner = session(model)
    unfixed = open_dims(inputs, dims)
    batch_like = {
        spec.shape[0] if spec.shape[0] != "?" else _dim_key(spec, 0)
        for spec in inputs if spec.shape and isinstance(spec.shape[0], str)
    }
    tries = [dict.fromkeys(unfixed, 1)]
    if any(key not in batch_like for key in unfixed):
        # Batch 1 with the other dims at a common size; then every dim at that size, for models
        # whose unnamed dims must agree with the batch (a state tensor [2, batch, 128]).
        tries += [{key: 1 if key in batch_like else size for key in unfixed}
                  for size in COMMON_SIZES]
        tries += [dict.fromkeys(unfixed, size) for size in COMMON_SIZES]
    first_error: Exception | None = None
    for guess in tries:
        chosen = {**guess, **dims}
        feeds = make_feeds(inputs, resolve_shapes(inputs, chosen), seed)
        try:
            outputs = run_native(runner, feeds)
        except Exception as error:  # noqa: BLE001 - onnxruntime raises several unrelated types
            first_error = first_error or error
            continue
        return Reference(dims={key: chosen[key] for key in sorted(chosen)}, feeds=feeds,
                         outputs=outputs)
    assert first_error is not None
    raise NotRunnable(f"native onnxruntime fails on generated inputs: {_first_line(first_error)}",
                      unfixed)


FINGERPRINT_SAMPLES = 32


def fingerprint(reference: Reference, seed: int = DEFAULT_SEED) -> dict:
    """A compact record of the native outputs (evenly spaced samples and sums), kept in
    bundle.json so `bundle test` notices a model file whose weights changed after the build."""
    outputs = {}
    for name, value in reference.outputs.items():
        flat = np.asarray(value, dtype=np.float64).ravel()
        picks = np.linspace(0, flat.size - 1, min(FINGERPRINT_SAMPLES, flat.size)).astype(int)
        outputs[name] = {
            "dims": list(np.shape(value)),
            "sample": [float(f"{v:.9g}") for v in flat[picks]],
            "sum": float(f"{flat.sum():.9g}"),
            "abs_sum": float(f"{np.abs(flat).sum():.9g}"),
        }
    return {"seed": seed, "dims": reference.dims, "outputs": outputs}


def fingerprint_mismatch(
    recorded: Mapping, outputs: Feeds, atol: float = 1e-4, rtol: float = 1e-3
) -> str | None:
    """Which output no longer matches the recorded fingerprint, or None."""
    current = fingerprint(Reference(recorded["dims"], {}, outputs))["outputs"]
    for name, expected in recorded["outputs"].items():
        got = current.get(name)
        if got is None or got["dims"] != expected["dims"]:
            return f"output {name!r} has shape {got and got['dims']}, recorded {expected['dims']}"
        close = np.allclose(got["sample"], expected["sample"], atol=atol, rtol=rtol) and abs(
            got["sum"] - expected["sum"]
        ) <= atol * max(1, len(expected["sample"])) + rtol * expected["abs_sum"]
        if not close:
            return f"output {name!r}"
    return None
