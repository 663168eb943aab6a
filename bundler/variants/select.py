"""`--quantize auto`: among the measured candidates, which one ships, and the record of the choice
for bundle.json. Today the objective is the smallest download within the error budget that
passed in the browser; it is a parameter, so a speed-aware one can take its place."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bundler.conformance import ConformanceReport
from bundler.errors import QuantizeError
from bundler.manifest import Selection
from bundler.variants.budget import DEFAULT_BUDGET, Budget, parse_budget
from bundler.variants.kinds import VARIANT_KINDS
from bundler.variants.make import Variant
from bundler.variants.metrics import Metrics


@dataclass(frozen=True)
class Candidate:
    """A variant auto may ship: its size, its accuracy against fp32 and the browser's verdict."""

    name: str
    bytes: int
    metrics: Metrics
    browser_ok: bool


Objective = Callable[[Candidate], Any]  # a sort key: among the fitting, the lowest ships


def smallest_download(candidate: Candidate) -> tuple[int, int]:
    """Fewest bytes; on a tie, the kind listed first in VARIANT_KINDS."""
    names: tuple[str, ...] = VARIANT_KINDS
    preference = names.index(candidate.name) if candidate.name in names else len(names)
    return candidate.bytes, preference


def choose(
    candidates: Sequence[Candidate],
    budget: Budget = DEFAULT_BUDGET,
    objective: Objective = smallest_download,
) -> str | None:
    """The name of the best candidate within budget that passed in the browser; fp32 if none
    did and fp32 passed; None if not even fp32 did."""
    fitting = [c for c in candidates if c.browser_ok and budget.accepts(c.metrics)]
    if fitting:
        return min(fitting, key=objective).name
    if any(c.name == "fp32" and c.browser_ok for c in candidates):
        return "fp32"
    return None


def browser_passed(report: ConformanceReport | None, names: Sequence[str]) -> dict[str, bool]:
    """Per variant: did it pass on every EP where fp32 passed? (An EP that cannot run the model
    at all, such as WebGPU without ai.onnx.ml kernels, does not count against the variants.)
    Without a report (no browser, or --no-verify) every variant counts as passed."""
    if report is None:
        return dict.fromkeys(names, True)
    by_variant: dict[str, dict[str, bool]] = {}
    for check in report.checks:
        if check.requested is not None:
            by_variant.setdefault(check.variant, {})[check.label] = check.passed
    baseline = {ep for ep, ok in by_variant.get("fp32", {}).items() if ok}
    return {
        name: any(by_variant.get(name, {}).values()) and all(
            ok for ep, ok in by_variant.get(name, {}).items() if ep in baseline or not baseline)
        for name in names
    }


@dataclass(frozen=True)
class AutoChoice:
    chosen: str
    dropped: list[str]  # made and checked, not shipped
    selection: Selection  # bundle.json's record of the choice


def select(
    variants: Sequence[Variant],
    report: ConformanceReport | None,
    max_error: str | None,
    objective: Objective = smallest_download,
) -> AutoChoice:
    """`--quantize auto`, once the candidates are measured and checked in the browser."""
    budget = parse_budget(max_error) if max_error else DEFAULT_BUDGET
    names = [v.entry["name"] for v in variants]
    passed = browser_passed(report, names)
    candidates = [Candidate(v.entry["name"], v.entry["bytes"], v.metrics, passed[v.entry["name"]])
                  for v in variants if v.metrics is not None]
    chosen = choose(candidates, budget, objective)
    if chosen is None:
        raise QuantizeError(
            f"auto: no variant is within the budget {budget} and passed the browser check"
            " (fp32 included); loosen --max-error or check the model with bundle test"
        )
    record = [{
        "name": c.name,
        "bytes": c.bytes,
        "within_budget": budget.accepts(c.metrics),
        "budget": budget.explain(c.metrics),
        "browser_verified": c.browser_ok,
        "chosen": c.name == chosen,
    } for c in candidates]
    return AutoChoice(chosen, [name for name in names if name != chosen],
                      Selection("auto", str(budget), chosen, record))
