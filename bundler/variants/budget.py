"""The error budget a variant must meet (`--max-error cosine>=0.999,top1>=0.99`), and how a
measured variant is judged against it.

A quantized variant is judged by bounds, not point estimates (bundler.variants.confidence): top1
by the lower end of its 95 % Wilson interval, cosine by its 5th percentile over samples, mean_rel
by its 95th; and only on inputs that can vouch for it: generated inputs never show top1, and the
inputs a variant was calibrated on show nothing. fp32 is exact by construction (the optimised
graph, float rounding apart), so it is judged by its point estimates.

A text-generation bundle's variants are also measured on generation (bundler.text.quality):
`tokens` (greedy-token agreement with fp32, >=) and `perplexity` (the variant's over fp32's on
the check text, <=), counted on fixed check text and judged as measured. Its default budget is
in TASK_BUDGETS; these keys on a bundle of another task fail the budget. A speech-recognition
bundle's combinations of variants are measured on their transcripts (bundler.text.transcripts):
`tokens` and `wer` (word error rate against fp32's transcript, <=).

Pure Python: parsing a budget (options, TOML validation) imports neither numpy nor onnxruntime.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bundler.errors import ConfigError
from bundler.variants.confidence import rows_needed, wilson_lower

if TYPE_CHECKING:
    from bundler.variants.metrics import Metrics

# key -> (operator, Metrics field)
_TERMS = {
    "cosine": (">=", "cosine"),
    "top1": (">=", "top1_agreement"),
    "max_abs": ("<=", "max_abs"),
    "mean_rel": ("<=", "mean_rel"),
    "tokens": (">=", "tokens"),
    "perplexity": ("<=", "perplexity"),
    "wer": ("<=", "wer"),
}
# A task bundle's decoded answers agreeing with fp32's (bundler.variants.decoded): the share of
# labels, of boxes matched by IoU, of speech/non-speech frames; each judged like top1.
DECODED_TERMS = {
    "labels": (">=", "label_agreement"),
    "boxes": (">=", "box_agreement"),
    "frames": (">=", "frame_agreement"),
}
_TERMS.update(DECODED_TERMS)
WILSON_KEYS = ("top1", *DECODED_TERMS)  # shares of rows: judged by the Wilson lower bound
_COUNTED = {"top1": "rows", "labels": "labels", "boxes": "boxes", "frames": "frames"}
GENERATION_KEYS = ("tokens", "perplexity", "wer")
_LIMITS = {"cosine": (-1.0, 1.0), "top1": (0.0, 1.0), "tokens": (0.0, 1.0),
           **{key: (0.0, 1.0) for key in DECODED_TERMS}}
_ACCEPTED = ", ".join(f"{key}{op}" for key, (op, _) in _TERMS.items())
_TERM = re.compile(r"^\s*([A-Za-z_0-9]+)\s*(>=|<=|=>|=<|>|<|==|=)\s*(\S+)\s*$")
_EXAMPLE = "e.g. 'cosine>=0.999,top1>=0.99'"
IN_SAMPLE = ("calibration", "sample")  # not held out: measured on what a variant was made from
_BOUND_NAMES = {"top1": "95% lower bound", "cosine": "5th percentile",
                "mean_rel": "95th percentile",
                **{key: "95% lower bound" for key in DECODED_TERMS}}


def _number(value: float) -> str:
    """The shortest text that parses back to `value` (a budget must survive its own string)."""
    text = repr(value)
    return text.removesuffix(".0")


@dataclass(frozen=True)
class Budget:
    """Bounds a variant's Metrics must meet; a top1 bound holds vacuously when top1 is n/a (a
    labels, boxes or frames bound too, on a bundle without such answers)."""

    terms: tuple[tuple[str, float], ...]

    def failures(self, metrics: Metrics, exact: bool = False) -> list[str]:
        """Why `metrics` miss the budget: by their bounds, or by the point estimates when
        `exact` (fp32) or when the metrics carry no samples (made by hand)."""
        failed = []
        if metrics.nonfinite:
            failed.append(f"{metrics.nonfinite} NaN/Inf values where the reference is finite")
        if not exact and metrics.measured_on in IN_SAMPLE:
            failed.append(f"measured on its own {metrics.measured_on} inputs, not held-out ones")
        for key, bound in self.terms:
            op, attribute = _TERMS[key]
            if exact:
                n, value, judged = 0, getattr(metrics, attribute), getattr(metrics, attribute)
            else:
                n, value, judged = metrics.judged(key)
            if judged is None:
                if key in GENERATION_KEYS:
                    failed.append(f"{key} is measured on text-generation and"
                                  " speech-recognition bundles only")
                continue
            if key in WILSON_KEYS and not exact and metrics.measured_on == "generated":
                failed.append(f"{key} cannot be shown on generated inputs")
                continue
            if key in DECODED_TERMS and not exact and not n:
                failed.append(f"{key}: none in the {len(metrics.per_sample)} samples to compare")
                continue
            if not (judged >= bound if op == ">=" else judged <= bound):
                failed.append(f"{_described(key, n, value, judged)} is not {op} {_number(bound)}")
        return failed

    def accepts(self, metrics: Metrics, exact: bool = False) -> bool:
        return not self.failures(metrics, exact)

    def explain(self, metrics: Metrics, exact: bool = False) -> str:
        failed = self.failures(metrics, exact)
        if failed:
            return "; ".join(failed)
        return f"within budget ({self})" + (" (fp32: exact by construction)" if exact else "")

    def shortfall(self, metrics: Metrics) -> str | None:
        """Why the inputs `metrics` were measured on cannot show this budget for any quantized
        variant, however close to fp32 (None when they can): one clause, saying what it takes."""
        if metrics.measured_on in IN_SAMPLE:
            return (f"the {len(metrics.per_sample)} {metrics.measured_on} samples are too few to"
                    " hold out a validation part; pass --validation with real inputs")
        for key, bound in self.terms:
            rows, estimate, _ = metrics.judged(key)
            if key in WILSON_KEYS and (estimate is not None or metrics.agreement(key)):
                reason = _too_few(key, bound, rows, metrics)
                if reason is not None:
                    return reason
        return None

    def __str__(self) -> str:
        return ",".join(f"{key}{_TERMS[key][0]}{_number(bound)}" for key, bound in self.terms)


def _too_few(key: str, bound: float, rows: int, metrics: Metrics) -> str | None:
    """Why `rows` (of `metrics`' samples) cannot show `key`>=`bound` even if all agree."""
    needed = rows_needed(bound)
    samples = len(metrics.per_sample) or 1
    if metrics.measured_on == "generated":
        unit = "boxes" if key == "boxes" else "samples"  # a picture may hold several boxes
        return (f"generated inputs cannot show {key}; pass --validation with real inputs"
                + (f" (at least {needed} {unit})" if needed else ""))
    if needed is not None and rows >= needed:
        return None
    if needed is None:
        return f"no number of samples can show {key}>={_number(bound)} (use {key}<1)"
    if not rows:
        return (f"the {samples} held-out samples ({metrics.measured_on}) have no {key} to"
                f" compare; pass --validation with inputs that have some")
    best = wilson_lower(rows, rows)
    return (f"{samples} held-out samples ({metrics.measured_on}) cannot show"
            f" {key}>={_number(bound)}: even if all agree, its 95% lower bound is"
            f" {best:.3f}; it takes at least"
            f" {math.ceil(needed * samples / rows)} samples (pass --validation)")


DEFAULT_BUDGET = Budget((("cosine", 0.999), ("top1", 0.99)))
# The default budget of a task bundle judges what its users see: labels, boxes, speech frames;
# a generation bundle's, the first 90 % of fp32's greedy tokens kept (over the check prompts)
# and perplexity at most 5 % above fp32's.
TASK_BUDGETS = {
    "image-classification": "cosine>=0.999,labels>=0.99",
    "text-classification": "cosine>=0.999,labels>=0.99",
    "token-classification": "cosine>=0.999,labels>=0.99",
    "object-detection": "cosine>=0.999,boxes>=0.99",
    "audio-stream": "cosine>=0.999,frames>=0.99",
    "text-generation": "tokens>=0.9,perplexity<=1.05",
    # fp32's transcript kept: its first 90 % of tokens, and at most 5 % of its words changed
    "automatic-speech-recognition": "tokens>=0.9,wer<=0.05",
}


def default_budget(task_kind: str | None = None) -> Budget:
    """The budget auto judges by without --max-error: the task kind's, else DEFAULT_BUDGET."""
    text = TASK_BUDGETS.get(task_kind or "")
    return parse_budget(text) if text else DEFAULT_BUDGET


def budget_for(max_error: str | None, generation: bool) -> Budget:
    """The budget given, else the default of the bundle's kind (`generation`: measured on
    generation, bundler.text.quality)."""
    if max_error:
        return parse_budget(max_error)
    return default_budget("text-generation" if generation else None)


def parse_budget(text: str) -> Budget:
    """Parse e.g. "cosine>=0.999,top1>=0.99,max_abs<=0.01,mean_rel<=0.01" or
    "tokens>=0.9,perplexity<=1.05"."""
    if not text.strip():
        raise ConfigError(f"the error budget is empty; give terms like {_EXAMPLE} ({_ACCEPTED})")
    terms: dict[str, float] = {}
    for term in text.split(","):
        key, bound = _parse_term(term.strip())
        if key in terms:
            raise ConfigError(f"error budget names {key} twice; give each key once")
        terms[key] = bound
    return Budget(tuple(terms.items()))


def _described(key: str, n: int, value: float | None, judged: float) -> str:
    """`key` and the value judged, with its estimate and n when it is a bound."""
    if not n or key not in _BOUND_NAMES:
        return f"{key} {judged:.6g}"
    of = _COUNTED.get(key, "samples")
    return f"{key} {judged:.4g} ({_BOUND_NAMES[key]} of {n} {of}; estimate {value:.4g})"


def _parse_term(term: str) -> tuple[str, float]:
    match = _TERM.match(term)
    if not match:
        raise ConfigError(
            f"error budget term {term!r} is not KEY>=VALUE or KEY<=VALUE;"
            f" accepted: {_ACCEPTED} ({_EXAMPLE})"
        )
    key, op, raw = match.groups()
    key = key.lower()
    if key not in _TERMS:
        raise ConfigError(
            f"error budget term {term!r} has unknown key {key!r}; accepted: {_ACCEPTED}"
        )
    expected = _TERMS[key][0]
    if op != expected:
        raise ConfigError(
            f"error budget term {term!r}: {key} takes {expected}"
            f" ({'a lower' if expected == '>=' else 'an upper'} bound)"
        )
    try:
        bound = float(raw)
    except ValueError:
        raise ConfigError(f"error budget term {term!r}: {raw!r} is not a number") from None
    low, high = _LIMITS.get(key, (0.0, float("inf")))
    if not low <= bound <= high:
        raise ConfigError(f"error budget term {term!r}: {key} must be between {low:g} and {high:g}")
    return key, bound
