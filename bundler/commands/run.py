"""`bundle run DIR|MODEL`: run natively on the best execution provider this machine has.

Inputs come from `--input NAME=file.npy|value` (a number fills the input's shape, a JSON list is
taken as it is); the rest are the seeded inputs the build used, so a bundle's run is compared
with the reference outputs bundle.json recorded at build time.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np

from bundler.bundle.edge import EdgeManifest
from bundler.bundle.folder import model_or_bundle, native_model
from bundler.bundle.manifest import Manifest, Task, Variant
from bundler.bundle.modelio import NUMPY_TYPES, TensorSpec, read_model
from bundler.console import Reporter
from bundler.edge.session import EP_PRIORITY, Session
from bundler.errors import BundlerError, ConfigError, ModelError
from bundler.tasks.kinds.registry import kind_of
from bundler.verify.reference import (
    Case,
    NotRunnable,
    Reference,
    check_dims,
    fingerprint_mismatch,
    input_rules,
    make_feeds,
    native_reference,
    resolve_shapes,
)
from bundler.verify.tolerance import tolerance_for

MAX_JSON_VALUES = 10000
PREVIEW = 8
_ORT_TYPES = {"float": "float32", "double": "float64"}


def _specs_of(session: Session) -> list[TensorSpec]:
    specs = []
    for value in session.session.get_inputs():
        element = value.type.removeprefix("tensor(").removesuffix(")")
        shape = None if value.shape is None else tuple(
            d if isinstance(d, int) else (d or "?") for d in value.shape)
        specs.append(TensorSpec(value.name, _ORT_TYPES.get(element, element), shape))
    return specs


def parse_input(text: str, specs: Sequence[TensorSpec]) -> tuple[TensorSpec, np.ndarray]:
    """NAME=file.npy or NAME=VALUE; a 0-d value for an input with dims is filled in later."""
    name, sep, value = text.partition("=")
    by_name = {spec.name: spec for spec in specs}
    if not sep or name not in by_name:
        raise ConfigError(f"--input {text!r}: expected NAME=file.npy or NAME=VALUE with NAME one"
                          f" of {', '.join(by_name)}")
    spec = by_name[name]
    dtype = NUMPY_TYPES.get(spec.type)
    if value.endswith(".npy"):
        if not Path(value).is_file():
            raise ConfigError(f"--input {name}: {value} not found")
        array = np.load(value, allow_pickle=False)
    else:
        try:
            array = np.asarray(json.loads(value))
        except ValueError:
            raise ConfigError(f"--input {name}: {value!r} is neither a .npy file nor a number"
                              " or JSON list") from None
    return spec, array if dtype is None else array.astype(dtype)


def _feeds(model: Path, specs: Sequence[TensorSpec],
           given: Sequence[tuple[TensorSpec, np.ndarray]], dims: dict[str, int],
           ) -> dict[str, np.ndarray]:
    """The given arrays, numbers filled to their input's shape, and seeded inputs for the rest
    (integers as the graph uses them, as the build's check makes them); symbolic dims not set by
    --dim take their size from the arrays given."""
    dims = dict(dims)
    for spec, array in given:
        if array.ndim and spec.shape and array.ndim == len(spec.shape):
            for dim, size in zip(spec.shape, array.shape, strict=True):
                if isinstance(dim, str) and dim != "?":
                    dims.setdefault(dim, size)
    shapes = resolve_shapes(specs, dims)
    feeds = make_feeds([s for s in specs if s.name not in {g.name for g, _ in given}], shapes,
                       rules=input_rules(model, specs))
    for spec, array in given:
        filled = array.ndim == 0 and spec.shape
        feeds[spec.name] = np.full(shapes[spec.name], array) if filled else array
    return feeds


def _reference_check(session: Session, variant: Variant, specs: list[TensorSpec],
                     ) -> dict[str, Any]:
    recorded = variant.reference
    if not recorded:
        return {"compared": False, "detail": "bundle.json has no reference for this variant"}
    try:
        reference = native_reference(session.model, specs, recorded.requested_dims,
                                     recorded.seed, config=variant.config_for("wasm"))
    except NotRunnable as error:
        return {"compared": False, "detail": error.reason}
    ours = Reference(reference.dims, tuple(Case(case.label, case.feeds, session.run(case.feeds))
                                           for case in reference.cases))
    rtol = tolerance_for("fingerprint", variant.kind, session.ep).rtol
    mismatch = fingerprint_mismatch(recorded, ours, rtol)
    return {"compared": True, "matches": mismatch is None, "rtol": rtol,
            "detail": mismatch or f"matches the build's reference (rtol {rtol})"}


def _output_json(value: np.ndarray) -> dict[str, Any]:
    flat = np.asarray(value).ravel()
    entry: dict[str, Any] = {"type": str(flat.dtype), "shape": list(np.shape(value))}
    entry["data"] = flat[:MAX_JSON_VALUES].tolist()
    if flat.size > MAX_JSON_VALUES:
        entry["truncated"] = True
    return entry


def _task_of(source: Path, manifest: Manifest | EdgeManifest | None) -> Task:
    task = manifest.task if isinstance(manifest, Manifest) else None
    if task is None:
        raise ConfigError(f"--image/--audio/--text need a bundle built with --task; {source}"
                          " has no task (see docs/how-to/task-apps.md)")
    return task


def _transcribe(session: Session, source: Path, samples: np.ndarray, rate: int
                ) -> dict[str, Any]:
    """A speech-recognition bundle's transcripts (bundler.text.whisper_bundle): the encoder
    on the session opened, the decoder beside it."""
    from bundler.bundle import manifest as manifest_file
    from bundler.text.whisper_bundle import bundle_sessions, transcripts

    if not source.is_dir():
        raise ConfigError("--audio on a speech-recognition model needs the bundle folder (its"
                          " decoder, tokenizer and config files), not a model file")
    manifest = manifest_file.load(source)
    with contextlib.ExitStack() as stack:
        sessions = bundle_sessions(source, manifest, session.session, stack)
        return {"transcripts": transcripts(source, manifest, sessions, samples, rate)}


def _run_task(session: Session, task: Task, specs: list[TensorSpec], image: Path | None,
              audio: Path | None, top_k: int | None, threshold: float | None, as_json: bool,
              reporter: Reporter, source: Path, texts: Sequence[str] = (),
              pairs: Sequence[str] = ()) -> dict[str, Any]:
    """--image FILE / --audio FILE / --text TEXT: the task pipeline of bundler.tasks (or
    bundler.text.reference, with the bundle's own tokenizer files), printed."""
    from bundler.tasks.audio import read_wav
    from bundler.tasks.image import read_image
    from bundler.tasks.kinds.text_generation import CHECK_STEPS
    from bundler.tasks.kinds.text_generation import NAME as TEXT_GENERATION
    from bundler.tasks.pipeline import run_audio, run_image
    from bundler.text.reference import bundle_tokenizer, run_generation, run_text

    if texts and task.kind == TEXT_GENERATION:  # greedy, as the build's check
        if not source.is_dir():
            raise ConfigError("--text needs the bundle folder (its tokenizer files), not a model")
        result = run_generation(session.session, source, task, texts, CHECK_STEPS)
    elif texts:
        if not source.is_dir():
            raise ConfigError("--text needs the bundle folder (its tokenizer files), not a model")
        with tempfile.TemporaryDirectory(prefix="bundle-text-") as scratch:
            tokenizer = bundle_tokenizer(source, task, Path(scratch))
        if pairs and len(pairs) != len(texts):
            raise ConfigError(f"{len(texts)} --text but {len(pairs)} --pair: give one --pair per"
                              " --text")
        result = run_text(session.run, task, tokenizer, [spec.name for spec in specs], texts,
                          top_k=top_k, pairs=list(pairs) if pairs else None)
    elif image is not None:
        result = run_image(session.run, task, read_image(image), top_k=top_k, threshold=threshold)
    else:
        samples, rate = read_wav(audio)  # type: ignore[arg-type]
        result = (_transcribe(session, source, samples, rate) if kind_of(task.kind).method
                  == "transcribe" else run_audio(session.run, task, specs, samples, rate))
    result = {"ep": session.ep, "task": task.kind, "session_config": session.config or None,
              **result}
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        kind = kind_of(task.kind)
        assert kind.report is not None
        kind.report(reporter, image or audio or source, task, result)
    return result


def run(source: Path, *, eps: Sequence[str] | str = EP_PRIORITY, inputs: Sequence[str] = (),
        dims: dict[str, int] | None = None, variant: str | None = None, as_json: bool = False,
        save: Path | None = None, whole_graph: bool = False, image: Path | None = None,
        audio: Path | None = None, top_k: int | None = None, threshold: float | None = None,
        reporter: Reporter | None = None, texts: Sequence[str] = (),
        session_name: str | None = None, pairs: Sequence[str] = ()) -> dict[str, Any]:
    """`session_name`: a bundle's session to run on its tensors (default: the primary one);
    `pairs`: a second text per text (a text-classification bundle: a cross-encoder's pairs)."""
    reporter = reporter or Reporter()
    model, manifest, entry = model_or_bundle(source, variant, session_name)
    # a model the build split into parts for static hosts, put back together while it runs
    with native_model(source, manifest, model) as opened:
        asked = [given for given in (image, audio, texts or None) if given is not None]
        if asked and session_name is not None:
            raise ConfigError("--session runs one session on its tensors (--input); --image,"
                              " --audio and --text run the whole pipeline: give one or the"
                              " other")
        if pairs and not texts:
            raise ConfigError("--pair gives a second text to each --text: give the --text too")
        task = _task_of(source, manifest) if asked else None
        if len(asked) > 1:
            raise ConfigError("give one of --image, --audio or --text")
        if model.suffix != ".ort":  # one clear line for a file that is no model, not one per EP
            read_model(opened, load_weights=False)
        # opened as the browser opens the variant on WASM (int4 format=qdq folds its weights)
        config = entry.config_for("wasm") if entry is not None else None
        session = Session(opened, eps, whole_graph=whole_graph, config=config)
        specs = list(manifest.session(session_name).inputs) if manifest else _specs_of(session)
        if task is not None:
            return _run_task(session, task, specs, image, audio, top_k, threshold, as_json,
                             reporter, source, texts, pairs)
        check_dims(specs, dims or {})
        given = [parse_input(text, specs) for text in inputs]
        feeds = _feeds(opened, specs, given, dims or {})
        try:
            outputs = session.run(feeds)
        except ModelError as error:
            generated = sorted(set(feeds) - {spec.name for spec, _ in given})
            if not generated:
                raise
            raise ModelError(f"{error} (inputs {', '.join(generated)} were generated: give"
                             " values the model accepts with --input NAME=VALUE or"
                             " NAME=FILE.npy)") from None
        check = (_reference_check(session, entry, specs) if entry is not None and not given
                 else {"compared": False, "detail": "inputs given with --input" if given
                       else "a model file has no recorded reference (give a bundle folder)"})
        result = {"model": str(model), "ep": session.ep, "session_config": session.config or None,
                  "providers_tried": [a.to_json() for a in session.providers_tried],
                  "outputs": {name: _output_json(value) for name, value in outputs.items()},
                  "reference": check}
        if save is not None:
            np.savez(save, **outputs)
        if as_json:
            click.echo(json.dumps(result, indent=2))
        else:
            for attempt in session.skipped:
                reporter.info(f"skipped {attempt}")
            reporter.info(f"Ran on {session.ep} ({session.providers_tried[-1].provider})")
            reporter.table(f"{model.name} outputs", ["output", "type", "shape", "values"], [
                [name, str(value.dtype), list(value.shape),
                 " ".join(f"{v:.5g}" if isinstance(v, float) else str(v)
                          for v in np.asarray(value).ravel()[:PREVIEW].tolist())
                 + (" …" if np.size(value) > PREVIEW else "")]
                for name, value in outputs.items()])
            reporter.info(f"reference: {check['detail']}")
        if check.get("matches") is False:
            raise BundlerError(f"outputs on {session.ep} differ from the build's reference"
                               f" ({check['detail']}, rtol {check['rtol']})")
        return result
