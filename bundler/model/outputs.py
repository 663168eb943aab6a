"""How far a rewritten graph's output may move from the graph before it: the one bound the
optimisation steps (bundler.model.optimize), the transformer fusions and the shape-plumbing step
judge their results by."""

from __future__ import annotations

import numpy as np

TOLERANCE = 1e-3  # of the largest output value: rewritten graphs sum floats in another order


def beyond_tolerance(want: np.ndarray, got: np.ndarray) -> float | None:
    """The worst |got - want| when it exceeds TOLERANCE of want's largest value (at least 1),
    else None."""
    worst = float(np.max(np.abs(np.asarray(got, np.float64) - want), initial=0.0))
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    return worst if worst > TOLERANCE * scale else None
