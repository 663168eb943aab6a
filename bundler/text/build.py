"""What `bundle build` does for an export folder (bundler.text.folder): the source model and the
task read from it before anything else, the text task's record completed from config.json, and
its text files shipped in the bundle, and the build's check of its answers."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from bundler.bundle.manifest import Manifest
from bundler.bundle.modelio import read_model
from bundler.bundle.options import BuildOptions
from bundler.bundle.records import Task
from bundler.console import Reporter
from bundler.errors import ConfigError
from bundler.tasks.kinds.feature_extraction import SENTENCE_EMBEDDING
from bundler.tasks.kinds.registry import GENERIC, kind_of
from bundler.tasks.spec import TaskSpec
from bundler.text.folder import (
    FEATURE_EXTRACTION,
    MODEL_FILES,
    REQUIRED_FILES,
    SPEECH_RECOGNITION,
    TEXT_CLASSIFICATION,
    TEXT_GENERATION,
    TOKEN_CLASSIFICATION,
    ExportFolder,
    SentenceModules,
    max_length,
    read_folder,
    sentence_modules,
    ship_text_files,
)
from bundler.text.web import ship_generation_modules, ship_speech_modules
from bundler.text.whisper_folder import complete_speech_files


def text_source(path: Path, options: BuildOptions
                ) -> tuple[Path, BuildOptions, ExportFolder | None]:
    """(the model file, the options with the folder's task, the folder read) for a folder;
    (path, options, None) for a model file."""
    if not path.is_dir():
        return path, options, None
    folder = read_folder(path)
    spec = options.task
    outputs = [value.name for value in read_model(folder.model, load_weights=False).graph.output]
    if "kind" not in spec.given:
        inferred = folder.inferred_task(outputs)
        if inferred is None:
            architectures = ", ".join(folder.config.get("architectures") or []) or "none"
            raise ConfigError(f"{path}: the task is not clear from config.json (architectures:"
                              f" {architectures}) and the model's outputs ({', '.join(outputs)});"
                              " give --task feature-extraction, text-classification,"
                              " token-classification, text-generation or"
                              " automatic-speech-recognition")
        spec = TaskSpec(kind=inferred[0], given=("kind",)).merged(spec)
    if spec.kind == FEATURE_EXTRACTION and (modules := sentence_modules(path)) is not None:
        spec = _sentence_defaults(modules, spec, outputs)
    if spec.kind == SPEECH_RECOGNITION and folder.sessions:
        files, notes = complete_speech_files(folder.files, folder.config)
        folder = dataclasses.replace(folder, files=files, notes=tuple(notes))
    labelled = spec.kind in (TEXT_CLASSIFICATION, TOKEN_CLASSIFICATION)
    if labelled and "labels" not in spec.given and folder.labels:
        spec = spec.merged(TaskSpec(labels=tuple(folder.labels), given=("labels",)))
    return folder.model, dataclasses.replace(options, task=spec,
                                             name=options.name or path.name), folder


def _sentence_defaults(modules: SentenceModules, spec: TaskSpec, outputs: list[str]) -> TaskSpec:
    """`spec` with feature-extraction's settings as SentenceTransformer.encode() has them, from
    the folder's modules.json, where not given: normalize, and the pooling where the build pools
    the token vectors (a model with the sentence_embedding output pools in its graph)."""
    settings: dict[str, Any] = {"normalize": modules.normalize}
    if "pooling" not in spec.given and SENTENCE_EMBEDDING not in outputs:
        if modules.unapplied:
            raise ConfigError(f"{modules.path}: {', '.join(modules.unapplied)} comes after the"
                              " pooling, which the token vectors of this model cannot give:"
                              " export it with `optimum-cli export onnx --library"
                              f" sentence_transformers` (its {SENTENCE_EMBEDDING} output applies"
                              " every module), or give --task pooling=... to pool without it")
        settings["pooling"] = modules.pooling
    return TaskSpec(**settings, given=tuple(settings)).merged(spec)


def complete_text_task(task: Task | None, folder: ExportFolder | None) -> Task | None:
    """`task` with what a text task takes from the folder (max_length, activation); ConfigError
    for a text task without one."""
    if task is not None and task.kind == SPEECH_RECOGNITION and not (folder and folder.sessions):
        raise ConfigError(f"--task {task.kind} needs the export folder (encoder_model.onnx,"
                          " decoder_model_merged.onnx, config.json, tokenizer.json,"
                          " generation_config.json): bundle build FOLDER")
    if task is None or kind_of(task.kind).media != "text":
        return task
    if folder is None:
        raise ConfigError(f"--task {task.kind} needs the export folder, not the .onnx file: bundle"
                          f" build FOLDER (with {MODEL_FILES[0]}, {', '.join(REQUIRED_FILES)})")
    activation = folder.activation if task.kind == TEXT_CLASSIFICATION else task.activation
    return dataclasses.replace(task, max_length=task.max_length or max_length(folder),
                               activation=activation)  # type: ignore[arg-type]


def ship_text(task: Task | None, folder: ExportFolder | None, staging: Path) -> Task | None:
    """The folder's tokenizer and config files into the bundle (and a generation task's browser
    modules); `task` naming them."""
    if task is None or folder is None or task.kind == GENERIC:
        return task
    shipped = dataclasses.replace(task, files=ship_text_files(folder, staging))  # makes text/
    if task.kind == TEXT_GENERATION:
        ship_generation_modules(staging)
    if task.kind == SPEECH_RECOGNITION:
        ship_speech_modules(staging)
    return shipped


def text_answer_problems(staging: Path, manifest: Manifest, execution_providers: list[str],
                         reporter: Reporter) -> dict[tuple[str, str], str]:
    """The build's check of a text task's answers: embed(), classify(), generate() or
    transcribe() in Chromium against the Python reference on the check sentences (audio), every
    variant on every EP (a speech model: each session's default there), a quantized one against
    its own native run; per (variant, EP) that failed, why (the browser check's problems)."""
    task = manifest.task
    if task is None or (kind_of(task.kind).media != "text" and task.kind != SPEECH_RECOGNITION):
        return {}
    from bundler.tasks.check import TaskInput, check_task, columns
    from bundler.verify.browser import load_settings

    with tempfile.TemporaryDirectory(prefix="bundle-text-") as scratch:
        # a speech model's sessions each at their default per EP (what load() opens): a
        # dynamic-int8 encoder's hidden states differ from native's by a few % of their range
        # on WASM, which may part a long transcript's tokens; its tensors are checked apart
        comparisons = check_task(staging, manifest, [TaskInput.made(task)], execution_providers,
                                 load_settings(), reporter, Path(scratch),
                                 every_variant=task.kind != SPEECH_RECOGNITION)
    reporter.table(f"{task.kind}: browser vs Python reference", columns(task.kind),
                   [comparison.row(task.kind) for comparison in comparisons])
    return {(c.variant, c.ep): f"{task.kind} answers differ from the Python reference ({c.error})"
            for c in comparisons if not c.passed}
