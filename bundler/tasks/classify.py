"""Image classification's postprocessing (the spec; web/tasks/classify.mjs is its twin): the
scores of the first batch item, softmax (max-subtracted, float64) unless `softmax` is false, the
top k by score (ties: the lower class index first), each with its label (else its index). A
text classifier's task may say `activation = sigmoid` (multi-label): each score on its own.
(top_classes is given one row at a time by bundler.text.reference.)"""

from __future__ import annotations

from typing import Any

import numpy as np

from bundler.bundle.manifest import Task


def label_of(task: Task, index: int) -> str:
    return task.labels[index] if task.labels and index < len(task.labels) else str(index)


def top_classes(scores: np.ndarray, task: Task, top_k: int | None = None) -> list[dict[str, Any]]:
    values = np.asarray(scores, np.float64).reshape(-1) if np.ndim(scores) <= 1 else \
        np.asarray(scores, np.float64).reshape(np.shape(scores)[0], -1)[0]
    if task.activation == "sigmoid":
        values = 1 / (1 + np.exp(-values))
    elif task.softmax is not False:
        exp = np.exp(values - values.max())
        values = exp / exp.sum()
    order = sorted(range(values.size), key=lambda i: (-values[i], i))
    count = top_k or task.top_k or 5
    return [{"label": label_of(task, i), "index": i, "score": float(values[i])}
            for i in order[:count]]
