"""image-classification: a picture in, the top classes by score out (bundler.tasks.classify,
web/tasks/classify.mjs)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler.tasks.kinds.image import image_kind, resolve_image
from bundler.tasks.kinds.spec import FLOATS, ModelIO, image_layout

if TYPE_CHECKING:
    import numpy as np

    from bundler.bundle.modelio import TensorSpec
    from bundler.bundle.records import Task
    from bundler.console import Reporter
    from bundler.tasks.check import TaskComparison
    from bundler.tasks.image import Geometry
    from bundler.tasks.spec import TaskSpec


def _looks_like(inputs: list[TensorSpec], outputs: list[TensorSpec]) -> str | None:
    first, shape = inputs[0], outputs[0].shape or ()
    if first.type in FLOATS and image_layout(first) and len(shape) == 2:
        return f"image input {first.name}, scores {list(shape)}"
    return None


def _resolve(spec: TaskSpec, model: ModelIO) -> Task:
    # scores that come out of a Softmax already are probabilities: not again, unless asked
    softmax = spec.softmax if "softmax" in spec.given else model.output not in model.softmax_outputs
    return resolve_image(spec, model, "stretch", softmax=softmax, top_k=spec.top_k)


def _class_count(task: Task, shape: Sequence[Any]) -> int | None:
    last = shape[-1] if shape else None
    return last if isinstance(last, int) else None


def _postprocess(output: np.ndarray, task: Task, place: Geometry, width: int, height: int,
                 top_k: int | None, threshold: float | None) -> list[dict[str, Any]]:
    from bundler.tasks.classify import top_classes

    return top_classes(output, task, top_k)


def compare_classes(native: list[dict], browser: list[dict], result: TaskComparison,
             tolerance: float) -> None:
    """The same labels in the same order, scores within `tolerance` (text-classification's
    too)."""
    result.native_count, result.browser_count = len(native), len(browser)
    result.worst_score_difference = max((abs(a["score"] - b["score"])
                                         for a, b in zip(native, browser, strict=False)),
                                        default=0.0)
    if [c["label"] for c in native] != [c["label"] for c in browser]:
        result.error = (f"labels differ: native {[c['label'] for c in native]}, browser"
                        f" {[c['label'] for c in browser]}")
    elif result.worst_score_difference > tolerance:
        result.error = f"scores differ by more than {tolerance}"


def _report(reporter: Reporter, source: Path, task: Task, result: dict[str, Any]) -> None:
    reporter.table(f"{source}: top {len(result['classes'])}", ["label", "score"],
                   [[c["label"], f"{c['score']:.4f}"] for c in result["classes"]])


KIND = image_kind(
    name="image-classification",
    settings=("softmax", "top_k"),
    method="classify",
    answers="classes",
    heading="Classify an image",
    web_module="classify.mjs",
    looks_like=_looks_like,
    resolve=_resolve,
    class_count=_class_count,
    postprocess=_postprocess,
    compare=compare_classes,
    report=_report,
    compared=("labels", "worst score difference"),
)
