"""The variants stage: each session's model optimised and each of its planned variants made,
measured against fp32 (bundler.variants.make) and given its content-hashed name in models/. Every
session goes through the one function, make_session: the primary one and those beside it (a
speech model's `decoder`), each with its own plan (bundler.variants.per_session)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.bundle.files import rename_to_hashed
from bundler.bundle.layout import MODELS_DIR, WORK_DIR
from bundler.bundle.manifest import Optimization
from bundler.bundle.modelio import TensorSpec, model_bytes, model_files
from bundler.bundle.options import BuildOptions
from bundler.console import Reporter
from bundler.stages.prepare import Checked, Prepared
from bundler.stages.sessions import SessionModel, session_models
from bundler.tasks.kinds.automatic_speech_recognition import NAME as SPEECH_RECOGNITION
from bundler.variants.make import Judge, MadeVariant, make_variants
from bundler.variants.per_session import check_sessions
from bundler.variants.plan import VariantPlan
from bundler.verify.workload import Workload

if TYPE_CHECKING:
    from bundler.text.transcripts import TranscriptCheck


@dataclasses.dataclass(frozen=True)
class SessionMade:
    """One session's variants (auto: every candidate), with the graph they were made from."""

    name: str
    variants: tuple[MadeVariant, ...]
    optimization: Optimization
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    workload: Workload | None  # the sizes accuracy was measured at (None: not measured)
    plan: VariantPlan
    skipped: tuple[str, ...] = ()  # the kinds that could not be made, each with why
    notes: tuple[str, ...] = ()  # what fitting it to the runtime changed (not the primary's)

    def names(self) -> list[str]:
        return [variant.entry.name for variant in self.variants]


@dataclasses.dataclass(frozen=True)
class Made:
    """Every session's variants, the primary session first."""

    sessions: tuple[SessionMade, ...]
    # a speech model's fp32 transcripts of the check audio, which auto measures combinations by
    transcripts: TranscriptCheck | None = None

    @property
    def primary(self) -> SessionMade:
        return self.sessions[0]

    # the primary session's, which single-model code reads
    @property
    def variants(self) -> tuple[MadeVariant, ...]:
        return self.primary.variants

    @property
    def optimization(self) -> Optimization:
        return self.primary.optimization

    @property
    def workload(self) -> Workload | None:
        return self.primary.workload

    def names(self) -> list[str]:
        return self.primary.names()


def make(checked: Checked, prepared: Prepared, staging: Path, options: BuildOptions,
         reporter: Reporter) -> Made:
    models = session_models(checked, prepared, staging, reporter)
    task_kind = checked.task.kind if checked.task else None
    check_sessions(options.session_quantize, [model.name for model in models])
    transcripts = None
    if task_kind == SPEECH_RECOGNITION and checked.text is not None and len(models) > 1:
        from bundler.text.transcripts import reference

        with reporter.step("Transcribing the check audio with fp32"):
            transcripts = reference({model.name: model.model for model in models},
                                    checked.text, options.validation)
    return Made(tuple(make_session(model, index == 0, checked, staging, options, reporter,
                                   _judge(transcripts, model.name))
                      for index, model in enumerate(models)), transcripts)


def _judge(transcripts: TranscriptCheck | None, session: str) -> Judge | None:
    """A speech session's variants measured on the transcripts, the other sessions at fp32."""
    if transcripts is None:
        return None
    from bundler.text.transcripts import measure_transcripts

    def judge(model: Path, config: dict[str, str] | None) -> tuple:
        measured = measure_transcripts(transcripts, {session: model}, {session: config})
        return measured.metrics, len(transcripts.audio), transcripts.data

    return judge


def make_session(model: SessionModel, primary: bool, checked: Checked, staging: Path,
                 options: BuildOptions, reporter: Reporter, judge: Judge | None = None
                 ) -> SessionMade:
    """One session's variants, made into models/ (the primary's as `KIND.onnx`, another's as
    `NAME.KIND.onnx`) and renamed by their content's hash."""
    plan = options.plan_of(model.name, checked.task.kind if checked.task else None)
    prefix = "" if primary else f"{model.name}."
    if not primary:  # the data given (.npz of inputs) is the primary session's inputs
        options = dataclasses.replace(options, calibration=None, validation=None, sample=None)
    variants, optimization, inputs, outputs, workload, skipped = make_variants(
        model.model, staging / WORK_DIR, staging / MODELS_DIR, options,
        source_bytes=model_bytes(model.source), is_example=checked.is_example,
        reporter=reporter, user=checked.user if primary else None, task=checked.task,
        text_folder=checked.text.folder if checked.text else None,
        external=len(model_files(model.source)) > 1,  # weights given in external data
        plan=plan, prefix=prefix, judge=judge,
    )
    hashed = tuple(
        dataclasses.replace(variant, entry=dataclasses.replace(
            variant.entry,
            file=MODELS_DIR + rename_to_hashed(staging / variant.entry.file).name,
            graphs={ep: MODELS_DIR + rename_to_hashed(staging / graph).name
                    for ep, graph in variant.entry.graphs.items()}
            if variant.entry.graphs else None,
            notes=[*model.notes, *variant.entry.notes]))
        for variant in variants)
    return SessionMade(model.name, hashed, optimization, tuple(inputs), tuple(outputs), workload,
                       plan, skipped, model.notes)
