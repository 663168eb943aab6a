"""The models of a bundle's sessions, fitted to the runtime: the primary one (prepared by the
prepare stage) and, for an export folder that holds several models (a speech model's `decoder`
beside its `encoder`), each other one fitted as the primary model is (bundler.model.prepare).

Every session then goes through the same variants stage (bundler.stages.variants.make_session):
its variants made, measured and hashed, with its own per-EP default.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bundler.bundle.layout import WORK_DIR
from bundler.console import Reporter
from bundler.model.prepare import prepare_model
from bundler.stages.prepare import Checked, Prepared


@dataclasses.dataclass(frozen=True)
class SessionModel:
    """One session's fp32 model, fitted to the runtime, and the file it came from."""

    name: str
    model: Path  # in the staging folder's scratch folder
    source: Path
    notes: tuple[str, ...] = ()  # what was changed to fit the runtime (the primary's: the bundle's)


def primary_name(checked: Checked) -> str:
    """A single-model build is a pipeline of one session, named after the model; an export folder
    of several models names its primary session (a speech model's `encoder`)."""
    return (checked.text and checked.text.primary_session) or checked.name


def session_models(checked: Checked, prepared: Prepared, staging: Path,
                   reporter: Reporter) -> tuple[SessionModel, ...]:
    """Every session's model, the primary one first."""
    found = [SessionModel(primary_name(checked), prepared.model, checked.source)]
    for name, source in (checked.text.sessions if checked.text else {}).items():
        fitted = staging / WORK_DIR / f"{name}.onnx"
        with reporter.step(f"Checking {source}"):
            notes = prepare_model(source, fitted, reporter, prepared.runtime.version)
        found.append(SessionModel(name, fitted, source, tuple(notes)))
    return tuple(found)
