"""The first stages of a build: check the inputs and fetch the runtime before any folder is made
(a mistake fails fast), then copy the runtime into the staging folder and write the model fitted
to it (bundler.model.prepare)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import onnxruntime as ort

from bundler.bundle.layout import RUNTIME_DIR, WORK_DIR
from bundler.bundle.manifest import NativeReference, Runtime, Task
from bundler.bundle.modelio import TensorSpec, input_specs, read_model
from bundler.bundle.options import BuildOptions
from bundler.console import Reporter
from bundler.errors import ConfigError
from bundler.model.analysis import model_warnings
from bundler.model.prepare import CasesFor, check_weights, prepare_model
from bundler.resources import example_model
from bundler.site.pages import write_modules
from bundler.site.runtime import (
    BUILDS,
    PACKAGE,
    copy_runtime,
    locate_runtime,
    needed_files,
    runtime_version_of,
)
from bundler.tasks.build import shipped_inputs, task_hint, with_task_graph
from bundler.tasks.kinds.automatic_speech_recognition import NAME as SPEECH_RECOGNITION
from bundler.tasks.resolve import resolve_task
from bundler.text.build import complete_text_task, text_source
from bundler.text.folder import ExportFolder
from bundler.text.transcripts import check_audio, is_audio
from bundler.text.validation import check_text_task, is_text_file, read_texts
from bundler.verify.browser import chromium_executable, load_settings
from bundler.verify.reference import Feeds, check_dims
from bundler.verify.samples import load_samples
from bundler.verify.user_inputs import UserInputs, load_user_inputs, reference_for

# What inspect warns of that the build itself fits to the runtime (compat), saying so in notes.
FITTED_BY_PREPARE = {"opset", "ir-version"}


@dataclasses.dataclass(frozen=True)
class Checked:
    """The build's inputs, checked: the model, its task and the user's inputs."""

    name: str  # the bundle's (--name, else the model file's stem or the export folder's name)
    source: Path
    is_example: bool
    task: Task | None
    user: UserInputs
    options: BuildOptions  # as given, with the task an export folder implies
    text: ExportFolder | None = None  # the export folder the model came from


@dataclasses.dataclass(frozen=True)
class Fetched:
    """The onnxruntime-web files the bundle ships, found (downloaded or in the cache)."""

    dist: Path
    version: str
    files: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Prepared:
    """The runtime and the browser modules copied into the staging folder, and the model fitted
    to the runtime."""

    runtime: Runtime
    model: Path  # the browser-ready fp32 model, in the staging folder's scratch folder
    notes: tuple[str, ...]  # what was changed to fit the runtime


def check(model: Path | None, options: BuildOptions, reporter: Reporter) -> Checked:
    """The checks that need no work done: they fail before any folder is made."""
    is_example = model is None and options.model is None
    # an export folder (model.onnx, config.json, tokenizer files): its model and task
    source, options, text = text_source(Path(model or options.model or example_model()), options)
    header = read_model(source, load_weights=False)
    for note in text.notes if text else ():
        reporter.info(note)
    task = complete_text_task(resolve_task(options.task, header), text)
    shipped = shipped_inputs(input_specs(header), task)  # an image task's input is uint8 pixels
    user = load_user_inputs(options.sample, options.inputs, shipped)
    _check_inputs(source, input_specs(header), shipped, options)
    if is_text_file(options.validation):  # real texts, for a text bundle's tokenizer
        assert options.validation is not None
        check_text_task(options.validation, task)
        read_texts(options.validation)
    if is_audio(options.validation):  # recordings, for a speech model's transcripts
        if task is None or task.kind != SPEECH_RECOGNITION:
            raise ConfigError(f"--validation {options.validation}: recordings (.wav) measure a"
                              f" {SPEECH_RECOGNITION} bundle; give an .npz of the model's inputs")
        check_audio(options.validation)
    for warning in model_warnings(source):  # the same warnings bundle inspect gives
        # a text model's lengths vary with every text: --fix-dim is no advice for it
        if warning.code not in FITTED_BY_PREPARE and not (
                text is not None and warning.code == "symbolic-dims"):
            reporter.warn(warning.text())
    if task is not None and options.target == "edge":
        raise ConfigError("--task builds a web app (classify/detect/stream); it does not apply to"
                          " --target edge")
    if (hint := task_hint(options.task, header)) is not None:
        reporter.info(hint)
    return Checked(options.name or source.stem, source, is_example, task, user, options, text)


def _check_inputs(source: Path, inputs: tuple[TensorSpec, ...],
                  shipped: tuple[TensorSpec, ...], options: BuildOptions) -> None:
    """Samples are of the `shipped` inputs (an image task's are uint8 pixels)."""
    check_weights(source, options.plan)
    check_dims(inputs, options.dims)
    for key, path in (("--calibration", options.calibration),
                      ("--validation", options.validation)):
        if path is not None and not (key == "--validation" and (is_text_file(path)
                                                                or is_audio(path))):
            load_samples(path, shipped, key)  # texts are read once the task is known
    if options.verify and options.target != "edge":  # a Chromium named but missing is a mistake
        chromium_executable(load_settings())


def fetch(options: BuildOptions, reporter: Reporter) -> Fetched:
    files = needed_files(options.execution_providers)
    with reporter.step(f"Fetching {PACKAGE} {options.runtime_version}"):
        dist = locate_runtime(options.runtime_dir, options.runtime_version, files)
    return Fetched(dist, runtime_version_of(dist) or options.runtime_version, tuple(files))


def prepare(checked: Checked, fetched: Fetched, staging: Path, options: BuildOptions,
            reporter: Reporter) -> Prepared:
    """Copy the runtime and the browser modules into `staging` and write the model fitted to
    the runtime (checked on the user's inputs, or generated ones, unless --no-verify)."""
    work = staging / WORK_DIR
    shipped = copy_runtime(fetched.dist, staging / RUNTIME_DIR, list(fetched.files))
    write_modules(staging, checked.name, fetched.version)
    runtime = Runtime(
        package=PACKAGE,
        version=fetched.version,
        dir=RUNTIME_DIR,
        builds={ep: BUILDS[ep].shipped(RUNTIME_DIR, shipped)
                for ep in options.execution_providers},
        native_reference=NativeReference("onnxruntime", ort.__version__),
    )
    with reporter.step(f"Checking {checked.source}"):
        model = work / "source.onnx"
        notes = prepare_model(with_task_graph(checked.source, checked.task, work), model,
                              reporter, fetched.version,
                              cases_for(options, checked.user) if options.verify else None)
    for note in notes:
        reporter.info(note)
    return Prepared(runtime, model, tuple(notes))


def cases_for(options: BuildOptions, user: UserInputs) -> CasesFor:
    """The inputs a model file is checked on: the user's, else generated ones it accepts."""

    def cases(model: Path) -> list[Feeds]:
        inputs = input_specs(read_model(model, load_weights=False))
        return [case.feeds for case in reference_for(model, inputs, options.dims, user).cases]

    return cases
