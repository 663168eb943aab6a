"""The statistics `auto` judges its error budget by: a confidence bound on top-1 agreement and a
quantile of the per-sample metrics, so that a few lucky samples cannot vouch for a variant.

- top-1 agreement: the lower end of the 95 % Wilson score interval of `agreeing` out of `n`
  rows (199 of 200 gives 0.972, not 0.995);
- per-sample metrics: cosine by its COSINE_QUANTILE-th quantile over samples (the 5th percentile,
  taken at the lower order statistic), normalised error by its 95th percentile (the higher one).

Pure Python (no numpy): budget.py and the options code import it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054  # the two-sided 95 % normal quantile (the Wilson interval's z)
COSINE_QUANTILE = 0.05  # cosine is judged by its 5th percentile over samples …
ERROR_QUANTILE = 0.95  # … and mean_rel (normalised error) by its 95th


def wilson_lower(agreeing: int, n: int, z: float = Z95) -> float:
    """The lower end of the Wilson score interval of `agreeing` successes in `n` trials."""
    if n <= 0:
        return 0.0
    p = agreeing / n
    z2 = z * z
    centre = p + z2 / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z2 / n))


def rows_needed(target: float, z: float = Z95) -> int | None:
    """The fewest rows whose Wilson lower bound reaches `target` when every row agrees (n / (n +
    z^2) >= target); None when no number does (a target of 1)."""
    if target <= 0:
        return 1
    if target >= 1:
        return None
    n = math.ceil(target * z * z / (1 - target))
    while wilson_lower(n, n, z) < target:  # the closed form, rounded, may fall a hair short
        n += 1
    return n


def lower_quantile(values: Sequence[float], q: float) -> float:
    """The `q` quantile of `values` at the order statistic below it (never interpolated up)."""
    ordered = sorted(values)
    return ordered[math.floor(q * (len(ordered) - 1))]


def upper_quantile(values: Sequence[float], q: float) -> float:
    """The `q` quantile of `values` at the order statistic above it (never interpolated down)."""
    ordered = sorted(values)
    return ordered[math.ceil(q * (len(ordered) - 1))]
