"""The choose stage: which of the made variants ship and which is the default. A plan of named
variants ships them all; `--quantize auto` checks the candidates in the browser, times those
that may ship (unless the objective is size) and keeps the chosen ones (bundler.variants.select;
a bundle of several sessions: the chosen combination of their variants, bundler.stages.combine),
setting the others' files aside until the build's final check has passed: where auto's default
on an EP fails it, fall_back ships the next of auto's ranking there instead."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from bundler.bundle.layout import WORK_DIR
from bundler.bundle.manifest import Manifest, Selection, Session, Variant
from bundler.bundle.options import BuildOptions
from bundler.console import Reporter
from bundler.errors import QuantizeError
from bundler.perf.speed import SPEED_COLUMNS, browser_speeds, speed_record, speed_rows
from bundler.stages.variants import Made
from bundler.stages.verify import verify
from bundler.variants.budget import default_budget
from bundler.variants.default import (
    DefaultVariant,
    default_to_ship,
    default_variant,
    per_ep_default,
)
from bundler.variants.select import AutoChoice, fitting_names, select
from bundler.verify.user_inputs import UserInputs
from bundler.verify.workload import bundle_known, measured_reference

SET_ASIDE = f"{WORK_DIR}/candidates"  # auto's candidates that do not ship (yet), in the staging
# auto's choice again, given per EP the candidates the final check rejected there
Reselect = Callable[[Mapping[str, Collection[str]]], AutoChoice]


@dataclasses.dataclass(frozen=True)
class Chosen:
    sessions: tuple[Session, ...]  # what ships, per session (the primary first), with defaults
    selection: Selection | None = None  # auto's record of the choice
    reselect: Reselect | None = None  # None: not auto's choice
    # every one of auto's candidates, shipped or set aside, by its name in auto's ranking: its
    # variant of each session auto chooses for (one variant, or a combination of several
    # sessions' named "encoder=fp32,decoder=int8")
    candidates: Mapping[str, Mapping[str, Variant]] = dataclasses.field(default_factory=dict)
    choice: DefaultVariant | None = None  # the candidate auto ships, or one per EP
    rejected: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()  # why auto's first choice on an EP did not ship (manifest notes)

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
    reselect = functools.partial(select, made.variants, report, max_error, options.objective,
                                 speeds, options.execution_providers, record)
    choice = reselect({})
    reporter.table(f"auto ({options.objective}): the candidates", SPEED_COLUMNS,
                   speed_rows(choice.selection.candidates, record))
    if choice.selection.note:  # the inputs cannot show the budget: fp32 ships
        reporter.warn(choice.selection.note)
    reporter.info(f"auto: shipping {choice.chosen}")
    every = Chosen(candidates.sessions, reselect=reselect,
                   candidates={variant.name: {model.name: variant} for variant in model.variants})
    return shipping(staging, every, choice)


def _files(variant: Variant) -> list[str]:
    return variant.every_file()


def _put(staging: Path, variant: Variant, aside: bool) -> None:
    """`variant`'s files set aside (`aside`), else (back) in place."""
    for file in _files(variant):
        here, away = staging / file, staging / SET_ASIDE / Path(file).name
        source, target = (here, away) if aside else (away, here)
        if source.exists() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            source.rename(target)


def shipping(staging: Path, chosen: Chosen, choice: AutoChoice, notes: tuple[str, ...] = (),
             rejected: Mapping[str, frozenset[str]] | None = None) -> Chosen:
    """`chosen` (auto's) shipping `choice` of its candidates: each session auto chooses for ships
    its variants of the candidates chosen on some EP, by default on each EP its variant of the
    one chosen there; the files of its other variants set aside, of those it ships (back) in
    place. Sessions auto does not choose for ship what their plan says."""
    shipped = [name for name in chosen.candidates if name not in choice.dropped]
    sessions = []
    for session in chosen.sessions:
        # candidate -> this session's variant of it
        of = {name: parts[session.name] for name, parts in chosen.candidates.items()
              if session.name in parts}
        if of:
            every = {variant.name: variant for variant in of.values()}
            kept = {of[name].name for name in shipped}
            for variant in every.values():
                _put(staging, variant, aside=variant.name not in kept)
            default = of[choice.chosen].name if isinstance(choice.chosen, str) else \
                per_ep_default({ep: of[name].name for ep, name in choice.chosen.items()})
            session = dataclasses.replace(
                session, variants=[v for v in every.values() if v.name in kept],
                default_variant=default)
        sessions.append(session)
    return dataclasses.replace(chosen, sessions=tuple(sessions), selection=choice.selection,
                               choice=choice.chosen, notes=chosen.notes + notes,
                               rejected=rejected or chosen.rejected)


def gone(before: Chosen, after: Chosen) -> list[str]:
    """The files of the variants `before` shipped and `after` does not."""
    return [file for old, new in zip(before.sessions, after.sessions, strict=True)
            for variant in old.variants if variant.name not in {v.name for v in new.variants}
            for file in _files(variant)]


def fall_back(staging: Path, chosen: Chosen, failed: Mapping[str, str],
              reporter: Reporter) -> Chosen | None:
    """auto's choice with the next of its ranking on each EP where its default (a speech model's
    combination of the sessions' defaults) failed the build's final check (`failed`: EP -> why),
    a note saying why; None when it is not auto's choice or nothing is left to ship there (the
    build then fails as an explicit variant would). An fp32 default that fails stays: the EP's
    runtime computes the model itself wrong, which no other variant of it repairs (another would
    only fail there too)."""
    if chosen.reselect is None or chosen.choice is None:
        return None
    on = {ep: default_variant(chosen.choice, ep) for ep in failed}
    failed = {ep: why for ep, why in failed.items()
              if any(v.kind != "fp32" for v in chosen.candidates[on[ep]].values())}
    if not failed:
        return None
    rejected = dict(chosen.rejected)
    notes = []
    for ep, why in failed.items():
        name = on[ep]
        rejected[ep] = rejected.get(ep, frozenset()) | {name}
        notes.append(f"auto: {name} did not ship on {ep}: it failed the final check ({why})")
    try:
        choice = chosen.reselect(rejected)
    except QuantizeError:
        return None
    for ep, note in zip(failed, notes, strict=True):
        reporter.warn(f"{note}; checking {default_variant(choice.chosen, ep)} instead")
    return shipping(staging, chosen, choice, tuple(notes), rejected)
