"""Seeded inputs and native onnxruntime outputs: the reference the browser is compared with.

Symbolic dims come from the user (`NAME=VALUE` or `INPUT:AXIS=VALUE`), else 1. When a model does
not run at those sizes (a detector with symbolic height and width fails at 1x1), `native_reference`
tries common sizes for the dims the user left open before giving up with the reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from bundler.bundle.modelio import NUMPY_TYPES, TensorSpec, cpu_session, held_values
from bundler.bundle.records import Fingerprint, OutputFingerprint
from bundler.errors import ConfigError, first_line
from bundler.model.dim_expressions import expression_size, implied_by
from bundler.model.input_values import Rule, derive_rules
from bundler.verify.tolerance import tolerance_for

# Sizes tried, in order, for symbolic dims other than batch-like ones when 1 does not run.
COMMON_SIZES = (2, 4, 8, 16, 32, 64, 128, 224, 256, 320, 416, 512, 640)
# Guessed sizes whose generated inputs would take more are passed over: all dims at 640 made a
# GPT-2's past key/values [640, 8, 640, 64] x 8, and its attention took 15 GB until the OOM kill.
MAX_TRY_BYTES = 256 * 2**20
INTEGER_RANGE = (0, 8)  # small, so ids and indices stay valid for most embeddings and gathers
DEFAULT_SEED = 0

Feeds = dict[str, np.ndarray]


class NotRunnable(Exception):
    """Native onnxruntime runs the model at none of the sizes tried."""

    def __init__(self, reason: str, open_dims: Sequence[str],
                 value_inputs: Sequence[str] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.open_dims = tuple(open_dims)
        self.value_inputs = tuple(value_inputs)  # integer inputs whose values were generated

    @property
    def hint(self) -> str:
        flags = [f"--dim {name}=VALUE" for name in self.open_dims]
        flags += [f"--input {name}=VALUE|FILE.npy" for name in self.value_inputs]
        if self.value_inputs:
            flags.append("or --sample data.npz")
        return " ".join(flags) or "--dim NAME=VALUE for the model's symbolic dims"


def _dim_key(spec: TensorSpec, axis: int) -> str:
    return f"{spec.name}:{axis}"


def _dim_names(inputs: Sequence[TensorSpec]) -> set[str]:
    return {dim for spec in inputs for dim in spec.shape or () if isinstance(dim, str)}


def open_dims(inputs: Sequence[TensorSpec], dims: Mapping[str, int]) -> list[str]:
    """Symbolic dims the user did not fix, as the key `--dim` takes for each; a dim that is
    arithmetic on others (`past_sequence_length + sequence_length`) follows from them."""
    keys: list[str] = []
    names = _dim_names(inputs)
    for spec in inputs:
        for axis, dim in enumerate(spec.shape or ()):
            if isinstance(dim, int) or implied_by(dim, names):
                continue
            key = dim if dim != "?" else _dim_key(spec, axis)
            if key not in dims and _dim_key(spec, axis) not in dims and key not in keys:
                keys.append(key)
    return keys


def check_dims(inputs: Sequence[TensorSpec], dims: Mapping[str, int]) -> None:
    """ConfigError for a --dim key that sizes no symbolic dim of `inputs` (a misspelt name)."""
    known: set[str] = set()
    for spec in inputs:
        if spec.shape is None:  # unknown rank: any axis of it may be given
            known.update(key for key in dims if key.rsplit(":", 1)[0] == spec.name)
        for axis, dim in enumerate(spec.shape or ()):
            if isinstance(dim, str):
                known.update({_dim_key(spec, axis), dim} - {"?"})
    unknown = [key for key in dims if key not in known]
    if unknown:
        raise ConfigError(f"--dim {unknown[0]!r}: the model has no such symbolic dim (it has:"
                          f" {', '.join(sorted(known)) or 'none, every dim is fixed'})")


def resolve_shapes(
    inputs: Sequence[TensorSpec], dims: Mapping[str, int], default: int = 1
) -> dict[str, tuple[int, ...]]:
    named = {name: dims.get(name, default) for name in _dim_names(inputs)}
    shapes = {}
    for spec in inputs:
        shape = []
        for axis, dim in enumerate(spec.shape or ()):
            if isinstance(dim, int):
                shape.append(dim)
            elif (given := dims.get(_dim_key(spec, axis), dims.get(dim))) is not None:
                shape.append(given)
            else:
                implied = expression_size(dim, named)
                shape.append(default if implied is None else implied)
        shapes[spec.name] = tuple(shape)
    return shapes


def _sizes(inputs: Sequence[TensorSpec], shapes: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
    """Each symbolic dim (by name, and as INPUT:AXIS) with the size the shapes give it."""
    sizes: dict[str, int] = {}
    for spec in inputs:
        for axis, (dim, size) in enumerate(zip(spec.shape or (), shapes[spec.name], strict=False)):
            sizes[_dim_key(spec, axis)] = size
            if isinstance(dim, str) and dim != "?":
                sizes.setdefault(dim, size)
    return sizes


def make_feeds(
    inputs: Sequence[TensorSpec], shapes: Mapping[str, tuple[int, ...]], seed: int = DEFAULT_SEED,
    rules: Mapping[str, Rule] | None = None,
) -> Feeds:
    """Deterministic inputs: floats uniform in [0, 1), integers as `rules` (from how the graph
    uses them, see input_values) say, else in INTEGER_RANGE (0-d scalars 1)."""
    rng = np.random.default_rng(seed)
    sizes = _sizes(inputs, shapes)
    feeds: Feeds = {}
    for spec in inputs:
        if spec.type not in NUMPY_TYPES:
            raise NotRunnable(f"cannot generate input {spec.name!r} of type {spec.type}", [])
        dtype = NUMPY_TYPES[spec.type]
        shape = shapes[spec.name]
        if rules and spec.name in rules:
            value = rules[spec.name].values(shape, dtype, rng, sizes)
        elif spec.type == "bool":
            value = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif not shape and np.issubdtype(dtype, np.integer):
            value = np.array(1, dtype=dtype)
        elif np.issubdtype(dtype, np.integer):
            value = rng.integers(*INTEGER_RANGE, size=shape).astype(dtype)
        else:
            value = rng.random(size=shape, dtype=np.float64).astype(dtype)
        feeds[spec.name] = value
    return feeds


def run_native(model: Path | ort.InferenceSession, feeds: Feeds) -> Feeds:
    runner = model if isinstance(model, ort.InferenceSession) else cpu_session(model)
    names = [output.name for output in runner.get_outputs()]
    return dict(zip(names, runner.run(names, feeds), strict=True))


@dataclasses.dataclass(frozen=True)
class Case:
    """One set of inputs and the native outputs for it. `label` is "" for the seeded inputs and
    e.g. "sr=16000" for a case that sets an input to a value an If node tests for."""

    label: str
    feeds: Feeds
    outputs: Feeds


@dataclasses.dataclass(frozen=True)
class Reference:
    dims: dict[str, int]
    cases: tuple[Case, ...]

    @property
    def feeds(self) -> Feeds:
        return self.cases[0].feeds


_PASS_THROUGH = {"Cast", "Identity", "Squeeze", "Unsqueeze", "Reshape", "Not", "Flatten"}
_COMPARISONS = {"Equal": (0,), "Greater": (0, 1), "Less": (0, -1), "GreaterOrEqual": (0, -1),
                "LessOrEqual": (0, 1)}
MAX_STEERING_CASES = 4


def steering_values(model: Path, input_names: Sequence[str]) -> list[tuple[str, object]]:
    """(input, value) pairs that take If nodes down their other branch: an If whose condition
    is a graph input compared with a constant (a sample-rate switch, say) is checked on both
    sides, not only on the side the seeded inputs happen to reach. (Not read from .ort files.)"""
    if model.suffix == ".ort":
        return []
    graph = onnx.load(str(model), load_external_data=False).graph
    producers = {output: node for node in graph.node for output in node.output}
    held = ((t.name, held_values(t)) for t in graph.initializer if not t.dims)
    constants = {name: values for name, values in held if values is not None}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].HasField("t"):
            value = held_values(node.attribute[0].t)
            if value is not None and value.size == 1:
                constants[node.output[0]] = value.reshape(())

    def source(name: str) -> str:
        while name in producers and producers[name].op_type in _PASS_THROUGH:
            name = producers[name].input[0]
        return name

    found: list[tuple[str, object]] = []
    for node in graph.node:
        if node.op_type != "If":
            continue
        condition = source(node.input[0])
        if condition in input_names:
            found += [(condition, True), (condition, False)]
            continue
        comparison = producers.get(condition)
        if comparison is None or comparison.op_type not in _COMPARISONS:
            continue
        left, right = (source(name) for name in comparison.input[:2])
        for variable, constant in ((left, right), (right, left)):
            if variable in input_names and constant in constants:
                value = constants[constant].item()
                found += [(variable, value + offset) for offset in _COMPARISONS[comparison.op_type]]
    return list(dict.fromkeys(found))[:MAX_STEERING_CASES]


def _informative(outputs: Feeds) -> bool:
    """False when every float output is constant (all zeros, say): nothing to compare on."""
    arrays = [np.asarray(v) for v in outputs.values()]
    floats = [a for a in arrays if np.issubdtype(a.dtype, np.floating) and a.size > 1]
    return not floats or any(np.ptp(a) > 0 for a in floats)


def _size_tries(inputs: Sequence[TensorSpec], dims: Mapping[str, int]) -> list[dict[str, int]]:
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
    return [{**guess, **dims} for guess in tries]


def pin(feeds: Feeds, values: Mapping[str, object]) -> Feeds:
    """`feeds` with inputs set to `values`: an array as it is, a scalar filling the input."""
    pinned = dict(feeds)
    for name, value in values.items():
        array = np.asarray(value)
        pinned[name] = (array.astype(feeds[name].dtype) if array.ndim
                        else np.full_like(feeds[name], array.item()))
    return pinned


def _input_bytes(inputs: Sequence[TensorSpec], shapes: Mapping[str, tuple[int, ...]]) -> int:
    return sum(int(np.prod(shapes[spec.name])) * np.dtype(NUMPY_TYPES.get(spec.type, np.float64))
               .itemsize for spec in inputs)


def _search(runner: ort.InferenceSession, inputs: Sequence[TensorSpec],
            tries: Sequence[dict[str, int]], seed: int, rules: Mapping[str, Rule],
            label: str = "", values: Mapping[str, object] | None = None,
            ) -> tuple[dict[str, int], Case]:
    """The first size at which the model runs with outputs worth comparing (else the first at
    which it runs at all); `values` pins inputs to a value."""
    first_error: Exception | None = None
    runnable = None
    for index, chosen in enumerate(tries):
        shapes = resolve_shapes(inputs, chosen)
        if index and _input_bytes(inputs, shapes) > MAX_TRY_BYTES:  # a guess, not the user's
            continue
        feeds = pin(make_feeds(inputs, shapes, seed, rules), values or {})
        try:
            outputs = run_native(runner, feeds)
        except Exception as error:  # noqa: BLE001 - onnxruntime raises several unrelated types
            first_error = first_error or error
            continue
        runnable = runnable or (chosen, Case(label, feeds, outputs))
        if _informative(outputs):
            return chosen, Case(label, feeds, outputs)
    if runnable is None:
        assert first_error is not None
        raise NotRunnable(
            f"native onnxruntime fails on generated inputs: {first_line(first_error)}", [])
    return runnable


def input_rules(model: Path, inputs: Sequence[TensorSpec]) -> dict[str, Rule]:
    """How the graph's inputs must be generated where their use says (not read from .ort files)."""
    if model.suffix == ".ort":
        return {}
    return derive_rules(onnx.load(str(model), load_external_data=False), inputs)


def implied_dims(inputs: Sequence[TensorSpec], arrays: Mapping[str, np.ndarray]) -> dict[str, int]:
    """The symbolic dims that given input arrays fix (by name, or INPUT:AXIS when unnamed)."""
    dims: dict[str, int] = {}
    for spec in inputs:
        array = arrays.get(spec.name)
        if array is None or np.ndim(array) == 0 or spec.shape is None:
            continue
        for axis, (dim, size) in enumerate(zip(spec.shape, np.shape(array), strict=False)):
            if isinstance(dim, str):
                dims[dim if dim != "?" else _dim_key(spec, axis)] = size
    return dims


def native_reference(
    model: Path,
    inputs: Sequence[TensorSpec],
    dims: Mapping[str, int],
    seed: int = DEFAULT_SEED,
    fixed: Mapping[str, np.ndarray] | None = None,
    config: Mapping[str, str] | None = None,
) -> Reference:
    """Inputs the model accepts and native outputs for them; NotRunnable when no size works.

    Integer inputs get values the graph accepts (see input_values); `fixed` inputs (the user's
    --input) are used as given. Sizes whose outputs are all constant (a detector's empty map at
    1x1) are passed over when a larger size gives outputs worth comparing. Each If branch that a
    graph input steers gets a case of its own, at the first size where that branch runs.
    `config`: the variant's session config entries, which the model is opened with (as
    bundle.mjs opens it on WASM)."""
    fixed = fixed or {}
    runner = cpu_session(model, config=config)
    rules = input_rules(model, inputs)
    dims = {**implied_dims(inputs, fixed), **dims}
    tries = _size_tries(inputs, dims)
    try:
        chosen, base = _search(runner, inputs, tries, seed, rules, values=fixed)
    except NotRunnable as error:
        integers = [spec.name for spec in inputs
                    if spec.type.startswith(("int", "uint")) and spec.name not in fixed]
        raise NotRunnable(error.reason, open_dims(inputs, dims), integers) from None
    cases = [base]
    for name, value in steering_values(model, [spec.name for spec in inputs]):
        if name in fixed or np.array_equal(np.full_like(base.feeds[name], value),
                                           base.feeds[name]):
            continue
        with contextlib.suppress(NotRunnable):  # that branch runs at none of the sizes
            cases.append(_search(runner, inputs, tries, seed, rules, f"{name}={value}",
                                 {**fixed, name: value})[1])
    return Reference(dims={key: chosen[key] for key in sorted(chosen)}, cases=tuple(cases))


FINGERPRINT_SAMPLES = 32


def fingerprint(reference: Reference, requested: Mapping[str, int] | None = None,
                seed: int = DEFAULT_SEED, inputs: str | None = None) -> Fingerprint:
    """A compact record of the native outputs (evenly spaced samples and sums), kept in
    bundle.json so `bundle test` notices a model file whose weights changed after the build.
    `inputs` is the digest of the user's inputs it was computed on (None: generated ones)."""
    outputs = {}
    for case in reference.cases:
        for name, value in case.outputs.items():
            flat = np.asarray(value, dtype=np.float64).ravel()
            picks = np.linspace(0, flat.size - 1, min(FINGERPRINT_SAMPLES, flat.size)).astype(int)
            finite = flat[np.isfinite(flat)]
            # JSON has no NaN or Infinity (browsers refuse them): non-finite samples are null,
            # sums are over the finite values, and the non-finite ones are counted
            outputs[f"{case.label}/{name}" if case.label else name] = OutputFingerprint(
                dims=list(np.shape(value)),
                sample=[float(f"{v:.9g}") if np.isfinite(v) else None for v in flat[picks]],
                sum=float(f"{finite.sum():.9g}"),
                abs_sum=float(f"{np.abs(finite).sum():.9g}"),
                nonfinite=int(flat.size - finite.size),
            )
    return Fingerprint(seed=seed, requested_dims=dict(requested or {}), dims=reference.dims,
                       outputs=outputs, inputs=inputs or None)


def fingerprint_mismatch(recorded: Fingerprint, reference: Reference,
                         rtol: float | None = None) -> str | None:
    """Which output no longer matches the recorded fingerprint, or None.

    Native onnxruntime on the same file agrees with itself to float rounding (across CPUs too),
    so the bound is tight: the fingerprint's exact `rtol` by default (bundler.verify.tolerance), and
    absolute 1e-7 of the output's largest value, which still sees a changed weight behind
    saturated probabilities. Quantized variants and accelerators pass a looser `rtol`."""
    if rtol is None:
        rtol = tolerance_for("fingerprint").rtol
    current = fingerprint(reference).outputs
    for name, expected in recorded.outputs.items():
        got = current.get(name)
        if got is None or got.dims != expected.dims:
            return f"output {name!r} has shape {got and got.dims}, recorded {expected.dims}"
        wanted = np.array(expected.sample, dtype=np.float64)  # null -> nan
        sample = np.array(got.sample, dtype=np.float64)
        scale = max(np.nan_to_num(np.abs(wanted)).max(initial=0.0), 1e-30)
        atol = max(1e-7, rtol / 10) * scale
        close = (np.allclose(sample, wanted, atol=atol, rtol=rtol, equal_nan=True)
                 and got.nonfinite == expected.nonfinite
                 and abs(got.sum - expected.sum)
                 <= rtol * expected.abs_sum + atol * len(expected.sample))
        if not close:
            return f"output {name!r}"
    return None
