"""The variants stage: the prepared model optimised and each planned variant made, measured
against fp32 (bundler.variants.make) and given its content-hashed name in models/."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bundler.bundle.files import rename_to_hashed
from bundler.bundle.layout import MODELS_DIR, WORK_DIR
from bundler.bundle.manifest import Optimization, Session
from bundler.bundle.modelio import TensorSpec, model_bytes, model_files
from bundler.bundle.options import BuildOptions
from bundler.console import Reporter
from bundler.stages.prepare import Checked, Prepared
from bundler.variants.make import MadeVariant, make_variants
from bundler.verify.workload import Workload


@dataclasses.dataclass(frozen=True)
class Made:
    """Every variant made (auto: every candidate), with the graph they were made from."""

    variants: tuple[MadeVariant, ...]
    optimization: Optimization
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    workload: Workload | None  # the sizes accuracy was measured at (None: not measured)
    # the sessions beside the primary one (bundler.stages.sessions), fp32 only
    sessions: tuple[Session, ...] = ()

    def names(self) -> list[str]:
        return [variant.entry.name for variant in self.variants]


def make(checked: Checked, prepared: Prepared, staging: Path, options: BuildOptions,
         reporter: Reporter) -> Made:
    variants, optimization, inputs, outputs, workload = make_variants(
        prepared.model, staging / WORK_DIR, staging / MODELS_DIR, options,
        source_bytes=model_bytes(checked.source), is_example=checked.is_example,
        reporter=reporter, user=checked.user, task=checked.task,
        text_folder=checked.text.folder if checked.text else None,
        external=len(model_files(checked.source)) > 1,  # weights given in external data
    )
    hashed = tuple(
        dataclasses.replace(variant, entry=dataclasses.replace(
            variant.entry,
            file=MODELS_DIR + rename_to_hashed(staging / variant.entry.file).name))
        for variant in variants)
    return Made(hashed, optimization, tuple(inputs), tuple(outputs), workload)
