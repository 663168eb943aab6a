"""feature-extraction: texts in, one vector per text out (the token vectors pooled, then scaled
to length 1): model.embed() (bundler.text.reference, web/tasks/text.mjs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bundler.errors import ConfigError
from bundler.tasks.kinds.spec import FLOATS, ModelIO, TaskKind
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

# optimum's sentence-transformers export (--library sentence_transformers) has the token vectors
# (token_embeddings) and this: one vector per text, made by the model's own modules (Pooling,
# Dense, Normalize) in the graph, as SentenceTransformer.encode() makes it.
SENTENCE_EMBEDDING = "sentence_embedding"


def _resolve(spec: TaskSpec, model: ModelIO) -> Task:
    ranks = {s.name: len(s.shape or ()) for s in model.outputs if s.type in FLOATS}
    pooled_in_model = spec.pooling == "model" if "pooling" in spec.given else \
        ranks.get(spec.output or SENTENCE_EMBEDDING) == 2
    rank = 2 if pooled_in_model else 3
    if spec.output is not None and ranks.get(spec.output, rank) != rank:
        raise ConfigError(
            f"task feature-extraction: output {spec.output!r} is one vector per text (pooled in"
            f" the model), not per token: give pooling=model, not pooling={spec.pooling}"
            if rank == 3 else f"task feature-extraction: output {spec.output!r} has a vector per"
            " token: pooling=model takes an output of one vector per text; give pooling=mean,"
            " cls, max or last")
    if pooled_in_model:
        # the model's rows are the answer (a sentence-transformers export normalizes in the
        # graph where the model has a Normalize module): scaled only when normalize is given
        return resolve_text(spec, model, 2, pooling="model",
                            normalize=spec.normalize and "normalize" in spec.given)
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
