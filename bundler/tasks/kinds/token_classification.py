"""token-classification: texts in, the entities of each out (a label per token, grouped by their
B-/I- tags, placed in the text by character offsets): model.tokens() (bundler.text.entities,
the spec; bundler.text.reference and web/tasks/entities.mjs)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler.tasks.kinds.spec import ModelIO, TaskKind, same_count
from bundler.tasks.kinds.text import TEXT_SETTINGS, looks_like_text, resolve_text

if TYPE_CHECKING:
    from bundler.bundle.records import Task
    from bundler.console import Reporter
    from bundler.tasks.check import TaskComparison
    from bundler.tasks.spec import TaskSpec

NAME = "token-classification"


def _resolve(spec: TaskSpec, model: ModelIO) -> Task:
    return resolve_text(spec, model, 3, activation="softmax")


def _class_count(task: Task, shape: Sequence[Any]) -> int | None:
    last = shape[-1] if shape else None
    return last if isinstance(last, int) else None


def _compare(native: list[Any], browser: list[Any], result: TaskComparison,
             tolerance: float) -> None:
    """Per text, the same entities (type, start, end, word) in order, scores within
    tolerance."""
    if not same_count(native, browser, result, "texts"):
        return
    worst = 0.0
    for number, (want, got) in enumerate(zip(native, browser, strict=True)):
        keys = [(e["entity"], e["start"], e["end"], e["word"]) for e in want]
        if keys != [(e["entity"], e["start"], e["end"], e["word"]) for e in got]:
            result.error = f"text {number}: entities {got} where native has {want}"
            return
        worst = max([worst, *(abs(a["score"] - b["score"]) for a, b in zip(want, got,
                                                                             strict=True))])
    result.worst_score_difference = worst
    if worst > tolerance:
        result.error = f"an entity's score differs by {worst:.3g} (> {tolerance})"


def _report(reporter: Reporter, source: Path, task: Task, result: dict[str, Any]) -> None:
    """`bundle run --text`: a row per entity."""
    rows = [[text, entity["entity"], f"{entity['start']}-{entity['end']}", entity["word"],
             f"{entity['score']:.4f}"]
            for text, found in zip(result["texts"], result["entities"], strict=True)
            for entity in found]
    reporter.table(f"{source}: entities", ["text", "entity", "span", "word", "score"], rows)


KIND = TaskKind(
    name=NAME,
    settings=(*TEXT_SETTINGS, "labels"),
    media="text",
    method="tokens",
    answers="entities",
    heading="Find the entities in a text",
    web_module="text.mjs",
    looks_like=looks_like_text(3, logits=True),
    resolve=_resolve,
    class_count=_class_count,
    compare=_compare,
    report=_report,
    compared=("texts", "worst score difference"),
)
