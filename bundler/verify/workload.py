"""The one owner of the sizes a bundle is measured at: `bundle bench`, auto's speed timing and the
accuracy measurement run the model at the dims it is used at.

Each symbolic axis (and each axis a task sets) is sized by the first of:
  task-size  the task: an image task's input is uint8 [1, H, W, 3] at its `size`; an audio
             stream's input holds context_size + chunk_size samples, and its other open dims
             are 1, as the task app feeds them; a text task's inputs are one text of
             TEXT_TOKENS tokens (its max_length when smaller)
  --dim      given to bench or build (`NAME=VALUE` or `INPUT:AXIS=VALUE`)
  sample     the shape of --sample, --calibration or --validation data (or an --input array)
  model      the model's own fixed dims; a symbolic batch (axis 0 of a rank >= 2 input) is 1
  guess      the smallest common size at which native onnxruntime runs the model with outputs
             worth comparing (bundler.verify.reference's search): said in one warning line naming
             the input, the dim, the value and the --dim flag, and recorded as `guessed`
A measurement's `dims_source` is "guess" when any dim was guessed, else the last of task-size,
--dim and sample that sized one, else "model".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import get_args

import numpy as np

from bundler.bundle.manifest import Manifest, Task
from bundler.bundle.measured import (  # the records, re-exported for their readers
    DimsSource,
    GuessedDim,
    Known,
    Workload,
    inputs_label,
    shape_text,
)
from bundler.bundle.modelio import TensorSpec
from bundler.tasks.kinds.registry import kind_of
from bundler.verify.reference import Feeds, Reference, implied_dims
from bundler.verify.user_inputs import UserInputs, reference_for

__all__ = ["DIMS_SOURCES", "DimsSource", "GuessedDim", "Known", "Workload", "axis_key",
           "bundle_known", "dim_key", "inputs_label", "known_dims", "measured",
           "measured_reference", "recorded_known", "shape_text", "task_dims"]

# The tokens of a text the workload of a text task is measured at: a sentence or two.
TEXT_TOKENS = 64
DIMS_SOURCES: tuple[DimsSource, ...] = get_args(DimsSource)
_SIZING: tuple[DimsSource, ...] = ("task-size", "--dim", "sample")  # strongest first


def axis_key(spec: TensorSpec, axis: int) -> str:
    """The `--dim` key of one axis of one input: INPUT:AXIS."""
    return f"{spec.name}:{axis}"


def dim_key(spec: TensorSpec, axis: int) -> str:
    """The `--dim` key that sizes a symbolic axis: its name, or INPUT:AXIS when it has none."""
    dim = (spec.shape or ())[axis]
    return dim if isinstance(dim, str) and dim != "?" else axis_key(spec, axis)


def _text_size(name: str, axis: int, tokens: int) -> int:
    """A text input's open axis: the batch 1, the tokens `tokens`; a decoder's past
    (past_key_values.*, axis 2) zero-length, as generate()'s first step (the prefill) feeds it."""
    if name.startswith("past_key_values."):
        return 0 if axis == 2 else 1
    return tokens if axis == 1 else 1


def task_dims(inputs: Sequence[TensorSpec], task: Task | None) -> dict[str, int]:
    """The axes the task sets (INPUT:AXIS -> size), as its app feeds the model."""
    if task is None:
        return {}
    fed = next((spec for spec in inputs if spec.name == task.input), None)
    if fed is None or not fed.shape:
        return {}
    if kind_of(task.kind).media == "image":
        height, width = task.size or (0, 0)
        return {axis_key(fed, axis): size for axis, size in enumerate((1, height, width, 3))}
    if kind_of(task.kind).media == "text":  # one text of TEXT_TOKENS tokens (or the limit)
        tokens = min(TEXT_TOKENS, task.max_length or TEXT_TOKENS)
        return {axis_key(spec, axis): _text_size(spec.name, axis, tokens) for spec in inputs
                for axis, dim in enumerate(spec.shape or ()) if isinstance(dim, str)}
    dims = {axis_key(spec, axis): 1 for spec in inputs if spec.name != task.sample_rate_input
            for axis, dim in enumerate(spec.shape or ()) if isinstance(dim, str)}
    if kind_of(task.kind).method == "transcribe":  # a speech encoder: 30 s of frames, fixed
        return dims
    dims[axis_key(fed, len(fed.shape) - 1)] = (task.chunk_size or 0) + (task.context_size or 0)
    return dims


def known_dims(inputs: Sequence[TensorSpec], *, task: Task | None = None,
               given: Mapping[str, int] | None = None, sample: Feeds | None = None,
               recorded: Known | None = None) -> Known:
    """The dims to measure at before any is guessed: the task's, then `given` (--dim), then
    the `sample`'s shapes (the user's data), then those `recorded` by the build (bench)."""
    known = recorded or Known()
    if sample:
        known = known.with_dims(implied_dims(inputs, sample), "sample")
    return known.with_dims(given or {}, "--dim").with_dims(task_dims(inputs, task), "task-size")


def measured(inputs: Sequence[TensorSpec], feeds: Feeds, known: Known) -> Workload:
    """The workload `feeds` (what was run) are, with each symbolic or task-set axis's source:
    its known one when the size is the known size, the user's data when it is not, else batch 1
    from the model or a guess."""
    shapes = {spec.name: list(np.shape(feeds[spec.name])) for spec in inputs}
    dims: dict[str, int] = {}
    sources: dict[str, DimsSource] = {}
    used: set[DimsSource] = set()
    guessed: list[GuessedDim] = []
    for spec in inputs:
        for axis, dim in enumerate(spec.shape or ()):
            size = shapes[spec.name][axis]
            keys = (axis_key(spec, axis), dim_key(spec, axis))
            source = next((known.sources[key] for key in keys
                           if key in known.sources and known.dims[key] == size), None)
            if isinstance(dim, str):
                dims.setdefault(dim_key(spec, axis), size)
                if source is None and any(key in known.dims for key in keys):
                    source = "sample"  # the data ran at its own size, not at the one asked for
                if axis == 0 and len(spec.shape or ()) > 1 and size == 1:
                    source = None if source in (None, "guess") else source  # batch 1: as run
                elif source is None:
                    source = "guess"
                sources.setdefault(dim_key(spec, axis), source or "model")
            if source == "guess":
                guessed.append(GuessedDim(spec.name, axis, dim_key(spec, axis), size))
            if source is not None:
                used.add(source)
    overall: DimsSource = ("guess" if guessed else
                           next((s for s in reversed(_SIZING) if s in used), "model"))
    unique = tuple(dict((guess.dim, guess) for guess in guessed).values())
    return Workload(inputs=shapes, dims=dict(sorted(dims.items())), dims_source=overall,
                    dim_sources=dict(sorted(sources.items())), guessed=unique)


def recorded_known(manifest: Manifest) -> Known:
    """What the build measured at, for bench: bundle.json's `workload` record; for a bundle built
    before it, the build check's dims (those given to the build with --dim as such, the others
    from the user's data when it had some, else a guess)."""
    if manifest.workload is not None:
        return manifest.workload.known()
    dims = manifest.verification.dims or {}
    reference = next((v.reference for v in manifest.session().variants if v.reference), None)
    requested = reference.requested_dims if reference else {}
    rest: DimsSource = "sample" if reference and reference.inputs else "guess"
    return Known(dict(dims), {key: "--dim" if key in requested else rest for key in dims})


def bundle_known(manifest: Manifest, given: Mapping[str, int] | None = None) -> Known:
    """The dims a built bundle is measured at (bench, auto's timing): the task's, `given`
    (--dim), then the build's record."""
    return known_dims(manifest.session().inputs, task=manifest.task, given=given,
                      recorded=recorded_known(manifest))


def measured_reference(model: Path, manifest: Manifest, known: Known,
                       user: UserInputs | None = None) -> tuple[Reference, Workload]:
    """The inputs `model` of `manifest` is measured on (the user's samples, else generated at
    the `known` dims, the rest found by bundler.verify.reference's search) and what they are.
    NotRunnable when it runs at no size."""
    reference = reference_for(model, manifest.session().inputs, known.dims, user)
    return reference, measured(manifest.session().inputs, reference.feeds, known)
