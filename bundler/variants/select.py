"""`--quantize auto`: among the measured candidates, which one ships (per execution provider),
and the record of the choice for bundle.json.

Every objective first keeps the candidates within the error budget that passed in the browser.
Then `size` ships the smallest; `speed` the fastest; `balanced` (the default) the fastest unless
another is at least BALANCED_SMALLER smaller and at most BALANCED_SLOWER slower (then the smallest
such one). Speed is the steady-state median in the browser (bundler.perf.speed); two speeds
within SPEED_TIE of each other are a tie, and a tie goes to the smaller file, so timing noise
rarely changes the choice between builds. Without speeds (no browser, --no-verify) every
objective ships the smallest. A quantized candidate keeps the budget by its bounds on held-out
inputs (bundler.variants.budget); fp32, exact by construction, ships when none does, and when the
inputs are too few to show the budget for any, the selection says so in one line (`note`).
Pure Python apart from the record's types.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from bundler.bundle.manifest import Accuracy, Selection, SelectionCandidate, SpeedRecord
from bundler.errors import QuantizeError
from bundler.variants.budget import DEFAULT_BUDGET, Budget, budget_for
from bundler.variants.default import default_variant, named_defaults, per_ep_default
from bundler.variants.kinds import OBJECTIVES, VARIANT_KINDS, Objective
from bundler.variants.make import MadeVariant
from bundler.variants.metrics import Metrics
from bundler.verify.conformance import ConformanceReport

SPEED_TIE = 0.05  # speeds this close (relative) are equal: the smaller file ships
BALANCED_SMALLER = 0.30  # balanced: a candidate this much smaller …
BALANCED_SLOWER = 0.10  # … and at most this much slower than the fastest ships instead


@dataclass(frozen=True)
class Candidate:
    """A variant auto may ship: its size, its accuracy against fp32, the browser's verdict and,
    where measured, its steady-state milliseconds per run in the browser."""

    name: str
    bytes: int
    metrics: Metrics
    browser_ok: bool
    speed_ms: float | None = None
    accuracy: Accuracy | None = None  # bundle.json's record of `metrics`
    fp32: bool = False  # a combination of fp32 variants (bundler.stages.combine)

    @property
    def exact(self) -> bool:
        """fp32 is the optimised graph itself: judged by its point estimates."""
        return self.name == "fp32" or self.fp32

    def fits(self, budget: Budget) -> bool:
        return self.browser_ok and budget.accepts(self.metrics, self.exact)


def smallest_download(candidate: Candidate) -> tuple[int, int]:
    """Fewest bytes; on a tie, the kind listed first in VARIANT_KINDS."""
    names: tuple[str, ...] = VARIANT_KINDS
    preference = names.index(candidate.name) if candidate.name in names else len(names)
    return candidate.bytes, preference


def fastest(timed: Sequence[Candidate]) -> Candidate:
    """The fastest; speeds within SPEED_TIE of the best are a tie, won by the smallest file."""
    best = min(c.speed_ms for c in timed if c.speed_ms is not None)
    tied = [c for c in timed if c.speed_ms is not None and c.speed_ms <= best * (1 + SPEED_TIE)]
    return min(tied, key=smallest_download)


def pick(fitting: Sequence[Candidate], objective: Objective) -> Candidate:
    """The one of `fitting` (within budget, passed) that `objective` ships."""
    timed = [c for c in fitting if c.speed_ms is not None]
    if objective == "size" or not timed:
        return min(fitting, key=smallest_download)
    winner = fastest(timed)
    if objective == "speed" or winner.speed_ms is None:
        return winner
    lighter = [c for c in timed if c.bytes <= (1 - BALANCED_SMALLER) * winner.bytes
               and c.speed_ms is not None and c.speed_ms <= (1 + BALANCED_SLOWER) * winner.speed_ms]
    return min(lighter, key=smallest_download) if lighter else winner


def choose(
    candidates: Sequence[Candidate],
    budget: Budget = DEFAULT_BUDGET,
    objective: Objective = "balanced",
) -> str | None:
    """The name of the candidate `objective` ships among those within budget that passed in the
    browser; fp32 if none did and fp32 passed; None if not even fp32 did."""
    if objective not in OBJECTIVES:
        raise QuantizeError(f"unknown objective {objective!r}; expected one of"
                            f" {', '.join(OBJECTIVES)}")
    fitting = [c for c in candidates if c.fits(budget)]
    if fitting:
        return pick(fitting, objective).name
    return next((c.name for c in candidates if c.exact and c.browser_ok), None)


def without(candidates: Sequence[Candidate], rejected: Collection[str]) -> list[Candidate]:
    """`candidates`, those `rejected` on an EP (they failed the build's final check there:
    bundler.stages.choose.fall_back) counted as failed in the browser, so the objective ranks
    the rest."""
    return [replace(c, browser_ok=False) if c.name in rejected else c for c in candidates]


def browser_passed(report: ConformanceReport | None, names: Sequence[str]) -> dict[str, bool]:
    """Per variant: did it pass on every EP where fp32 passed? (An EP that cannot run the model
    at all, such as WebGPU without ai.onnx.ml kernels, does not count against the variants, nor
    an adapter without a feature the variant requires: load() does not use it there.)
    Without a report (no browser, or --no-verify) every variant counts as passed."""
    if report is None:
        return dict.fromkeys(names, True)
    by_variant: dict[str, dict[str, bool]] = {}
    for check in report.checks:
        if check.requested is not None and not check.missing_feature:
            by_variant.setdefault(check.variant, {})[check.label] = check.passed
    baseline = {ep for ep, ok in by_variant.get("fp32", {}).items() if ok}
    return {
        name: any(by_variant.get(name, {}).values()) and all(
            ok for ep, ok in by_variant.get(name, {}).items() if ep in baseline or not baseline)
        for name in names
    }


def fitting_names(variants: Sequence[MadeVariant], report: ConformanceReport | None,
                  max_error: str | None) -> list[str]:
    """The candidates auto may ship (within budget, passed): the ones worth timing."""
    budget = budget_for(max_error, _generation(variants))
    names = [v.entry.name for v in variants]
    passed = browser_passed(report, names)
    return [v.entry.name for v in variants if v.metrics is not None and passed[v.entry.name]
            and budget.accepts(v.metrics, v.entry.name == "fp32")]


def _generation(variants: Sequence[MadeVariant]) -> bool:
    """Measured on generation (a text-generation bundle): judged by its default budget."""
    return any(v.metrics is not None and v.metrics.tokens is not None for v in variants)


@dataclass(frozen=True)
class AutoChoice:
    chosen: str | dict[str, str]  # the default_variant: one name, or one per EP
    dropped: list[str]  # made and checked, not shipped
    selection: Selection  # bundle.json's record of the choice


def select(
    variants: Sequence[MadeVariant],
    report: ConformanceReport | None,
    max_error: str | None,
    objective: Objective = "balanced",
    speeds: Mapping[str, Mapping[str, float]] | None = None,
    execution_providers: Sequence[str] = ("wasm",),
    speed_record: SpeedRecord | None = None,
    rejected: Mapping[str, Collection[str]] | None = None,
) -> AutoChoice:
    """`--quantize auto`, once the candidates are measured and checked in the browser.
    `speeds`: per measured EP, variant -> steady-state ms; an EP that was not measured gets the
    choice of the first one that was (the sizes otherwise). `rejected`: per EP, the variants
    that failed the build's final check there (bundler.stages.choose.fall_back): each EP ships
    the next of its ranking instead, down to fp32."""
    budget = budget_for(max_error, _generation(variants))
    names = [v.entry.name for v in variants]
    passed = browser_passed(report, names)
    speeds = speeds or {}
    rejected = rejected or {}

    def candidates(ep: str | None, timed_on: str | None = None) -> list[Candidate]:
        timed = speeds.get(timed_on, {}) if timed_on else {}
        return without([Candidate(v.entry.name, v.entry.bytes, v.metrics, passed[v.entry.name],
                                  timed.get(v.entry.name), v.entry.accuracy)
                        for v in variants if v.metrics is not None],
                       rejected.get(ep, ()) if ep else ())

    measured = [ep for ep, timed in speeds.items() if timed]

    def on(ep: str | None) -> str | None:
        """The choice on `ep` by its own timings, else by the first measured EP's (sizes)."""
        timed_on = ep if ep in measured else measured[0] if measured else None
        return choose(candidates(ep, timed_on), budget, objective)

    fallback = on(None)
    by_ep = {ep: on(ep) for ep in execution_providers}
    if fallback is None or None in by_ep.values() or None in map(on, measured):
        raise QuantizeError(
            f"auto: no variant is within the budget {budget} and passed the browser check"
            " (fp32 included); loosen --max-error or check the model with bundle test"
        )
    chosen = per_ep_default({ep: str(name) for ep, name in by_ep.items()}) if by_ep else fallback
    shipped = named_defaults(chosen)
    record = [SelectionCandidate(
        name=c.name, bytes=c.bytes, within_budget=budget.accepts(c.metrics, c.exact),
        budget=budget.explain(c.metrics, c.exact), browser_verified=c.browser_ok,
        accuracy=c.accuracy, chosen=c.name in shipped,
        **{f"{ep}_ms": speeds[ep][c.name] for ep in measured if c.name in speeds[ep]},
    ) for c in candidates(None)]
    return AutoChoice(chosen, [name for name in names if name not in shipped],
                      Selection("auto", str(budget), default_variant(chosen, "wasm"), record,
                                objective=objective, speed=speed_record,
                                note=_unshowable(candidates(None), budget, shipped)))


def _unshowable(candidates: Sequence[Candidate], budget: Budget, shipped: Sequence[str]
                ) -> str | None:
    """The one line saying the inputs cannot show the budget for any quantized candidate (so fp32
    ships), with what it would take; None when they can, or something else ships."""
    quantized = [c for c in candidates if not c.exact]
    if list(shipped) != ["fp32"] or not quantized:
        return None
    reasons = [budget.shortfall(c.metrics) for c in quantized]
    if any(reason is None for reason in reasons):
        return None
    return f"auto: {reasons[0]}; shipping fp32, which is exact by construction"
