"""feature-extraction: texts in, one vector per text out (the token vectors pooled, then scaled
to length 1): model.embed() (bundler.text.reference, web/tasks/text.mjs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bundler.tasks.kinds.spec import ModelIO, TaskKind
from bundler.tasks.kinds.text import (
    TEXT_SETTINGS,
    compare_embeddings,
    looks_like_text,
    report_texts,
    resolve_text,
)

if TYPE_CHECKING:
    from bundler.bundle.records import Task
    from bundler.tasks.spec import TaskSpec


def _resolve(spec: TaskSpec, model: ModelIO) -> Task:
    # pooling none keeps every token's vector: nothing to scale to length 1 per text
    return resolve_text(spec, model, 3, pooling=spec.pooling,
                        normalize=spec.normalize and spec.pooling != "none")


KIND = TaskKind(
    name="feature-extraction",
    settings=(*TEXT_SETTINGS, "pooling", "normalize"),
    media="text",
    method="embed",
    answers="embeddings",
    heading="Search pasted paragraphs",
    web_module="text.mjs",
    looks_like=looks_like_text(3, logits=False),
    resolve=_resolve,
    compare=compare_embeddings,
    report=report_texts,
    compared=("texts", "worst 1 - cosine"),
)
