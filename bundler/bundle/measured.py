"""The records of what a measurement ran at, and how auto's candidates were timed: bundle.json's
`workload` (and its guessed dims) and `selection.speed`, with the dims known before a model runs.
Part of bundler.bundle.records (which re-exports them), kept apart for its size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Literal, TypeVar

from bundler.bundle.codec import JSON, Invalid, from_json, to_json

DimsSource = Literal["task-size", "--dim", "sample", "model", "guess"]


@dataclasses.dataclass(frozen=True)
class GuessedDim:
    input: str
    axis: int
    dim: str  # the key --dim takes: the dim's name, or INPUT:AXIS
    value: int

    def to_json(self) -> JSON:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Known:
    """The dims known before the model runs, with where each came from (keys as --dim's)."""

    dims: dict[str, int] = dataclasses.field(default_factory=dict)
    sources: dict[str, DimsSource] = dataclasses.field(default_factory=dict)

    def with_dims(self, dims: Mapping[str, int], source: DimsSource) -> Known:
        """These dims added over the known ones (a stronger source comes later)."""
        return Known({**self.dims, **dims},
                     {**self.sources, **dict.fromkeys(dims, source)})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Workload:
    """bundle.json's `workload` (and what bench and auto's timing ran,
    bundler.verify.workload): each input's shape, each symbolic dim's size (by --dim key) and
    where the sizes came from (each dim's, and the measurement's)."""

    inputs: dict[str, list[int]]
    dims: dict[str, int]
    dims_source: DimsSource
    # absent in bundles built before it was recorded: "model" for each
    dim_sources: dict[str, DimsSource] = dataclasses.field(default_factory=dict)
    guessed: tuple[GuessedDim, ...] = ()

    def to_json(self) -> JSON:
        return to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Workload:
        """A recorded workload; ValueError naming the key when it is wrong."""
        return _read(cls, data, "workload")

    def label(self) -> str:
        return inputs_label(self.inputs)

    def known(self) -> Known:
        """These dims as known ones, for measuring again at them (bench of a built bundle)."""
        return Known(dict(self.dims), {key: self.dim_sources.get(key, "model")
                                       for key in self.dims})

    def warning(self) -> str | None:
        """The one line that says which dims are a guess and how to set them; None if none."""
        if not self.guessed:
            return None
        by_input: dict[str, list[GuessedDim]] = {}
        for guess in self.guessed:
            by_input.setdefault(guess.input, []).append(guess)
        which = "; ".join(
            f"input {name} {shape_text(self.inputs[name])}: "
            + ", ".join(f"{guess.dim}={guess.value} (axis {guess.axis})" for guess in guesses)
            for name, guesses in by_input.items())
        flags = " ".join(f"--dim {key}=VALUE" for key in
                         dict.fromkeys(guess.dim for guess in self.guessed))
        return (f"measured at a guessed size, not the one the model is used at ({which}: the"
                f" smallest size at which it runs natively); give that size with {flags}")


@dataclasses.dataclass(frozen=True)
class SpeedRecord:
    """bundle.json's `selection.speed` (bundler.perf.speed): auto's tolerances, and how the
    candidates were timed (`measured`; the EPs not timed in `not_measured_on`, with why) at which
    workload (the fields of `Workload`, flat: the keys bundle.json has always had), or why they
    were not timed (`not_measured`)."""

    tie_tolerance: float
    balanced_smaller: float
    balanced_slower: float
    measured: str | None = None
    not_measured_on: dict[str, str] | None = None
    not_measured: str | None = None
    inputs: dict[str, list[int]] | None = None
    dims: dict[str, int] | None = None
    dims_source: DimsSource | None = None
    dim_sources: dict[str, DimsSource] | None = None
    guessed: tuple[GuessedDim, ...] | None = None

    def at(self, workload: Workload) -> SpeedRecord:
        """This record with the workload the candidates were timed at."""
        return dataclasses.replace(self, **{field.name: getattr(workload, field.name)
                                            for field in dataclasses.fields(Workload)})

    def workload(self) -> Workload | None:
        """The workload the candidates were timed at (None: not timed)."""
        if self.inputs is None or self.dims is None or self.dims_source is None:
            return None
        return Workload(inputs=self.inputs, dims=self.dims, dims_source=self.dims_source,
                        dim_sources=self.dim_sources or {}, guessed=self.guessed or ())

    @classmethod
    def from_json(cls, data: object) -> SpeedRecord:
        """A recorded one (the speed cache's); ValueError naming the key when it is wrong."""
        return _read(cls, data, "speed")


R = TypeVar("R")


def _read(kind: type[R], data: object, file: str) -> R:
    """A sub-record read outside a manifest; ValueError naming the key when it is wrong."""
    try:
        return from_json(kind, data, "", file)
    except Invalid as error:
        raise ValueError(str(error)) from None


def shape_text(shape: Sequence[int]) -> str:
    return "x".join(map(str, shape)) if len(shape) else "scalar"


def inputs_label(shapes: Mapping[str, Sequence[int]]) -> str:
    """Input dims for a table, e.g. `images 1x3x320x320` (`x scalar` for a 0-d input)."""
    return ", ".join(f"{name} {shape_text(shape)}" for name, shape in shapes.items())
