"""Latency figures from a list of run times (pure Python).

A browser's first runs are slow while the JIT tiers the wasm up (about 8 runs for onnxruntime-web's
bigger builds), so the figures are kept apart: the first run, the warm-up (mean of the first
WARMUP_RUNS runs) and the steady state (median and p90 of the runs after SETTLE_RUNS).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

WARMUP_RUNS = 10  # the warm-up figure: mean of this many first runs
SETTLE_RUNS = 15  # the steady state starts after this many runs


def total_runs(steady_runs: int) -> int:
    """How many runs to make for `steady_runs` steady-state ones."""
    return SETTLE_RUNS + steady_runs


def percentile(values: Sequence[float], fraction: float) -> float:
    """The `fraction` percentile (nearest rank: a time that was really measured)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclasses.dataclass(frozen=True)
class Latency:
    """Milliseconds per run: first, warm-up mean, steady-state median and p90."""

    first_run_ms: float
    warmup_mean_ms: float
    steady_median_ms: float
    steady_p90_ms: float
    steady_runs: int
    runs_ms: tuple[float, ...]

    def to_json(self) -> dict[str, object]:
        data = dataclasses.asdict(self)
        data["runs_ms"] = [round(value, 3) for value in self.runs_ms]
        for key in ("first_run_ms", "warmup_mean_ms", "steady_median_ms", "steady_p90_ms"):
            data[key] = round(data[key], 3)
        return data


def summarise(runs_ms: Sequence[float], settle: int = SETTLE_RUNS) -> Latency:
    """The figures of consecutive runs of one session (the first one first). With fewer runs than
    `settle` + 1, the steady state is the second half of them."""
    if not runs_ms:
        raise ValueError("no runs to summarise")
    settle = settle if len(runs_ms) > settle else len(runs_ms) // 2
    steady = list(runs_ms[settle:])
    return Latency(
        first_run_ms=runs_ms[0],
        warmup_mean_ms=statistics.fmean(runs_ms[:WARMUP_RUNS]),
        steady_median_ms=statistics.median(steady),
        steady_p90_ms=percentile(steady, 0.9),
        steady_runs=len(steady),
        runs_ms=tuple(runs_ms),
    )


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, rounded; None when either is missing or the denominator is 0."""
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 3)
