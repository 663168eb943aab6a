"""The error budget a variant must meet (`--max-error cosine>=0.999,top1>=0.99`).

Pure Python: parsing a budget (options, TOML validation) imports neither numpy nor onnxruntime.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bundler.errors import ConfigError

if TYPE_CHECKING:
    from bundler.variants.metrics import Metrics

# key -> (operator, Metrics field)
_TERMS = {
    "cosine": (">=", "cosine"),
    "top1": (">=", "top1_agreement"),
    "max_abs": ("<=", "max_abs"),
    "mean_rel": ("<=", "mean_rel"),
}
_LIMITS = {"cosine": (-1.0, 1.0), "top1": (0.0, 1.0)}
_ACCEPTED = ", ".join(f"{key}{op}" for key, (op, _) in _TERMS.items())
_TERM = re.compile(r"^\s*([A-Za-z_0-9]+)\s*(>=|<=|=>|=<|>|<|==|=)\s*(\S+)\s*$")
_EXAMPLE = "e.g. 'cosine>=0.999,top1>=0.99'"


def _number(value: float) -> str:
    """The shortest text that parses back to `value` (a budget must survive its own string)."""
    text = repr(value)
    return text.removesuffix(".0")


@dataclass(frozen=True)
class Budget:
    """Bounds a variant's Metrics must meet; a top1 bound holds vacuously when top1 is n/a."""

    terms: tuple[tuple[str, float], ...]

    def failures(self, metrics: Metrics) -> list[str]:
        failed = []
        if metrics.nonfinite:
            failed.append(f"{metrics.nonfinite} NaN/Inf values where the reference is finite")
        for key, bound in self.terms:
            op, attribute = _TERMS[key]
            value = getattr(metrics, attribute)
            if value is None:
                continue
            if not (value >= bound if op == ">=" else value <= bound):
                failed.append(f"{key} {value:.6g} is not {op} {_number(bound)}")
        return failed

    def accepts(self, metrics: Metrics) -> bool:
        return not self.failures(metrics)

    def explain(self, metrics: Metrics) -> str:
        failed = self.failures(metrics)
        if failed:
            return "; ".join(failed)
        return f"within budget ({self})"

    def __str__(self) -> str:
        return ",".join(f"{key}{_TERMS[key][0]}{_number(bound)}" for key, bound in self.terms)


DEFAULT_BUDGET = Budget((("cosine", 0.999), ("top1", 0.99)))


def parse_budget(text: str) -> Budget:
    """Parse e.g. "cosine>=0.999,top1>=0.99,max_abs<=0.01,mean_rel<=0.01"."""
    if not text.strip():
        raise ConfigError(f"the error budget is empty; give terms like {_EXAMPLE} ({_ACCEPTED})")
    terms: dict[str, float] = {}
    for term in text.split(","):
        key, bound = _parse_term(term.strip())
        if key in terms:
            raise ConfigError(f"error budget names {key} twice; give each key once")
        terms[key] = bound
    return Budget(tuple(terms.items()))


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
