"""`--quantize auto` on a bundle of several sessions (a speech model's `encoder` and `decoder`):
every combination of the sessions' candidates (a session auto does not choose for brings its
default only) is measured natively on the check audio against fp32's transcripts
(bundler.text.transcripts: token agreement, word error rate, teacher-forced logits) and timed
there, and the combination select.py's objective picks within the budget ships: each session
keeps its variant of it as the default, the others' files are set aside. The record is
bundle.json's `selection`, one candidate per combination named "encoder=fp32,decoder=int8".

The combinations are judged natively (onnxruntime CPU, one thread), not in the browser: the
build's browser check then runs the shipped defaults (bundler.stages.verify), and where the
chosen combination fails it on an EP, the next of the ranking ships there instead
(bundler.stages.choose.fall_back, as for one session's variants).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from bundler.bundle.manifest import Selection, SelectionCandidate, SpeedRecord
from bundler.bundle.options import BuildOptions
from bundler.console import Reporter
from bundler.errors import QuantizeError
from bundler.stages.choose import Chosen, shipping
from bundler.stages.variants import Made
from bundler.text.transcripts import measure_transcripts
from bundler.variants.budget import Budget, default_budget, parse_budget
from bundler.variants.default import default_variant, named_defaults, per_ep_default
from bundler.variants.kinds import Objective
from bundler.variants.make import MadeVariant
from bundler.variants.select import (
    BALANCED_SLOWER,
    BALANCED_SMALLER,
    SPEED_TIE,
    AutoChoice,
    Candidate,
    choose,
    without,
)

COLUMNS = ("combination", "bytes", "tokens", "wer", "native ms (1 thread)", "budget", "ships")
TIMED = "natively (onnxruntime CPU, 1 thread): the check audio's transcription"


def choose_combination(staging: Path, made: Made, chosen: Chosen, options: BuildOptions,
                       task_kind: str | None, reporter: Reporter) -> Chosen:
    """auto's choice of one variant per session (see the module); `chosen` ships every
    candidate, with each session's plan's default."""
    check = made.transcripts
    assert check is not None
    budget = parse_budget(options.max_error) if options.max_error else default_budget(task_kind)
    pools = [session.variants if session.plan.auto else
             tuple(v for v in session.variants if v.entry.name == shipped.default_variant)
             for session, shipped in zip(made.sessions, chosen.sessions, strict=True)]
    candidates: list[Candidate] = []
    combos: dict[str, tuple[MadeVariant, ...]] = {}
    for combo in itertools.product(*pools):
        name = ",".join(f"{s.name}={v.entry.name}" for s, v in zip(made.sessions, combo,
                                                                   strict=True))
        with reporter.step(f"Transcribing with {name}"):
            measured = measure_transcripts(
                check, {s.name: staging / v.entry.file for s, v in zip(made.sessions, combo,
                                                                       strict=True)},
                {s.name: v.entry.config_for("wasm") for s, v in zip(made.sessions, combo,
                                                                    strict=True)})
        combos[name] = combo
        candidates.append(Candidate(
            name, sum(v.entry.bytes for v in combo), measured.metrics, True,
            measured.seconds * 1000, measured.metrics.accuracy(samples=len(check.audio),
                                                               data=check.data),
            fp32=all(v.entry.kind == "fp32" for v in combo)))
    reselect = functools.partial(choice_of, candidates, budget, options.objective,
                                 options.execution_providers)
    choice = reselect({})
    reporter.table(f"auto ({options.objective}): the combinations", COLUMNS, [
        [c.name, str(c.bytes), f"{c.metrics.tokens:.4g}", f"{c.metrics.wer:.4g}",
         f"{c.speed_ms:.0f}", r.budget, "yes" if r.chosen else ""]
        for c, r in zip(candidates, choice.selection.candidates, strict=True)])
    reporter.info(f"auto: shipping {choice.chosen}")
    every = Chosen(chosen.sessions, reselect=reselect, candidates={
        name: {s.name: v.entry for s, v in zip(made.sessions, combo, strict=True) if s.plan.auto}
        for name, combo in combos.items()})
    return shipping(staging, every, choice)


def choice_of(candidates: Sequence[Candidate], budget: Budget, objective: Objective,
              execution_providers: Sequence[str], rejected: Mapping[str, Collection[str]]
              ) -> AutoChoice:
    """The combination `objective` picks within `budget` on each EP (all fp32 where none is
    within it), past those `rejected` there (they failed the build's final check); the record
    marks each one shipped on some EP."""
    by_ep = {ep: choose(without(candidates, rejected.get(ep, ())), budget, objective)
             for ep in execution_providers}
    picked = {ep: name for ep, name in by_ep.items() if name is not None}
    if not picked or len(picked) < len(by_ep):
        raise QuantizeError(f"auto: no combination of the sessions' variants is within the"
                            f" budget {budget}; loosen --max-error")
    chosen = per_ep_default(picked)
    shipped = named_defaults(chosen)
    record = [SelectionCandidate(
        name=c.name, bytes=c.bytes, within_budget=budget.accepts(c.metrics, c.exact),
        budget=budget.explain(c.metrics, c.exact), browser_verified=False, accuracy=c.accuracy,
        native_ms=None if c.speed_ms is None else round(c.speed_ms, 1), chosen=c.name in shipped)
        for c in candidates]
    speed = SpeedRecord(SPEED_TIE, BALANCED_SMALLER, BALANCED_SLOWER, measured=TIMED)
    return AutoChoice(chosen, [c.name for c in candidates if c.name not in shipped],
                      Selection("auto", str(budget), default_variant(chosen, "wasm"), record,
                                objective=objective, speed=speed))
