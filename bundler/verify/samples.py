"""Sample inputs for calibration and accuracy: from an .npz the user gives, or generated.

An .npz holds one array per input name with samples along the first axis; each sample becomes one
feed dict (keeping a batch axis of 1 when the input has one). `split_samples` divides the inputs
given into a calibration part and a validation part held out from it (`auto` without
--validation).
"""

from __future__ import annotations

import contextlib
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from bundler.bundle.modelio import NUMPY_TYPES, TensorSpec, cpu_session
from bundler.errors import ConfigError
from bundler.verify.reference import (
    Feeds,
    input_rules,
    make_feeds,
    native_reference,
    pin,
    resolve_shapes,
    run_native,
)

GENERATED_SAMPLES = 16
VALIDATION_FRACTION = 0.5  # of the inputs given, the share held out to judge auto's candidates
MIN_SPLIT = 8  # at least this many on each side, or no split at all
SPLIT_SEED = 0  # the same inputs always split the same way (byte-identical builds)


def fits(spec: TensorSpec, shape: tuple[int, ...]) -> bool:
    return spec.shape is None or (
        len(shape) == len(spec.shape)
        and all(isinstance(d, str) or d == n for d, n in zip(spec.shape, shape, strict=True))
    )


def dtype_problem(spec: TensorSpec, dtype: np.dtype) -> str | None:
    """Why values of `dtype` cannot be fed to `spec` (None when they can: integers go to float
    inputs, any width to any width of the same kind), for one error line."""
    wanted = np.dtype(NUMPY_TYPES.get(spec.type, object))
    kinds = {"b": "biu", "i": "iu", "u": "iu", "f": "iuf"}
    if dtype.kind not in kinds.get(wanted.kind, ""):
        return f"input {spec.name!r} takes {spec.type}, got {dtype} values"
    return None


def load_samples(path: Path, inputs: Sequence[TensorSpec], key: str) -> list[Feeds]:
    """Read `path` (given as option `key`) into one feed dict per sample."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise ConfigError(f"{key} {path}: cannot read it as .npz ({error})") from None
    missing = [spec.name for spec in inputs if spec.name not in arrays]
    if missing:
        raise ConfigError(f"{key} {path}: no array for input {missing[0]!r} (it has:"
                          f" {', '.join(sorted(arrays)) or 'nothing'}); save one array per input")
    counts = {arrays[spec.name].shape[0] if arrays[spec.name].ndim else 0 for spec in inputs}
    if len(counts) != 1 or 0 in counts:
        raise ConfigError(f"{key} {path}: every input's array needs the same number of samples"
                          " along its first axis")
    samples: list[Feeds] = [{} for _ in range(counts.pop())]
    for spec in inputs:
        array = arrays[spec.name]
        if (problem := dtype_problem(spec, array.dtype)) is not None:
            raise ConfigError(f"{key} {path}: {problem}")
        if spec.type in NUMPY_TYPES:
            array = array.astype(NUMPY_TYPES[spec.type], copy=False)
        batched = spec.shape is not None and array.ndim == len(spec.shape)
        for index, sample in enumerate(samples):
            sample[spec.name] = array[index:index + 1] if batched else array[index]
        if not fits(spec, samples[0][spec.name].shape):
            shape = "unknown rank" if spec.shape is None else list(spec.shape)
            raise ConfigError(f"{key} {path}: samples of {spec.name!r} have shape"
                              f" {list(samples[0][spec.name].shape)}, the model takes {shape}")
    return samples


def split_samples(samples: Sequence[Feeds]) -> tuple[list[Feeds], list[Feeds]] | None:
    """(calibration, validation): a seeded shuffle of `samples` (so inputs sorted by class split
    evenly) holds out VALIDATION_FRACTION of them, at least MIN_SPLIT on each side, each part in
    the order given; None when there are fewer than 2 * MIN_SPLIT."""
    count = len(samples)
    if count < 2 * MIN_SPLIT:
        return None
    held = min(max(round(count * VALIDATION_FRACTION), MIN_SPLIT), count - MIN_SPLIT)
    order = np.random.default_rng(SPLIT_SEED).permutation(count)
    validation = set(order[:held].tolist())
    return ([samples[i] for i in range(count) if i not in validation],
            [samples[i] for i in range(count) if i in validation])


def generated_samples(
    model: Path, inputs: Sequence[TensorSpec], dims: Mapping[str, int],
    fixed: Mapping[str, np.ndarray] | None = None, count: int = GENERATED_SAMPLES,
) -> list[Feeds]:
    """Seeded inputs the model accepts (integers as its graph uses them, `fixed` ones as given),
    at the sizes where it runs: those of `count` seeds on which native onnxruntime runs it.
    NotRunnable when it runs on none."""
    fixed = fixed or {}
    found = native_reference(model, inputs, dims, fixed=fixed)
    shapes = resolve_shapes(inputs, found.dims)
    rules = input_rules(model, inputs)
    runner = cpu_session(model)
    samples = []
    for seed in range(count):
        feeds = pin(make_feeds(inputs, shapes, seed, rules), fixed)
        with contextlib.suppress(Exception):  # a seed whose values the graph rejects
            run_native(runner, feeds)
            samples.append(feeds)
    return samples or [found.feeds]
