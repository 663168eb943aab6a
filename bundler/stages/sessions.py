"""The sessions beside the primary one, for an export folder that holds several models (a speech
model's `decoder` beside its `encoder`): each fitted to the runtime as the primary model is
(bundler.model.prepare) and shipped as one fp32 variant in models/, content-hashed.

The primary session still goes through every stage alone (variants, auto, the browser check);
these get no quantized variants, no check of their own and no reference fingerprint yet.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from bundler.bundle.files import rename_to_hashed
from bundler.bundle.layout import MODELS_DIR, WORK_DIR
from bundler.bundle.manifest import Session
from bundler.bundle.modelio import model_bytes, read_model, sha256_of, signature
from bundler.console import Reporter
from bundler.model.prepare import prepare_model
from bundler.stages.prepare import Checked, Prepared
from bundler.stages.variants import Made


def extra_sessions(checked: Checked, prepared: Prepared, made: Made, staging: Path,
                   reporter: Reporter) -> tuple[Session, ...]:
    """A Session per model of the folder beside the primary one; () for a one-model build."""
    if checked.text is None or not checked.text.sessions:
        return ()
    fp32 = next(variant.entry for variant in made.variants if variant.entry.kind == "fp32")
    found = []
    for name, source in checked.text.sessions.items():
        fitted = staging / WORK_DIR / f"{name}.onnx"
        with reporter.step(f"Checking {source}"):
            notes = prepare_model(source, fitted, reporter, prepared.runtime.version)
        shipped = staging / MODELS_DIR / f"{name}.fp32.onnx"
        shutil.copyfile(fitted, shipped)
        file = MODELS_DIR + rename_to_hashed(shipped).name
        size = (staging / file).stat().st_size
        variant = dataclasses.replace(
            fp32, name="fp32", kind="fp32", file=file, bytes=size,
            sha256=sha256_of(staging / file), ratio=size / max(model_bytes(source), 1),
            accuracy=None,
            notes=list(notes), reference=None, data=None, memory=None)
        io = signature(read_model(fitted, load_weights=False))
        found.append(Session(name, list(io.inputs), list(io.outputs), [variant], "fp32"))
    return tuple(found)
