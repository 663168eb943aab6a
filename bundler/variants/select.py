"""Which variants a build makes, which one `load()` picks, and for `auto` the whole choice.

The rule for `quantize`, `variants` and `default_variant` (the README's options section says the
same):

- neither quantize nor variants: fp32 ships, and is the default;
- `quantize = K`: K ships; with `variants = [A, B]` too, K, A and B ship (K first, no repeats);
  K is the default;
- `variants = [A, B]` alone: A and B ship; A is the default;
- `default_variant` (a name, or one per EP) picks another default among those that ship, and
  naming one that does not ship is an error;
- `quantize = auto`: the candidates (`variants`, else every kind) are made, measured and checked
  in the browser, and the one `objective` ranks first among those within the error budget ships
  (today: the smallest download). Auto chooses the default, so `default_variant` with auto is an
  error.

Pure Python at import (no onnx or onnxruntime), so the options code can use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from bundler.errors import ConfigError, QuantizeError
from bundler.variants.budget import DEFAULT_BUDGET, Budget, parse_budget
from bundler.variants.kinds import VARIANT_KINDS, VariantKind

if TYPE_CHECKING:
    from bundler.conformance import ConformanceReport
    from bundler.variants.make import Variant
    from bundler.variants.metrics import Metrics

DefaultVariant = str | dict[str, str]  # a variant name, or one per execution provider


class VariantPlan(NamedTuple):
    kinds: tuple[VariantKind, ...]  # what ships, or the candidates of auto
    default: DefaultVariant | None  # None: auto chooses

    @property
    def auto(self) -> bool:
        return self.default is None


def variants_to_make(
    quantize: str | None,
    variants: Sequence[str] | None,
    default_variant: str | Mapping[str, str] | None,
) -> VariantPlan:
    """The plan for these three options (None: not given); a one-line ConfigError for a
    contradiction."""
    listed = _kinds(variants or ())
    if quantize == "auto":
        if default_variant is not None:
            raise ConfigError(
                "default_variant: auto chooses the default variant; drop default_variant, or"
                " ship fixed variants with variants = [...] and default_variant"
            )
        return VariantPlan(listed or VARIANT_KINDS, None)
    kinds = _kinds([quantize, *listed] if quantize else listed) or ("fp32",)
    if default_variant is None:
        return VariantPlan(kinds, kinds[0])
    return VariantPlan(kinds, _shipped_default(default_variant, kinds))


def _kinds(names: Sequence[str]) -> tuple[VariantKind, ...]:
    """`names` in order without repeats, each a known kind."""
    unknown = [name for name in names if name not in VARIANT_KINDS]
    if unknown:
        raise ConfigError(
            f"variants: unknown {unknown[0]!r}; choose from {', '.join(VARIANT_KINDS)}"
        )
    return cast(tuple[VariantKind, ...], tuple(dict.fromkeys(names)))


def _shipped_default(
    default_variant: str | Mapping[str, str], kinds: Sequence[str]
) -> DefaultVariant:
    default = default_variant if isinstance(default_variant, str) else dict(default_variant)
    named = [default] if isinstance(default, str) else list(default.values())
    missing = [name for name in named if name not in kinds]
    if missing:
        raise ConfigError(
            f"default_variant: {missing[0]!r} is not shipped (variants: {', '.join(kinds)})"
        )
    return default


# --- auto ----------------------------------------------------------------------------------------


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
class Selection:
    chosen: Variant
    dropped: list[Variant]  # made and checked, not shipped
    record: dict[str, Any]  # bundle.json's "selection"


def select(
    variants: Sequence[Variant],
    report: ConformanceReport | None,
    max_error: str | None,
    objective: Objective = smallest_download,
) -> Selection:
    """`--quantize auto`, once the candidates are measured and checked in the browser."""
    budget = parse_budget(max_error) if max_error else DEFAULT_BUDGET
    passed = browser_passed(report, [v.entry["name"] for v in variants])
    candidates = [Candidate(v.entry["name"], v.entry["bytes"], v.metrics, passed[v.entry["name"]])
                  for v in variants if v.metrics is not None]
    chosen = choose(candidates, budget, objective)
    if chosen is None:
        raise QuantizeError(
            f"auto: no variant is within the budget {budget} and passed the browser check"
            " (fp32 included); loosen --max-error or check the model with bundle test"
        )
    record = {
        "mode": "auto",
        "budget": str(budget),
        "chosen": chosen,
        "candidates": [{
            "name": c.name,
            "bytes": c.bytes,
            "within_budget": budget.accepts(c.metrics),
            "budget": budget.explain(c.metrics),
            "browser_verified": c.browser_ok,
            "chosen": c.name == chosen,
        } for c in candidates],
    }
    return Selection(
        chosen=next(v for v in variants if v.entry["name"] == chosen),
        dropped=[v for v in variants if v.entry["name"] != chosen],
        record=record,
    )
