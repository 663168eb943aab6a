"""The choose stage: which of the made variants ship and which is the default. A plan of named
variants ships them all; `--quantize auto` checks the candidates in the browser, times those
that may ship (unless the objective is size) and keeps the chosen ones (bundler.variants.select),
deleting the others' files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bundler.bundle.manifest import Manifest, Selection, Session
from bundler.bundle.options import BuildOptions
from bundler.console import Reporter
from bundler.perf.speed import SPEED_COLUMNS, browser_speeds, speed_record, speed_rows
from bundler.stages.variants import Made
from bundler.stages.verify import verify
from bundler.variants.budget import default_budget
from bundler.variants.default import default_to_ship
from bundler.variants.select import fitting_names, select
from bundler.verify.user_inputs import UserInputs
from bundler.verify.workload import bundle_known, measured_reference


@dataclasses.dataclass(frozen=True)
class Chosen:
    sessions: tuple[Session, ...]  # what ships, per session (the primary first), with defaults
    selection: Selection | None = None  # auto's record of the choice

    @property
    def primary(self) -> Session:
        return self.sessions[0]


def every_variant(made: Made) -> Chosen:
    """Every made variant of every session, with its plan's default (for auto: the candidates
    while they are checked, the first of them the default)."""
    return Chosen(tuple(
        Session(session.name, list(session.inputs), list(session.outputs),
                [variant.entry for variant in session.variants],
                default_to_ship(session.names(), session.plan.default))
        for session in made.sessions))


def choose_auto(staging: Path, made: Made, candidates: Manifest, options: BuildOptions,
                user: UserInputs, reporter: Reporter) -> Chosen:
    """auto's choice among the `candidates` (the manifest in progress that ships them all)."""
    report = verify(staging, candidates, options, reporter,
                    "Browser check of the candidates", answers=False).report
    model = candidates.session()
    # without --max-error, a task bundle is judged by its answers (labels, boxes, frames)
    max_error = options.max_error or str(default_budget(
        candidates.task.kind if candidates.task else None))
    fitting = fitting_names(made.variants, report, max_error)
    speeds: dict[str, dict[str, float]] = {}
    if options.objective == "size" or report is None or len(fitting) < 2 \
            or "wasm" not in options.execution_providers:
        why = ("the objective is size" if options.objective == "size" else
               "no browser check" if report is None else
               "one candidate or none fits" if len(fitting) < 2 else "no WASM runtime shipped")
        record = speed_record(None, why)
    else:  # at the sizes accuracy was measured at (the build's record, as bench reads it)
        reference, timed = measured_reference(staging / model.variant(fitting[0]).file,
                                              candidates, bundle_known(candidates), user)
        speeds, record = browser_speeds(staging, candidates, fitting, reference.feeds, reporter)
        record = record.at(timed)
    choice = select(made.variants, report, max_error, options.objective, speeds,
                    options.execution_providers, record)
    for name in choice.dropped:
        (staging / model.variant(name).file).unlink()
    reporter.table(f"auto ({options.objective}): the candidates", SPEED_COLUMNS,
                   speed_rows(choice.selection.candidates, record))
    if choice.selection.note:  # the inputs cannot show the budget: fp32 ships
        reporter.warn(choice.selection.note)
    reporter.info(f"auto: shipping {choice.chosen}")
    shipped = dataclasses.replace(model, variants=[v for v in model.variants
                                                   if v.name not in choice.dropped],
                                  default_variant=choice.chosen)
    return Chosen((shipped, *candidates.sessions[1:]), choice.selection)
