"""`--quantize auto` on a bundle of several sessions (a speech model's `encoder` and `decoder`):
every combination of the sessions' candidates (a session auto does not choose for brings its
default only) is measured natively on the check audio against fp32's transcripts
(bundler.text.transcripts: token agreement, word error rate, teacher-forced logits) and timed
there, and the combination select.py's objective picks within the budget ships: each session
keeps its variant of it as the default, the others' files are deleted. The record is
bundle.json's `selection`, one candidate per combination named "encoder=fp32,decoder=int8".

The combinations are judged natively (onnxruntime CPU, one thread), not in the browser: the
build's browser check then runs the shipped defaults (bundler.stages.verify).
"""

from __future__ import annotations

import itertools
from pathlib import Path

from bundler.bundle.manifest import Selection, SelectionCandidate, Session, SpeedRecord
from bundler.bundle.options import BuildOptions
from bundler.console import Reporter
from bundler.errors import QuantizeError
from bundler.stages.choose import Chosen
from bundler.stages.variants import Made
from bundler.text.transcripts import measure_transcripts
from bundler.variants.budget import default_budget, parse_budget
from bundler.variants.make import MadeVariant
from bundler.variants.select import BALANCED_SLOWER, BALANCED_SMALLER, SPEED_TIE, Candidate, pick

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
    fitting = [c for c in candidates if c.fits(budget)]
    winner = pick(fitting, options.objective) if fitting else next(
        (c for c in candidates if c.exact), None)
    if winner is None:
        raise QuantizeError(f"auto: no combination of the sessions' variants is within the"
                            f" budget {budget}; loosen --max-error")
    record = [SelectionCandidate(
        name=c.name, bytes=c.bytes, within_budget=budget.accepts(c.metrics, c.exact),
        budget=budget.explain(c.metrics, c.exact), browser_verified=False, accuracy=c.accuracy,
        native_ms=None if c.speed_ms is None else round(c.speed_ms, 1), chosen=c is winner)
        for c in candidates]
    reporter.table(f"auto ({options.objective}): the combinations", COLUMNS, [
        [c.name, str(c.bytes), f"{c.metrics.tokens:.4g}", f"{c.metrics.wer:.4g}",
         f"{c.speed_ms:.0f}", r.budget, "yes" if r.chosen else ""]
        for c, r in zip(candidates, record, strict=True)])
    reporter.info(f"auto: shipping {winner.name}")
    sessions = []
    for made_session, session, variant in zip(made.sessions, chosen.sessions,
                                              combos[winner.name], strict=True):
        if made_session.plan.auto:  # the others ship what their plan says
            for dropped in session.variants:
                if dropped.name != variant.entry.name:
                    (staging / dropped.file).unlink()
            session = Session(session.name, session.inputs, session.outputs, [variant.entry],
                              variant.entry.name)
        sessions.append(session)
    speed = SpeedRecord(SPEED_TIE, BALANCED_SMALLER, BALANCED_SLOWER, measured=TIMED)
    return Chosen(tuple(sessions), Selection("auto", str(budget), winner.name, record,
                                             objective=options.objective, speed=speed))
