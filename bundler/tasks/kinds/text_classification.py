"""text-classification: texts in, the top labels by score out (softmax over the logits, or
sigmoid for a multi-label model): model.classify() (bundler.text.reference,
web/tasks/text.mjs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bundler.tasks.kinds.image_classification import compare_classes
from bundler.tasks.kinds.spec import ModelIO, TaskKind
from bundler.tasks.kinds.text import TEXT_SETTINGS, looks_like_text, report_texts, resolve_text

if TYPE_CHECKING:
    from bundler.bundle.records import Task
    from bundler.tasks.check import TaskComparison
    from bundler.tasks.spec import TaskSpec


def _resolve(spec: TaskSpec, model: ModelIO) -> Task:
    return resolve_text(spec, model, 2, top_k=spec.top_k, activation="softmax")


def _class_count(task: Task, shape: Sequence[Any]) -> int | None:
    last = shape[-1] if shape else None
    return last if isinstance(last, int) else None


def _compare(native: list[Any], browser: list[Any], result: TaskComparison,
             tolerance: float) -> None:
    """Per text, the same labels in order with scores within tolerance."""
    if len(native) != len(browser):
        result.native_count, result.browser_count = len(native), len(browser)
        result.error = "a different number of texts"
        return
    worst = 0.0
    for want, got in zip(native, browser, strict=True):
        compare_classes(want, got, result, tolerance)
        worst = max(worst, result.worst_score_difference)
        if result.error:
            break
    result.worst_score_difference = worst
    result.native_count, result.browser_count = len(native), len(browser)


KIND = TaskKind(
    name="text-classification",
    settings=(*TEXT_SETTINGS, "labels", "top_k"),
    media="text",
    method="classify",
    answers="classes",
    heading="Label a text",
    web_module="text.mjs",
    looks_like=looks_like_text(2),
    resolve=_resolve,
    class_count=_class_count,
    compare=_compare,
    report=report_texts,
    compared=("texts", "worst score difference"),
)
