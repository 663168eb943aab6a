"""Real inputs the user gives the checks: `--sample data.npz` and `--input NAME=VALUE|FILE.npy`.

A sample file holds one array per input name with samples along the first axis (as
--calibration); each sample is one case of the build-time check, `bundle test` and the accuracy
measurement. `--input` sets one input in every case (a number fills the input, an .npy file is
used as it is); the other inputs are generated. A wrong name, type or shape is one ConfigError
naming the input and what the model expects.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from bundler.bundle.modelio import NUMPY_TYPES, TensorSpec, cpu_session
from bundler.errors import ConfigError, first_line
from bundler.verify.reference import (
    Case,
    Feeds,
    Reference,
    implied_dims,
    native_reference,
    pin,
    run_native,
)
from bundler.verify.samples import dtype_problem, fits, load_samples

InputValue = Path | int | float | bool
MAX_SAMPLE_CASES = 4  # of a --sample file, the cases the browser check runs


def parse_input_value(text: str, base: Path) -> InputValue:
    """`VALUE` of `--input NAME=VALUE`: a number or true/false, else the path of an .npy file."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            continue
    path = (base / text).resolve()
    if path.suffix != ".npy" or not path.is_file():
        raise ValueError(f"{text!r} is neither a number nor an existing .npy file")
    return path


@dataclasses.dataclass(frozen=True)
class UserInputs:
    samples: tuple[Feeds, ...] = ()  # from --sample, with the --input values applied
    fixed: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # from --input

    def __bool__(self) -> bool:
        return bool(self.samples or self.fixed)

    @property
    def digest(self) -> str | None:
        """sha256 of the given values: the recorded fingerprint applies to these inputs only."""
        if not self:
            return None
        digest = hashlib.sha256()
        for feeds in (*self.samples, self.fixed):
            for name in sorted(feeds):
                array = np.ascontiguousarray(feeds[name])
                digest.update(f"{name}|{array.dtype}|{array.shape}|".encode())
                digest.update(array.tobytes())
        return digest.hexdigest()


def _input_array(name: str, value: InputValue, spec: TensorSpec) -> np.ndarray:
    where = f"--input {name}"
    if isinstance(value, Path):
        try:
            array = np.load(value, allow_pickle=False)
        except (OSError, ValueError) as error:
            raise ConfigError(f"{where}: cannot read {value} as .npy ({error})") from None
        if not fits(spec, array.shape):
            shape = "unknown rank" if spec.shape is None else list(spec.shape)
            raise ConfigError(f"{where}: {value.name} has shape {list(array.shape)}, the model"
                              f" takes {shape}")
    else:
        array = np.asarray(value)
    if (problem := dtype_problem(spec, array.dtype)) is not None:
        raise ConfigError(f"{where}: {problem}")
    return array.astype(NUMPY_TYPES[spec.type])


def load_user_inputs(sample: Path | None, values: Mapping[str, InputValue],
                     inputs: Sequence[TensorSpec]) -> UserInputs:
    """Read and check `--sample` and `--input` against the model's inputs."""
    specs = {spec.name: spec for spec in inputs}
    unknown = [name for name in values if name not in specs]
    if unknown:
        raise ConfigError(f"--input {unknown[0]}: the model has no input {unknown[0]!r} (its"
                          f" inputs: {', '.join(specs)})")
    fixed = {name: _input_array(name, value, specs[name]) for name, value in values.items()}
    samples = load_samples(sample, inputs, "--sample") if sample else []
    return UserInputs(tuple(pin(feeds, fixed) for feeds in samples), fixed)


def sample_reference(model: Path, inputs: Sequence[TensorSpec], samples: Sequence[Feeds],
                     config: Mapping[str, str] | None = None) -> Reference:
    """Native outputs on the user's samples (the first MAX_SAMPLE_CASES), one case each;
    `config`: the session config entries the model is opened with."""
    runner = cpu_session(model, config=config)
    cases = []
    for index, feeds in enumerate(samples[:MAX_SAMPLE_CASES]):
        try:
            outputs = run_native(runner, feeds)
        except Exception as error:  # noqa: BLE001 - onnxruntime raises several unrelated types
            raise ConfigError(f"--sample: native onnxruntime fails on sample {index}"
                              f" ({first_line(error)})") from None
        cases.append(Case(f"sample {index}" if index else "", feeds, outputs))
    return Reference(dims=dict(sorted(implied_dims(inputs, samples[0]).items())),
                     cases=tuple(cases))


def reference_for(model: Path, inputs: Sequence[TensorSpec], dims: Mapping[str, int],
                  user: UserInputs | None, config: Mapping[str, str] | None = None
                  ) -> Reference:
    """The cases the checks compare on: the user's samples, else generated inputs (with the
    user's --input values); `config`: the variant's native session config (Variant.config_for
    ("wasm")), so that native runs compute what the browser does."""
    if user and user.samples:
        return sample_reference(model, inputs, user.samples, config)
    return native_reference(model, inputs, dims, fixed=user.fixed if user else None,
                            config=config)
